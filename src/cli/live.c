/* live.c — the live endpoint: Go's /debug/pprof protocol and a
 * Prometheus /metrics page for a process running under the agent,
 * served over HTTP by the CLI (`heaptrail run --http ADDR`, `heaptrail
 * serve PID --http ADDR`), never by the program.
 *
 * Why the CLI and not a thread of the agent: no network input is ever
 * parsed inside the host, the host gets no thread, socket or memory of
 * ours, and the CLI has the symbolizer and the pprof encoder already.
 * The agent's part is one request: a heap dump now. The CLI asks it by
 * ptrace, in one borrowed thread (ctl_agent_ask: no signal, no EINTR),
 * with FMT_SIGVAL_MAGIC | FMT_SIGVAL_DUMP; the agent writes
 * PREFIX.PID.live.heap into its private output directory (0600, a
 * temporary name renamed into place, as every dump), the CLI reads and
 * removes it. Leak checks are asked for the same way.
 *
 * The server: one thread, one poll loop, at most LIVE_MAX_CONN
 * connections (the one nearest its deadline is dropped for a new one),
 * requests of at most LIVE_MAX_HEAD bytes of headers and LIVE_MAX_BODY
 * of body, LIVE_READ_MS to send one and LIVE_WRITE_MS to take the
 * answer, one request per connection (Connection: close). Requests are
 * answered one at a time, but a ?seconds=N delta waits between its two
 * dumps without holding up the others. A second thread pushes to
 * Pyroscope (--push, below). dump_lock keeps the two from asking the
 * agent, or using the symbolizer's cache, at the same time. Nothing here
 * prints while the program runs but where the endpoint is and, once per
 * cause, why a push failed. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "analyze/aggregate.h"
#include "analyze/growth.h"
#include "analyze/load.h"
#include "analyze/series.h"
#include "cli/cli.h"
#include "format/options.h"
#include "format/vocab.h"
#include "render/render.h"

#define LIVE_MAX_CONN 64
#define LIVE_MAX_HEAD (16 * 1024)
#define LIVE_MAX_BODY (64 * 1024)
#define LIVE_READ_MS 5000
#define LIVE_WRITE_MS 10000
#define LIVE_DUMP_MS 10000      /* how long the agent has to write a dump */
#define LIVE_MAX_SECONDS 300    /* ?seconds=N */
#define LIVE_TOP_SITES 20       /* /metrics: sites by live bytes */
#define LIVE_GROWTH_DUMPS 30    /* growth: over the last 30 dumps */
#define LIVE_PAGE_EVERY_MS 2000 /* the page at /: how often it fetches new data */

/* A ?seconds=N profile between its two dumps: the connection waits
 * without holding up the others. */
struct delta {
	struct prof_profile base;
	long long due;          /* ms, monotonic: take the second dump then */
	int dflt;
	bool debug;
};

struct conn {
	int fd;
	struct delta *delta;    /* waiting for its second dump, or NULL */
	char *buf;              /* the request, then the answer */
	size_t len, off;
	bool writing;
	bool head;              /* a HEAD request (delta: answered later) */
	long long deadline;     /* ms, monotonic */
};

struct cli_live {
	int fd;
	char unix_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char shown[160];
	struct ctl_agent ag;
	pthread_t thread, push_thread;
	bool started, push_started;
	atomic_bool stop;
	pthread_mutex_t dump_lock;  /* one dump (and symbolizer user) at a time */
	/* push */
	char push_host[256], push_port[16], push_path[512];
	char push_name[128];
	long push_every_ms;
	unsigned long long pushes, push_errors;
	struct prof_sym_cache *cache;
	struct conn conns[LIVE_MAX_CONN];
	/* counters for /metrics */
	unsigned long long dumps, dump_errors;
	double last_dump_s;     /* signal to whole file, the last dump */
	char live_path[4096 + 64]; /* where the agent said it wrote its live dump */
};

static long long now_ns(const struct timespec *ts)
{
	return (long long)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------- options and binding ---------- */

int cli_live_opt(int argc, char **argv, int *i, struct cli_live_opts *o)
{
	const char *v;
	if ((v = cli_opt_value(argc, argv, i, "--http"))) {
		if (!*v) {
			cli_error("--http needs an address (127.0.0.1:6060, or a unix socket path)");
			return -1;
		}
		o->addr = v;
		return 1;
	}
	if (!strcmp(argv[*i], "--http-allow-remote")) {
		o->public_ok = true;
		return 1;
	}
	if ((v = cli_opt_value(argc, argv, i, "--push"))) {
		if (strncmp(v, "http://", 7)) {
			cli_error("--push: want an http:// URL (Pyroscope's server), not '%s'", v);
			return -1;
		}
		o->push = v;
		return 1;
	}
	if ((v = cli_opt_value(argc, argv, i, "--push-name"))) {
		if (!*v || strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				  "0123456789._-") != strlen(v)) {
			cli_error("--push-name: want letters, digits, '.', '_' or '-', not '%s'", v);
			return -1;
		}
		o->push_name = v;
		return 1;
	}
	if ((v = cli_opt_value(argc, argv, i, "--push-every"))) {
		uint64_t ms;
		if (!fmt_opt_duration(v, strlen(v), &ms) || ms < 100 || ms > 86400000) {
			cli_error("--push-every: want a duration from 100ms to 24h, not '%s'", v);
			return -1;
		}
		o->push_every_ms = (long)ms;
		return 1;
	}
	return 0;
}

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(a))
			return true;
		if (IN6_IS_ADDR_V4MAPPED(a))
			return a->s6_addr[12] == 127;
	}
	return false;
}

static int push_parse(struct cli_live *l, const struct cli_live_opts *o);

/* A port as given: decimal digits, 0 to 65535 (getaddrinfo would take
 * 99999 and use 99999 - 65536). */
static bool port_ok(const char *s)
{
	unsigned long v = 0;
	if (!*s || strlen(s) > 5)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		v = v * 10 + (unsigned long)(*s - '0');
	}
	return v <= 65535;
}

struct cli_live *cli_live_bind(const struct cli_live_opts *o)
{
	struct cli_live *l = calloc(1, sizeof *l);
	if (!l) {
		cli_error("out of memory");
		return NULL;
	}
	l->fd = -1;
	pthread_mutex_init(&l->dump_lock, NULL);
	for (int i = 0; i < LIVE_MAX_CONN; i++)
		l->conns[i].fd = -1;
	if (o->push && push_parse(l, o))
		goto fail;
	if (!o->addr)
		return l;   /* push only */
	const char *a = o->addr;
	if (!strncmp(a, "unix:", 5) || a[0] == '/' || a[0] == '.') {
		const char *path = strncmp(a, "unix:", 5) ? a : a + 5;
		struct sockaddr_un un = { .sun_family = AF_UNIX };
		if (!*path) {
			/* an empty sun_path would bind an abstract socket, which
			 * has no file mode: anyone on the machine could connect */
			cli_error("--http: 'unix:' needs a socket path");
			goto fail;
		}
		if (strlen(path) >= sizeof un.sun_path) {
			cli_error("--http: socket path '%s' is too long", path);
			goto fail;
		}
		strcpy(un.sun_path, path);
		l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		/* 0600 from the start: only this user may talk to it */
		mode_t old = umask(0177);
		int r = l->fd < 0 ? -1 : bind(l->fd, (struct sockaddr *)&un, sizeof un);
		umask(old);
		if (r || listen(l->fd, 128)) {
			cli_error("--http: cannot listen on '%s': %s", path, strerror(errno));
			goto fail;
		}
		snprintf(l->unix_path, sizeof l->unix_path, "%s", path);
		snprintf(l->shown, sizeof l->shown, "unix:%s", path);
		return l;
	}
	const char *colon = strrchr(a, ':');
	if (!colon || !colon[1]) {
		cli_error("--http: want HOST:PORT or a socket path, not '%s'", a);
		goto fail;
	}
	if (!port_ok(colon + 1)) {
		cli_error("--http: the port in '%s' is not a number from 0 to 65535", a);
		goto fail;
	}
	char host[256];
	size_t hl = (size_t)(colon - a);
	if (hl >= sizeof host) {
		cli_error("--http: host too long in '%s'", a);
		goto fail;
	}
	memcpy(host, a, hl);
	host[hl] = 0;
	if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = 0;
	}
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *res = NULL;
	int gr = getaddrinfo(*host ? host : NULL, colon + 1, &hints, &res);
	if (gr) {
		cli_error("--http: cannot resolve '%s': %s", a, gai_strerror(gr));
		goto fail;
	}
	if (!is_loopback(res->ai_addr)) {
		if (!o->public_ok) {
			cli_error("--http: '%s' is not a loopback address: anyone who can reach it "
				  "could read the program's heap profile; add --http-allow-remote "
				  "to bind it anyway", a);
			freeaddrinfo(res);
			goto fail;
		}
		fprintf(stderr, "heaptrail: warning: the live endpoint on '%s' is reachable "
			"beyond this machine, without authentication\n", a);
	}
	l->fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	if (l->fd >= 0)
		setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (l->fd < 0 || bind(l->fd, res->ai_addr, res->ai_addrlen) || listen(l->fd, 128)) {
		cli_error("--http: cannot listen on '%s': %s", a, strerror(errno));
		freeaddrinfo(res);
		goto fail;
	}
	freeaddrinfo(res);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char ip[INET6_ADDRSTRLEN] = "?";
	int port = 0;
	if (!getsockname(l->fd, (struct sockaddr *)&ss, &sl)) {
		if (ss.ss_family == AF_INET) {
			inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof ip);
			port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		} else {
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, ip, sizeof ip);
			port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
		}
	}
	snprintf(l->shown, sizeof l->shown, ss.ss_family == AF_INET6 ? "http://[%s]:%d" :
		 "http://%s:%d", ip, port);
	return l;
fail:
	if (l->fd >= 0)
		close(l->fd);
	free(l);
	return NULL;
}

/* ---------- asking the agent ---------- */

/* Why the agent cannot be asked now, or NULL. */
static const char *agent_not_ready(const struct ctl_agent *a, char *why, size_t cap)
{
	size_t len;
	char *maps = ctl_read_proc(a->pid, "maps", &len);
	if (!maps) {
		snprintf(why, cap, "process %ld is gone", a->pid);
		return why;
	}
	bool has = strstr(maps, "/libheaptrail.so") != NULL;
	free(maps);
	if (!has) {
		snprintf(why, cap, "process %ld has no agent loaded (yet)", a->pid);
		return why;
	}
	return NULL;
}

/* Has the agent write PREFIX.PID.live.heap and returns its path (into
 * path), 0; or -1 with why. The agent writes it during the call and says
 * where (prefix= or output=, as resolved at its start; an older agent
 * does not say: then in its directory); one already being written (a
 * timer's) makes it answer -EBUSY, and the request is made again
 * (ctl_agent_ask). */
static int live_dump(struct cli_live *l, char *path, size_t cap, char *why, size_t whycap)
{
	const struct ctl_agent *a = &l->ag;
	if (agent_not_ready(a, why, whycap))
		return -1;
	snprintf(path, cap, "%s/" FMT_FILE_PREFIX ".%ld." FMT_HEAP_LIVE FMT_HEAP_SUFFIX, a->dir,
		 a->pid);
	if (unlink(path) && errno != ENOENT) {
		snprintf(why, whycap, "cannot remove '%s': %s", path, strerror(errno));
		return -1;
	}
	struct timespec t0s, ts;
	clock_gettime(CLOCK_MONOTONIC, &t0s);
	char wrote[FMT_REQUEST_PATH_MAX];
	if (ctl_agent_ask(a, FMT_SIGVAL_MAGIC | FMT_SIGVAL_DUMP, LIVE_DUMP_MS, why, whycap,
			  wrote)) {
		if (!why[0])
			snprintf(why, whycap, "cannot ask process %ld for a heap dump (heaptrail's "
				 "stderr says why)", a->pid);
		return -1;
	}
	if (wrote[0]) {
		ctl_agent_path(a, wrote, path, cap);
		snprintf(l->live_path, sizeof l->live_path, "%s", path);
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	l->last_dump_s = (double)(now_ns(&ts) - now_ns(&t0s)) / 1e9;
	struct stat st;
	if (lstat(path, &st) || !S_ISREG(st.st_mode)) {
		snprintf(why, whycap, "process %ld wrote no heap dump at '%s'", a->pid, path);
		return -1;
	}
	l->dumps++;
	return 0;
}

/* A dump now, loaded and symbolized; the file is removed. */
static int live_profile(struct cli_live *l, struct prof_profile *p, char *why, size_t whycap)
{
	char path[PATH_MAX + 64];
	pthread_mutex_lock(&l->dump_lock);
	if (live_dump(l, path, sizeof path, why, whycap)) {
		l->dump_errors++;
		pthread_mutex_unlock(&l->dump_lock);
		return -1;
	}
	struct prof_load_opts o = { .sym_cache = l->cache,
				    .binary_path = getenv("PPROF_BINARY_PATH") };
	const char *err;
	int rc = prof_profile_load(p, path, &o, &err);
	if (rc)
		snprintf(why, whycap, "cannot read '%s': %s", path, err);
	unlink(path);
	pthread_mutex_unlock(&l->dump_lock);
	return rc ? -1 : 0;
}

/* ---------- answers ---------- */

struct answer {
	struct delta *delta;    /* set instead of a body: answer later */
	int status;
	const char *type;
	const char *extra;      /* more header lines, or NULL */
	char *body;
	size_t len;
};

static const char *reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 413: return "Payload Too Large";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	default: return "Error";
	}
}

static void answer_text(struct answer *a, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void answer_text(struct answer *a, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	free(a->body);
	a->body = NULL;
	a->len = 0;
	a->status = status;
	a->type = "text/plain; charset=utf-8";
	int n = vasprintf(&a->body, fmt, ap);
	a->len = n > 0 ? (size_t)n : 0;
	if (n < 0)
		a->body = NULL;
	va_end(ap);
}

/* The value of query parameter name ("" when present without one), into
 * out; false when absent. */
static bool query_get(const char *query, const char *name, char *out, size_t cap)
{
	size_t n = strlen(name);
	for (const char *q = query; q && *q;) {
		const char *end = strchr(q, '&');
		size_t len = end ? (size_t)(end - q) : strlen(q);
		if (len >= n && !strncmp(q, name, n) && (len == n || q[n] == '=')) {
			size_t vl = len > n ? len - n - 1 : 0;
			if (vl >= cap)
				vl = cap - 1;
			memcpy(out, q + n + (len > n), vl);
			out[vl] = 0;
			return true;
		}
		q = end ? end + 1 : NULL;
	}
	return false;
}

static long query_num(const char *query, const char *name, long dflt, long max)
{
	char v[32];
	if (!query_get(query, name, v, sizeof v) || !*v)
		return dflt;
	long n = cli_parse_count(v, max);
	return n < 0 ? -1 : n;
}

static void finish_profile(struct cli_live *l, struct prof_profile *base, int dflt, bool debug,
			   struct answer *ans);

static void serve_profile(struct cli_live *l, const char *query, int dflt, struct answer *ans)
{
	char why[PATH_MAX + 160];
	long debug = query_num(query, "debug", 0, 2);
	long seconds = query_num(query, "seconds", 0, LIVE_MAX_SECONDS);
	if (debug < 0 || seconds < 0) {
		answer_text(ans, 400, "bad debug= or seconds= (at most %d)\n", LIVE_MAX_SECONDS);
		return;
	}
	if (debug && !seconds) {
		/* the legacy text form, as Go's ?debug=1: the dump itself */
		char path[PATH_MAX + 64];
		pthread_mutex_lock(&l->dump_lock);
		if (live_dump(l, path, sizeof path, why, sizeof why)) {
			l->dump_errors++;
			pthread_mutex_unlock(&l->dump_lock);
			answer_text(ans, 503, "%s\n", why);
			return;
		}
		FILE *f = fopen(path, "re");
		struct stat st;
		if (!f || fstat(fileno(f), &st) || !(ans->body = malloc((size_t)st.st_size + 1)) ||
		    fread(ans->body, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
			answer_text(ans, 500, "cannot read '%s'\n", path);
		} else {
			ans->len = (size_t)st.st_size;
			ans->status = 200;
			ans->type = "text/plain; charset=utf-8";
		}
		if (f)
			fclose(f);
		unlink(path);
		pthread_mutex_unlock(&l->dump_lock);
		return;
	}
	if (seconds) {
		struct delta *d = calloc(1, sizeof *d);
		if (!d) {
			answer_text(ans, 500, "out of memory\n");
			return;
		}
		if (live_profile(l, &d->base, why, sizeof why)) {
			free(d);
			answer_text(ans, 503, "%s\n", why);
			return;
		}
		d->due = now_ms() + seconds * 1000;
		d->dflt = dflt;
		d->debug = debug;
		ans->delta = d;
		return;
	}
	finish_profile(l, NULL, dflt, false, ans);
}

/* The profile now (minus base when not NULL: a ?seconds=N delta), as
 * pprof's protobuf, or with debug as heaptrail top's table. */
static void finish_profile(struct cli_live *l, struct prof_profile *base, int dflt, bool debug,
			   struct answer *ans)
{
	char why[PATH_MAX + 160];
	struct prof_profile p;
	if (live_profile(l, &p, why, sizeof why)) {
		answer_text(ans, 503, "%s\n", why);
		return;
	}
	int rc = base ? prof_profile_delta(&p, base) : 0;
	if (!rc && debug) {
		/* a delta as text: heaptrail top's table */
		struct prof_table t;
		FILE *m = open_memstream(&ans->body, &ans->len);
		rc = -ENOMEM;
		if (m && !prof_table_build(&t, &p, false, dflt, PROF_SORT_FLAT)) {
			render_top(m, &p, &t, &(struct render_table_opts){ .value = dflt,
				   .exact = true, .max = 1000000, .name = "delta" });
			prof_table_release(&t);
			rc = 0;
		}
		if (m)
			fclose(m);
		ans->type = "text/plain; charset=utf-8";
	} else if (!rc) {
		rc = render_pprof(&p, dflt, &ans->body, &ans->len);
		ans->type = "application/octet-stream";
		ans->extra = "Content-Disposition: attachment; filename=\"heap\"\r\n";
	}
	prof_profile_release(&p);
	if (rc)
		answer_text(ans, 500, "cannot build the profile: %s\n", strerror(-rc));
	else
		ans->status = 200;
}

/* What the fit's heading says besides the fit: whether the dumps were
 * sampled, and "since attach at ..." (or ""). */
struct growth_about {
	bool sampled;
	char since[96];
};
static int live_growth(struct cli_live *l, struct prof_growth *g, long *ndumps, char *why,
		       size_t cap, struct growth_about *about);

/* A Prometheus label value: backslash, quote and newline escaped, cut
 * at 200 bytes (a C++ name can be long; the label stays bounded). */
static void put_label(FILE *m, const char *s)
{
	for (size_t i = 0; s[i] && i < 200; i++) {
		if (s[i] == '\\' || s[i] == '"')
			fputc('\\', m);
		if (s[i] == '\n')
			fputs("\\n", m);
		else
			fputc(s[i], m);
	}
}

static void metric(FILE *m, const char *name, const char *type, const char *help, int64_t v)
{
	fprintf(m, "# HELP %s %s\n# TYPE %s %s\n%s %lld\n", name, help, name, type, name,
		(long long)v);
}

static void serve_metrics(struct cli_live *l, struct answer *ans)
{
	char why[PATH_MAX + 160];
	struct prof_profile p;
	if (live_profile(l, &p, why, sizeof why)) {
		answer_text(ans, 503, "%s\n", why);
		return;
	}
	FILE *m = open_memstream(&ans->body, &ans->len);
	if (!m) {
		prof_profile_release(&p);
		answer_text(ans, 500, "out of memory\n");
		return;
	}
	const int64_t *t = p.total;
	const char *est = p.sample > 1 ? " (an estimate: sampled)" : "";
	char help[256];
	snprintf(help, sizeof help, "Bytes in live heap blocks%s.", est);
	metric(m, "heaptrail_live_bytes", "gauge", help, t[PROF_INUSE_SPACE]);
	snprintf(help, sizeof help, "Live heap blocks%s.", est);
	metric(m, "heaptrail_live_blocks", "gauge", help, t[PROF_INUSE_OBJECTS]);
	metric(m, "heaptrail_allocated_bytes_total", "counter", "Bytes allocated since start.",
	       t[PROF_ALLOC_SPACE]);
	metric(m, "heaptrail_allocated_blocks_total", "counter", "Blocks allocated since start.",
	       t[PROF_ALLOC_OBJECTS]);
	metric(m, "heaptrail_freed_bytes_total", "counter", "Bytes freed since start.",
	       t[PROF_ALLOC_SPACE] - t[PROF_INUSE_SPACE]);
	metric(m, "heaptrail_freed_blocks_total", "counter", "Blocks freed since start.",
	       t[PROF_ALLOC_OBJECTS] - t[PROF_INUSE_OBJECTS]);
	metric(m, "heaptrail_sampling_interval_bytes", "gauge",
	       "Mean bytes between sampled allocations (1: every allocation).", (int64_t)p.sample);
	size_t len;
	char *statm = ctl_read_proc(l->ag.pid, "statm", &len);
	if (statm) {
		long long pages = 0;
		if (sscanf(statm, "%*s %lld", &pages) == 1)
			metric(m, "heaptrail_process_resident_bytes", "gauge",
			       "Resident set size of the process (program and agent).",
			       pages * sysconf(_SC_PAGESIZE));
		free(statm);
	}
	if (p.agent_bytes >= 0)
		metric(m, "heaptrail_agent_mapped_bytes", "gauge",
		       "The agent's own memory in the program: its mappings (virtual; pages "
		       "are committed as used).", p.agent_bytes);
	metric(m, "heaptrail_live_dumps_total", "counter",
	       "Heap dumps the endpoint asked the agent for.", (int64_t)l->dumps);
	metric(m, "heaptrail_live_dump_errors_total", "counter",
	       "Heap dumps asked for and not received.", (int64_t)l->dump_errors);
	fprintf(m, "# HELP heaptrail_live_dump_duration_seconds From the request to the whole "
		"file, for this scrape's dump: at most what the program's thread spent on it.\n"
		"# TYPE heaptrail_live_dump_duration_seconds gauge\n"
		"heaptrail_live_dump_duration_seconds %.6f\n", l->last_dump_s);
	if (l->push_host[0]) {
		metric(m, "heaptrail_push_total", "counter", "Profiles pushed to Pyroscope.",
		       (int64_t)l->pushes);
		metric(m, "heaptrail_push_errors_total", "counter",
		       "Pushes to Pyroscope that failed (retried with backoff).",
		       (int64_t)l->push_errors);
	}
	struct prof_table tab;
	if (!prof_table_build(&tab, &p, false, PROF_INUSE_SPACE, PROF_SORT_FLAT)) {
		fprintf(m, "# HELP heaptrail_site_live_bytes Live bytes allocated by a function "
			"(the caller of malloc), top %d by live bytes.\n"
			"# TYPE heaptrail_site_live_bytes gauge\n", LIVE_TOP_SITES);
		for (size_t i = 0, shown = 0; i < tab.nrows && shown < LIVE_TOP_SITES; i++) {
			const struct prof_row *r = &tab.rows[i];
			if (r->flat[PROF_INUSE_SPACE] <= 0)
				continue;
			fputs("heaptrail_site_live_bytes{site=\"", m);
			put_label(m, r->name);
			fprintf(m, "\"} %lld\n", (long long)r->flat[PROF_INUSE_SPACE]);
			shown++;
		}
		prof_table_release(&tab);
	}
	struct prof_growth g;
	long ndumps;
	if (!live_growth(l, &g, &ndumps, why, sizeof why, NULL)) {
		fprintf(m, "# HELP heaptrail_site_growing_bytes_per_second Sites `heaptrail "
			"growth` calls growing over the last %d dumps: their live bytes' slope "
			"over the later half.\n# TYPE heaptrail_site_growing_bytes_per_second "
			"gauge\n", LIVE_GROWTH_DUMPS);
		for (size_t i = 0, shown = 0; i < g.nsites && shown < LIVE_TOP_SITES; i++) {
			if (g.sites[i].trend != PROF_TREND_GROWING)
				continue;
			fputs("heaptrail_site_growing_bytes_per_second{site=\"", m);
			put_label(m, g.sites[i].name);
			fprintf(m, "\"} %.0f\n", g.sites[i].late_slope);
			shown++;
		}
		prof_growth_release(&g);
	}
	fclose(m);
	prof_profile_release(&p);
	ans->status = 200;
	ans->type = "text/plain; version=0.0.4; charset=utf-8";
}

static void serve_cmdline(struct cli_live *l, struct answer *ans)
{
	size_t len;
	char *c = ctl_read_proc(l->ag.pid, "cmdline", &len);
	if (!c) {
		answer_text(ans, 503, "process %ld is gone\n", l->ag.pid);
		return;
	}
	if (len && !c[len - 1])
		len--;  /* Go joins os.Args with NULs, without a last one */
	ans->body = c;
	ans->len = len;
	ans->status = 200;
	ans->type = "text/plain; charset=utf-8";
}


/* /debug/pprof/symbol: GET says symbolization is offered; POST (or GET
 * with a query) takes addresses joined by '+' and answers one
 * "0xADDR NAME" line per address it can name, as Go's handler does. The
 * addresses are symbolized as a one-stack heap dump of the process's
 * current memory map, with the loader the other endpoints use. */
static void serve_symbol(struct cli_live *l, const char *query, const char *body, size_t blen,
			 struct answer *ans)
{
	const char *in = body && blen ? body : query;
	size_t inlen = body && blen ? blen : query ? strlen(query) : 0;
	if (!in || !inlen) {
		answer_text(ans, 200, "num_symbols: 1\n");
		return;
	}
	size_t mlen;
	char *maps = ctl_read_proc(l->ag.pid, "maps", &mlen);
	if (!maps) {
		answer_text(ans, 503, "process %ld is gone\n", l->ag.pid);
		return;
	}
	char *text = NULL, *out = NULL;
	size_t tlen = 0, olen = 0;
	FILE *m = open_memstream(&text, &tlen);
	if (!m) {
		free(maps);
		answer_text(ans, 500, "out of memory\n");
		return;
	}
	/* one stack line per 64 addresses: the reader bounds a stack's depth */
	size_t naddr = 0;
	uint64_t *addrs = malloc((inlen / 2 + 1) * sizeof *addrs);
	for (size_t i = 0; addrs && i < inlen && naddr < 65536;) {
		while (i < inlen && (in[i] == '+' || in[i] == ' ' || in[i] == '\n' || in[i] == '\r'))
			i++;
		char num[24];
		size_t k = 0;
		while (i < inlen && in[i] != '+' && in[i] != ' ' && in[i] != '\n' && k < sizeof num - 1)
			num[k++] = in[i++];
		while (i < inlen && in[i] != '+' && in[i] != ' ' && in[i] != '\n')
			i++;
		num[k] = 0;
		char *e;
		unsigned long long a = k ? strtoull(num, &e, 0) : 0;
		if (k && !*e && a)
			addrs[naddr++] = a;
	}
	fprintf(m, "heap profile: %zu: %zu [%zu: %zu] @ heap_v2/1\n", (naddr + 63) / 64,
		(naddr + 63) / 64, (naddr + 63) / 64, (naddr + 63) / 64);
	for (size_t i = 0; i < naddr; i++) {
		if (i % 64 == 0)
			fprintf(m, "%s1: 1 [1: 1] @", i ? "\n" : "");
		fprintf(m, " 0x%llx", (unsigned long long)addrs[i]);
	}
	fprintf(m, "\n\nMAPPED_LIBRARIES:\n%s", maps);
	fclose(m);
	free(maps);
	if (!naddr || !text) {
		free(addrs);
		free(text);
		answer_text(ans, naddr ? 500 : 400, naddr ? "out of memory\n" : "no addresses\n");
		return;
	}
	char tmpl[] = "/tmp/heaptrail-symbol-XXXXXX";
	int fd = mkstemp(tmpl);
	bool ok = fd >= 0 && write(fd, text, tlen) == (ssize_t)tlen;
	if (fd >= 0)
		close(fd);
	free(text);
	struct prof_profile p;
	struct prof_load_opts o = { .sym_cache = l->cache, .keep_alloc_frames = true,
				    .binary_path = getenv("PPROF_BINARY_PATH") };
	const char *err = "cannot write a temporary file";
	pthread_mutex_lock(&l->dump_lock);
	int lrc = ok ? prof_profile_load(&p, tmpl, &o, &err) : -1;
	pthread_mutex_unlock(&l->dump_lock);
	if (lrc) {
		if (fd >= 0)
			unlink(tmpl);
		free(addrs);
		answer_text(ans, 500, "cannot symbolize: %s\n", err);
		return;
	}
	unlink(tmpl);
	m = open_memstream(&out, &olen);
	for (size_t i = 0; m && i < naddr; i++)
		for (size_t k = 0; k < p.nlocs; k++) {
			const struct prof_location *loc = &p.locs[k];
			if (loc->pc != addrs[i] || !loc->nframes)
				continue;
			const struct prof_frame *f = &p.frames[loc->frames[loc->nframes - 1]];
			if (f->symbolized)
				fprintf(m, "0x%llx %s\n", (unsigned long long)addrs[i], f->function);
			break;
		}
	if (m)
		fclose(m);
	prof_profile_release(&p);
	free(addrs);
	ans->body = out;
	ans->len = olen;
	ans->status = out ? 200 : 500;
	ans->type = "text/plain; charset=utf-8";
}

/* /debug/heaptrail/leaks[?increased=1]: a leak check now, as JSON. */
static void serve_leaks(struct cli_live *l, const char *query, struct answer *ans)
{
	char why[PATH_MAX + 160], path[PATH_MAX + 64];
	if (agent_not_ready(&l->ag, why, sizeof why)) {
		answer_text(ans, 503, "%s\n", why);
		return;
	}
	char inc[8];
	int increased = query_get(query, "increased", inc, sizeof inc) && strcmp(inc, "0");
	if (ctl_agent_leak_check(&l->ag, increased, LIVE_DUMP_MS * 6, path, sizeof path, why,
				 sizeof why)) {
		answer_text(ans, 503, "%s\n", why);
		return;
	}
	struct prof_run run;
	const char *err, *err_file;
	if (prof_run_load_kinds(&run, path, getenv("PPROF_BINARY_PATH"), PROF_KINDS_ALL, &err,
				&err_file)) {
		answer_text(ans, 500, "cannot read '%s': %s\n", err_file, err);
		return;
	}
	FILE *m = open_memstream(&ans->body, &ans->len);
	if (m) {
		render_json(m, &run);
		fclose(m);
	}
	prof_run_release(&run);
	ans->status = m ? 200 : 500;
	ans->type = "application/json";
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The growth fit over the last LIVE_GROWTH_DUMPS numbered dumps of the
 * process in the agent's directory; 0, or -1 with why (fewer than three
 * dumps: nothing to fit). */
static int live_growth(struct cli_live *l, struct prof_growth *g, long *ndumps, char *why,
		       size_t cap, struct growth_about *about)
{
	char prefix[64];
	snprintf(prefix, sizeof prefix, FMT_FILE_PREFIX ".%ld.", l->ag.pid);
	size_t np = strlen(prefix), n = 0, ncap = 0;
	char **paths = NULL;
	DIR *d = opendir(l->ag.dir);
	for (struct dirent *e; d && (e = readdir(d));) {
		size_t len = strlen(e->d_name);
		/* PREFIX.PID.SEQ.KIND.heap: a digit after the pid */
		if (strncmp(e->d_name, prefix, np) || e->d_name[np] < '0' || e->d_name[np] > '9' ||
		    len < 5 || strcmp(e->d_name + len - 5, FMT_HEAP_SUFFIX))
			continue;
		if (n == ncap) {
			ncap = ncap ? 2 * ncap : 64;
			char **np2 = realloc(paths, ncap * sizeof *paths);
			if (!np2)
				break;
			paths = np2;
		}
		if (asprintf(&paths[n], "%s/%s", l->ag.dir, e->d_name) > 0)
			n++;
	}
	if (d)
		closedir(d);
	qsort(paths, n, sizeof *paths, cmp_str);
	size_t first = n > LIVE_GROWTH_DUMPS ? n - LIVE_GROWTH_DUMPS : 0;
	*ndumps = (long)(n - first);
	struct prof_profile *ps = NULL;
	size_t nps = 0;
	const char *err, *err_file;
	struct prof_load_opts o = { .sym_cache = l->cache,
				    .binary_path = getenv("PPROF_BINARY_PATH") };
	int rc = -1;
	if (n - first < 3) {
		snprintf(why, cap, "%zu dumps of process %ld so far, growth needs three (run with "
			 "--every, --interval or --peak)", n - first, l->ag.pid);
		goto out;
	}
	pthread_mutex_lock(&l->dump_lock);
	int lrc = prof_series_load(paths + first, n - first, &o, &ps, &nps, &err, &err_file);
	pthread_mutex_unlock(&l->dump_lock);
	if (about) {
		about->sampled = !lrc && nps && ps[0].sample > 1;
		if (lrc || prof_attach_label(paths[first], l->ag.pid, about->since,
					    sizeof about->since))
			about->since[0] = 0;
	}
	if (lrc)
		snprintf(why, cap, "cannot read '%s': %s", err_file ? err_file : l->ag.dir, err);
	else if (prof_growth_compute(g, ps, nps, PROF_INUSE_SPACE, false))
		snprintf(why, cap, "cannot fit the %zu dumps", nps);
	else
		rc = 0;
out:
	for (size_t i = 0; i < nps; i++)
		prof_profile_release(&ps[i]);
	free(ps);
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	return rc;
}

/* `heaptrail growth`'s text, the same words (units, the sampling note,
 * "since attach"); ?n=N sites in each part (default 10, as growth's -n). */
static void serve_growth(struct cli_live *l, const char *query, struct answer *ans)
{
	char why[PATH_MAX + 200];
	struct prof_growth g;
	struct growth_about about;
	long n;
	if (live_growth(l, &g, &n, why, sizeof why, &about)) {
		answer_text(ans, 503, "%s\n", why);
		return;
	}
	long max = query_num(query, "n", 10, 100000);
	FILE *m = open_memstream(&ans->body, &ans->len);
	if (m) {
		render_growth(m, &g, l->ag.pid, about.sampled, &(struct render_table_opts){
			.value = PROF_INUSE_SPACE, .max = max > 0 ? max : 10,
			.since = about.since[0] ? about.since : NULL });
		fclose(m);
	}
	prof_growth_release(&g);
	ans->status = m ? 200 : 500;
	ans->type = "text/plain; charset=utf-8";
}

/* The page of `heaptrail html` at / for the process, from the files its
 * agent wrote (the last LIVE_GROWTH_DUMPS numbered dumps, as growth
 * above, the timeline, a leak report when there is one): nothing is
 * asked of the program. The page fetches its data again from
 * /debug/heaptrail/page.json (data_only) every LIVE_PAGE_EVERY_MS and
 * redraws the view shown, without a reload. */
static void serve_page(struct cli_live *l, bool data_only, struct answer *ans)
{
	char why[PATH_MAX + 200] = "";
	struct cli_html_opts o = {
		.binary_path = getenv("PPROF_BINARY_PATH"), .min_share = 0.001, .pid = l->ag.pid,
		.max_dumps = LIVE_GROWTH_DUMPS, .sym_cache = l->cache,
		.live_url = "/debug/heaptrail/page.json", .live_every_ms = LIVE_PAGE_EVERY_MS,
		.data_only = data_only, .quiet = true,
	};
	pthread_mutex_lock(&l->dump_lock);
	int rc = cli_html_build(l->ag.dir, &o, &ans->body, &ans->len, why, sizeof why);
	pthread_mutex_unlock(&l->dump_lock);
	if (rc) {
		answer_text(ans, 503, "%s\n", why);
		return;
	}
	ans->status = 200;
	ans->type = data_only ? "application/json" : "text/html; charset=utf-8";
}

static const char index_page[] =
	"<!DOCTYPE html>\n<html><head><title>/debug/pprof/</title></head><body>\n"
	"<p>heaptrail live endpoint for process %ld</p>\n<ul>\n"
	"<li><a href=\"/debug/pprof/heap?debug=1\">heap</a> (<a href=\"/debug/pprof/heap\">"
	"profile.proto</a>): live and allocated memory by stack; <code>?seconds=N</code>: what "
	"changed over N seconds</li>\n"
	"<li><a href=\"/debug/pprof/allocs?debug=1\">allocs</a>: the same, allocated space "
	"shown first</li>\n"
	"<li><a href=\"/debug/pprof/cmdline\">cmdline</a></li>\n"
	"<li><a href=\"/debug/pprof/symbol\">symbol</a>: POST addresses, get names</li>\n"
	"<li><a href=\"/debug/heaptrail/leaks\">leaks</a>: a leak check now (JSON; "
	"<code>?increased=1</code>: what grew since the last)</li>\n"
	"<li><a href=\"/debug/heaptrail/growth\">growth</a>: the sites growing over the "
	"run's dumps so far</li>\n"
	"<li><a href=\"/metrics\">metrics</a> (Prometheus)</li>\n"
	"<li><a href=\"/\">the page</a>: growth, timeline and flame graphs, as heaptrail "
	"html draws them, kept up to date (<a href=\"/debug/heaptrail/page.json\">its "
	"data</a>)</li>\n"
	"</ul>\n<p>Use: <code>pprof -http=: http://HOST:PORT/debug/pprof/heap</code></p>\n"
	"</body></html>\n";

/* Answers one request (method, path, query, body). */
static void route(struct cli_live *l, const char *method, const char *path, const char *query,
		  const char *body, size_t blen, struct answer *ans)
{
	bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	if (!strcmp(path, "/debug/pprof/symbol") && (get || !strcmp(method, "POST"))) {
		serve_symbol(l, query, body, blen, ans);
		return;
	}
	if (!get) {
		answer_text(ans, 405, "method not allowed\n");
		return;
	}
	if (!strcmp(path, "/")) {
		serve_page(l, false, ans);
	} else if (!strcmp(path, "/debug/heaptrail/page.json")) {
		serve_page(l, true, ans);
	} else if (!strcmp(path, "/debug/pprof/") || !strcmp(path, "/debug/pprof")) {
		ans->status = 200;
		ans->type = "text/html; charset=utf-8";
		int n = asprintf(&ans->body, index_page, l->ag.pid);
		ans->len = n > 0 ? (size_t)n : 0;
	} else if (!strcmp(path, "/debug/pprof/heap")) {
		serve_profile(l, query, PROF_INUSE_SPACE, ans);
	} else if (!strcmp(path, "/debug/pprof/allocs")) {
		serve_profile(l, query, PROF_ALLOC_SPACE, ans);
	} else if (!strcmp(path, "/debug/pprof/cmdline")) {
		serve_cmdline(l, ans);
	} else if (!strcmp(path, "/metrics")) {
		serve_metrics(l, ans);
	} else if (!strcmp(path, "/debug/heaptrail/leaks")) {
		serve_leaks(l, query, ans);
	} else if (!strcmp(path, "/debug/heaptrail/growth")) {
		serve_growth(l, query, ans);
	} else {
		answer_text(ans, 404, "not found: try /debug/pprof/ or /metrics\n");
	}
}

/* ---------- the server ---------- */

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	if (c->delta) {
		prof_profile_release(&c->delta->base);
		free(c->delta);
	}
	free(c->buf);
	memset(c, 0, sizeof *c);
	c->fd = -1;
}

static void conn_answer(struct conn *c, struct answer *a, bool head)
{
	char hdr[512];
	int n = snprintf(hdr, sizeof hdr,
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "X-Content-Type-Options: nosniff\r\nConnection: close\r\n%s\r\n",
			 a->status, reason(a->status), a->type ? a->type : "text/plain",
			 a->len, a->extra ? a->extra : "");
	size_t blen = head ? 0 : a->len;
	char *out = malloc((size_t)n + blen + 1);
	free(c->buf);
	c->buf = out;
	c->len = c->off = 0;
	if (out) {
		memcpy(out, hdr, (size_t)n);
		if (blen)
			memcpy(out + n, a->body, blen);
		c->len = (size_t)n + blen;
	}
	free(a->body);
	a->body = NULL;
	c->writing = true;
	c->deadline = now_ms() + LIVE_WRITE_MS;
}

static void conn_error(struct conn *c, int status, const char *msg)
{
	struct answer a = { 0 };
	answer_text(&a, status, "%s\n", msg);
	conn_answer(c, &a, false);
}

/* 1 when c holds a whole request (answered), 0 when more is needed. */
static int conn_request(struct cli_live *l, struct conn *c)
{
	char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
	size_t hl = 4;
	if (!end) {
		end = memmem(c->buf, c->len, "\n\n", 2);
		hl = 2;
	}
	if (!end) {
		if (c->len >= LIVE_MAX_HEAD) {
			conn_error(c, 431, "request headers too large");
			return 1;
		}
		return 0;
	}
	size_t head = (size_t)(end - c->buf) + hl;
	char saved = *end;
	*end = 0;  /* put back below while the body is still coming */
	/* the request line: METHOD SP TARGET SP HTTP/x.y */
	char method[16], target[2048], version[16];
	if (sscanf(c->buf, "%15[A-Z] %2047[^ \r\n] %15[^ \r\n]", method, target, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7) || target[0] != '/') {
		conn_error(c, 400, "bad request line");
		return 1;
	}
	long clen = 0;
	for (char *h = strchr(c->buf, '\n'); h; h = strchr(h + 1, '\n'))
		if (!strncasecmp(h + 1, "content-length:", 15)) {
			char *v = h + 16 + strspn(h + 16, " \t"), *e;
			errno = 0;
			clen = *v >= '0' && *v <= '9' ? strtol(v, &e, 10) : -1;
			if (clen >= 0 && (errno || (*e && !strchr(" \t\r\n", *e))))
				clen = -1;
			if (clen < 0 || clen > LIVE_MAX_BODY) {
				conn_error(c, 413, "body too large or bad content-length");
				return 1;
			}
		}
	if (c->len < head + (size_t)clen) {
		*end = saved;
		return 0;
	}
	char *q = strchr(target, '?');
	if (q)
		*q++ = 0;
	struct answer a = { .status = 500 };
	route(l, method, target, q, c->buf + head, (size_t)clen, &a);
	if (a.delta) {
		c->delta = a.delta;
		c->head = !strcmp(method, "HEAD");
		c->deadline = a.delta->due + LIVE_WRITE_MS;
		return 1;
	}
	if (!a.body && a.status == 500)
		answer_text(&a, 500, "out of memory\n");
	conn_answer(c, &a, !strcmp(method, "HEAD"));
	return 1;
}

static void conn_read(struct cli_live *l, struct conn *c)
{
	if (!c->buf && !(c->buf = malloc(LIVE_MAX_HEAD + LIVE_MAX_BODY + 1))) {
		conn_close(c);
		return;
	}
	size_t room = LIVE_MAX_HEAD + LIVE_MAX_BODY - c->len;
	ssize_t n = recv(c->fd, c->buf + c->len, room, 0);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		conn_close(c);
		return;
	}
	if (n < 0)
		return;
	c->len += (size_t)n;
	conn_request(l, c);
}

static void conn_write(struct conn *c)
{
	while (c->off < c->len) {
		ssize_t n = send(c->fd, c->buf + c->off, c->len - c->off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			break;
		}
		c->off += (size_t)n;
	}
	shutdown(c->fd, SHUT_WR);
	conn_close(c);
}

static void live_accept(struct cli_live *l)
{
	for (int k = 0; k < 16; k++) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct conn *slot = NULL, *oldest = NULL;
		for (int i = 0; i < LIVE_MAX_CONN; i++) {
			struct conn *c = &l->conns[i];
			if (c->fd < 0) {
				slot = c;
				break;
			}
			if (!oldest || c->deadline < oldest->deadline)
				oldest = c;
		}
		if (!slot) {
			/* full: the connection that has waited longest makes room */
			conn_close(oldest);
			slot = oldest;
		}
		slot->fd = fd;
		slot->deadline = now_ms() + LIVE_READ_MS;
	}
}

static void *live_main(void *arg)
{
	struct cli_live *l = arg;
	struct pollfd pfd[LIVE_MAX_CONN + 1];
	int who[LIVE_MAX_CONN + 1];
	while (!atomic_load(&l->stop)) {
		int n = 0;
		pfd[n] = (struct pollfd){ .fd = l->fd, .events = POLLIN };
		who[n++] = -1;
		for (int i = 0; i < LIVE_MAX_CONN; i++) {
			struct conn *c = &l->conns[i];
			if (c->fd < 0)
				continue;
			pfd[n] = (struct pollfd){ .fd = c->fd, .events = c->delta ? 0 :
						  c->writing ? POLLOUT : POLLIN };
			who[n++] = i;
		}
		long long t = now_ms(), wait = 200;
		for (int i = 0; i < LIVE_MAX_CONN; i++) {
			struct conn *c = &l->conns[i];
			if (c->fd >= 0 && c->delta && c->delta->due - t < wait)
				wait = c->delta->due > t ? c->delta->due - t : 0;
		}
		int r = poll(pfd, (nfds_t)n, (int)wait);
		if (r < 0 && errno != EINTR)
			break;
		for (int k = 1; r > 0 && k < n; k++) {
			struct conn *c = &l->conns[who[k]];
			if (!pfd[k].revents || c->fd != pfd[k].fd)
				continue;
			if (c->delta)
				conn_close(c);  /* hung up while waiting */
			else if (c->writing)
				conn_write(c);
			else if (pfd[k].revents & (POLLIN | POLLHUP | POLLERR))
				conn_read(l, c);
			if (c->fd >= 0 && c->writing)
				conn_write(c);
		}
		if (r > 0 && pfd[0].revents & POLLIN)
			live_accept(l);
		t = now_ms();
		for (int i = 0; i < LIVE_MAX_CONN; i++) {
			struct conn *c = &l->conns[i];
			if (c->fd >= 0 && c->delta && t >= c->delta->due) {
				struct answer a = { .status = 500 };
				struct delta *d = c->delta;
				c->delta = NULL;
				finish_profile(l, &d->base, d->dflt, d->debug, &a);
				prof_profile_release(&d->base);
				free(d);
				conn_answer(c, &a, c->head);
				conn_write(c);
				continue;
			}
			if (c->fd < 0 || t <= c->deadline)
				continue;
			if (c->writing) {
				conn_close(c);  /* a client that does not read */
			} else {
				conn_error(c, 408, "request timeout");
				conn_write(c);
			}
		}
	}
	return NULL;
}


/* ---------- push to Pyroscope ----------
 *
 * Every push_every_ms: a profile now, sent to URL/ingest as Pyroscope's
 * clients send one (its ingest handler reads a multipart form, see
 * pkg/og/convert/pprof/profile.go in grafana/pyroscope): the parts
 * `profile` (the gzip'd pprof, file profile.pprof), `prev_profile` (the
 * one delivered before: Pyroscope subtracts it from the cumulative types
 * alloc_objects and alloc_space) and `sample_type_config` (JSON: which
 * types are cumulative, their units); the query gives name, from, until
 * (Unix seconds), spyName and sampleRate, and no `format` (which would
 * make the body a bare pprof). A failed push is retried at the next turn,
 * the wait doubling up to 5 minutes; only the newest profile and the last
 * one delivered are kept, so nothing grows while the server is down, and
 * nothing of this runs in the program. */

#define PUSH_IO_MS 5000          /* connect, send, answer: each */
#define PUSH_MAX_BACKOFF_MS 300000

static int push_parse(struct cli_live *l, const struct cli_live_opts *o)
{
	const char *u = o->push + 7, *slash = strchr(u, '/');
	size_t hl = slash ? (size_t)(slash - u) : strlen(u);
	char hostport[300];
	if (!hl || hl >= sizeof hostport) {
		cli_error("--push: no host in '%s'", o->push);
		return -1;
	}
	memcpy(hostport, u, hl);
	hostport[hl] = 0;
	char *colon = strrchr(hostport, ':');
	if (colon && !strchr(colon, ']')) {
		*colon = 0;
		if (!port_ok(colon + 1) || !atoi(colon + 1)) {
			cli_error("--push: the port in '%s' is not a number from 1 to 65535", o->push);
			return -1;
		}
		snprintf(l->push_port, sizeof l->push_port, "%s", colon + 1);
	} else {
		snprintf(l->push_port, sizeof l->push_port, "80");
	}
	char *h = hostport;
	if (h[0] == '[' && h[strlen(h) - 1] == ']') {
		h[strlen(h) - 1] = 0;
		h++;
	}
	snprintf(l->push_host, sizeof l->push_host, "%s", h);
	/* the base path, without a trailing slash; /ingest goes after it */
	snprintf(l->push_path, sizeof l->push_path, "%s", slash ? slash : "");
	size_t pl = strlen(l->push_path);
	while (pl && l->push_path[pl - 1] == '/')
		l->push_path[--pl] = 0;
	if (strpbrk(l->push_path, "?# \r\n")) {
		cli_error("--push: want a URL without a query, not '%s'", o->push);
		return -1;
	}
	if (o->push_name)
		snprintf(l->push_name, sizeof l->push_name, "%s", o->push_name);
	l->push_every_ms = o->push_every_ms ? o->push_every_ms : 15000;
	return 0;
}

/* Waits for fd to be ready for events, in slices that look at stop; 0,
 * or -1 on timeout, stop or error. */
static int push_wait(struct cli_live *l, int fd, short events, long ms)
{
	long long end = now_ms() + ms;
	while (!atomic_load(&l->stop)) {
		long left = (long)(end - now_ms());
		if (left <= 0)
			return -1;
		struct pollfd p = { .fd = fd, .events = events };
		int r = poll(&p, 1, left < 100 ? (int)left : 100);
		if (r > 0)
			return (p.revents & (POLLERR | POLLNVAL)) && !(p.revents & events) ? -1 : 0;
		if (r < 0 && errno != EINTR)
			return -1;
	}
	return -1;
}

/* POSTs body to the server; 0 when it answered 2xx, else -1 with why. */
static int push_post(struct cli_live *l, const char *target, const char *ctype,
		     const char *body, size_t blen, char *why, size_t cap)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
	int gr = getaddrinfo(l->push_host, l->push_port, &hints, &res);
	if (gr) {
		snprintf(why, cap, "cannot resolve '%s': %s", l->push_host, gai_strerror(gr));
		return -1;
	}
	int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int ret = -1;
	char *head = NULL;
	if (fd < 0) {
		snprintf(why, cap, "socket: %s", strerror(errno));
		goto out;
	}
	if (connect(fd, res->ai_addr, res->ai_addrlen) && errno != EINPROGRESS) {
		snprintf(why, cap, "cannot connect to %s:%s: %s", l->push_host, l->push_port,
			 strerror(errno));
		goto out;
	}
	int soerr = 0;
	socklen_t sl = sizeof soerr;
	if (push_wait(l, fd, POLLOUT, PUSH_IO_MS) ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) || soerr) {
		snprintf(why, cap, "cannot connect to %s:%s: %s", l->push_host, l->push_port,
			 soerr ? strerror(soerr) : "timed out");
		goto out;
	}
	int hn = asprintf(&head, "POST %s HTTP/1.1\r\nHost: %s:%s\r\nUser-Agent: heaptrail\r\n"
			  "Content-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			  target, l->push_host, l->push_port, ctype, blen);
	if (hn < 0) {
		head = NULL;
		snprintf(why, cap, "out of memory");
		goto out;
	}
	const char *parts[2] = { head, body };
	size_t lens[2] = { (size_t)hn, blen };
	for (int k = 0; k < 2; k++)
		for (size_t off = 0; off < lens[k];) {
			if (push_wait(l, fd, POLLOUT, PUSH_IO_MS)) {
				snprintf(why, cap, "sending to %s:%s timed out", l->push_host,
					 l->push_port);
				goto out;
			}
			ssize_t w = send(fd, parts[k] + off, lens[k] - off, MSG_NOSIGNAL);
			if (w < 0 && errno != EAGAIN && errno != EINTR) {
				snprintf(why, cap, "sending to %s:%s: %s", l->push_host,
					 l->push_port, strerror(errno));
				goto out;
			}
			if (w > 0)
				off += (size_t)w;
		}
	char ans[512];
	size_t got = 0;
	while (got < sizeof ans - 1 && !memchr(ans, '\n', got)) {
		if (push_wait(l, fd, POLLIN, PUSH_IO_MS)) {
			snprintf(why, cap, "no answer from %s:%s", l->push_host, l->push_port);
			goto out;
		}
		ssize_t r = recv(fd, ans + got, sizeof ans - 1 - got, 0);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
			break;
		if (r > 0)
			got += (size_t)r;
	}
	ans[got] = 0;
	int status = 0;
	if (sscanf(ans, "HTTP/1.%*d %d", &status) != 1 || status < 200 || status > 299) {
		snprintf(why, cap, "%s:%s answered '%.*s'", l->push_host, l->push_port,
			 (int)strcspn(ans, "\r\n"), ans);
		goto out;
	}
	ret = 0;
out:
	free(head);
	if (fd >= 0)
		close(fd);
	freeaddrinfo(res);
	return ret;
}

static void form_part(FILE *m, const char *boundary, const char *field, const char *file,
		      const char *ctype, const char *data, size_t len)
{
	fprintf(m, "--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
		"Content-Type: %s\r\n\r\n", boundary, field, file, ctype);
	fwrite(data, 1, len, m);
	fputs("\r\n", m);
}

static const char sample_type_config[] =
	"{\"alloc_objects\":{\"units\":\"objects\",\"cumulative\":true},"
	"\"alloc_space\":{\"units\":\"bytes\",\"cumulative\":true},"
	"\"inuse_objects\":{\"units\":\"objects\",\"aggregation\":\"average\"},"
	"\"inuse_space\":{\"units\":\"bytes\",\"aggregation\":\"average\"}}";

/* One push of pb (prev: the last delivered, or NULL); 0 or -1 with why. */
static int push_once(struct cli_live *l, const char *pb, size_t pb_len, const char *prev,
		     size_t prev_len, time_t from, time_t until, char *why, size_t cap)
{
	char boundary[64], *body = NULL, *target = NULL, ctype[128];
	size_t blen = 0;
	snprintf(boundary, sizeof boundary, "heaptrail%016llx", (unsigned long long)now_ms());
	FILE *m = open_memstream(&body, &blen);
	if (!m) {
		snprintf(why, cap, "out of memory");
		return -1;
	}
	form_part(m, boundary, "profile", "profile.pprof", "application/octet-stream", pb, pb_len);
	if (prev)
		form_part(m, boundary, "prev_profile", "profile.pprof", "application/octet-stream",
			  prev, prev_len);
	form_part(m, boundary, "sample_type_config", "sample_type_config.json",
		  "application/json", sample_type_config, strlen(sample_type_config));
	fprintf(m, "--%s--\r\n", boundary);
	fclose(m);
	snprintf(ctype, sizeof ctype, "multipart/form-data; boundary=%s", boundary);
	int ret = -1;
	if (asprintf(&target, "%s/ingest?name=%s&from=%lld&until=%lld&spyName=heaptrail"
		     "&sampleRate=100", l->push_path, l->push_name, (long long)from,
		     (long long)until) < 0) {
		target = NULL;
		snprintf(why, cap, "out of memory");
	} else {
		ret = push_post(l, target, ctype, body, blen, why, cap);
	}
	free(body);
	free(target);
	return ret;
}

static void *push_main(void *arg)
{
	struct cli_live *l = arg;
	char *prev = NULL, why[PATH_MAX + 200], last_why[sizeof why] = "";
	size_t prev_len = 0;
	time_t prev_time = time(NULL);
	long backoff = 0;
	long long next = now_ms() + l->push_every_ms;
	while (!atomic_load(&l->stop)) {
		if (now_ms() < next) {
			usleep(50 * 1000);
			continue;
		}
		struct prof_profile p;
		char *pb = NULL;
		size_t pb_len = 0;
		int rc = live_profile(l, &p, why, sizeof why);
		if (!rc) {
			rc = render_pprof(&p, PROF_INUSE_SPACE, &pb, &pb_len);
			if (rc)
				snprintf(why, sizeof why, "cannot encode the profile");
			prof_profile_release(&p);
		}
		time_t now = time(NULL);
		if (now < prev_time)
			now = prev_time;   /* the clock stepped back: keep intervals in order */
		if (!rc)
			rc = push_once(l, pb, pb_len, prev, prev_len, prev_time, now, why, sizeof why);
		if (!rc) {
			/* delivered: the base of the next one */
			free(prev);
			prev = pb;
			prev_len = pb_len;
			prev_time = now;
			l->pushes++;
			backoff = 0;
			last_why[0] = 0;
			next = now_ms() + l->push_every_ms;
		} else {
			free(pb);
			l->push_errors++;
			if (strcmp(why, last_why)) {   /* each cause once, not every turn */
				fprintf(stderr, "heaptrail: push to Pyroscope failed: %s (retrying)\n",
					why);
				snprintf(last_why, sizeof last_why, "%s", why);
			}
			backoff = backoff ? 2 * backoff : l->push_every_ms;
			if (backoff > PUSH_MAX_BACKOFF_MS)
				backoff = PUSH_MAX_BACKOFF_MS;
			next = now_ms() + backoff;
		}
	}
	free(prev);
	return NULL;
}

int cli_live_start(struct cli_live *l, const struct ctl_agent *a, const char *name)
{
	l->ag = *a;
	l->cache = prof_sym_cache_new();
	if (!l->push_name[0]) {
		/* the program's name, as Pyroscope's application name */
		const char *b = name ? strrchr(name, '/') : NULL;
		b = b ? b + 1 : name ? name : "heaptrail";
		size_t k = 0;
		for (; *b && k < sizeof l->push_name - 1; b++)
			l->push_name[k++] = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
						   "0123456789._-", *b) ? *b : '_';
		l->push_name[k] = 0;
	}
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);  /* the program's signals stay the main thread's */
	int r = 0;
	if (l->fd >= 0) {
		r = pthread_create(&l->thread, NULL, live_main, l);
		l->started = r == 0;
	}
	if (!r && l->push_host[0]) {
		r = pthread_create(&l->push_thread, NULL, push_main, l);
		l->push_started = r == 0;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r) {
		cli_error("cannot start the live endpoint's thread: %s", strerror(r));
		return -1;
	}
	if (l->unix_path[0])
		fprintf(stderr, "heaptrail: live endpoint for process %ld at %s (/debug/pprof/, "
			"/metrics)\n", a->pid, l->shown);
	else if (l->fd >= 0)
		fprintf(stderr, "heaptrail: live endpoint for process %ld at %s/debug/pprof/\n",
			a->pid, l->shown);
	if (l->push_host[0])
		fprintf(stderr, "heaptrail: pushing process %ld's heap profile to http://%s:%s%s "
			"as '%s' every %ld ms\n", a->pid, l->push_host, l->push_port, l->push_path,
			l->push_name, l->push_every_ms);
	return 0;
}

void cli_live_stop(struct cli_live *l)
{
	if (!l)
		return;
	atomic_store(&l->stop, true);
	if (l->started)
		pthread_join(l->thread, NULL);
	if (l->push_started)
		pthread_join(l->push_thread, NULL);
	for (int i = 0; i < LIVE_MAX_CONN; i++)
		if (l->conns[i].fd >= 0)
			conn_close(&l->conns[i]);
	if (l->fd >= 0)
		close(l->fd);
	if (l->unix_path[0])
		unlink(l->unix_path);
	if (l->ag.pid > 0) {
		/* a dump that arrived after its request was answered */
		char path[sizeof l->ag.dir + 64];
		snprintf(path, sizeof path, "%s/" FMT_FILE_PREFIX ".%ld." FMT_HEAP_LIVE
			 FMT_HEAP_SUFFIX, l->ag.dir, l->ag.pid);
		unlink(path);
		if (l->live_path[0])
			unlink(l->live_path);
	}
	if (l->cache)
		prof_sym_cache_free(l->cache);
	pthread_mutex_destroy(&l->dump_lock);
	free(l);
}

/* ---------- heaptrail serve PID --http ADDR ---------- */

static const char serve_usage[] =
	"usage: heaptrail serve --http ADDR | --push URL [options] PID\n"
	"  Serves the live endpoint (/debug/pprof/heap, /metrics, ...) of PID, a\n"
	"  process started under heaptrail or attached, until it exits.\n"
	"  --http ADDR            127.0.0.1:PORT (loopback), or a unix socket path\n"
	"  --http-allow-remote    allow an address beyond loopback (with a warning)\n"
	CLI_LIVE_PUSH_HELP;

static volatile sig_atomic_t serve_stop;
static void on_stop(int sig)
{
	(void)sig;
	serve_stop = 1;
}

int cmd_serve(int argc, char **argv)
{
	struct cli_live_opts lo = { 0 };
	long pid = -1;
	for (int i = 1; i < argc; i++) {
		int r = cli_live_opt(argc, argv, &i, &lo);
		if (r < 0)
			return 2;
		if (r > 0)
			continue;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(serve_usage, stdout);
			return 0;
		}
		if (pid < 0 && (pid = cli_parse_count(argv[i], INT_MAX)) > 0)
			continue;
		cli_error("serve: unexpected argument '%s'", argv[i]);
		fputs(serve_usage, stderr);
		return 2;
	}
	if (pid <= 0 || (!lo.addr && !lo.push)) {
		fputs(serve_usage, stderr);
		return 2;
	}
	struct ctl_agent ag;
	if (ctl_agent_open(pid, &ag, true))
		return 1;
	struct cli_live *l = cli_live_bind(&lo);
	if (!l)
		return 1;
	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	size_t clen;
	char *cmd = ctl_read_proc(pid, "cmdline", &clen);
	int sr = cli_live_start(l, &ag, cmd);
	free(cmd);
	if (sr) {
		cli_live_stop(l);
		return 1;
	}
	while (!serve_stop && kill((pid_t)pid, 0) == 0)
		usleep(200 * 1000);
	cli_live_stop(l);
	return 0;
}
