/* routes.c — the live endpoint's answers (live.h): a heap dump asked of
 * the agent, and each path: /debug/pprof/ (heap, allocs, cmdline,
 * symbol), /debug/heaptrail/ (leaks, growth, the page) and /metrics. */
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
#include "control/live.h"
#include "format/options.h"
#include "format/vocab.h"
#include "render/render.h"

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
static int live_dump(struct ctl_live *l, char *path, size_t cap, char *why, size_t whycap)
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
	l->last_dump_s = (double)(ctl_now_ns(&ts) - ctl_now_ns(&t0s)) / 1e9;
	struct stat st;
	if (lstat(path, &st) || !S_ISREG(st.st_mode)) {
		snprintf(why, whycap, "process %ld wrote no heap dump at '%s'", a->pid, path);
		return -1;
	}
	l->dumps++;
	return 0;
}

/* A dump now, loaded and symbolized; the file is removed. */
int ctl_live_profile(struct ctl_live *l, struct prof_profile *p, char *why, size_t whycap)
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

void ctl_answer_text(struct answer *a, int status, const char *fmt, ...)
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
	long n = ctl_parse_count(v, max);
	return n < 0 ? -1 : n;
}

static void serve_profile(struct ctl_live *l, const char *query, int dflt, struct answer *ans)
{
	char why[PATH_MAX + 160];
	long debug = query_num(query, "debug", 0, 2);
	long seconds = query_num(query, "seconds", 0, LIVE_MAX_SECONDS);
	if (debug < 0 || seconds < 0) {
		ctl_answer_text(ans, 400, "bad debug= or seconds= (at most %d)\n", LIVE_MAX_SECONDS);
		return;
	}
	if (debug && !seconds) {
		/* the legacy text form, as Go's ?debug=1: the dump itself */
		char path[PATH_MAX + 64];
		pthread_mutex_lock(&l->dump_lock);
		if (live_dump(l, path, sizeof path, why, sizeof why)) {
			l->dump_errors++;
			pthread_mutex_unlock(&l->dump_lock);
			ctl_answer_text(ans, 503, "%s\n", why);
			return;
		}
		FILE *f = fopen(path, "re");
		struct stat st;
		if (!f || fstat(fileno(f), &st) || !(ans->body = malloc((size_t)st.st_size + 1)) ||
		    fread(ans->body, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
			ctl_answer_text(ans, 500, "cannot read '%s'\n", path);
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
			ctl_answer_text(ans, 500, "out of memory\n");
			return;
		}
		if (ctl_live_profile(l, &d->base, why, sizeof why)) {
			free(d);
			ctl_answer_text(ans, 503, "%s\n", why);
			return;
		}
		d->due = ctl_now_ms() + seconds * 1000;
		d->dflt = dflt;
		d->debug = debug;
		ans->delta = d;
		return;
	}
	ctl_finish_profile(l, NULL, dflt, false, ans);
}

/* The profile now (minus base when not NULL: a ?seconds=N delta), as
 * pprof's protobuf, or with debug as heaptrail top's table. */
void ctl_finish_profile(struct ctl_live *l, struct prof_profile *base, int dflt, bool debug,
			   struct answer *ans)
{
	char why[PATH_MAX + 160];
	struct prof_profile p;
	if (ctl_live_profile(l, &p, why, sizeof why)) {
		ctl_answer_text(ans, 503, "%s\n", why);
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
		ctl_answer_text(ans, 500, "cannot build the profile: %s\n", strerror(-rc));
	else
		ans->status = 200;
}

/* What the fit's heading says besides the fit: whether the dumps were
 * sampled, and "since attach at ..." (or ""). */
struct growth_about {
	bool sampled;
	char since[96];
};
static int live_growth(struct ctl_live *l, struct prof_growth *g, long *ndumps, char *why,
		       size_t cap, struct growth_about *about);

static void serve_metrics(struct ctl_live *l, struct answer *ans)
{
	char why[PATH_MAX + 160];
	struct prof_profile p;
	if (ctl_live_profile(l, &p, why, sizeof why)) {
		ctl_answer_text(ans, 503, "%s\n", why);
		return;
	}
	FILE *m = open_memstream(&ans->body, &ans->len);
	if (!m) {
		prof_profile_release(&p);
		ctl_answer_text(ans, 500, "out of memory\n");
		return;
	}
	render_prom_heap(m, &p);
	size_t len;
	char *statm = ctl_read_proc(l->ag.pid, "statm", &len);
	if (statm) {
		long long pages = 0;
		if (sscanf(statm, "%*s %lld", &pages) == 1)
			render_prom_metric(m, "heaptrail_process_resident_bytes", "gauge",
					   "Resident set size of the process (program and agent).",
					   pages * sysconf(_SC_PAGESIZE));
		free(statm);
	}
	if (p.agent_bytes >= 0)
		render_prom_metric(m, "heaptrail_agent_mapped_bytes", "gauge",
				   "The agent's own memory in the program: its mappings (virtual; pages "
				   "are committed as used).", p.agent_bytes);
	render_prom_metric(m, "heaptrail_live_dumps_total", "counter",
			   "Heap dumps the endpoint asked the agent for.", (int64_t)l->dumps);
	render_prom_metric(m, "heaptrail_live_dump_errors_total", "counter",
			   "Heap dumps asked for and not received.", (int64_t)l->dump_errors);
	fprintf(m, "# HELP heaptrail_live_dump_duration_seconds From the request to the whole "
		"file, for this scrape's dump: at most what the program's thread spent on it.\n"
		"# TYPE heaptrail_live_dump_duration_seconds gauge\n"
		"heaptrail_live_dump_duration_seconds %.6f\n", l->last_dump_s);
	if (l->push_host[0]) {
		render_prom_metric(m, "heaptrail_push_total", "counter", "Profiles pushed to Pyroscope.",
				   (int64_t)l->pushes);
		render_prom_metric(m, "heaptrail_push_errors_total", "counter",
				   "Pushes to Pyroscope that failed (retried with backoff).",
				   (int64_t)l->push_errors);
	}
	struct prof_table tab;
	if (!prof_table_build(&tab, &p, false, PROF_INUSE_SPACE, PROF_SORT_FLAT)) {
		render_prom_sites(m, &tab, LIVE_TOP_SITES);
		prof_table_release(&tab);
	}
	struct prof_growth g;
	long ndumps;
	if (!live_growth(l, &g, &ndumps, why, sizeof why, NULL)) {
		render_prom_growing(m, &g, LIVE_TOP_SITES, LIVE_GROWTH_DUMPS);
		prof_growth_release(&g);
	}
	fclose(m);
	prof_profile_release(&p);
	ans->status = 200;
	ans->type = "text/plain; version=0.0.4; charset=utf-8";
}

static void serve_cmdline(struct ctl_live *l, struct answer *ans)
{
	size_t len;
	char *c = ctl_read_proc(l->ag.pid, "cmdline", &len);
	if (!c) {
		ctl_answer_text(ans, 503, "process %ld is gone\n", l->ag.pid);
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
static void serve_symbol(struct ctl_live *l, const char *query, const char *body, size_t blen,
			 struct answer *ans)
{
	const char *in = body && blen ? body : query;
	size_t inlen = body && blen ? blen : query ? strlen(query) : 0;
	if (!in || !inlen) {
		ctl_answer_text(ans, 200, "num_symbols: 1\n");
		return;
	}
	size_t mlen;
	char *maps = ctl_read_proc(l->ag.pid, "maps", &mlen);
	if (!maps) {
		ctl_answer_text(ans, 503, "process %ld is gone\n", l->ag.pid);
		return;
	}
	char *text = NULL, *out = NULL;
	size_t tlen = 0, olen = 0;
	FILE *m = open_memstream(&text, &tlen);
	if (!m) {
		free(maps);
		ctl_answer_text(ans, 500, "out of memory\n");
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
		ctl_answer_text(ans, naddr ? 500 : 400, naddr ? "out of memory\n" : "no addresses\n");
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
		ctl_answer_text(ans, 500, "cannot symbolize: %s\n", err);
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
static void serve_leaks(struct ctl_live *l, const char *query, struct answer *ans)
{
	char why[PATH_MAX + 160], path[PATH_MAX + 64];
	if (agent_not_ready(&l->ag, why, sizeof why)) {
		ctl_answer_text(ans, 503, "%s\n", why);
		return;
	}
	char inc[8];
	int increased = query_get(query, "increased", inc, sizeof inc) && strcmp(inc, "0");
	if (ctl_agent_leak_check(&l->ag, increased, LIVE_DUMP_MS * 6, path, sizeof path, why,
				 sizeof why)) {
		ctl_answer_text(ans, 503, "%s\n", why);
		return;
	}
	struct prof_run run;
	const char *err, *err_file;
	if (prof_run_load_kinds(&run, path, getenv("PPROF_BINARY_PATH"), PROF_KINDS_ALL, &err,
				&err_file)) {
		ctl_answer_text(ans, 500, "cannot read '%s': %s\n", err_file, err);
		return;
	}
	FILE *m = open_memstream(&ans->body, &ans->len);
	if (m) {
		render_json(m, &run, NULL);
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

/* Growth's digests of the dumps read (prof_series_each), in the order
 * read; whether the first was sampled. */
struct growth_digests {
	struct prof_growth_dump **d;
	size_t n, cap;
	bool sampled;
};

static int digest_dump(void *ctx, struct prof_profile *p, size_t i)
{
	struct growth_digests *dg = ctx;
	if (i >= dg->cap) {
		size_t cap = dg->cap ? 2 * dg->cap : 32;
		struct prof_growth_dump **d = realloc(dg->d, cap * sizeof *d);
		if (!d)
			return -ENOMEM;
		memset(d + dg->cap, 0, (cap - dg->cap) * sizeof *d);
		dg->d = d;
		dg->cap = cap;
	}
	if (!i)
		dg->sampled = p->sample > 1;
	dg->n = i + 1 > dg->n ? i + 1 : dg->n;
	return (dg->d[i] = prof_growth_digest(p, PROF_INUSE_SPACE, false)) ? 0 : -ENOMEM;
}

/* The growth fit over the last LIVE_GROWTH_DUMPS numbered dumps of the
 * process in the agent's directory; 0, or -1 with why (fewer than three
 * dumps: nothing to fit). */
static int live_growth(struct ctl_live *l, struct prof_growth *g, long *ndumps, char *why,
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
	struct growth_digests dg = { NULL, 0, 0, false };
	size_t *order = NULL, nps = 0;
	struct prof_load_opts o = { .sym_cache = l->cache,
				    .binary_path = getenv("PPROF_BINARY_PATH") };
	int rc = -1;
	if (n - first < 3) {
		snprintf(why, cap, "%zu dumps of process %ld so far, growth needs three (run with "
			 "--every, --interval or --peak)", n - first, l->ag.pid);
		goto out;
	}
	/* one dump at a time: growth's digest of each is all it keeps */
	pthread_mutex_lock(&l->dump_lock);
	int lrc = prof_series_each(paths + first, n - first, &o, &(struct prof_series_visit){
					   .each = digest_dump, .ctx = &dg }, &order, &nps, why, cap);
	pthread_mutex_unlock(&l->dump_lock);
	if (about) {
		about->sampled = !lrc && dg.sampled;
		if (lrc || prof_attach_label(paths[first], l->ag.pid, about->since,
					    sizeof about->since))
			about->since[0] = 0;
	}
	struct prof_growth_dump **ds = lrc ? NULL : malloc((nps + 1) * sizeof *ds);
	if (lrc)
		;  /* why says it */
	else if (!ds)
		snprintf(why, cap, "out of memory");
	else {
		for (size_t i = 0; i < nps; i++)
			ds[i] = dg.d[order[i]];
		if (prof_growth_compute_digests(g, ds, nps, true))
			snprintf(why, cap, "cannot fit the %zu dumps", nps);
		else
			rc = 0;
	}
	free(ds);
out:
	for (size_t i = 0; i < dg.n; i++)
		prof_growth_digest_free(dg.d[i]);
	free(dg.d);
	free(order);
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	return rc;
}

/* `heaptrail growth`'s text, the same words (units, the sampling note,
 * "since attach"); ?n=N sites in each part (default 10, as growth's -n). */
static void serve_growth(struct ctl_live *l, const char *query, struct answer *ans)
{
	char why[PATH_MAX + 200];
	struct prof_growth g;
	struct growth_about about;
	long n;
	if (live_growth(l, &g, &n, why, sizeof why, &about)) {
		ctl_answer_text(ans, 503, "%s\n", why);
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
static void serve_page(struct ctl_live *l, bool data_only, struct answer *ans)
{
	char why[PATH_MAX + 200] = "";
	struct ctl_page_opts o = {
		.binary_path = getenv("PPROF_BINARY_PATH"), .min_share = 0.001, .pid = l->ag.pid,
		.max_dumps = LIVE_GROWTH_DUMPS, .sym_cache = l->cache,
		.live_url = "/debug/heaptrail/page.json", .live_every_ms = LIVE_PAGE_EVERY_MS,
		.data_only = data_only, .quiet = true, .keep_dumps = true,
	};
	if (!l->page) {
		ctl_answer_text(ans, 404, "not found: try /debug/pprof/ or /metrics\n");
		return;
	}
	pthread_mutex_lock(&l->dump_lock);
	int rc = l->page(l->ag.dir, &o, &ans->body, &ans->len, why, sizeof why);
	pthread_mutex_unlock(&l->dump_lock);
	if (rc) {
		ctl_answer_text(ans, 503, "%s\n", why);
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
void ctl_route(struct ctl_live *l, const char *method, const char *path, const char *query,
		  const char *body, size_t blen, struct answer *ans)
{
	bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	if (!strcmp(path, "/debug/pprof/symbol") && (get || !strcmp(method, "POST"))) {
		serve_symbol(l, query, body, blen, ans);
		return;
	}
	if (!get) {
		ctl_answer_text(ans, 405, "method not allowed\n");
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
		ctl_answer_text(ans, 404, "not found: try /debug/pprof/ or /metrics\n");
	}
}
