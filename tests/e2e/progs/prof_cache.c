/*
 * prof_cache — a "fake leak": a cache that grows while the program runs
 * and is freed at exit, which a leak check at exit never sees.
 *
 *   load_config   96 MiB at start-up (96 blocks of 1 MiB), kept to the end:
 *                 the biggest site, but it does not grow
 *   cache_grow    1 MiB per step (8 blocks of 128 KiB), 50 steps: the
 *                 grower, 50 MiB at the end
 *   handle_request  8 MiB per step in 64 blocks of 128 KiB, each freed
 *                 before the step ends: much allocated, nothing kept
 *
 * Each step sleeps STEP_MS (default 20 ms; the first argument changes it),
 * so the run takes about a second and timers and signals have time to
 * fire.  A sleep cut short by a signal (EINTR) is resumed for the time
 * left, and counted: when any was, the program says so on stderr
 * ("prof_cache: nanosleep interrupted N times"), as a program that does
 * not expect signals would notice them.  With the cache full the program asks for a heap dump
 * (heaptrail_dump(NULL) under heaptrail, mallctl("prof.dump") under
 * jemalloc, nothing in a bare run), then frees everything.  Memory is
 * never touched: RSS stays small.
 *
 * Peak of live bytes: 146 MiB (+ at most 8 MiB of a request in flight).
 * Allocated in all: 96 + 50 * 9 = 546 MiB.  A dump of the full cache
 * alone names load_config first; its difference from any earlier dump
 * names cache_grow first.
 *
 * The output is the same with and without an agent.
 *
 * @prof
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common.h"

int heaptrail_dump(const char *path) __attribute__((weak));
int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp,
	    size_t newlen) __attribute__((weak));

#define MIB (1024 * 1024)
#define STEPS 50
#define CONFIG_BLOCKS 96
#define CACHE_PER_STEP 8
#define BLOCK (128 * 1024)
#define REQUEST_BLOCKS 64

static void *config[CONFIG_BLOCKS];
static void *cache[STEPS * CACHE_PER_STEP];
static size_t cached;

NOINLINE void load_config(void)
{
	for (int i = 0; i < CONFIG_BLOCKS; i++) {
		config[i] = malloc(MIB); /* @site load_config */
		KEEP(config[i]);
	}
}

NOINLINE void cache_grow(void)
{
	for (int i = 0; i < CACHE_PER_STEP; i++) {
		cache[cached] = malloc(BLOCK); /* @site cache_grow */
		KEEP(cache[cached]);
		cached++;
	}
}

NOINLINE void handle_request(void)
{
	void *buf[REQUEST_BLOCKS];
	for (int i = 0; i < REQUEST_BLOCKS; i++) {
		buf[i] = malloc(BLOCK); /* @site handle_request */
		KEEP(buf[i]);
	}
	for (int i = 0; i < REQUEST_BLOCKS; i++)
		free(buf[i]);
}

static int interrupted;

static void nap(long ms)
{
	struct timespec req = { ms / 1000, (ms % 1000) * 1000000 }, rem;

	while (nanosleep(&req, &rem) != 0 && errno == EINTR) {
		interrupted++;
		req = rem;
	}
}

int main(int argc, char **argv)
{
	long step_ms = argc > 1 ? atol(argv[1]) : 20;

	load_config();
	for (int step = 0; step < STEPS; step++) {
		handle_request();
		cache_grow();
		nap(step_ms);
	}
	if (heaptrail_dump)
		heaptrail_dump(NULL);
	else if (mallctl)
		mallctl("prof.dump", NULL, NULL, NULL, 0);
	printf("cache: %zu blocks, %zu bytes\n", cached, cached * (size_t)BLOCK);
	for (size_t i = 0; i < cached; i++)
		free(cache[i]);
	for (int i = 0; i < CONFIG_BLOCKS; i++)
		free(config[i]);
	if (interrupted)
		fprintf(stderr, "prof_cache: nanosleep interrupted %d times\n", interrupted);
	return 0;
}
