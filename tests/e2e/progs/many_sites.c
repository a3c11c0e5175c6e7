/*
 * many_sites — several functions leaking different sizes and counts,
 * plus frees that must be retired (leak_half frees every other block),
 * a block big enough for glibc to mmap it, and one helper reached from
 * two callers (two stacks, one allocation site).
 *
 * Expected (valgrind memcheck, Debian 12):
 *   leak_small   10 x 16      =     160 bytes in 10 blocks
 *   leak_medium   3 x 1024    =   3,072 bytes in  3 blocks
 *   leak_large    1 x 200000  = 200,000 bytes in  1 block (mmap'd chunk)
 *   leak_half    20 x 40, 10 freed = 400 bytes in 10 blocks
 *   make_node     7 x 48      =     336 bytes in  7 blocks
 *     via build_list_a 5 (240 bytes), via build_list_b 2 (96 bytes)
 *   in use at exit: 203,968 bytes in 31 blocks
 *
 * @proc 0 exit=0 in_use=203968/31
 * @leak 0 leak_small 160/10
 * @leak 0 leak_medium 3072/3
 * @leak 0 leak_large 200000/1
 * @leak 0 leak_half 400/10
 * @leak 0 make_node 336/7
 * @leak 0 build_list_a 240/5
 * @leak 0 build_list_b 96/2
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

struct node {
	struct node *next;
	long payload[5];
};

NOINLINE void leak_small(int i)
{
	char *p = malloc(16); /* @site leak_small */
	memset(p, i, 16);
	KEEP(p);
}

NOINLINE void leak_medium(void)
{
	char *p = malloc(1024); /* @site leak_medium */
	memset(p, 'm', 1024);
	KEEP(p);
}

NOINLINE void leak_large(void)
{
	char *p = malloc(200000); /* @site leak_large */
	memset(p, 'L', 200000);
	KEEP(p);
}

NOINLINE void leak_half(void)
{
	char *v[20];

	for (int i = 0; i < 20; i++) {
		v[i] = malloc(40); /* @site leak_half */
		memset(v[i], i, 40);
		KEEP(v[i]);
	}
	for (int i = 0; i < 20; i += 2)
		free(v[i]);
}

NOINLINE struct node *make_node(struct node *next)
{
	struct node *n = malloc(sizeof(*n)); /* @site make_node */
	n->next = next;
	memset(n->payload, 0, sizeof(n->payload));
	return n;
}

/* The lists are dropped whole: one definitely lost head, the rest
 * indirectly lost — in use either way. */
NOINLINE void build_list_a(void)
{
	struct node *head = NULL;

	for (int i = 0; i < 5; i++)
		head = make_node(head);
	KEEP(head);
}

NOINLINE void build_list_b(void)
{
	struct node *head = NULL;

	for (int i = 0; i < 2; i++)
		head = make_node(head);
	KEEP(head);
}

int main(void)
{
	for (int i = 0; i < 10; i++)
		leak_small(i);
	for (int i = 0; i < 3; i++)
		leak_medium();
	leak_large();
	leak_half();
	build_list_a();
	build_list_b();
	printf("many sites done\n");
	return 0;
}
