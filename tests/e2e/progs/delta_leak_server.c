/*
 * delta_leak_server — a server-like loop for leak checks while the
 * program runs.  Each line of stdin is a request: log_request leaks a
 * 48-byte log entry per request (the pointer is dropped), cache_put keeps
 * a copy of the request in a bounded cache of 4 entries (64 bytes each,
 * the oldest freed when a fifth arrives).  The line "check" asks for a
 * leak check of what increased since the previous one:
 * heaptrail_leak_check(HEAPTRAIL_LEAKS_INCREASED) under heaptrail,
 * VALGRIND_DO_ADDED_LEAK_CHECK under valgrind, nothing in a bare run.
 *
 * The runner feeds 5 requests, "check", 3 requests, "check", then EOF.
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   check 1: definitely lost +240/5 (5 x 48, all log_request)
 *   check 2: definitely lost +144/3 (3 x 48, all log_request);
 *            still reachable +0/0 (the cache is full at 4 x 64 and
 *            stays so: its blocks are replaced, not added)
 *   at exit: log_request 8 x 48 = 384/8 definitely lost, the cache
 *            4 x 64 = 256/4 still reachable (stdio's buffers are freed
 *            by __libc_freeres)
 *   in use at exit: 640 bytes in 12 blocks
 *
 * @stdin req-1\nreq-2\nreq-3\nreq-4\nreq-5\ncheck\nreq-6\nreq-7\nreq-8\ncheck\n
 * @proc 0 exit=0 in_use=640/12
 * @kinds 0 definitely_lost=384/8 still_reachable=256/4
 * @leak 0 log_request 384/8 definitely_lost
 * @leak 0 cache_put 256/4 still_reachable
 * @check 1 definitely_lost 240/5 log_request
 * @check 2 definitely_lost 144/3 log_request
 * @check 2 still_reachable 0/0
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#endif
#endif

#include "kinds.h"

/* Declared here as well as in heaptrail.h so the program builds against
 * any version of the header; weak, so it runs without the agent. */
#ifndef HEAPTRAIL_LEAKS_ALL
#define HEAPTRAIL_LEAKS_ALL 0
#endif
#ifndef HEAPTRAIL_LEAKS_INCREASED
#define HEAPTRAIL_LEAKS_INCREASED 1
#endif
int heaptrail_leak_check(int flags) __attribute__((weak));

#define CACHE_SLOTS 4

struct log_entry {
	long serial;
	char text[40];
};

static char *cache[CACHE_SLOTS];
static long served;

/* Leaks one entry per request: nothing keeps the pointer. */
NOINLINE void log_request(const char *line)
{
	struct log_entry *e = malloc(sizeof(*e)); /* @site log_request */

	e->serial = ++served;
	memset(e->text, 0, sizeof(e->text));
	strncpy(e->text, line, sizeof(e->text) - 1);
	KEEP(e);
}

/* Keeps the last CACHE_SLOTS requests; the oldest is freed. */
NOINLINE void cache_put(const char *line)
{
	long slot = served % CACHE_SLOTS;
	char *copy = malloc(64); /* @site cache_put */

	memset(copy, 0, 64);
	strncpy(copy, line, 63);
	free(cache[slot]);
	STORE(cache[slot], copy);
}

NOINLINE void handle_request(const char *line)
{
	log_request(line);
	cache_put(line);
	printf("served %s\n", line);
}

NOINLINE void leak_check(int n)
{
	printf("check %d\n", n);
	fflush(stdout);
#ifdef RUNNING_ON_VALGRIND
	if (RUNNING_ON_VALGRIND) {
		VALGRIND_DO_ADDED_LEAK_CHECK;
		return;
	}
#endif
	if (heaptrail_leak_check)
		heaptrail_leak_check(HEAPTRAIL_LEAKS_INCREASED);
}

int main(void)
{
	char line[128];
	int checks = 0;

	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (strcmp(line, "check") == 0) {
			scrub_stack();
			leak_check(++checks);
		} else {
			handle_request(line);
		}
	}
	scrub_stack();
	printf("%ld requests, %d checks\n", served, checks);
	return 0;
}
