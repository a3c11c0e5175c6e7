/*
 * suppress_leaks_other — the part of suppress_leaks whose leak is
 * suppressed by source file: a pattern with a '*' wildcard that matches
 * this file's name and no other frame of the program.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

NOINLINE void func_b(void)
{
	char *p = malloc(200); /* @site func_b */

	memset(p, 'b', 200);
	KEEP(p);
}
