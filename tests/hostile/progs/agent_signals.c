/*
 * agent_signals — the program installs its own handlers on the signals
 * the agent uses by default (SIGRTMAX-1 to stop threads, SIGRTMAX-2 for
 * leak checks) and raises each three times itself: its handlers must
 * run exactly as often as it raised them, and nothing the agent does
 * (leak checks, scans at exit, `heaptrail leaks` calls, which must
 * refuse or leave the program's handler alone) may run them more often.
 *
 * Expected: 100 bytes in 1 block definitely lost.
 *
 * @kinds 0 definitely_lost=100/1
 * @vg
 */
#include <pthread.h>
#include <signal.h>

#include "hostile.h"

static volatile sig_atomic_t hits[2];

static void on_sig(int sig)
{
	hits[sig == SIGRTMAX - 1 ? 0 : 1]++;
}

static void *idle(void *arg)
{
	(void)arg;
	nap_ms(1200);
	return NULL;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sig;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGRTMAX - 1, &sa, NULL);
	sigaction(SIGRTMAX - 2, &sa, NULL);
	pthread_t t;
	pthread_create(&t, NULL, idle, NULL);
	for (int i = 0; i < 3; i++) {
		raise(SIGRTMAX - 1);
		raise(SIGRTMAX - 2);
	}
	maybe_leak_check();
	nap_ms(1000);
	pthread_join(t, NULL);
	leak_bytes(100);
	scrub_stack();
	printf("agent_signals: handler ran %d and %d times\n", (int)hits[0], (int)hits[1]);
	return 0;
}
