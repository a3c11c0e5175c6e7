/*
 * static_leak — built with -static only: there is no dynamic loader, so
 * an LD_PRELOAD'ed agent can never load.  heaptrail run must refuse it
 * with a one-line error naming "static" instead of running the program
 * untracked.
 *
 * @static (implies @cli-only)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

NOINLINE void leak_in_static(void)
{
	char *p = malloc(100); /* @site leak_in_static */
	memset(p, 's', 100);
	KEEP(p);
}

int main(void)
{
	leak_in_static();
	printf("static program ran\n");
	return 0;
}
