/*
 * kind_guard_page — live blocks with a PROT_NONE page inside, as a
 * malloc'd coroutine or thread stack with a guard page has.  The leak
 * scan must not fault on them (bare, the program exits 0; a scan that
 * reads the page in place dies of SIGSEGV), and must classify them as
 * memcheck does: memcheck skips unreadable pages when it scans a block,
 * and takes no pointer to an unreadable address.
 *
 *   guard_first   64 KiB, its first page PROT_NONE, kept by g_first:
 *                 the pointer points at the unreadable page, so
 *                 memcheck ignores it: definitely lost
 *   guard_inside  64 KiB, its second page PROT_NONE, kept by g_inside:
 *                 still reachable; its word 0 keeps a 24-byte block and
 *                 a word of its third page a 40-byte block (both still
 *                 reachable: the scan goes on past the guard page); a
 *                 48-byte block kept only inside the guard page is
 *                 definitely lost
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   definitely lost 65536 + 48 = 65584/2
 *   still reachable 65536 + 24 + 40 = 65600/3
 *   in use at exit: 131184 bytes in 5 blocks
 *
 * @proc 0 exit=0 in_use=131184/5
 * @kinds 0 definitely_lost=65584/2 still_reachable=65600/3
 * @leak 0 guard_first 65536/1 definitely_lost
 * @leak 0 guard_inside 65600/3 still_reachable
 * @leak 0 guard_inside 48/1 definitely_lost
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "kinds.h"

#define PAGE_SIZE 4096
#define STACK_SIZE (16 * PAGE_SIZE)

static void *g_first;
static void **g_inside;

NOINLINE void *block(size_t n)
{
	void *p = malloc(n); /* @site block */

	memset(p, 0, n);
	return p;
}

NOINLINE void *stack_block(void)
{
	void *p = aligned_alloc(PAGE_SIZE, STACK_SIZE); /* @site stack_block */

	memset(p, 0, STACK_SIZE);
	return p;
}

NOINLINE void guard_first(void)
{
	void *p = stack_block();

	if (mprotect(p, PAGE_SIZE, PROT_NONE))
		exit(2);
	STORE(g_first, p);
}

NOINLINE void guard_inside(void)
{
	void **p = stack_block();

	p[0] = block(24);
	p[2 * PAGE_SIZE / sizeof(void *) + 5] = block(40);
	p[PAGE_SIZE / sizeof(void *) + 3] = block(48);
	if (mprotect((char *)p + PAGE_SIZE, PAGE_SIZE, PROT_NONE))
		exit(2);
	STORE(g_inside, p);
}

int main(void)
{
	guard_first();
	guard_inside();
	scrub_stack();
	printf("two blocks with a guard page\n");
	return 0;
}
