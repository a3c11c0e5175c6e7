/*
 * kind_global_reachable — blocks kept only by globals are still
 * reachable, wherever the global lives: .bss (g_bss), .data (g_data,
 * initialised), a function's static local (in .bss), an element of a
 * global array of structs, and a block reached only from another
 * reachable block.  A pointer stored at an address that is not a
 * multiple of 8 (a packed struct) is not a pointer to memcheck, which
 * scans aligned words only: that block is definitely lost.
 *
 *   keep_in_bss      64/1   g_bss
 *   keep_in_data     48/1   g_data (.data: starts as &g_data_init)
 *   keep_in_static   40/1   a static local of keep_in_static
 *   keep_in_array    3 x 24 g_table[1..3].ptr
 *   keep_chained     32/1 held by a 16/1 block held by g_chain
 *   keep_misaligned  56/1   g_packed.ptr at offset 1: definitely lost
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   still reachable  64 + 48 + 40 + 72 + 48 = 272/8
 *   definitely lost  56/1
 *   in use at exit: 328 bytes in 9 blocks
 *
 * @proc 0 exit=0 in_use=328/9
 * @kinds 0 definitely_lost=56/1 still_reachable=272/8
 * @leak 0 keep_in_bss 64/1 still_reachable
 * @leak 0 keep_in_data 48/1 still_reachable
 * @leak 0 keep_in_static 40/1 still_reachable
 * @leak 0 keep_in_array 72/3 still_reachable
 * @leak 0 keep_chained 48/2 still_reachable
 * @leak 0 keep_misaligned 56/1 definitely_lost
 */
#include <stdio.h>
#include <stdlib.h>

#include "kinds.h"

struct entry {
	int id;
	void *ptr;
};

struct __attribute__((packed)) packed {
	char tag;
	void *ptr;
};

static long g_data_init = 7;
static void *g_bss;
static void *g_data = &g_data_init;
static struct entry g_table[4];
static void **g_chain;
static struct packed g_packed __attribute__((aligned(8))); /* ptr at 8k+1 */

NOINLINE void *block(size_t n, int fill)
{
	void *p = malloc(n); /* @site block */

	memset(p, fill, n);
	return p;
}

NOINLINE void keep_in_bss(void)
{
	STORE(g_bss, block(64, 'b'));
}

NOINLINE void keep_in_data(void)
{
	STORE(g_data, block(48, 'd'));
}

NOINLINE void keep_in_static(void)
{
	static void *kept;

	STORE(kept, block(40, 's'));
}

NOINLINE void keep_in_array(void)
{
	int i;

	for (i = 1; i < 4; i++) {
		g_table[i].id = i;
		STORE(g_table[i].ptr, block(24, 'a'));
	}
}

NOINLINE void keep_chained(void)
{
	void **holder = block(16, 0);

	holder[0] = block(32, 'c');
	STORE(g_chain, holder);
}

NOINLINE void keep_misaligned(void)
{
	void *p = block(56, 'm');

	g_packed.tag = 'p';
	memcpy((char *)&g_packed + 1, &p, sizeof(p));
	KEEP(&g_packed);
}

int main(void)
{
	keep_in_bss();
	keep_in_data();
	keep_in_static();
	keep_in_array();
	keep_chained();
	keep_misaligned();
	scrub_stack();
	printf("kept 8 blocks in globals, one misaligned\n");
	return g_data_init == 7 ? 0 : 1;
}
