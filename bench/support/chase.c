/*
 * chase MIB — the time of one load that misses the caches, on this
 * machine: a pointer chase through MIB mebibytes of lines in a random
 * cycle, so every load waits for the one before and none is prefetched.
 * Used by bench/exact-floor.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define LINE_WORDS 8    /* one pointer per 64-byte line */
#define LOADS 20000000L

int main(int argc, char **argv)
{
	long mib = argc > 1 ? atol(argv[1]) : 0;
	if (mib < 1 || mib > 4096) {
		fprintf(stderr, "usage: chase MIB (1..4096)\n");
		return 2;
	}
	size_t lines = (size_t)mib << 20 >> 6;
	uint64_t *a = aligned_alloc(64, lines * 64);
	size_t *order = malloc(lines * sizeof *order);
	if (!a || !order) {
		fprintf(stderr, "chase: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < lines; i++)
		order[i] = i;
	uint64_t x = 0x9E3779B97F4A7C15ull;
	for (size_t i = lines - 1; i > 0; i--) {  /* Fisher-Yates, xorshift */
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		size_t j = x % (i + 1), t = order[i];
		order[i] = order[j], order[j] = t;
	}
	for (size_t i = 0; i < lines; i++)
		a[order[i] * LINE_WORDS] = order[(i + 1) % lines] * LINE_WORDS;
	struct timespec t0, t1;
	volatile uint64_t sink;
	uint64_t p = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < LOADS; i++)
		p = a[p];
	clock_gettime(CLOCK_MONOTONIC, &t1);
	sink = p;
	(void)sink;
	double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / LOADS;
	printf("memory latency over %ld MiB: %.0f ns a load\n", mib, ns);
	return 0;
}
