/*
 * hostile.h — helpers for the hostile-host programs (tests/hostile/run.py
 * reads the @ directives in each program's header; see run.py).
 *
 * The leak helpers come from the e2e suite (kinds.h): a block is dropped
 * inside a NOINLINE function and the caller scrubs its dead stack, so
 * "definitely lost" means the same thing under valgrind and heaptrail.
 * die() reports an unexpected result on stderr and exits 90: the program
 * itself, bare, must never reach it.
 */
#ifndef HEAPTRAIL_HOSTILE_H
#define HEAPTRAIL_HOSTILE_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kinds.h"
#include "heaptrail.h"

#define die(...) do { fprintf(stderr, "hostile: " __VA_ARGS__); \
	fprintf(stderr, " (errno %d)\n", errno); exit(90); } while (0)

/* One definitely lost block of n bytes. */
NOINLINE static void leak_bytes(size_t n)
{
	char *p = malloc(n);
	memset(p, 'L', n);
	KEEP(p);
}

/* Milliseconds on the monotonic clock. */
static inline long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Sleeps ms milliseconds whatever signals arrive (bare or not). */
static inline void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Exits 91 when a blocking call that should have waited want_ms (0: any
 * time) failed with EINTR (rc < 0) or came back early from start, as
 * many programs treat either as fatal; what names the call. */
static inline void die_if_interrupted(const char *what, int rc, long long start, long want_ms)
{
	long long took = now_ms() - start;
	if (rc < 0 && errno == EINTR) {
		fprintf(stderr, "hostile: %s failed with EINTR\n", what);
		exit(91);
	}
	if (took + 5 < want_ms) {
		fprintf(stderr, "hostile: %s returned after %lld ms of %ld (%s)\n", what, took,
			want_ms, rc < 0 ? strerror(errno) : "no error");
		exit(91);
	}
}

/* Writes a line without stdio.  Programs that exit with threads still
 * running print with it: stdout's buffer is one of libc's caches, which
 * are not released at exit while other threads may still use them (the
 * docs/design.md's "Known differences"), so it would show up as still reachable. */
static inline void say(const char *s)
{
	size_t n = strlen(s);
	while (n) {
		ssize_t w = write(1, s, n);
		if (w <= 0)
			break;
		s += w;
		n -= (size_t)w;
	}
}

/* Asks the agent for a leak check when it is there (weak symbol). */
static inline void maybe_leak_check(void)
{
	if (heaptrail_leak_check)
		heaptrail_leak_check(HEAPTRAIL_LEAKS_ALL);
}

#endif
