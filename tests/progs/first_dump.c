/*
 * first_dump — a heap dump taken before the program frees anything, then
 * one after it has: the pair a user diffs first (`pprof -base FIRST
 * LATER`). Both dumps go to the paths given as arguments, through the API.
 *
 *   keep_early   10 blocks of 1000 bytes, before the first dump, kept
 *   churn         5 blocks of 3000 bytes, allocated and freed between
 *   keep_late     4 blocks of 2000 bytes, between the dumps, kept
 *
 * In the first dump nothing has been freed: in use equals allocated so
 * far. From the first dump to the second: in use +8000 (keep_late),
 * allocated +23000 (keep_late and churn).
 */
#include <stdio.h>
#include <stdlib.h>

#include "heaptrail.h"

#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noipa))
#endif

static void *kept[14];

NOINLINE void keep_early(void)
{
	for (int i = 0; i < 10; i++)
		kept[i] = malloc(1000);
}

NOINLINE void churn(void)
{
	for (int i = 0; i < 5; i++) {
		char *volatile p = malloc(3000);
		free(p);
	}
}

NOINLINE void keep_late(void)
{
	for (int i = 10; i < 14; i++)
		kept[i] = malloc(2000);
}

int main(int argc, char **argv)
{
	if (argc != 3 || !heaptrail_dump) {
		fprintf(stderr, "usage: heaptrail run --sample 1 -- first_dump FIRST LATER\n");
		return 2;
	}
	keep_early();
	if (heaptrail_dump(argv[1]))
		return 1;
	churn();
	keep_late();
	if (heaptrail_dump(argv[2]))
		return 1;
	for (int i = 0; i < 14; i++)
		free(kept[i]);
	return 0;
}
