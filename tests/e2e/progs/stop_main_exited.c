/*
 * stop_main_exited — main calls pthread_exit and leaves a zombie main
 * thread in /proc/self/task; a worker then asks for a leak check and
 * exits. The zombie cannot be traced nor signalled: the stop must skip
 * it, not give up on ptrace (and warn about a thread it cannot stop).
 * Run by the cli:stop-transparent test.
 *
 * @cli-only
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int heaptrail_leak_check(int flags) __attribute__((weak));

void *keep;

static void *worker(void *arg)
{
	struct timespec ts = { 0, 100000000 };
	nanosleep(&ts, NULL);
	keep = malloc(10);
	int r = heaptrail_leak_check ? heaptrail_leak_check(0) : 0;
	printf("check %d\n", r);
	exit(0);
}

static void *idle(void *arg)
{
	for (;;) {
		struct timespec ts = { 1, 0 };
		nanosleep(&ts, NULL);
	}
	return arg;
}

int main(void)
{
	pthread_t t, u;
	pthread_create(&u, NULL, idle, NULL);
	pthread_create(&t, NULL, worker, NULL);
	pthread_exit(NULL);
}
