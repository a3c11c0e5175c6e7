/*
 * pools — the cost of a pool allocation seen by heaptrail: N chunks of
 * 16..1024 bytes carved from four arenas (bump allocation over 64 KiB
 * superblocks), each arena reset every 1,000 of its chunks.
 *
 * Built twice (bench/pools/run): with -DBENCH_POOL_API every chunk, reset
 * and arena is told to heaptrail through the API (heaptrail_pool_*, by
 * HEAPTRAIL_CALL: nothing without the agent); without it, the program
 * says nothing and heaptrail hooks arena_alloc/arena_reset/arena_new by
 * name (--alloc-fn...). argv[1] is N; prints a checksum of what was
 * written into the chunks.
 */
#include <string.h>

#include "common.h"
#ifdef BENCH_POOL_API
#include "heaptrail.h"
#endif

#define NOINLINE __attribute__((noipa))
#define SUPER (64 * 1024)
#define NARENAS 4
#define RESET_EVERY 1000

struct arena {
	char *blocks[64];   /* superblocks, the current one last */
	int nblocks;
	size_t used;        /* in the current one */
	long count;
};

NOINLINE struct arena *arena_new(void)
{
	struct arena *a = calloc(1, sizeof *a);
#ifdef BENCH_POOL_API
	HEAPTRAIL_CALL(pool_create, a, NULL, "bench");
#endif
	return a;
}

NOINLINE void *arena_alloc(struct arena *a, size_t n)
{
	size_t n16 = (n + 15) & ~(size_t)15;
	if (!a->nblocks || a->used + n16 > SUPER) {
		a->blocks[a->nblocks++] = malloc(SUPER);
		a->used = 0;
	}
	void *p = a->blocks[a->nblocks - 1] + a->used;
	a->used += n16;
	a->count++;
#ifdef BENCH_POOL_API
	HEAPTRAIL_CALL(pool_alloc, a, p, n);
#endif
	return p;
}

NOINLINE void arena_reset(struct arena *a)
{
#ifdef BENCH_POOL_API
	HEAPTRAIL_CALL(pool_reset, a);
#endif
	for (int i = 0; i < a->nblocks; i++)
		free(a->blocks[i]);
	a->nblocks = 0;
	a->used = 0;
	a->count = 0;
}

int main(int argc, char **argv)
{
	long ops = arg_ops(argc, argv, 2000000);
	struct arena *arenas[NARENAS];
	for (int i = 0; i < NARENAS; i++)
		arenas[i] = arena_new();
	uint64_t s = 88172645463325252ull, sum = 0;
	for (long i = 0; i < ops; i++) {
		uint64_t r = xorshift64(&s);
		struct arena *a = arenas[r % NARENAS];
		if (a->count == RESET_EVERY)
			arena_reset(a);
		unsigned char *p = arena_alloc(a, request_size(r));
		p[0] = (unsigned char)r;
		sum += p[0];
	}
	printf("%llu\n", (unsigned long long)sum);
	return 0;
}
