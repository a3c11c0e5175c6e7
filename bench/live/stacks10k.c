/* stacks10k — 10,000 distinct allocation stacks, held, then waits on
 * stdin: the profile the live endpoint serves in bench/live/run. Each
 * stack is a path of 14 calls through two functions (a and b) chosen by
 * the bits of its number, so each of the 10,000 has its own pcs. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void *keep[10000];
static void *a(unsigned bits, int depth);
static void *b(unsigned bits, int depth);

__attribute__((noinline)) static void *a(unsigned bits, int depth)
{
	if (!depth)
		return malloc(64 + (bits & 63));
	void *p = (bits & 1) ? b(bits >> 1, depth - 1) : a(bits >> 1, depth - 1);
	__asm__ volatile("" ::: "memory");   /* no tail call: a real frame */
	return p;
}

__attribute__((noinline)) static void *b(unsigned bits, int depth)
{
	if (!depth)
		return malloc(128 + (bits & 63));
	void *p = (bits & 1) ? b(bits >> 1, depth - 1) : a(bits >> 1, depth - 1);
	__asm__ volatile("" ::: "memory");
	return p;
}

int main(void)
{
	for (unsigned i = 0; i < 10000; i++)
		keep[i] = a(i, 14);
	printf("ready\n");
	fflush(stdout);
	char c;
	while (read(0, &c, 1) > 0)
		;
	return 0;
}
