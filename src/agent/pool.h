/*
 * pool.h — memory pools: blocks the program hands out from memory of its
 * own (arenas, memory contexts), told to the agent through the API
 * (heaptrail_pool_*, and valgrind's MEMPOOL requests mapped onto it).
 * Layer 1.
 *
 * A pool is known by its anchor (any address the program chooses, as in
 * valgrind's VALGRIND_CREATE_MEMPOOL) and gets an id (>= 2) that is never
 * reused, so stacks and reports can name a pool that is gone. Id 1 is the
 * pool of "malloc-like" blocks (VALGRIND_MALLOCLIKE_BLOCK), which has no
 * anchor, no name and no parent. A pool may have a parent: resetting a
 * pool resets its descendants, destroying it destroys them.
 *
 * A chunk is (address, size, stack id); the stack id was interned with
 * the pool's id (agent_stack_intern_pool), so per-stack counts are per
 * pool. Chunks live in a hash table per pool, apart from the live table:
 * a chunk often starts where the malloc'd block it was carved from
 * starts.
 *
 * Locking: one lock for every pool (agent_pool_lock, table.h), taken by
 * agent_tables_lock_all before the others; while holding it the pool code
 * takes no other lock and calls nothing but mmap/munmap, so the caller
 * interns the stack before. None of this is hook-safe or signal-safe
 * except the *_locked readers, which run with every table lock held.
 */
#ifndef HEAPTRAIL_AGENT_POOL_H
#define HEAPTRAIL_AGENT_POOL_H

#include "agent/agent.h"
#include "agent/table.h"

#define AGENT_POOL_MALLOCLIKE 1u
#define AGENT_POOL_NAME_MAX 64

/* Creates the pool anchored at anchor under the pool anchored at parent
 * (0: none), named name (NULL: none; truncated to AGENT_POOL_NAME_MAX-1
 * bytes). Returns its id, or -EEXIST (anchor in use), -ENOENT (no such
 * parent), -EINVAL (anchor 0), -ENOMEM. */
long agent_pool_create(uintptr_t anchor, uintptr_t parent, const char *name);
/* The id of the live pool anchored at anchor, or 0. */
uint32_t agent_pool_find(uintptr_t anchor);
/* Renames pool anchor. 0 or -ENOENT. */
int agent_pool_rename(uintptr_t anchor, const char *name);
/* Enters chunk [addr, addr+size) of pool id with its stack; a chunk
 * already at addr is replaced. 0, -ENOENT (the pool is gone), -ENOMEM. */
int agent_pool_chunk_add(uint32_t id, uintptr_t addr, size_t size, uint32_t stack);
/* Removes the chunk at addr of pool anchor (id AGENT_POOL_MALLOCLIKE when
 * anchor is 0): 0 with its size and stack, or -ENOENT. */
int agent_pool_chunk_remove(uintptr_t anchor, uintptr_t addr, size_t *size, uint32_t *stack);
/* Moves/resizes the chunk at old to [addr, addr+size), keeping its stack
 * (valgrind's MEMPOOL_CHANGE). 0 or -ENOENT. */
int agent_pool_chunk_change(uintptr_t anchor, uintptr_t old, uintptr_t addr, size_t size);
/* Frees every chunk of the pool that lies wholly outside [addr,
 * addr+size) and cuts those that straddle its ends to it (valgrind's
 * MEMPOOL_TRIM). 0 or -ENOENT. */
int agent_pool_trim(uintptr_t anchor, uintptr_t addr, size_t size);
/* Frees every chunk of the pool and of its descendants. 0 or -ENOENT. */
int agent_pool_reset(uintptr_t anchor);
/* Reset, then the pool and its descendants are gone. 0 or -ENOENT. */
int agent_pool_destroy(uintptr_t anchor);
/* The pool anchored at old is anchored at new from now on. 0, -ENOENT,
 * -EEXIST. */
int agent_pool_move(uintptr_t old, uintptr_t new_anchor);

/* The pool of the program's anonymous mappings (config mmap=1), named
 * "[mmap]", made on first use: its chunks are in heap dumps and in no leak
 * scan or leak file. Its id, or 0 when there is no room. */
uint32_t agent_pool_mmap(void);
/* [addr, addr+len) is no longer mapped: the chunks of pool id inside it
 * go, those across its ends are cut, one around it is split in two.
 * Returns how many bytes went. */
uint64_t agent_pool_unmap(uint32_t id, uintptr_t addr, size_t len);

/* ---- readers, with every table lock held ---- */
/* Number of pool ids made so far (ids 1..count). */
uint32_t agent_pool_count_locked(void);
struct agent_pool_info {
	uintptr_t anchor;
	uint32_t parent;         /* id, 0 none */
	bool alive;
	uint64_t bytes, blocks;  /* its chunks now */
	const char *name;        /* "" when none */
};
/* Pool id's facts (id 1..count); false when there is no such id. */
bool agent_pool_info_locked(uint32_t id, struct agent_pool_info *out);
/* The number of chunks in every pool but "[mmap]", and a copy of up to
 * cap of them (unordered): what the leak scan classifies. */
size_t agent_pool_chunks_count_locked(void);
size_t agent_pool_chunks_copy_locked(struct agent_block *out, size_t cap);
/* Adds each chunk's size and count to out[stack].bytes/blocks[FMT_KIND_IN_USE]
 * (out has nstacks + 1 entries), as agent_live_per_stack_locked; those of
 * "[mmap]" only when with_mmap (a heap dump, not a leak file). */
void agent_pool_per_stack_locked(struct agent_kinds *out, uint32_t nstacks, bool with_mmap);
/* What a report says of the pools: every pool id >= 2 made so far (up to
 * AGENT_POOL_SNAP_MAX of them), copied under the pool lock into a fresh
 * mapping of *maplen bytes (release with agent_munmap); snap[i] is pool
 * id i + 2. NULL (and *n 0) when there are none or no memory. Not
 * hook-safe (mmap); takes the pool lock, so not with it held. */
#define AGENT_POOL_SNAP_MAX (1u << 20)
struct agent_pool_snap {
	uint32_t parent;         /* id, 0 none */
	bool alive;
	bool used;               /* free for the report's writer */
	bool mmap;               /* the "[mmap]" pool (agent_pool_mmap) */
	uint64_t bytes, blocks;
	char name[AGENT_POOL_NAME_MAX];
};
struct agent_pool_snap *agent_pool_snapshot(uint32_t *n, size_t *maplen);

/* With every table lock held: calls fn for every chunk of every pool,
 * and forgets the chunks keep says no to (the same contract as
 * agent_live_thin_locked, table.h). */
void agent_pool_each_locked(void (*fn)(uintptr_t addr, size_t size, uint32_t stack, void *arg),
			    void *arg);
void agent_pool_thin_locked(bool (*keep)(uintptr_t addr, size_t size, void *arg), void *arg);

/* Forgets every chunk (a forked child that keeps no records). */
void agent_pool_clear_locked(void);

#endif
