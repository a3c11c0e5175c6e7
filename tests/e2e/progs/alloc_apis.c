/*
 * alloc_apis — one leak through each allocator entry point, and a
 * realloc chain whose intermediate blocks must all be retired.
 *
 * Expected (valgrind memcheck, Debian 12; sizes are the requested sizes,
 * not glibc's rounded chunk sizes):
 *   leak_realloc_chain   realloc NULL->10->100->5000->50     =  50 / 1
 *   leak_realloc_moved   malloc 24, realloc to 300000 (mmap)  = 300000 / 1
 *   leak_calloc          calloc(7, 13)                        =  91 / 1
 *   leak_posix_memalign  posix_memalign(64, 200)              = 200 / 1
 *   leak_aligned_alloc   aligned_alloc(128, 256)              = 256 / 1
 *   leak_memalign        memalign(256, 300)                   = 300 / 1
 *   leak_valloc          valloc(123)                          = 123 / 1
 *   leak_strdup          strdup of a 27-char string           =  28 / 1
 *   leak_strndup         strndup("abcdefghij", 4)             =   5 / 1
 *   leak_reallocarray    reallocarray(NULL, 12, 10)           = 120 / 1
 *   leak_malloc_zero     malloc(0): a real, empty block       =   0 / 1
 *   not leaked: a calloc'd, a memalign'd and a realloc'd-to-1 block,
 *   all freed, and a block passed to realloc(p, 0), which glibc frees
 *   (returning NULL; valgrind does the same).
 *   pvalloc is not tested: valgrind 3.19 aborts the program on it.
 *   in use at exit: 301,173 bytes in 11 blocks
 *
 * @proc 0 exit=0 in_use=301173/11
 * @leak 0 leak_realloc_chain 50/1
 * @leak 0 leak_realloc_moved 300000/1
 * @leak 0 leak_calloc 91/1
 * @leak 0 leak_posix_memalign 200/1
 * @leak 0 leak_aligned_alloc 256/1
 * @leak 0 leak_memalign 300/1
 * @leak 0 leak_valloc 123/1
 * @leak 0 leak_strdup 28/1
 * @leak 0 leak_strndup 5/1
 * @leak 0 leak_reallocarray 120/1
 * @leak 0 leak_malloc_zero 0/1
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

NOINLINE void leak_realloc_chain(void)
{
	char *p = realloc(NULL, 10);

	memset(p, 1, 10);
	p = realloc(p, 100);
	memset(p, 2, 100);
	p = realloc(p, 5000);
	memset(p, 3, 5000);
	p = realloc(p, 50); /* @site leak_realloc_chain */
	memset(p, 4, 50);
	KEEP(p);
}

NOINLINE void leak_realloc_moved(void)
{
	char *p = malloc(24);

	memset(p, 1, 24);
	p = realloc(p, 300000); /* @site leak_realloc_moved */
	memset(p, 2, 300000);
	KEEP(p);
}

NOINLINE void leak_calloc(void)
{
	char *p = calloc(7, 13); /* @site leak_calloc */
	p[90] = 1;
	KEEP(p);
}

NOINLINE void leak_posix_memalign(void)
{
	void *p = NULL;
	int rc = posix_memalign(&p, 64, 200); /* @site leak_posix_memalign */

	if (rc == 0)
		memset(p, 5, 200);
	KEEP(p);
}

NOINLINE void leak_aligned_alloc(void)
{
	char *p = aligned_alloc(128, 256); /* @site leak_aligned_alloc */
	memset(p, 6, 256);
	KEEP(p);
}

NOINLINE void leak_memalign(void)
{
	char *p = memalign(256, 300); /* @site leak_memalign */
	memset(p, 7, 300);
	KEEP(p);
}

NOINLINE void leak_valloc(void)
{
	char *p = valloc(123); /* @site leak_valloc */
	memset(p, 8, 123);
	KEEP(p);
}

NOINLINE void leak_strdup(void)
{
	char *p = strdup("heaptrail leaks this string"); /* @site leak_strdup */
	p[0] = 'H';
	KEEP(p);
}

NOINLINE void leak_strndup(void)
{
	char *p = strndup("abcdefghij", 4); /* @site leak_strndup */
	p[0] = 'A';
	KEEP(p);
}

NOINLINE void leak_reallocarray(void)
{
	char *p = reallocarray(NULL, 12, 10); /* @site leak_reallocarray */
	memset(p, 9, 120);
	KEEP(p);
}

NOINLINE void leak_malloc_zero(void)
{
	void *p = malloc(0); /* @site leak_malloc_zero */
	KEEP(p);
	printf("malloc(0) %s\n", p ? "gave a block" : "gave NULL");
}

/* Blocks from the same entry points that are freed again: none of them
 * may be left in use. */
NOINLINE void no_leak(void)
{
	char *c = calloc(3, 100);
	char *m = memalign(64, 64);
	char *r = malloc(4000);
	char *z = malloc(77);

	KEEP(c);
	KEEP(z);
	z = realloc(z, 0); /* glibc frees the block and returns NULL */
	KEEP(z);
	KEEP(m);
	r = realloc(r, 1);
	KEEP(r);
	free(c);
	free(m);
	free(r);
}

int main(void)
{
	leak_realloc_chain();
	leak_realloc_moved();
	leak_calloc();
	leak_posix_memalign();
	leak_aligned_alloc();
	leak_memalign();
	leak_valloc();
	leak_strdup();
	leak_strndup();
	leak_reallocarray();
	leak_malloc_zero();
	no_leak();
	printf("allocator entry points done\n");
	return 0;
}
