/*
 * stop_blocking_calls — a leak scan's thread stop must not change what
 * blocking calls in other threads return, nor how long they take.
 *
 * Nine threads each block in one call for 300 ms (nanosleep,
 * clock_nanosleep, poll, epoll_wait, read on a pipe, a futex wait, sleep
 * (1 s), select, pselect) while main asks for a leak check every 20 ms
 * (heaptrail_leak_check; bare, the weak symbol is NULL). A tenth thread
 * reaps children with waitpid(-1) and sees none (no SIGCHLD either), an
 * eleventh blocks every signal. Each thread prints "NAME ok" when its call
 * returned what it returns bare, after no less than its timeout and no
 * more than 400 ms beyond it; else "NAME FAIL" (details on stderr). Run by
 * the cli:stop-transparent test, which compares the output with the bare
 * run's.
 *
 * @cli-only
 */
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int heaptrail_leak_check(int flags) __attribute__((weak));

static int pipefd[2];
static atomic_int done, failed, sigchld;

static void on_sigchld(int sig)
{
	sigchld = 1;
}
static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void report(const char *name, int ok, long ret, int err, double took, double want)
{
	ok = ok && took >= want - 0.002 && took <= want + 0.4;
	pthread_mutex_lock(&out);
	if (ok)
		printf("%s ok\n", name);
	else {
		printf("%s FAIL\n", name);
		fprintf(stderr, "%s: ret %ld errno %s, %.3f s for %.3f s\n", name, ret,
			strerror(err), took, want);
		failed = 1;
	}
	fflush(stdout);
	pthread_mutex_unlock(&out);
}

static void *run(void *arg)
{
	const char *name = arg;
	double t0 = now(), want = 0.3;
	long ret = 0;
	int ok = 0, err = 0;
	errno = 0;
	if (!strcmp(name, "nanosleep")) {
		struct timespec ts = { 0, 300000000 };
		ret = nanosleep(&ts, NULL);
		ok = ret == 0;
	} else if (!strcmp(name, "clock_nanosleep")) {
		struct timespec ts = { 0, 300000000 };
		ret = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
		ok = ret == 0;
	} else if (!strcmp(name, "poll")) {
		ret = poll(NULL, 0, 300);
		ok = ret == 0;
	} else if (!strcmp(name, "epoll_wait")) {
		struct epoll_event ev;
		int ep = epoll_create1(0);
		ret = epoll_wait(ep, &ev, 1, 300);
		ok = ret == 0;
		close(ep);
	} else if (!strcmp(name, "read")) {
		char c;
		ret = read(pipefd[0], &c, 1);
		ok = ret == 1 && c == 'x';
	} else if (!strcmp(name, "futex")) {
		int word = 0;
		struct timespec ts = { 0, 300000000 };
		ret = syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
		ok = ret == -1 && errno == ETIMEDOUT;
	} else if (!strcmp(name, "sleep")) {
		want = 1;
		ret = sleep(1);
		ok = ret == 0;
	} else if (!strcmp(name, "select")) {
		struct timeval tv = { 0, 300000 };
		ret = select(0, NULL, NULL, NULL, &tv);
		ok = ret == 0;
	} else if (!strcmp(name, "pselect")) {
		struct timespec ts = { 0, 300000000 };
		ret = pselect(0, NULL, NULL, NULL, &ts, NULL);
		ok = ret == 0;
	} else if (!strcmp(name, "children")) {
		/* the program has no child: a tracer must stay invisible */
		ok = 1;
		while (now() - t0 < 0.3) {
			int st;
			ret = waitpid(-1, &st, WNOHANG);
			ok &= ret == -1 && errno == ECHILD;
		}
		ok &= !sigchld;
		err = errno;
	} else if (!strcmp(name, "allblocked")) {
		sigset_t all;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, NULL);
		struct timespec ts = { 0, 300000000 };
		ret = nanosleep(&ts, NULL);
		ok = ret == 0;
	}
	err = errno;
	report(name, ok, ret, err, now() - t0, want);
	done++;
	return NULL;
}

int main(void)
{
	static const char *names[] = { "nanosleep", "clock_nanosleep", "poll", "epoll_wait",
				       "read", "futex", "sleep", "select", "pselect",
				       "children", "allblocked" };
	enum { N = sizeof names / sizeof names[0] };
	pthread_t t[N];
	if (pipe(pipefd))
		return 2;
	signal(SIGCHLD, on_sigchld);
	void *keep = malloc(100);  /* something for the scan to find */
	for (int i = 0; i < N; i++)
		pthread_create(&t[i], NULL, run, (void *)names[i]);
	double t0 = now();
	int wrote = 0;
	while (done < N) {
		if (heaptrail_leak_check)
			heaptrail_leak_check(0);
		struct timespec ts = { 0, 20000000 };
		nanosleep(&ts, NULL);
		if (!wrote && now() - t0 >= 0.3) {
			wrote = write(pipefd[1], "x", 1) == 1;
		}
	}
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	free(keep);
	return failed;
}
