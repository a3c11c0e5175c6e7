/*
 * noleak_libc — frees everything it allocates, but leans on the parts of
 * libc that keep caches behind the program's back: locale loading
 * (setlocale(LC_ALL, "") with LC_ALL=C.UTF-8 from the runner), stdio
 * buffers (fopen/fprintf/fclose, printf), NSS (getpwuid loads
 * libnss_*), getline, opendir/readdir/closedir, and two threads that are
 * joined.  At exit libc's caches are released by __libc_freeres (valgrind
 * calls it, and so does heaptrail), so nothing the program did is in use.
 *
 * Optional argument: the exit status (to test --error-exitcode with a
 * clean program that fails).
 *
 * Expected (valgrind memcheck, Debian 12):
 *   in use at exit: 0 bytes in 0 blocks
 *
 * @proc 0 exit=0 in_use=0/0
 * @usage-varies locale and NSS loading differ under valgrind (526 or 527
 *   allocations there, 527 here)
 */
#define _GNU_SOURCE /* asprintf */
#include <dirent.h>
#include <locale.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

NOINLINE void *worker(void *arg)
{
	long seed = (long)arg;
	long sum = 0;

	for (int round = 0; round < 50; round++) {
		int n = 100 + round;
		int *v = malloc(n * sizeof(*v));
		char *s = NULL;

		for (int i = 0; i < n; i++)
			v[i] = (int)((seed * 7919 + i * 104729) % 1000);
		qsort(v, n, sizeof(*v), cmp_int);
		if (asprintf(&s, "%d-%d", v[0], v[n - 1]) >= 0)
			sum += strlen(s);
		free(s);
		free(v);
	}
	return (void *)sum;
}

static int use_file(void)
{
	char path[64];
	FILE *f;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int lines = 0;

	snprintf(path, sizeof(path), "/tmp/heaptrail-noleak-%d.txt",
		 (int)getpid());
	f = fopen(path, "w");
	if (!f)
		return -1;
	for (int i = 0; i < 3; i++)
		fprintf(f, "line %d of a file written with stdio\n", i);
	fclose(f);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while ((len = getline(&line, &cap, f)) > 0)
		lines++;
	free(line);
	fclose(f);
	unlink(path);
	return lines;
}

static int use_dir(void)
{
	DIR *d = opendir("/");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL)
		n++;
	closedir(d);
	return n > 2;
}

int main(int argc, char **argv)
{
	pthread_t t[2];
	void *r[2];
	struct passwd *pw;
	const char *loc = setlocale(LC_ALL, "");

	printf("locale set: %s\n", loc ? "yes" : "no");
	pw = getpwuid(getuid());
	printf("user found: %s\n", pw ? "yes" : "no");
	printf("file lines: %d\n", use_file());
	printf("directory listed: %s\n", use_dir() == 1 ? "yes" : "no");
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, (void *)(long)(i + 1));
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], &r[i]);
	printf("threads: %ld %ld\n", (long)r[0], (long)r[1]);
	return argc > 1 ? atoi(argv[1]) : 0;
}
