/*
 * stop_busy_exit — main exits while four threads keep allocating and
 * freeing (1000 blocks, then frees them all, again and again). The exit report's "in use at
 * exit" and its leak summary must describe the same moment: the blocks
 * the summary classifies add up to the blocks in use. Run by the
 * cli:stop-transparent test, classified and with leak_kinds=0.
 *
 * @cli-only
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *churn(void *arg)
{
	void *blocks[1000];
	unsigned seed = (unsigned)(size_t)arg;
	for (;;) {
		for (int i = 0; i < 1000; i++) {
			seed = seed * 1103515245 + 12345;
			blocks[i] = malloc(16 + (seed >> 20) % 200);
		}
		for (int i = 0; i < 1000; i++)
			free(blocks[i]);
	}
	return NULL;
}

int main(void)
{
	pthread_t t;
	for (size_t i = 1; i <= 4; i++)
		pthread_create(&t, NULL, churn, (void *)i);
	struct timespec ts = { 0, 200000000 };
	nanosleep(&ts, NULL);
	if (write(1, "exiting\n", 8) != 8)
		return 1;
	exit(0);
}
