/*
 * spawn — vfork, posix_spawn and clone(CLONE_VM): each child runs and the
 * parent checks its status; the clone child shares the parent's memory
 * and leaves with a raw exit syscall, without allocating.
 *
 * Expected: 700 bytes in 1 block definitely lost in the root; exit 7.
 *
 * @exit 7
 * @kinds 0 definitely_lost=700/1
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "hostile.h"

extern char **environ;
static volatile int clone_ran;

static int clone_child(void *arg)
{
	(void)arg;
	clone_ran = 42;
	syscall(SYS_exit, 5);
	return 0;
}

int main(void)
{
	int st;
	fflush(stdout);
	pid_t pid = vfork();
	if (pid < 0)
		die("vfork");
	if (pid == 0) {
		char *argv[] = { "/bin/sh", "-c", "echo vfork child; exit 4", NULL };
		execve(argv[0], argv, environ);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) != pid)
		die("waitpid");
	printf("vfork+exec: status %d\n", WEXITSTATUS(st));
	fflush(stdout);

	pid = vfork();
	if (pid == 0)
		_exit(6);
	waitpid(pid, &st, 0);
	printf("vfork+_exit: status %d\n", WEXITSTATUS(st));
	fflush(stdout);

	char *argv2[] = { "/bin/sh", "-c", "echo spawned; exit 3", NULL };
	if (posix_spawn(&pid, "/bin/sh", NULL, NULL, argv2, environ))
		die("posix_spawn");
	waitpid(pid, &st, 0);
	printf("posix_spawn: status %d\n", WEXITSTATUS(st));
	fflush(stdout);

	size_t stack_size = 64 * 1024;
	char *stack = malloc(stack_size);
	pid = clone(clone_child, stack + stack_size, CLONE_VM | SIGCHLD, NULL);
	if (pid < 0)
		die("clone");
	if (waitpid(pid, &st, 0) != pid)
		die("waitpid clone");
	free(stack);
	printf("clone(CLONE_VM): status %d, shared write %d\n", WEXITSTATUS(st), clone_ran);
	leak_bytes(700);
	scrub_stack();
	return 7;
}
