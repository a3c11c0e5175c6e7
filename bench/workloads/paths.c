/*
 * paths — deep's malloc/free pairs, each from one of NPATHS distinct call
 * stacks, the path chosen at random per allocation: a tool that caches
 * whole stacks (a walk memo, a stack table keyed by return address) is
 * measured on many stacks instead of a handful.
 *
 *   paths OPS NPATHS MINDEPTH MAXDEPTH BASE
 *
 * The call chain below main is MINDEPTH..MAXDEPTH frames (path p gets
 * MINDEPTH + p % (MAXDEPTH - MINDEPTH + 1)) of BASE different functions;
 * the function at each of n levels spread evenly down the chain is chosen
 * by one base-BASE digit of p (n = the digits NPATHS needs), the others
 * are the first function. So the NPATHS stacks are the leaves of a tree
 * that branches BASE ways at n levels, like the call graph of a program:
 * two stacks share the frames above the level where their digits part.
 *
 * The family of bench/exact-instructions:
 *   paths OPS 8 40 40 2, ... 64, 1024, 65536   40 frames
 *   paths OPS 10000 5 10 10                    5-10 frames (shallow)
 * Built -O2 -fomit-frame-pointer like the other workloads.
 */
#include "common.h"

#define MAXFN 10
#define MAXLEVEL 64

static unsigned char *live[LIVE_BLOCKS];
static uint64_t rng = 0x9E3779B97F4A7C15ull;
/* which function each level of the current path calls */
static unsigned char choice[MAXLEVEL + 1];

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

typedef uint64_t (*step_fn)(int level, uint64_t x);
static const step_fn fns[MAXFN];

/* Ten functions that differ in their arithmetic, so that no two are
 * merged by the compiler (identical code folding); each does work after
 * its call, so the call is neither a tail call nor a loop. */
#define STEP(i)                                                                  \
	__attribute__((noinline)) static uint64_t step##i(int level, uint64_t x)  \
	{                                                                         \
		uint64_t r = level == 0 ? leaf(x) + 1                             \
				    : fns[choice[level - 1]](level - 1, x * (31 + 2 * i) + i); \
		return (r ^ (r >> (7 + i))) + (uint64_t)level * (i + 1);          \
	}
STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5) STEP(6) STEP(7) STEP(8) STEP(9)

static const step_fn fns[MAXFN] = { step0, step1, step2, step3, step4,
				    step5, step6, step7, step8, step9 };

static long arg_num(int argc, char **argv, int i, long dflt, long lo, long hi)
{
	if (argc <= i)
		return dflt;
	char *end;
	long v = strtol(argv[i], &end, 10);
	if (*end || v < lo || v > hi) {
		fprintf(stderr, "paths: argument %d '%s' is not in %ld..%ld\n", i, argv[i], lo, hi);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	long ops = arg_ops(argc, argv, 2000000);
	long npaths = arg_num(argc, argv, 2, 64, 1, 1L << 30);
	int mindepth = (int)arg_num(argc, argv, 3, 40, 1, MAXLEVEL);
	int maxdepth = (int)arg_num(argc, argv, 4, mindepth, mindepth, MAXLEVEL);
	int base = (int)arg_num(argc, argv, 5, 2, 2, MAXFN);
	int ndigits = 0;
	for (long span = 1; span < npaths; span *= base)
		ndigits++;
	if (ndigits > mindepth) {
		fprintf(stderr, "paths: %ld paths need %d levels, more than %d\n", npaths, ndigits,
			mindepth);
		return 2;
	}
	uint64_t sum = 0;

	for (int i = 0; i < LIVE_BLOCKS; i++) {
		size_t n = request_size(xorshift64(&rng));
		live[i] = xmalloc(n);
		live[i][0] = (unsigned char)n;
	}
	uint64_t pick = 0x2545F4914F6CDD1Dull;
	for (long i = 0; i < ops; i++) {
		long p = (long)(xorshift64(&pick) % (uint64_t)npaths);
		int depth = mindepth + (int)(p % (maxdepth - mindepth + 1));
		/* level depth-1 is called by main, level 0 calls leaf; digit
		 * j of p chooses the function at level depth-1 - j*depth/n */
		for (int l = 0; l < depth; l++)
			choice[l] = 0;
		long q = p;
		for (int j = 0; j < ndigits; j++, q /= base)
			choice[depth - 1 - j * depth / ndigits] = (unsigned char)(q % base);
		sum += fns[choice[depth - 1]](depth - 1, (uint64_t)i);
	}
	for (int i = 0; i < LIVE_BLOCKS; i++)
		free(live[i]);
	printf("paths: %ld ops over %ld paths, checksum %llu\n", ops, npaths,
	       (unsigned long long)sum);
	return 0;
}
