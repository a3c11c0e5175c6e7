/*
 * hostile_files — what the agent writes must not be turned against the
 * program (used by the cli:agent-files test).
 *
 * "plant DIR": before exiting, plants a symlink at every name the agent
 * will write in DIR (the exit report, the final dump, and the temporary
 * names the agent once used, NAME.tmp.PID) pointing at a victim file
 * DIR/victim-N that holds "victim\n". The agent must leave every victim
 * as it was and create its files as regular files of mode 0600.
 *
 * "fds DIR": prints the descriptor its first open() gets, closes every
 * descriptor above 2 (close_range), makes DIR/mine its own file (it gets
 * the lowest descriptor, the one a timeline fd had), allocates for
 * 300 ms so the timeline gets rows, and checks its file still holds
 * only what it wrote. Bare: "first fd 3", "mine intact".
 *
 * @cli-only
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

NOINLINE void lose_one(void)
{
	char *p = malloc(32); /* @site lose_one */
	memset(p, 1, 32);
	KEEP(p);
}

static void plant(const char *dir, const char *name, int n)
{
	char victim[4096], link[4096];
	snprintf(victim, sizeof victim, "%s/victim-%d", dir, n);
	snprintf(link, sizeof link, "%s/%s", dir, name);
	FILE *f = fopen(victim, "w");
	if (!f)
		exit(3);
	fputs("victim\n", f);
	fclose(f);
	unlink(link);
	if (symlink(victim, link))
		exit(4);
}

static int plant_all(const char *dir)
{
	long pid = (long)getpid();
	char name[256];
	int n = 0;
	const char *kinds[] = { "leaks", "0000.final.heap", "0001.final.heap" };
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof name, "heaptrail.%ld.%s", pid, kinds[i]);
		plant(dir, name, n++);
		snprintf(name, sizeof name, "heaptrail.%ld.%s.tmp.%ld", pid, kinds[i], pid);
		plant(dir, name, n++);
	}
	lose_one();
	printf("planted %d\n", n);
	return 0;
}

static int own_file(const char *dir)
{
	char path[4096], buf[64];
	int fd = open("/dev/null", O_RDONLY);
	printf("first fd %d\n", fd);
	fflush(stdout);
	syscall(SYS_close_range, 3u, ~0u, 0u);
	snprintf(path, sizeof path, "%s/mine", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, "mine\n", 5) != 5)
		return 5;
	/* 300 ms of work: a 4 MiB block (sampled at any rate) every 10 ms.
	 * Timeline rows are written when the heap changes, from the
	 * allocating thread; an idle program gets none, and needs none. */
	for (int i = 0; i < 30; i++) {
		char *p = malloc(4 << 20);
		if (!p)
			return 6;
		memset(p, 1, 4096);
		KEEP(p);
		free(p);
		struct timespec t = { 0, 10 * 1000 * 1000 };
		while (nanosleep(&t, &t))
			;
	}
	ssize_t n = pread(fd, buf, sizeof buf, 0);
	printf(n == 5 && !memcmp(buf, "mine\n", 5) ? "mine intact\n" : "mine clobbered\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "plant"))
		return plant_all(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "fds"))
		return own_file(argv[2]);
	fprintf(stderr, "usage: hostile_files plant|fds DIR\n");
	return 2;
}
