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

/* Lists the dumps (*.heap files) in dir, or the given paths, sorted by
 * the time they were taken (their ms, else their sequence number in the
 * name). Each is loaded with o. On success *out is an array of *n
 * profiles owned by the caller (release each, then free the array). */
int prof_series_load(char **paths, size_t npaths, const struct prof_load_opts *o,
		     struct prof_profile **out, size_t *n, const char **err,
		     const char **err_file);

#endif
