/*
 * host_signals — a program for the CLI's "never hurt the host" tests,
 * argv[1] picks what it does:
 *
 *   term     handles SIGTERM (prints "got SIGTERM", exits 3); prints
 *            "ready" and waits: `heaptrail run` must pass a SIGTERM sent
 *            to it on to the program and exit 3 as the program did
 *   reset    resets every signal disposition to the default with
 *            signal() (as some daemons do at start-up), prints "ready"
 *            and waits for EOF on stdin: the agent keeps its own handler
 *            on its signals, so `heaptrail leaks PID` works, while a
 *            plain kill of the leak check signal kills it, as bare
 *   rawreset the same with the raw rt_sigaction system call, which the
 *            agent cannot see: `heaptrail leaks PID` must refuse, not
 *            kill it
 *   own      installs its own SA_SIGINFO handler on SIGRTMAX-2 (the leak
 *            check signal) and reads it back with sigaction and signal:
 *            it must see its own dispositions, never the agent's; prints
 *            "ready", then "hit" from the handler for each signal it
 *            gets, and at EOF on stdin "roundtrip ok 0" (or "bad" and a
 *            bit mask of what differed), "handler ran N", "done"
 *   selfterm counts SIGTERMs, sends one to its own process group (as a
 *            program that stops its helpers does), waits half a second
 *            and prints "terms N": bare and under `heaptrail run` N is
 *            1 (heaptrail run, in the group too, must not pass it back)
 *   serve    prints "ready" and waits for EOF on stdin, then exits 0
 *   garbage  writes a garbage heaptrail.1.leaks into $HEAPTRAIL_OUTPUT,
 *            leaks one block and exits 0: the run still reports it
 *
 * @cli-only
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

static void on_term(int sig)
{
	static const char msg[] = "got SIGTERM\n";
	(void)sig;
	if (write(1, msg, sizeof msg - 1) < 0)
		_exit(4);
	_exit(3);
}

static volatile sig_atomic_t hits, terms;

static void count_term(int sig)
{
	(void)sig;
	terms++;
}

static void on_own(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)si, (void)uc;
	hits++;
	if (write(1, "hit\n", 4) < 0)
		_exit(4);
}

static void wait_stdin_eof(void)
{
	char buf[256];
	while (read(0, buf, sizeof buf) > 0)
		;
}

NOINLINE static void leak_a_block(void)
{
	char *p = malloc(40); /* @site leak_a_block */
	KEEP(p);
	p[0] = 1;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	if (!strcmp(mode, "selfterm")) {
		signal(SIGTERM, count_term);
		kill(0, SIGTERM);
		for (int i = 0; i < 50; i++)
			usleep(10000);
		printf("terms %d\n", (int)terms);
		return 0;
	}
	if (!strcmp(mode, "term")) {
		signal(SIGTERM, on_term);
		printf("ready\n");
		fflush(stdout);
		for (int i = 0; i < 600; i++)
			sleep(1);
		return 0;
	}
	if (!strcmp(mode, "reset")) {
		for (int s = 1; s < 65; s++)
			if (s != SIGKILL && s != SIGSTOP)
				signal(s, SIG_DFL);
	}
	if (!strcmp(mode, "rawreset")) {
		/* the kernel's struct sigaction, around libc and the agent */
		struct { void *handler; unsigned long flags; void *restorer;
			 unsigned long mask; } dfl = { 0 };  /* SIG_DFL */
		for (int s = 1; s < 65; s++)
			if (s != SIGKILL && s != SIGSTOP)
				syscall(SYS_rt_sigaction, s, &dfl, NULL, 8);
	}
	if (!strcmp(mode, "own")) {
		int sig = SIGRTMAX - 2, bad = 0;
		struct sigaction sa, old, back;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = on_own;
		sa.sa_flags = SA_SIGINFO | SA_RESTART;
		sigemptyset(&sa.sa_mask);
		sigaddset(&sa.sa_mask, SIGUSR1);
		memset(&old, 0, sizeof old);
		if (sigaction(sig, &sa, &old) || old.sa_handler != SIG_DFL ||
		    (old.sa_flags & SA_SIGINFO))
			bad |= 1;
		memset(&back, 0, sizeof back);
		if (sigaction(sig, NULL, &back) || back.sa_sigaction != on_own ||
		    !(back.sa_flags & SA_SIGINFO) || !(back.sa_flags & SA_RESTART) ||
		    sigismember(&back.sa_mask, SIGUSR1) != 1 ||
		    sigismember(&back.sa_mask, SIGUSR2) != 0)
			bad |= 2;
		if (signal(sig, SIG_IGN) != (void (*)(int))on_own)
			bad |= 4;
		if (signal(sig, SIG_DFL) != SIG_IGN)
			bad |= 8;
		sigaction(sig, &sa, NULL);
		printf("ready\n");
		fflush(stdout);
		wait_stdin_eof();
		printf("roundtrip %s %d\nhandler ran %d\ndone\n", bad ? "bad" : "ok", bad,
		       (int)hits);
		return 0;
	}
	if (!strcmp(mode, "reset") || !strcmp(mode, "rawreset") || !strcmp(mode, "serve")) {
		printf("ready\n");
		fflush(stdout);
		wait_stdin_eof();
		printf("done\n");
		return 0;
	}
	if (!strcmp(mode, "garbage")) {
		const char *dir = getenv("HEAPTRAIL_OUTPUT");
		char path[4096];
		snprintf(path, sizeof path, "%s/heaptrail.1.leaks", dir ? dir : ".");
		FILE *f = fopen(path, "w");
		if (f) {
			fputs("heaptrail-leaks 1\nthis is not a leak file\n", f);
			fclose(f);
		}
		leak_a_block();
		return 0;
	}
	fprintf(stderr, "host_signals: unknown mode '%s'\n", mode);
	return 2;
}
