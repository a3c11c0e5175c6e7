/*
 * timeline_step — keeps a 4 MiB block, is idle for 300 ms, keeps a
 * second one, and exits. Timeline rows are written when the heap
 * changes; after the idle stretch the agent writes the row for "just
 * before" the second block (the figures of the last row, at the
 * millisecond before) and then the row with it, so a plot shows a step
 * at the second block, not a slope over the idle 300 ms.
 *
 * @cli-only
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

static char *keep[2];

NOINLINE void grow(int i)
{
	keep[i] = malloc(4 << 20); /* @site grow */
	if (!keep[i])
		exit(3);
	memset(keep[i], 1, 4096);
}

int main(void)
{
	grow(0);
	struct timespec t = { 0, 300 * 1000 * 1000 };
	while (nanosleep(&t, &t))
		;
	grow(1);
	free(keep[0]);
	free(keep[1]);
	printf("done\n");
	return 0;
}
