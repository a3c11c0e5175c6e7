// build: agent
/*
 * test_pool — the agent's pools (src/agent/pool.c) against a plain
 * reference:
 *  - 200,000 random chunk operations (add, remove, change) in 8 pools at
 *    addresses packed close together (so the chunk tables' probe runs are
 *    long and removals shift entries back), every removal's answer (found
 *    or not, size, stack) checked, then each pool's bytes and blocks and
 *    the copy the leak scan reads compared chunk for chunk;
 *  - trim: chunks wholly outside the range go, those straddling an end are
 *    cut to it, those inside stay;
 *  - a tree (a, a/b, a/b/c, a/d, e): reset of a/b empties b and c only;
 *    destroy of a ends a, b, c and d, not e; their anchors can be used
 *    again, with new ids; a gone parent is refused;
 *  - move: the pool answers at its new anchor only, its chunks kept;
 *  - the malloc-like pool (anchor 0) is id 1;
 *  - the snapshot a report takes: names, parents, alive, bytes.
 *
 * Prints "ok - ..." / "not ok - ..." per check and exits 1 when one failed.
 */
#include "agent/agent.h"
#include "agent/pool.h"
#include "agent/startup.h"
#include "agent/table.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

/* startup.c's, which this test does not link */
__thread struct agent_tls agent_tls;
char agent_boot_buf[AGENT_BOOT_SIZE];

#define NPOOL 8
#define SLOTS 4096           /* addresses base + 16 * k, k < SLOTS, per pool */

struct ref {
	uint64_t size[SLOTS];    /* 0: no chunk (sizes are >= 1 here) */
	uint32_t stack[SLOTS];
	uint64_t bytes, blocks;
};
static struct ref ref[NPOOL];
static char anchors[NPOOL];

static uintptr_t addr_of(int p, size_t k)
{
	return 0x100000000ull * (uintptr_t)(p + 1) + 16 * k;
}

static struct agent_pool_info info_of(uint32_t id)
{
	struct agent_pool_info in = { 0 };
	agent_tables_lock_all();
	agent_pool_info_locked(id, &in);
	agent_tables_unlock_all();
	return in;
}

static int cmp_block(const void *a, const void *b)
{
	const struct agent_block *x = a, *y = b;
	return (x->addr > y->addr) - (x->addr < y->addr);
}

static void random_ops(void)
{
	uint32_t ids[NPOOL];
	bool created = true;
	for (int p = 0; p < NPOOL; p++) {
		long id = agent_pool_create((uintptr_t)&anchors[p], 0, "r");
		created &= id >= 2;
		ids[p] = (uint32_t)id;
	}
	check(created, "8 pools created with ids >= 2");
	long bad = 0, wrong = 0;
	for (int i = 0; i < 200000; i++) {
		int p = (int)(rnd() % NPOOL);
		size_t k = rnd() % 1024;   /* a dense quarter first: long runs */
		if (i > 100000)
			k = rnd() % SLOTS;
		struct ref *r = &ref[p];
		uint64_t op = rnd() % 10;
		if (op < 5) {
			uint64_t size = 1 + rnd() % 500;
			uint32_t stack = (uint32_t)(1 + rnd() % 1000);
			if (agent_pool_chunk_add(ids[p], addr_of(p, k), size, stack))
				bad++;
			if (r->size[k]) {
				r->bytes -= r->size[k];
				r->blocks--;
			}
			r->size[k] = size;
			r->stack[k] = stack;
			r->bytes += size;
			r->blocks++;
		} else if (op < 9) {
			size_t size = 0;
			uint32_t stack = 0;
			int ret = agent_pool_chunk_remove((uintptr_t)&anchors[p], addr_of(p, k), &size,
							  &stack);
			if (r->size[k]) {
				if (ret || size != r->size[k] || stack != r->stack[k])
					wrong++;
				r->bytes -= r->size[k];
				r->blocks--;
				r->size[k] = 0;
			} else if (ret != -ENOENT) {
				wrong++;
			}
		} else {
			size_t to = rnd() % SLOTS;
			uint64_t size = 1 + rnd() % 500;
			int ret = agent_pool_chunk_change((uintptr_t)&anchors[p], addr_of(p, k),
							  addr_of(p, to), size);
			if (!r->size[k]) {
				wrong += ret != -ENOENT;
				continue;
			}
			wrong += ret != 0;
			uint32_t stack = r->stack[k];
			r->bytes -= r->size[k];
			r->blocks--;
			r->size[k] = 0;
			if (r->size[to]) {
				r->bytes -= r->size[to];
				r->blocks--;
			}
			r->size[to] = size;
			r->stack[to] = stack;
			r->bytes += size;
			r->blocks++;
		}
	}
	check(!bad && !wrong, "200,000 adds, removes and changes: %ld failed adds, %ld wrong "
	      "answers", bad, wrong);
	bool totals = true;
	size_t want = 0;
	for (int p = 0; p < NPOOL; p++) {
		struct agent_pool_info in = info_of(ids[p]);
		totals &= in.bytes == ref[p].bytes && in.blocks == ref[p].blocks && in.alive;
		want += ref[p].blocks;
	}
	check(totals, "every pool's bytes and blocks are the reference's");

	agent_tables_lock_all();
	size_t n = agent_pool_chunks_count_locked();
	struct agent_block *b = calloc(n + 1, sizeof *b);
	size_t got = agent_pool_chunks_copy_locked(b, n + 1);
	agent_tables_unlock_all();
	qsort(b, got, sizeof *b, cmp_block);
	size_t same = 0;
	for (size_t i = 0; i < got; i++) {
		int p = (int)(b[i].addr / 0x100000000ull) - 1;
		size_t k = (b[i].addr - addr_of(p, 0)) / 16;
		if (p >= 0 && p < NPOOL && k < SLOTS && ref[p].size[k] == b[i].size &&
		    ref[p].stack[k] == b[i].stack)
			same++;
	}
	check(n == want && got == want && same == want,
	      "the scan's copy: %zu chunks counted, %zu copied, %zu as in the reference "
	      "(%zu expected)", n, got, same, want);
	free(b);
	for (int p = 0; p < NPOOL; p++)
		agent_pool_destroy((uintptr_t)&anchors[p]);
}

static void trim(void)
{
	static char t;
	uintptr_t a = (uintptr_t)&t, base = 0x7000000000ull;
	agent_pool_create(a, 0, "trim");
	uint32_t id = agent_pool_find(a);
	agent_pool_chunk_add(id, base, 100, 1);          /* [0,100): outside */
	agent_pool_chunk_add(id, base + 100, 100, 2);    /* [100,200): straddles 150 */
	agent_pool_chunk_add(id, base + 200, 100, 3);    /* inside */
	agent_pool_chunk_add(id, base + 300, 100, 4);    /* straddles 350 */
	agent_pool_chunk_add(id, base + 400, 100, 5);    /* outside */
	int ret = agent_pool_trim(a, base + 150, 200);   /* keep [150, 350) */
	struct agent_pool_info in = info_of(id);
	size_t s1 = 0, s2 = 0, s3 = 0;
	uint32_t st1 = 0, st2 = 0, st3 = 0;
	int r1 = agent_pool_chunk_remove(a, base + 150, &s1, &st1);
	int r2 = agent_pool_chunk_remove(a, base + 200, &s2, &st2);
	int r3 = agent_pool_chunk_remove(a, base + 300, &s3, &st3);
	check(ret == 0 && in.blocks == 3 && in.bytes == 50 + 100 + 50,
	      "trim keeps 3 chunks, 200 bytes (has %llu, %llu)", (unsigned long long)in.blocks,
	      (unsigned long long)in.bytes);
	check(!r1 && s1 == 50 && st1 == 2 && !r2 && s2 == 100 && st2 == 3 && !r3 && s3 == 50 &&
	      st3 == 4, "trim cuts the straddling chunks to the range, keeping their stacks");
	check(agent_pool_trim(0x1234, 0, 0) == -ENOENT, "trim of an unknown pool: -ENOENT");
	agent_pool_destroy(a);
}

static void tree(void)
{
	static char a, b, c, d, e, x;
	long ia = agent_pool_create((uintptr_t)&a, 0, "a");
	long ib = agent_pool_create((uintptr_t)&b, (uintptr_t)&a, "b");
	long ic = agent_pool_create((uintptr_t)&c, (uintptr_t)&b, "c");
	long id = agent_pool_create((uintptr_t)&d, (uintptr_t)&a, "d");
	long ie = agent_pool_create((uintptr_t)&e, 0, "e");
	check(ia > 0 && ib > 0 && ic > 0 && id > 0 && ie > 0, "a tree of five pools");
	check(agent_pool_create((uintptr_t)&a, 0, "again") == -EEXIST, "an anchor in use: -EEXIST");
	check(agent_pool_create((uintptr_t)&x, 0x42, "x") == -ENOENT, "an unknown parent: -ENOENT");
	long ids[] = { ia, ib, ic, id, ie };
	for (int i = 0; i < 5; i++)
		for (int k = 0; k < 10; k++)
			agent_pool_chunk_add((uint32_t)ids[i], 0x9000000000ull * (i + 1) + 64 * k, 8, 1);
	agent_pool_reset((uintptr_t)&b);
	check(info_of((uint32_t)ia).blocks == 10 && info_of((uint32_t)ib).blocks == 0 &&
	      info_of((uint32_t)ic).blocks == 0 && info_of((uint32_t)id).blocks == 10 &&
	      info_of((uint32_t)ie).blocks == 10 && info_of((uint32_t)ic).alive,
	      "reset of a/b empties b and c, which stay");
	agent_pool_destroy((uintptr_t)&a);
	check(!info_of((uint32_t)ia).alive && !info_of((uint32_t)ib).alive &&
	      !info_of((uint32_t)ic).alive && !info_of((uint32_t)id).alive &&
	      info_of((uint32_t)ie).alive && info_of((uint32_t)ie).blocks == 10 &&
	      info_of((uint32_t)id).blocks == 0,
	      "destroy of a ends a, b, c and d, not e");
	check(!agent_pool_find((uintptr_t)&c) && agent_pool_create((uintptr_t)&b, (uintptr_t)&a,
								     "b") == -ENOENT,
	      "their anchors are free; a gone parent is refused");
	long ib2 = agent_pool_create((uintptr_t)&b, (uintptr_t)&e, "b2");
	check(ib2 > ie && info_of((uint32_t)ib2).parent == (uint32_t)ie,
	      "an anchor used again gets a new id (%ld after %ld)", ib2, ib);
	/* destroying e ends b2 too: the child list of e was kept right */
	agent_pool_destroy((uintptr_t)&e);
	check(!info_of((uint32_t)ib2).alive, "destroy of e ends its new child b2");
}

static void move(void)
{
	static char m1, m2;
	long id = agent_pool_create((uintptr_t)&m1, 0, "moved");
	agent_pool_chunk_add((uint32_t)id, 0xa000000000ull, 24, 7);
	int ret = agent_pool_move((uintptr_t)&m1, (uintptr_t)&m2);
	size_t size = 0;
	uint32_t stack = 0;
	check(ret == 0 && agent_pool_find((uintptr_t)&m2) == (uint32_t)id &&
	      !agent_pool_find((uintptr_t)&m1) &&
	      agent_pool_chunk_remove((uintptr_t)&m2, 0xa000000000ull, &size, &stack) == 0 &&
	      size == 24 && stack == 7, "a moved pool answers at its new anchor, chunks kept");
	check(agent_pool_rename((uintptr_t)&m2, "renamed") == 0, "rename");
	uint32_t n;
	size_t len;
	struct agent_pool_snap *snap = agent_pool_snapshot(&n, &len);
	bool found = false;
	for (uint32_t i = 0; snap && i < n; i++)
		if (i + 2 == (uint32_t)id)
			found = !strcmp(snap[i].name, "renamed") && snap[i].alive &&
				snap[i].parent == 0 && snap[i].bytes == 0;
	check(found, "the snapshot has the pool's new name, no parent, nothing in it");
	agent_munmap(snap, len);
	agent_pool_destroy((uintptr_t)&m2);
	check(agent_pool_find(0) == AGENT_POOL_MALLOCLIKE, "anchor 0 is the malloc-like pool");
}

int main(void)
{
	random_ops();
	trim();
	tree();
	move();
	return failures ? 1 : 0;
}
