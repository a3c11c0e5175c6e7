/*
 * pools — an arena allocator of the program's own, annotated with
 * valgrind's client requests (<valgrind/valgrind.h>), built twice: against
 * valgrind's header (run under memcheck, the oracle) and against
 * heaptrail's stand-in (-I include/heaptrail/compat, run under heaptrail).
 *
 * Arenas carve chunks from 4 KiB superblocks they malloc (a chunk bigger
 * than a superblock gets one of its own); they form a tree:
 *
 *   top ── cache          20 entries on a list a global holds; 3 of them
 *      │                  unlinked (lost), each with a string of its own
 *      │                  that only it points to (indirectly lost)
 *      ├─ request ─ query chunks in both, then request is reset (query
 *      │                  with it): nothing of before is left; then 2
 *      │                  chunks lost and 1 kept
 *      ├─ conn            made, then moved (its header realloc'd: MOVE);
 *      │                  a buffer grown in place (MEMPOOL_CHANGE) and
 *      │                  one moved; 2 chunks lost, 1 reached only
 *      │                  through an interior pointer (possibly lost)
 *      ├─ scratch         5 chunks, then trimmed to the 2nd and 3rd
 *      ├─ tmp             60 chunks, 3 superblocks, then destroyed
 *      └─ big             256 KiB superblocks (malloc maps each on its own):
 *                         a list of 3 chunks lost (1 definitely, 2
 *                         indirectly: only the superblock holds the
 *                         pointers to them, and it is no root), 1 kept
 *   orphan                its header dropped with 4 chunks in it: every
 *                         chunk lost, and the header (a malloc block)
 *   slab objects          malloc-like blocks (MALLOCLIKE_BLOCK) in a
 *                         malloc'd slab: 2 kept, 1 freed, 1 resized,
 *                         1 lost
 *
 * Under heaptrail the arenas are also named and nested
 * (HEAPTRAIL_CREATE_MEMPOOL) and a reset is HEAPTRAIL_MEMPOOL_RESET;
 * under valgrind, which has neither, a reset is a destroy and a create.
 *
 * Built with -DPOOLS_BY_NAME, the program has no annotation at all, and
 * heaptrail learns the same from the functions it is told to hook
 * (--alloc-fn arena_alloc..., test_allocfn.py): every pool operation
 * is a function of its own that takes the arena (the trim and the slab's
 * objects too), and none is inlined or cloned.
 *
 * The program counts, per arena, the chunks it holds (given out, not
 * freed, reset or trimmed away) and those it lost on purpose (definitely
 * or indirectly), and prints them at the end:
 *   pool NAME live BYTES BLOCKS lost BYTES BLOCKS
 * (NAME "malloclike" for the slab's objects).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef POOLS_BY_NAME
#define VALGRIND_MEMPOOL_ALLOC(a, p, n) ((void)0)
#define VALGRIND_MEMPOOL_FREE(a, p) ((void)0)
#define VALGRIND_MEMPOOL_CHANGE(a, p, q, n) ((void)0)
#define VALGRIND_MEMPOOL_TRIM(a, p, n) ((void)0)
#define VALGRIND_DESTROY_MEMPOOL(a) ((void)0)
#define VALGRIND_MOVE_MEMPOOL(a, b) ((void)0)
#define VALGRIND_MALLOCLIKE_BLOCK(p, n, rz, z) ((void)0)
#define VALGRIND_FREELIKE_BLOCK(p, rz) ((void)0)
#define VALGRIND_RESIZEINPLACE_BLOCK(p, o, n, rz) ((void)0)
#define VALGRIND_MAKE_MEM_UNDEFINED(p, n) ((void)0)
#define POOL_CREATE(a, parent, name) ((void)0)
#define POOL_RESET(a) ((void)0)
#else
#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>
#endif

/* noipa: hooked by name, each must stay a function of its own, with its
 * arguments where the C signature puts them */
#define NOINLINE __attribute__((noipa))
#define SB 4096
#define HDR 16

#if defined(POOLS_BY_NAME)
#elif defined(HEAPTRAIL_VALGRIND_H)
#define POOL_CREATE(a, parent, name) HEAPTRAIL_CREATE_MEMPOOL(a, parent, name)
#define POOL_RESET(a) HEAPTRAIL_MEMPOOL_RESET(a)
#else
#define POOL_CREATE(a, parent, name) VALGRIND_CREATE_MEMPOOL(a, 0, 0)
#define POOL_RESET(a)                           \
	do {                                    \
		VALGRIND_DESTROY_MEMPOOL(a);    \
		VALGRIND_CREATE_MEMPOOL(a, 0, 0); \
	} while (0)
#endif

struct sblock {
	struct sblock *next;
	size_t size;
};

struct arena {
	const char *name;
	struct arena *parent, *child, *sibling;
	struct sblock *blocks;    /* the current one first */
	char *cur, *end;
	size_t sb;                        /* superblock size */
	size_t live_bytes, live_blocks;   /* the program's own count */
	size_t lost_bytes, lost_blocks;
};

#define MAX_ARENAS 16
static struct arena *all[MAX_ARENAS];   /* for the counts at the end */
static int narenas;

static void count_add(struct arena *a)
{
	all[narenas++] = a;
}

NOINLINE struct arena *arena_create_sized(struct arena *parent, const char *name, size_t sb)
{
	struct arena *a = calloc(1, sizeof *a);
	a->name = name;
	a->sb = sb;
	a->parent = parent;
	if (parent) {
		a->sibling = parent->child;
		parent->child = a;
	}
	POOL_CREATE(a, parent, name);
	count_add(a);
	return a;
}

NOINLINE struct arena *arena_create(struct arena *parent, const char *name)
{
	return arena_create_sized(parent, name, SB);
}

static void new_superblock(struct arena *a)
{
	struct sblock *b = malloc(a->sb);
	b->next = a->blocks;
	b->size = a->sb;
	a->blocks = b;
	a->cur = (char *)b + HDR;
	a->end = (char *)b + a->sb;
}

NOINLINE void *arena_alloc(struct arena *a, size_t n)
{
	size_t n16 = (n + 15) & ~(size_t)15;
	char *p;
	if (n16 > a->sb - HDR) {
		/* a superblock of its own, behind the current one */
		struct sblock *b = malloc(HDR + n16);
		b->size = HDR + n16;
		if (a->blocks) {
			b->next = a->blocks->next;
			a->blocks->next = b;
		} else {
			b->next = NULL;
			a->blocks = b;
			a->cur = a->end = (char *)b + HDR + n16;
		}
		p = (char *)b + HDR;
	} else {
		if (!a->blocks || a->cur + n16 > a->end)
			new_superblock(a);
		p = a->cur;
		a->cur += n16;
	}
	VALGRIND_MEMPOOL_ALLOC(a, p, n);
	a->live_bytes += n;
	a->live_blocks++;
	return p;
}

NOINLINE void arena_free(struct arena *a, void *p, size_t n)
{
	VALGRIND_MEMPOOL_FREE(a, p);
	a->live_bytes -= n;
	a->live_blocks--;
}

/* A chunk of old bytes grown to n: in place when it is the last one and
 * fits, else moved. */
NOINLINE void *arena_grow(struct arena *a, void *p, size_t old, size_t n)
{
	size_t o16 = (old + 15) & ~(size_t)15, n16 = (n + 15) & ~(size_t)15;
	if ((char *)p + o16 == a->cur && (char *)p + n16 <= a->end) {
		a->cur = (char *)p + n16;
		VALGRIND_MEMPOOL_CHANGE(a, p, p, n);
		a->live_bytes += n - old;
		return p;
	}
	void *q = arena_alloc(a, n);
	memcpy(q, p, old);
	arena_free(a, p, old);
	return q;
}

/* Every chunk of a and of the arenas under it goes; each keeps its first
 * superblock, wiped. */
NOINLINE void arena_reset(struct arena *a)
{
	for (struct arena *c = a->child; c; c = c->sibling)
		arena_reset(c);
	POOL_RESET(a);
	struct sblock *keep = a->blocks;
	while (keep && keep->next) {
		struct sblock *b = keep->next;
		keep->next = b->next;
		free(b);
	}
	if (keep) {
		VALGRIND_MAKE_MEM_UNDEFINED((char *)keep + HDR, keep->size - HDR);
		memset((char *)keep + HDR, 0, keep->size - HDR);
		a->cur = (char *)keep + HDR;
		a->end = (char *)keep + keep->size;
	}
	a->live_bytes = a->live_blocks = 0;
}

static void uncount(struct arena *a)
{
	for (int i = 0; i < narenas; i++)
		if (all[i] == a)
			all[i] = all[--narenas];
}

NOINLINE void arena_destroy(struct arena *a)
{
	while (a->child)
		arena_destroy(a->child);
	VALGRIND_DESTROY_MEMPOOL(a);
	while (a->blocks) {
		struct sblock *b = a->blocks;
		a->blocks = b->next;
		free(b);
	}
	if (a->parent) {
		struct arena **l = &a->parent->child;
		while (*l != a)
			l = &(*l)->sibling;
		*l = a->sibling;
	}
	uncount(a);
	free(a);
}

/* The arena's header moves (as a realloc would move it). */
NOINLINE struct arena *arena_move(struct arena *a)
{
	struct arena *b = malloc(sizeof *b);
	*b = *a;
	if (b->parent) {
		struct arena **l = &b->parent->child;
		while (*l != a)
			l = &(*l)->sibling;
		*l = b;
	}
	for (struct arena *c = b->child; c; c = c->sibling)
		c->parent = b;
	VALGRIND_MOVE_MEMPOOL(a, b);
	for (int i = 0; i < narenas; i++)
		if (all[i] == a)
			all[i] = b;
	free(a);
	return b;
}

/* Only the chunks inside [lo, lo+n) stay: live_bytes of them, in
 * live_blocks chunks. */
NOINLINE void arena_trim(struct arena *a, void *lo, size_t n, size_t live_bytes,
			 size_t live_blocks)
{
	VALGRIND_MEMPOOL_TRIM(a, lo, n);
	a->live_bytes = live_bytes;
	a->live_blocks = live_blocks;
}

static void lost(struct arena *a, size_t n)
{
	a->lost_bytes += n;
	a->lost_blocks++;
}

/* ---------- the program ---------- */

struct entry {
	struct entry *next;
	char *text;
	char pad[24];
};

/* not static: the compiler keeps globals another file could read */
struct arena *top, *orphan;
struct entry *cache_list;
void *config, *kept_request, *scratch_keep[2], *conn_buf;
char *conn_interior;
void *slab, *objs[2], *big_keep;
static size_t like_lost_bytes, like_lost_blocks;

NOINLINE void fill_cache(struct arena *cache)
{
	for (int i = 0; i < 20; i++) {
		struct entry *e = arena_alloc(cache, sizeof *e);
		size_t len = 10 + (size_t)i * 3;
		e->text = arena_alloc(cache, len);
		memset(e->text, 'a' + i, len);
		e->next = cache_list;
		cache_list = e;
	}
	/* unlink the 3rd, 8th and 13th: each lost with its text */
	struct entry **l = &cache_list;
	for (int i = 0; *l; i++) {
		if (i == 2 || i == 7 || i == 12) {
			struct entry *e = *l;
			*l = e->next;
			e->next = NULL;
			lost(cache, sizeof *e);
			lost(cache, 10 + (size_t)(19 - i) * 3);
			continue;
		}
		l = &(*l)->next;
	}
}

NOINLINE void serve_request(struct arena *request, struct arena *query)
{
	for (int i = 0; i < 30; i++) {
		void *p = arena_alloc(i % 3 ? query : request, 40 + (size_t)i * 16);
		memset(p, i, 8);
	}
	arena_alloc(query, 9000);  /* a superblock of its own */
}

NOINLINE void leak_after_reset(struct arena *request)
{
	arena_alloc(request, 72);
	lost(request, 72);
	arena_alloc(request, 5000);
	lost(request, 5000);
	kept_request = arena_alloc(request, 33);
}

NOINLINE struct arena *use_conn(struct arena *conn)
{
	conn_buf = arena_alloc(conn, 100);
	conn_buf = arena_grow(conn, conn_buf, 100, 300);   /* in place */
	void *other = arena_alloc(conn, 64);
	void *old = arena_alloc(conn, 50);
	memset(other, 0, 64);
	old = arena_grow(conn, old, 50, 120);              /* in place: the last */
	arena_free(conn, other, 64);
	conn_interior = (char *)arena_alloc(conn, 256) + 8;  /* possibly lost */
	arena_alloc(conn, 24);
	lost(conn, 24);
	lost(conn, 120);  /* old */
	conn = arena_move(conn);
	return conn;
}

NOINLINE void use_scratch(struct arena *scratch)
{
	char *c[5];
	size_t n[5] = { 48, 64, 80, 96, 112 };
	for (int i = 0; i < 5; i++)
		c[i] = arena_alloc(scratch, n[i]);
	scratch_keep[0] = c[1];
	scratch_keep[1] = c[2];
	arena_trim(scratch, c[1], (size_t)(c[3] - c[1]), n[1] + n[2], 2);
}

NOINLINE void use_tmp(struct arena *tmp)
{
	for (int i = 0; i < 60; i++)
		arena_alloc(tmp, 100 + (size_t)i);
	arena_destroy(tmp);
}

NOINLINE void make_orphan(void)
{
	orphan = arena_create(NULL, "orphan");
	for (int i = 0; i < 4; i++) {
		arena_alloc(orphan, 200 + (size_t)i * 8);
		lost(orphan, 200 + (size_t)i * 8);
	}
}

struct node {
	struct node *next;
	char data[40];
};

NOINLINE void use_big(struct arena *big)
{
	struct node *list = NULL;
	for (int i = 0; i < 3; i++) {
		struct node *n = arena_alloc(big, sizeof *n);
		n->next = list;
		list = n;
		lost(big, sizeof *n);
	}
	big_keep = arena_alloc(big, 1000);
}

NOINLINE void drop_orphan(void)
{
	orphan = NULL;
}

/* The slab's objects: each operation a function (hooked by name). */
size_t slab_objects;   /* not static: its stores stay */

NOINLINE void *obj_new(char *at, size_t n)
{
	VALGRIND_MALLOCLIKE_BLOCK(at, n, 0, 0);
	slab_objects++;
	return at;
}

NOINLINE void obj_delete(void *p)
{
	VALGRIND_FREELIKE_BLOCK(p, 0);
	slab_objects--;
}

NOINLINE void *obj_resize(void *p, size_t old, size_t n)
{
	VALGRIND_RESIZEINPLACE_BLOCK(p, old, n, 0);
	if (n > old)
		memset((char *)p + old, 0, n - old);
	return p;
}

NOINLINE void use_slab(void)
{
	slab = malloc(1024);
	char *o[5];
	for (int i = 0; i < 5; i++)
		o[i] = obj_new((char *)slab + 64 + i * 128, 48);
	objs[0] = o[0];
	objs[1] = o[1];
	obj_delete(o[2]);
	obj_resize(o[3], 48, 100);
	/* o[3] (now 100 bytes) and o[4] are lost */
	like_lost_bytes = 100 + 48;
	like_lost_blocks = 2;
}

int main(void)
{
	top = arena_create(NULL, "top");
	config = arena_alloc(top, 128);
	memset(config, 1, 128);
	struct arena *cache = arena_create(top, "cache");
	struct arena *request = arena_create(top, "request");
	struct arena *query = arena_create(request, "query");
	struct arena *conn = arena_create(top, "conn");
	struct arena *scratch = arena_create(top, "scratch");
	struct arena *tmp = arena_create(top, "tmp");
	struct arena *big = arena_create_sized(top, "big", 256 * 1024);

	fill_cache(cache);
	serve_request(request, query);
	arena_reset(request);
	leak_after_reset(request);
	conn = use_conn(conn);
	use_scratch(scratch);
	use_tmp(tmp);
	use_big(big);
	make_orphan();
	drop_orphan();
	use_slab();

	for (int i = 0; i < narenas; i++) {
		struct arena *a = all[i];
		printf("pool %s live %zu %zu lost %zu %zu\n", a->name, a->live_bytes,
		       a->live_blocks, a->lost_bytes, a->lost_blocks);
	}
	printf("pool malloclike live %zu %zu lost %zu %zu\n", (size_t)2 * 48 + like_lost_bytes,
	       (size_t)2 + like_lost_blocks, like_lost_bytes, like_lost_blocks);
	return 0;
}
