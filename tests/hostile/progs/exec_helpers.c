/*
 * exec_helpers — runs a static program and a set-user-ID program (the
 * runner builds both beside it: a static one, and one owned by 65534
 * with the set-user-ID bit, so the loader runs it in secure mode, where
 * LD_PRELOAD paths are ignored), each by fork+exec, and prints their
 * statuses; they print their own lines.  The agent cannot be in either:
 * nothing may hang waiting for their reports.
 *
 * Expected: 10 bytes in 1 block definitely lost; exit 0.
 *
 * @kinds 0 definitely_lost=10/1
 * @helper exec_helper.c helper-static static
 * @helper exec_helper.c helper-setuid setuid
 * @root
 */
#include <sys/wait.h>

#include "hostile.h"

static int run(const char *name)
{
	char path[4096];
	ssize_t n = readlink("/proc/self/exe", path, sizeof path - 64);
	if (n <= 0)
		die("readlink");
	path[n] = 0;
	strcpy(strrchr(path, '/') + 1, name);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		execl(path, name, (char *)NULL);
		_exit(127);
	}
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(void)
{
	printf("static: %d\n", run("helper-static"));
	printf("setuid: %d\n", run("helper-setuid"));
	leak_bytes(10);
	scrub_stack();
	return 0;
}
