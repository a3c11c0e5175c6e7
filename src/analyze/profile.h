/*
 * profile — a heap dump, unbiased and symbolized: the model every
 * analyzer subcommand (top, diff, growth, flame, collapsed, pprof,
 * timeline, callgraph) works from. Renderers take this model and never
 * read files; this module never prints.
 *
 * Three tables:
 *   - locations: each distinct pc of the dump once, with the mapping it
 *     falls in and its source frames (several when inlined: innermost
 *     first, the last one is the real function the pc is in);
 *   - frames: distinct (function, file, line, module) quadruples, interned,
 *     so two pcs on the same source line share one frame, and so do equal
 *     frames of a base profile merged in;
 *   - samples: one per stack of the dump, with the four unbiased values
 *     and the stack as location ids and as frame ids, leaf first. The
 *     allocator's own frames at the top of a stack (malloc, operator new,
 *     jemalloc's and tcmalloc's internals, heaptrail's agent) are dropped
 *     at load, as jeprof and pprof do, so the leaf is the caller.
 *
 * Values are signed: prof_profile_subtract() merges a base profile with
 * negated values, and every consumer handles negative numbers.
 *
 * load.h fills a profile from a dump, series.h loads a run's dumps;
 * profile_build.h is how they add to it.
 *
 * Ownership: a profile owns all of its strings and arrays; they stay
 * valid until prof_profile_release().
 */
#ifndef HEAPTRAIL_ANALYZE_PROFILE_H
#define HEAPTRAIL_ANALYZE_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/heapdump.h"

enum prof_value {
	PROF_INUSE_OBJECTS, PROF_INUSE_SPACE, PROF_ALLOC_OBJECTS, PROF_ALLOC_SPACE,
	PROF_NVALUES
};
/* "inuse_objects", "inuse_space", ... (pprof's sample type names) */
extern const char *const prof_value_names[PROF_NVALUES];

struct prof_mapping {
	uint64_t start, limit, offset;
	const char *file;       /* as in the dump */
	const char *build_id;   /* lower-case hex, or NULL when unknown */
	bool exec;
};

struct prof_frame {
	const char *function;   /* demangled, or "0x..." when unknown */
	const char *file;       /* NULL when unknown */
	int line;               /* 0 when unknown */
	const char *module;     /* base name of the module, or NULL */
	bool symbolized;        /* function is a real name */
};

struct prof_location {
	uint64_t pc;
	int mapping;            /* index into maps, or -1 */
	uint32_t *frames;       /* frame ids, innermost first */
	uint32_t nframes;
};

struct prof_sample {
	int64_t v[PROF_NVALUES];
	/* How sure v is (unbias.h): the variance of each estimate (0 when
	 * exact) and the number of sampled blocks behind it (negative in a
	 * base merged in, as v is). */
	double var[PROF_NVALUES];
	int64_t nsampled[PROF_NVALUES];
	uint32_t *locs;         /* location ids, leaf first; NULL for base samples */
	uint32_t nlocs;
	uint32_t *frames;       /* frame ids, leaf first (inlined frames expanded) */
	uint32_t nframes;
	const char *pool;       /* the memory pool its blocks came from, or NULL */
};

struct prof_profile {
	const char *path;
	enum fmt_heap_layout layout;
	uint64_t sample;        /* 1: exact */
	int64_t ms, unix_ms;    /* when the dump was taken (-1 when unknown) */
	int64_t agent_bytes;    /* the agent's own mappings then (-1 when unknown) */
	int64_t rss;            /* the process's private resident memory then (-1: unknown) */
	int64_t heap_in_use;    /* the allocator's own count of its bytes in use (-1: unknown) */
	/* the executable's file and the name its frames are shown by, when
	 * it was started through a symlink ("# heaptrail-exe"); else NULL */
	const char *exe_real, *exe_shown;
	long pid;
	struct fmt_shape shape; /* the dump's allocation shape (exact heaptrail dumps) */
	bool has_alloc;         /* allocated-so-far values are meaningful */
	bool pool_absent;       /* the load's pool names no pool of this dump */
	int64_t total[PROF_NVALUES]; /* sums over samples */
	double total_var[PROF_NVALUES]; /* their variances (0: exact) */
	int64_t total_nsampled[PROF_NVALUES]; /* sampled blocks behind total (|each| summed) */
	struct prof_mapping *maps;
	size_t nmaps;
	struct prof_location *locs;
	size_t nlocs;
	struct prof_frame *frames;
	size_t nframes;
	struct prof_sample *samples;
	size_t nsamples;
	char error[512];        /* what went wrong, when a call on it failed */
	/* private */
	struct prof_profile_priv *priv;
};

/* Merges base into p with negated values (p - base), matching frames by
 * name (variances add, as for any difference of independent estimates); base is left as it was unless it is p itself (allowed: every
 * value then nets to zero). The merged samples have no locations. */
int prof_profile_subtract(struct prof_profile *p, const struct prof_profile *base);

/* p becomes p - base for two dumps of one process (its stacks are
 * matched by their pcs, so p keeps its locations and renders as pprof):
 * what changed between them, as Go's `?seconds=N` delta profiles. Stacks
 * of base that p lacks are left out (a process's dumps only gain
 * stacks); samples that net to zero are dropped. 0 or -ENOMEM. */
int prof_profile_delta(struct prof_profile *p, const struct prof_profile *base);

/* Drops samples with no frame matching focus (when not NULL), then those
 * with a frame matching ignore (POSIX extended regexes, on function
 * names). Returns 0 or -EINVAL with *err set for a bad regex. */
int prof_profile_filter(struct prof_profile *p, const char *focus, const char *ignore,
			const char **err);

/* Removes the frames whose function matches hide (a POSIX extended
 * regex) from every stack, as pprof's -hide does: an allocator's own
 * wrappers (palloc, pstrdup...) hidden, the site is their caller; and the
 * locations whose frames all match (pprof's output is written from
 * them: a location with an inlined frame left keeps its other frames
 * there). A stack whose every frame matches is left whole. Returns 0, -EINVAL with *err
 * set for a bad regex, or -ENOMEM. */
int prof_profile_hide(struct prof_profile *p, const char *hide, const char **err);

/* Symbolization notes ("no debug info for 'x'"), owned by p. */
size_t prof_profile_warnings(const struct prof_profile *p, const char *const **out);

void prof_profile_release(struct prof_profile *p);

/* The name of a frame at the granularity asked: the function, or
 * "function file:line" (lines), written to buf. Returns buf. The one key
 * every view groups frames by (top's rows, the flame graph's tree, the
 * folded stacks, the call graph's boxes, growth's sites), so they agree
 * on what one site is. */
const char *prof_frame_name(const struct prof_frame *f, bool lines, char *buf, size_t cap);

/* Parses "inuse_space", "inuse-space", "alloc_objects", ... Returns -1
 * when unknown. */
int prof_value_parse(const char *s);

/* The hashes the profile's tables use (FNV-1a of a string; a 64-bit
 * finalizer). */
static inline uint64_t prof_hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static inline uint64_t prof_hash_mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

#endif
