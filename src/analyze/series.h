/*
 * series — the dumps of one run, loaded with load.h and sorted by time:
 * the input of growth.h.
 */
#ifndef HEAPTRAIL_ANALYZE_SERIES_H
#define HEAPTRAIL_ANALYZE_SERIES_H

#include <stdbool.h>

#include "analyze/load.h"

/* The names in dir that keep(name, arg) accepts, sorted, in *names (*n of
 * them; the caller frees each and the array, also on failure). Returns 0,
 * or -errno from opendir (-ENOTDIR: not a directory), or -ENOMEM. */
int prof_dir_names(const char *dir, bool (*keep)(const char *name, long arg), long arg,
		   char ***names, size_t *n);

/* The dumps (*.heap files) in dir, or the given paths, read one at a
 * time with o, so a long series is never held whole: each is handed to
 * v->each(ctx, p, i) as soon as it is read (i: 0, 1, ... in the order
 * found), which keeps what it needs of it before it is released; one
 * that v->known says it kept from an earlier call (true, and when it
 * was taken in *ms) is not read again. *order (the caller's to free)
 * gets the dumps' i sorted by the time they were taken (their ms, else
 * their sequence number in the name), *n their count. On failure,
 * -errno and why (whycap bytes, the caller's) says what, naming the
 * file at fault ("cannot read 'F': ..."), or what each returned (why:
 * "out of memory" or its strerror). */
struct prof_series_visit {
	bool (*known)(void *ctx, const char *path, size_t i, int64_t *ms); /* may be NULL */
	int (*each)(void *ctx, struct prof_profile *p, size_t i);
	void *ctx;
};
int prof_series_each(char **paths, size_t npaths, const struct prof_load_opts *o,
		     const struct prof_series_visit *v, size_t **order, size_t *n, char *why,
		     size_t whycap);

/* The pid in "heaptrail.PID.timeline" (a path or a name), or -1. */
long prof_timeline_pid(const char *name);
/* Whether a file name is a dump of process pid, heaptrail.PID.SEQ.KIND.heap
 * (any *.heap when pid is -1); prof_dir_names' keep. */
bool prof_is_dump_of(const char *name, long pid);
/* Whether a file name is a timeline, heaptrail.PID.timeline (pid unused). */
bool prof_is_timeline(const char *name, long pid);
/* When the dump at path was written by an attached agent (its directory
 * holds heaptrail.PID.attach), "since attach at TIME UTC" into out, and
 * 0; else -1. The analyzer's views print it beside the dump's times. */
int prof_attach_label(const char *path, long pid, char *out, size_t cap);

#endif
