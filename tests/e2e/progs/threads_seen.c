/*
 * threads_seen — the number of threads the program sees, after 300 ms of
 * allocating a 4 MiB block every 10 ms (big enough to be sampled at any
 * rate: each one is a recorded event, so time triggers have something to
 * write). The agent must start no thread of its own, with `every` and
 * the timeline on too: the count is the bare one, 1.
 *
 * @cli-only
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

NOINLINE void churn(void)
{
	char *p = malloc(4 << 20);
	if (!p)
		exit(3);
	memset(p, 1, 4096);
	KEEP(p);
	free(p);
}

int main(void)
{
	for (int i = 0; i < 30; i++) {
		churn();
		struct timespec t = { 0, 10 * 1000 * 1000 };
		while (nanosleep(&t, &t))
			;
	}
	int threads = 0;
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return 4;
	for (struct dirent *e; (e = readdir(d));)
		threads += e->d_name[0] != '.';
	closedir(d);
	printf("threads %d\n", threads);
	return 0;
}
