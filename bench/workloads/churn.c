/*
 * churn — one thread, N malloc/free pairs (default 20 M) of 16..1024
 * bytes over a rolling live set of 10 000 blocks: each step frees a random
 * live block and puts a new one in its slot. The allocator's fast path and
 * the tool's per-call cost are all that is measured.
 */
#include <string.h>

#include "common.h"

static unsigned char *live[LIVE_BLOCKS];

int main(int argc, char **argv)
{
	long ops = arg_ops(argc, argv, 20000000);
	uint64_t rng = 0x9E3779B97F4A7C15ull, sum = 0;

	for (int i = 0; i < LIVE_BLOCKS; i++) {
		size_t n = request_size(xorshift64(&rng));
		live[i] = xmalloc(n);
		live[i][0] = (unsigned char)n;
	}
	for (long i = 0; i < ops; i++) {
		uint64_t r = xorshift64(&rng);
		unsigned slot = (unsigned)(r % LIVE_BLOCKS);
		size_t n = request_size(r);
		sum += live[slot][0];
		free(live[slot]);
		live[slot] = xmalloc(n);
		live[slot][0] = (unsigned char)r;
		live[slot][n - 1] = (unsigned char)i;
	}
	for (int i = 0; i < LIVE_BLOCKS; i++)
		free(live[i]);
	printf("churn: %ld ops, checksum %llu\n", ops, (unsigned long long)sum);
	return 0;
}
