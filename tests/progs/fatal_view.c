/*
 * fatal_view — what a program reads of the fatal signals' dispositions.
 * Under heaptrail the agent puts a handler of its own where SIGSEGV,
 * SIGBUS, SIGFPE, SIGILL, SIGABRT and SIGTERM are left at SIG_DFL (it
 * writes the leak report, then dies as the default would); the program
 * must still read SIG_DFL there, and what it sets must read back.
 *
 * Prints, for each of the six, the handler (dfl, ign, other) and the
 * flags the program can set; then sets SIGSEGV to SIG_DFL with signal(),
 * SIGTERM to a handler and back to SIG_DFL with SA_RESTART through
 * sigaction(), SIGFPE to SIG_IGN, and prints them again; leaks 100 bytes;
 * with "crash", raises SIGSEGV (the process dies by it, the agent's report
 * says so).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const int sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM };
#define SHOWN_FLAGS (SA_RESTART | SA_ONSTACK | SA_SIGINFO | SA_NODEFER | SA_RESETHAND)

static void on_term(int sig)
{
	(void)sig;
}

static void show(const char *when)
{
	printf("%s:", when);
	for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
		struct sigaction sa;
		if (sigaction(sigs[i], NULL, &sa) != 0) {
			printf(" %d:error", sigs[i]);
			continue;
		}
		const char *h = (sa.sa_flags & SA_SIGINFO) ? "other"
				: sa.sa_handler == SIG_DFL ? "dfl"
				: sa.sa_handler == SIG_IGN ? "ign" : "other";
		printf(" %d:%s/%#x", sigs[i], h, (unsigned)(sa.sa_flags & SHOWN_FLAGS));
	}
	printf("\n");
}

NOINLINE static void leak_fatal_view(void)
{
	char *p = malloc(100); /* @site leak_fatal_view */
	KEEP(p);
	p[0] = 1;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	show("start");
	void (*was)(int) = signal(SIGSEGV, SIG_DFL);
	printf("signal(SIGSEGV) was %s\n", was == SIG_DFL ? "dfl" : "other");
	struct sigaction sa, old;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, &old);
	printf("SIGTERM was %s\n", old.sa_handler == SIG_DFL ? "dfl" : "other");
	sa.sa_handler = SIG_DFL;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGTERM, &sa, &old);
	printf("SIGTERM was %s\n", old.sa_handler == on_term ? "on_term" : "other");
	signal(SIGFPE, SIG_IGN);
	show("after");
	leak_fatal_view();
	if (argc > 1 && !strcmp(argv[1], "crash"))
		raise(SIGSEGV);
	return 0;
}
