/*
 * eintr — EINTR-sensitive calls in other threads during leak scans:
 * threads sit in nanosleep, poll, epoll_wait, read on a pipe and sleep,
 * each for 300 ms at a time (200 ms for the pipe's writer), and abort
 * (exit 91) if a call fails with EINTR or returns early, as many
 * programs treat that as fatal.  Meanwhile the main thread asks for leak
 * checks (and the runner sends `heaptrail leaks`).
 *
 * Expected: 333 bytes in 1 block definitely lost.
 *
 * @kinds 0 definitely_lost=333/1
 * @vg
 * @leaks-calls
 */
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>

#include "hostile.h"

#define ROUNDS 5

static void *t_nanosleep(void *a)
{
	(void)a;
	for (int i = 0; i < ROUNDS; i++) {
		struct timespec ts = { 0, 300 * 1000000L };
		long long s = now_ms();
		die_if_interrupted("nanosleep", nanosleep(&ts, NULL), s, 300);
	}
	return NULL;
}

static void *t_poll(void *a)
{
	(void)a;
	for (int i = 0; i < ROUNDS; i++) {
		long long s = now_ms();
		die_if_interrupted("poll", poll(NULL, 0, 300), s, 300);
	}
	return NULL;
}

static void *t_epoll(void *a)
{
	(void)a;
	int ep = epoll_create1(0);
	struct epoll_event ev;
	for (int i = 0; i < ROUNDS; i++) {
		long long s = now_ms();
		die_if_interrupted("epoll_wait", epoll_wait(ep, &ev, 1, 300), s, 300);
	}
	close(ep);
	return NULL;
}

static int pipefd[2];

static void *t_writer(void *a)
{
	(void)a;
	for (int i = 0; i < ROUNDS; i++) {
		nap_ms(200);
		if (write(pipefd[1], "x", 1) != 1)
			die("write");
	}
	return NULL;
}

static void *t_read(void *a)
{
	(void)a;
	char c;
	for (int i = 0; i < ROUNDS; i++) {
		long long s = now_ms();
		ssize_t n = read(pipefd[0], &c, 1);
		die_if_interrupted("read", (int)n, s, 0);
		if (n != 1) {
			fprintf(stderr, "eintr: read returned %zd\n", n);
			exit(91);
		}
	}
	return NULL;
}

static void *t_sleep(void *a)
{
	(void)a;
	long long s = now_ms();
	unsigned left = sleep(1);
	if (left) {
		fprintf(stderr, "eintr: sleep(1) returned %u early\n", left);
		exit(91);
	}
	die_if_interrupted("sleep", 0, s, 1000);
	return NULL;
}

int main(void)
{
	if (pipe(pipefd))
		die("pipe");
	void *(*fns[])(void *) = { t_nanosleep, t_poll, t_epoll, t_writer, t_read, t_sleep };
	pthread_t t[6];
	for (int i = 0; i < 6; i++)
		if (pthread_create(&t[i], NULL, fns[i], NULL))
			die("pthread_create");
	for (int i = 0; i < 12; i++) {
		nap_ms(100);
		maybe_leak_check();
	}
	for (int i = 0; i < 6; i++)
		pthread_join(t[i], NULL);
	leak_bytes(333);
	scrub_stack();
	printf("eintr: no call was interrupted\n");
	return 0;
}
