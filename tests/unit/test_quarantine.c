// build: agent
/*
 * test_quarantine — sampled mode's quarantine of freed blocks
 * (src/agent/quarantine.c) against a plain reference FIFO with its
 * bounds (64 blocks, 4 MiB), its bound on the rate lifted: 100,000 blocks
 * of 1,033 bytes to 1 MiB put in at addresses on pages of their own
 * (stretches of small ones, which fill its 64 blocks, and of bigger
 * ones, which fill its bytes); every
 * block it gives back to the allocator is the reference's next, in
 * order, and is found no more (its address, and its page's slot in the
 * sampling filter, are free again); the bytes and blocks kept are the
 * reference's after every put, and every 97th put each kept block is
 * found with its size, stack, deallocator and return address (the
 * ring's search misses none), and its page is "kept blocks only"
 * in the filter; blocks of 1,032 bytes or fewer, or over 1 MiB, are not
 * kept; a drain gives back every block, oldest first, and nothing is
 * kept until keep is called. With the rate bound (200 a second): a quick
 * 1,000 puts keep the burst of 64 and about none more, and after 100 ms
 * about 20 more are kept.
 *
 * Built by the Makefile against the agent's objects. Prints "ok - ..." /
 * "not ok - ..." per check and exits 1 when one failed.
 */
#include "agent/agent.h"
#include "agent/quarantine.h"
#include "agent/startup.h"
#include "agent/table.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"

__thread struct agent_tls agent_tls;
char agent_boot_buf[AGENT_BOOT_SIZE];

#define PUTS 100000
#define BASE ((uintptr_t)0x7f0000000000ull)

static uintptr_t freed[PUTS + 300];
static size_t nfreed;

static void record_free(void *p)
{
	freed[nfreed++] = (uintptr_t)p;
}

/* the reference: a FIFO of (address, size) */
static uintptr_t ref_addr[PUTS];
static size_t ref_size[PUTS];
static size_t ref_head, ref_tail;
static uint64_t ref_bytes;

static size_t sizes[PUTS];
/* pages whose filter slot is pinned (the bootstrap buffer's, 4 GiB
 * apart): "maybe" for ever, whatever is kept there */
static bool pinned[PUTS];

int main(void)
{
	agent_filter_init();
	check(agent_filter != NULL, "the sampling filter is set up");
	void *small = (void *)(BASE - 4096), *big = (void *)(BASE - 8192);
	check(!agent_quarantine_put(small, AGENT_QUARANTINE_MIN, 1, 0, 0, record_free) &&
		      !agent_quarantine_put(big, AGENT_QUARANTINE_BYTES / 4 + 1, 1, 0, 0, record_free) &&
		      agent_quarantine_count == 0,
	      "blocks of 1,032 bytes or fewer, or over 1 MiB, are not kept");

	agent_quarantine_rate = 0;  /* the FIFO's bounds alone */
	size_t most = 0;
	int order_bad = 0, find_bad = 0, gone_bad = 0, filter_bad = 0, bytes_bad = 0;
	for (size_t i = 0; i < PUTS; i++) {
		uintptr_t a = BASE + i * 4096;
		/* stretches of small blocks (256 of them fill it), then
		 * bigger ones, some near the largest kept (bytes fill it) */
		size_t n = i % 30000 < 10000 ? AGENT_QUARANTINE_MIN + 1 + rnd() % 3000
			   : rnd() % 8	     ? AGENT_QUARANTINE_MIN + 1 + rnd() % 60000
				: AGENT_QUARANTINE_MIN + 1 + rnd() % (AGENT_QUARANTINE_BYTES / 4 - AGENT_QUARANTINE_MIN);
		sizes[i] = n;
		pinned[i] = agent_live_may_contain(a);
		size_t before = nfreed;
		if (!agent_quarantine_put((void *)a, n, (uint32_t)(i + 1), (int)(i % 4), a ^ 1,
					  record_free)) {
			check(false, "block %zu of %zu bytes not kept", i, n);
			break;
		}
		while (ref_head < ref_tail &&
		       (ref_tail - ref_head == AGENT_QUARANTINE_BLOCKS ||
			ref_bytes + n > AGENT_QUARANTINE_BYTES)) {
			ref_bytes -= ref_size[ref_head];
			ref_head++;
		}
		ref_addr[ref_tail] = a;
		ref_size[ref_tail++] = n;
		ref_bytes += n;
		/* what went to the allocator: the reference's oldest, in order */
		size_t went = nfreed - before;
		for (size_t k = 0; k < went; k++) {
			uintptr_t g = freed[before + k];
			size_t size;
			uint32_t st;
			int d;
			uintptr_t ra;
			order_bad += before + k >= ref_head || g != ref_addr[before + k];
			gone_bad += agent_quarantine_find((void *)g, &size, &st, &d, &ra);
			filter_bad += !pinned[(g - BASE) / 4096] && agent_live_may_contain(g);
		}
		order_bad += nfreed != ref_head;
		if (ref_tail - ref_head > most)
			most = ref_tail - ref_head;
		bytes_bad += agent_quarantine_bytes() != ref_bytes ||
			     agent_quarantine_count != ref_tail - ref_head;
		/* every kept block, now and then (puts push the oldest out) */
		if (i % 97 == 0 || i == PUTS - 1)
			for (size_t k = ref_head; k < ref_tail; k++) {
				size_t size;
				uint32_t st;
				int d;
				uintptr_t ra;
				uintptr_t b = ref_addr[k];
				size_t j = (b - BASE) / 4096;
				find_bad += !agent_quarantine_find((void *)b, &size, &st, &d, &ra) ||
					    size != sizes[j] || st != j + 1 || d != (int)(j % 4) ||
					    ra != (b ^ 1);
				filter_bad += !pinned[j] && !agent_filter_kept_only(b);
			}
	}
	check(!order_bad, "100,000 puts: the blocks go to the allocator oldest first, as the "
			  "reference's bounds say (%d wrong)", order_bad);
	check(most == AGENT_QUARANTINE_BLOCKS, "at most %d blocks kept, and that many at times "
					      "(%zu)", AGENT_QUARANTINE_BLOCKS, most);
	check(!bytes_bad, "the bytes and blocks kept are the reference's after every put (%d wrong)",
	      bytes_bad);
	check(!find_bad, "every kept block is found with its size, stack, deallocator and "
			 "return address (%d not)", find_bad);
	check(!gone_bad, "no block given back is found any more (%d are)", gone_bad);
	check(!filter_bad, "the filter counts kept blocks' pages, and no more once they are "
			   "given back (%d wrong)", filter_bad);

	size_t before = nfreed, kept = ref_tail - ref_head;
	agent_quarantine_drain(record_free);
	int drain_bad = nfreed - before != kept || agent_quarantine_count != 0 ||
			agent_quarantine_bytes() != 0;
	for (size_t k = 0; k < kept && !drain_bad; k++)
		drain_bad += freed[before + k] != ref_addr[ref_head + k];
	check(!drain_bad, "a drain gives back the %zu kept blocks, oldest first", kept);
	check(!agent_quarantine_put((void *)BASE, 4096, 1, 0, 0, record_free),
	      "after a drain nothing is kept");
	agent_quarantine_keep();
	check(agent_quarantine_put((void *)BASE, 4096, 1, 0, 0, record_free) &&
		      agent_live_may_contain(BASE),
	      "after keep, blocks are kept again");

	/* the rate: from an empty quarantine, with a full bucket */
	agent_quarantine_drain(record_free);
	agent_quarantine_keep();
	agent_quarantine_rate = AGENT_QUARANTINE_RATE;
	int burst = 0, later = 0;
	for (size_t i = 0; i < 1000; i++)
		burst += agent_quarantine_put((void *)(BASE + i * 4096), 2000, 1, 0, 0, record_free);
	struct timespec nap = { 0, 100000000 };
	nanosleep(&nap, NULL);
	for (size_t i = 1000; i < 2000; i++)
		later += agent_quarantine_put((void *)(BASE + i * 4096), 2000, 1, 0, 0, record_free);
	/* the first loop takes well under 5 ms (one more token); the nap at
	 * least 100 ms and, on a loaded machine, more: 20 tokens and up */
	check(burst >= AGENT_QUARANTINE_BLOCKS && burst <= AGENT_QUARANTINE_BLOCKS + 2 &&
		      later >= AGENT_QUARANTINE_RATE / 10 && later <= AGENT_QUARANTINE_BLOCKS,
	      "at %d a second: 1,000 quick puts keep %d (the burst: %d), and 1,000 more after "
	      "100 ms keep %d", AGENT_QUARANTINE_RATE, burst, AGENT_QUARANTINE_BLOCKS, later);
	return failures ? 1 : 0;
}
