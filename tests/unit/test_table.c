// build: agent
/*
 * test_table — the agent's live table (src/agent/table.c: address ->
 * size and stack id) against a plain reference, with millions of blocks:
 *  - heap-like addresses (bump allocation of 32..144-byte chunks, reuse of
 *    freed addresses last-in first-out as malloc's caches do, a second
 *    region of page-aligned blocks far away): 3 M live blocks, then 4 M
 *    random removals, new blocks and reused addresses; every removal's
 *    answer (found or not, size, stack) checked against the reference,
 *    every live block looked up at the end, the copy the leak scan reads
 *    compared block for block;
 *  - the addresses glibc's malloc really returns, 1 M live, churned;
 *  - the same block inserted twice (a missed free): replaced, not doubled;
 *  - each entry's size, allocator family and stack read back as written;
 *  - four threads at once on their own blocks, sharing the shards;
 *  - fork while other threads use the table (the child's table works);
 *  - the sampling filter: "not tracked" is never said of a tracked block;
 *  - the mapping of a big table: 2 MiB-aligned and resident at once.
 * The stack table: 150,000 stacks that are prefixes of each other, or
 * differ in their last pc, their allocator or their pool, each interned
 * twice (one id each, the same both times, the record and pcs as given),
 * through a dozen growths of the index; 100,000 that differ only in their
 * pcs (some share a slot's hash bits); four threads interning the same
 * new stacks at once agree on every id.
 * And the property the table is built for: lookups stay short however
 * many blocks are live (mean and longest displacement from the home slot,
 * at 0.3 M and 3 M live blocks), which a hash that clusters fails.
 *
 * Built by the Makefile against the agent's objects. Prints "ok - ..." /
 * "not ok - ..." per check and exits 1 when one failed.
 */
#include "agent/agent.h"
#include "agent/startup.h"
#include "agent/table.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

/* startup.c's, which this test does not link: the bootstrap buffer is
 * never used here, and no signal handler's frees wait for the locks. */
__thread struct agent_tls agent_tls;
char agent_boot_buf[AGENT_BOOT_SIZE];

/* ---------- a simulated heap with a direct-mapped reference ----------
 * Addresses are base + 16 * k; ref[k] is the (size, stack) the table
 * should hold for that address, or 0 when it should hold nothing. */
struct heap {
	uintptr_t base;
	size_t nidx;                 /* 16-byte units */
	uint64_t *ref;               /* size | stack << 40; 0 = not live */
	size_t bump;                 /* next unused unit */
	uint32_t *live;              /* unit indexes of live blocks */
	size_t nlive, cap;
	uint32_t *freed[10];         /* per chunk size class: freed units, LIFO */
	size_t nfreed[10], freedcap;
	size_t unit_span;            /* units per chunk-size step */
	long bad;                    /* wrong answers (reported once) */
	char bad_msg[200];
};

#define REF(size, stack) ((uint64_t)(size) | ((uint64_t)(stack) << 40))

static void heap_init(struct heap *h, uintptr_t base, size_t nidx, size_t cap)
{
	memset(h, 0, sizeof *h);
	h->base = base;
	h->nidx = nidx;
	h->ref = calloc(nidx, sizeof *h->ref);
	h->live = malloc(cap * sizeof *h->live);
	h->cap = cap;
	h->freedcap = cap;
	for (int c = 0; c < 10; c++)
		h->freed[c] = malloc(cap * sizeof *h->freed[c]);
	if (!h->ref || !h->live || !h->freed[9]) {
		fprintf(stderr, "test_table: out of memory\n");
		exit(2);
	}
}

static void heap_free(struct heap *h)
{
	free(h->ref);
	free(h->live);
	for (int c = 0; c < 10; c++)
		free(h->freed[c]);
}

static void bad(struct heap *h, const char *what, uintptr_t a)
{
	if (!h->bad++)
		snprintf(h->bad_msg, sizeof h->bad_msg, "%s at %#lx", what, (unsigned long)a);
}

/* A chunk of class c (0..8: 32..160 bytes) from the freed list or the
 * bump pointer; inserts it into the table and the reference. */
static bool heap_alloc(struct heap *h, int c, uint32_t stack)
{
	size_t units = 2 + (size_t)c;
	size_t k;
	if (h->nfreed[c] && rnd() % 4)
		k = h->freed[c][--h->nfreed[c]];
	else if (h->bump + units <= h->nidx && h->nlive < h->cap)
		k = h->bump, h->bump += units;
	else
		return false;
	uintptr_t a = h->base + 16 * k;
	size_t size = 16 * units - 8 - (rnd() % 8);
	if (!agent_live_insert(a, size, stack, stack % 4))  /* a family of its stack's */
		bad(h, "insert failed", a);
	h->ref[k] = REF(size, stack);
	h->live[h->nlive++] = (uint32_t)k;
	return true;
}

static void heap_check_remove(struct heap *h, size_t k)
{
	uintptr_t a = h->base + 16 * k;
	uint64_t meta = 0;
	bool found = agent_live_take(a, &meta);
	size_t size = agent_live_meta_size(meta);
	uint32_t stack = agent_live_meta_stack(meta);
	if (found != (h->ref[k] != 0))
		bad(h, found ? "removed a block that was not live" : "live block not found", a);
	else if (found && REF(size, stack) != h->ref[k])
		bad(h, "wrong size or stack", a);
	else if (found && agent_live_meta_family(meta) != stack % 4)
		bad(h, "wrong family", a);
	h->ref[k] = 0;
}

/* Removes the i-th live block (checked) and remembers its address. */
static void heap_release(struct heap *h, size_t i)
{
	size_t k = h->live[i];
	uint64_t r = h->ref[k];
	int c = (int)(((r & ((1ull << 40) - 1)) + 8 + 15) / 16) - 2;
	heap_check_remove(h, k);
	h->live[i] = h->live[--h->nlive];
	if (c >= 0 && c < 9 && h->nfreed[c] < h->freedcap)
		h->freed[c][h->nfreed[c]++] = (uint32_t)k;
}

/* Looks up an address that is not live: must not be found. */
static void heap_check_absent(struct heap *h)
{
	size_t k = rnd() % h->nidx;
	if (h->ref[k])
		return;
	heap_check_remove(h, k);
}

static void check_stats(const char *what, double mean_max, uint64_t max_max)
{
	struct agent_live_stats st;
	agent_tables_lock_all();
	agent_live_stats_locked(&st);
	agent_tables_unlock_all();
	double mean = st.entries ? (double)st.displacement_sum / st.entries : 0;
	check(mean <= mean_max && st.displacement_max <= max_max,
	      "%s: %lu blocks in %lu slots, displacement mean %.2f (at most %.1f), longest %lu (at most %lu)",
	      what, (unsigned long)st.entries, (unsigned long)st.slots, mean, mean_max,
	      (unsigned long)st.displacement_max, (unsigned long)max_max);
}

static size_t table_count(void)
{
	agent_tables_lock_all();
	size_t n = agent_live_count_locked();
	agent_tables_unlock_all();
	return n;
}

/* Every block of the leak scan's copy is live in some heap's reference
 * with that size and stack, and there are as many as the heaps hold. */
static void check_copy(struct heap **hs, int nh, const char *what)
{
	agent_tables_lock_all();
	size_t n = agent_live_count_locked();
	struct agent_block *b = malloc((n + 1) * sizeof *b);
	size_t got = b ? agent_live_copy_locked(b, n + 1) : 0;
	agent_tables_unlock_all();
	size_t want = 0, wrong = 0;
	for (int j = 0; j < nh; j++)
		want += hs[j]->nlive;
	for (size_t i = 0; i < got; i++) {
		bool ok = false;
		for (int j = 0; j < nh && !ok; j++) {
			struct heap *h = hs[j];
			if (b[i].addr < h->base || b[i].addr >= h->base + 16 * h->nidx)
				continue;
			size_t k = (b[i].addr - h->base) / 16;
			ok = h->ref[k] == REF(b[i].size, b[i].stack);
		}
		wrong += !ok;
	}
	free(b);
	check(got == want && n == want && !wrong,
	      "%s: the copy holds %zu blocks (count %zu, live %zu), %zu not matching",
	      what, got, n, want, wrong);
}

static void check_heap(struct heap *h, const char *what)
{
	check(!h->bad, "%s: every answer right (%ld wrong%s%s)", what, h->bad,
	      h->bad ? ", first: " : "", h->bad_msg);
}

/* Removes every live block (each checked) and checks the table is empty. */
static void heap_drain(struct heap *h)
{
	while (h->nlive)
		heap_release(h, h->nlive - 1);
}

static void test_heap_like(void)
{
	/* A brk heap of 512 MiB and a far region of page-aligned blocks
	 * (as big allocations get), addresses as glibc would give them. */
	static struct heap near, far;
	heap_init(&near, 0x555555560000ul, 32u << 20, 4u << 20);
	heap_init(&far, 0x7f1234560000ul, 16u << 20, 1u << 20);
	struct heap *both[2] = { &near, &far };

	for (int i = 0; i < 300000; i++)
		heap_alloc(&near, (int)(rnd() % 8), 1 + (uint32_t)(rnd() % 1000));
	check_stats("300 k blocks in heap order", 4.0, 128);
	while (near.nlive < 3000000)
		heap_alloc(&near, (int)(rnd() % 8), 1 + (uint32_t)(rnd() % 1000));
	for (int i = 0; i < 20000; i++) {  /* 4 KiB-aligned big blocks */
		size_t k = (size_t)i * 256 * 3;
		if (k >= far.nidx)
			break;
		far.ref[k] = REF(8000 + i, (1u << 24) - 1 - i % 7);
		agent_live_insert(far.base + 16 * k, 8000 + (size_t)i, (1u << 24) - 1 - i % 7,
				  ((1u << 24) - 1 - i % 7) % 4);
		far.live[far.nlive++] = (uint32_t)k;
	}
	check(table_count() == near.nlive + far.nlive, "3 M blocks inserted: count %zu",
	      table_count());
	check_stats("3 M blocks in heap order", 4.0, 128);

	/* Churn: random frees, reuse of freed addresses, new blocks, lookups
	 * of addresses that are not live. */
	for (long i = 0; i < 4000000; i++) {
		uint64_t r = rnd();
		if (r % 16 == 0)
			heap_check_absent(&near);
		if (near.nlive > 2500000 && r & 1)
			heap_release(&near, rnd() % near.nlive);
		else if (!heap_alloc(&near, (int)((r >> 8) % 9), 1 + (uint32_t)(r >> 32) % 5000))
			heap_release(&near, rnd() % near.nlive);
		if (i % 97 == 0 && far.nlive)
			heap_release(&far, rnd() % far.nlive);
	}
	check_heap(&near, "heap-like churn");
	check_heap(&far, "page-aligned blocks");
	check_stats("after 4 M random operations", 4.0, 128);
	check_copy(both, 2, "heap-like churn");

	/* Every live block found, with its size and stack, then gone. */
	heap_drain(&near);
	heap_drain(&far);
	check_heap(&near, "every block looked up at the end");
	check(table_count() == 0, "table empty after removing everything (%zu left)",
	      table_count());
	size_t missing = 0;
	for (int i = 0; i < 100000; i++) {
		size_t sz;
		uint32_t st;
		missing += !agent_live_remove(near.base + 16 * (rnd() % near.nidx), &sz, &st);
	}
	check(missing == 100000, "nothing found in an empty table");
	heap_free(&near);
	heap_free(&far);
}

/* The addresses glibc's malloc hands out, sizes 16..1024. */
static void test_real_malloc(void)
{
	enum { N = 1000000 };
	void **p = malloc(N * sizeof *p);
	uint64_t *ref = malloc(N * sizeof *ref);
	long wrong = 0;
	for (long i = 0; i < N; i++) {
		size_t sz = 16 + rnd() % 1009;
		p[i] = malloc(sz);
		ref[i] = REF(sz, 1 + i % 77);
		agent_live_insert((uintptr_t)p[i], sz, 1 + (uint32_t)(i % 77), AGENT_LIVE_MALLOC);
	}
	for (long i = 0; i < 3000000; i++) {
		long j = (long)(rnd() % N);
		size_t sz;
		uint32_t st;
		if (!agent_live_remove((uintptr_t)p[j], &sz, &st) || REF(sz, st) != ref[j])
			wrong++;
		free(p[j]);
		sz = 16 + rnd() % 1009;
		p[j] = malloc(sz);
		ref[j] = REF(sz, 1 + i % 91);
		agent_live_insert((uintptr_t)p[j], sz, 1 + (uint32_t)(i % 91), AGENT_LIVE_MALLOC);
	}
	check_stats("1 M blocks from malloc, churned", 4.0, 128);
	for (long i = 0; i < N; i++) {
		size_t sz;
		uint32_t st;
		if (!agent_live_remove((uintptr_t)p[i], &sz, &st) || REF(sz, st) != ref[i])
			wrong++;
		free(p[i]);
	}
	check(!wrong && table_count() == 0, "malloc's own addresses: %ld wrong answers", wrong);
	free(p);
	free(ref);
}

static void test_replace(void)
{
	uintptr_t a = 0x600000001230;
	agent_live_insert(a, 100, 7, AGENT_LIVE_MALLOC);
	agent_live_insert(a, 200, 9, AGENT_LIVE_MALLOC);  /* its free was missed */
	size_t sz = 0;
	uint32_t st = 0;
	bool first = agent_live_remove(a, &sz, &st);
	bool second = agent_live_remove(a, &sz, &st);
	check(first && !second && table_count() == 0,
	      "an address inserted twice is held once, with the newer size and stack (%zu, %u)",
	      sz, st);
	check(sz == 200 && st == 9, "the newer size and stack win");
}

/* A block's meta word keeps its size, its allocator's family and its
 * stack apart, whatever their values; and each allocator has the family
 * its deallocators are checked by (heaperrors.h). */
static void test_meta(void)
{
	static const struct { size_t size; unsigned family; uint32_t stack; } cases[] = {
		{ 0, AGENT_LIVE_MALLOC, 1 },
		{ 1, AGENT_LIVE_OTHER, (1u << 24) - 1 },
		{ AGENT_LIVE_SIZE_MAX, AGENT_LIVE_NEW_ARRAY, 1 },
		{ (size_t)1 << 40, AGENT_LIVE_NEW, 12345 },  /* over the bound: clamped */
		{ SIZE_MAX, AGENT_LIVE_OTHER, (1u << 24) - 1 },
	};
	int bad_cases = 0;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uintptr_t a = 0x600000004560 + 16 * i;
		uint64_t meta = 0;
		size_t want = cases[i].size < AGENT_LIVE_SIZE_MAX ? cases[i].size : AGENT_LIVE_SIZE_MAX;
		bool ok = agent_live_insert(a, cases[i].size, cases[i].stack, cases[i].family) &&
			  agent_live_take(a, &meta) && agent_live_meta_size(meta) == want &&
			  agent_live_meta_family(meta) == cases[i].family &&
			  agent_live_meta_stack(meta) == cases[i].stack;
		bad_cases += !ok;
	}
	check(bad_cases == 0 && table_count() == 0,
	      "meta words: size (clamped at 2^38 - 1), family and stack read back as written "
	      "(%d of 5 wrong)", bad_cases);
	static const struct { int fn; unsigned family; } fns[] = {
		{ FMT_FN_MALLOC, AGENT_LIVE_MALLOC }, { FMT_FN_CALLOC, AGENT_LIVE_MALLOC },
		{ FMT_FN_REALLOC, AGENT_LIVE_MALLOC }, { FMT_FN_REALLOCARRAY, AGENT_LIVE_MALLOC },
		{ FMT_FN_POSIX_MEMALIGN, AGENT_LIVE_MALLOC },
		{ FMT_FN_ALIGNED_ALLOC, AGENT_LIVE_MALLOC }, { FMT_FN_MEMALIGN, AGENT_LIVE_MALLOC },
		{ FMT_FN_VALLOC, AGENT_LIVE_MALLOC }, { FMT_FN_PVALLOC, AGENT_LIVE_MALLOC },
		{ FMT_FN_NEW, AGENT_LIVE_NEW }, { FMT_FN_NEW_ARRAY, AGENT_LIVE_NEW_ARRAY },
		{ FMT_FN_POOL, AGENT_LIVE_OTHER }, { FMT_FN_MALLOCLIKE, AGENT_LIVE_OTHER },
		{ FMT_FN_MMAP, AGENT_LIVE_OTHER },
		{ FMT_FN_NEW | 4 << 8, AGENT_LIVE_OTHER },        /* new(n, align_val_t(8)) */
		{ FMT_FN_NEW_ARRAY | 13 << 8, AGENT_LIVE_OTHER }, /* new[](n, 4096) */
	};
	int wrong = 0;
	for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
		wrong += agent_live_family(fns[i].fn) != fns[i].family;
	check(wrong == 0, "each allocator's family: malloc's 9, new, new[], the rest by their stack "
	      "(%d of 16 wrong)", wrong);
}

/* Entries 255 or more slots from home (the key's displacement byte is
 * saturated) still move, and are found and removed, correctly: addresses
 * whose hash puts them at nearly the same home in one shard make a run of
 * hundreds of entries. The hash below mirrors table.h's agent_live_hash
 * and agent_live_home; if those change, this test fails for want of a
 * long run (see the check), rather than passing without testing
 * anything. */
static uint64_t mirror_hash(uintptr_t a)
{
	return ((uint64_t)a >> 4) * 0x9e3779b97f4a7c15ull;
}

static void test_long_runs(void)
{
	enum { N = 600 };
	static uintptr_t a[N];
	static bool in[N];
	int n = 0;
	for (uint64_t reg = 0x40000000; n < N; reg++) {
		uint64_t h = mirror_hash((uintptr_t)reg << 8);
		/* shard 5, and the same top 12 bits of the 32 under the shard's */
		if (h >> 58 == 5 && ((h >> 46) & 0xfff) == 0x123)
			a[n++] = (uintptr_t)reg << 8;
	}
	long wrong = 0;
	for (int i = 0; i < N; i++) {
		agent_live_insert(a[i], (size_t)i + 1, (uint32_t)i + 1, AGENT_LIVE_MALLOC);
		in[i] = true;
	}
	struct agent_live_stats st;
	agent_tables_lock_all();
	agent_live_stats_locked(&st);
	agent_tables_unlock_all();
	check(st.displacement_max >= 300, "a run of %d addresses with nearly the same home: longest displacement %lu",
	      N, (unsigned long)st.displacement_max);
	/* remove and put back at random, every answer checked */
	for (int round = 0; round < 20000; round++) {
		int i = (int)(rnd() % N);
		size_t sz;
		uint32_t stk;
		bool found = agent_live_remove(a[i], &sz, &stk);
		if (found != in[i] || (found && (sz != (size_t)i + 1 || stk != (uint32_t)i + 1)))
			wrong++;
		in[i] = false;
		if (rnd() & 1) {
			agent_live_insert(a[i], (size_t)i + 1, (uint32_t)i + 1, AGENT_LIVE_MALLOC);
			in[i] = true;
		}
	}
	for (int i = 0; i < N; i++) {
		size_t sz;
		uint32_t stk;
		bool found = agent_live_remove(a[i], &sz, &stk);
		if (found != in[i] || (found && (sz != (size_t)i + 1 || stk != (uint32_t)i + 1)))
			wrong++;
	}
	check(!wrong && table_count() == 0, "long runs: %ld wrong answers, %zu left", wrong,
	      table_count());
}

/* ---------- the big tables' mappings ----------
 * agent_mmap_table (os.c), which the live table's shards of 2 MiB and
 * more come from: aligned to 2 MiB (else a huge page cannot back its
 * first and last MiBs), and resident at once, every page faulted in for
 * writing (a lookup's read before any write would map the zero page and
 * the write after it a 4 KiB page, never a huge one). Whether the pages
 * are huge is the system's choice (THP "never", or no free huge page):
 * printed, not checked. A small table is a plain mapping. */
static long resident_pages(void *p, size_t len, long *pages)
{
	static unsigned char vec[(8u << 20) / 4096];
	*pages = (long)((len + 4095) / 4096);
	if (mincore(p, len, vec) != 0)
		return -1;
	long n = 0;
	for (long i = 0; i < *pages; i++)
		n += vec[i] & 1;
	return n;
}

static long anon_huge_kb(uintptr_t start)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[256];
	long kb = -1;
	bool in = false;
	while (f && fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
			in = lo <= start && start < hi;
		else if (in && sscanf(line, "AnonHugePages: %ld", &kb) == 1)
			break;
	}
	if (f)
		fclose(f);
	return kb;
}

static void test_table_mapping(void)
{
	size_t len = (5u << 20) + 4096 * 3 + 16;   /* not a multiple of anything */
	char *p = agent_mmap_table(len);
	long pages = 0, res = p ? resident_pages(p, len, &pages) : -1;
	check(p && (uintptr_t)p % (2u << 20) == 0 && res == pages,
	      "a 5 MiB table: mapped at %p (2 MiB-aligned: %s), %ld of %ld pages resident at once",
	      (void *)p, p && (uintptr_t)p % (2u << 20) == 0 ? "yes" : "no", res, pages);
	long huge = p ? anon_huge_kb((uintptr_t)p) : -1;
	printf("# its huge pages: %ld KiB (the system's THP setting decides)\n", huge);
	bool zero = true;
	for (size_t i = 0; p && i < len; i += 4096)
		zero &= p[i] == 0;
	if (p)
		p[len - 1] = 1;
	check(zero, "a 5 MiB table starts zeroed, and its last byte can be written");
	if (p) {
		agent_munmap(p, len);
		check(resident_pages(p, len, &pages) < 0, "and its whole range is unmapped after");
	}
	char *q = agent_mmap_table(64u << 10);
	check(q && (uintptr_t)q % 4096 == 0, "a 64 KiB table: a plain mapping");
	if (q)
		agent_munmap(q, 64u << 10);
}

/* ---------- threads ---------- */
struct worker {
	pthread_t t;
	struct heap h;
	uint64_t seed;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t s = w->seed;
	for (long i = 0; i < 600000; i++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		if (w->h.nlive > 100000 && (s & 1))
			heap_release(&w->h, (s >> 8) % w->h.nlive);
		else if (!heap_alloc(&w->h, (int)((s >> 40) % 9), 1 + (uint32_t)(s >> 50)))
			heap_release(&w->h, (s >> 8) % w->h.nlive);
	}
	return NULL;
}

static volatile bool forking;

static void *forker_main(void *arg)
{
	(void)arg;
	int bad_children = 0;
	for (int i = 0; i < 8 && forking; i++) {
		agent_tables_lock_all();
		pid_t pid = fork();
		agent_tables_unlock_all();
		if (pid == 0) {
			/* one thread left: the table must still work */
			uintptr_t a = 0x500000000000;
			size_t sz;
			uint32_t st;
			agent_live_insert(a, 42, 3, AGENT_LIVE_MALLOC);
			_exit(agent_live_remove(a, &sz, &st) && sz == 42 && st == 3 ? 0 : 1);
		}
		int status = 0;
		if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			bad_children++;
	}
	return (void *)(intptr_t)bad_children;
}

static void test_threads(void)
{
	struct worker w[4];
	for (int i = 0; i < 4; i++) {
		heap_init(&w[i].h, 0x560000000000ul + ((uintptr_t)i << 36), 8u << 20, 1u << 20);
		w[i].seed = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
	}
	rng = rnd();  /* heap_alloc's own draws: racy but harmless (any value will do) */
	forking = true;
	pthread_t f;
	pthread_create(&f, NULL, forker_main, NULL);
	for (int i = 0; i < 4; i++)
		pthread_create(&w[i].t, NULL, worker_main, &w[i]);
	for (int i = 0; i < 4; i++)
		pthread_join(w[i].t, NULL);
	forking = false;
	void *bad_children;
	pthread_join(f, &bad_children);
	check(!bad_children, "fork while four threads use the table: %ld children failed",
	      (long)(intptr_t)bad_children);
	struct heap *hs[4];
	for (int i = 0; i < 4; i++)
		hs[i] = &w[i].h;
	check_copy(hs, 4, "four threads");
	long wrong = 0;
	for (int i = 0; i < 4; i++) {
		heap_drain(&w[i].h);
		wrong += w[i].h.bad;
		heap_free(&w[i].h);
	}
	check(!wrong && table_count() == 0, "four threads at once: %ld wrong answers", wrong);
}

/* ---------- sampling filter ---------- */
static void test_filter(void)
{
	agent_filter_init();
	check(agent_filter != NULL, "the filter is set up");
	if (!agent_filter)
		return;
	static struct heap h;
	heap_init(&h, 0x555555560000ul, 4u << 20, 1u << 20);
	long said_absent = 0;
	for (long i = 0; i < 1500000; i++) {
		if (h.nlive > 50000 && (rnd() & 1))
			heap_release(&h, rnd() % h.nlive);
		else
			heap_alloc(&h, (int)(rnd() % 9), 5);
	}
	for (size_t i = 0; i < h.nlive; i++)
		said_absent += !agent_live_may_contain(h.base + 16 * h.live[i]);
	check_heap(&h, "with the filter");
	check(!said_absent, "the filter never says a tracked block is absent (%ld did)", said_absent);
	heap_drain(&h);
	long probes = 0, absent = 0;
	for (size_t k = 0; k < h.nidx; k += 4099, probes++)
		absent += !agent_live_may_contain(h.base + 16 * k);
	check(absent == probes, "once emptied, the filter says absent everywhere (%ld of %ld)",
	      absent, probes);
	heap_free(&h);
}

/* ---------- the stack table ---------- */

#define NSTACKS 150000
#define STACK_DEPTH_MAX 40

/* Stack j: depth 1..40; stacks of the same j / 40 are prefixes of each
 * other; every fifth has the last pc moved by 8 bytes (a stack that
 * differs from another in its last pc only, one group over); the
 * allocator and pool cycle. */
static int make_stack(uint32_t j, uintptr_t *pcs, int *fn, uint32_t *pool)
{
	int depth = 1 + (int)(j % STACK_DEPTH_MAX);
	uint32_t group = j / STACK_DEPTH_MAX;
	for (int i = 0; i < depth; i++)
		pcs[i] = 0x555555554000u + 16u * (group * 3u + (uint32_t)i);
	if (j % 5 == 0)
		pcs[depth - 1] += 8;
	*fn = (int)(group % 3);
	*pool = group % 7 == 0 ? group % 11 : 0;
	return depth;
}

static uint32_t intern_j(uint32_t j)
{
	uintptr_t pcs[STACK_DEPTH_MAX];
	int fn;
	uint32_t pool;
	int depth = make_stack(j, pcs, &fn, &pool);
	return agent_stack_intern_pool(fn, pool, pcs, depth);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

struct intern_arg {
	uint32_t first, n, step;
	uint32_t *ids;
};

static void *intern_thread(void *p)
{
	struct intern_arg *a = p;
	for (uint32_t k = 0; k < a->n; k++) {
		uint32_t j = a->first + (k * a->step) % a->n;
		a->ids[j - a->first] = intern_j(j);
	}
	return NULL;
}

static void test_stacks(void)
{
	uint32_t before = agent_stack_count();
	uint32_t *ids = malloc(NSTACKS * sizeof *ids), *sorted = malloc(NSTACKS * sizeof *ids);
	long zero = 0, again = 0, wrong = 0;
	for (uint32_t j = 0; j < NSTACKS; j++)
		zero += !(ids[j] = intern_j(j));
	for (uint32_t j = 0; j < NSTACKS; j++)
		again += intern_j(j) != ids[j];
	for (uint32_t j = 0; j < NSTACKS; j++) {
		uintptr_t pcs[STACK_DEPTH_MAX];
		int fn;
		uint32_t pool;
		int depth = make_stack(j, pcs, &fn, &pool);
		const struct agent_stack *s = agent_stack_get(ids[j]);
		wrong += s->depth != depth || s->fn != fn || s->pool != pool ||
			 memcmp(agent_stack_pcs(s), pcs, (size_t)depth * sizeof *pcs) != 0;
	}
	memcpy(sorted, ids, NSTACKS * sizeof *ids);
	qsort(sorted, NSTACKS, sizeof *sorted, cmp_u32);
	long dup = 0;
	for (uint32_t j = 1; j < NSTACKS; j++)
		dup += sorted[j] == sorted[j - 1];
	check(!zero && !again && !wrong && !dup && agent_stack_count() - before == NSTACKS,
	      "stack table: %d stacks, %u new ids, %ld dropped, %ld changed when interned again, "
	      "%ld records not as given, %ld ids shared", NSTACKS, agent_stack_count() - before,
	      zero, again, wrong, dup);

	/* 100,000 stacks of one depth and allocator: only their pcs tell
	 * them apart, so among the slots a probe passes some have the same
	 * ten bits of hash (about one in 1,024) and need the pcs compared */
	enum { NSAME = 100000, DSAME = 8 };
	uint32_t *same = malloc(NSAME * sizeof *same);
	long lost = 0;
	for (uint32_t j = 0; j < NSAME; j++) {
		uintptr_t pcs[DSAME];
		for (int i = 0; i < DSAME; i++)
			pcs[i] = 0x7f0000001000u + 16u * (j * DSAME + (uint32_t)i);
		same[j] = agent_stack_intern(0, pcs, DSAME);
	}
	for (uint32_t j = 0; j < NSAME; j++) {
		const struct agent_stack *s = agent_stack_get(same[j]);
		lost += !same[j] || s->depth != DSAME ||
			agent_stack_pcs(s)[DSAME - 1] != 0x7f0000001000u + 16u * (j * DSAME + DSAME - 1);
	}
	check(!lost && agent_stack_count() - before == NSTACKS + NSAME,
	      "stack table: %d stacks of the same depth and allocator: %u new ids, %ld not as given",
	      NSAME, agent_stack_count() - before - NSTACKS, lost);
	before += NSAME;
	free(same);

	/* four threads, the same 40,000 new stacks in four orders (steps
	 * prime to N) */
	enum { NT = 4, N = 40000 };
	static const uint32_t step[NT] = { 1, 3, 977, 7919 };
	pthread_t t[NT];
	struct intern_arg a[NT];
	for (int i = 0; i < NT; i++) {
		a[i] = (struct intern_arg){ NSTACKS, N, step[i], malloc(N * sizeof(uint32_t)) };
		pthread_create(&t[i], NULL, intern_thread, &a[i]);
	}
	for (int i = 0; i < NT; i++)
		pthread_join(t[i], NULL);
	long differ = 0;
	for (int i = 1; i < NT; i++)
		for (uint32_t k = 0; k < N; k++)
			differ += a[i].ids[k] != a[0].ids[k] || !a[i].ids[k];
	check(!differ && agent_stack_count() - before == NSTACKS + N,
	      "stack table: four threads interning the same %d new stacks: %ld ids differ, "
	      "%u new in all", N, differ, agent_stack_count() - before - NSTACKS);
	for (int i = 0; i < NT; i++)
		free(a[i].ids);
	free(ids);
	free(sorted);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_heap_like();
	test_real_malloc();
	test_replace();
	test_meta();
	test_long_runs();
	test_table_mapping();
	test_filter();
	test_threads();
	test_stacks();
	return failures ? 1 : 0;
}
