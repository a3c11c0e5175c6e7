/*
 * fatal — dies of a signal after leaking: argument segv (a NULL write),
 * abort, term (raise SIGTERM), bus (a read past the end of a mapped empty
 * file), fpe (integer division by zero), and the signals whose default
 * action ends the process that a program does not cause itself (issue
 * 27): pipe (a write into a pipe whose reader is gone, as `sort` in
 * `sort | head`), hup (kill of its own process), alrm (an interval
 * timer, a signal the kernel sends), rt (SIGRTMIN+1), pipe-threads (the
 * write while one thread sleeps in nanosleep and another waits in read,
 * each exiting 91 if its call fails with EINTR), reraise (coreutils'
 * way: its own handler resets SIG_DFL and raises the signal again),
 * ign-exec (SIGPIPE set to SIG_IGN, then exec of itself: the write
 * fails with EPIPE there, and it leaks and dies of SIGHUP), fork (a child dies of
 * SIGPIPE, the parent prints how and dies of it too).  Under heaptrail
 * the program must die of the same signal, and a leak report must still
 * be written, marked as killed by that signal (valgrind writes one).
 * Before any of it, every one of these signals must read SIG_DFL
 * (sigaction and signal), as the program left them.
 *
 * Expected: 4,444 bytes in 1 block definitely lost, then death.
 *
 * @case segv segv
 * @case abort abort
 * @case term term
 * @case bus bus
 * @case fpe fpe
 * @case pipe pipe
 * @case hup hup
 * @case alrm alrm
 * @case rt rt
 * @case pipe-threads pipe-threads
 * @case reraise reraise
 * @case ign-exec ign-exec
 * @case fork fork
 * @kinds 0 definitely_lost=4444/1
 * @vg
 * @killed
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "hostile.h"

/* Dies with 90 unless sig reads as the disposition want (SIG_DFL or
 * SIG_IGN), through sigaction and through signal(). */
static void expect_disposition(int sig, void (*want)(int))
{
	struct sigaction sa;
	if (sigaction(sig, NULL, &sa) != 0 || (sa.sa_flags & SA_SIGINFO) ||
	    sa.sa_handler != want)
		die("signal %d: sigaction does not read what the program left", sig);
	void (*old)(int) = signal(sig, want);
	if (old != want)
		die("signal %d: signal() returned another disposition", sig);
}

/* A write into a pipe nobody reads: SIGPIPE, or EPIPE when ignored. */
static ssize_t write_to_closed_pipe(void)
{
	int fd[2];
	if (pipe(fd) != 0)
		die("pipe");
	close(fd[0]);
	return write(fd[1], "x", 1);
}

static void *sleeper(void *arg)
{
	(void)arg;
	long long start = now_ms();
	struct timespec ts = { 5, 0 };
	int rc = nanosleep(&ts, NULL);
	die_if_interrupted("nanosleep", rc, start, 5000);
	return NULL;
}

static int idle_pipe[2];

static void *reader(void *arg)
{
	(void)arg;
	char c;
	ssize_t n = read(idle_pipe[0], &c, 1);
	die_if_interrupted("read", (int)n, now_ms(), 0);
	return NULL;
}

static void reraise_handler(int sig)
{
	signal(sig, SIG_DFL);
	raise(sig);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		die("usage: fatal CASE");
	const char *what = argv[1];
	if (!strcmp(what, "ign-child")) {
		/* the image exec'd by ign-exec: SIG_IGN came across */
		expect_disposition(SIGPIPE, SIG_IGN);
		leak_bytes(4444);
		scrub_stack();
		if (write_to_closed_pipe() >= 0 || errno != EPIPE)
			die("write into a closed pipe did not fail with EPIPE");
		say("fatal: EPIPE after exec, dying of SIGHUP\n");
		raise(SIGHUP);
		return 0;
	}
	int ends[] = { SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGALRM, SIGTERM, SIGUSR1, SIGUSR2,
		       SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGRTMIN + 1 };
	for (size_t i = 0; i < sizeof ends / sizeof *ends; i++)
		expect_disposition(ends[i], SIG_DFL);
	if (!strcmp(what, "ign-exec")) {
		signal(SIGPIPE, SIG_IGN);
		char *args[] = { argv[0], "ign-child", NULL };
		execv(argv[0], args);
		die("exec");
	}
	leak_bytes(4444);
	scrub_stack();
	/* no stdio: its buffer would stay allocated (no exit, no freeres) */
	say("fatal: dying of ");
	say(what);
	say("\n");
	if (!strcmp(what, "segv"))
		*(volatile int *)(uintptr_t)8 = 1;
	else if (!strcmp(what, "abort"))
		abort();
	else if (!strcmp(what, "term"))
		raise(SIGTERM);
	else if (!strcmp(what, "bus")) {
		char path[] = "/tmp/hostile-bus-XXXXXX";
		int fd = mkstemp(path);
		unlink(path);
		volatile char *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
		return m[0];
	} else if (!strcmp(what, "fpe")) {
		volatile int one = 1, zero = 0;
		volatile int r = one / zero;
		return r;
	} else if (!strcmp(what, "pipe")) {
		write_to_closed_pipe();
	} else if (!strcmp(what, "hup")) {
		kill(getpid(), SIGHUP);
	} else if (!strcmp(what, "alrm")) {
		struct itimerval it = { { 0, 20000 }, { 0, 20000 } };
		setitimer(ITIMER_REAL, &it, NULL);
		for (;;)
			pause();
	} else if (!strcmp(what, "rt")) {
		raise(SIGRTMIN + 1);
	} else if (!strcmp(what, "pipe-threads")) {
		pthread_t a, b;
		if (pipe(idle_pipe) != 0 || pthread_create(&a, NULL, sleeper, NULL) ||
		    pthread_create(&b, NULL, reader, NULL))
			die("threads");
		nap_ms(100);  /* both asleep in their calls */
		write_to_closed_pipe();
	} else if (!strcmp(what, "reraise")) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = reraise_handler;
		sigaction(SIGPIPE, &sa, NULL);
		write_to_closed_pipe();
	} else if (!strcmp(what, "fork")) {
		pid_t pid = fork();
		if (pid == 0) {
			write_to_closed_pipe();
			_exit(0);
		}
		int st;
		if (pid < 0 || waitpid(pid, &st, 0) != pid)
			die("fork");
		say(WIFSIGNALED(st) && WTERMSIG(st) == SIGPIPE ? "fatal: child died of SIGPIPE\n"
							      : "fatal: child did not die of SIGPIPE\n");
		write_to_closed_pipe();
	}
	return 0;
}
