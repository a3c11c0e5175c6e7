/*
 * area_sites — eleven allocation sites of eleven sizes, for the HTML
 * page's chart of the sites that held the most (html:area): each step,
 * site_K keeps (K + 1) KiB (K = 0..10). site_0, site_1 and site_2
 * allocate through wrap_alloc, a wrapper that calls malloc alone: growth
 * folds it into them, or it would hold 6 KiB a step and rank among the
 * largest.
 *
 * STEPS steps (the first argument, default 10) of STEP_MS (30 ms) each.
 * Everything is freed at exit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))
#define KIB 1024
#define SITES 11
#define STEP_MS 30
#define MAX_STEPS 200

static void *kept[SITES * MAX_STEPS];
static size_t nkept;

static NOINLINE void *wrap_alloc(size_t n)
{
	void *p = malloc(n);
	if (!p)
		abort();
	memset(p, 1, n);
	return p;
}

#define WRAPPED(k) static NOINLINE void site_##k(void) { kept[nkept++] = wrap_alloc((k + 1) * KIB); }
#define DIRECT(k)                                                       \
	static NOINLINE void site_##k(void)                             \
	{                                                               \
		void *p = malloc((k + 1) * KIB);                        \
		if (!p)                                                 \
			abort();                                        \
		memset(p, 1, (k + 1) * KIB);                            \
		kept[nkept++] = p;                                      \
	}
WRAPPED(0) WRAPPED(1) WRAPPED(2)
DIRECT(3) DIRECT(4) DIRECT(5) DIRECT(6) DIRECT(7) DIRECT(8) DIRECT(9) DIRECT(10)

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 10;
	if (steps < 1 || steps > MAX_STEPS)
		steps = 10;
	for (int s = 0; s < steps; s++) {
		site_0(); site_1(); site_2(); site_3(); site_4(); site_5();
		site_6(); site_7(); site_8(); site_9(); site_10();
		nanosleep(&(struct timespec){ 0, STEP_MS * 1000000L }, NULL);
	}
	for (size_t i = 0; i < nkept; i++)
		free(kept[i]);
	printf("area_sites: %d steps\n", steps);
	return 0;
}
