/*
 * table.c — the stack table and the live-block table.
 *
 * Stack table: every distinct (allocator, pcs) pair gets a small id and a
 * record with its counters. Records and pcs live in chunks mapped on
 * demand and never move or go away, so a reader holding an id needs no
 * lock. The hash index is probed without a lock; only a miss takes the
 * lock, re-probes and inserts. When the index grows, the old one stays
 * mapped (a racing reader may still be probing it; at worst it misses and
 * takes the lock).
 *
 * Live table: address -> (size, stack id) in 16 bytes, sharded by address
 * hash, each shard an open-addressing table with linear probing and
 * backward-shift deletion (no tombstones), guarded by its own spinlock.
 * A free of an address the agent never saw costs one probe.
 */
#include <sys/mman.h>

#include "agent/agent.h"
#include "agent/banned.h"

/* ---------- stack table ---------- */

#define STACKS_PER_CHUNK AGENT_STACKS_PER_CHUNK
#define STACK_CHUNKS 256                 /* 16M stacks at most */
#define PCS_PER_CHUNK (1u << 20)
#define PC_CHUNKS 1024

struct agent_stack *agent_stack_chunks[STACK_CHUNKS];
static uintptr_t *pc_chunks[PC_CHUNKS];
static uint32_t pc_chunk_cur, pc_chunk_used;
static atomic_uint stack_count;          /* ids 1..stack_count are valid */
static agent_lock_t stack_lock;

struct stack_index {
	uint32_t cap;                    /* power of two */
	_Atomic uint32_t slot[];         /* stack id, 0 = empty */
};
static struct stack_index *_Atomic stack_index;

static uint64_t stack_hash(int fn, const uintptr_t *pcs, int depth)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)fn ^ ((uint64_t)depth << 8);
	for (int i = 0; i < depth; i++) {
		h ^= pcs[i];
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	return h;
}

const uintptr_t *agent_stack_pcs(const struct agent_stack *s)
{
	return pc_chunks[s->pc_chunk] + s->pc_off;
}

uint32_t agent_stack_count(void)
{
	return atomic_load_explicit(&stack_count, memory_order_acquire);
}

static bool stack_equal(const struct agent_stack *s, uint64_t h, int fn,
			const uintptr_t *pcs, int depth)
{
	if (s->hash != h || s->fn != fn || s->depth != depth)
		return false;
	const uintptr_t *q = agent_stack_pcs(s);
	for (int i = 0; i < depth; i++)
		if (q[i] != pcs[i])
			return false;
	return true;
}

static uint32_t index_find(struct stack_index *ix, uint64_t h, int fn,
			   const uintptr_t *pcs, int depth, uint32_t *hole)
{
	uint32_t mask = ix->cap - 1;
	for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
		uint32_t id = atomic_load_explicit(&ix->slot[i], memory_order_acquire);
		if (!id) {
			if (hole)
				*hole = i;
			return 0;
		}
		if (stack_equal(agent_stack_get(id), h, fn, pcs, depth))
			return id;
	}
}

static struct stack_index *index_new(uint32_t cap)
{
	struct stack_index *ix = agent_mmap(sizeof *ix + (size_t)cap * 4);
	if (ix)
		ix->cap = cap;
	return ix;
}

/* Doubles the index; caller holds stack_lock. */
static int index_grow(void)
{
	struct stack_index *old = stack_index;
	struct stack_index *ix = index_new(old->cap * 2);
	if (!ix)
		return -1;
	uint32_t mask = ix->cap - 1;
	for (uint32_t i = 0; i < old->cap; i++) {
		uint32_t id = old->slot[i];
		if (!id)
			continue;
		uint32_t j = (uint32_t)agent_stack_get(id)->hash & mask;
		while (ix->slot[j])
			j = (j + 1) & mask;
		ix->slot[j] = id;
	}
	atomic_store_explicit(&stack_index, ix, memory_order_release);
	return 0;
}

static uintptr_t *pcs_reserve(int depth, uint32_t *chunk, uint32_t *off)
{
	if (!pc_chunks[pc_chunk_cur] || pc_chunk_used + (uint32_t)depth > PCS_PER_CHUNK) {
		uint32_t c = pc_chunks[pc_chunk_cur] ? pc_chunk_cur + 1 : pc_chunk_cur;
		if (c >= PC_CHUNKS)
			return NULL;
		pc_chunks[c] = agent_mmap(PCS_PER_CHUNK * sizeof(uintptr_t));
		if (!pc_chunks[c])
			return NULL;
		pc_chunk_cur = c;
		pc_chunk_used = 0;
	}
	*chunk = pc_chunk_cur;
	*off = pc_chunk_used;
	pc_chunk_used += (uint32_t)depth;
	return pc_chunks[*chunk] + *off;
}

static uint32_t stack_insert_locked(uint64_t h, int fn, const uintptr_t *pcs, int depth)
{
	uint32_t hole;
	uint32_t id = index_find(stack_index, h, fn, pcs, depth, &hole);
	if (id)
		return id;
	uint32_t n = stack_count;
	if (n >= STACK_CHUNKS * STACKS_PER_CHUNK - 1)  /* ids fit in 24 bits */
		return 0;
	if (!agent_stack_chunks[n / STACKS_PER_CHUNK]) {
		agent_stack_chunks[n / STACKS_PER_CHUNK] =
			agent_mmap(STACKS_PER_CHUNK * sizeof(struct agent_stack));
		if (!agent_stack_chunks[n / STACKS_PER_CHUNK])
			return 0;
	}
	uint32_t chunk, off;
	uintptr_t *dst = pcs_reserve(depth, &chunk, &off);
	if (!dst)
		return 0;
	agent_memcpy(dst, pcs, (size_t)depth * sizeof *pcs);
	id = n + 1;
	struct agent_stack *s = agent_stack_get(id);
	s->hash = h;
	s->fn = (uint8_t)fn;
	s->depth = (uint16_t)depth;
	s->pc_chunk = chunk;
	s->pc_off = off;
	atomic_store_explicit(&stack_count, id, memory_order_release);
	atomic_store_explicit(&stack_index->slot[hole], id, memory_order_release);
	/* grow at half full, the same bound agent_stack_intern inserts
	 * under: with '>' here the index stopped at cap / 2 = 2048 stacks
	 * without ever growing, and every new stack after that was dropped */
	if ((uint64_t)id * 2 >= stack_index->cap)
		index_grow();  /* on failure the index just gets fuller */
	return id;
}

uint32_t agent_stack_intern(int fn, const uintptr_t *pcs, int depth)
{
	uint64_t h = stack_hash(fn, pcs, depth);
	struct stack_index *ix = atomic_load_explicit(&stack_index, memory_order_acquire);
	if (likely(ix)) {
		uint32_t id = index_find(ix, h, fn, pcs, depth, NULL);
		if (likely(id))
			return id;
	}
	agent_lock(&stack_lock);
	uint32_t id = 0;
	if (!stack_index)
		stack_index = index_new(1u << 12);
	if (stack_index && stack_index->cap > 2 * stack_count)
		id = stack_insert_locked(h, fn, pcs, depth);
	agent_unlock(&stack_lock);
	return id;
}

/* ---------- live table ---------- */

#define SHARD_BITS 6
#define NSHARDS (1u << SHARD_BITS)
#define SIZE_BITS 40
#define SIZE_MAX_TRACKED ((1ull << SIZE_BITS) - 1)
/* A region of the heap whose blocks share a place in the table. */
#define REGION_SHIFT 8
#define REGION_SLOTS (1u << (REGION_SHIFT - 4))

struct live_entry {
	uintptr_t addr;                 /* 0 = empty */
	uint64_t meta;                  /* size in the low 40 bits, stack id above */
};

struct live_shard {
	agent_lock_t lock;
	uint32_t cap, count;            /* cap is a power of two, or 0 */
	struct live_entry *e;
} __attribute__((aligned(64)));       /* a cache line each */

static struct live_shard shards[NSHARDS];

/* Where an address goes: the shard (top bits) and its home slot (low
 * bits). Blocks are 16-byte aligned and mostly allocated in address order,
 * so a 256-byte region of the heap gets one random place and its blocks
 * follow each other from there (filling the heap in order touches the
 * table a cache line at a time, not a miss per block); a region adds at
 * most 16 slots to a probe run. The region number is mixed by two rounds
 * of multiply and xor-shift, so every bit of it moves every bit of the
 * result: a single multiply (the hash before this one) left the place
 * depending on a few bits of the page number only, and runs of thousands
 * of slots formed as the heap grew (9.7x bare at 10 M live blocks). */
static inline uint64_t addr_hash(uintptr_t a)
{
	uint64_t r = ((uint64_t)a >> REGION_SHIFT) * 0x9e3779b97f4a7c15ull;
	r ^= r >> 32;
	r *= 0xd6e8feb86659fd93ull;
	r ^= r >> 32;
	return (r & ~0ull << (64 - SHARD_BITS)) |
	       (uint32_t)(r + (((uint64_t)a >> 4) & (REGION_SLOTS - 1)));
}

static inline struct live_shard *shard_of(uint64_t h)
{
	return &shards[h >> (64 - SHARD_BITS)];
}

/* How far the entry in slot i sits from its home slot. */
static inline uint32_t displacement(const struct live_entry *e, uint32_t i, uint32_t mask)
{
	return (i - (uint32_t)addr_hash(e[i].addr)) & mask;
}

/* Robin Hood placement: walking from the home slot, an entry takes the
 * place of the first one that sits nearer its own home than it would, and
 * that one moves on. Every run is then sorted by home, so a lookup stops
 * at the first entry that is nearer home than the one looked for, and a
 * removal shifts back only up to the next entry that is at home: the cost
 * of each depends on the load, never on how many blocks are live. */
static void rh_place(struct live_entry *e, uint32_t mask, uint32_t i, uint32_t d,
		     struct live_entry carry)
{
	for (;; i = (i + 1) & mask, d++) {
		if (!e[i].addr) {
			e[i] = carry;
			return;
		}
		uint32_t od = displacement(e, i, mask);
		if (od < d) {
			struct live_entry t = e[i];
			e[i] = carry;
			carry = t;
			d = od;
		}
	}
}

/* Finds addr: returns its slot, or the slot where it would go (empty, or
 * held by an entry nearer its home) with ~0u, *dist its displacement. */
static inline uint32_t rh_find(const struct live_entry *e, uint32_t mask, uint64_t h,
			       uintptr_t addr, uint32_t *at, uint32_t *dist)
{
	uint32_t i = (uint32_t)h & mask;
	for (uint32_t d = 0;; i = (i + 1) & mask, d++) {
		if (e[i].addr == addr)
			return i;
		if (!e[i].addr || displacement(e, i, mask) < d) {
			*at = i;
			*dist = d;
			return ~0u;
		}
	}
}

/* Big tables get transparent huge pages where the system allows them on
 * request: a free of a random block then costs a cache miss, not a cache
 * and a TLB miss, however big the table. */
static void *table_map(size_t len)
{
	void *p = agent_mmap(len);
	if (p && len >= (2u << 20))
		madvise(p, len, MADV_HUGEPAGE);  /* a hint: failure changes nothing */
	return p;
}

static NOINLINE bool shard_grow(struct live_shard *sh)
{
	uint32_t ncap = sh->cap ? sh->cap * 2 : 1024;
	struct live_entry *ne = table_map((size_t)ncap * sizeof *ne);
	if (!ne)
		return false;
	uint32_t mask = ncap - 1;
	for (uint32_t i = 0; i < sh->cap; i++)
		if (sh->e[i].addr) {
			uint32_t home = (uint32_t)addr_hash(sh->e[i].addr) & mask;
			rh_place(ne, mask, home, 0, sh->e[i]);
		}
	agent_munmap(sh->e, (size_t)sh->cap * sizeof *ne);
	sh->e = ne;
	sh->cap = ncap;
	return true;
}

/* ---------- the sampling filter ----------
 * A counting filter over addresses: a slot counts the tracked blocks that
 * hash to it, so a zero means "not tracked" for sure. Saturated slots stay
 * saturated (only a lost fast path, never a wrong answer). */

_Atomic uint16_t *agent_filter;

void agent_filter_init(void)
{
	_Atomic uint16_t *f = agent_mmap(sizeof(uint16_t) << 20);
	if (!f)
		return;
	agent_filter_pin_boot(f);  /* before anyone can see the filter */
	agent_filter = f;
}

static NOINLINE void filter_add_slow(uintptr_t addr, int d)
{
	_Atomic uint16_t *slot = &agent_filter[agent_filter_slot(addr)];
	uint16_t v = atomic_load_explicit(slot, memory_order_relaxed);
	if (likely(__libc_single_threaded)) { /* no one else reads it (see agent_lock) */
		if (v != 0xffff)
			atomic_store_explicit(slot, (uint16_t)(v + d), memory_order_relaxed);
		return;
	}
	while (v != 0xffff && !atomic_compare_exchange_weak(slot, &v, (uint16_t)(v + d)))
		;
}

/* Exact mode has no filter: one load, no call. */
static inline void filter_add(uintptr_t addr, int d)
{
	if (agent_filter)
		filter_add_slow(addr, d);
}

/* Puts addr in its shard (locked, with room); returns whether it is new.
 * An address already present means we missed its free (a block released
 * behind our back); the new block replaces it. */
static inline bool place(struct live_shard *sh, uint64_t h, uintptr_t addr, uint64_t meta)
{
	uint32_t mask = sh->cap - 1;
	uint32_t at = 0, d = 0;
	uint32_t i = rh_find(sh->e, mask, h, addr, &at, &d);
	if (i != ~0u) {
		sh->e[i].meta = meta;
		return false;
	}
	rh_place(sh->e, mask, at, d, (struct live_entry){ addr, meta });
	sh->count++;
	return true;
}

/* An insert's rare cases, out of line so the common one needs no saved
 * registers: a shard to grow, a filter to count in. Unlocks. */
static NOINLINE bool insert_slow(struct live_shard *sh, uint64_t h, uintptr_t addr, uint64_t meta)
{
	bool ok = (sh->count + 1) * 4 <= sh->cap * 3 || shard_grow(sh);
	if (ok && place(sh, h, addr, meta))
		filter_add(addr, +1);
	agent_unlock(&sh->lock);
	return ok;
}

bool agent_live_insert(uintptr_t addr, size_t size, uint32_t stack)
{
	uint64_t h = addr_hash(addr);
	struct live_shard *sh = shard_of(h);
	uint64_t meta = (size > SIZE_MAX_TRACKED ? SIZE_MAX_TRACKED : size) |
			((uint64_t)stack << SIZE_BITS);
	agent_lock(&sh->lock);
	if (unlikely((sh->count + 1) * 4 > sh->cap * 3) || unlikely(agent_filter != NULL))
		return insert_slow(sh, h, addr, meta);
	place(sh, h, addr, meta);
	agent_unlock(&sh->lock);
	return true;
}

static NOINLINE void remove_finish_slow(struct live_shard *sh, uintptr_t addr)
{
	filter_add(addr, -1);
	agent_unlock(&sh->lock);
}

bool agent_live_remove(uintptr_t addr, size_t *size, uint32_t *stack)
{
	uint64_t h = addr_hash(addr);
	struct live_shard *sh = shard_of(h);
	agent_lock(&sh->lock);
	uint32_t at, d, i;
	if (!sh->cap || (i = rh_find(sh->e, sh->cap - 1, h, addr, &at, &d)) == ~0u) {
		agent_unlock(&sh->lock);
		return false;
	}
	uint32_t mask = sh->cap - 1;
	uint64_t meta = sh->e[i].meta;
	/* Backward-shift deletion: the run after it moves back one slot, up
	 * to its end or an entry already at home (no tombstones). */
	for (uint32_t j = (i + 1) & mask; sh->e[j].addr && displacement(sh->e, j, mask);
	     i = j, j = (j + 1) & mask)
		sh->e[i] = sh->e[j];
	sh->e[i].addr = 0;
	sh->count--;
	*size = (size_t)(meta & SIZE_MAX_TRACKED);
	*stack = (uint32_t)(meta >> SIZE_BITS);
	if (unlikely(agent_filter != NULL))
		remove_finish_slow(sh, addr);
	else
		agent_unlock(&sh->lock);
	return true;
}

size_t agent_live_count_locked(void)
{
	size_t n = 0;
	for (unsigned i = 0; i < NSHARDS; i++)
		n += shards[i].count;
	return n;
}

void agent_live_stats_locked(struct agent_live_stats *st)
{
	agent_memset(st, 0, sizeof *st);
	for (unsigned i = 0; i < NSHARDS; i++) {
		const struct live_shard *sh = &shards[i];
		st->slots += sh->cap;
		for (uint32_t j = 0; j < sh->cap; j++)
			if (sh->e[j].addr) {
				uint32_t d = displacement(sh->e, j, sh->cap - 1);
				st->entries++;
				st->displacement_sum += d;
				if (d > st->displacement_max)
					st->displacement_max = d;
			}
	}
}

void agent_live_per_stack_locked(struct agent_kinds *out, uint32_t nstacks)
{
	for (unsigned i = 0; i < NSHARDS; i++)
		for (uint32_t j = 0; j < shards[i].cap; j++)
			if (shards[i].e[j].addr) {
				uint32_t id = (uint32_t)(shards[i].e[j].meta >> SIZE_BITS);
				if (id > nstacks)
					continue;
				out[id].bytes[FMT_KIND_IN_USE] += shards[i].e[j].meta & SIZE_MAX_TRACKED;
				out[id].blocks[FMT_KIND_IN_USE]++;
			}
}

size_t agent_live_copy_locked(struct agent_block *out, size_t cap)
{
	size_t n = 0;
	for (unsigned i = 0; i < NSHARDS; i++)
		for (uint32_t j = 0; j < shards[i].cap && n < cap; j++)
			if (shards[i].e[j].addr) {
				out[n].addr = shards[i].e[j].addr;
				out[n].size = shards[i].e[j].meta & SIZE_MAX_TRACKED;
				out[n].stack = (uint32_t)(shards[i].e[j].meta >> SIZE_BITS);
				n++;
			}
	return n;
}

void agent_live_clear_locked(void)
{
	for (unsigned i = 0; i < NSHARDS; i++) {
		if (shards[i].e)
			agent_memset(shards[i].e, 0, (size_t)shards[i].cap * sizeof *shards[i].e);
		shards[i].count = 0;
	}
}

void agent_tables_lock_all(void)
{
	agent_lock(&stack_lock);
	for (unsigned i = 0; i < NSHARDS; i++)
		agent_lock(&shards[i].lock);
}

void agent_tables_unlock_all(void)
{
	for (unsigned i = 0; i < NSHARDS; i++)
		agent_unlock(&shards[i].lock);
	agent_unlock(&stack_lock);
}
