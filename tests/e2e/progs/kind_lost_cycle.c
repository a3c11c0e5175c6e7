/*
 * kind_lost_cycle — lost cycles: blocks that point at each other but at
 * which nothing else points.  A cycle keeps no block reachable: memcheck
 * calls one block of each lost cycle (its lowest address, the "clique
 * leader") definitely lost and the rest indirectly lost, through it.  A
 * third cycle hangs from a global: all of it still reachable.
 *
 * Every block of a cycle has the same size, so which one leads does not
 * change the byte counts (the allocator decides the address order).
 *
 *   make_pair_cycle       2 x 40-byte blocks, A <-> B, lost
 *   make_triangle_cycle   3 x 56-byte blocks, A -> B -> C -> A, lost
 *   make_kept_cycle       2 x 24-byte blocks, A <-> B, kept by g_kept
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   definitely lost  40/1 + 56/1  =  96/2
 *   indirectly lost  40/1 + 112/2 = 152/3
 *   still reachable  48/2
 *   in use at exit: 296 bytes in 7 blocks
 *
 * @proc 0 exit=0 in_use=296/7
 * @kinds 0 definitely_lost=96/2 indirectly_lost=152/3 still_reachable=48/2
 * @leak 0 make_pair_cycle 80/2
 * @leak 0 make_pair_cycle 40/1 definitely_lost
 * @leak 0 make_pair_cycle 40/1 indirectly_lost
 * @leak 0 make_triangle_cycle 168/3
 * @leak 0 make_triangle_cycle 56/1 definitely_lost
 * @leak 0 make_triangle_cycle 112/2 indirectly_lost
 * @leak 0 make_kept_cycle 48/2 still_reachable
 */
#include <stdio.h>
#include <stdlib.h>

#include "kinds.h"

struct link {
	struct link *next;
	long id;
};

static struct link *g_kept;

/* A ring of n blocks of size bytes each; returns one of them. */
NOINLINE struct link *make_ring(int n, size_t size)
{
	struct link *first = NULL, *prev = NULL;
	int i;

	for (i = 0; i < n; i++) {
		struct link *l = malloc(size); /* @site make_ring */

		memset(l, 0, size);
		l->id = i;
		if (prev)
			prev->next = l;
		else
			first = l;
		prev = l;
	}
	prev->next = first;
	return first;
}

NOINLINE long make_pair_cycle(void)
{
	struct link *l = make_ring(2, 40);
	long id = l->next->id;

	KEEP(l);
	return id;
}

NOINLINE long make_triangle_cycle(void)
{
	struct link *l = make_ring(3, 56);
	long id = l->next->next->id;

	KEEP(l);
	return id;
}

NOINLINE void make_kept_cycle(void)
{
	STORE(g_kept, make_ring(2, 24));
}

int main(void)
{
	long sum = make_pair_cycle() + make_triangle_cycle();

	make_kept_cycle();
	scrub_stack();
	printf("lost two cycles (%ld), kept one\n", sum);
	return 0;
}
