/*
 * exec_leak — the program leaks, then execs itself with an argument; the
 * new image leaks something else.  What the first image leaked vanishes
 * with it: only the exec'd image's blocks are in use at exit, under the
 * same pid.
 *
 * Expected (valgrind memcheck --trace-children=yes, Debian 12), one pid:
 *   first image:  leak_before_exec 100/1, never reported (no exit)
 *   after exec:   leak_after_exec 300/1
 *                 in use at exit: 300 bytes in 1 blocks, status 0
 *
 * @proc 0 exit=0 in_use=300/1 args=after-exec
 * @leak 0 leak_after_exec 300/1
 * @absent 0 leak_before_exec
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

NOINLINE void leak_before_exec(void)
{
	char *p = malloc(100); /* @site leak_before_exec */
	memset(p, 'e', 100);
	KEEP(p);
}

NOINLINE void leak_after_exec(void)
{
	char *p = malloc(300); /* @site leak_after_exec */
	memset(p, 'E', 300);
	KEEP(p);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "after-exec") == 0) {
		leak_after_exec();
		printf("after exec\n");
		return 0;
	}
	leak_before_exec();
	printf("before exec\n");
	fflush(stdout);
	execl(argv[0], argv[0], "after-exec", (char *)NULL);
	perror("exec_leak: exec");
	return 1;
}
