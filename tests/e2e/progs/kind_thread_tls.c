/*
 * kind_thread_tls — blocks kept only in __thread variables.  A thread
 * stores a block in its __thread pointer, tells main, and blocks in
 * read() on a pipe nobody writes; main keeps another block in its own
 * __thread pointer and calls exit() while the thread still waits.  A
 * thread's static TLS sits beside its stack and main's is set up by the
 * dynamic loader, both outside the heap and scanned: both blocks are
 * still reachable.  The thread also leaks a block before it blocks
 * (definitely lost), to show its TLS is not a blanket root.
 *
 * Every live thread also holds glibc's DTV (dynamic thread vector),
 * calloc'ed by pthread_create: the thread's descriptor points 16 bytes
 * into it, so memcheck calls it possibly lost.  Its size depends on the
 * number of modules with TLS (288 bytes here; bigger under heaptrail,
 * whose agent and libunwind have TLS too: the runner compares DTV blocks
 * by count only).
 *
 * No stdio: with a thread still running at exit, heaptrail does not run
 * __libc_freeres (valgrind does), so stdout's buffer would differ.
 *
 *   keep_in_main_tls    72/1   main's __thread pointer
 *   keep_in_thread_tls  111/1  the blocked thread's __thread pointer
 *   leak_in_thread      33/1   dropped: definitely lost
 *   pthread_create      DTV 288/1 possibly lost
 *
 * Expected (valgrind memcheck, Debian 12; -O0/-O1/-O2, fp and nofp):
 *   still reachable 183/2, definitely lost 33/1, possibly lost 288/1
 *   in use at exit: 504 bytes in 4 blocks
 *
 * @proc 0 exit=0 in_use=504/4
 * @kinds 0 definitely_lost=33/1 possibly_lost=288/1 still_reachable=183/2
 * @leak 0 keep_in_main_tls 72/1 still_reachable
 * @leak 0 keep_in_thread_tls 111/1 still_reachable
 * @leak 0 leak_in_thread 33/1 definitely_lost
 * @leak 0 allocate_dtv 288/1 possibly_lost
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "kinds.h"

static __thread void *tls_block;
static int ready[2], never[2];

NOINLINE void *block(size_t n, int fill)
{
	void *p = malloc(n); /* @site block */

	memset(p, fill, n);
	return p;
}

NOINLINE void keep_in_main_tls(void)
{
	STORE(tls_block, block(72, 'm'));
}

NOINLINE void keep_in_thread_tls(void)
{
	STORE(tls_block, block(111, 't'));
}

NOINLINE void leak_in_thread(void)
{
	void *p = block(33, 'l');

	KEEP(p);
}

NOINLINE void *thread_main(void *arg)
{
	char c = 1;

	leak_in_thread();
	keep_in_thread_tls();
	scrub_stack();
	if (write(ready[1], &c, 1) != 1)
		abort();
	for (;;)                /* until exit() */
		if (read(never[0], &c, 1) <= 0)
			pause();
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
	char c;

	if (pipe(ready) || pipe(never))
		return 1;
	keep_in_main_tls();
	if (pthread_create(&t, NULL, thread_main, NULL))
		return 1;
	if (read(ready[0], &c, 1) != 1)
		return 1;
	scrub_stack();
	say("exiting with a thread blocked in read\n");
	exit(0);
}
