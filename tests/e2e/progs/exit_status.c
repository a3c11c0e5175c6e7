/*
 * exit_status — leaks, then leaves with exit(3): the status must pass
 * through heaptrail unchanged, and the leak must still be reported.
 *
 * Expected (valgrind memcheck, Debian 12):
 *   leak_before_exit 1 x 512
 *   in use at exit: 512 bytes in 1 blocks, status 3
 *
 * @proc 0 exit=3 in_use=512/1
 * @leak 0 leak_before_exit 512/1
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

NOINLINE void leak_before_exit(void)
{
	char *p = malloc(512); /* @site leak_before_exit */
	memset(p, 'x', 512);
	KEEP(p);
}

int main(void)
{
	leak_before_exit();
	printf("exiting with status 3\n");
	exit(3);
}
