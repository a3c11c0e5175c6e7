/*
 * exit_main_race — main returns 5 at the moment another thread calls
 * exit(5) (a barrier releases both). With glibc before 2.41 both threads
 * run the exit handlers at once; the one that runs heaptrail's last
 * handler is not always the one that ends the process, and about one run
 * in fifteen left no report.
 *
 * Expected: exit 5; 600 bytes in 1 block definitely lost.
 *
 * @exit 5
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
	exit(5);
}

int main(void)
{
	leak_bytes(600);
	scrub_stack();
	say("exit_main_race: main returns while a thread exits\n");
	pthread_barrier_init(&go, NULL, 2);
	pthread_t t;
	pthread_create(&t, NULL, quitter, NULL);
	pthread_barrier_wait(&go);
	return 5;
}
