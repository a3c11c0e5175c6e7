/*
 * prot_none — live blocks with an unreadable page, as malloc'd coroutine
 * and thread stacks with a guard page have: a 3-page block whose middle
 * page is PROT_NONE and a 72 KiB block holding a thread stack whose
 * second page is a PROT_NONE guard (the thread runs on the 64 KiB above
 * it through leak checks).
 * The scan must not read them (the program died with SIGSEGV at exit,
 * in heaptrail_leak_check() and in `heaptrail leaks PID`).
 *
 * Expected (valgrind): the two guarded blocks still reachable (globals
 * point to their start: 12,288 + 73,728 bytes); 128 bytes in 1 block
 * definitely lost.  (valgrind calls a block whose first page is
 * PROT_NONE definitely lost whatever points to it, so no guard page
 * here is a block's first.)
 *
 * @kinds 0 definitely_lost=128/1 still_reachable=86016/2
 * @vg
 * @leaks-calls
 */
#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>

#include "hostile.h"

static char *volatile guarded;
static char *volatile tstack;

static void *runner(void *arg)
{
	(void)arg;
	for (int i = 0; i < 8; i++)
		nap_ms(100);
	return NULL;
}

int main(void)
{
	guarded = memalign(4096, 3 * 4096);
	memset(guarded, 0, 3 * 4096);
	if (mprotect(guarded + 4096, 4096, PROT_NONE))
		die("mprotect");

	size_t ssize = 72 * 1024;
	tstack = memalign(4096, ssize);
	if (mprotect(tstack + 4096, 4096, PROT_NONE))
		die("mprotect");
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstack(&attr, tstack + 8192, ssize - 8192);
	pthread_t t;
	if (pthread_create(&t, &attr, runner, NULL))
		die("pthread_create");
	maybe_leak_check();
	nap_ms(300);
	maybe_leak_check();
	pthread_join(t, NULL);
	maybe_leak_check();
	leak_bytes(128);
	scrub_stack();
	printf("prot_none: guarded blocks kept, exiting\n");
	return 0;
}
