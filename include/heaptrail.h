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
 * negative errno. */
int heaptrail_dump(const char *path) __attribute__((weak));

/* Restarts the allocated-so-far counts of every call site (what "alloc"
 * views of a dump show); live blocks are not affected. Returns 0. */
int heaptrail_reset(void) __attribute__((weak));

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
