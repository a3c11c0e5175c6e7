/*
 * handler_alloc_only.c — for 600 ms only a SIGALRM handler allocates (a
 * timer every 500 us; the main thread spins), then for 600 ms only the
 * main thread does (tests/control/test_attach_refresh.py, :handler).
 * Under `heaptrail run --every 5ms` the first phase's dumps are written
 * from the handler, where asking the allocator for its totals could
 * deadlock: they must not say heap_in_use; the second phase's must.
 * Prints "phase2 MS" (CLOCK_REALTIME in ms, as the dumps' unix_ms) when
 * the second phase begins, and "done".
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static void *volatile keep;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void on_alarm(int sig)
{
	(void)sig;
	/* not async-signal-safe in general; here nothing else allocates */
	free(keep);
	keep = malloc(64);
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { { 0, 500 }, { 0, 500 } };
	double t0 = now_ms();
	setitimer(ITIMER_REAL, &it, NULL);
	volatile unsigned long spin = 0;
	while (now_ms() - t0 < 600)
		spin++;
	memset(&it, 0, sizeof it);
	setitimer(ITIMER_REAL, &it, NULL);
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	printf("phase2 %lld\n", (long long)rt.tv_sec * 1000 + rt.tv_nsec / 1000000);
	fflush(stdout);
	while (now_ms() - t0 < 1200) {
		free(keep);
		keep = malloc(64);
	}
	free(keep);
	printf("done\n");
	return 0;
}
