/*
 * leak_one — the smallest leak: one malloc in a named function, the
 * pointer dropped.
 *
 * Expected (valgrind memcheck, Debian 12):
 *   in use at exit: 1,000 bytes in 1 blocks, definitely lost,
 *   allocated by leak_one at the @site line.
 *
 * @proc 0 exit=0 in_use=1000/1
 * @leak 0 leak_one 1000/1
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

NOINLINE static void leak_one(void)
{
	char *p = malloc(1000); /* @site leak_one */
	memset(p, 'x', 1000);
	KEEP(p);
}

int main(void)
{
	leak_one();
	printf("leaked one block\n");
	return 0;
}
