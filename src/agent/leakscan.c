/*
 * leakscan.c — which live blocks can the program still reach?
 *
 * The same answer valgrind memcheck gives, computed the same way:
 *
 *  1. Roots: every readable and writable mapping of the process except the
 *     malloc heap itself, the agent's own memory and the dead part of each
 *     thread's stack (below its stack pointer); plus every thread's
 *     registers. Other threads are stopped by stopworld.c (ptrace from a
 *     tracer task, or a signal where ptrace is not permitted).
 *  2. Marking: every aligned word is a possible pointer. From a root or a
 *     reachable block, a pointer to the start of a block makes it
 *     reachable, a pointer into its interior makes it possibly lost —
 *     unless one of valgrind's default heuristics (stdstring, length64,
 *     newarray, multipleinheritance) explains the interior pointer, which
 *     then counts as a start pointer. From a possibly lost block, anything
 *     reached is at best possibly lost.
 *  3. Cliques: the blocks nobody reached are visited in address order; each
 *     one still unreached leads a clique, and what it reaches that is
 *     still unreached is indirectly lost. The leaders are definitely lost.
 *
 * Reading never faults: program memory is read in place only where the
 * maps snapshot (taken with the world stopped) shows it readable, else
 * copied with process_vm_readv (see "reading program memory" below).
 *
 * The scan holds every table lock from the copy of the live table to the
 * end of marking, so no block can be freed or added under it; the other
 * threads stay stopped until marking is done. Nothing here allocates
 * through the host's malloc or takes the loader lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <link.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/counters.h"
#include "agent/guard.h"
#include "agent/leakscan.h"
#include "agent/leakwriter.h"
#include "agent/pool.h"
#include "agent/stopworld.h"
#include "agent/table.h"
#include "agent/triggers.h"
#include "agent/procmaps.h"
#include "agent/startup.h"
#include "format/leakfile.h"
#include "agent/banned.h"

enum { ST_UNREACHED, ST_POSSIBLE, ST_REACHABLE, ST_INDIRECT };

#define PAGE 4096ul
#define MAX_THREADS 4096
#define MAX_REGIONS 65536
#define MAX_EXCL (MAX_REGIONS + 32768)

/* ---------- stopping the other threads ---------- */

/* stopworld.c does the stopping (ptrace, or a signal as the fallback);
 * these are the threads it stopped, valid until resume_world. */
static struct {
	struct agent_stopped *slots;
	int nslots;
} stop;

/* Returns the number of threads that could not be stopped. */
static int stop_world(pid_t skip)
{
	int missing = agent_stopworld_stop(skip, &stop.slots, &stop.nslots);
	agent_stopworld_warn();
	return missing;
}

static void resume_world(void)
{
	agent_stopworld_resume();
	stop.nslots = 0;
}

/* ---------- the process's mappings ---------- */

struct region {
	uintptr_t start, end;
	uint8_t r, w, x, file, heap, dev, skip;
	uint8_t gaps;  /* heap of an attached process: a root between tracked blocks */
};

static struct region *regions;
static size_t nregions;

static void add_region(const struct agent_maps_line *m, void *arg)
{
	const char *l = m->name;
	struct region g = { 0 };
	g.start = m->start;
	g.end = m->end;
	g.r = m->perms[0] == 'r';
	g.w = m->perms[1] == 'w';
	g.x = m->perms[2] == 'x';
	g.file = *l == '/';
	g.heap = agent_strstarts(l, "[heap]");
	g.dev = agent_strstarts(l, "/dev/") && !agent_strstarts(l, "/dev/zero") &&
		!agent_strstarts(l, "/dev/shm/");
	if (agent_strstarts(l, "[vvar]") || agent_strstarts(l, "[vsyscall]"))
		g.r = 0;
	if (nregions < MAX_REGIONS)
		regions[nregions++] = g;
}

static bool read_maps(char *buf, size_t cap)
{
	nregions = 0;
	agent_maps_read(buf, cap, add_region, NULL);
	return nregions > 0;
}

static const struct region *region_of(uintptr_t a)
{
	size_t lo = 0, hi = nregions;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (a < regions[mid].start)
			hi = mid;
		else if (a >= regions[mid].end)
			lo = mid + 1;
		else
			return &regions[mid];
	}
	return NULL;
}

/* ---------- sorting (radix, on the address) ---------- */

static void radix_sort(struct agent_block *a, struct agent_block *tmp, size_t n)
{
	size_t count[256];
	for (int shift = 0; shift < 64; shift += 8) {
		agent_memset(count, 0, sizeof count);
		for (size_t i = 0; i < n; i++)
			count[(a[i].addr >> shift) & 0xff]++;
		if (n && count[(a[0].addr >> shift) & 0xff] == n)
			continue;  /* every key has the same digit here */
		size_t sum = 0;
		for (size_t i = 0; i < 256; i++) {
			size_t c = count[i];
			count[i] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			tmp[count[(a[i].addr >> shift) & 0xff]++] = a[i];
		agent_memcpy(a, tmp, n * sizeof *a);
	}
}

/* ---------- marking ---------- */

/* What a block is (scan.pooled) */
#define BLOCK_MALLOC 0
#define BLOCK_CHUNK 1   /* a pool's chunk (pool.c): the program's, no malloc header */
#define BLOCK_SUPER 2   /* a malloc block holding a chunk: out of the scan */

struct scan {
	struct agent_block *b;
	size_t n;
	uint8_t *state;
	uint8_t *direct;         /* block i (and the word before it) readable in place */
	uint8_t *pooled;         /* what block i is: BLOCK_* */
	uint32_t *stack;
	size_t top, cap;
	uintptr_t lo, hi;
	uintptr_t *rbuf;         /* copies of blocks that are not read in place */
	size_t rbufwords;
};

/* ---------- reading program memory without faulting ----------
 *
 * A live block may hold a PROT_NONE page (a coroutine or thread stack with
 * a guard page), and a thread that could not be stopped may munmap or
 * mprotect while we scan. So memory is read in place only where the maps
 * snapshot, taken with every other thread stopped, says it is readable;
 * everything else is copied with process_vm_readv, which fails where a
 * plain read would fault. When some thread runs on (world_unsafe), the
 * snapshot proves nothing and every read is a copy. */

static bool world_unsafe;
static bool pvr_broken;  /* process_vm_readv refused (seccomp, old kernel) */

static bool readable_range(uintptr_t a, uintptr_t len);

/* Copies n words from a to dst; words on pages that cannot be read become
 * 0 (never a pointer). */
static void copy_words(uintptr_t *dst, uintptr_t a, size_t n)
{
	while (n) {
		ssize_t got = -1;
		if (!pvr_broken) {
			got = agent_copy_self(dst, a, n * 8);
			if (got == -ENOSYS || got == -EPERM)
				pvr_broken = true;
		}
		if (pvr_broken && readable_range(a, n * 8)) {
			agent_memcpy(dst, (const void *)a, n * 8);
			return;
		}
		size_t words = got > 0 ? (size_t)got / 8 : 0;
		if (!words) {
			/* the page at a faults: zeros up to the next page */
			words = (((a + PAGE) & ~(PAGE - 1)) - a) / 8;
			if (words > n)
				words = n;
			agent_memset(dst, 0, words * 8);
		}
		dst += words;
		a += words * 8;
		n -= words;
	}
}

/* Copies count ranges (addrs[i], nwords[i] words each) one after the
 * other into dst, in as few system calls as it can: for blocks that
 * cannot be read in place, one call per block would cost more than the
 * whole scan. Unreadable pages become zeros, as in copy_words. */
#define BATCH 256
static void copy_ranges(uintptr_t *dst, const uintptr_t *addrs, const size_t *nwords,
			size_t count)
{
	struct iovec local[BATCH], remote[BATCH];
	size_t i = 0;
	while (i < count) {
		size_t n = 0, want = 0;
		uintptr_t *d = dst;
		for (; n < BATCH && i + n < count; n++) {
			local[n].iov_base = d;
			local[n].iov_len = nwords[i + n] * 8;
			remote[n].iov_base = (void *)addrs[i + n];
			remote[n].iov_len = nwords[i + n] * 8;
			d += nwords[i + n];
			want += nwords[i + n] * 8;
		}
		ssize_t got = pvr_broken ? -1 :
			syscall(SYS_process_vm_readv, getpid(), local, n, remote, n, 0);
		size_t done = got > 0 ? (size_t)got : 0;
		if (done == want) {
			dst = d;
			i += n;
			continue;
		}
		/* whole ranges before the fault, then that one the slow way */
		size_t k = 0;
		while (done >= local[k].iov_len && local[k].iov_len) {
			done -= local[k].iov_len;
			dst += nwords[i + k];
			k++;
		}
		while (k < n && !local[k].iov_len)
			k++;
		if (k < n) {
			copy_words(dst, addrs[i + k], nwords[i + k]);
			dst += nwords[i + k];
			k++;
		}
		i += k;
	}
}

/* The word at a, read in place when that is safe. */
static uintptr_t read_word(uintptr_t a)
{
	if (!world_unsafe && readable_range(a, 8))
		return *(const uintptr_t *)a;
	uintptr_t v;
	copy_words(&v, a, 1);
	return v;
}

/* Word k of block i, or of the word before it for k == -1. */
static inline uintptr_t block_word(const struct scan *s, size_t i, long k)
{
	uintptr_t a = s->b[i].addr + (uintptr_t)(k * 8);
	return s->direct[i] ? *(const uintptr_t *)a : read_word(a);
}

/* The words of block j from word k on: returns a pointer to *n of them
 * (in place, or a copy in s->rbuf valid until the next call). */
static const uintptr_t *block_chunk(struct scan *s, size_t j, size_t k, size_t *n)
{
	const struct agent_block *b = &s->b[j];
	size_t total = b->size / 8;
	if (s->direct[j]) {
		*n = total - k;
		return (const uintptr_t *)b->addr + k;
	}
	*n = total - k < s->rbufwords ? total - k : s->rbufwords;
	copy_words(s->rbuf, b->addr + k * 8, *n);
	return s->rbuf;
}

static long find_block(const struct scan *s, uintptr_t p)
{
	if (p < s->lo || p >= s->hi)
		return -1;
	size_t lo = 0, hi = s->n;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (s->b[mid].addr <= p)
			lo = mid;
		else
			hi = mid;
	}
	const struct agent_block *b = &s->b[lo];
	if (p >= b->addr && (p < b->addr + b->size || (b->size == 0 && p == b->addr)))
		return (long)lo;
	return -1;
}

static void push(struct scan *s, size_t i)
{
	if (s->top < s->cap)
		s->stack[s->top++] = (uint32_t)i;
}

/* Does the maps snapshot say [a, a + len) is readable? Adjacent
 * readable regions count as one. */
static bool readable_range(uintptr_t a, uintptr_t len)
{
	const struct region *g = region_of(a);
	while (g && g->r) {
		if (a + len <= g->end)
			return true;
		if (g + 1 >= regions + nregions || g[1].start != g->end)
			return false;
		g++;
	}
	return false;
}

/* Which blocks can be read in place, header word included: for each run
 * of adjacent readable regions, the blocks wholly inside it. The first is
 * found by binary search; then a walk, as blocks may overlap (glibc's
 * mmap'd chunks and memalign leftovers are not checked here). s->direct
 * starts zeroed (fresh mmap). */
static void mark_direct(struct scan *s)
{
	if (world_unsafe)
		return;
	size_t i = 0;
	for (size_t r = 0; r < nregions && i < s->n; r++) {
		if (!regions[r].r)
			continue;
		uintptr_t lo = regions[r].start + 8, hi = regions[r].end;
		while (r + 1 < nregions && regions[r + 1].r && regions[r + 1].start == hi)
			hi = regions[++r].end;
		size_t a = i, b = s->n;  /* first block at or above lo */
		while (a < b) {
			size_t mid = (a + b) / 2;
			if (s->b[mid].addr < lo)
				a = mid + 1;
			else
				b = mid;
		}
		for (i = a; i < s->n && s->b[i].addr < hi; i++)
			s->direct[i] = s->b[i].addr + s->b[i].size <= hi;
	}
}

/* valgrind's test for a vtable: a table in a file mapping whose first
 * non-null entries (two of them, within twenty words) point at code. */
static bool is_vtable(uintptr_t v)
{
	if ((v & 7) || v < PAGE)
		return false;
	const struct region *g = region_of(v);
	if (!g || !g->file || !g->r)
		return false;
	int fns = 0;
	for (uintptr_t a = v; a < v + 20 * 8; a += 8) {
		if (!readable_range(a, 8))
			return false;
		uintptr_t f = read_word(a);
		if (!f)
			continue;
		const struct region *fg = region_of(f);
		if (!fg || !fg->x)
			return false;
		if (++fns == 2)
			return true;
	}
	return false;
}

/* Does one of valgrind's default heuristics explain an interior pointer? */
static bool heuristic(const struct scan *s, size_t i, uintptr_t p)
{
	const struct agent_block *b = &s->b[i];
	uint64_t size = b->size;
	if (size < 8)
		return false;
	uint64_t w0 = block_word(s, i, 0);
	/* stdstring: old libstdc++ strings, {length, capacity, refcount, chars} */
	if (p == b->addr + 24 && size >= 24) {
		uint64_t w1 = block_word(s, i, 1);
		if (24 + w1 + 1 == size && w0 <= w1)
			return true;
	}
	/* length64: a block starting with the length of the rest */
	if (p == b->addr + 8 && w0 > 0 && size - 8 == w0)
		return true;
	/* newarray: new[] of objects with destructors keeps the count first */
	if (p == b->addr + 8 && w0 > 0 && (size - 8) % w0 == 0)
		return true;
	/* multipleinheritance: a pointer to a second vtable pointer inside */
	if (!(p & 7) && p + 8 <= b->addr + size &&
	    is_vtable(block_word(s, i, (long)(p - b->addr) / 8)) && is_vtable(w0))
		return true;
	return false;
}

/* glibc's malloc keeps pointers to the header of free chunks (bins, the
 * top chunk). A free chunk's header overlaps the last word of the block
 * before it, so such a pointer looks like an interior pointer into a live
 * block; valgrind, with its own allocator, never sees them. */
static bool is_chunk_header_of_next(const struct scan *s, size_t i, uintptr_t p)
{
	const struct agent_block *b = &s->b[i];
	uintptr_t hdr = block_word(s, i, -1);
	uintptr_t chunk = hdr & ~(uintptr_t)7;
	return !(hdr & 2) && chunk >= b->size + 8 && chunk <= b->size + 64 &&
	       p == b->addr - 16 + chunk;
}

static inline void consider(struct scan *s, uintptr_t p, bool definite)
{
	long i = find_block(s, p);
	if (i < 0)
		return;
	uint8_t st = s->state[i];
	if (st == ST_REACHABLE)
		return;
	/* valgrind takes no pointer to an unreadable address (the guard page
	 * at the start of a malloc'd stack, say) */
	if (!s->direct[i] && !readable_range(p, 1))
		return;
	bool start = p == s->b[i].addr || heuristic(s, (size_t)i, p);
	if (!start && s->pooled[i] != BLOCK_CHUNK && is_chunk_header_of_next(s, (size_t)i, p))
		return;
	if (start && definite) {
		s->state[i] = ST_REACHABLE;
		push(s, (size_t)i);
	} else if (st == ST_UNREACHED) {
		s->state[i] = ST_POSSIBLE;
		push(s, (size_t)i);
	}
}

static void scan_words(struct scan *s, const uintptr_t *w, size_t n, bool definite)
{
	for (size_t i = 0; i < n; i++)
		if (w[i] >= s->lo && w[i] < s->hi)
			consider(s, w[i], definite);
}

/* Block j, and the small blocks that cannot be read in place on top of
 * the stack after it, copied together and scanned. A block's state is
 * read when its turn comes, as drain would. */
static void drain_copied(struct scan *s, size_t j)
{
	uintptr_t addrs[BATCH];
	size_t nwords[BATCH], idx[BATCH], n = 0, words = 0;
	for (;;) {
		idx[n] = j;
		addrs[n] = s->b[j].addr;
		nwords[n] = s->b[j].size / 8;
		words += nwords[n++];
		if (n == BATCH || !s->top)
			break;
		j = s->stack[s->top - 1];
		if (s->direct[j] || words + s->b[j].size / 8 > s->rbufwords)
			break;
		s->top--;
	}
	copy_ranges(s->rbuf, addrs, nwords, n);
	const uintptr_t *w = s->rbuf;
	for (size_t i = 0; i < n; i++) {
		scan_words(s, w, nwords[i], s->state[idx[i]] == ST_REACHABLE);
		w += nwords[i];
	}
}

static void drain(struct scan *s)
{
	while (s->top) {
		size_t j = s->stack[--s->top], total = s->b[j].size / 8, n;
		if (AGENT_LIKELY(s->direct[j])) {
			scan_words(s, (const uintptr_t *)s->b[j].addr, total,
				   s->state[j] == ST_REACHABLE);
			continue;
		}
		if (total <= s->rbufwords / 2) {
			drain_copied(s, j);
			continue;
		}
		for (size_t k = 0; k < total; k += n) {
			const uintptr_t *w = block_chunk(s, j, k, &n);
			scan_words(s, w, n, s->state[j] == ST_REACHABLE);
		}
	}
}

/* Cliques: what an unreached block reaches that nobody else did. */
static void cliques(struct scan *s)
{
	for (size_t i = 0; i < s->n; i++) {
		if (s->state[i] != ST_UNREACHED)
			continue;
		push(s, i);
		while (s->top) {
			size_t j = s->stack[--s->top], total = s->b[j].size / 8, n;
			for (size_t k0 = 0; k0 < total; k0 += n) {
				const uintptr_t *w = block_chunk(s, j, k0, &n);
				for (size_t k = 0; k < n; k++) {
					if (w[k] < s->lo || w[k] >= s->hi)
						continue;
					long t = find_block(s, w[k]);
					if (t >= 0 && (size_t)t != i && s->state[t] == ST_UNREACHED) {
						s->state[t] = ST_INDIRECT;
						push(s, (size_t)t);
					}
				}
			}
		}
	}
}

/* ---------- roots ---------- */

struct excl {
	struct agent_block *r;   /* addr = start, size = length; sorted */
	size_t n, cap;
};

static void excl_add(struct excl *x, uintptr_t start, uintptr_t end)
{
	if (end > start && x->n < x->cap) {
		x->r[x->n].addr = start;
		x->r[x->n].size = end - start;
		x->n++;
	}
}

/* Scans [a, b) through copies, so a page that faults (a shared file
 * mapping past its end, say) is skipped instead of crashing us. */
static void scan_range(struct scan *s, uintptr_t a, uintptr_t b, uintptr_t *buf, size_t bufwords)
{
	a = (a + 7) & ~(uintptr_t)7;
	while (a + 8 <= b) {
		size_t want = (b - a) / 8 < bufwords ? (b - a) / 8 : bufwords;
		copy_words(buf, a, want);
		scan_words(s, buf, want, true);
		a += want * 8;
	}
}

static void scan_region_minus(struct scan *s, uintptr_t a, uintptr_t b, const struct excl *x,
			      uintptr_t *buf, size_t bufwords)
{
	/* exclusions are sorted by start; walk the ones that overlap */
	size_t lo = 0, hi = x->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (x->r[mid].addr + x->r[mid].size <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* earlier exclusions may still reach past a: back up over them */
	while (lo > 0 && x->r[lo - 1].addr + x->r[lo - 1].size > a)
		lo--;
	uintptr_t cur = a;
	for (size_t i = lo; i < x->n && x->r[i].addr < b && cur < b; i++) {
		uintptr_t es = x->r[i].addr, ee = x->r[i].addr + x->r[i].size;
		if (ee <= cur)
			continue;
		if (es > cur)
			scan_range(s, cur, es < b ? es : b, buf, bufwords);
		if (ee > cur)
			cur = ee;
	}
	if (cur < b)
		scan_range(s, cur, b, buf, bufwords);
}

/* Scans region g minus x and minus every tracked block (s->b is sorted
 * by address): what lies between the blocks the agent knows. */
static void scan_gaps(struct scan *s, const struct region *g, const struct excl *x,
		      uintptr_t *buf, size_t bufwords)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (s->b[mid].addr < g->start)
			lo = mid + 1;
		else
			hi = mid;
	}
	uintptr_t cur = g->start;
	for (size_t i = lo; i < s->n && s->b[i].addr < g->end; i++) {
		if (s->b[i].addr > cur)
			scan_region_minus(s, cur, s->b[i].addr, x, buf, bufwords);
		uintptr_t e = s->b[i].addr + s->b[i].size;
		if (e > cur)
			cur = e;
	}
	if (cur < g->end)
		scan_region_minus(s, cur, g->end, x, buf, bufwords);
}

/* Is block i, whose header word is hdr, a chunk with a mapping of its
 * own? Then its pages are no root. */
static inline bool own_mapping(const struct scan *s, size_t i, uintptr_t hdr, struct excl *x)
{
	if (!(hdr & 2))
		return false;
	const struct agent_block *b = &s->b[i];
	excl_add(x, (b->addr - 16) & ~(PAGE - 1), (b->addr + b->size + PAGE - 1) & ~(PAGE - 1));
	return true;
}

/* Does region g hold a block that malloc carved from an arena (not a
 * block with a mapping of its own)? Such a region is heap, not a root. */
static bool holds_arena_block(const struct scan *s, const struct region *g, struct excl *x)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (s->b[mid].addr < g->start)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* glibc marks a chunk with its own mapping by bit 1 of the size word
	 * just before the block; those that cannot be read in place are
	 * copied BATCH at a time */
	bool arena = false;
	uintptr_t addrs[BATCH], hdrs[BATCH];
	size_t ones[BATCH], idx[BATCH], n = 0;
	for (size_t i = lo;; i++) {
		bool last = i == s->n || s->b[i].addr >= g->end;
		if (n == BATCH || (n && last)) {
			copy_ranges(hdrs, addrs, ones, n);
			for (size_t k = 0; k < n; k++)
				arena |= !own_mapping(s, idx[k], hdrs[k], x);
			n = 0;
		}
		if (last)
			break;
		if (s->pooled[i] == BLOCK_CHUNK) {
			/* the program's own chunk: no malloc header before it */
		} else if (AGENT_UNLIKELY(s->b[i].addr < g->start + 8)) {
			arena = true;  /* its header is not in this region */
		} else if (AGENT_LIKELY(s->direct[i])) {
			arena |= !own_mapping(s, i, ((const uintptr_t *)s->b[i].addr)[-1], x);
		} else {
			addrs[n] = s->b[i].addr - 8;
			ones[n] = 1;
			idx[n++] = i;
		}
	}
	return arena;
}

static uintptr_t own_rw_lo[8], own_rw_hi[8];
static int own_rw_n;

static int find_own(struct dl_phdr_info *info, size_t size, void *arg)
{
	bool mine = false;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && agent_self_lo >= a && agent_self_lo < a + ph->p_memsz)
			mine = true;
	}
	if (!mine)
		return 0;
	for (int i = 0; i < info->dlpi_phnum && own_rw_n < 8; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_W)) {
			uintptr_t a = info->dlpi_addr + ph->p_vaddr;
			own_rw_lo[own_rw_n] = a & ~(PAGE - 1);
			own_rw_hi[own_rw_n++] = (a + ph->p_memsz + PAGE - 1) & ~(PAGE - 1);
		}
	}
	return 1;
}

/* glibc's signal return trampoline (__restore_rt, not exported): the
 * return address of every handler glibc's sigaction installed, so the
 * word that marks a signal frame on a stack. */
static uintptr_t restorer;

#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000  /* the kernel's, x86-64; glibc keeps it internal */
#endif

static void find_restorer(void)
{
	for (int sig = 1; sig < 65 && !restorer; sig++) {
		struct sigaction sa;
		if (sigaction(sig, NULL, &sa) == 0 && (sa.sa_flags & SA_RESTORER))
			restorer = (uintptr_t)sa.sa_restorer;
	}
}

/* The stack pointer of the code the outermost signal frame on the
 * sigaltstack [from, hi) interrupted, or 0. A handler's frame starts with
 * the restorer as its return address, the kernel's ucontext right above
 * it (the same layout as glibc's ucontext_t up to the registers). */
static uintptr_t interrupted_sp(uintptr_t from, uintptr_t hi)
{
	if (!restorer)
		find_restorer();
	uintptr_t sp = 0;
	for (uintptr_t a = (from + 7) & ~(uintptr_t)7; restorer && a + 8 + sizeof(ucontext_t) <= hi;
	     a += 8) {
		if (*(const uintptr_t *)a != restorer)
			continue;
		const ucontext_t *uc = (const ucontext_t *)(a + 8);
		uintptr_t isp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
		if (isp < from || isp >= hi)
			sp = isp;  /* a frame whose interrupted code was elsewhere */
	}
	return sp;
}

void agent_leakscan_init(int sig)
{
	agent_stopworld_init(sig);
	dl_iterate_phdr(find_own, NULL);
	find_restorer();
}

/* ---------- pools ---------- */

static inline bool is_pool_chunk(const struct agent_block *b)
{
	return b->stack && b->stack <= agent_stack_count() && agent_stack_get((uint32_t)b->stack)->pool;
}

/* With the blocks sorted by address: marks the pools' chunks, and every
 * malloc block that holds one (a pool's superblock), which drop_superblocks
 * takes out of the scan once the regions are classified (their headers
 * still tell which regions are malloc's). */
static bool mark_superblocks(struct scan *s)
{
	size_t n = s->n;
	bool any = false;
	for (size_t i = 0; i < n; i++)
		s->pooled[i] = is_pool_chunk(&s->b[i]) ? BLOCK_CHUNK : BLOCK_MALLOC;
	for (size_t i = 0; i < n; i++) {
		if (s->pooled[i] == BLOCK_CHUNK)
			continue;
		uintptr_t a = s->b[i].addr, e = a + s->b[i].size;
		bool holds = false;
		for (size_t j = i; j-- > 0 && s->b[j].addr == a && !holds;)
			holds = s->pooled[j] == BLOCK_CHUNK;
		for (size_t j = i + 1; j < n && s->b[j].addr < e && !holds; j++)
			holds = s->pooled[j] == BLOCK_CHUNK;
		if (holds)
			s->pooled[i] = BLOCK_SUPER;
		any |= holds;
	}
	return any;
}

/* Drops the superblocks: memcheck leaves them out of its leak check too
 * (find_active_chunks in valgrind's mc_leakcheck.c), so no byte is
 * counted twice, and a pointer into one means nothing. */
static void drop_superblocks(struct scan *s)
{
	size_t out = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (s->pooled[i] == BLOCK_SUPER)
			continue;
		s->b[out] = s->b[i];
		s->direct[out] = s->direct[i];
		s->pooled[out++] = s->pooled[i];
	}
	s->n = out;
}

/* ---------- the whole scan ---------- */

struct agent_kinds *agent_leakscan(uintptr_t stack_from, const uintptr_t *extra, int nextra,
				   uintptr_t alt_lo, uintptr_t alt_hi, uint32_t *nstacks, size_t *maplen, struct agent_scan_info *info)
{
	struct agent_kinds *kinds = NULL;
	struct scan s = { 0 };
	struct excl x = { 0 };
	struct agent_arena ar = { 0 };
	size_t maps_len = 1 << 20, regions_len = MAX_REGIONS * sizeof(struct region);
	size_t buf_len = 64 * 1024, agent_cap = 16384;
	char *mapsbuf;
	uintptr_t *buf, *astart;
	size_t *alen;
	struct agent_block *tmp, *xtmp;

	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	agent_memset(info, 0, sizeof *info);

	agent_tables_lock_all();
	int missing = stop_world(0);
	agent_counters_sum(&info->totals);
	info->threads_stopped = stop.nslots;
	info->threads_unstopped = missing > 0 ? missing : 0;

	/* Everything the scan needs, in one mapping of the agent's own (left
	 * out of the roots like every other), sized now that the number of
	 * blocks is known. */
	s.n = agent_live_count_locked() + agent_pool_chunks_count_locked();
	s.cap = 2 * s.n + 16;
	x.cap = MAX_EXCL;
	size_t blocks_len = (s.n + 1) * sizeof *s.b, state_len = s.n + 1;
	size_t stack_len = s.cap * sizeof *s.stack, excl_len = x.cap * sizeof *x.r;
	size_t astart_len = agent_cap * 2 * sizeof(uintptr_t);
	if (!agent_arena_init(&ar, agent_arena_need(maps_len) + agent_arena_need(buf_len) +
					   agent_arena_need(astart_len) +
					   agent_arena_need(regions_len) +
					   2 * agent_arena_need(blocks_len) +
					   3 * agent_arena_need(state_len) +
					   agent_arena_need(stack_len) + 2 * agent_arena_need(excl_len))) {
		resume_world();
		agent_tables_unlock_all();
		goto out;
	}
	mapsbuf = agent_arena_take(&ar, maps_len);
	buf = agent_arena_take(&ar, buf_len);
	astart = agent_arena_take(&ar, astart_len);
	alen = (size_t *)(astart + agent_cap);
	regions = agent_arena_take(&ar, regions_len);
	s.b = agent_arena_take(&ar, blocks_len);
	tmp = agent_arena_take(&ar, blocks_len);
	s.state = agent_arena_take(&ar, state_len);
	s.direct = agent_arena_take(&ar, state_len);
	s.pooled = agent_arena_take(&ar, state_len);
	s.stack = agent_arena_take(&ar, stack_len);
	x.r = agent_arena_take(&ar, excl_len);
	xtmp = agent_arena_take(&ar, excl_len);
	s.rbuf = buf;
	s.rbufwords = buf_len / 8;
	world_unsafe = missing != 0;
	if (!read_maps(mapsbuf, maps_len)) {
		resume_world();
		agent_tables_unlock_all();
		goto out;
	}
	size_t cap = s.n;
	s.n = agent_live_copy_locked(s.b, cap);
	s.n += agent_pool_chunks_copy_locked(s.b + s.n, cap - s.n);
	radix_sort(s.b, tmp, s.n);
	bool supers = mark_superblocks(&s);
	mark_direct(&s);
	if (s.n) {
		s.lo = s.b[0].addr;
		s.hi = 0;
		for (size_t i = 0; i < s.n; i++) {
			uintptr_t e = s.b[i].addr + (s.b[i].size ? s.b[i].size : 1);
			if (e > s.hi)
				s.hi = e;
		}
	}

	/* What is not a root: the agent's memory, its own data, the dead
	 * part of every stack, and heap chunks with mappings of their own. */
	size_t na = agent_mmap_ranges(astart, alen, agent_cap);
	for (size_t i = 0; i < na; i++)
		excl_add(&x, astart[i], astart[i] + alen[i]);
	for (int i = 0; i < own_rw_n; i++)
		excl_add(&x, own_rw_lo[i], own_rw_hi[i]);
	/* the guarded blocks' pages (guard.c) are heap, their blocks
	 * scanned as blocks */
	if (agent_guard_len)
		excl_add(&x, agent_guard_lo, agent_guard_lo + agent_guard_len);
	bool on_alt = alt_hi > alt_lo && stack_from >= alt_lo && stack_from < alt_hi;
	const struct region *g = region_of(stack_from);
	if (on_alt) {
		/* exit() from a handler on a sigaltstack (which may be a
		 * program's global): its dead part is below stack_from, and the
		 * dead part of the stack the signal interrupted is below the
		 * stack pointer saved in the signal frame */
		excl_add(&x, alt_lo, stack_from);
		uintptr_t isp = interrupted_sp(stack_from, alt_hi);
		const struct region *ig = isp ? region_of(isp) : NULL;
		if (ig && isp - 128 > ig->start)
			excl_add(&x, ig->start, isp - 128);  /* the red zone is live */
	} else if (g) {
		excl_add(&x, g->start, stack_from);
	}
	/* Called on a signal stack (a leak check from a signal handler)
	 * that the program's frames are not on: it holds only our frames. */
	if (alt_hi > alt_lo && !on_alt)
		excl_add(&x, alt_lo, alt_hi);
	for (int i = 0; i < stop.nslots; i++) {
		const struct region *tg = region_of(stop.slots[i].sp);
		if (tg)
			excl_add(&x, tg->start, stop.slots[i].sp);
	}
	/* Attached (attach.c): the heap also holds blocks allocated before
	 * the attach, which the agent never saw and which may point at ones
	 * it did: the heap between tracked blocks is a root. */
	bool unknown_heap = agent_attach_active();
	for (size_t i = 0; i < nregions; i++) {
		struct region *r = &regions[i];
		r->skip = !r->r || !r->w || r->dev;
		r->gaps = false;
		if (!r->skip && (r->heap || holds_arena_block(&s, r, &x))) {
			r->skip = !unknown_heap;
			r->gaps = unknown_heap;
		}
	}
	radix_sort(x.r, xtmp, x.n);
	if (supers)
		drop_superblocks(&s);

	if (s.n) {
		for (size_t i = 0; i < nregions; i++)
			if (regions[i].gaps) {
				scan_gaps(&s, &regions[i], &x, buf, buf_len / 8);
				info->root_bytes += regions[i].end - regions[i].start;
			} else if (!regions[i].skip) {
				scan_region_minus(&s, regions[i].start, regions[i].end, &x, buf,
						  buf_len / 8);
				info->root_bytes += regions[i].end - regions[i].start;
			}
		for (int i = 0; i < stop.nslots; i++)
			scan_words(&s, stop.slots[i].regs, (size_t)stop.slots[i].nregs, true);
		if (extra)
			scan_words(&s, extra, (size_t)nextra, true);
		drain(&s);
		cliques(&s);
	}
	resume_world();
	agent_tables_unlock_all();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	info->scan_ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u +
			(uint64_t)t1.tv_nsec - (uint64_t)t0.tv_nsec;

	/* Totals per stack and kind. */
	*nstacks = agent_stack_count();
	*maplen = ((size_t)*nstacks + 1) * sizeof *kinds;
	kinds = agent_mmap(*maplen);
	if (!kinds)
		goto out;
	static const int kind_of[] = { [ST_UNREACHED] = FMT_KIND_DEFINITELY,
				       [ST_POSSIBLE] = FMT_KIND_POSSIBLY,
				       [ST_REACHABLE] = FMT_KIND_REACHABLE,
				       [ST_INDIRECT] = FMT_KIND_INDIRECTLY };
	for (size_t i = 0; i < s.n; i++) {
		uint32_t id = s.b[i].stack;
		if (id > *nstacks)
			continue;
		int k = kind_of[s.state[i]];
		kinds[id].bytes[k] += s.b[i].size;
		kinds[id].blocks[k]++;
		info->bytes[k] += s.b[i].size;
		info->blocks[k]++;
	}
	info->blocks_scanned = s.n;
out:
	agent_arena_release(&ar);
	regions = NULL;
	return kinds;
}
