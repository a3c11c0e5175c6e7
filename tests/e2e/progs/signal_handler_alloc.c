/*
 * signal_handler_alloc — a signal handler that frees and allocates while
 * the program is busy in malloc/free (glibc allows it in practice). A
 * timer interrupts a malloc/free loop 1,000 times; each time the handler
 * frees one block of a ring and allocates its replacement (so the
 * interrupted call and the handler often want the same table entry), and
 * leaks one 48-byte block. A second thread, idle with every signal
 * blocked, makes the agent's locks real locks: before the handler's calls
 * were deferred, a free in the handler spun for ever on the lock held by
 * the free it interrupted, and single-threaded the handler's blocks went
 * untracked. glibc's malloc is not async-signal-safe, but this runs bare:
 * the loop's sizes and the handler's ring each stay in their own bins of
 * glibc's per-thread cache (no lock, no shared state), and the handler's
 * leaks, from the arena, never meet the loop there.
 *
 * Expected (valgrind memcheck, Debian 12): only the handler's leaks
 *   handler_leak   1,000 x 48 = 48,000 bytes in 1,000 blocks, definitely lost
 *   in use at exit: 48,000 bytes in 1,000 blocks
 *
 * @proc 0 exit=0 in_use=48000/1000
 * @kinds 0 definitely_lost=48000/1000
 * @leak 0 handler_leak 48000/1000
 * @usage-varies the main loop's count depends on when the timer fires
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "common.h"

#define CALLS 1000
#define RING 64

static void *ring[RING];
static volatile sig_atomic_t calls;

NOINLINE static void handler_leak(void)
{
	char *p = malloc(48); /* @site handler_leak */
	memset(p, 'h', 48);
	KEEP(p);
}

static void on_alarm(int sig)
{
	(void)sig;
	if (calls >= CALLS)
		return;
	int k = calls % RING;
	free(ring[k]);
	ring[k] = malloc(900 + (size_t)k);
	handler_leak();
	calls++;
}

static void *idle(void *arg)
{
	char c;
	return (void *)(long)read(*(int *)arg, &c, 1);
}

int main(void)
{
	int fds[2];
	pthread_t t;
	sigset_t all, old;

	if (pipe(fds))
		return 1;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_create(&t, NULL, idle, &fds[0]);
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	for (int k = 0; k < RING; k++)
		ring[k] = malloc(900 + (size_t)k);
	for (unsigned long i = 0; i < 64; i++) {  /* fills the cache's bins */
		void *p = malloc(128 + i % 16 * 16);
		KEEP(p);
		free(p);
	}
	signal(SIGALRM, on_alarm);
	struct itimerval it = { { 0, 200 }, { 0, 200 } };
	setitimer(ITIMER_REAL, &it, NULL);
	for (unsigned long i = 0; calls < CALLS; i++) {
		void *p = malloc(128 + i % 16 * 16);
		KEEP(p);
		free(p);
	}
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	for (int k = 0; k < RING; k++)
		free(ring[k]);
	if (write(fds[1], "x", 1) != 1)
		return 1;
	pthread_join(t, NULL);
	printf("handler ran %d times\n", (int)calls);
	return 0;
}
