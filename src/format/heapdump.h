/*
 * heapdump — reads heap profiles in the text layouts the ecosystem writes:
 *
 *   - gperftools' heap profile, as heaptrail's agent writes it and as
 *     tcmalloc's sampler does:
 *       heap profile: N: B [ N2: B2] @ heap_v2/S
 *        n: b [ n2: b2] @ 0xPC 0xPC ...
 *     ("@ heapprofile": gperftools' HEAPPROFILE, every allocation
 *     counted; "@ heap/S": an old sampler whose S is twice the mean);
 *   - jemalloc's own layout (prof.dump, MALLOC_CONF=prof:true):
 *       heap_v2/S
 *         t*: N: B [N2: B2]
 *         tTID: ...                     per thread, ignored
 *       @ 0xPC 0xPC ...
 *         t*: n: b [n2: b2]
 *   - both end with "MAPPED_LIBRARIES:" and the process's /proc/PID/maps.
 *
 * heaptrail's dumps may carry '#' comment lines, which jeprof and pprof
 * skip: "# heaptrail-dump ms=M unix_ms=U pid=P [agent_bytes=N] [rss_anon=R] [heap_in_use=H] [end=1] [run=ID]" after the header
 * (when the dump was taken, and by which run), "# build-id HEX PATH" per module at the end,
 * "# heaptrail-shape temporary=T sizes=N0,..." after it (exact dumps: the
 * temporary allocations and a histogram of sizes, vocab.h),
 * and "# heaptrail-pool INDEX NAME" ('%XX'-escaped as in the leak file) for each
 * stack, counted from 0 in the file's order, whose blocks are a memory pool's.
 *
 * Counts are returned as read (raw samples); unbiasing is the caller's
 * business (analyze/unbias.h does it as pprof does). Stacks are return
 * addresses, innermost first, exactly as in the file.
 *
 * The reader takes a FILE stream and keeps nothing but the parsed result,
 * so memory grows with the number of distinct stacks, not with the file.
 * A dump that is truncated (no MAPPED_LIBRARIES section; a sample line cut
 * short), malformed or absurd (a count over 2^62, a stack deeper than
 * FMT_HEAP_MAX_DEPTH, more than FMT_HEAP_MAX_STACKS stacks) is rejected
 * with a message that names the line.
 */
#ifndef HEAPTRAIL_FORMAT_HEAPDUMP_H
#define HEAPTRAIL_FORMAT_HEAPDUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/vocab.h"
#include <stdio.h>

#define FMT_HEAP_MAX_DEPTH 1024
#define FMT_HEAP_MAX_STACKS (1u << 24)
#define FMT_HEAP_MAX_COUNT (1ull << 62)

enum fmt_heap_layout {
	FMT_HEAP_GPERFTOOLS,  /* "heap profile: ... @ heap_v2/S" or heapprofile */
	FMT_HEAP_JEMALLOC,    /* jemalloc's "heap_v2/S" with t*: lines */
};

enum fmt_heap_value {
	FMT_INUSE_OBJECTS, FMT_INUSE_SPACE, FMT_ALLOC_OBJECTS, FMT_ALLOC_SPACE,
	FMT_HEAP_NVALUES
};

struct fmt_heap_stack {
	uint64_t v[FMT_HEAP_NVALUES];  /* raw counts as in the file */
	uint64_t *pcs;                 /* innermost first, into the dump's pool; NULL when depth is 0 */
	uint32_t depth;
	char *pool_name;               /* the memory pool its blocks came from (owned), or NULL */
};

/* One line of the maps section (only lines naming a file are kept). */
struct fmt_heap_map {
	uint64_t start, end, offset;
	bool exec;                     /* 'x' in the permissions */
	char *path;                    /* owned */
};

struct fmt_heap_buildid {
	char *path, *hex;              /* owned */
};

/* FMT_HEAP_SHAPE's numbers (a leak file's "shape" line too). */
struct fmt_shape {
	bool known;                    /* the line was there: an exact run's */
	uint64_t temporary;
	uint64_t sizes[FMT_SHAPE_BUCKETS];
};

/* Parses "temporary=T sizes=N0,...,N31" (what follows the line's key)
 * into *s, known on success. Returns 0, or -1 (s->known false). */
int fmt_shape_parse(struct fmt_shape *s, const char *text);

struct fmt_heap_dump {
	enum fmt_heap_layout layout;
	uint64_t sample;               /* mean sampling distance in bytes; 1 = every allocation */
	uint64_t total[FMT_HEAP_NVALUES]; /* the header's totals, raw */
	bool has_alloc;                /* the allocated-so-far columns carry data */
	int64_t ms, unix_ms;           /* when taken (heaptrail dumps), or -1 */
	int64_t agent_bytes;           /* the agent's own mappings then, or -1 */
	int64_t rss;                   /* the process's private resident memory then, or -1 */
	int64_t heap_in_use;           /* the allocator's own bytes in use then, or -1 */
	/* the executable's file (as the maps name it) and the path it was
	 * started by, when they differ ("# heaptrail-exe"); else NULL */
	char *exe_real, *exe_started;
	long pid;                      /* -1 when unknown */
	struct fmt_shape shape;        /* its FMT_HEAP_SHAPE line (exact dumps) */
	char run[64];                  /* the agent's run id, or "" */
	enum { FMT_HEAP_END_NONE, FMT_HEAP_END_WANTED, FMT_HEAP_END_SEEN } ends;
				       /* end=1: a "# heaptrail-end" line must come */
	struct fmt_heap_stack *stacks;
	size_t nstacks;
	struct fmt_heap_map *maps;
	size_t nmaps;
	struct fmt_heap_buildid *buildids;
	size_t nbuildids;
	char error[160];               /* what went wrong, when reading failed */
	/* private */
	uint64_t *pool;
	size_t pool_len, pool_cap, stacks_cap, maps_cap, buildids_cap;
};

/* Parses f into d (zeroed by the call). Returns 0, or -EINVAL (bad or
 * truncated input), -ENOMEM or -EIO; on failure *err is a message (e.g.
 * "line 12: sample line without '@'"), a constant or d->error, and d
 * holds nothing else to release. */
int fmt_heap_read(struct fmt_heap_dump *d, FILE *f, const char **err);

/* Same, from a path; -errno of fopen when it cannot be opened. */
int fmt_heap_read_path(struct fmt_heap_dump *d, const char *path, const char **err);

void fmt_heap_release(struct fmt_heap_dump *d);

#endif
