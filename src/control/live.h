/*
 * live.h — the live endpoint's parts: http.c (the server, binding and
 * the threads), routes.c (the answers), push.c (the Pyroscope client)
 * share this; inside src/control only (the commands use control.h).
 *
 * The live endpoint: Go's /debug/pprof protocol and a
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
 * cause, why a push failed.
 */
#ifndef HEAPTRAIL_CONTROL_LIVE_H
#define HEAPTRAIL_CONTROL_LIVE_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "analyze/load.h"
#include "control/control.h"

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

struct ctl_live {
	int fd;
	char unix_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char shown[160];
	struct ctl_agent ag;
	ctl_page_fn page;       /* the page at / (NULL: none) */
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

struct answer {
	struct delta *delta;    /* set instead of a body: answer later */
	int status;
	const char *type;
	const char *extra;      /* more header lines, or NULL */
	char *body;
	size_t len;
};

/* ---- http.c ---- */
long long ctl_now_ns(const struct timespec *ts);
long long ctl_now_ms(void);
bool ctl_port_ok(const char *s);

/* ---- routes.c ---- */
int ctl_live_profile(struct ctl_live *l, struct prof_profile *p, char *why, size_t whycap);
void ctl_answer_text(struct answer *a, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void ctl_finish_profile(struct ctl_live *l, struct prof_profile *base, int dflt, bool debug,
			   struct answer *ans);
void ctl_route(struct ctl_live *l, const char *method, const char *path, const char *query,
		  const char *body, size_t blen, struct answer *ans);

/* ---- push.c ---- */
int ctl_push_parse(struct ctl_live *l, const struct ctl_live_opts *o);
/* The push thread (ctl_live_start). */
void *ctl_push_main(void *arg);

#endif
