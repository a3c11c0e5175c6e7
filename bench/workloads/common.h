/*
 * common.h — what the synthetic workloads share: a fixed-seed xorshift
 * generator, the request-size distribution and argument parsing.
 *
 * Every workload takes the number of malloc/free operations as its first
 * argument (bench/run scales it with BENCH_SCALE) and prints a checksum of
 * what it wrote into the blocks, so the compiler cannot drop the work.
 * Built -O2 -fomit-frame-pointer: distro binaries have no frame pointers,
 * and the tools must unwind them anyway.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define LIVE_BLOCKS 10000	/* the rolling live set */
#define MIN_SIZE 16
#define MAX_SIZE 1024

static inline uint64_t xorshift64(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* 16..1024 bytes, uniform */
static inline size_t request_size(uint64_t r)
{
	return MIN_SIZE + (size_t)((r >> 20) % (MAX_SIZE - MIN_SIZE + 1));
}

static inline long arg_ops(int argc, char **argv, long dflt)
{
	if (argc < 2)
		return dflt;
	char *end;
	long n = strtol(argv[1], &end, 10);
	if (*end || n < 1) {
		fprintf(stderr, "%s: operation count '%s' is not a positive number\n",
			argv[0], argv[1]);
		exit(2);
	}
	return n;
}

static inline void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (!p) {
		fprintf(stderr, "out of memory allocating %zu bytes\n", n);
		abort();
	}
	return p;
}

#endif
