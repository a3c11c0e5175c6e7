/*
 * thread_leak — leaks made on other threads: two threads each leak one
 * block from leak_in_thread and are joined; the main thread leaks too.
 *
 * Expected (valgrind memcheck, Debian 12):
 *   leak_in_thread        2 x 1500 = 3,000 bytes in 2 blocks
 *   leak_in_main_thread   1 x 64
 *   in use at exit: 3,064 bytes in 3 blocks
 *
 * @proc 0 exit=0 in_use=3064/3
 * @leak 0 leak_in_thread 3000/2
 * @leak 0 thread_main 3000/2
 * @leak 0 leak_in_main_thread 64/1
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

NOINLINE void leak_in_thread(void)
{
	char *p = malloc(1500); /* @site leak_in_thread */
	memset(p, 't', 1500);
	KEEP(p);
}

NOINLINE void *thread_main(void *arg)
{
	leak_in_thread();
	KEEP(arg);
	return NULL;
}

NOINLINE void leak_in_main_thread(void)
{
	char *p = malloc(64); /* @site leak_in_main_thread */
	memset(p, 'M', 64);
	KEEP(p);
}

int main(void)
{
	pthread_t t[2];

	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, thread_main, NULL) != 0) {
			fprintf(stderr, "thread_leak: pthread_create failed\n");
			return 1;
		}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	leak_in_main_thread();
	printf("threads joined\n");
	return 0;
}
