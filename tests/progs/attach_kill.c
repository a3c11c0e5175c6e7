/* A program for the crash-only check of attach and detach (attach:kill
 * in tests/control/test_attach.py): four threads allocate and free
 * through the PLT without a pause, each block filled with a pattern
 * checked before it is freed; one thread waits in epoll_wait and one in
 * nanosleep; one sends the main thread a queued signal (SIGRTMIN+1, its
 * handler installed with SA_RESTART) every 2 ms; the main thread reads
 * commands on stdin:
 *   ping   answers "ok N" (N: blocks checked so far, which grows)
 *   lost   answers "ok lost N": the signals sent that never arrived so far
 *          (the sending paused until the last ones have arrived)
 *   quit   stops the threads, checks every block still held, prints
 *          "done ok" and exits 0
 * It dies with its own status when something goes wrong: 99 a block's
 * pattern changed, 98 a read, 97 a nanosleep, 96 an epoll_wait failed
 * with EINTR (or any other error). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 4
#define HELD 64

static atomic_int quitting, stop_sending, pause_sending;
static atomic_long sent, received;
static pthread_t main_thread;
static atomic_long checked;
static void *held[WORKERS][HELD];
static size_t held_size[WORKERS][HELD];

static unsigned char pattern(int w, size_t slot, size_t i)
{
	return (unsigned char)(w * 31 + slot * 7 + i);
}

static void check(int w, size_t slot)
{
	unsigned char *p = held[w][slot];
	for (size_t i = 0; i < held_size[w][slot]; i++)
		if (p[i] != pattern(w, slot, i)) {
			fprintf(stderr, "attach_kill: block %d/%zu changed at byte %zu\n", w, slot, i);
			_exit(99);
		}
}

static void *worker(void *arg)
{
	int w = (int)(intptr_t)arg;
	unsigned seed = (unsigned)w * 2654435761u + 1;
	while (!atomic_load(&quitting)) {
		seed = seed * 1103515245u + 12345u;
		size_t slot = (seed >> 8) % HELD, n = 16 + (seed >> 16) % 2000;
		if (held[w][slot]) {
			check(w, slot);
			free(held[w][slot]);
			atomic_fetch_add(&checked, 1);
		}
		unsigned char *p = malloc(n);
		if (!p)
			_exit(95);
		for (size_t i = 0; i < n; i++)
			p[i] = pattern(w, slot, i);
		held[w][slot] = p;
		held_size[w][slot] = n;
	}
	return NULL;
}

static void *sleeper(void *arg)
{
	(void)arg;
	while (!atomic_load(&quitting)) {
		struct timespec t = { 0, 20 * 1000 * 1000 };
		if (nanosleep(&t, NULL)) {
			fprintf(stderr, "attach_kill: nanosleep: %s\n", strerror(errno));
			_exit(97);
		}
	}
	return NULL;
}

static void on_signal(int sig)
{
	(void)sig;
	atomic_fetch_add(&received, 1);
}

static void *sender(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_sending)) {
		struct timespec t = { 0, 2 * 1000 * 1000 };
		if (!atomic_load(&pause_sending) &&
		    pthread_sigqueue(main_thread, SIGRTMIN + 1, (union sigval){ 0 }) == 0)
			atomic_fetch_add(&sent, 1);
		while (nanosleep(&t, &t))
			;
	}
	return NULL;
}

static void *waiter(void *arg)
{
	(void)arg;
	int ep = epoll_create1(0);
	struct epoll_event ev;
	while (!atomic_load(&quitting))
		if (epoll_wait(ep, &ev, 1, 30) < 0) {
			fprintf(stderr, "attach_kill: epoll_wait: %s\n", strerror(errno));
			_exit(96);
		}
	return NULL;
}

int main(void)
{
	pthread_t t[WORKERS + 2], send;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGRTMIN + 1, &sa, NULL);
	main_thread = pthread_self();
	pthread_create(&send, NULL, sender, NULL);
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
	pthread_create(&t[WORKERS], NULL, sleeper, NULL);
	pthread_create(&t[WORKERS + 1], NULL, waiter, NULL);
	printf("ready\n");
	fflush(stdout);
	char line[64];
	size_t n = 0;
	for (;;) {
		ssize_t r = read(0, line + n, 1);
		if (r < 0) {
			fprintf(stderr, "attach_kill: read: %s\n", strerror(errno));
			_exit(98);
		}
		if (r == 0 || line[n] == '\n' || n + 1 == sizeof line) {
			line[n] = 0;
			n = 0;
			if (!strcmp(line, "lost")) {
				atomic_store(&pause_sending, 1);
				usleep(20000);
				for (int i = 0; i < 100 && atomic_load(&received) != atomic_load(&sent);
				     i++)
					usleep(10000);
				printf("ok lost %ld\n", atomic_load(&sent) - atomic_load(&received));
				fflush(stdout);
				atomic_store(&pause_sending, 0);
				continue;
			}
			if (!strcmp(line, "ping")) {
				printf("ok %ld\n", atomic_load(&checked));
				fflush(stdout);
				continue;
			}
			if (r && strcmp(line, "quit"))
				continue;
			break;
		}
		n++;
	}
	atomic_store(&stop_sending, 1);
	pthread_join(send, NULL);
	atomic_store(&quitting, 1);
	for (int i = 0; i < WORKERS + 2; i++)
		pthread_join(t[i], NULL);
	for (int w = 0; w < WORKERS; w++)
		for (size_t s = 0; s < HELD; s++)
			if (held[w][s]) {
				check(w, s);
				free(held[w][s]);
			}
	printf("done ok\n");
	return 0;
}
