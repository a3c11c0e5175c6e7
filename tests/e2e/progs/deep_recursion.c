/*
 * deep_recursion — a leak at the bottom of 60 frames of recursion.  The
 * recursion does work after each call, so it cannot become a loop or a
 * tail call: the full stack is 60 frames of recurse below leak_at_bottom.
 *
 * Expected (valgrind memcheck --num-callers=100, Debian 12):
 *   leak_at_bottom 1 x 96, stack: leak_at_bottom, recurse x 60, main
 *   in use at exit: 96 bytes in 1 blocks
 *
 * @proc 0 exit=0 in_use=96/1
 * @leak 0 leak_at_bottom 96/1
 * @leak 0 recurse 96/1
 * @frames 0 recurse 60
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

NOINLINE long leak_at_bottom(void)
{
	char *p = malloc(96); /* @site leak_at_bottom */
	memset(p, 'r', 96);
	KEEP(p);
	return p[5];
}

NOINLINE long recurse(int n)
{
	long r;

	if (n == 0)
		return leak_at_bottom();
	r = recurse(n - 1);
	return r * 3 + n;
}

int main(void)
{
	/* recurse(59) .. recurse(0): 60 frames */
	long r = recurse(59);

	printf("recursion result %ld\n", r % 1000);
	return 0;
}
