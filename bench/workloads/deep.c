/*
 * deep — churn's malloc/free pairs, each made 40 frames below main: a
 * tool that captures the whole stack pays for the depth here. The
 * recursion goes through two functions chosen by bits of a per-call
 * variant, so there are a handful (8) of distinct stacks, not one. Each
 * frame does work after the call returns, so the compiler can turn
 * neither the recursion into a loop nor the call into a tail call.
 */
#include "common.h"

#define DEPTH 40

static unsigned char *live[LIVE_BLOCKS];
static uint64_t rng = 0x9E3779B97F4A7C15ull;

__attribute__((noinline)) static uint64_t leaf(uint64_t x)
{
	uint64_t r = xorshift64(&rng);
	unsigned slot = (unsigned)(r % LIVE_BLOCKS);
	size_t n = request_size(r);
	uint64_t old = live[slot][0];
	free(live[slot]);
	live[slot] = xmalloc(n);
	live[slot][0] = (unsigned char)(r ^ x);
	live[slot][n - 1] = (unsigned char)x;
	return old;
}

__attribute__((noinline)) static uint64_t down_b(int depth, unsigned variant, uint64_t x);

__attribute__((noinline)) static uint64_t down_a(int depth, unsigned variant, uint64_t x)
{
	if (depth == 0)
		return leaf(x) + 1;	/* + 1: a call, not a jump */
	uint64_t r = (variant >> (depth % 3)) & 1 ? down_b(depth - 1, variant, x * 31 + 1)
						    : down_a(depth - 1, variant, x * 31 + 1);
	return (r ^ (r >> 7)) + (uint64_t)depth;
}

__attribute__((noinline)) static uint64_t down_b(int depth, unsigned variant, uint64_t x)
{
	if (depth == 0)
		return leaf(x) + 1;
	uint64_t r = (variant >> (depth % 3)) & 1 ? down_b(depth - 1, variant, x * 17 + 3)
						    : down_a(depth - 1, variant, x * 17 + 3);
	return (r * 3) ^ (uint64_t)depth;
}

int main(int argc, char **argv)
{
	long ops = arg_ops(argc, argv, 6000000);
	uint64_t sum = 0;

	for (int i = 0; i < LIVE_BLOCKS; i++) {
		size_t n = request_size(xorshift64(&rng));
		live[i] = xmalloc(n);
		live[i][0] = (unsigned char)n;
	}
	/* main → down_* × 40 → leaf → malloc: 42 frames below malloc */
	for (long i = 0; i < ops; i++)
		sum += down_a(DEPTH - 1, (unsigned)(i & 7), (uint64_t)i);
	for (int i = 0; i < LIVE_BLOCKS; i++)
		free(live[i]);
	printf("deep: %ld ops, checksum %llu\n", ops, (unsigned long long)sum);
	return 0;
}
