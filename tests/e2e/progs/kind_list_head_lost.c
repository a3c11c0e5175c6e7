/*
 * kind_list_head_lost — a linked list whose head pointer is dropped: the
 * head is definitely lost, every node after it only reachable through
 * lost memory, so indirectly lost.  A second list stays reachable from a
 * global: all of it still reachable.
 *
 * Nodes: a 48-byte head (new_head) followed by 32-byte nodes (new_node).
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   build_lost_list  head 48/1 definitely lost,
 *                    4 nodes 128/4 indirectly lost
 *                    (valgrind: "176 (48 direct, 128 indirect) bytes in
 *                    1 blocks are definitely lost")
 *   build_kept_list  head 48/1 + 2 nodes 64/2, still reachable (global)
 *   in use at exit: 288 bytes in 8 blocks
 *
 * @proc 0 exit=0 in_use=288/8
 * @kinds 0 definitely_lost=48/1 indirectly_lost=128/4 still_reachable=112/3
 * @leak 0 build_lost_list 176/5
 * @leak 0 build_lost_list 48/1 definitely_lost
 * @leak 0 build_lost_list 128/4 indirectly_lost
 * @leak 0 build_kept_list 112/3 still_reachable
 */
#include <stdio.h>
#include <stdlib.h>

#include "kinds.h"

struct node {
	struct node *next;
	long payload[3];
};

struct head {
	struct node *first;
	long count;
	long payload[4];
};

static struct head *kept_list;

NOINLINE struct node *new_node(long value, struct node *next)
{
	struct node *n = malloc(sizeof(*n)); /* @site new_node */

	n->next = next;
	n->payload[0] = n->payload[1] = n->payload[2] = value;
	return n;
}

NOINLINE struct head *new_head(struct node *first, long count)
{
	struct head *h = malloc(sizeof(*h)); /* @site new_head */

	memset(h, 0, sizeof(*h));
	h->first = first;
	h->count = count;
	return h;
}

NOINLINE struct head *build_list(int n)
{
	struct node *first = NULL;
	int i;

	for (i = 0; i < n; i++)
		first = new_node(i, first);
	return new_head(first, n);
}

/* The only pointer to the head dies with this frame. */
NOINLINE long build_lost_list(void)
{
	struct head *h = build_list(4);
	long count = h->count;

	KEEP(h);
	return count;
}

NOINLINE void build_kept_list(void)
{
	STORE(kept_list, build_list(2));
}

int main(void)
{
	long n = build_lost_list();

	build_kept_list();
	scrub_stack();
	printf("lost a list of %ld nodes, kept one of 2\n", n);
	return 0;
}
