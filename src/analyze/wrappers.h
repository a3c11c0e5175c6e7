/*
 * wrappers — allocation wrappers found in a series of dumps, for growth
 * to fold into their callers (growth.h), as pprof's -hide would, so that
 * a site is the code that wanted the memory and not the wrapper everyone
 * calls (redis' zmalloc, git's xmalloc, glib's g_malloc, PostgreSQL's
 * palloc).
 *
 * The rule, on the first frames of every stack of every dump (function
 * names; a frame with no name is never a wrapper):
 *   - a function that is, in every stack, the frame that called the
 *     allocator may be a wrapper;
 *   - so may a function that calls nothing but the allocator and such
 *     functions, when one of those is called by nothing but functions
 *     like it: a chain of wrappers (redis' zmalloc over the helper
 *     ztrymalloc_usable_internal, inlined or not), at most
 *     PROF_WRAPPER_CHAIN of them one above another;
 *   - either is a wrapper when its stacks reach at least
 *     PROF_WRAPPER_MIN_CALLERS different callers, counted past the
 *     wrappers above it (the helper under a wrapper counts the wrapper's
 *     callers), or when only wrappers call it.
 * A helper with one or two callers stays a site of its own, and so does
 * a function over a wrapper that other code calls too (a constructor
 * that calls zmalloc, beside the rest of the program).
 */
#ifndef HEAPTRAIL_ANALYZE_WRAPPERS_H
#define HEAPTRAIL_ANALYZE_WRAPPERS_H

#include "analyze/profile.h"

#define PROF_WRAPPER_MIN_CALLERS 3
#define PROF_WRAPPER_CHAIN 3

struct prof_wrapper {
	char *name;
	size_t callers;         /* the different callers reached through it */
};

/* A stack's first frames, what prof_wrappers_find needs of it: fn[0]
 * called the allocator, fn[k + 1] called fn[k]; NULL past the stack's
 * root. Bit k of unnamed: fn[k] is an address, not a function's name.
 * high: an entry of fn[0] alone, a function seen PROF_WRAPPER_CHAIN or
 * more frames above a stack's leaf (so no wrapper). */
struct prof_wrapper_stack {
	const char *fn[PROF_WRAPPER_CHAIN + 1];
	uint8_t unnamed;
	bool high;
};

/* The first frames of p's sample s into *w (p's strings), a frame of
 * the same function as the one below it taken as that one (recursion;
 * a function inlined into itself); at, when not NULL, gets the index in
 * s->frames of each of w->fn (room for PROF_WRAPPER_CHAIN + 1). */
void prof_wrapper_stack_of(const struct prof_profile *p, const struct prof_sample *s,
			   struct prof_wrapper_stack *w, uint32_t *at);

/* What of one dump's n stacks (prof_wrapper_stack_of) can matter to
 * prof_wrappers_find: each stack is cut after its first frame that no
 * series with this dump in it could take for a wrapper, and the names
 * cut off go to cut (room for n * (PROF_WRAPPER_CHAIN + 1); repeats),
 * to be given to prof_wrappers_find as high entries. So a series' dumps
 * keep little. 0 or -ENOMEM. */
int prof_wrapper_trim(struct prof_wrapper_stack *s, size_t n, const char **cut, size_t *ncut);

/* The wrappers the stacks of every dump of a series show: each stack's
 * prof_wrapper_stack_of, and a high entry for each function seen that
 * far up (in any order, repeats allowed; s is sorted in place), so a
 * series' dumps can be read one at a time and only this kept. *out gets
 * them in name order (free with prof_wrappers_release), *nout their
 * count. 0 or -ENOMEM. */
int prof_wrappers_find(struct prof_wrapper_stack *s, size_t n, struct prof_wrapper **out,
		       size_t *nout);

/* Sorts s and keeps each stack once (by name: they may come from
 * different dumps); returns how many are left. */
size_t prof_wrapper_stacks_unique(struct prof_wrapper_stack *s, size_t n);

/* Whether function is one of w (name order). */
bool prof_is_wrapper(const struct prof_wrapper *w, size_t n, const char *function);

/* The frame of s a folded stack counts for: the first that is no
 * wrapper, or 0 (the leaf) when every frame s has is one. */
size_t prof_wrapper_site(const struct prof_wrapper *w, size_t n,
			 const struct prof_wrapper_stack *s);

void prof_wrappers_release(struct prof_wrapper *w, size_t n);

#endif
