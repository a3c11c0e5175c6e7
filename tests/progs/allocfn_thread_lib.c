/*
 * allocfn_thread_lib — a library whose constructor starts a thread: put
 * in LD_PRELOAD after the agent, it runs before the agent's constructor,
 * so the program already has two threads when heaptrail writes its
 * hooks, which it must then do with the other one stopped
 * (test_allocfn.py, allocfn:threads).
 */
#include <pthread.h>
#include <unistd.h>

static void *sleeper(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

__attribute__((constructor)) static void start(void)
{
	pthread_t t;
	pthread_create(&t, NULL, sleeper, NULL);
}
