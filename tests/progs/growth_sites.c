/*
 * growth_sites — three allocation sites with the shapes `heaptrail growth`
 * must tell apart, over STEPS steps of STEP_MS each (about a second):
 *
 *   leak_slowly  48 KiB per step (3 blocks of 16 KiB), never freed while
 *                the program runs: the slow leak, 1.9 MiB at the end
 *   fill_cache   512 KiB per step for the first 10 steps, then nothing:
 *                a cache that warms up and stays flat at 5 MiB, bigger
 *                than the leak
 *   churn        each step allocates 0 to 3 MiB (64 KiB blocks, a fixed
 *                pseudo-random sequence) and frees the previous step's
 *
 * Everything is freed before exit, so an exit-time leak check sees
 * nothing. Memory is never touched, so RSS stays small.
 */
#include <stdlib.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))
#define STEPS 40
#define STEP_MS 25
#define KIB 1024

static void *leak[STEPS * 3], *cache[10 * 4], *churned[48];
static size_t nleak, ncache, nchurned;
static unsigned rng = 12345;
void *volatile sink;

NOINLINE void leak_slowly(void)
{
	for (int i = 0; i < 3; i++)
		sink = leak[nleak++] = malloc(16 * KIB);
}

NOINLINE void fill_cache(int step)
{
	if (step < 10)
		for (int i = 0; i < 4; i++)
			sink = cache[ncache++] = malloc(128 * KIB);
}

NOINLINE void churn(void)
{
	for (size_t i = 0; i < nchurned; i++)
		free(churned[i]);
	rng = rng * 1103515245 + 12345;
	nchurned = (rng >> 16) % 49;
	for (size_t i = 0; i < nchurned; i++)
		sink = churned[i] = malloc(64 * KIB);
}

int main(void)
{
	struct timespec ts = { 0, STEP_MS * 1000000L };
	for (int step = 0; step < STEPS; step++) {
		leak_slowly();
		fill_cache(step);
		churn();
		nanosleep(&ts, NULL);
	}
	/* The big blocks go first: a dump that fell due during the last
	 * sleep is written at the first recorded event after it, which in
	 * exact mode is the first big block's (the agent looks at the clock
	 * at every 64th small event of a thread, but at every block of
	 * 64 KiB or more), so it shows the heap of the loop, not the leak
	 * half freed. */
	for (size_t i = 0; i < nchurned; i++)
		free(churned[i]);
	for (size_t i = 0; i < ncache; i++)
		free(cache[i]);
	for (size_t i = 0; i < nleak; i++)
		free(leak[i]);
	return 0;
}
