/*
 * options — the parts of HEAPTRAIL_OPTIONS that both halves read: the
 * agent (config.c) applies them at start-up, and `heaptrail leaks PID`
 * reads a running program's HEAPTRAIL_OPTIONS to know which signal asks
 * it for a leak check. One parser, so the two never disagree.
 *
 * The string is comma-separated options, each "key=value" or jemalloc's
 * "key:value" (a comma inside parentheses is part of a value:
 * alloc_fn=F(ctx=arg1,size=arg2)->ret); options apply in order, so a key given twice takes its
 * last well-formed value, and a malformed or refused value leaves the
 * earlier one in place (the agent says so on stderr).
 *
 * Linked into the agent: no allocation, no stdio, no locale; every
 * function here is hook-safe and signal-safe.
 */
#ifndef HEAPTRAIL_FORMAT_OPTIONS_H
#define HEAPTRAIL_FORMAT_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What fmt_signal_parse says of a value. */
#define FMT_SIGNAL_BAD (-1)      /* not a signal number or name */
#define FMT_SIGNAL_REFUSED (-2)  /* a signal the agent must not take over */

/* A signal given as a number ("12", "0" = off) or a name ("SIGUSR2",
 * "usr2", "SIGRTMIN+3", "RTMAX-2"): its number, 0 for off, or
 * FMT_SIGNAL_BAD / FMT_SIGNAL_REFUSED. Refused are the signals that
 * report a fault or end the program from libc (SIGSEGV, SIGBUS, SIGILL,
 * SIGFPE, SIGTRAP, SIGSYS, SIGABRT) — a handler that returns from one
 * runs the faulting instruction again, for ever — and those that cannot
 * be caught (SIGKILL, SIGSTOP). */
int fmt_signal_parse(const char *s, size_t n);

/* Whether the agent may install a handler for sig (see above). */
bool fmt_signal_usable(int sig);

/* Calls fn(key, klen, value, vlen, arg) for each option of opts, in
 * order; an option without '=' or ':' gets value NULL. */
void fmt_options_each(const char *opts,
		      void (*fn)(const char *key, size_t klen, const char *val, size_t vlen,
				 void *arg),
		      void *arg);

/* The default of leak_check_signal (the agent's config.c reads the
 * option; `heaptrail run` keeps --signal off it). */
int fmt_leak_check_signal_default(void);

/* A value the user gave, fit to be quoted in a one-line message: n bytes
 * of s into out (cap bytes, at least FMT_SHOWN_MIN), each control byte
 * (a newline, an escape) as '?'; one that does not fit is cut, and
 * "... (N bytes)" says how long it was. Returns out. Safe in the agent
 * (no libc). */
#define FMT_SHOWN_MIN 64
char *fmt_shown(char *out, size_t cap, const char *s, size_t n);

/* A run id (the `run` option): 1 to FMT_RUN_ID_MAX letters, digits, '-'
 * or '_'. fmt_run_id writes the id the agent ends up with for opts (the
 * last well-formed run=, "" when none) into out (cap FMT_RUN_ID_MAX + 1)
 * and returns its length; `heaptrail run` keeps only its own reports
 * by it. */
#define FMT_RUN_ID_MAX 63
bool fmt_run_id_ok(const char *s, size_t n);
size_t fmt_run_id(const char *opts, char out[FMT_RUN_ID_MAX + 1]);

/* A request of heaptrail's: the value heaptrail_request takes (the CLI
 * calls it by ptrace: `heaptrail leaks`, the live endpoint), and the
 * sigqueue value with which the leak check signal asks for a check (an
 * older heaptrail sent it so): | 1 for "only what increased". A signal
 * without it (a plain kill or raise, the program's own sigqueue) is the
 * program's. With FMT_SIGVAL_DUMP instead (the live endpoint, `heaptrail
 * serve`), the agent writes a heap dump, PREFIX.PID.live.heap
 * (FMT_HEAP_LIVE), rewritten in place, rather than a leak check. */
#define FMT_SIGVAL_MAGIC 0x48540000
#define FMT_SIGVAL_DUMP 2
#define FMT_SIGVAL_IS_OURS(v) (((unsigned)(v) & ~3u) == FMT_SIGVAL_MAGIC)
/* heaptrail_request's fourth argument, when not NULL: a buffer of this
 * many bytes where the agent writes the path of the file it wrote (as
 * the process names it), "" when none. The CLI reads its files there
 * rather than guess the agent's directory: output= and prefix= are made
 * absolute against the working directory the process started in. */
#define FMT_REQUEST_PATH_MAX 4352

/* Value parsers shared by the agent (config.c) and the CLI (which checks
 * `heaptrail run`'s flags before starting anything). Each takes n bytes
 * (not NUL-terminated) and returns false when they are malformed,
 * leaving *out alone. */
/* Decimal digits only, at most max. */
bool fmt_opt_num(const char *s, size_t n, uint64_t max, uint64_t *out);
/* 4096, 512k, 64m, 1g (suffix case-insensitive), at most 2^50 bytes. */
bool fmt_opt_size(const char *s, size_t n, uint64_t *out);
/* 10s, 500ms, 2m; a bare number is seconds; *out in milliseconds. */
bool fmt_opt_duration(const char *s, size_t n, uint64_t *out);

#endif
