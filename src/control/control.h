/*
 * control.h — the process-control layer: everything heaptrail does to a
 * process other than reading what its agent wrote.
 *
 * Layers of the CLI side, each calling only those before it:
 *   format < symbolize < analyze < render < control < cli
 * control is the engine below the commands (src/cli/): the commands parse
 * their arguments, call in here, and decide what to print and the exit
 * status; nothing here is a command, and nothing here calls a command's
 * code. Outside src/control, only src/cli/ includes this header, and no
 * other of this directory's: ptrace.h and live.h are the layer's own
 * (scripts/check-layers). The agent (src/agent/) never does: it is the
 * other side of these calls.
 *
 * Its jobs, one file or a few each:
 *   agentopts.c  finding the agent library and checking the options
 *                handed to it; a run's output directory
 *   launch.c     starting a program under the agent: finding and checking
 *                it, passing stop signals on, waiting, ending as it ended
 *   ptrace.c     calls into a running process with ptrace alone (ptrace.h
 *   remote.c     says how): the borrowed thread; the calls and the park;
 *   elf.c        the target's modules and symbols; the agent loaded into
 *   inject.c     it (`attach`, a container's memory-file route included)
 *                and its entry points called
 *   http.c       the live endpoint (live.h says how): the HTTP server,
 *   routes.c     its answers (pprof, /metrics, leaks, growth, the page)
 *   push.c       and the Pyroscope push client
 *   request.c    the requests to a running agent (a dump, a leak check)
 *                and the /proc reads they need
 *
 * Unlike the layers below, control prints its errors itself, one line
 * each on stderr (ctl_error), as the commands do: a function that says it
 * "prints" has said why it failed when it returns -1.
 */
#ifndef HEAPTRAIL_CONTROL_H
#define HEAPTRAIL_CONTROL_H

#include <stdarg.h>
#include <stdbool.h>
#include <signal.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "format/options.h"

/* Prints "heaptrail: <message>" on stderr (printf-style), one line;
 * cli_error is the commands' name for it. */
void ctl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ctl_verror(const char *fmt, va_list ap);
/* Parses a non-negative decimal integer (an option's value, a query's),
 * at most max; -1 when it is not one. */
long ctl_parse_count(const char *s, long max);

/* ---- finding the agent, checking options (agentopts.c) ---- */

/* The agent library's path (HEAPTRAIL_AGENT, beside this executable, or
 * ../lib/heaptrail); 0, or -1 when there is none. */
int ctl_find_agent(char *out, size_t cap);
/* Checks a profiling option's value (sample, interval, every, timeline,
 * signal) as the agent will parse it; writes what to pass into out.
 * Returns NULL, or why the value is bad. */
const char *ctl_check_profile_value(const char *key, const char *v, char *out, size_t cap);
/* mkdir -p with the last one 0700 (fresh: must not exist). 0 or -errno. */
int ctl_make_dir(const char *dir, bool fresh);
/* The first file of an earlier run in dir (into name), or 0. */
int ctl_other_run_file(const char *dir, char *name, size_t cap);

/* ---- starting a program under the agent (launch.c) ---- */

/* Finds prog the way execvp would; fills path. Returns 0, or -errno. */
int ctl_resolve_prog(const char *prog, char *path, size_t cap);
/* Refuses (prints, -1) what the dynamic loader would not preload into:
 * static and set-id binaries, shown as shown. 0 otherwise. */
int ctl_check_prog(const char *shown, const char *path);
/* Stop signals (INT, TERM, HUP, QUIT) are passed on to the program:
 * block them (how, old as sigprocmask) across the fork, install the
 * forwarder (an ignored one stays ignored), name the program's pid once
 * it is known; ctl_forward_restore puts back the dispositions heaptrail
 * started with (ctl_wait_all does once the program has ended). */
void ctl_forward_block(int how, sigset_t *old);
void ctl_forward_install(void);
void ctl_forward_to(pid_t pid);
void ctl_forward_restore(void);
/* The run id every file of this run will name: HEAPTRAIL_OPTIONS's
 * run=, else a fresh random one, which *added says must be passed. */
void ctl_choose_run_id(char id[FMT_RUN_ID_MAX + 1], bool *added);
/* Waits for child and every orphan handed to heaptrail (a subreaper);
 * returns the child's wait status. */
int ctl_wait_all(pid_t child);
/* Dies of the signal that ended the program (status), without a core;
 * returns when it was not killed by one. */
void ctl_die_like(int status);

/* ---- calls into a running process (inject.c, ptrace.c) ---- */

/* /path whole, malloc'd, NUL-terminated (its length into *len when not
 * NULL); NULL when it cannot be opened. */
char *ctl_read_file(const char *path, size_t *len);
/* Milliseconds since t0 (CLOCK_MONOTONIC). */
double ctl_ms_since(const struct timespec *t0);
/* Loads the agent into process pid (`heaptrail attach`) and starts it
 * with the agent options opts, writing into outdir (absolute); how long
 * the borrowed thread was stopped into *stopped_ms. 0, or 1 (printed). */
int ctl_attach(long pid, const char *opts, const char *outdir, double *stopped_ms);
/* Calls the agent's entry point name(s0, s1) in pid (detach, dump), or
 * with request (a FMT_SIGVAL_* value) heaptrail_request(request, regs,
 * nregs, wrote); *ret its int result, the path of the file it wrote into
 * wrote (FMT_REQUEST_PATH_MAX bytes, or NULL). 0, or -1 (printed). */
int ctl_call_agent(long pid, const char *name, const char *s0, const char *s1, int request,
		   int *ret, double *stopped_ms, char *wrote);
/* One call of the agent's heaptrail_request(value, regs, nregs) in a
 * thread of pid borrowed with ptrace (as `heaptrail dump` does: the
 * thread's interrupted call is restarted, it never sees EINTR); *ret is
 * the agent's answer, and the path of the file it wrote goes to wrote
 * (FMT_REQUEST_PATH_MAX bytes, or NULL). 0, or -1 when the call could not
 * be made (printed). */
int ctl_agent_request(long pid, int value, int *ret, char *wrote);
/* Says that pid may not be traced, why (Yama's mode) and what to do
 * instead, for `leaks` or (live) the live endpoint. */
void ctl_trace_refused(long pid, bool live);
/* When a call above reaped pid's end (its main thread was the one
 * borrowed, and pid a child of ours: `run --http`), its wait status into
 * *status, and true. */
bool ctl_reaped_exit(pid_t pid, int *status);
/* The output directory of an attached agent; 0 or -1. */
int ctl_attached_dir(long pid, char *out, size_t cap);

/* ---- talking to a running agent, preloaded or attached (request.c) ----
 * Every request is a call made by ptrace in one borrowed thread
 * (ctl_agent_request): no signal is sent to the process. */
struct ctl_agent {
	long pid;
	char dir[4096];         /* where it writes its files, as far as the
				 * CLI can tell: the agent's answer to each
				 * request says where it wrote (ctl_agent_path) */
};
/* Finds pid's agent and its directory; refuses a process detached from
 * heaptrail without touching it. live: for the live endpoint (`serve`),
 * else for `leaks` (what a refusal advises). Prints the error and
 * returns -1. */
int ctl_agent_open(long pid, struct ctl_agent *a, bool live);
/* The path of a file the agent said it wrote (wrote, from a request),
 * for the CLI: a relative one (an output directory the agent could not
 * name at its start) is read against the process's working directory. */
void ctl_agent_path(const struct ctl_agent *a, const char *wrote, char *path, size_t cap);
/* Asks for a leak check (increased: only what grew) and waits up to
 * timeout_ms for its file, whose path goes to path. 0, or -1 with why
 * ("" when the cause was printed). */
int ctl_agent_leak_check(const struct ctl_agent *a, int increased, long timeout_ms,
			 char *path, size_t cap, char *why, size_t whycap);
/* Asks for value (FMT_SIGVAL_MAGIC | FMT_SIGVAL_DUMP: the live dump; |
 * 1: a check of what increased), again while the agent says not now,
 * up to timeout_ms. The path of the file written goes to wrote
 * (FMT_REQUEST_PATH_MAX bytes; "" from an older agent, which does not
 * say). 0, or -1 with why ("" when printed). */
int ctl_agent_ask(const struct ctl_agent *a, int value, long timeout_ms, char *why,
		  size_t whycap, char *wrote);
/* /proc/PID/FILE whole, malloc'd, NUL-terminated; NULL on failure. */
char *ctl_read_proc(long pid, const char *file, size_t *len);
/* NAME's value in a NUL-separated environment block, or NULL. */
const char *ctl_env_get(const char *env, size_t len, const char *name);

/* ---- the live endpoint (http.c, routes.c, push.c; live.h) ----
 * pprof's /debug/pprof/heap, Prometheus' /metrics, ... served by the CLI
 * for a process running under the agent. */
struct ctl_live;
struct prof_sym_cache;
/* What the page at / is asked for: the HTML page of a run as `heaptrail
 * html` draws it, built above this layer (cli/page.c: cli_html_build). */
struct ctl_page_opts {
	const char *binary_path;
	double min_share;       /* as `html --min-share` */
	long pid;               /* only this process's numbered dumps (-1: every file) */
	size_t max_dumps;       /* with pid: its last N dumps (0: all) */
	struct prof_sym_cache *sym_cache; /* may be NULL */
	const char *live_url;   /* the page fetches its data again from here, or NULL */
	long live_every_ms;
	bool data_only;         /* the page's JSON data alone */
	bool quiet;             /* print nothing: the error goes to why */
	bool keep_dumps;        /* keep what was read of each dump for the next call
				   (the live page: a dump is not changed once written) */
};
/* The page (or its data) of the run in dir into *out (*len bytes,
 * malloc'd: the caller frees it). 0, or -1 with why. */
typedef int (*ctl_page_fn)(const char *dir, const struct ctl_page_opts *o, char **out,
			   size_t *len, char *why, size_t whycap);
struct ctl_live_opts {
	const char *addr;       /* host:port or a unix socket path; NULL = off */
	bool public_ok;         /* --http-allow-remote: may bind beyond loopback */
	const char *push;       /* --push URL: Pyroscope's server; NULL = off */
	const char *push_name;  /* --push-name: the application's name */
	long push_every_ms;     /* --push-every (default 15 s) */
	ctl_page_fn page;       /* builds the page at / (NULL: 404) */
};
#define CTL_LIVE_PUSH_HELP \
	"  --push URL             push the heap profile to Pyroscope (http://HOST:4040)\n" \
	"  --push-every DURATION  how often (default 15s)\n" \
	"  --push-name NAME       the application's name (default: the program's)\n"
/* Binds the endpoint (before the program starts, so errors come first)
 * and checks the push URL; prints the error and returns NULL on failure.
 * Without --http, only pushes. NULL too when neither is asked for. */
struct ctl_live *ctl_live_bind(const struct ctl_live_opts *o);
/* Serves l, and pushes, on threads of their own for agent a (copied);
 * name: the program, for the push's default application name. 0 or -1. */
int ctl_live_start(struct ctl_live *l, const struct ctl_agent *a, const char *name);
/* Stops the thread, closes the socket, frees l. */
void ctl_live_stop(struct ctl_live *l);

#endif
