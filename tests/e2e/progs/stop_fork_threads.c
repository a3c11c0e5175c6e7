/*
 * stop_fork_threads — fork while another thread walks the loaded objects
 * with dl_iterate_phdr (as unwinders and the agent's own dumps do): glibc
 * does not reset that walk's lock in the child, so a child that calls
 * dl_iterate_phdr (the agent writing its module list in the exit report,
 * libunwind finding the caller of exit) may block for ever. The bare
 * child never does. Each of 30 children leaks one block and exits, by
 * exit() or by _exit(); the parent prints how many exited in time.
 * Run by the cli:stop-transparent test.
 *
 * @cli-only
 */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int slow(struct dl_phdr_info *info, size_t size, void *arg)
{
	for (volatile int k = 0; k < 20000; k++)
		;
	return 0;
}

static void *walker(void *arg)
{
	for (;;)
		dl_iterate_phdr(slow, NULL);
	return arg;
}

int main(void)
{
	pthread_t t;
	int ok = 0;
	pthread_create(&t, NULL, walker, NULL);
	for (int i = 0; i < 30; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			void *volatile leak = malloc(77);
			leak = NULL;
			if (i % 2)
				_exit(0);
			exit(0);
		}
		int st;
		for (int w = 0; w < 500; w++) {
			if (waitpid(pid, &st, WNOHANG) == pid) {
				ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
				goto next;
			}
			struct timespec ts = { 0, 10000000 };
			nanosleep(&ts, NULL);
		}
		kill(pid, SIGKILL);  /* 5 s: hung */
		waitpid(pid, &st, 0);
	next:;
	}
	printf("%d of 30 children exited\n", ok);
	return 0;
}
