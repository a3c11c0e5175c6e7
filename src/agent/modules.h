/*
 * modules.h — the list of loaded objects written with every report
 * (modules.c). Layer 1.
 */
#ifndef HEAPTRAIL_AGENT_MODULES_H
#define HEAPTRAIL_AGENT_MODULES_H

#include "agent/agent.h"
#include "agent/writer.h"

/* Remembers every module currently loaded, so one that is dlclose'd later
 * still symbolizes. Call before dlclose. Not hook-safe (dl_iterate_phdr). */
void agent_modules_snapshot(void);
/* Fork: the parent's prepare handler snapshots the list (marking what is
 * loaded); the child is told whether other threads existed at the fork,
 * in which case it never calls dl_iterate_phdr again (its lock may have
 * been held) and writes the snapshot. agent_modules_frozen says so, for
 * other users of the loader's lock (libunwind). */
void agent_modules_fork_prepare(void);
void agent_modules_fork_child(bool threaded);
bool agent_modules_frozen(void);


/* Writes the module list as "module" lines. */
void agent_modules_write(struct agent_writer *w);

/* The registry's lock, around fork; agent_modules_wait_unlocked as
 * agent_lock_seen_free. */
void agent_modules_lock(void);
void agent_modules_unlock(void);
bool agent_modules_wait_unlocked(long ms);

#endif
