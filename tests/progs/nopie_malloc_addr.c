/* Built -no-pie: it takes malloc's address, so its own PLT entry becomes
 * malloc's canonical address (what dlsym(RTLD_DEFAULT, "malloc") answers),
 * a jump through its GOT to the first real malloc. heaptrail must not
 * take that for another allocator loaded before it. Leaks 7 blocks of
 * 1,000 bytes, through the pointer and by direct calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *(*volatile alloc_fn)(size_t);

__attribute__((noinline)) static void lose(int n)
{
	for (int i = 0; i < n; i++) {
		char *p = i % 2 ? alloc_fn(1000) : malloc(1000);
		memset(p, 1, 1000);
		__asm__ volatile("" : : "r"(p) : "memory");
	}
}

__attribute__((noinline)) static void scrub(void)
{
	volatile char junk[8192];
	for (unsigned i = 0; i < sizeof junk; i++)
		junk[i] = 0;
}

int main(void)
{
	alloc_fn = malloc;  /* in code: an absolute address, the canonical PLT */
	lose(7);
	scrub();
	puts("done");
	return 0;
}
