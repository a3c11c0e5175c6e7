/*
 * host_signals — a program for the CLI's "never hurt the host" tests,
 * argv[1] picks what it does:
 *
 *   term     handles SIGTERM (prints "got SIGTERM", exits 3); prints
 *            "ready" and waits: `heaptrail run` must pass a SIGTERM sent
 *            to it on to the program and exit 3 as the program did
 *   reset    resets every signal disposition to the default (as some
 *            daemons do at start-up), prints "ready" and waits for EOF
 *            on stdin: `heaptrail leaks PID` must refuse, not kill it
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
	if (!strcmp(mode, "reset") || !strcmp(mode, "serve")) {
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
