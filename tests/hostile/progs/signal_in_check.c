/*
 * signal_in_check — the program's own signals while a leak check that
 * another thread asked for has the world stopped. A sender thread
 * sends signals to the process with kill(), one at a time, each only
 * once the last one was taken and the main thread sleeps in
 * pthread_join: bare, the kernel gives every one to the main thread
 * (sent faster, one can reach another thread while the main one is on
 * its way out of the handler). First SIGURG, which the program leaves at
 * its default (ignored: bare, the kernel drops it, but while a stop
 * traces the main thread it is queued and wakes a thread), then, once it
 * has a handler (SA_RESTART), SIGUSR1. Meanwhile a checker thread calls
 * heaptrail_leak_check() 30 times, which stops the main thread; one
 * thread waits in epoll_wait and one in nanosleep, 20 ms at a time, and
 * exit 91 if a call fails with EINTR or returns early, as many programs
 * do. Under heaptrail the kernel used to give the signal to the thread a
 * stop leaves in epoll_wait, or to the first one to run after it, in
 * nanosleep. A signal not taken within 5 s is lost: exit 92. The sender
 * reads /proc with stdio: a check stops it (or its malloc waits for the
 * check), so it sends between checks and at their ends, not in their
 * middle (a signal sent just as a check lets the main thread go can
 * still cost a thread in epoll_wait a spurious EINTR: docs/guarantees.md).
 *
 * Expected: 333 bytes in 1 block definitely lost.
 *
 * @kinds 0 definitely_lost=333/1
 * (No @vg: valgrind hands the signals to its threads its own way, and
 * the one in epoll_wait sees EINTR there.)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/syscall.h>

#include "hostile.h"

#define CHECKS 30

static atomic_int handled, done, checks_done;
static pid_t main_tid;

static void on_usr1(int sig)
{
	(void)sig;
	atomic_fetch_add(&handled, 1);
}

static void *t_epoll(void *a)
{
	(void)a;
	int ep = epoll_create1(0);
	struct epoll_event ev;
	while (!atomic_load(&done)) {
		long long s = now_ms();
		die_if_interrupted("epoll_wait", epoll_wait(ep, &ev, 1, 20), s, 20);
	}
	close(ep);
	return NULL;
}

static void *t_nanosleep(void *a)
{
	(void)a;
	while (!atomic_load(&done)) {
		struct timespec ts = { 0, 20 * 1000000L };
		long long s = now_ms();
		die_if_interrupted("nanosleep", nanosleep(&ts, NULL), s, 20);
	}
	return NULL;
}

static void *t_check(void *a)
{
	(void)a;
	for (int i = 0; i < CHECKS; i++) {
		maybe_leak_check();
		atomic_store(&checks_done, i + 1);
		nap_ms(5);
	}
	atomic_store(&done, 1);
	return NULL;
}

/* Is the main thread asleep in a futex wait (its pthread_join), with no
 * signal on its way to it? Then the kernel gives it the next one, bare.
 * (Or stopped by a check in that wait: then heaptrail must.) */
static bool main_joining(void)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)main_tid);
	FILE *f = fopen(path, "r");
	if (!f)
		die("open %s", path);
	const char *state = fgets(buf, sizeof buf, f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	if (!state || (state[2] != 'S' && state[2] != 't'))  /* t: stopped by a check */
		return false;
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)main_tid);
	f = fopen(path, "r");
	if (!f)
		die("open %s", path);
	bool in_futex = fgets(buf, sizeof buf, f) && atoi(buf) == SYS_futex;
	fclose(f);
	return in_futex;
}

/* Is sig pending for the process (sent, not yet taken)? */
static bool pending_for_process(int sig)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		die("open /proc/self/status");
	unsigned long long mask = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "ShdPnd: %llx", &mask) == 1)
			break;
	fclose(f);
	return mask & (1ull << (sig - 1));
}

/* Sends sig to the process and waits until it is taken: handled, or
 * gone from the process's queue. */
static void send_one(int sig)
{
	int before = atomic_load(&handled);
	kill(getpid(), sig);
	long long s = now_ms();
	while (sig == SIGUSR1 ? atomic_load(&handled) == before : pending_for_process(sig)) {
		if (now_ms() - s > 5000) {
			fprintf(stderr, "signal_in_check: signal %d not taken in 5 s\n", sig);
			exit(92);
		}
		nap_ms(1);
	}
	nap_ms(1);  /* and the handler has returned */
}

static void *t_send(void *a)
{
	(void)a;
	bool handler = false;
	while (!atomic_load(&done)) {
		if (!handler && atomic_load(&checks_done) >= CHECKS / 2) {
			struct sigaction sa;
			memset(&sa, 0, sizeof sa);
			sa.sa_handler = on_usr1;
			sa.sa_flags = SA_RESTART;
			sigaction(SIGUSR1, &sa, NULL);
			handler = true;
		}
		if (!main_joining()) {
			nap_ms(1);
			continue;
		}
		send_one(handler ? SIGUSR1 : SIGURG);
	}
	return NULL;
}

int main(void)
{
	main_tid = (pid_t)syscall(SYS_gettid);
	void *(*fns[])(void *) = { t_epoll, t_nanosleep, t_check, t_send };
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, fns[i], NULL))
			die("pthread_create");
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	if (atomic_load(&handled) == 0)
		die("no SIGUSR1 was sent");
	leak_bytes(333);
	scrub_stack();
	printf("signal_in_check: no call was interrupted\n");
	return 0;
}
