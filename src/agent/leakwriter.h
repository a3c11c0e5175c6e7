/*
 * leakwriter.h — the leak file writer (leakwriter.c), used by the exit
 * report and the leak checks (exitreport.c). Not hook-safe (it opens and
 * writes a file); signal-safe when the thread is not inside the agent.
 */
#ifndef HEAPTRAIL_AGENT_LEAKWRITER_H
#define HEAPTRAIL_AGENT_LEAKWRITER_H

#include "agent/agent.h"
#include "agent/counters.h"
#include "agent/pool.h"
#include "agent/table.h"

/* What a scan found (leakscan.c fills it in; the leak file reports it). */
struct agent_scan_info {
	int threads_stopped, threads_unstopped;
	uint64_t root_bytes, blocks_scanned;
	uint64_t scan_ns;        /* wall time the world was stopped for */
	uint64_t bytes[FMT_KIND_COUNT], blocks[FMT_KIND_COUNT];
	struct agent_counts totals; /* the counters summed while the world was
				       stopped: the same moment as the kinds */
};

/* What one leak file says. kinds has nstacks + 1 entries (0 unused), or
 * is NULL when no per-stack totals could be had; prev, of a previous
 * check, is read only for a check with HEAPTRAIL_LEAKS_INCREASED. */
struct agent_leak_report {
	int status;              /* exit status, < 0 when unknown */
	int killed_by;           /* the fatal signal reported, else 0 */
	bool freeres;            /* libc's caches were released first */
	unsigned check;          /* 0 for the exit report, else the check's number */
	int flags;               /* HEAPTRAIL_LEAKS_* of a check */
	const struct agent_counts *totals;
	uint64_t live_bytes, live_blocks; /* what the records add up to */
	const struct agent_kinds *kinds;
	uint32_t nstacks;
	const struct agent_kinds *prev;
	uint32_t prev_nstacks;
	const struct agent_scan_info *info; /* the scan's summary; NULL: not classified */
	struct agent_pool_snap *pools;  /* pool ids 2..npools+1 (pool.h); NULL: none */
	uint32_t npools;
	char *wrote;             /* when not NULL: the path written, wrote_cap bytes */
	size_t wrote_cap;
};

/* Writes heaptrail.PID.leaks (check 0) or heaptrail.PID.check-N.leaks
 * into the output directory. Returns 0 or -errno; on failure it says so
 * on stderr. */
int agent_leakfile_write(const struct agent_leak_report *r);

#endif
