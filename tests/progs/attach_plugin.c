/* A library attach_target loads with dlopen on its "plugin N" command,
 * after an attach: it allocates through its own GOT slots, which the
 * attach could not patch when it happened. */
#include <stdlib.h>
#include <string.h>

/* Zeroes the stack below the caller's frame: a copy of the last
 * pointer left there by malloc's frames would keep that block reachable
 * for a conservative scan (memcheck's as well as heaptrail's). */
__attribute__((noinline)) static void scrub_stack(void)
{
	volatile char junk[8192];
	for (unsigned i = 0; i < sizeof junk; i++)
		junk[i] = 0;
}

__attribute__((noinline)) void plugin_leak(int n)
{
	for (int i = 0; i < n; i++) {
		char *p = malloc(300);
		memset(p, 3, 300);
		__asm__ volatile("" : : "r"(p) : "memory");
	}
	scrub_stack();
}
