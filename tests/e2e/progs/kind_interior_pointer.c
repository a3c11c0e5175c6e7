/*
 * kind_interior_pointer — a block reachable only through a pointer into
 * its middle is "possibly lost", and so is a block pointed to (at its
 * start) only from a possibly lost block: memcheck cannot tell whether
 * the chain is real.  The offsets (40 and 13) are ones no leak-check
 * heuristic accepts (see heuristic_reachable).  For contrast, a block
 * kept by a pointer to its start is still reachable, and one kept only
 * by a pointer just past its end is definitely lost: memcheck's blocks
 * end at the size asked for, and that address is in none of them.
 *
 *   make_interior   100-byte block kept as g_interior = block + 40,
 *                   holding the only pointer to a 24-byte child
 *   make_unaligned  64-byte block kept as g_unaligned = block + 13
 *   make_start      32-byte block kept as g_start = block
 *   make_end_only   16-byte block kept as g_end = block + 16
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   possibly lost    100/1 + 24/1 (the child) + 64/1 = 188/3
 *   still reachable  32/1
 *   definitely lost  16/1
 *   in use at exit: 236 bytes in 5 blocks
 *
 * @proc 0 exit=0 in_use=236/5
 * @kinds 0 definitely_lost=16/1 possibly_lost=188/3 still_reachable=32/1
 * @leak 0 make_interior 124/2 possibly_lost
 * @leak 0 make_child 24/1 possibly_lost
 * @leak 0 make_unaligned 64/1 possibly_lost
 * @leak 0 make_start 32/1 still_reachable
 * @leak 0 make_end_only 16/1 definitely_lost
 */
#include <stdio.h>
#include <stdlib.h>

#include "kinds.h"

static char *g_interior, *g_unaligned, *g_start, *g_end;

NOINLINE void *make_child(void)
{
	void *c = malloc(24); /* @site make_child */

	memset(c, 'c', 24);
	return c;
}

NOINLINE void make_interior(void)
{
	char *p = malloc(100); /* @site make_interior */

	memset(p, 'i', 100);
	*(void **)p = make_child();
	STORE(g_interior, p + 40);
}

NOINLINE void make_unaligned(void)
{
	char *p = malloc(64); /* @site make_unaligned */

	memset(p, 'u', 64);
	STORE(g_unaligned, p + 13);
}

NOINLINE void make_start(void)
{
	char *p = malloc(32); /* @site make_start */

	memset(p, 's', 32);
	STORE(g_start, p);
}

NOINLINE void make_end_only(void)
{
	char *p = malloc(16); /* @site make_end_only */

	memset(p, 'e', 16);
	STORE(g_end, p + 16);
}

int main(void)
{
	make_interior();
	make_unaligned();
	make_start();
	make_end_only();
	scrub_stack();
	printf("kept 4 blocks by pointers to their start, middle or end\n");
	return 0;
}
