/*
 * wrappers — allocation wrappers found in a series of dumps, for growth
 * to fold into their callers (growth.h), as pprof's -hide would, so that
 * a site is the code that wanted the memory and not the wrapper everyone
 * calls (redis' zmalloc, git's xmalloc, glib's g_malloc, PostgreSQL's
 * palloc).
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

/* (leaf, caller): a stack's frame that called the allocator and the
 * frame that called it ("" when none); caller NULL: leaf was seen above
 * a stack's leaf, so it is no wrapper. */
struct prof_wrapper_pair {
	const char *leaf, *caller;
};

/* The pairs of p's stacks, each once (function names; the strings are
 * p's): what prof_wrappers_find needs of a dump, so a series' dumps can
 * be read one at a time. *out is the caller's to free. 0 or -ENOMEM. */
int prof_wrapper_pairs(const struct prof_profile *p, struct prof_wrapper_pair **out, size_t *nout);

/* The wrappers the pairs of every dump of a series show (pairs is
 * sorted in place). *out gets them in name order (free with
 * prof_wrappers_release), *nout their count. 0 or -ENOMEM. */
int prof_wrappers_find(struct prof_wrapper_pair *pairs, size_t n, struct prof_wrapper **out,
		       size_t *nout);

/* Whether function is one of w (name order). */
bool prof_is_wrapper(const struct prof_wrapper *w, size_t n, const char *function);

void prof_wrappers_release(struct prof_wrapper *w, size_t n);

#endif
