/*
 * pool_beside.c — a pool that grows slowly beside a plain malloc'd heap
 * that grows fast (tests/agent/test_pools.py, pools:growth-subset): each
 * of 40 steps gives the pool "slow" one 4 KiB chunk (carved from a
 * block allocated at start) and mallocs 256 KiB it keeps (touched).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <heaptrail.h>

int main(void)
{
	static char arena[40 * 4096];
	static void *kept[40];
	heaptrail_pool_create(arena, NULL, "slow");
	for (int i = 0; i < 40; i++) {
		heaptrail_pool_alloc(arena, arena + i * 4096, 4096);
		kept[i] = malloc(256 << 10);
		memset(kept[i], i, 256 << 10);
	}
	printf("done\n");
	return 0;
}
