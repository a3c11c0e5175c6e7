/*
 * table.c — the stack table and the live-block table.
 *
 * Stack table: every distinct (allocator, pcs) pair gets a small id and a
 * record with its counters. Records and pcs live in chunks mapped on
 * demand and never move or go away, so a reader holding an id needs no
 * lock. The hash index is probed without a lock; only a miss takes the
 * lock, re-probes and inserts. When the index grows, the old one stays
 * mapped (a racing reader may still be probing it; at worst it misses and
 * takes the lock). An index slot is one word: the id, where the stack's
 * pcs are and ten bits of its hash, so a probe goes from the slot
 * straight to the pcs (the record's line is fetched meanwhile): with
 * thousands of stacks each of those is a cache miss, and this way two
 * come one after the other, not three.
 *
 * Live table: address -> (size, stack id) in 16 bytes, sharded by address
 * hash, each shard an open-addressing table with Robin Hood linear probing
 * and backward-shift deletion (no tombstones), guarded by its own
 * spinlock. The cost of an insert or a removal depends on the shards'
 * load, which stays between 7/12 and 7/8 however many blocks are live,
 * never on their number (tests/unit/test_table.c, bench/live-blocks).
 */
#include "agent/agent.h"
#include "agent/startup.h"
#include "agent/table.h"
#include "agent/banned.h"

/* ---------- stack table ---------- */

#define STACKS_PER_CHUNK AGENT_STACKS_PER_CHUNK
#define STACK_CHUNKS 256                 /* 16M stacks at most */
#define PC_CHUNK_BITS 20
#define PCS_PER_CHUNK (1u << PC_CHUNK_BITS)
#define PC_CHUNKS 1024

struct agent_stack *agent_stack_chunks[STACK_CHUNKS];
static uintptr_t *pc_chunks[PC_CHUNKS];
static uint32_t pc_chunk_cur, pc_chunk_used;
static atomic_uint stack_count;          /* ids 1..stack_count are valid */
static agent_lock_t stack_lock;

/* A slot: id (24 bits: ids fit, see stack_insert_locked) | where the
 * pcs start (pc chunk << PC_CHUNK_BITS | offset: 30 bits) << 24 | the
 * top 10 bits of the hash << 54; 0 = empty. One word, so a reader loads
 * it whole. */
#define SLOT_ID_BITS 24
#define SLOT_AT_BITS 30
#define SLOT_TAG_SHIFT (SLOT_ID_BITS + SLOT_AT_BITS)
_Static_assert((uint64_t)PC_CHUNKS << PC_CHUNK_BITS <= 1ull << SLOT_AT_BITS, "pcs' place fits 30 bits");
_Static_assert((uint64_t)STACK_CHUNKS * STACKS_PER_CHUNK <= 1u << SLOT_ID_BITS, "ids fit 24 bits");
struct stack_index {
	uint32_t cap;                    /* power of two */
	_Atomic uint64_t slot[];
};
static struct stack_index *_Atomic stack_index;

static inline uint64_t slot_make(uint32_t id, uint32_t chunk, uint32_t off, uint64_t h)
{
	uint64_t at = (uint64_t)chunk << PC_CHUNK_BITS | off;
	return id | at << SLOT_ID_BITS | (h >> SLOT_TAG_SHIFT) << SLOT_TAG_SHIFT;
}

static inline uint32_t slot_id(uint64_t v)
{
	return (uint32_t)v & ((1u << SLOT_ID_BITS) - 1);
}

/* A stack's key besides its pcs: the allocator fn in the low byte, the
 * pool (pool.c; 0 for the C allocator) above it, an aligned new's
 * alignment (AGENT_FN_ALIGNED) in bits 40 to 47 (the depth goes above,
 * stack_head). */
static inline uint64_t stack_key(int fn, uint32_t pool)
{
	return (uint64_t)(uint8_t)fn | (uint64_t)pool << 8 | (uint64_t)(uint8_t)(fn >> 8) << 40;
}

static inline uint64_t rotl64(uint64_t x, int r)
{
	return x << r | x >> (64 - r);
}

static uint64_t stack_hash(uint64_t key, const uintptr_t *pcs, int depth)
{
	/* A new stack is hashed at every allocation whose walk the memo
	 * could not give: four lanes of a xor and a multiply a pc, each a
	 * bijection of the lane, so two stacks that differ in one pc differ
	 * in its lane; a multiply moves differences only upwards, so the
	 * lanes are folded down and mixed at the end. */
	const uint64_t m0 = 0xff51afd7ed558ccdull, m1 = 0xc4ceb9fe1a85ec53ull;
	uint64_t a = 0x9e3779b97f4a7c15ull ^ key ^ ((uint64_t)depth << 40);
	uint64_t b = 0x632be59bd9b4e019ull, c = 0x85ebca6b27d4eb2full, d = 0x165667b19e3779f9ull;
	int i = 0;
	for (; i + 4 <= depth; i += 4) {
		a = (a ^ pcs[i]) * m0;
		b = (b ^ pcs[i + 1]) * m1;
		c = (c ^ pcs[i + 2]) * m0;
		d = (d ^ pcs[i + 3]) * m1;
	}
	for (; i < depth; i++)
		a = (a ^ pcs[i]) * m1;
	a ^= a >> 29, b ^= b >> 31, c ^= c >> 27, d ^= d >> 33;
	uint64_t h = (a ^ rotl64(b, 17)) * m1 ^ (c ^ rotl64(d, 23)) * m0;
	h ^= h >> 32;
	h *= 0x9e3779b97f4a7c15ull;
	return h ^ h >> 29;
}

const uintptr_t *agent_stack_pcs(const struct agent_stack *s)
{
	return pc_chunks[s->pc_chunk] + s->pc_off;
}

uint32_t agent_stack_count(void)
{
	return atomic_load_explicit(&stack_count, memory_order_acquire);
}

/* The pcs of a stack are kept after a word of its key and depth, which
 * the probe compares first. */
static inline uint64_t stack_head(uint64_t key, int depth)
{
	return key | (uint64_t)depth << 48;
}

/* Whether slot v (not empty) is the stack (h, head, pcs, depth). */
static inline bool slot_is(uint64_t v, uint64_t h, uint64_t head, const uintptr_t *pcs, int depth)
{
	if ((v ^ h) >> SLOT_TAG_SHIFT)
		return false;
	uint32_t at = (uint32_t)(v >> SLOT_ID_BITS) & ((1u << SLOT_AT_BITS) - 1);
	const uintptr_t *p = pc_chunks[at >> PC_CHUNK_BITS] + (at & (PCS_PER_CHUNK - 1));
	/* every line of the pcs at once (the first is read next), and the
	 * record the caller counts in: misses in parallel instead of one
	 * after another */
	for (uintptr_t q = ((uintptr_t)p | 63) + 1; q <= (uintptr_t)(p + depth); q += 64)
		__builtin_prefetch((const void *)q);
	__builtin_prefetch(agent_stack_get(slot_id(v)), 1);
	/* libc's memcmp, vectorised: half the instructions of a loop here */
	return p[0] == head && agent_memcmp(p + 1, pcs, (size_t)depth * sizeof *pcs) == 0;
}

static uint32_t index_find(struct stack_index *ix, uint64_t h, uint64_t head,
			   const uintptr_t *pcs, int depth, uint32_t *hole)
{
	uint32_t mask = ix->cap - 1;
	for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
		uint64_t v = atomic_load_explicit(&ix->slot[i], memory_order_acquire);
		if (!v) {
			if (hole)
				*hole = i;
			return 0;
		}
		if (slot_is(v, h, head, pcs, depth))
			return slot_id(v);
	}
}

static struct stack_index *index_new(uint32_t cap)
{
	struct stack_index *ix = agent_mmap(sizeof *ix + (size_t)cap * sizeof ix->slot[0]);
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
		uint64_t v = old->slot[i];
		if (!v)
			continue;
		uint32_t j = (uint32_t)agent_stack_get(slot_id(v))->hash & mask;
		while (ix->slot[j])
			j = (j + 1) & mask;
		ix->slot[j] = v;
	}
	atomic_store_explicit(&stack_index, ix, memory_order_release);
	return 0;
}

static uintptr_t *pcs_reserve(int words, uint32_t *chunk, uint32_t *off)
{
	if (!pc_chunks[pc_chunk_cur] || pc_chunk_used + (uint32_t)words > PCS_PER_CHUNK) {
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
	pc_chunk_used += (uint32_t)words;
	return pc_chunks[*chunk] + *off;
}

static uint32_t stack_insert_locked(uint64_t h, uint64_t key, const uintptr_t *pcs, int depth)
{
	uint32_t hole;
	uint64_t head = stack_head(key, depth);
	uint32_t id = index_find(stack_index, h, head, pcs, depth, &hole);
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
	uintptr_t *dst = pcs_reserve(depth + 1, &chunk, &off);
	if (!dst)
		return 0;
	dst[0] = head;
	agent_memcpy(dst + 1, pcs, (size_t)depth * sizeof *pcs);
	id = n + 1;
	struct agent_stack *s = agent_stack_get(id);
	s->hash = h;
	s->fn = (uint8_t)key;
	s->pool = (uint32_t)(key >> 8);
	s->align_log = (uint8_t)(key >> 40);
	s->family = (uint8_t)agent_live_family(s->fn | s->align_log << 8);
	s->depth = (uint16_t)depth;
	s->pc_chunk = (uint16_t)chunk;
	s->pc_off = off + 1;
	atomic_store_explicit(&stack_count, id, memory_order_release);
	atomic_store_explicit(&stack_index->slot[hole], slot_make(id, chunk, off, h),
			      memory_order_release);
	/* grow at half full, the same bound agent_stack_intern inserts
	 * under: with '>' here the index stopped at cap / 2 = 2048 stacks
	 * without ever growing, and every new stack after that was dropped */
	if ((uint64_t)id * 2 >= stack_index->cap)
		index_grow();  /* on failure the index just gets fuller */
	return id;
}

uint32_t agent_stack_intern(int fn, const uintptr_t *pcs, int depth)
{
	return agent_stack_intern_pool(fn, 0, pcs, depth);
}

uint32_t agent_stack_intern_pool(int fn, uint32_t pool, const uintptr_t *pcs, int depth)
{
	uint64_t key = stack_key(fn, pool);
	uint64_t h = stack_hash(key, pcs, depth);
	struct stack_index *ix = atomic_load_explicit(&stack_index, memory_order_acquire);
	if (AGENT_LIKELY(ix)) {
		uint32_t id = index_find(ix, h, stack_head(key, depth), pcs, depth, NULL);
		if (AGENT_LIKELY(id))
			return id;
	}
	agent_lock(&stack_lock);
	uint32_t id = 0;
	if (!stack_index)
		stack_index = index_new(1u << 12);
	if (stack_index && stack_index->cap > 2 * stack_count)
		id = stack_insert_locked(h, key, pcs, depth);
	agent_unlock(&stack_lock);
	return id;
}

/* ---------- live table ---------- */

#define SHARD_BITS 6
#define NSHARDS (1u << SHARD_BITS)
/* A key is the address with the entry's displacement from its home slot
 * in the top byte, which no user-space address uses (they end below
 * 2^56, with five-level page tables too): Robin Hood probing reads it
 * instead of hashing every entry it passes. 255 means "255 or more,
 * hash to know". */
#define DISP_SHIFT AGENT_LIVE_DISP_SHIFT  /* 56: table.h's agent_live_take reads keys too */
#define DISP_ONE (1ull << DISP_SHIFT)
#define DISP_SAT 255u
#define ADDR_MASK AGENT_LIVE_ADDR_MASK
/* A shard grows by half when 7/8 full (see shard_grow). */
#define LOAD_NUM 7
#define LOAD_DEN 8
#define FIRST_CAP 1024u

#define live_entry agent_live_entry
#define live_shard agent_live_shard
#define shards agent_live_shards
_Static_assert(NSHARDS == AGENT_LIVE_SHARDS, "table.h's shard count");

struct live_shard shards[NSHARDS];

/* Where an address goes: agent_live_hash (table.h). */
static inline uint64_t addr_hash(uintptr_t a)
{
	return agent_live_hash(a);
}

static inline struct live_shard *shard_of(uint64_t h)
{
	return &shards[h >> (64 - SHARD_BITS)];
}

static inline uint32_t live_home(uint64_t h, uint32_t cap)
{
	return agent_live_home(h, cap);
}

static inline uint32_t next_slot(uint32_t i, uint32_t cap)
{
	return ++i == cap ? 0 : i;
}

static AGENT_NOINLINE uint32_t disp_exact(const struct live_entry *e, uint32_t i, uint32_t cap)
{
	uintptr_t a = (uintptr_t)(e[i].key & ADDR_MASK);
	uint32_t home = live_home(addr_hash(a), cap);
	return i >= home ? i - home : i + cap - home;
}

/* How far the entry in slot i sits from its home slot. */
static inline uint32_t displacement(const struct live_entry *e, uint32_t i, uint32_t cap)
{
	uint32_t d = (uint32_t)(e[i].key >> DISP_SHIFT);
	return AGENT_LIKELY(d < DISP_SAT) ? d : disp_exact(e, i, cap);
}

static inline uint64_t make_key(uintptr_t a, uint32_t d)
{
	return (uint64_t)a | (uint64_t)(d < DISP_SAT ? d : DISP_SAT) << DISP_SHIFT;
}

/* Robin Hood placement: walking from the home slot, an entry takes the
 * place of the first one that sits nearer its own home than it would, and
 * that one moves on. Every run is then sorted by home, so a lookup stops
 * at the first entry that is nearer home than the one looked for, and a
 * removal shifts back only up to the next entry that is at home. */
static void rh_place(struct live_entry *e, uint32_t cap, uint32_t i, uint32_t d,
		     uintptr_t addr, uint64_t meta)
{
	for (;; i = next_slot(i, cap), d++) {
		if (!e[i].key) {
			e[i].key = make_key(addr, d);
			e[i].meta = meta;
			return;
		}
		uint32_t od = displacement(e, i, cap);
		if (od < d) {
			uintptr_t oa = (uintptr_t)(e[i].key & ADDR_MASK);
			uint64_t om = e[i].meta;
			e[i].key = make_key(addr, d);
			e[i].meta = meta;
			addr = oa;
			meta = om;
			d = od;
		}
	}
}

#define NOT_FOUND (~0u)

/* Finds addr: returns its slot, or NOT_FOUND with *at the slot where it
 * would go (empty, or held by an entry nearer its home) and *dist its
 * displacement there. */
static inline uint32_t rh_find(const struct live_entry *e, uint32_t cap, uint64_t h,
			       uintptr_t addr, uint32_t *at, uint32_t *dist)
{
	uint32_t i = live_home(h, cap);
	for (uint32_t d = 0;; i = next_slot(i, cap), d++) {
		uint64_t k = e[i].key;
		if ((k & ADDR_MASK) == addr)
			return i;
		if (!k || displacement(e, i, cap) < d) {
			*at = i;
			*dist = d;
			return NOT_FOUND;
		}
	}
}

/* Big tables get transparent huge pages where the system allows them on
 * request (agent_mmap_table): a free of a random block then costs a cache
 * miss, not a cache and a TLB miss, however big the table. */
static void *table_map(size_t len)
{
	return agent_mmap_table(len);
}

/* Grows a shard by half (one rehash, the shard locked). Each shard starts
 * at its own size between FIRST_CAP and 1.5 FIRST_CAP, so the shards fill
 * up and grow at different times: however many blocks are live, the
 * shards' loads are spread between 7/12 and 7/8, and so are the cost of a
 * probe and the memory per block (16 bytes per slot: 23-24 bytes per
 * block, bench/metadata), instead of all of them swinging together with the
 * number of live blocks, as doubling every shard at once made them. */
static AGENT_NOINLINE bool shard_grow(struct live_shard *sh)
{
	uint32_t ncap = sh->cap ? sh->cap + sh->cap / 2
				: FIRST_CAP + (uint32_t)(sh - shards) * (FIRST_CAP / 2 / NSHARDS);
	if (ncap > (1u << 31))
		return false;
	struct live_entry *ne = table_map((size_t)ncap * sizeof *ne);
	if (!ne)
		return false;
	for (uint32_t i = 0; i < sh->cap; i++)
		if (sh->e[i].key) {
			uintptr_t a = (uintptr_t)(sh->e[i].key & ADDR_MASK);
			rh_place(ne, ncap, live_home(addr_hash(a), ncap), 0, a, sh->e[i].meta);
		}
	agent_munmap(sh->e, (size_t)sh->cap * sizeof *ne);
	/* agent_live_prefetch reads these without the lock */
	__atomic_store_n(&sh->e, ne, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->cap, ncap, __ATOMIC_RELAXED);
	sh->limit = (uint32_t)((uint64_t)ncap * LOAD_NUM / LOAD_DEN);
	return true;
}

/* ---------- the sampling filter ----------
 * A counting filter over addresses: a slot counts the tracked blocks that
 * hash to it, so a zero means "not tracked" for sure. Saturated slots stay
 * saturated (only a lost fast path, never a wrong answer). */

_Atomic uint16_t *agent_filter;
static uintptr_t pinned_lo, pinned_len;

static void pin(_Atomic uint16_t *f, uintptr_t lo, size_t len)
{
	for (uintptr_t a = lo & ~(uintptr_t)4095; a < lo + len; a += 4096)
		atomic_store(&f[agent_filter_slot(a)], 0xffff);
}

void agent_filter_pin(uintptr_t lo, size_t len)
{
	pinned_lo = lo;
	pinned_len = len;
	if (agent_filter)
		pin(agent_filter, lo, len);
}

void agent_filter_init(void)
{
	_Atomic uint16_t *f = agent_mmap(sizeof(uint16_t) << 20);
	if (!f)
		return;
	/* Pins the slots of the bootstrap buffer at "maybe", so a free of a
	 * bootstrap block always reaches the slow path (hooks.c); before
	 * anyone can see the filter. */
	pin(f, (uintptr_t)agent_boot_buf, AGENT_BOOT_SIZE);
	if (pinned_len)
		pin(f, pinned_lo, pinned_len);
	agent_filter = f;
}

/* The slot's value after adding d (table blocks: +-1, kept blocks:
 * +-AGENT_FILTER_KEPT, table.h): saturated for good once the table's
 * part would reach 0xfff, which would carry into the kept part. */
static inline uint16_t filter_next(uint16_t v, int d)
{
	if (v == 0xffff || (d == 1 && (v & (AGENT_FILTER_KEPT - 1)) >= AGENT_FILTER_KEPT - 2))
		return 0xffff;
	return (uint16_t)(v + d);
}

static AGENT_NOINLINE void filter_add_slow(uintptr_t addr, int d)
{
	_Atomic uint16_t *slot = &agent_filter[agent_filter_slot(addr)];
	uint16_t v = atomic_load_explicit(slot, memory_order_relaxed);
	if (AGENT_LIKELY(__libc_single_threaded)) { /* no one else reads it (see agent_lock) */
		atomic_store_explicit(slot, filter_next(v, d), memory_order_relaxed);
		return;
	}
	while (v != 0xffff && !atomic_compare_exchange_weak(slot, &v, filter_next(v, d)))
		;
}

/* Exact mode has no filter: one load, no call. */
static inline void filter_add(uintptr_t addr, int d)
{
	if (agent_filter)
		filter_add_slow(addr, d);
}

void agent_filter_count(uintptr_t addr, int d)
{
	filter_add(addr, d);
}

/* Puts addr in its shard (locked, with room); returns whether it is new.
 * An address already present means we missed its free (a block released
 * behind our back); the new block replaces it. */
static inline bool place(struct live_shard *sh, uint64_t h, uintptr_t addr, uint64_t meta)
{
	uint32_t at = 0, d = 0;
	uint32_t i = rh_find(sh->e, sh->cap, h, addr, &at, &d);
	if (i != NOT_FOUND) {
		sh->e[i].meta = meta;
		return false;
	}
	rh_place(sh->e, sh->cap, at, d, addr, meta);
	sh->count++;
	return true;
}

/* An insert whose home slot is taken: out of line, so that the common
 * case saves no registers. */
static AGENT_NOINLINE void place_collided(struct live_shard *sh, uint64_t h, uintptr_t addr,
				    uint64_t meta)
{
	place(sh, h, addr, meta);
}

/* An insert's rare cases, out of line so the common one needs no saved
 * registers: a shard to grow, a filter to count in. Unlocks. */
static AGENT_NOINLINE bool insert_slow(struct live_shard *sh, uint64_t h, uintptr_t addr, uint64_t meta)
{
	bool ok = sh->count < sh->limit || shard_grow(sh);
	if (ok && place(sh, h, addr, meta))
		filter_add(addr, +1);
	agent_unlock(&sh->lock);
	return ok;
}

bool agent_live_insert(uintptr_t addr, size_t size, uint32_t stack, unsigned family)
{
	uint64_t h = addr_hash(addr);
	struct live_shard *sh = shard_of(h);
	uint64_t meta = agent_live_meta(size, family, stack);
	agent_lock(&sh->lock);
	if (AGENT_UNLIKELY(sh->count >= sh->limit) || AGENT_UNLIKELY(agent_filter != NULL))
		return insert_slow(sh, h, addr, meta);
	/* An empty home slot: no run starts there, so addr is nowhere else. */
	struct live_entry *e = &sh->e[live_home(h, sh->cap)];
	if (AGENT_LIKELY(!e->key)) {
		e->key = addr;
		e->meta = meta;
		sh->count++;
	} else {
		place_collided(sh, h, addr, meta);
	}
	agent_unlock(&sh->lock);
	return true;
}

static AGENT_NOINLINE void remove_finish_slow(struct live_shard *sh, uintptr_t addr)
{
	filter_add(addr, -1);
	agent_unlock(&sh->lock);
}

/* Removes the entry in slot i: the run after it moves back one slot, up
 * to its end or an entry already at home (backward-shift deletion, no
 * tombstones). */
static void live_erase(struct live_shard *sh, uint32_t i)
{
	struct live_entry *e = sh->e;
	uint32_t cap = sh->cap;
	for (uint32_t j = next_slot(i, cap);; i = j, j = next_slot(j, cap)) {
		uint64_t k = e[j].key;
		if (!(k >> DISP_SHIFT))    /* empty, or at home */
			break;
		e[i].key = AGENT_LIKELY((k >> DISP_SHIFT) < DISP_SAT)
				   ? k - DISP_ONE
				   : make_key((uintptr_t)(k & ADDR_MASK), disp_exact(e, j, cap) - 1);
		e[i].meta = e[j].meta;
	}
	e[i].key = 0;
	sh->count--;
}

/* A removal that is not the common case (the block at home, the next
 * slot starting a run of its own or empty): finds addr, and if it is
 * there fills *meta and erases it. Locked. */
static AGENT_NOINLINE bool remove_slow(struct live_shard *sh, uint64_t h, uintptr_t addr,
				 uint64_t *meta)
{
	uint32_t at, d, i;
	if (!sh->cap || (i = rh_find(sh->e, sh->cap, h, addr, &at, &d)) == NOT_FOUND)
		return false;
	*meta = sh->e[i].meta;
	live_erase(sh, i);
	return true;
}

bool agent_live_take_locked(struct live_shard *sh, uint64_t h, uintptr_t addr, uint64_t *out)
{
	uint64_t meta;
	uint32_t cap = sh->cap, i;
	struct live_entry *e;
	if (AGENT_LIKELY(cap) && (e = sh->e, e[i = live_home(h, cap)].key == addr) &&
	    AGENT_LIKELY(!(e[next_slot(i, cap)].key >> DISP_SHIFT))) {
		/* at home, and nothing after it to shift back */
		meta = e[i].meta;
		e[i].key = 0;
		sh->count--;
	} else if (!remove_slow(sh, h, addr, &meta)) {
		agent_unlock(&sh->lock);
		return false;
	}
	*out = meta;
	if (AGENT_UNLIKELY(agent_filter != NULL))
		remove_finish_slow(sh, addr);
	else
		agent_unlock(&sh->lock);
	return true;
}

bool agent_live_containing(uintptr_t p, uintptr_t *base, size_t *size, uint32_t *stack)
{
	for (unsigned s = 0; s < NSHARDS; s++) {
		struct live_shard *sh = &shards[s];
		bool found = false;
		agent_lock(&sh->lock);
		for (uint32_t i = 0; i < sh->cap && !found; i++) {
			uintptr_t a = (uintptr_t)(sh->e[i].key & ADDR_MASK);
			size_t n = agent_live_meta_size(sh->e[i].meta);
			if (sh->e[i].key && a < p && p - a < n) {
				*base = a;
				*size = n;
				*stack = agent_live_meta_stack(sh->e[i].meta);
				found = true;
			}
		}
		agent_unlock(&sh->lock);
		if (found)
			return true;
	}
	return false;
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
			if (sh->e[j].key) {
				uint32_t d = displacement(sh->e, j, sh->cap);
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
			if (shards[i].e[j].key) {
				uint32_t id = agent_live_meta_stack(shards[i].e[j].meta);
				if (id > nstacks)
					continue;
				out[id].bytes[FMT_KIND_IN_USE] += agent_live_meta_size(shards[i].e[j].meta);
				out[id].blocks[FMT_KIND_IN_USE]++;
			}
}

size_t agent_live_copy_locked(struct agent_block *out, size_t cap)
{
	size_t n = 0;
	for (unsigned i = 0; i < NSHARDS; i++)
		for (uint32_t j = 0; j < shards[i].cap && n < cap; j++)
			if (shards[i].e[j].key) {
				out[n].addr = (uintptr_t)(shards[i].e[j].key & ADDR_MASK);
				out[n].size = agent_live_meta_size(shards[i].e[j].meta);
				out[n].stack = agent_live_meta_stack(shards[i].e[j].meta);
				n++;
			}
	return n;
}

void agent_live_each_locked(void (*fn)(uintptr_t addr, size_t size, uint32_t stack, void *arg),
			    void *arg)
{
	for (unsigned i = 0; i < NSHARDS; i++)
		for (uint32_t j = 0; j < shards[i].cap; j++)
			if (shards[i].e[j].key)
				fn((uintptr_t)(shards[i].e[j].key & ADDR_MASK),
				   agent_live_meta_size(shards[i].e[j].meta),
				   agent_live_meta_stack(shards[i].e[j].meta), arg);
}

/* An erase shifts the run after slot j back into it, so j is looked at
 * again; and the run may wrap from the last slot to the first, moving a
 * block seen at the start back into view at the end: hence keep's
 * contract (the same answer for the same block). */
void agent_live_thin_locked(bool (*keep)(uintptr_t addr, size_t size, void *arg), void *arg)
{
	for (unsigned i = 0; i < NSHARDS; i++) {
		struct live_shard *sh = &shards[i];
		for (uint32_t j = 0; j < sh->cap;) {
			uint64_t k = sh->e[j].key;
			uintptr_t a = (uintptr_t)(k & ADDR_MASK);
			if (!k || keep(a, agent_live_meta_size(sh->e[j].meta), arg)) {
				j++;
				continue;
			}
			live_erase(sh, j);
			filter_add(a, -1);
		}
	}
}

size_t agent_live_count_racy(void)
{
	size_t n = 0;
	for (unsigned i = 0; i < NSHARDS; i++)
		n += *(volatile uint32_t *)&shards[i].count;
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

/* pool.c's lock, taken first: a thread holding it takes no other. */
agent_lock_t agent_pool_lock;

void agent_tables_lock_all(void)
{
	/* set first: a handler that frees while only some locks are held
	 * must not take one of them (hooks.c, nested_free) */
	agent_tls.tables_locked = true;
	atomic_signal_fence(memory_order_seq_cst);
	agent_lock(&agent_pool_lock);
	agent_lock(&stack_lock);
	for (unsigned i = 0; i < NSHARDS; i++)
		agent_lock(&shards[i].lock);
}

bool agent_tables_wait_unlocked(long ms)
{
	if (!agent_lock_seen_free(&agent_pool_lock, ms) || !agent_lock_seen_free(&stack_lock, ms))
		return false;
	for (unsigned i = 0; i < NSHARDS; i++)
		if (!agent_lock_seen_free(&shards[i].lock, ms))
			return false;
	return true;
}

/* What the hooks do once a thread holds no table lock (their deferred
 * calls): set before any thread can have deferred one. */
static void (*on_unlock)(void);

void agent_tables_on_unlock(void (*fn)(void))
{
	on_unlock = fn;
}

void agent_tables_unlock_all(void)
{
	for (unsigned i = 0; i < NSHARDS; i++)
		agent_unlock(&shards[i].lock);
	agent_unlock(&stack_lock);
	agent_unlock(&agent_pool_lock);
	atomic_signal_fence(memory_order_seq_cst);
	agent_tls.tables_locked = false;
	if (AGENT_UNLIKELY(agent_tls.deferred) && on_unlock)
		on_unlock();
}

void agent_reset_cumulative(void)
{
	uint32_t n = agent_stack_count();
	for (uint32_t id = 1; id <= n; id++) {
		struct agent_stack *s = agent_stack_get(id);
		atomic_store(&s->total_bytes, 0);
		atomic_store(&s->total_blocks, 0);
	}
}

