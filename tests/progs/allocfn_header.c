/*
 * allocfn_header — pools that keep their pool in a word before each
 * chunk, as PostgreSQL's memory contexts do: hdr_alloc(size) hands out a
 * chunk of the current pool (a global, like CurrentMemoryContext),
 * hdr_free(ptr) finds the pool from the chunk, hdr_reset(pool) frees all
 * of a pool. Hooked by name with ctx=*(ret-8) and ctx=*(arg1-8)
 * (test_allocfn.py). The program prints what each pool holds at exit:
 *   pool NAME live BYTES BLOCKS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noipa))

struct pool {
	const char *name;
	char *mem, *cur;
	size_t bytes, blocks;
};

struct pool *current;

NOINLINE void *hdr_alloc(size_t n)
{
	struct pool *p = current;
	char *h = p->cur;
	p->cur += 16 + ((n + 15) & ~(size_t)15);
	*(struct pool **)(h + 8) = p;   /* the word before the chunk */
	p->bytes += n;
	p->blocks++;
	return h + 16;
}

NOINLINE void hdr_free(void *ptr, size_t n)
{
	struct pool *p = *(struct pool **)((char *)ptr - 8);
	p->bytes -= n;
	p->blocks--;
}

NOINLINE void hdr_reset(struct pool *p)
{
	p->cur = p->mem;
	p->bytes = p->blocks = 0;
}

static struct pool *pool_new(const char *name)
{
	struct pool *p = calloc(1, sizeof *p);
	p->name = name;
	p->mem = p->cur = malloc(1 << 16);
	return p;
}

char *kept[64];

int main(void)
{
	struct pool *a = pool_new("a"), *b = pool_new("b");
	for (int i = 0; i < 30; i++) {
		current = i % 3 ? a : b;
		kept[i] = hdr_alloc(24 + (size_t)i);
		memset(kept[i], i, 24 + (size_t)i);
	}
	for (int i = 0; i < 30; i += 4)   /* some of each pool's back */
		hdr_free(kept[i], 24 + (size_t)i);
	hdr_reset(b);
	current = b;
	for (int i = 30; i < 35; i++)
		kept[i] = hdr_alloc(100);
	/* in the order heaptrail first saw them (b's chunk is the first) */
	printf("pool b live %zu %zu\npool a live %zu %zu\n", b->bytes, b->blocks, a->bytes,
	       a->blocks);
	return 0;
}
