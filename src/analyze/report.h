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
	uint64_t bytes, blocks;
	int alloc_fn;               /* enum fmt_alloc_fn */
	struct sym_frame *frames;   /* strings owned by the process's symbolizer */
	size_t nframes;
};

struct prof_process {
	struct fmt_leaks raw;
	struct prof_record *records;    /* sorted: bytes, then blocks, descending */
	size_t nrecords;
	uint64_t kind_bytes[FMT_KIND_COUNT], kind_blocks[FMT_KIND_COUNT];
	struct symbolizer *sym;
	const char *file;               /* the leak file it came from (owned) */
};

struct prof_run {
	struct prof_process *procs;     /* sorted by pid */
	size_t nprocs;
};

/* Loads path: one leak file, or a directory whose heaptrail.*.leaks files
 * are all read. binary_path is passed to the symbolizer (may be NULL).
 * Returns 0, or -errno with *err naming the problem and *err_file the file
 * it is about (both static or owned by nothing the caller frees; valid
 * until the next call). On failure nothing needs releasing. */
int prof_run_load(struct prof_run *run, const char *path, const char *binary_path,
		  const char **err, const char **err_file);

void prof_run_release(struct prof_run *run);

/* The name to show for an allocator entry point ("operator new[]"...). */
const char *prof_alloc_fn_name(int fn);

#endif
