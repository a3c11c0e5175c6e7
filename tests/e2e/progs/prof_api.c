/*
 * prof_api — the heap-profiling API of include/heaptrail.h, called the way
 * a program built with the header calls it: every function is a weak
 * symbol, so the program checks each before calling and runs normally
 * without the agent ("heaptrail: not loaded", the same allocations, exit
 * 0).  Under the agent (the runner uses exact mode, sample=1):
 *
 *   heaptrail_set_active(0)    -> 1 (was recording)
 *   while_inactive             4 x 4096, kept: never recorded
 *   heaptrail_set_active(1)    -> 0
 *   kept_across_reset          3 x 1000, kept to the end
 *   churn_before_reset         10 x 500, each freed at once
 *   heaptrail_dump(ARGV[1])    -> 0: kept_across_reset 3/3000 in use,
 *                                 churn_before_reset 0 in use, 10/5000
 *                                 allocated; while_inactive absent
 *   heaptrail_reset()          -> 0
 *   after_reset                2 x 700, kept
 *   heaptrail_dump(NULL)       -> 0: heaptrail.PID.SEQ.api.heap in the
 *                                 output directory: kept_across_reset
 *                                 still 3/3000 in use, churn_before_reset
 *                                 allocated 0 (counts restarted),
 *                                 after_reset 2/1400 in use and allocated
 *   heaptrail_dump("/nonexistent/dir/x.heap") -> a negative errno
 *
 * Each call's result is printed; everything is freed before exit.
 *
 * @prof
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

/* Declared here as well as in heaptrail.h so the program builds against
 * any version of the header; weak, so it runs without the agent. */
int heaptrail_set_active(int on) __attribute__((weak));
int heaptrail_dump(const char *path) __attribute__((weak));
int heaptrail_reset(void) __attribute__((weak));

static void *kept[16];
static int nkept;

NOINLINE void while_inactive(void)
{
	for (int i = 0; i < 4; i++) {
		kept[nkept] = malloc(4096); /* @site while_inactive */
		KEEP(kept[nkept]);
		nkept++;
	}
}

NOINLINE void kept_across_reset(void)
{
	for (int i = 0; i < 3; i++) {
		kept[nkept] = malloc(1000); /* @site kept_across_reset */
		KEEP(kept[nkept]);
		nkept++;
	}
}

NOINLINE void churn_before_reset(void)
{
	for (int i = 0; i < 10; i++) {
		void *p = malloc(500); /* @site churn_before_reset */
		KEEP(p);
		free(p);
	}
}

NOINLINE void after_reset(void)
{
	for (int i = 0; i < 2; i++) {
		kept[nkept] = malloc(700); /* @site after_reset */
		KEEP(kept[nkept]);
		nkept++;
	}
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "prof_api.heap";
	int loaded = heaptrail_set_active && heaptrail_dump && heaptrail_reset;

	if (!loaded)
		printf("heaptrail: not loaded\n");
	if (loaded)
		printf("heaptrail_set_active(0) -> %d\n", heaptrail_set_active(0));
	while_inactive();
	if (loaded)
		printf("heaptrail_set_active(1) -> %d\n", heaptrail_set_active(1));
	kept_across_reset();
	churn_before_reset();
	if (loaded) {
		printf("heaptrail_dump(path) -> %d\n", heaptrail_dump(path));
		printf("heaptrail_reset() -> %d\n", heaptrail_reset());
	}
	after_reset();
	if (loaded) {
		printf("heaptrail_dump(NULL) -> %d\n", heaptrail_dump(NULL));
		printf("heaptrail_dump(bad path) -> %s\n",
		       heaptrail_dump("/nonexistent/dir/x.heap") < 0 ? "negative" : "not negative");
	}
	for (int i = 0; i < nkept; i++)
		free(kept[i]);
	printf("done: %d blocks kept and freed\n", nkept);
	return 0;
}
