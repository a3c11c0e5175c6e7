/*
 * leakscan.h — the reachability scan at exit and in leak checks
 * (leakscan.c): memcheck's four kinds for every live block. Layer 3.
 */
#ifndef HEAPTRAIL_AGENT_LEAKSCAN_H
#define HEAPTRAIL_AGENT_LEAKSCAN_H

#include "agent/agent.h"
#include "agent/leakwriter.h"
#include "agent/table.h"

/* Once, from the constructor: sig is the signal used to stop threads. */
void agent_leakscan_init(int sig);
/* Classifies every live block as valgrind memcheck would. stack_from is
 * the lowest address of the calling thread's stack that belongs to the
 * program; everything below it is the agent's own and not a root. extra
 * are more roots (the caller's registers). [alt_lo, alt_hi) is the
 * sigaltstack the request came on (else 0, 0), left out when stack_from is
 * not on it: then it holds only handler frames. Returns per-stack totals indexed by stack id (0 unused),
 * *nstacks ids, mapped with agent_mmap (*maplen bytes: release with
 * agent_munmap), or NULL when the scan could not run. Not hook-safe: takes
 * every table lock and stops every other thread for the duration. */
struct agent_kinds *agent_leakscan(uintptr_t stack_from, const uintptr_t *extra, int nextra,
				   uintptr_t alt_lo, uintptr_t alt_hi, uint32_t *nstacks,
				   size_t *maplen, struct agent_scan_info *info);

#endif
