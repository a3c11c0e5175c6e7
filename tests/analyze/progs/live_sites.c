/* live_sites.c — a program for the live endpoint's tests (test_live.py).
 *
 * At start: flat_site() keeps 100 blocks of 1000 bytes, then the program
 * prints "ready" and reads commands from stdin, one a line:
 *   go     grow_site() keeps a block of 4096 bytes every 20 ms from now on
 *   stop   no more growth
 *   lose   lose_site() allocates 777 bytes and drops the pointer: a
 *          block definitely lost
 *   quit   exit (everything still held is freed first except flat_site's)
 * While it waits it polls stdin every 20 ms (a poll interrupted by the
 * agent's signal just polls again). On quit it prints "grew N", N the
 * number of grow_site blocks it kept. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *flat[100];  /* not static: the allocations must stay */
void **grown;
static size_t ngrown, capgrown;

__attribute__((noinline)) static void flat_site(void)
{
	for (int i = 0; i < 100; i++)
		flat[i] = malloc(1000);
}

__attribute__((noinline)) static void grow_site(void)
{
	if (ngrown == capgrown) {
		capgrown = capgrown ? 2 * capgrown : 1024;
		grown = realloc(grown, capgrown * sizeof *grown);
	}
	grown[ngrown++] = malloc(4096);
}

__attribute__((noinline)) static void lose_site(void)
{
	char *volatile p = malloc(777);
	p[0] = 1;
	p = NULL;
}

/* Overwrites the dead frames below main's and the caller-saved
 * registers, where lose_site's pointer may stay (see
 * tests/e2e/progs/kinds.h): a request's leak check runs on this thread's
 * own stack and counts what it finds above the stack pointer. */
__attribute__((noinline)) static void scrub_stack(void)
{
	char buf[32768];
	char *volatile p = buf;
	memset(p, 0, sizeof buf);
}

int main(void)
{
	flat_site();
	/* the list of grown blocks is one block, allocated once here */
	capgrown = 65536;
	grown = malloc(capgrown * sizeof *grown);
	printf("ready\n");
	fflush(stdout);
	char line[256];
	size_t have = 0;
	int growing = 0;
	for (;;) {
		struct pollfd p = { .fd = 0, .events = POLLIN };
		int r = poll(&p, 1, 20);
		if (r < 0 && errno != EINTR)
			return 1;
		if (growing)
			grow_site();
		if (r <= 0)
			continue;
		ssize_t n = read(0, line + have, sizeof line - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		line[have] = 0;
		char *nl;
		while ((nl = strchr(line, '\n'))) {
			*nl = 0;
			if (!strcmp(line, "go"))
				growing = 1;
			else if (!strcmp(line, "stop"))
				growing = 0;
			else if (!strcmp(line, "lose")) {
				lose_site();
				scrub_stack();
			} else if (!strcmp(line, "quit"))
				goto out;
			have -= (size_t)(nl + 1 - line);
			memmove(line, nl + 1, have + 1);
		}
	}
out:
	printf("grew %zu\n", ngrown);
	for (size_t i = 0; i < ngrown; i++)
		free(grown[i]);
	free(grown);
	return 0;
}
