/*
 * stop_exit_two — two threads call exit(6) at once: one writes the exit
 * report while the other ends the process (exit_group) in the middle of
 * the scan's stop. The tracer that stops the threads must die with the
 * process, not linger on holding copies of its file descriptors (heaptrail
 * run then waited for ever for the program's output to end). Run by the
 * cli:stop-transparent test.
 *
 * @cli-only
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_barrier_t go;

static void *quitter(void *arg)
{
	pthread_barrier_wait(&go);
	exit(6);
}

int main(void)
{
	void *volatile leak = malloc(600);
	leak = NULL;
	pthread_barrier_init(&go, NULL, 2);
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, quitter, NULL);
	for (;;)
		pause();
}
