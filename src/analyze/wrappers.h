/*
 * wrappers — allocation wrappers found in a series of dumps and folded
 * into their callers, as pprof's -hide would, so that a site is the code
 * that wanted the memory and not the wrapper everyone calls (redis'
 * zmalloc, git's xmalloc, glib's g_malloc, PostgreSQL's palloc).
 *
 * A function is a wrapper when, in every stack of every dump, it is the
 * frame that called the allocator (it never calls anything else that
 * allocates), it has a name (a symbolized frame), and at least
 * PROF_WRAPPER_MIN_CALLERS different functions call it. A helper with one
 * or two callers stays a site of its own.
 */
#ifndef HEAPTRAIL_ANALYZE_WRAPPERS_H
#define HEAPTRAIL_ANALYZE_WRAPPERS_H

#include "analyze/profile.h"

#define PROF_WRAPPER_MIN_CALLERS 3

struct prof_wrapper {
	char *name;
	size_t callers;
};

/* Finds the wrappers of the n profiles and hides their frames in each.
 * *out gets them (name order; free with prof_wrappers_release), *nout
 * their count. 0 or -ENOMEM (the profiles may then be part-folded). */
int prof_fold_wrappers(struct prof_profile *ps, size_t n, struct prof_wrapper **out, size_t *nout);
void prof_wrappers_release(struct prof_wrapper *w, size_t n);

#endif
