/* leaks10k.c — leaves 10,000 blocks definitely lost, each from its own
 * call stack, so the exit report has 10,000 records to symbolize: the
 * path bit by bit picks one of two call sites, 14 levels deep. */
#include <stdlib.h>

#define LEVELS 14

static void *volatile sink;
static volatile int lefts, rights;  /* tell the two call sites apart */

__attribute__((noinline)) static void walk(unsigned path, int level);

__attribute__((noinline)) static void left(unsigned path, int level)
{
	walk(path, level + 1);
	lefts++;
}

__attribute__((noinline)) static void right(unsigned path, int level)
{
	walk(path, level + 1);
	rights += 2;
}

__attribute__((noinline)) static void walk(unsigned path, int level)
{
	if (level == LEVELS) {
		sink = malloc(16 + path % 64);
		sink = NULL;  /* the only pointer is gone: definitely lost */
		return;
	}
	if (path >> level & 1)
		right(path, level);
	else
		left(path, level);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10000;
	for (int i = 0; i < n; i++)
		walk((unsigned)i, 0);
	return 0;
}
