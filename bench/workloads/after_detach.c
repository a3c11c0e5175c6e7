/*
 * after_detach.c — malloc/free after a detach (bench/attach/guard): says
 * "ready", and at a first line on stdin (attached by then) allocates 256
 * blocks it keeps (with --guard some are guarded, still live at the
 * detach); at a second line (detached) times 20 M malloc/free pairs over
 * a ring of 64 blocks of 16 to 215 bytes, frees the kept blocks and
 * prints the seconds the pairs took.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(void)
{
	char line[16];
	void *keep[256];
	printf("ready\n"); fflush(stdout);
	if (!fgets(line, sizeof line, stdin)) return 2;   /* attached now */
	for (int i = 0; i < 256; i++) keep[i] = malloc(64 + i);
	printf("kept\n"); fflush(stdout);
	if (!fgets(line, sizeof line, stdin)) return 2;   /* detached now */
	double t0 = now();
	void *ring[64] = {0};
	for (long i = 0; i < 20000000; i++) {
		int k = i & 63;
		free(ring[k]);
		ring[k] = malloc(16 + (i % 200));
	}
	double t1 = now();
	for (int i = 0; i < 256; i++) free(keep[i]);
	printf("%.3f\n", t1 - t0);
	return 0;
}
