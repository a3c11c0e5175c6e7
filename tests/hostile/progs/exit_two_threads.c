/*
 * exit_two_threads — two threads call exit(6) at the same moment (a
 * barrier releases them) while the main thread waits.  Once, no report
 * was left at all.
 *
 * Expected: exit 6; 600 bytes in 1 block definitely lost.  (Two threads
 * are running at exit, so their stacks count as roots.)
 *
 * @exit 6
 * @kinds 0 definitely_lost=600/1
 * @vg
 */
#include <pthread.h>

#include "hostile.h"

static pthread_barrier_t go;

static void *quitter(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&go);
	exit(6);
}

int main(void)
{
	leak_bytes(600);
	scrub_stack();
	say("exit_two_threads: two threads exit at once\n");
	pthread_barrier_init(&go, NULL, 2);
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, quitter, NULL);
	for (;;)
		pause();
}
