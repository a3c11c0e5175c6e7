/*
 * heap_errors — blocks given back by the wrong family, each at its own
 * line, for tests/agent/test_errors.py, which asks valgrind memcheck
 * what they are (the oracle) and checks heaptrail says the same:
 *
 *   malloc, then delete                      1 error
 *   new[], then delete                       1 error
 *   new, then free                           1 error
 *   new, then delete[]                       1 error
 *   malloc, then delete[], three times       3 errors from 1 context
 *   new, then realloc (then free)            1 error
 *
 * and, in between, blocks given back as they should be (no error). It
 * prints "done" and exits 0: valgrind keeps it alive, and so must
 * heaptrail.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>

__attribute__((noinline)) static void keep(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

__attribute__((noinline)) static void malloc_then_delete(void)
{
	char *p = (char *)malloc(10);
	keep(p);
	delete p;
}

__attribute__((noinline)) static void array_then_delete(void)
{
	int *p = new int[4];
	keep(p);
	delete p;
}

__attribute__((noinline)) static void new_then_free(void)
{
	int *p = new int;
	keep(p);
	free(p);
}

__attribute__((noinline)) static void new_then_delete_array(void)
{
	long *p = new long;
	keep(p);
	delete[] p;
}

__attribute__((noinline)) static void malloc_then_delete_array(void)
{
	for (int i = 0; i < 3; i++) {
		char *p = (char *)malloc(24);
		keep(p);
		delete[] p;
	}
}

__attribute__((noinline)) static void new_then_realloc(void)
{
	char *p = new char;
	keep(p);
	p = (char *)realloc(p, 100);
	keep(p);
	free(p);
}

__attribute__((noinline)) static void all_right(void)
{
	char *a = (char *)malloc(5);
	int *b = new int;
	int *c = new int[3];
	keep(a), keep(b), keep(c);
	free(a);
	delete b;
	delete[] c;
}

/* "many N": N blocks of 4 KiB from malloc given back by delete, for a
 * sampled run (only the sampled blocks are checked) */
__attribute__((noinline)) static void many(long n)
{
	for (long i = 0; i < n; i++) {
		char *p = (char *)malloc(4096);
		keep(p);
		delete p;
	}
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "many")) {
		many(atol(argv[2]));
		printf("done\n");
		return 0;
	}
	all_right();
	malloc_then_delete();
	array_then_delete();
	new_then_free();
	new_then_delete_array();
	malloc_then_delete_array();
	new_then_realloc();
	all_right();
	printf("done\n");
	return 0;
}
