/*
 * wrapper_sites — a program whose allocations go through a wrapper, as
 * redis' zmalloc or git's xmalloc: xalloc calls malloc and nothing else,
 * and four functions call it.
 *
 *   leak_requests   xalloc(16 KiB) each step, never freed: the leak
 *   cache_fill      xalloc(8 KiB) each step for the first 5 steps, kept
 *   scratch         xalloc(32 KiB) each step, freed in the same step
 *   parse_config    xalloc(4 KiB) once, kept
 *   make_node       malloc(1 KiB) itself, called by two functions:
 *                   build_index (once, 8 nodes kept) and leak_nodes
 *                   (2 nodes each step, never freed: a second leak)
 *
 * and a chain of wrappers, as redis' zmalloc and zcalloc over the helper
 * ztrymalloc_usable: inner_alloc calls malloc and nothing else, and only
 * outer_alloc and outer_zalloc call it; each of those calls inner_alloc
 * and nothing else, and three functions call both:
 *   leak_chain      outer_alloc(8 KiB) and outer_zalloc(4 KiB) each
 *                   step, never freed: a third leak
 *   chain_scratch   outer_alloc(16 KiB) and outer_zalloc(16 KiB) each
 *                   step, freed in the same step
 *   chain_config    outer_alloc(2 KiB) and outer_zalloc(2 KiB) once, kept
 *
 * STEPS steps (the first argument, default 20) of STEP_MS (20 ms) each.
 * Everything is freed at exit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))
#define KIB 1024
#define STEP_MS 20
#define MAX_STEPS 1000

static void *kept[6 * MAX_STEPS + 64];
static size_t nkept;

static NOINLINE void *xalloc(size_t n)
{
	void *p = malloc(n);
	if (!p)
		abort();
	memset(p, 1, 1);
	return p;
}

static NOINLINE void *make_node(void)
{
	void *p = malloc(KIB);
	if (!p)
		abort();
	return p;
}

static NOINLINE void *inner_alloc(size_t n)
{
	void *p = malloc(n);
	if (!p)
		abort();
	return p;
}

static NOINLINE void *outer_alloc(size_t n)
{
	void *p = inner_alloc(n);
	memset(p, 2, 1);
	return p;
}

static NOINLINE void *outer_zalloc(size_t n)
{
	void *p = inner_alloc(n);
	memset(p, 0, n);
	return p;
}

static NOINLINE void leak_chain(void)
{
	kept[nkept++] = outer_alloc(8 * KIB);
	kept[nkept++] = outer_zalloc(4 * KIB);
}

static NOINLINE void chain_scratch(void)
{
	free(outer_alloc(16 * KIB));
	free(outer_zalloc(16 * KIB));
}

static NOINLINE void chain_config(void)
{
	kept[nkept++] = outer_alloc(2 * KIB);
	kept[nkept++] = outer_zalloc(2 * KIB);
}

static NOINLINE void leak_requests(void) { kept[nkept++] = xalloc(16 * KIB); }
static NOINLINE void cache_fill(int step) { if (step < 5) kept[nkept++] = xalloc(8 * KIB); }
static NOINLINE void scratch(void) { free(xalloc(32 * KIB)); }
static NOINLINE void parse_config(void) { kept[nkept++] = xalloc(4 * KIB); }

static NOINLINE void build_index(void)
{
	for (int i = 0; i < 8; i++)
		kept[nkept++] = make_node();
}

static NOINLINE void leak_nodes(void)
{
	kept[nkept++] = make_node();
	kept[nkept++] = make_node();
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 20;
	if (steps < 1 || steps > MAX_STEPS)
		steps = 20;
	parse_config();
	chain_config();
	build_index();
	for (int s = 0; s < steps; s++) {
		leak_requests();
		cache_fill(s);
		scratch();
		leak_nodes();
		leak_chain();
		chain_scratch();
		struct timespec ts = { 0, STEP_MS * 1000000L };
		while (nanosleep(&ts, &ts))
			;
	}
	for (size_t i = 0; i < nkept; i++)
		free(kept[i]);
	printf("wrapper_sites: %d steps\n", steps);
	return 0;
}
