/*
 * pool.c — the pools and their chunks (see pool.h).
 *
 * Pools: records in chunks of POOLS_PER_CHUNK mapped on demand, never
 * moved or unmapped (a report names pools that are gone). An index maps
 * a live pool's anchor to its id (open addressing, linear probing,
 * backward-shift deletion). The tree is first_child/next_sibling links.
 *
 * Chunks: per pool, an open-addressing table keyed by address, the same
 * probing, grown to twice its size at 3/4 full; a destroyed pool's table
 * is unmapped.
 */
#include <errno.h>

#include "agent/agent.h"
#include "agent/pool.h"
#include "agent/table.h"
#include "format/leakfile.h"
#include "agent/banned.h"

#define POOLS_PER_CHUNK 4096u
#define POOL_CHUNKS 1024u                /* 4M pools at most */
#define FIRST_CAP 64u

struct agent_pool {
	uintptr_t anchor;
	uint32_t parent, first_child, next_sibling;
	bool alive;
	bool mmap;                       /* agent_pool_mmap's: in no leak scan */
	struct agent_block *e;           /* chunk table; addr 0 = empty slot */
	uint32_t cap, n;
	uint64_t bytes;
	char name[AGENT_POOL_NAME_MAX];
};

static struct agent_pool *pool_chunks[POOL_CHUNKS];
static uint32_t npools;                  /* ids 1..npools exist */
static uint32_t *anchor_ix;              /* pool ids; 0 = empty */
static uint32_t anchor_cap, anchor_n;

static inline uint64_t mix(uintptr_t a)
{
	uint64_t h = (uint64_t)a * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

static struct agent_pool *pool_get(uint32_t id)
{
	if (!id || id > npools)
		return NULL;
	id--;
	return &pool_chunks[id / POOLS_PER_CHUNK][id % POOLS_PER_CHUNK];
}

/* A new pool record, zeroed, or 0. */
static uint32_t pool_new(void)
{
	uint32_t n = npools;
	if (n >= POOL_CHUNKS * POOLS_PER_CHUNK)
		return 0;
	if (!pool_chunks[n / POOLS_PER_CHUNK]) {
		pool_chunks[n / POOLS_PER_CHUNK] =
			agent_mmap(POOLS_PER_CHUNK * sizeof(struct agent_pool));
		if (!pool_chunks[n / POOLS_PER_CHUNK])
			return 0;
	}
	npools = n + 1;
	return n + 1;
}

/* ---------- generic linear probing with backward-shift deletion ---------- */

/* Slot of key in a table of cap (power of two) slots, where key_at(i)
 * gives slot i's key (0 empty): the slot holding it, or the empty slot
 * where it would go. */
#define PROBE(cap, key, key_at)                                            \
	({                                                                 \
		uint32_t m_ = (cap) - 1, i_ = (uint32_t)mix(key) & m_;     \
		while (key_at(i_) && key_at(i_) != (key))                  \
			i_ = (i_ + 1) & m_;                                \
		i_;                                                        \
	})

/* ---------- anchor index ---------- */

#define ANCHOR_AT(i) (anchor_ix[i] ? pool_get(anchor_ix[i])->anchor : 0)

static uint32_t anchor_find(uintptr_t anchor)
{
	if (!anchor_ix || !anchor)
		return 0;
	uint32_t i = PROBE(anchor_cap, anchor, ANCHOR_AT);
	return anchor_ix[i];
}

static bool anchor_insert(uint32_t id)
{
	if (!anchor_ix || (anchor_n + 1) * 4 > anchor_cap * 3) {
		uint32_t cap = anchor_cap ? anchor_cap * 2 : 256;
		uint32_t *ix = agent_mmap((size_t)cap * sizeof *ix);
		if (!ix)
			return false;
		uint32_t *old = anchor_ix, oldcap = anchor_cap;
		anchor_ix = ix;
		anchor_cap = cap;
		for (uint32_t i = 0; i < oldcap; i++)
			if (old[i]) {
				uintptr_t a = pool_get(old[i])->anchor;
				anchor_ix[PROBE(anchor_cap, a, ANCHOR_AT)] = old[i];
			}
		if (old)
			agent_munmap(old, (size_t)oldcap * sizeof *old);
	}
	uintptr_t a = pool_get(id)->anchor;
	anchor_ix[PROBE(anchor_cap, a, ANCHOR_AT)] = id;
	anchor_n++;
	return true;
}

static void anchor_remove(uintptr_t anchor)
{
	if (!anchor_ix || !anchor)
		return;
	uint32_t m = anchor_cap - 1, i = PROBE(anchor_cap, anchor, ANCHOR_AT);
	if (!anchor_ix[i])
		return;
	anchor_ix[i] = 0;
	anchor_n--;
	for (uint32_t j = (i + 1) & m; anchor_ix[j]; j = (j + 1) & m) {
		uint32_t k = (uint32_t)mix(pool_get(anchor_ix[j])->anchor) & m;
		/* j's entry may move to the hole at i unless its home lies
		 * cyclically in (i, j] */
		bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
		if (stays)
			continue;
		anchor_ix[i] = anchor_ix[j];
		anchor_ix[j] = 0;
		i = j;
	}
}

/* ---------- chunk tables ---------- */

#define CHUNK_AT(i) (p->e[i].addr)

static uint32_t chunk_slot(const struct agent_pool *p, uintptr_t addr)
{
	return PROBE(p->cap, addr, CHUNK_AT);
}

static bool chunks_grow(struct agent_pool *p)
{
	uint32_t cap = p->cap ? p->cap * 2 : FIRST_CAP;
	struct agent_block *e = agent_mmap((size_t)cap * sizeof *e), *old = p->e;
	if (!e)
		return false;
	uint32_t oldcap = p->cap;
	p->e = e;
	p->cap = cap;
	for (uint32_t i = 0; i < oldcap; i++)
		if (old[i].addr)
			p->e[chunk_slot(p, old[i].addr)] = old[i];
	if (old)
		agent_munmap(old, (size_t)oldcap * sizeof *old);
	return true;
}

static void chunk_erase(struct agent_pool *p, uint32_t i)
{
	uint32_t m = p->cap - 1;
	p->bytes -= p->e[i].size;
	p->n--;
	p->e[i].addr = 0;
	for (uint32_t j = (i + 1) & m; p->e[j].addr; j = (j + 1) & m) {
		uint32_t k = (uint32_t)mix(p->e[j].addr) & m;
		bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
		if (stays)
			continue;
		p->e[i] = p->e[j];
		p->e[j].addr = 0;
		i = j;
	}
}

static int chunk_put(struct agent_pool *p, uintptr_t addr, size_t size, uint32_t stack)
{
	if (!addr)
		return 0;  /* nothing to track at NULL */
	if ((!p->e || (p->n + 1) * 4 > p->cap * 3) && !chunks_grow(p))
		return -ENOMEM;
	uint32_t i = chunk_slot(p, addr);
	if (p->e[i].addr) {
		p->bytes -= p->e[i].size;
		p->n--;
	}
	if (size > (1ull << 40) - 1)
		size = (1ull << 40) - 1;
	p->e[i].addr = addr;
	p->e[i].size = size;
	p->e[i].stack = stack;
	p->bytes += size;
	p->n++;
	return 0;
}

static void chunks_clear(struct agent_pool *p)
{
	if (p->e)
		agent_memset(p->e, 0, (size_t)p->cap * sizeof *p->e);
	p->n = 0;
	p->bytes = 0;
}

/* ---------- the tree ---------- */

/* The next pool after id in a pre-order walk of the subtree of root, or 0. */
static uint32_t walk_next(uint32_t root, uint32_t id)
{
	struct agent_pool *p = pool_get(id);
	if (p->first_child)
		return p->first_child;
	while (id != root) {
		p = pool_get(id);
		if (p->next_sibling)
			return p->next_sibling;
		id = p->parent;
	}
	return 0;
}

static void unlink_child(uint32_t id)
{
	struct agent_pool *p = pool_get(id), *parent = pool_get(p->parent);
	if (!parent)
		return;
	if (parent->first_child == id) {
		parent->first_child = p->next_sibling;
	} else {
		for (uint32_t c = parent->first_child; c; c = pool_get(c)->next_sibling)
			if (pool_get(c)->next_sibling == id) {
				pool_get(c)->next_sibling = p->next_sibling;
				break;
			}
	}
	p->next_sibling = 0;
}

/* The malloc-like pool, made on first use; the caller holds the lock. */
static uint32_t malloclike_pool(void)
{
	if (npools >= AGENT_POOL_MALLOCLIKE)
		return AGENT_POOL_MALLOCLIKE;
	uint32_t id = pool_new();
	if (id)
		pool_get(id)->alive = true;
	return id;
}

static uint32_t find_locked(uintptr_t anchor)
{
	return anchor ? anchor_find(anchor) : malloclike_pool();
}

/* ---------- the operations ---------- */

static void set_name(struct agent_pool *p, const char *name)
{
	agent_strlcpy(p->name, name ? name : "", sizeof p->name);
}

long agent_pool_create(uintptr_t anchor, uintptr_t parent, const char *name)
{
	if (!anchor)
		return -EINVAL;
	long ret;
	agent_lock(&agent_pool_lock);
	malloclike_pool();  /* id 1 stays the malloc-like pool's */
	uint32_t pid = parent ? anchor_find(parent) : 0;
	if (anchor_find(anchor)) {
		ret = -EEXIST;
	} else if (parent && !pid) {
		ret = -ENOENT;
	} else {
		uint32_t id = pool_new();
		ret = -ENOMEM;
		if (id) {
			struct agent_pool *p = pool_get(id);
			p->anchor = anchor;
			p->parent = pid;
			p->alive = true;
			set_name(p, name);
			if (anchor_insert(id)) {
				if (pid) {
					p->next_sibling = pool_get(pid)->first_child;
					pool_get(pid)->first_child = id;
				}
				ret = id;
			} else {
				p->alive = false;
			}
		}
	}
	agent_unlock(&agent_pool_lock);
	return ret;
}

uint32_t agent_pool_find(uintptr_t anchor)
{
	agent_lock(&agent_pool_lock);
	uint32_t id = find_locked(anchor);
	agent_unlock(&agent_pool_lock);
	return id;
}

int agent_pool_rename(uintptr_t anchor, const char *name)
{
	agent_lock(&agent_pool_lock);
	uint32_t id = anchor_find(anchor);
	if (id)
		set_name(pool_get(id), name);
	agent_unlock(&agent_pool_lock);
	return id ? 0 : -ENOENT;
}

int agent_pool_chunk_add(uint32_t id, uintptr_t addr, size_t size, uint32_t stack)
{
	agent_lock(&agent_pool_lock);
	struct agent_pool *p = pool_get(id);
	int ret = p && p->alive ? chunk_put(p, addr, size, stack) : -ENOENT;
	agent_unlock(&agent_pool_lock);
	return ret;
}

int agent_pool_chunk_remove(uintptr_t anchor, uintptr_t addr, size_t *size, uint32_t *stack)
{
	int ret = -ENOENT;
	agent_lock(&agent_pool_lock);
	struct agent_pool *p = pool_get(find_locked(anchor));
	if (p && p->e && addr) {
		uint32_t i = chunk_slot(p, addr);
		if (p->e[i].addr) {
			*size = p->e[i].size;
			*stack = p->e[i].stack;
			chunk_erase(p, i);
			ret = 0;
		}
	}
	agent_unlock(&agent_pool_lock);
	return ret;
}

int agent_pool_chunk_change(uintptr_t anchor, uintptr_t old, uintptr_t addr, size_t size)
{
	int ret = -ENOENT;
	agent_lock(&agent_pool_lock);
	struct agent_pool *p = pool_get(find_locked(anchor));
	if (p && p->e && old) {
		uint32_t i = chunk_slot(p, old);
		if (p->e[i].addr) {
			uint32_t stack = p->e[i].stack;
			chunk_erase(p, i);
			ret = chunk_put(p, addr, size, stack);
		}
	}
	agent_unlock(&agent_pool_lock);
	return ret;
}

int agent_pool_trim(uintptr_t anchor, uintptr_t addr, size_t size)
{
	int ret = -ENOENT;
	agent_lock(&agent_pool_lock);
	struct agent_pool *p = pool_get(anchor_find(anchor));
	if (p) {
		ret = 0;
		uintptr_t lo = addr, hi = addr + size;
		/* a slot may receive an entry shifted back from later on:
		 * look at it again */
		for (uint32_t i = 0; p->e && i < p->cap;) {
			struct agent_block *b = &p->e[i];
			uintptr_t s = b->addr, e = b->addr + b->size;
			if (!s) {
				i++;
			} else if (e <= lo || s >= hi || (b->size == 0 && (s < lo || s >= hi))) {
				chunk_erase(p, i);  /* wholly outside */
			} else if (s < lo || e > hi) {
				/* straddles an end: what lies inside is kept */
				uintptr_t ns = s < lo ? lo : s, ne = e > hi ? hi : e;
				uint32_t stack = b->stack;
				chunk_erase(p, i);
				chunk_put(p, ns, ne - ns, stack);  /* never grows the table */
			} else {
				i++;
			}
		}
	}
	agent_unlock(&agent_pool_lock);
	return ret;
}

int agent_pool_reset(uintptr_t anchor)
{
	agent_lock(&agent_pool_lock);
	uint32_t root = anchor_find(anchor);
	for (uint32_t id = root; id; id = walk_next(root, id))
		chunks_clear(pool_get(id));
	agent_unlock(&agent_pool_lock);
	return root ? 0 : -ENOENT;
}

int agent_pool_destroy(uintptr_t anchor)
{
	agent_lock(&agent_pool_lock);
	uint32_t root = anchor_find(anchor);
	for (uint32_t id = root; id; id = walk_next(root, id)) {
		struct agent_pool *p = pool_get(id);
		anchor_remove(p->anchor);
		if (p->e)
			agent_munmap(p->e, (size_t)p->cap * sizeof *p->e);
		p->e = NULL;
		p->cap = p->n = 0;
		p->bytes = 0;
		p->alive = false;
	}
	if (root)
		unlink_child(root);
	agent_unlock(&agent_pool_lock);
	return root ? 0 : -ENOENT;
}

int agent_pool_move(uintptr_t old, uintptr_t new_anchor)
{
	int ret = 0;
	agent_lock(&agent_pool_lock);
	uint32_t id = anchor_find(old);
	if (!id || !new_anchor) {
		ret = -ENOENT;
	} else if (old != new_anchor) {
		if (anchor_find(new_anchor)) {
			ret = -EEXIST;
		} else {
			anchor_remove(old);
			pool_get(id)->anchor = new_anchor;
			if (!anchor_insert(id)) {
				pool_get(id)->anchor = old;
				anchor_insert(id);  /* the slot it just left is free */
				ret = -ENOMEM;
			}
		}
	}
	agent_unlock(&agent_pool_lock);
	return ret;
}

/* ---------- the program's mappings ---------- */

static char mmap_anchor;  /* the "[mmap]" pool's anchor: no program's */
static uint32_t mmap_id;

uint32_t agent_pool_mmap(void)
{
	if (AGENT_LIKELY(atomic_load_explicit((_Atomic uint32_t *)&mmap_id, memory_order_acquire)))
		return mmap_id;
	long id = agent_pool_create((uintptr_t)&mmap_anchor, 0, "[mmap]");
	if (id == -EEXIST)
		id = agent_pool_find((uintptr_t)&mmap_anchor);
	if (id <= 0)
		return 0;
	agent_lock(&agent_pool_lock);
	pool_get((uint32_t)id)->mmap = true;
	atomic_store_explicit((_Atomic uint32_t *)&mmap_id, (uint32_t)id, memory_order_release);
	agent_unlock(&agent_pool_lock);
	return (uint32_t)id;
}

uint64_t agent_pool_unmap(uint32_t id, uintptr_t addr, size_t len)
{
	uint64_t gone = 0;
	uintptr_t lo = addr, hi = addr + len < addr ? UINTPTR_MAX : addr + len;
	agent_lock(&agent_pool_lock);
	struct agent_pool *p = pool_get(id);
	for (uint32_t i = 0; p && p->e && i < p->cap;) {
		struct agent_block *b = &p->e[i];
		uintptr_t s = b->addr, e = b->addr + b->size;
		if (!s || e <= lo || s >= hi) {
			i++;
			continue;
		}
		uint32_t stack = b->stack;
		chunk_erase(p, i);  /* i is looked at again: a later entry may shift here */
		gone += (s < lo ? lo : s) < (e > hi ? hi : e) ? (e > hi ? hi : e) - (s < lo ? lo : s) : 0;
		/* what is left on either side stays, as its own chunk: the
		 * table may grow for the second, so the walk starts over */
		bool again = false;
		if (s < lo)
			chunk_put(p, s, lo - s, stack);
		if (e > hi) {
			again = (p->n + 1) * 4 > p->cap * 3;
			chunk_put(p, hi, e - hi, stack);
		}
		if (again)
			i = 0;
	}
	agent_unlock(&agent_pool_lock);
	return gone;
}

/* ---------- readers ---------- */

uint32_t agent_pool_count_locked(void)
{
	return npools;
}

bool agent_pool_info_locked(uint32_t id, struct agent_pool_info *out)
{
	struct agent_pool *p = pool_get(id);
	if (!p)
		return false;
	out->anchor = p->anchor;
	out->parent = p->parent;
	out->alive = p->alive;
	out->bytes = p->bytes;
	out->blocks = p->n;
	out->name = p->name;
	return true;
}

size_t agent_pool_chunks_count_locked(void)
{
	size_t n = 0;
	for (uint32_t id = 1; id <= npools; id++)
		n += pool_get(id)->mmap ? 0 : pool_get(id)->n;
	return n;
}

size_t agent_pool_chunks_copy_locked(struct agent_block *out, size_t cap)
{
	size_t n = 0;
	for (uint32_t id = 1; id <= npools; id++) {
		struct agent_pool *p = pool_get(id);
		for (uint32_t i = 0; p->e && !p->mmap && i < p->cap && n < cap; i++)
			if (p->e[i].addr)
				out[n++] = p->e[i];
	}
	return n;
}

void agent_pool_per_stack_locked(struct agent_kinds *out, uint32_t nstacks, bool with_mmap)
{
	for (uint32_t id = 1; id <= npools; id++) {
		struct agent_pool *p = pool_get(id);
		for (uint32_t i = 0; p->e && (with_mmap || !p->mmap) && i < p->cap; i++) {
			const struct agent_block *b = &p->e[i];
			if (!b->addr || b->stack > nstacks)
				continue;
			out[b->stack].bytes[FMT_KIND_IN_USE] += b->size;
			out[b->stack].blocks[FMT_KIND_IN_USE]++;
		}
	}
}

void agent_pool_each_locked(void (*fn)(uintptr_t addr, size_t size, uint32_t stack, void *arg),
			    void *arg)
{
	for (uint32_t id = 1; id <= npools; id++) {
		struct agent_pool *p = pool_get(id);
		for (uint32_t i = 0; p->e && i < p->cap; i++)
			if (p->e[i].addr)
				fn(p->e[i].addr, p->e[i].size, p->e[i].stack, arg);
	}
}

/* chunk_erase moves later chunks back, into slot i or, wrapping, into a
 * slot already passed: keep answers the same for the same chunk. */
void agent_pool_thin_locked(bool (*keep)(uintptr_t addr, size_t size, void *arg), void *arg)
{
	for (uint32_t id = 1; id <= npools; id++) {
		struct agent_pool *p = pool_get(id);
		for (uint32_t i = 0; p->e && i < p->cap;) {
			if (!p->e[i].addr || keep(p->e[i].addr, p->e[i].size, arg))
				i++;
			else
				chunk_erase(p, i);
		}
	}
}

void agent_pool_clear_locked(void)
{
	for (uint32_t id = 1; id <= npools; id++)
		chunks_clear(pool_get(id));
}

struct agent_pool_snap *agent_pool_snapshot(uint32_t *n, size_t *maplen)
{
	*n = 0;
	*maplen = 0;
	agent_lock(&agent_pool_lock);
	uint32_t count = npools > AGENT_POOL_MALLOCLIKE ? npools - AGENT_POOL_MALLOCLIKE : 0;
	agent_unlock(&agent_pool_lock);
	if (count > AGENT_POOL_SNAP_MAX)
		count = AGENT_POOL_SNAP_MAX;
	if (!count)
		return NULL;
	size_t len = (size_t)count * sizeof(struct agent_pool_snap);
	struct agent_pool_snap *snap = agent_mmap(len);
	if (!snap)
		return NULL;
	agent_lock(&agent_pool_lock);  /* ids only grow: count stay valid */
	for (uint32_t i = 0; i < count; i++) {
		const struct agent_pool *p = pool_get(i + 2);
		snap[i].parent = p->parent;
		snap[i].alive = p->alive;
		snap[i].mmap = p->mmap;
		snap[i].bytes = p->bytes;
		snap[i].blocks = p->n;
		agent_memcpy(snap[i].name, p->name, sizeof snap[i].name);
	}
	agent_unlock(&agent_pool_lock);
	*n = count;
	*maplen = len;
	return snap;
}
