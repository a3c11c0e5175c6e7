/*
 * kind_thread_exited — the opposite of kind_thread_tls and
 * kind_thread_stack: a thread keeps one block in its __thread variable
 * and one in a volatile local, then returns and is joined.  Its stack
 * and static TLS stay mapped in glibc's cache of thread stacks, but
 * __libc_freeres unmaps that cache at exit (valgrind runs it, and so
 * does heaptrail when no other thread is left), so neither is a root
 * any more: both blocks are definitely lost, and the thread's DTV is
 * freed with its stack.
 *
 * (Without __libc_freeres — valgrind --run-libc-freeres=no — the cached
 * TLS would still hold its block: still reachable, while the local, below
 * the stack pointer the thread left with, would still be lost.)
 *
 *   keep_in_tls_then_exit  77/1 (__thread) + 88/1 (local)
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   definitely lost 165/2
 *   in use at exit: 165 bytes in 2 blocks
 *
 * @proc 0 exit=0 in_use=165/2
 * @kinds 0 definitely_lost=165/2
 * @leak 0 keep_in_tls_then_exit 165/2 definitely_lost
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "kinds.h"

static __thread void *tls_block;

NOINLINE void *block(size_t n, int fill)
{
	void *p = malloc(n); /* @site block */

	memset(p, fill, n);
	return p;
}

NOINLINE void keep_in_tls_then_exit(void)
{
	void *volatile local = block(88, 'l');

	STORE(tls_block, block(77, 't'));
	KEEP(local);
}

NOINLINE void *thread_main(void *arg)
{
	keep_in_tls_then_exit();
	return arg;
}

int main(void)
{
	pthread_t t;

	if (pthread_create(&t, NULL, thread_main, NULL) ||
	    pthread_join(t, NULL))
		return 1;
	scrub_stack();
	printf("the thread is gone, and its roots with it\n");
	return 0;
}
