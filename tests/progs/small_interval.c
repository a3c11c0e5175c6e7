/* small_interval — a program that allocates little: 64 blocks of 1 KiB,
 * kept live, 64 KiB in all.  With --interval 8k every 8 KiB allocated is a
 * dump, so a run writes 8 interval dumps (the agent looks at the interval
 * after each of its steps, not only after each MiB). */
#include <stdio.h>
#include <stdlib.h>

static void *kept[64];

int main(void)
{
	for (int i = 0; i < 64; i++)
		kept[i] = malloc(1024);
	for (int i = 0; i < 64; i++)
		free(kept[i]);
	puts("small_interval: done");
	return 0;
}
