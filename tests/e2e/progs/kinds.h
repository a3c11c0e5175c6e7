/*
 * kinds.h — helpers for the programs that test leak classification
 * (kind_*, heuristic_*): what a leak scan sees must be what the program
 * says it left, whatever the optimizer did.
 *
 * A block is only "definitely lost" if no copy of its address survives
 * anywhere a scan looks: registers, the stack above the stack pointer,
 * globals.  Two places keep stale copies behind a program's back:
 *
 *  - dead frames: a returned function's locals stay in memory below the
 *    stack pointer, and the frames of later calls (exit() and its
 *    handlers, which run while the scan is done) reuse that memory
 *    without initialising all of it.  scrub_stack() overwrites it.
 *  - caller-saved registers: the last call's return value (memset returns
 *    its first argument) may still be in a register.  Calling
 *    scrub_stack() after the leak also replaces those.
 *
 * So a program drops a block inside a NOINLINE function that keeps the
 * address only in locals, returns nothing that points into the heap, and
 * its caller then calls scrub_stack().  Pointers that must stay visible
 * are stored through a volatile lvalue (STORE) so the store is not
 * deleted as dead.
 */
#ifndef HEAPTRAIL_E2E_KINDS_H
#define HEAPTRAIL_E2E_KINDS_H

#include <string.h>

#include "common.h"

/* Zeroes 32 KiB of stack below the caller's frame: any stale pointer a
 * returned function left there is gone before exit() reuses the space.
 * Then zeroes the caller-saved registers: a libc routine may leave a heap
 * address in one that nothing overwrites before a fatal signal's scan
 * reads them (glibc's memset keeps its destination in r8; valgrind's own
 * memset does not, so the two would disagree). */
NOINLINE static void scrub_stack(void)
{
	char buf[32768];
	char *volatile p = buf;

	memset(p, 0, sizeof(buf));
	KEEP(p);
	__asm__ volatile("xor %%eax, %%eax\n\txor %%ecx, %%ecx\n\txor %%edx, %%edx\n\t"
			 "xor %%esi, %%esi\n\txor %%edi, %%edi\n\txor %%r8d, %%r8d\n\t"
			 "xor %%r9d, %%r9d\n\txor %%r10d, %%r10d\n\txor %%r11d, %%r11d"
			 ::: "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11",
			 "memory");
}

/* Stores v into lvalue x so the store survives optimization even when x
 * is never read again (a global the program only keeps for the scan). */
#define STORE(x, v) (*(__typeof__(x) volatile *)&(x) = (v))

#endif
