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
 * registers, general and vector, where lose_site's pointer may stay (see
 * tests/e2e/progs/kinds.h; a routine that copies 16 bytes at a time can
 * leave an address in a vector register too): a request's leak check runs
 * on this thread's own stack and counts what it finds above the stack
 * pointer, the registers the borrowing saved there among it. */
__attribute__((noinline)) static void scrub_stack(void)
{
	char buf[32768];
	char *volatile p = buf;
	memset(p, 0, sizeof buf);
	__asm__ volatile("xor %%eax, %%eax\n\txor %%ecx, %%ecx\n\txor %%edx, %%edx\n\t"
			 "xor %%esi, %%esi\n\txor %%edi, %%edi\n\txor %%r8d, %%r8d\n\t"
			 "xor %%r9d, %%r9d\n\txor %%r10d, %%r10d\n\txor %%r11d, %%r11d\n\t"
			 "pxor %%xmm0, %%xmm0\n\tpxor %%xmm1, %%xmm1\n\tpxor %%xmm2, %%xmm2\n\t"
			 "pxor %%xmm3, %%xmm3\n\tpxor %%xmm4, %%xmm4\n\tpxor %%xmm5, %%xmm5\n\t"
			 "pxor %%xmm6, %%xmm6\n\tpxor %%xmm7, %%xmm7\n\tpxor %%xmm8, %%xmm8\n\t"
			 "pxor %%xmm9, %%xmm9\n\tpxor %%xmm10, %%xmm10\n\tpxor %%xmm11, %%xmm11\n\t"
			 "pxor %%xmm12, %%xmm12\n\tpxor %%xmm13, %%xmm13\n\tpxor %%xmm14, %%xmm14\n\t"
			 "pxor %%xmm15, %%xmm15"
			 ::: "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "xmm0", "xmm1",
			 "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
			 "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory");
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
