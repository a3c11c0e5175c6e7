/*
 * handler_alloc — signal handlers that allocate and free (works bare with
 * glibc, which is not async-signal-safe but does not deadlock here).
 * Phase 1, single-threaded: an interval timer fires every 200 us while
 * the main thread mallocs and frees; each handler run allocates a block,
 * frees the previous one.  (Sizes are chosen so that bare glibc serves
 * every call from its per-thread cache, primed first, which a handler can
 * interrupt safely: the handler's bin is not the one it interrupted.)  Phase 2: a thread in a malloc/free loop gets
 * 3,000 pthread_kill()s whose handler mallocs and frees.  The handler
 * once deadlocked on a table lock held by the free it interrupted (and
 * single-threaded, the counts drifted).
 *
 * Expected: 64 bytes in 1 block still reachable (the handler's last
 * block, in a global) and 900 bytes in 1 block definitely lost.
 *
 * @kinds 0 definitely_lost=900/1 still_reachable=64/1
 * @vg
 * @leaks-calls
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/time.h>

#include "hostile.h"

static void *volatile kept;
static volatile sig_atomic_t runs;
static atomic_int stop;

static void handler(int sig)
{
	(void)sig;
	int saved = errno;
	void *p = malloc(64);
	memset(p, 2, 64);
	void *old = kept;
	kept = p;
	free(old);
	runs++;
	errno = saved;
}

/* Fills this thread's cache for the handler's size (64) and the loop's. */
static void prime(void)
{
	void *a = malloc(64), *b = malloc(64), *c = malloc(200);
	KEEP(a);
	KEEP(b);
	KEEP(c);
	free(a);
	free(b);
	free(c);
}

static void *looper(void *arg)
{
	(void)arg;
	prime();
	/* created with SIGUSR1 blocked: a handler that allocates before the
	 * cache is primed would enter glibc's arena code, which it may have
	 * interrupted (a hang bare) */
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
	while (!atomic_load(&stop)) {
		void *p = malloc(200);
		KEEP(p);
		free(p);
	}
	return NULL;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);

	prime();
	struct itimerval it = { { 0, 200 }, { 0, 200 } };
	setitimer(ITIMER_REAL, &it, NULL);
	long long end = now_ms() + 400;
	while (now_ms() < end) {
		void *p = malloc(200);
		KEEP(p);
		free(p);
	}
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	int phase1 = runs > 0;

	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	pthread_t t;
	pthread_create(&t, NULL, looper, NULL);
	for (int i = 0; i < 3000; i++) {
		pthread_kill(t, SIGUSR1);
		if (i % 100 == 0)
			nap_ms(1);
	}
	nap_ms(100);
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	leak_bytes(900);
	scrub_stack();
	printf("handler_alloc: timer handler ran: %s; done\n", phase1 ? "yes" : "no");
	return 0;
}
