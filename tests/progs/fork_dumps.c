/*
 * fork_dumps — heap dumps through the API on both sides of a fork: the
 * parent dumps, forks, the child dumps once and exits, then the parent
 * dumps again. Each process numbers its own dumps from 0000: the parent
 * writes PARENT.0000 and PARENT.0001, the child CHILD.0000. Prints the
 * child's pid.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "heaptrail.h"

int main(void)
{
	if (!heaptrail_dump) {
		fprintf(stderr, "fork_dumps: run it under heaptrail\n");
		return 2;
	}
	void *volatile a = malloc(1000);
	if (heaptrail_dump(NULL))
		return 1;
	pid_t child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		void *volatile b = malloc(2000);
		int rc = heaptrail_dump(NULL);
		free(b);
		_exit(rc ? 1 : 0);
	}
	int status;
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	if (heaptrail_dump(NULL))
		return 1;
	free(a);
	printf("%ld\n", (long)child);
	return 0;
}
