/*
 * kind_thread_sigblocked — kind_thread_register's program, but the
 * spinning thread blocks every signal first, as thread pools and xz's
 * workers do. A signal cannot stop it for the scan (the fallback would
 * wait 2 s, warn, and miss its registers); ptrace stops it like any
 * other thread, and the block it keeps only in r12 is still reachable.
 *
 *   spin_holding  333/1 in r12: still reachable
 *                  55/1 only as ~address in r13: definitely lost
 *   pthread_create DTV 272/1 possibly lost
 *
 * Expected (valgrind memcheck, Debian 12): as kind_thread_register.
 *
 * @proc 0 exit=0 in_use=660/3
 * @kinds 0 definitely_lost=55/1 possibly_lost=272/1 still_reachable=333/1
 * @leak 0 spin_holding 388/2
 * @leak 0 spin_holding 333/1 still_reachable
 * @leak 0 spin_holding 55/1 definitely_lost
 * @leak 0 allocate_dtv 272/1 possibly_lost
 */
#include <pthread.h>
#include <signal.h>
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
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
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
	say("exiting with a thread spinning, every signal blocked\n");
	exit(0);
}
