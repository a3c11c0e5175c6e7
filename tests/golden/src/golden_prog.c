/*
 * golden_prog — the program behind the checked-in dumps of
 * tests/golden/inputs: a handful of allocation sites whose totals are
 * known by construction. Every size is one of jemalloc's size classes, so
 * jemalloc (which records usable sizes), tcmalloc and heaptrail (which
 * record requested sizes) all see the same bytes. No stdio: nothing but
 * these sites allocates.
 *
 * live at exit                         allocated in all
 *   small_site    100 x 64    =   6400     6400
 *   big_site        3 x 131072 = 393216   393216
 *   node_site      50 x 1024  =  51200     51200  (main > build_list > node_site)
 *   deep_site      10 x 256   =   2560      2560  (main > recurse x5 > deep_site)
 *   churn_site      0                     819200  (200 x 4096, all freed)
 *   total          163 blocks   453376   1272576  (363 blocks)
 */
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

static void *keep[512];
static int nkeep;

/* stores p where the compiler cannot see it die */
static NOINLINE void hold(void *p)
{
	keep[nkeep++] = p;
	__asm__ volatile("" : : "r"(p) : "memory");
}

NOINLINE void small_site(void)
{
	for (int i = 0; i < 100; i++)
		hold(malloc(64));
}

NOINLINE void big_site(void)
{
	for (int i = 0; i < 3; i++)
		hold(malloc(131072));
}

NOINLINE void *node_site(void)
{
	return calloc(1, 1024);
}

NOINLINE void build_list(void)
{
	for (int i = 0; i < 50; i++)
		hold(node_site());
}

NOINLINE void deep_site(void)
{
	hold(malloc(256));
}

NOINLINE int recurse(int depth)
{
	if (depth == 0) {
		deep_site();
		return 0;
	}
	int r = recurse(depth - 1);
	__asm__ volatile("" : : : "memory"); /* not a tail call */
	return r + 1;
}

NOINLINE void churn_site(void)
{
	for (int i = 0; i < 200; i++) {
		void *p = malloc(4096);
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
	}
}

int main(void)
{
	small_site();
	big_site();
	build_list();
	for (int i = 0; i < 10; i++)
		recurse(4);
	churn_site();
	return keep[0] ? 0 : 1;
}
