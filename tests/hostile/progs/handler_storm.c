/*
 * handler_storm — a signal storm whose handler mallocs and frees, on
 * every thread at once, while each thread mallocs, callocs, reallocs and
 * frees (issue 27).  The main thread and three workers each get SIGALRM
 * from a timer of their own (SIGEV_THREAD_ID) every 10 us, for 600 ms;
 * the handler allocates a 64-byte block and frees the thread's previous
 * one.
 *
 * It works bare with glibc (not async-signal-safe, but safe here): the
 * handler's size is served by the thread's tcache, primed with four
 * blocks and kept balanced (one malloc, one free per run), and nothing
 * else allocates that size, so the handler never enters the arena code
 * the loop may hold locked, and never touches a list the code it
 * interrupted is changing.  The loop's sizes go through tcache and
 * through the arena (realloc, 5000 bytes).
 *
 * handler_alloc's timer fires every 200 us, one signal at a time: this
 * one brings a second signal while the agent is still finishing what the
 * first handler left it.  The agent once carried out a handler's
 * deferred free outside the handler, where the next signal's handler
 * could interrupt glibc putting that block back on the very tcache list
 * the handler takes from: "free(): double free detected in tcache 2"
 * within a second, or a deadlock: the handler's malloc found that list
 * empty and went for the arena lock the interrupted realloc held.  And a
 * handler's free while its thread was taking every table lock (sampling
 * raising S) waited for a lock the thread itself held.
 *
 * Expected: every handler block is freed at the end; 900 bytes in 1
 * block definitely lost.
 *
 * No leaks mode (known limit, issue 27): a `heaptrail leaks` request
 * runs its check in a thread the CLI borrows. When the CLI followed the
 * call system call by system call (PTRACE_SYSCALL), a check under a
 * signal every 10 us on every thread took from 2 s to minutes (once
 * 14 min), the program held meanwhile. The call runs without a stop now
 * (src/control/remote.c "the calls": 30-70 ms held here), but no thread
 * here ever waits in a system call, and the one borrowed in the
 * program's own code is most often in a handler that interrupted the
 * agent's hooks: the agent answers -EAGAIN, and each new try waits
 * 300 ms before it borrows a running thread. A call takes 2-3 s, more
 * on a loaded machine: past the suite's 3 s per call, and past the
 * program's end unless it runs for seconds.
 *
 * Exact mode, and sampled with dumps every 5 ms: each ran into the
 * agent's drain of the handlers' deferred records. Delivering a signal
 * takes most of the 10 us period here (9 us of 10, bare, on a 2-core
 * VM), so code the handlers interrupt hardly moves: a drain they could
 * interrupt never caught up with them, and an exact run never left it (a
 * hang in every run until 2026-11-29); sampled, a dump written from
 * inside the drain re-entered it through agent_tables_unlock_all's
 * on_unlock and emptied the buffer under it (a crash about once in 15
 * runs under load). The drain now takes one batch a call, with signals
 * blocked until the entry point that drains leaves, never nests, and
 * does the sampler's slow work (rows, dumps, a raise of S) once after
 * the batch (src/agent/hooks.c "deferred calls"). While records wait
 * the handlers write theirs without a stack: those blocks are untracked
 * and counted in the report's "could not be tracked" warning. Open (on
 * 2026-11-29, under a `yes` on one core): one exact run in ~190 ended
 * with one handler block counted definitely lost (a record missed), and
 * one in ~40 ran past 30 s (bare runs took up to 5 s there); not
 * explained yet.
 *
 * No valgrind check either: under valgrind, which runs one thread at a
 * time and delivers the signals at its own points, the storm ran past
 * the suite's 300 s on 2026-11-29 (its result had been cached before).
 * The expected kinds come from the program itself (leak_bytes(900)).
 *
 * @kinds 0 definitely_lost=900/1
 * @modes exact sample
 * @every 5ms
 * @timeout 30
 */
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>

#include "hostile.h"

#define WORKERS 3
#define RUN_MS 600
#define HANDLER_SIZE 64

static void *volatile kept[WORKERS + 1];
static volatile long runs[WORKERS + 1];
static __thread int me;
static long long end_ms;

static void handler(int sig)
{
	(void)sig;
	int saved = errno;
	void *p = malloc(HANDLER_SIZE);
	if (!p)
		die("handler malloc");
	memset(p, 2, HANDLER_SIZE);
	void *old = kept[me];
	kept[me] = p;
	free(old);
	runs[me]++;
	errno = saved;
}

/* Four blocks of the handler's size in this thread's tcache. */
static void prime(void)
{
	void *a[4];
	for (int i = 0; i < 4; i++)
		a[i] = malloc(HANDLER_SIZE);
	for (int i = 0; i < 4; i++) {
		KEEP(a[i]);
		free(a[i]);
	}
}

static void set_alarm_blocked(int how)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGALRM);
	pthread_sigmask(how, &s, NULL);
}

/* The storm on this thread: primed, a 10 us timer aimed at it, the loop,
 * then the timer off and the handler's block freed. */
static void storm(int id)
{
	me = id;
	prime();
	struct sigevent ev;
	memset(&ev, 0, sizeof ev);
	ev.sigev_notify = SIGEV_THREAD_ID;
	ev.sigev_signo = SIGALRM;
	ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	timer_t t;
	if (timer_create(CLOCK_MONOTONIC, &ev, &t) != 0)
		die("timer_create");
	struct itimerspec on = { { 0, 10000 }, { 0, 10000 } };
	timer_settime(t, 0, &on, NULL);
	set_alarm_blocked(SIG_UNBLOCK);

	unsigned s = (unsigned)id * 2654435761u + 7;
	while (now_ms() < end_ms) {
		s = s * 1103515245u + 12345u;
		size_t n = 100 + (s >> 8) % 150;        /* never the handler's bin */
		char *p = (s >> 4) & 1 ? malloc(n) : calloc(1, n);
		if (!p)
			die("malloc");
		p[0] = 1;
		char *q = realloc(p, n * 3);
		if (!q)
			die("realloc");
		char *r = realloc(q, 5000);
		if (!r)
			die("realloc");
		r[4999] = 1;
		free(r);
	}

	set_alarm_blocked(SIG_BLOCK);
	timer_delete(t);
	free(kept[me]);
	kept[me] = NULL;
}

static void *worker(void *arg)
{
	storm((int)(long)arg);
	return NULL;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	/* each thread unblocks SIGALRM once its tcache is primed */
	set_alarm_blocked(SIG_BLOCK);

	end_ms = now_ms() + RUN_MS;
	pthread_t t[WORKERS];
	for (int i = 0; i < WORKERS; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)(long)(i + 1)) != 0)
			die("pthread_create");
	storm(0);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(t[i], NULL);
	int all = 1;
	for (int i = 0; i <= WORKERS; i++)
		all &= runs[i] > 0;
	leak_bytes(900);
	scrub_stack();
	printf("handler_storm: handlers ran on every thread: %s; done\n", all ? "yes" : "no");
	return 0;
}
