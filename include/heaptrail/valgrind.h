/*
 * heaptrail/valgrind.h — valgrind's heap client requests, carried out by
 * heaptrail: a program annotated for valgrind (custom allocators, memory
 * pools) needs only a recompile against this header to be seen whole
 * under heaptrail.
 *
 * Either include it instead of <valgrind/valgrind.h>, or leave the
 * program's includes alone and put heaptrail's compat directory first on
 * the include path (`-I$(pkg-config --variable=compatdir heaptrail)`, or
 * -Iinclude/heaptrail/compat in heaptrail's tree): its valgrind/valgrind.h
 * and valgrind/memcheck.h include this file. Nothing is linked: the
 * functions are heaptrail.h's weak symbols.
 *
 * What each request becomes (include/heaptrail.h says what they do):
 *   VALGRIND_CREATE_MEMPOOL(pool, rz, zeroed)     heaptrail_pool_create(pool, NULL, NULL)
 *   VALGRIND_CREATE_MEMPOOL_EXT(pool, rz, z, fl)  the same (the flags are valgrind's)
 *   VALGRIND_DESTROY_MEMPOOL(pool)                heaptrail_pool_destroy
 *   VALGRIND_MEMPOOL_ALLOC(pool, addr, size)      heaptrail_pool_alloc
 *   VALGRIND_MEMPOOL_FREE(pool, addr)             heaptrail_pool_free
 *   VALGRIND_MEMPOOL_TRIM(pool, addr, size)       heaptrail_pool_trim
 *   VALGRIND_MOVE_MEMPOOL(poolA, poolB)           heaptrail_pool_move
 *   VALGRIND_MEMPOOL_CHANGE(pool, a, b, size)     heaptrail_pool_change
 *   VALGRIND_MEMPOOL_EXISTS(pool)                 1 when heaptrail knows the pool
 *   VALGRIND_MALLOCLIKE_BLOCK(addr, size, rz, z)  heaptrail_block_alloc
 *   VALGRIND_FREELIKE_BLOCK(addr, rz)             heaptrail_block_free
 *   VALGRIND_RESIZEINPLACE_BLOCK(addr, o, n, rz)  heaptrail_block_resize
 * and two of heaptrail's own, for what valgrind has no request for:
 *   HEAPTRAIL_CREATE_MEMPOOL(pool, parent, name)  a pool in a tree, named
 *   HEAPTRAIL_MEMPOOL_NAME(pool, name)            names a pool
 *   HEAPTRAIL_MEMPOOL_RESET(pool)                 frees every chunk of it and
 *                                                 of the pools under it
 * Red zones and zeroing are memcheck's business and are ignored. Every
 * other request (memcheck's VALGRIND_MAKE_MEM_*, VALGRIND_CHECK_*,
 * RUNNING_ON_VALGRIND, ...) does nothing and yields 0. Without the agent,
 * every one of them does nothing.
 */
#ifndef HEAPTRAIL_VALGRIND_H
#define HEAPTRAIL_VALGRIND_H

#include "../heaptrail.h"  /* found whatever the include path */

/* valgrind.h's and memcheck.h's include guards: a later #include of the
 * real headers is then a no-op instead of a clash */
#ifndef __VALGRIND_H
#define __VALGRIND_H
#endif
#ifndef __MEMCHECK_H
#define __MEMCHECK_H
#endif

#define HEAPTRAIL_VG_(call) ((void)(call))

#define VALGRIND_CREATE_MEMPOOL(pool, rzB, is_zeroed) \
	HEAPTRAIL_VG_(HEAPTRAIL_CALL(pool_create, (pool), NULL, NULL))
#define VALGRIND_CREATE_MEMPOOL_EXT(pool, rzB, is_zeroed, flags) \
	HEAPTRAIL_VG_(HEAPTRAIL_CALL(pool_create, (pool), NULL, NULL))
#define VALGRIND_DESTROY_MEMPOOL(pool) HEAPTRAIL_VG_(HEAPTRAIL_CALL(pool_destroy, (pool)))
#define VALGRIND_MEMPOOL_ALLOC(pool, addr, size) \
	HEAPTRAIL_VG_(HEAPTRAIL_CALL(pool_alloc, (pool), (addr), (size_t)(size)))
#define VALGRIND_MEMPOOL_FREE(pool, addr) HEAPTRAIL_VG_(HEAPTRAIL_CALL(pool_free, (pool), (addr)))
#define VALGRIND_MEMPOOL_TRIM(pool, addr, size) \
	HEAPTRAIL_VG_(HEAPTRAIL_CALL(pool_trim, (pool), (addr), (size_t)(size)))
#define VALGRIND_MOVE_MEMPOOL(poolA, poolB) \
	HEAPTRAIL_VG_(HEAPTRAIL_CALL(pool_move, (poolA), (poolB)))
#define VALGRIND_MEMPOOL_CHANGE(pool, addrA, addrB, size) \
	HEAPTRAIL_VG_(HEAPTRAIL_CALL(pool_change, (pool), (addrA), (addrB), (size_t)(size)))
#define VALGRIND_MEMPOOL_EXISTS(pool) (HEAPTRAIL_CALL(pool_exists, (pool)) > 0)
#define VALGRIND_MALLOCLIKE_BLOCK(addr, sizeB, rzB, is_zeroed) \
	HEAPTRAIL_VG_(HEAPTRAIL_CALL(block_alloc, (addr), (size_t)(sizeB)))
#define VALGRIND_FREELIKE_BLOCK(addr, rzB) HEAPTRAIL_VG_(HEAPTRAIL_CALL(block_free, (addr)))
#define VALGRIND_RESIZEINPLACE_BLOCK(addr, oldSizeB, newSizeB, rzB) \
	HEAPTRAIL_VG_(HEAPTRAIL_CALL(block_resize, (addr), (size_t)(oldSizeB), (size_t)(newSizeB)))

#define HEAPTRAIL_CREATE_MEMPOOL(pool, parent, name) \
	HEAPTRAIL_VG_(HEAPTRAIL_CALL(pool_create, (pool), (parent), (name)))
#define HEAPTRAIL_MEMPOOL_NAME(pool, name) HEAPTRAIL_VG_(HEAPTRAIL_CALL(pool_name, (pool), (name)))
#define HEAPTRAIL_MEMPOOL_RESET(pool) HEAPTRAIL_VG_(HEAPTRAIL_CALL(pool_reset, (pool)))

/* the rest: nothing, and 0 */
#define RUNNING_ON_VALGRIND 0
#define VALGRIND_DISCARD_TRANSLATIONS(addr, len) ((void)0)
#define VALGRIND_COUNT_ERRORS 0
#define VALGRIND_PRINTF(...) 0
#define VALGRIND_PRINTF_BACKTRACE(...) 0
#define VALGRIND_STACK_REGISTER(start, end) 0
#define VALGRIND_STACK_DEREGISTER(id) ((void)0)
#define VALGRIND_STACK_CHANGE(id, start, end) ((void)0)
#define VALGRIND_DISABLE_ERROR_REPORTING ((void)0)
#define VALGRIND_ENABLE_ERROR_REPORTING ((void)0)
#define VALGRIND_MAKE_MEM_NOACCESS(addr, len) 0
#define VALGRIND_MAKE_MEM_UNDEFINED(addr, len) 0
#define VALGRIND_MAKE_MEM_DEFINED(addr, len) 0
#define VALGRIND_MAKE_MEM_DEFINED_IF_ADDRESSABLE(addr, len) 0
#define VALGRIND_CREATE_BLOCK(addr, len, desc) 0
#define VALGRIND_DISCARD(blkindex) 0
#define VALGRIND_CHECK_MEM_IS_ADDRESSABLE(addr, len) 0
#define VALGRIND_CHECK_MEM_IS_DEFINED(addr, len) 0
#define VALGRIND_CHECK_VALUE_IS_DEFINED(lvalue) 0
#define VALGRIND_DO_LEAK_CHECK ((void)0)
#define VALGRIND_DO_ADDED_LEAK_CHECK ((void)0)
#define VALGRIND_DO_CHANGED_LEAK_CHECK ((void)0)
#define VALGRIND_DO_QUICK_LEAK_CHECK ((void)0)
#define VALGRIND_COUNT_LEAKS(leaked, dubious, reachable, suppressed) \
	((leaked) = (dubious) = (reachable) = (suppressed) = 0)
#define VALGRIND_COUNT_LEAK_BLOCKS(leaked, dubious, reachable, suppressed) \
	((leaked) = (dubious) = (reachable) = (suppressed) = 0)
#define VALGRIND_GET_VBITS(a, zzvbits, zznbytes) 0
#define VALGRIND_SET_VBITS(a, zzvbits, zznbytes) 0
#define VALGRIND_DISABLE_ADDR_ERROR_REPORTING_IN_RANGE(a, b) 0
#define VALGRIND_ENABLE_ADDR_ERROR_REPORTING_IN_RANGE(a, b) 0
#define VALGRIND_MEMPOOL_AUTO_FREE 1
#define VALGRIND_MEMPOOL_METAPOOL 2

#endif
