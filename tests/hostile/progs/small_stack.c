/*
 * small_stack — a thread with a 16 KiB stack (PTHREAD_STACK_MIN), using
 * about 5 KiB of it, sleeps while leak checks stop it (the stop signal's
 * handler runs on that stack) and while the program exits with the
 * thread still running.  The main thread blocks the leak-check signal
 * (SIGRTMAX-2), so a check asked for by that signal runs on the small
 * thread (on the agent's own stack); `heaptrail leaks` (@leaks-calls)
 * asks by ptrace and borrows no thread with less than 128 KiB of stack
 * to spare: the small thread is stopped for the scan, never borrowed.
 *
 * Expected: 222 bytes in 1 block definitely lost.
 *
 * @kinds 0 definitely_lost=222/1
 * @vg
 * @leaks-calls
 */
#include <pthread.h>
#include <signal.h>

#include "hostile.h"

NOINLINE static int deep(int n)
{
	volatile char pad[1024];
	pad[0] = (char)n;
	if (n > 0)
		return deep(n - 1) + pad[0];
	for (;;)
		nap_ms(50);
}

static void *small(void *arg)
{
	(void)arg;
	deep(4);
	return NULL;
}

int main(void)
{
	sigset_t check;
	sigemptyset(&check);
	sigaddset(&check, SIGRTMAX - 2);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 16384);
	pthread_t t;
	if (pthread_create(&t, &attr, small, NULL))
		die("pthread_create");
	pthread_sigmask(SIG_BLOCK, &check, NULL);
	for (int i = 0; i < 10; i++) {
		nap_ms(100);
		maybe_leak_check();
	}
	leak_bytes(222);
	scrub_stack();
	say("small_stack: exiting with the 16 KiB thread running\n");
	exit(0);
}
