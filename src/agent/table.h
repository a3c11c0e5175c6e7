/*
 * table.h — the stack table (stacks interned once, with what they
 * allocated) and the live table (address -> size and stack, for every
 * tracked block), with the sampling filter in front of it (table.c).
 * Layer 1.
 */
#ifndef HEAPTRAIL_AGENT_TABLE_H
#define HEAPTRAIL_AGENT_TABLE_H

#include "agent/agent.h"
#include "agent/counters.h"
#include "format/leakfile.h"

/* What is live per stack is not counted here: it is summed from the live
 * table when a report needs it, so a free never touches its stack. */
struct agent_stack {
	uint64_t hash;
	uint32_t pc_off;                /* where its pcs live */
	uint16_t pc_chunk;
	uint8_t family;                 /* its fn's (agent_live_family) */
	uint16_t depth;
	uint8_t fn;                     /* enum fmt_alloc_fn */
	uint8_t align_log;              /* an aligned new's: log2 of its
					   alignment + 1; 0: none */
	uint32_t pool;                  /* pool.c's pool id; 0: the C allocator's */
	_Atomic uint64_t total_bytes, total_blocks;  /* ever allocated */
};

/* The fn of an aligned new (operator new(size_t, align_val_t), al a
 * power of two): its enum fmt_alloc_fn with the alignment's log2 + 1 in
 * the byte above, so that the stacks of new(n, al) are kept apart by al
 * and a block's stack says which alignment its delete must give
 * (heaperrors.h). Every other fn is its enum alone. */
#define AGENT_FN_ALIGNED(fn, al) ((fn) | (__builtin_ctzll(al) + 1) << 8)
/* The alignment of the new of stack s; 0: not an aligned new. */
#define AGENT_STACK_ALIGN(s) ((s)->align_log ? 1ull << ((s)->align_log - 1) : 0)

/* Interns a stack (fn: an enum fmt_alloc_fn, or AGENT_FN_ALIGNED's);
 * returns its id (>= 1), or 0 when the table is full. Hook-safe. */
uint32_t agent_stack_intern(int fn, const uintptr_t *pcs, int depth);
/* The same for a block of pool (pool.c's id): the same pcs in two pools
 * are two stacks, so every per-stack count is also per pool. */
uint32_t agent_stack_intern_pool(int fn, uint32_t pool, const uintptr_t *pcs, int depth);
/* Number of stacks interned so far; ids are 1..count. */
uint32_t agent_stack_count(void);
/* The record of stack id (1..count). Records never move. Hook-safe. */
#define AGENT_STACKS_PER_CHUNK (1u << 16)
extern struct agent_stack *agent_stack_chunks[];
static inline struct agent_stack *agent_stack_get(uint32_t id)
{
	id--;
	return &agent_stack_chunks[id / AGENT_STACKS_PER_CHUNK][id % AGENT_STACKS_PER_CHUNK];
}
const uintptr_t *agent_stack_pcs(const struct agent_stack *s);

/* A live block's word of facts (its "meta"): its size in the low 38
 * bits (a bigger block is recorded as AGENT_LIVE_SIZE_MAX), the family
 * of its allocator in the 2 bits above (enum agent_live_family), its
 * stack's id in the top 24. A free reads the family with the size, so
 * checking the deallocator (heaperrors.h) costs no look at the stack. */
#define AGENT_LIVE_SIZE_MAX ((1ull << 38) - 1)
#define AGENT_LIVE_FAMILY_SHIFT 38
#define AGENT_LIVE_STACK_SHIFT 40
enum agent_live_family {
	AGENT_LIVE_MALLOC,      /* malloc, calloc, realloc, the memalign family */
	AGENT_LIVE_NEW,         /* operator new, unaligned */
	AGENT_LIVE_NEW_ARRAY,   /* operator new[], unaligned */
	AGENT_LIVE_OTHER,       /* the rest (aligned new, pool chunks...): its stack says */
};
/* The family of allocator fn (an enum fmt_alloc_fn, or AGENT_FN_ALIGNED's). */
static inline unsigned agent_live_family(int fn)
{
	/* two bits a fn, FMT_FN_MALLOC first: 0 up to FMT_FN_PVALLOC */
	_Static_assert(FMT_FN_NEW == 9 && FMT_FN_NEW_ARRAY == 10 && FMT_FN_MMAP < 16,
		       "the families' packing");
	const uint32_t packed = (uint32_t)AGENT_LIVE_NEW << 18 | (uint32_t)AGENT_LIVE_NEW_ARRAY << 20 |
				0xffc00000u;
	return (unsigned)fn < 16 ? (packed >> (2 * fn)) & 3 : AGENT_LIVE_OTHER;
}
static inline uint64_t agent_live_meta(size_t size, unsigned family, uint32_t stack)
{
	return (size > AGENT_LIVE_SIZE_MAX ? AGENT_LIVE_SIZE_MAX : size) |
	       (uint64_t)family << AGENT_LIVE_FAMILY_SHIFT | (uint64_t)stack << AGENT_LIVE_STACK_SHIFT;
}
static inline size_t agent_live_meta_size(uint64_t meta)
{
	return (size_t)(meta & AGENT_LIVE_SIZE_MAX);
}
static inline unsigned agent_live_meta_family(uint64_t meta)
{
	return (unsigned)(meta >> AGENT_LIVE_FAMILY_SHIFT) & 3;
}
static inline uint32_t agent_live_meta_stack(uint64_t meta)
{
	return (uint32_t)(meta >> AGENT_LIVE_STACK_SHIFT);
}

/* Records a new live block of stack's family (its agent_stack's).
 * Returns false (and counts it as dropped) when there is no room.
 * Hook-safe. */
bool agent_live_insert(uintptr_t addr, size_t size, uint32_t stack, unsigned family);

/* The live block that holds p past its start: its address, size and
 * stack; false when none does. Takes the shards' locks one at a time and
 * reads every entry: for a free of an address the table does not hold
 * (rare), never for one it does. Hook-safe. */
bool agent_live_containing(uintptr_t p, uintptr_t *base, size_t *size, uint32_t *stack);

/* The live table's shards (table.c): what agent_live_prefetch needs to
 * find the line a block's entry lives in. */
#define AGENT_LIVE_SHARDS 64
struct agent_live_entry {
	uint64_t key;                   /* address | displacement << 56; 0 = empty */
	uint64_t meta;                  /* size, family, stack id (agent_live_meta) */
};
struct agent_live_shard {
	agent_lock_t lock;
	uint32_t cap, count;            /* slots (any number), entries */
	uint32_t limit;                 /* grow before count reaches it */
	struct agent_live_entry *e;
} __attribute__((aligned(64)));       /* a cache line each */
extern struct agent_live_shard agent_live_shards[AGENT_LIVE_SHARDS];

/* Where an address goes: the shard (the top bits of the hash) and, from
 * the bits below them, its home slot (agent_live_home). Blocks are mostly
 * allocated in address order; the hash is Fibonacci hashing of the
 * address over 16 (one multiply by 2^64 / golden ratio), and both the
 * shard and the home are taken from the product's top bits, which depend
 * on every bit of the address and spread consecutive blocks evenly over
 * the table. (The hash before this one multiplied the page number and
 * took bits 26 and up of the product as the place: those depend on the low
 * bits of the page number only, so pages landed in runs and probe runs of
 * thousands of slots formed as the heap grew, allocation 9.7x bare at
 * 10 M live blocks.) */
static inline uint64_t agent_live_hash(uintptr_t a)
{
	return ((uint64_t)a >> 4) * 0x9e3779b97f4a7c15ull;
}
static inline struct agent_live_shard *agent_live_shard_of(uint64_t h)
{
	return &agent_live_shards[h >> 58];
}
/* The home slot: the 32 bits of the hash under the shard's, scaled to
 * cap (which need not be a power of two). */
static inline uint32_t agent_live_home(uint64_t h, uint32_t cap)
{
	return (uint32_t)(((h >> 26) & 0xffffffffull) * cap >> 32);
}

/* Starts fetching the line where addr's entry would be, without a lock (a
 * hint: a shard that grows meanwhile costs only the hint): for an
 * allocation, before its stack is taken, so the cache miss of a table too
 * big for the cache overlaps with that work instead of following it.
 * Hook-safe. */
static inline void agent_live_prefetch(uintptr_t addr)
{
	uint64_t h = agent_live_hash(addr);
	const struct agent_live_shard *sh = agent_live_shard_of(h);
	uint32_t cap = __atomic_load_n(&sh->cap, __ATOMIC_RELAXED);
	const struct agent_live_entry *e = __atomic_load_n(&sh->e, __ATOMIC_RELAXED);
	__builtin_prefetch(&e[agent_live_home(h, cap)], 1);
}

struct agent_kinds {
	uint64_t bytes[FMT_KIND_COUNT], blocks[FMT_KIND_COUNT];
	struct agent_counts totals; /* the counters summed while the world was
				       stopped: the same moment as the kinds */
};

/* A live block as the leak scan sees it. */
struct agent_block {
	uintptr_t addr;
	uint64_t size : 40;
	uint64_t stack : 24;
};
/* With every table lock held: adds each live block's size and count to
 * out[stack].bytes/blocks[FMT_KIND_IN_USE] (out has nstacks + 1 entries). */
void agent_live_per_stack_locked(struct agent_kinds *out, uint32_t nstacks);
/* With every table lock held: the number of live blocks, and a copy of up
 * to cap of them (unordered). */
size_t agent_live_count_locked(void);
size_t agent_live_copy_locked(struct agent_block *out, size_t cap);

/* With every table lock held: how full the live table is and how far its
 * entries sit from their home slots (a lookup's probe count is 1 + the
 * displacement); for tests and benchmarks. */
struct agent_live_stats {
	uint64_t entries, slots, displacement_sum, displacement_max;
};
void agent_live_stats_locked(struct agent_live_stats *st);

/* With every table lock held: calls fn for every live block. */
void agent_live_each_locked(void (*fn)(uintptr_t addr, size_t size, uint32_t stack, void *arg),
			    void *arg);
/* With every table lock held: forgets the live blocks keep says no to
 * (sample.c thins the samples when S rises). keep may be asked more than
 * once about a block and must give the same answer each time. */
void agent_live_thin_locked(bool (*keep)(uintptr_t addr, size_t size, void *arg), void *arg);
/* The number of live blocks, read without the locks: a moment's figure,
 * give or take the blocks going in and out meanwhile. Hook-safe. */
size_t agent_live_count_racy(void);

/* With every table lock held: forgets every live block. */
void agent_live_clear_locked(void);

/* In sampling mode, whether addr may be a tracked block: false is sure and
 * costs one load, without a lock. Always true in exact mode. Hook-safe. */
extern _Atomic uint16_t *agent_filter;
static inline size_t agent_filter_slot(uintptr_t a)
{
	/* A slot per 4 KiB page, not hashed, wrapping every 4 GiB: a heap of
	 * a few MiB needs a few KiB of filter, which stays in L1 however the
	 * program frees. A page holding a sampled block sends its other frees
	 * down the slow path, and sampling keeps such pages rare. */
	return (size_t)((a >> 12) & ((1u << 20) - 1));
}
/* The filter's word for addr (nonzero: it may be tracked); there is a
 * filter. */
static inline uint16_t agent_filter_maybe(uintptr_t addr)
{
	return atomic_load_explicit(&agent_filter[agent_filter_slot(addr)], memory_order_relaxed);
}
static inline bool agent_live_may_contain(uintptr_t addr)
{
	return !agent_filter || agent_filter_maybe(addr);
}
/* Sets up the filter (sampling mode only); from the constructor. */
void agent_filter_init(void);
/* Pins the filter's slots of [lo, lo + len) at "maybe", now and in a
 * filter set up later: a free there always asks the table (guard.c's
 * pages, which must never reach the allocator). One range. */
void agent_filter_pin(uintptr_t lo, size_t len);
/* Counts a block at addr in the filter (d +1) or no more (-1) beside
 * the live table's own: quarantine.c's blocks, whose second free must
 * ask. They count AGENT_FILTER_KEPT each, the table's blocks 1 (a slot's
 * low 12 bits, which a page's blocks cannot fill: a slot whose table
 * part would reach 0xfff stays saturated), so a free on a page that
 * holds only kept blocks (the churn around a kept block) is told apart
 * without a lock: agent_filter_kept_only. A no-op without a filter.
 * Hook-safe. */
#define AGENT_FILTER_KEPT 0x1000
void agent_filter_count(uintptr_t addr, int d);
static inline bool agent_filter_kept_only(uintptr_t addr)
{
	if (!agent_filter)
		return false;
	uint16_t v = agent_filter_maybe(addr);
	return v && !(v & (AGENT_FILTER_KEPT - 1));
}

/* pool.c's lock (one for every pool), part of "every table lock" below:
 * taken before the others, and whoever holds it takes no other. */
extern agent_lock_t agent_pool_lock;

/* Take/release every table lock (fork, leak scan). */
void agent_tables_lock_all(void);
/* agent_lock_seen_free for every table lock. Signal-safe. */
bool agent_tables_wait_unlocked(long ms);
void agent_tables_unlock_all(void);
/* What agent_tables_unlock_all then runs for a thread that has deferred
 * calls (hooks.c's agent_defer_drain, set before the first one: the
 * tables sit below the hooks). */
void agent_tables_on_unlock(void (*fn)(void));

/* Zeroes every stack's allocated-so-far counts (heaptrail_reset). */
void agent_reset_cumulative(void);

/* A key is an address with its entry's displacement from its home slot
 * in the top byte (table.c, "live table"). */
#define AGENT_LIVE_DISP_SHIFT 56
#define AGENT_LIVE_ADDR_MASK ((1ull << AGENT_LIVE_DISP_SHIFT) - 1)
/* agent_live_take past its common case, with sh (addr's shard, of hash
 * h) locked: unlocks it. */
bool agent_live_take_locked(struct agent_live_shard *sh, uint64_t h, uintptr_t addr,
			    uint64_t *meta);
/* Removes a block; returns true and fills its meta word when it was
 * tracked. A block the agent never saw is not an error. Hook-safe.
 * Inline, for the frees of exact mode: the block found in its home slot,
 * with nothing after it to shift back and no sampling filter to count
 * in; table.c does the rest. */
static inline __attribute__((always_inline)) bool agent_live_take(uintptr_t addr, uint64_t *meta)
{
	if (AGENT_UNLIKELY(addr - 1 >= AGENT_LIVE_ADDR_MASK))
		return false;  /* 0 or not a user-space address: never inserted */
	uint64_t h = agent_live_hash(addr);
	struct agent_live_shard *sh = agent_live_shard_of(h);
	agent_lock(&sh->lock);
	uint32_t cap = sh->cap, i, next;
	struct agent_live_entry *e = sh->e;
	if (AGENT_LIKELY(cap) && e[i = agent_live_home(h, cap)].key == addr &&
	    AGENT_LIKELY(!(e[(next = i + 1) == cap ? 0 : next].key >> AGENT_LIVE_DISP_SHIFT)) &&
	    AGENT_LIKELY(agent_filter == NULL)) {
		*meta = e[i].meta;
		e[i].key = 0;
		sh->count--;
		agent_unlock(&sh->lock);
		return true;
	}
	return agent_live_take_locked(sh, h, addr, meta);
}
/* The same, with the size and the stack apart. */
static inline bool agent_live_remove(uintptr_t addr, size_t *size, uint32_t *stack)
{
	uint64_t meta;
	if (!agent_live_take(addr, &meta))
		return false;
	*size = agent_live_meta_size(meta);
	*stack = agent_live_meta_stack(meta);
	return true;
}

#endif
