/* mallinfo_cost.c — how long glibc's mallinfo2 takes (it walks every free
 * chunk with the arena locked) on a heap of N blocks with every other one
 * freed: the reason src/agent/heapstats.c asks at most 1 % of the time.
 * bench/heapstats/run builds and runs it. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
	int n = atoi(argv[1]);
	void **p = malloc(sizeof *p * n);
	for (int i = 0; i < n; i++) p[i] = malloc(64 + (i % 7) * 200);
	for (int i = 0; i < n; i += 2) free(p[i]);
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	struct mallinfo2 m = mallinfo2();
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%d blocks, %zu free chunks: mallinfo2 %.2f ms\n", n, m.ordblks, (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6);
}
