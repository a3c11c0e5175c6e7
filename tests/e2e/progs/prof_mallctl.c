/*
 * prof_mallctl — a program written for jemalloc's profiler: it drives
 * profiling through mallctl() alone, so it runs unchanged under jemalloc
 * (MALLOC_CONF=prof:true) and under heaptrail, whose agent answers the
 * "prof.*" names when the process has no jemalloc.  mallctl is a weak
 * symbol here: with neither (a bare glibc run) the program says "mallctl:
 * not available", does the same allocations and exits 0.  In order:
 *
 *   opt.prof read               -> 0, true
 *   prof.active read            -> 0, true
 *   prof.active = false         -> 0
 *   while_inactive              4 x 4096, kept: never recorded
 *   prof.active = true          -> 0
 *   kept_across_reset           3 x 1000, kept to the end
 *   churn_before_reset          10 x 500, each freed at once
 *   prof.dump = ARGV[1]         -> 0: the dump is written to that file
 *   prof.reset (no argument)    -> 0
 *   after_reset                 2 x 700, kept
 *   prof.dump (no argument)     -> 0: a dump under an automatic name
 *                                  (heaptrail: PREFIX.PID.SEQ.api.heap)
 *   prof.reset = 19 (lg_sample) -> 0, and then
 *   prof.lg_sample read         -> 0, 19: the mean sample interval is now
 *                                  2^19 bytes
 *   prof.dump = ARGV[2]         -> 0 (header heap_v2/524288)
 *   prof.no_such_name           -> ENOENT
 *
 * Each result is printed; everything is freed before exit.
 *
 * @prof
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp,
	    size_t newlen) __attribute__((weak));

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

static const char *errname(int rc)
{
	static char buf[32];
	switch (rc) {
	case 0: return "0";
	case ENOENT: return "ENOENT";
	case EINVAL: return "EINVAL";
	case EFAULT: return "EFAULT";
	case EPERM: return "EPERM";
	case EAGAIN: return "EAGAIN";
	}
	snprintf(buf, sizeof buf, "%d", rc);
	return buf;
}

static void show_bool(const char *name)
{
	bool v = false;
	size_t len = sizeof v;
	int rc = mallctl(name, &v, &len, NULL, 0);
	printf("%s read -> %s, %s\n", name, errname(rc), v ? "true" : "false");
}

static void set_bool(const char *name, bool v)
{
	printf("%s = %s -> %s\n", name, v ? "true" : "false",
	       errname(mallctl(name, NULL, NULL, &v, sizeof v)));
}

static void dump(const char *file)
{
	if (file)
		printf("prof.dump = file -> %s\n",
		       errname(mallctl("prof.dump", NULL, NULL, &file, sizeof file)));
	else
		printf("prof.dump -> %s\n", errname(mallctl("prof.dump", NULL, NULL, NULL, 0)));
}

int main(int argc, char **argv)
{
	const char *file1 = argc > 1 ? argv[1] : "prof_mallctl.1.heap";
	const char *file2 = argc > 2 ? argv[2] : "prof_mallctl.2.heap";

	if (!mallctl)
		printf("mallctl: not available\n");
	if (mallctl) {
		show_bool("opt.prof");
		show_bool("prof.active");
		set_bool("prof.active", false);
	}
	while_inactive();
	if (mallctl)
		set_bool("prof.active", true);
	kept_across_reset();
	churn_before_reset();
	if (mallctl) {
		dump(file1);
		printf("prof.reset -> %s\n", errname(mallctl("prof.reset", NULL, NULL, NULL, 0)));
	}
	after_reset();
	if (mallctl) {
		dump(NULL);
		size_t lg = 19, got = 0, len = sizeof got;
		printf("prof.reset = 19 -> %s\n",
		       errname(mallctl("prof.reset", NULL, NULL, &lg, sizeof lg)));
		int rc = mallctl("prof.lg_sample", &got, &len, NULL, 0);
		printf("prof.lg_sample read -> %s, %zu\n", errname(rc), got);
		dump(file2);
		printf("prof.no_such_name -> %s\n",
		       errname(mallctl("prof.no_such_name", NULL, NULL, NULL, 0)));
	}
	for (int i = 0; i < nkept; i++)
		free(kept[i]);
	printf("done: %d blocks kept and freed\n", nkept);
	return 0;
}
