/*
 * heaptrail.h — the API a program can call when it runs under heaptrail.
 *
 * Every function is declared weak: a program built with this header links
 * and runs normally without the agent, and each call then does nothing.
 * heaptrail_loaded() tells whether the agent is there. Link nothing extra;
 * under `heaptrail run` (or LD_PRELOAD=libheaptrail.so) the agent provides
 * the definitions.
 *
 * All functions are thread-safe. None may be called from a signal handler.
 */
#ifndef HEAPTRAIL_H
#define HEAPTRAIL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Starts (on != 0) or stops (on == 0) recording new allocations; frees of
 * blocks already recorded are always seen. Returns the previous state
 * (1 recording, 0 not). */
int heaptrail_set_active(int on) __attribute__((weak));

/* Runs a leak check now, while the program goes on: every block still
 * allocated is classified (definitely, indirectly, possibly lost, still
 * reachable) exactly as at exit, and the result is written to
 * heaptrail.PID.check-N.leaks in the output directory (N counts checks
 * from 1); `heaptrail report FILE` prints it. The other threads are
 * stopped for the duration of the scan. flags:
 *   HEAPTRAIL_LEAKS_ALL        every record (valgrind's "full")
 *   HEAPTRAIL_LEAKS_INCREASED  only records that grew since the previous
 *                              check, with the increase (valgrind's
 *                              "increased")
 * Returns 0, or a negative errno (-ENOTSUP when classification is off). */
#define HEAPTRAIL_LEAKS_ALL 0
#define HEAPTRAIL_LEAKS_INCREASED 1
int heaptrail_leak_check(int flags) __attribute__((weak));

/* Writes a heap profile now (gperftools' text layout with the sampled
 * header, which jeprof and pprof read) to path, or, when path is NULL, to
 * PREFIX.PID.SEQ.api.heap in the output directory. Returns 0 or a
 * negative errno (-ENOTCONN once `heaptrail detach` has made the agent
 * inert). */
int heaptrail_dump(const char *path) __attribute__((weak));

/* Restarts the allocated-so-far counts of every call site (what "alloc"
 * views of a dump show); live blocks are not affected. Returns 0. */
int heaptrail_reset(void) __attribute__((weak));

/* ---- Memory pools ----
 *
 * For memory the program hands out itself, from blocks it got from malloc
 * or mmap (arenas, memory contexts, free lists): valgrind's MEMPOOL model.
 * A pool is named by an anchor, any address the program picks (the pool's
 * header, usually). A chunk given out from a pool is reported as a malloc
 * block is: with the stack of the heaptrail_pool_alloc call, and at exit
 * (or a leak check) as definitely, indirectly or possibly lost or still
 * reachable by the same scan. A block malloc returned that holds a live
 * chunk (the pool's superblock) is left out of the leak scan and of the
 * report, as memcheck does, so its bytes are not counted twice; once it
 * holds none (after a reset) it is an ordinary block again.
 *
 * Every function returns 0, or a negative errno: -ENOENT for an anchor (or
 * a chunk) the agent does not know, -EEXIST for an anchor already in use,
 * -EAGAIN when the agent cannot take the call (not started yet), -ENOMEM
 * when it is out of room (the chunk is then not tracked). Without the
 * agent the symbols are NULL: call them through HEAPTRAIL_CALL, or use
 * include/heaptrail/valgrind.h, which does. In sampling mode a chunk is
 * recorded when the sampler picks it, as a malloc block is.
 *
 * Pools form a tree: heaptrail_pool_reset of a pool frees every chunk of
 * it and of its descendants (which stay), heaptrail_pool_destroy ends it
 * and its descendants. Reports group and filter by the pool's name. */

/* A pool anchored at pool, a child of the pool anchored at parent (NULL:
 * none), named name (NULL: none; up to 63 bytes are kept). */
int heaptrail_pool_create(const void *pool, const void *parent, const char *name)
	__attribute__((weak));
/* Names (renames) the pool. */
int heaptrail_pool_name(const void *pool, const char *name) __attribute__((weak));
/* [addr, addr + size) is given out from the pool. A chunk already at addr
 * is replaced. */
int heaptrail_pool_alloc(const void *pool, const void *addr, size_t size) __attribute__((weak));
/* The chunk at addr goes back to the pool. */
int heaptrail_pool_free(const void *pool, const void *addr) __attribute__((weak));
/* The chunk at old is now [addr, addr + size), keeping its stack (a
 * realloc inside the pool; valgrind's MEMPOOL_CHANGE). */
int heaptrail_pool_change(const void *pool, const void *old, const void *addr, size_t size)
	__attribute__((weak));
/* Frees the chunks that lie wholly outside [addr, addr + size) and cuts
 * those that straddle its ends (valgrind's MEMPOOL_TRIM). */
int heaptrail_pool_trim(const void *pool, const void *addr, size_t size) __attribute__((weak));
/* Frees every chunk of the pool and of its descendants. */
int heaptrail_pool_reset(const void *pool) __attribute__((weak));
/* Frees every chunk of the pool and its descendants and forgets them;
 * their anchors may be used again. */
int heaptrail_pool_destroy(const void *pool) __attribute__((weak));
/* The pool anchored at pool is anchored at new_pool from now on (its
 * header moved). */
int heaptrail_pool_move(const void *pool, const void *new_pool) __attribute__((weak));

/* 1 when a pool is anchored at pool, else 0. */
int heaptrail_pool_exists(const void *pool) __attribute__((weak));

/* A block the program allocates by itself, outside any pool (valgrind's
 * MALLOCLIKE_BLOCK): reported as a malloc block; a malloc block holding
 * it is left out as a pool's superblock is. */
int heaptrail_block_alloc(const void *addr, size_t size) __attribute__((weak));
/* The block at addr is freed (FREELIKE_BLOCK). */
int heaptrail_block_free(const void *addr) __attribute__((weak));
/* The block at addr is now new_size bytes (RESIZEINPLACE_BLOCK). */
int heaptrail_block_resize(const void *addr, size_t old_size, size_t new_size)
	__attribute__((weak));

/* Calls heaptrail_FN(...) when the agent is loaded, else yields 0:
 * HEAPTRAIL_CALL(pool_alloc, p, addr, n). */
#define HEAPTRAIL_CALL(fn, ...) (heaptrail_##fn ? heaptrail_##fn(__VA_ARGS__) : 0)

/* Nonzero when the agent is loaded into this process. */
static inline int heaptrail_loaded(void)
{
	return heaptrail_set_active != 0;
}

/* Calls that do nothing without the agent. */
static inline int heaptrail_set_active_if_loaded(int on)
{
	return heaptrail_set_active ? heaptrail_set_active(on) : 0;
}

#ifdef __cplusplus
}
#endif

#endif
