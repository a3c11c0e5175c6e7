/*
 * heap_invalid — addresses none of the allocator's, given back, each at
 * its own line, for tests/agent/test_errors.py (valgrind memcheck is the
 * oracle):
 *
 *   free of a pointer 4 bytes into a live block of 10     1 error
 *   free of a global, twice at one line                   2 errors, 1 context
 *   free of an array on main's stack                      1 error
 *   realloc of a global (returns NULL, as under valgrind) 1 error
 *   a block freed twice (by release, then by main)        1 error
 *   a block freed, one allocated again (perhaps at its address)
 *   and freed: no error
 *
 * Bare, glibc aborts at the first ("free(): invalid pointer"); under
 * valgrind, and heaptrail, the program goes on, prints "done" and exits 0.
 */
#include <stdio.h>
#include <stdlib.h>

static char glob[64];

__attribute__((noinline)) static void keep(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

__attribute__((noinline)) static void free_interior(char *p)
{
	free(p + 4);
}

__attribute__((noinline)) static void free_global(void)
{
	for (volatile int i = 0; i < 2; i++)  /* one call site, not unrolled */
		free(glob + 8);
}

__attribute__((noinline)) static void release(char *p)
{
	free(p);
}

int main(void)
{
	char *p = malloc(10);
	keep(p);
	free_interior(p);
	free_global();
	char local[16];
	keep(local);
	free(local);
	void *q = realloc(glob, 20);
	keep(q);
	char *twice = malloc(24);
	keep(twice);
	release(twice);
	free(twice);
	for (int i = 0; i < 3; i++) {
		char *again = malloc(40);
		keep(again);
		free(again);
	}
	free(p);
	printf("done %s\n", q ? "block" : "null");
	return 0;
}
