/*
 * live — allocation cost with many live blocks. Allocates N blocks of
 * 16..128 bytes from one call site and keeps them (the fill), then does P
 * malloc/free pairs over them (the pairs): each frees a random live block
 * and allocates a new one in its slot, so N blocks stay live throughout.
 * Prints the wall time per allocation of each phase in ns, the same in
 * the process's CPU time (what a busy machine's other processes change
 * less: time spent waiting for a core is left out), and a checksum.
 *   live N P
 * fill() and pairs() are separate functions so that callgrind can count
 * each alone (--toggle-collect=pairs). Used by bench/live-blocks.
 */
#include <time.h>

#include "common.h"

static unsigned char **keep;

static double clock_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static double cpu_ns(void)
{
	return clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

static inline size_t small_size(uint64_t r)
{
	return 16 + (size_t)((r >> 24) % 113);
}

__attribute__((noinline)) void fill(long n, uint64_t *rng)
{
	for (long i = 0; i < n; i++) {
		size_t sz = small_size(xorshift64(rng));
		keep[i] = xmalloc(sz);
		keep[i][0] = (unsigned char)sz;
	}
}

__attribute__((noinline)) uint64_t pairs(long n, long p, uint64_t *rng)
{
	uint64_t sum = 0;
	for (long i = 0; i < p; i++) {
		uint64_t r = xorshift64(rng);
		long slot = (long)(r % (uint64_t)n);
		sum += keep[slot][0];
		free(keep[slot]);
		size_t sz = small_size(r);
		keep[slot] = xmalloc(sz);
		keep[slot][0] = (unsigned char)sz;
	}
	return sum;
}

int main(int argc, char **argv)
{
	long n = arg_ops(argc, argv, 1000000);
	long p = argc > 2 ? arg_ops(argc - 1, argv + 1, 1000000) : 1000000;
	uint64_t rng = 0x9E3779B97F4A7C15ull;
	keep = malloc((size_t)n * sizeof *keep);
	if (!keep)
		return 1;
	double t0 = now_ns(), c0 = cpu_ns();
	fill(n, &rng);
	double t1 = now_ns(), c1 = cpu_ns();
	uint64_t sum = pairs(n, p, &rng);
	double t2 = now_ns(), c2 = cpu_ns();
	printf("live: %ld blocks, %ld pairs, fill %.1f ns/alloc, pairs %.1f ns/pair, "
	       "cpu-fill %.1f cpu-pairs %.1f, checksum %llu\n",
	       n, p, (t1 - t0) / n, (t2 - t1) / p, (c1 - c0) / n, (c2 - c1) / p,
	       (unsigned long long)sum);
	return 0;
}
