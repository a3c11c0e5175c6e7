/*
 * attach_refresh.c — a cache filled at start and refreshed slot by slot
 * while it runs: each refresh frees a random slot's block and allocates
 * its successor of the same size, so the heap stays flat while a dump
 * taken after an attach sees only the successors, rising
 * (tests/control/test_attach_refresh.py).
 *
 * attach_refresh [leak]: fills 4096 slots of 1 KiB (cache_fill), prints
 *     "ready", then every millisecond refreshes one slot (cache_refresh);
 *     with "leak", leak_more also drops 256 bytes each millisecond.
 * stdin: "count" -> "ok REFRESHES LEAKED" (so far), "quit" -> frees the
 *     cache, prints "done", exit 0.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOTS 4096
#define SLOT_SIZE 1024

static char *slots[SLOTS];
static atomic_ulong refreshes, leaked;
static atomic_int quitting;
static int leaking;

__attribute__((noinline)) static void cache_fill(void)
{
	for (int i = 0; i < SLOTS; i++) {
		slots[i] = malloc(SLOT_SIZE);
		memset(slots[i], i & 0xff, SLOT_SIZE);
	}
}

__attribute__((noinline)) static void cache_refresh(unsigned *seed)
{
	int i = (int)(rand_r(seed) % SLOTS);
	free(slots[i]);
	slots[i] = malloc(SLOT_SIZE);
	memset(slots[i], i & 0xff, SLOT_SIZE);
	atomic_fetch_add(&refreshes, 1);
}

__attribute__((noinline)) static void leak_more(void)
{
	char *p = malloc(256);
	p[0] = 1;
	__asm__ volatile("" : : "r"(p) : "memory");
	atomic_fetch_add(&leaked, 256);
}

static void *worker(void *arg)
{
	unsigned seed = 12345;
	(void)arg;
	while (!atomic_load(&quitting)) {
		cache_refresh(&seed);
		if (leaking)
			leak_more();
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	char line[64];
	pthread_t t;
	leaking = argc > 1 && !strcmp(argv[1], "leak");
	cache_fill();
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pthread_create(&t, NULL, worker, NULL))
		return 1;
	printf("ready\n");
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "count", 5)) {
			printf("ok %lu %lu\n", atomic_load(&refreshes), atomic_load(&leaked));
		} else if (!strncmp(line, "quit", 4)) {
			break;
		}
	}
	atomic_store(&quitting, 1);
	pthread_join(t, NULL);
	for (int i = 0; i < SLOTS; i++)
		free(slots[i]);
	printf("done\n");
	return 0;
}
