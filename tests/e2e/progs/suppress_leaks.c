/*
 * suppress_leaks — three leaking functions and LeakSanitizer-style
 * suppressions in two files (heaptrail run --suppressions, twice):
 *
 *   suppress_leaks.supp       leak:func_a  (by function name)
 *   suppress_leaks_more.supp  leak:*suppress_leaks_o*.c  (by source
 *                             file, a '*' wildcard: func_b's file,
 *                             suppress_leaks_other.c)
 *                             leak:func_c:max_bytes=100  (func_c leaks
 *                             3 x 60 = 180 bytes, over the limit: NOT
 *                             suppressed, and the text report says so)
 *
 * The oracle runs valgrind with the same suppressions in its own format
 * (suppress_leaks.vg.supp: func_a and func_b; valgrind has no limits).
 * What is suppressed is still in use at exit, counted apart.
 *
 *   func_a  2 x 64 = 128/2 suppressed
 *   func_b  1 x 200 = 200/1 suppressed
 *   func_c  3 x 60 = 180/3 definitely lost
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   definitely lost 180/3, suppressed 328/3
 *   in use at exit: 508 bytes in 6 blocks
 *
 * @src suppress_leaks_other.c
 * @suppressions suppress_leaks.supp
 * @suppressions suppress_leaks_more.supp
 * @vg-suppressions suppress_leaks.vg.supp
 * @proc 0 exit=0 in_use=508/6
 * @kinds 0 definitely_lost=180/3 suppressed=328/3
 * @leak 0 func_c 180/3 definitely_lost
 * @absent 0 func_a
 * @absent 0 func_b
 * @ht-stderr func_c.*(limit|max_bytes)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinds.h"

void func_b(void);

NOINLINE void func_a(void)
{
	char *p = malloc(64); /* @site func_a */

	memset(p, 'a', 64);
	KEEP(p);
}

NOINLINE void func_c(void)
{
	char *p = malloc(60); /* @site func_c */

	memset(p, 'c', 60);
	KEEP(p);
}

int main(void)
{
	int i;

	for (i = 0; i < 2; i++)
		func_a();
	func_b();
	for (i = 0; i < 3; i++)
		func_c();
	scrub_stack();
	printf("leaked from func_a, func_b and func_c\n");
	return 0;
}
