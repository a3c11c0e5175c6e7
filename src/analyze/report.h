/*
 * report — the model of a run's exit reports, built from leak files and
 * symbolized: per process, its records with source frames, sorted by
 * bytes, and the totals per kind. Renderers take this model and never read
 * files; this module never prints.
 */
#ifndef HEAPTRAIL_ANALYZE_REPORT_H
#define HEAPTRAIL_ANALYZE_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/leakfile.h"
#include "symbolize/symbolize.h"

struct prof_record {
	int kind;                   /* enum fmt_kind */
	uint64_t bytes, blocks;     /* estimates when the run sampled */
	uint64_t nsampled;          /* sampled: the blocks recorded behind bytes; else 0 */
	double var_bytes;           /* sampled: the variance of bytes (unbias.h); else 0 */
	int alloc_fn;               /* enum fmt_alloc_fn */
	struct sym_frame *frames;   /* strings owned by the process's symbolizer */
	size_t nframes;
	bool has_increase;          /* a leak check's "increased" record */
	uint64_t inc_bytes, inc_blocks;
	int suppressed_by;          /* 1 + index of the suppression, or 0 */
	int over_limit;             /* 1 + index of a suppression whose limit it broke */
	uint64_t pool_id;           /* the pool its blocks came from (0: malloc's);
				       prof_pool_name gives its name */
};

/* A heap error's context (format/leakfile.h's fmt_error), symbolized. */
struct prof_heap_error {
	int kind;                   /* enum fmt_error_kind */
	uint64_t count, size;
	int alloc_fn, free_fn;      /* enum fmt_alloc_fn: how it was allocated,
				       how given back (FMT_FN_FREE...); -1: not */
	struct sym_frame *alloc_frames, *free_frames; /* NULL for none */
	size_t nalloc, nfree;
	uint64_t offset;            /* invalid, in a block: past its start; a
				       guarded block's fault: from its start */
	int where;                  /* invalid, guarded: enum fmt_error_where */
	uint64_t given, align;      /* size_mismatch, align_mismatch: fmt_error's */
	int prev_fn;                /* a double free: how it was first given back */
	struct sym_frame *prev_frames; /* ... and where (its caller), or NULL; a
					  guarded block's fault: the access */
	size_t nprev;
	int suppressed_by;          /* 1 + index of the suppression, or 0 */
};

struct prof_process {
	struct fmt_leaks raw;
	struct prof_record *records;    /* sorted: bytes, then blocks, descending */
	size_t nrecords;
	uint64_t kind_bytes[FMT_KIND_COUNT], kind_blocks[FMT_KIND_COUNT]; /* unsuppressed */
	uint64_t supp_bytes, supp_blocks;
	uint64_t in_use_nsampled;       /* sampled: blocks recorded in use, over all records */
	double in_use_var;              /* sampled: the variance of raw.in_use_bytes */
	struct symbolizer *sym;
	const char *file;               /* the leak file it came from (owned) */
	const char *pool_filter;        /* prof_process_filter_pool's NAME, or NULL */
	struct prof_heap_error *errors; /* in the order first seen, suppressed too */
	size_t nerrors;
	uint64_t error_count;           /* the errors no suppression hides, those
					   not kept included */
	size_t error_contexts;          /* the contexts no suppression hides */
	uint64_t supp_errors;           /* what suppressions hide: errors ... */
	size_t supp_error_contexts;     /* ... and their contexts */
};

/* A leak file of a directory that could not be read (garbage, truncated,
 * not a regular file): the others are still loaded. */
struct prof_bad_file {
	char *file;                     /* owned */
	const char *err;                /* static */
};

struct prof_run {
	struct prof_process *procs;     /* sorted by pid */
	size_t nprocs;
	struct prof_bad_file *bad;      /* directory loads only */
	size_t nbad;
};

/* Loads path: one leak file, or a directory whose heaptrail.*.leaks files
 * are all read; a file of the directory that cannot be read is listed in
 * run->bad and the others are loaded (the call fails only when the
 * directory cannot be listed or holds no leak file at all). binary_path is passed to the symbolizer (may be NULL).
 * Returns 0, or -errno with *err naming the problem and *err_file the file
 * it is about (both static or owned by nothing the caller frees; valid
 * until the next call). On failure nothing needs releasing. */
int prof_run_load(struct prof_run *run, const char *path, const char *binary_path,
		  const char **err, const char **err_file);
/* The same without symbolizing: each frame is its pc (function "??",
 * module NULL). For summaries that print no stack. */
int prof_run_load_raw(struct prof_run *run, const char *path, const char **err,
		      const char **err_file);

/* The same, symbolizing only the records whose kind is in sym_kinds (a
 * PROF_KIND_BIT mask): what a report prints, or what its JSON needs. The
 * others keep raw frames, and a process none of whose records needs
 * symbols opens none of its modules. */
int prof_run_load_kinds(struct prof_run *run, const char *path, const char *binary_path,
			unsigned sym_kinds, const char **err, const char **err_file);

/* prof_run_load_kinds of a directory, keeping only the reports whose run
 * id (the agent's `run` option) is run_id: runs that share an output
 * directory each see their own processes. -ENOENT when none is. */
int prof_run_load_of(struct prof_run *run, const char *path, const char *binary_path,
		     unsigned sym_kinds, const char *run_id, const char **err,
		     const char **err_file);

void prof_run_release(struct prof_run *run);

/* Bit masks of enum fmt_kind. */
#define PROF_KIND_BIT(k) (1u << (k))
#define PROF_KINDS_DEFAULT_SHOWN (PROF_KIND_BIT(FMT_KIND_IN_USE) | \
	PROF_KIND_BIT(FMT_KIND_DEFINITELY) | PROF_KIND_BIT(FMT_KIND_POSSIBLY))
#define PROF_KINDS_ALL ((1u << FMT_KIND_COUNT) - 1)

/* Parses "all", "none" or a comma list of definite, indirect, possible,
 * reachable (valgrind's words) into a mask; in_use is always included.
 * Returns -1 on an unknown word. */
int prof_kinds_parse(const char *s, unsigned *mask);

/* Records of the kinds in mask that no suppression hides, and every heap
 * error no suppression hides (prof_process.error_count), over every
 * process: what --error-exitcode counts. */
size_t prof_run_errors(const struct prof_run *run, unsigned mask);

/* Turns sampled counts (mean sampling distance S bytes) into unbiased
 * estimates (analyze/unbias.h), in place, rounded to the nearest
 * integer; does nothing for S <= 1. */
void prof_unsample(uint64_t sample, uint64_t *bytes, uint64_t *blocks);

/* The name a pool is shown by: its own, or "pool#ID" when it has none.
 * The string lives in p (or a static buffer, for the unnamed: copy it). */
const char *prof_pool_name(const struct prof_process *p, uint64_t id);
/* Is pool id the pool named name, or one of its descendants? */
bool prof_pool_under(const struct prof_process *p, uint64_t id, const char *name);
/* Keeps only the records of the pools named name and their descendants,
 * and makes the per-kind totals theirs. Returns the number kept. */
size_t prof_process_filter_pool(struct prof_process *p, const char *name);

/* The pools of a process as a tree, in pre-order (a parent before its
 * children, children in id order); a pool whose parent is not in the file
 * is a root. With a pool filter, only the subtrees of the pools it names.
 * Returns a malloc'd array of *n nodes (the caller frees it), or NULL
 * with *n 0 when there are none (or no memory). */
struct prof_pool_node {
	const struct fmt_pool *pool;
	int depth;                      /* 0 for a root */
	uint64_t tree_bytes, tree_blocks;  /* its chunks and its descendants' */
	uint64_t lost_bytes, lost_blocks;  /* of its chunks, those definitely or
					      indirectly lost (records not suppressed) */
};
struct prof_pool_node *prof_pool_tree(const struct prof_process *p, size_t *n);

/* The name to show for an allocator entry point ("operator new[]"...). */
const char *prof_alloc_fn_name(int fn);

#endif
