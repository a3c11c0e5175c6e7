/*
 * fork_leak — parent and child each leak something different; a block
 * leaked before fork is in use in both.  The child leaves with exit(7)
 * (atexit handlers run), the parent waits and reports the status.
 *
 * Expected (valgrind memcheck, Debian 12), two processes:
 *   parent (depth 0): leak_before_fork 64/1 + leak_in_parent 2 x 200
 *                     in use at exit: 464 bytes in 3 blocks, status 0
 *   child  (depth 1): leak_before_fork 64/1 + leak_in_child 3 x 48
 *                     in use at exit: 208 bytes in 4 blocks, status 7
 *
 * @proc 0 exit=0 in_use=464/3
 * @leak 0 leak_before_fork 64/1
 * @leak 0 leak_in_parent 400/2
 * @absent 0 leak_in_child
 * @proc 1 exit=7 in_use=208/4
 * @leak 1 leak_before_fork 64/1
 * @leak 1 leak_in_child 144/3
 * @absent 1 leak_in_parent
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

NOINLINE void leak_before_fork(void)
{
	char *p = malloc(64); /* @site leak_before_fork */
	memset(p, 'b', 64);
	KEEP(p);
}

NOINLINE void leak_in_child(void)
{
	char *p = malloc(48); /* @site leak_in_child */
	memset(p, 'c', 48);
	KEEP(p);
}

NOINLINE void leak_in_parent(void)
{
	char *p = malloc(200); /* @site leak_in_parent */
	memset(p, 'p', 200);
	KEEP(p);
}

int main(void)
{
	pid_t pid;
	int status;

	leak_before_fork();
	printf("forking\n");
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		perror("fork_leak: fork");
		return 1;
	}
	if (pid == 0) {
		for (int i = 0; i < 3; i++)
			leak_in_child();
		exit(7);
	}
	for (int i = 0; i < 2; i++)
		leak_in_parent();
	if (waitpid(pid, &status, 0) != pid) {
		perror("fork_leak: waitpid");
		return 1;
	}
	if (WIFEXITED(status))
		printf("child exited with status %d\n", WEXITSTATUS(status));
	else
		printf("child ended abnormally\n");
	return 0;
}
