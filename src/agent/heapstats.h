/*
 * heapstats.h — what the process's allocator itself says it holds
 * (heapstats.c): the bytes in use by its own count (glibc's mallinfo2,
 * jemalloc's stats.allocated, gperftools' current_allocated_bytes),
 * written beside each dump taken on the program's allocation path, so
 * `heaptrail growth` can tell a site that grows while the heap stays
 * flat (it replaces memory allocated before an attach) from growth.
 * Layer 1.
 */
#ifndef HEAPTRAIL_AGENT_HEAPSTATS_H
#define HEAPTRAIL_AGENT_HEAPSTATS_H

#include "agent/agent.h"

/* The allocator's bytes in use, or -1 when it has no such count or when
 * asking could deadlock here. Asking takes the allocator's locks (glibc
 * takes every arena's, and walks their free lists): call it only from a
 * thread of the program on its way into or out of an allocator call,
 * never from a borrowed thread (it may be inside the allocator). A
 * signal handler that interrupted the allocator is told apart by the
 * signal frame on its stack (and a handler's own signal in the mask);
 * where neither can be ruled out it answers -1. Hook-safe; not
 * signal-safe (it answers -1 in a handler it recognises). */
int64_t agent_heapstats_in_use(void);

#endif
