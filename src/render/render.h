/*
 * render — the report model (analyze/report.h) as text for people and as
 * JSON for programs, and the profile model (analyze/profile.h) as the
 * formats other tools read. Renderers write to a stream they are given,
 * or return bytes, and never open files.
 */
#ifndef HEAPTRAIL_RENDER_H
#define HEAPTRAIL_RENDER_H

#include <stdio.h>

#include "analyze/report.h"

struct prof_supps;
struct prof_profile;

struct render_text_opts {
	bool summary_only;      /* no records, just each process's summary */
	unsigned kinds;         /* PROF_KIND_BIT mask of records to print; 0 = default */
	bool gen_suppressions;  /* print a ready suppression after each record */
	const struct prof_supps *supps;  /* to name a suppression whose limit broke */
};

/* The valgrind-like report: per process, each record with its stack, then
 * the summary. opts may be NULL. */
void render_text(FILE *out, const struct prof_run *run, const struct render_text_opts *opts);

/* The JSON report: one object for a single process, an array of objects
 * for several. */
void render_json(FILE *out, const struct prof_run *run);

/* p as a gzip-compressed pprof profile (proto/profile.proto: a .pb.gz
 * file for `pprof`), with pprof's heap sample types alloc_objects,
 * alloc_space, inuse_objects, inuse_space and default_value (an enum
 * prof_value) as the one pprof shows by default. On success *out is a
 * malloc'd buffer of *len bytes that the caller frees; p is not changed.
 * Returns 0, -ENOMEM, or -EINVAL when default_value is out of range or p
 * has a base profile merged in (its samples have no locations). */
int render_pprof(const struct prof_profile *p, int default_value, char **out, size_t *len);

/* 1234567 -> "1,234,567" into buf (at least 32 bytes); returns buf. */
const char *render_thousands(char *buf, uint64_t v);

#endif
