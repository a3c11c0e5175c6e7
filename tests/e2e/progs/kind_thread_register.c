/*
 * kind_thread_register — a block kept only in a register of a thread
 * that is still running at exit.  The thread moves the block's address
 * into r12, zeroes the stack slot it came from and the scratch
 * registers, sets a flag and spins in a loop that touches nothing
 * (x86-64 asm, so no build can spill the value).  main waits for the
 * flag, then calls exit().  memcheck scans the registers of every thread
 * it has, including one it is about to stop: the block is still
 * reachable.  The control: a second block whose address the thread
 * keeps only inverted (r13 = ~address), which points nowhere: definitely
 * lost.
 *
 * The live thread holds a DTV too (see kind_thread_tls): possibly lost.
 * No stdio, for the reason given there.  x86-64 only.
 *
 *   spin_holding  333/1 in r12: still reachable
 *                  55/1 only as ~address in r13: definitely lost
 *   pthread_create DTV 272/1 possibly lost
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   still reachable 333/1, definitely lost 55/1, possibly lost 272/1
 *   in use at exit: 660 bytes in 3 blocks
 *
 * @proc 0 exit=0 in_use=660/3
 * @kinds 0 definitely_lost=55/1 possibly_lost=272/1 still_reachable=333/1
 * @leak 0 spin_holding 388/2
 * @leak 0 spin_holding 333/1 still_reachable
 * @leak 0 spin_holding 55/1 definitely_lost
 * @leak 0 allocate_dtv 272/1 possibly_lost
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "kinds.h"

static volatile int spinning;

NOINLINE void *block(size_t n, int fill)
{
	void *p = malloc(n); /* @site block */

	memset(p, fill, n);
	return p;
}

/* Never returns: spins with one block's address in r12 only. */
NOINLINE void spin_holding(void)
{
	void *volatile kept = block(333, 'r');
	void *volatile lost = block(55, 'l');

	scrub_stack();
	__asm__ volatile(
		"mov (%1), %%r12\n\t"           /* r12 = kept */
		"mov (%2), %%r13\n\t"
		"not %%r13\n\t"                 /* r13 = ~lost, no pointer */
		"movq $0, (%1)\n\t"
		"movq $0, (%2)\n\t"
		"xor %%eax, %%eax\n\t"
		"xor %%ecx, %%ecx\n\t"
		"xor %%edx, %%edx\n\t"
		"xor %%esi, %%esi\n\t"
		"xor %%edi, %%edi\n\t"
		"xor %%r8d, %%r8d\n\t"
		"xor %%r9d, %%r9d\n\t"
		"xor %%r10d, %%r10d\n\t"
		"xor %%r11d, %%r11d\n\t"
		"movl $1, %0\n\t"               /* spinning = 1 */
		"1: pause\n\t"
		"jmp 1b"
		: "=m"(spinning)
		: "r"(&kept), "r"(&lost)
		: "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11",
		  "r12", "r13", "memory");
	__builtin_unreachable();
}

NOINLINE void *thread_main(void *arg)
{
	spin_holding();
	return arg;
}

static void say(const char *s)
{
	if (write(1, s, strlen(s)) < 0)
		abort();
}

int main(void)
{
	pthread_t t;
	struct timespec ms = { 0, 1000000 };

	if (pthread_create(&t, NULL, thread_main, NULL))
		return 1;
	while (!spinning)
		nanosleep(&ms, NULL);
	say("exiting with a thread spinning\n");
	exit(0);
}
