/*
 * heapprofile.h — heap profiles written on demand (heapprofile.c).
 * Layer 2.
 */
#ifndef HEAPTRAIL_AGENT_HEAPPROFILE_H
#define HEAPTRAIL_AGENT_HEAPPROFILE_H

#include "agent/agent.h"

/* Writes a heap profile in gperftools' text layout (heap_v2/S header,
 * MAPPED_LIBRARIES) to path, or when path is NULL to an automatic name
 * PREFIX.PID.SEQ.KIND.heap. Returns 0 or -errno. Takes every table lock
 * briefly; safe from a signal handler when the thread is not inside the
 * agent. */
int agent_dump(const char *path, const char *kind);
/* agent_dump from a thread of the program in its own code, outside the
 * allocator (the triggers, on the way into an allocator call; the API):
 * the dump also says what the allocator counts in use (heapstats.h).
 * Never from a borrowed thread (a request), which may be inside it. */
int agent_dump_from_program(const char *path, const char *kind);
/* The same to the automatic name, whose path goes to wrote (cap bytes)
 * when the dump is written. */
int agent_dump_wrote(const char *kind, char *wrote, size_t cap);
/* In a forked child: its own dumps count SEQ from 0000 again, and a dump
 * another thread of the parent was writing is not the child's. */
void agent_heapprofile_forked(void);

#endif
