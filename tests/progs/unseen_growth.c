/*
 * unseen_growth — resident memory that grows outside the heap heaptrail
 * sees: each step maps 4 MiB of anonymous memory itself (mmap, which the
 * agent does not count by default) and touches every page, and leaks
 * 64 KiB through malloc (seen). With the argument "malloc" the 4 MiB
 * come from malloc instead (seen too): the control.
 *
 * 20 steps of 20 ms. Nothing is unmapped or freed at exit: a teardown
 * would free and unmap while the timer's dumps are due (the agent dumps
 * on the program's own allocations and frees), and the last dump would
 * see the memory gone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define STEPS 20
#define CHUNK (4u << 20)

static void *chunks[STEPS], *leaks[STEPS];

int main(int argc, char **argv)
{
	int use_malloc = argc > 1 && !strcmp(argv[1], "malloc");
	for (int s = 0; s < STEPS; s++) {
		if (use_malloc)
			chunks[s] = malloc(CHUNK);
		else
			chunks[s] = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (!chunks[s] || chunks[s] == MAP_FAILED)
			return 1;
		memset(chunks[s], 1, CHUNK);
		leaks[s] = malloc(64 * 1024);
		memset(leaks[s], 1, 64 * 1024);
		struct timespec ts = { 0, 20 * 1000000L };
		while (nanosleep(&ts, &ts))
			;
	}
	printf("unseen_growth: %d steps\n", STEPS);
	return 0;
}
