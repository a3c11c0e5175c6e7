/*
 * alloc_shape — allocations whose sizes and temporaries are known by
 * construction, for the size histogram and the count of temporary
 * allocations (an allocation freed by the thread that made it before
 * that thread allocated anything else: heaptrack's definition, per
 * thread). No stdio: libc allocates nothing of its own here except the
 * thread's TLS (in pthread_create, freed at the join after other
 * allocations).
 *
 *   main, TEMP_N times:   malloc(24), free it            temporary, [16, 32)
 *   main, PAIR_N times:   a = malloc(1000), b = malloc(3000), free(a), free(b)
 *                         b is temporary (a free is no allocation), a is not;
 *                         [512, 1024) and [2048, 4096)
 *   main, KEEP_N times:   malloc(5000), kept to the end   [4096, 8192)
 *   a thread, THR_N times: malloc(64), free it, while main runs the
 *                         loops above: temporary, [64, 128)
 *
 * The constants below are what tests/views/test_html.py expects.
 */
#include <pthread.h>
#include <stdlib.h>

#define TEMP_N 100
#define PAIR_N 50
#define KEEP_N 10
#define THR_N 30

void *volatile sink;
static void *kept[KEEP_N];

static void *worker(void *arg)
{
	for (int i = 0; i < THR_N; i++) {
		void *p = malloc(64);
		sink = p;
		free(p);
	}
	return arg;
}

int main(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, worker, NULL))
		return 1;
	for (int i = 0; i < TEMP_N; i++) {
		void *p = malloc(24);
		sink = p;
		free(p);
	}
	for (int i = 0; i < PAIR_N; i++) {
		void *a = malloc(1000), *b = malloc(3000);
		sink = a;
		sink = b;
		free(a);
		free(b);
	}
	for (int i = 0; i < KEEP_N; i++)
		kept[i] = malloc(5000);
	pthread_join(t, NULL);
	sink = kept;
	return 0;
}
