/*
 * sampled_double — double frees of big blocks, for sampled mode's
 * quarantine (tests/agent/test_errors.py, errors:sampled-double; valgrind
 * memcheck is the oracle). Every block is 64 KiB: at --sample 4096 one is
 * sampled with probability 1 - exp(-16), so all of them are.
 *
 *   twice: three blocks made by make_block, each freed by release,
 *          then again by free_again (one line)       3 errors, 1 context
 *          one more made by make_block, freed by release, then given
 *          to realloc by realloc_freed (returns NULL, as under valgrind)
 *                                                    1 error
 *          then the blocks of churn (below) and "done null"
 *   churn N [T]: N rounds of allocating and freeing 64 KiB blocks,
 *          eight live at a time, freed out of order, in T threads at once
 *          (1 by default): addresses come back once the quarantine lets
 *          them go (stderr says how many allocations were handed an
 *          address seen before), and nothing is an error
 *
 *   small: "twice" with blocks of 1,000 bytes (too small for the
 *          quarantine; under --guard 1 --sample 16, on guarded pages,
 *          which stay inaccessible after their free: errors:guard-double)
 *
 * Bare, glibc aborts at the first double free; under valgrind, and
 * heaptrail, the program goes on and exits 0.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE (64 << 10)
static size_t block_size = SIZE;  /* make_block's */

__attribute__((noinline)) static void keep(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

__attribute__((noinline)) static char *make_block(void)
{
	char *p = malloc(block_size);
	keep(p);
	return p;
}

__attribute__((noinline)) static void release(char *p)
{
	free(p);
}

__attribute__((noinline)) static void free_again(char **ps, int n)
{
	for (volatile int i = 0; i < n; i++)  /* one call site, not unrolled */
		free(ps[i]);
}

__attribute__((noinline)) static void *realloc_freed(char *p)
{
	return realloc(p, 100);
}

/* The addresses the first thread was handed, up to SEEN of them. */
#define SEEN 4096
static void *seen[SEEN];
static int nseen, reused;

static void note_address(void *p)
{
	for (int i = 0; i < nseen; i++)
		if (seen[i] == p) {
			reused++;
			return;
		}
	if (nseen < SEEN)
		seen[nseen++] = p;
}

__attribute__((noinline)) static unsigned churn(int rounds, int first)
{
	char *live[8] = { 0 };
	unsigned sum = 0, x = 12345;
	for (int i = 0; i < rounds; i++) {
		x = x * 1103515245u + 12345u;
		int k = (int)((x >> 16) % 8);
		if (live[k]) {
			sum += (unsigned char)live[k][(x >> 8) % SIZE];
			free(live[k]);
		}
		live[k] = malloc(SIZE);
		keep(live[k]);
		if (first)
			note_address(live[k]);
		memset(live[k], i & 0xff, SIZE);
	}
	for (int k = 0; k < 8; k++)
		free(live[k]);
	return sum;
}

static int rounds;
static unsigned sums[16];

static void *churner(void *arg)
{
	int t = (int)(long)arg;
	sums[t] = churn(rounds, t == 0);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "churn") == 0) {
		int n = argc > 3 ? atoi(argv[3]) : 1;
		pthread_t th[16];
		rounds = atoi(argv[2]);
		if (n < 1 || n > 16)
			return 2;
		for (int t = 1; t < n; t++)
			pthread_create(&th[t], NULL, churner, (void *)(long)t);
		churner(0);
		for (int t = 1; t < n; t++)
			pthread_join(th[t], NULL);
		for (int t = 0; t < n; t++)
			printf("churn %u\n", sums[t]);
		fprintf(stderr, "reused %d\n", reused);
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "small") == 0)
		block_size = 1000;
	char *ps[3];
	for (int i = 0; i < 3; i++) {
		ps[i] = make_block();
		release(ps[i]);
	}
	free_again(ps, 3);
	char *r = make_block();
	release(r);
	void *q = realloc_freed(r);
	keep(q);
	printf("churn %u\n", churn(2000, 0));
	printf("done %s\n", q ? "block" : "null");
	return 0;
}
