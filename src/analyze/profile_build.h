/*
 * profile_build — how a profile is filled: the calls load.c (and a test
 * that builds a profile by hand) use to add strings, frames and samples
 * to the model of profile.h. Not for views: they only read a profile.
 *
 * Everything added belongs to the profile and stays valid until
 * prof_profile_release(); frames are interned (an equal frame gets the
 * id it already has), so the strings in a frame must come from
 * prof_build_intern() of the same profile.
 */
#ifndef HEAPTRAIL_ANALYZE_PROFILE_BUILD_H
#define HEAPTRAIL_ANALYZE_PROFILE_BUILD_H

#include "analyze/profile.h"

/* An empty profile (p zeroed, its private tables made). 0 or -ENOMEM. */
int prof_build_init(struct prof_profile *p);

/* The profile's copy of s (NULL stays NULL); NULL on OOM sets *oom. */
const char *prof_build_intern(struct prof_profile *p, const char *s, bool *oom);

/* The id of a frame equal to *f (its strings interned in p), added when
 * new. Returns -1 on OOM. */
int64_t prof_build_frame(struct prof_profile *p, const struct prof_frame *f);

/* n uint32_t that live as long as the profile; NULL on OOM. */
uint32_t *prof_build_ids(struct prof_profile *p, size_t n);

/* A new zeroed sample at the end of p->samples (which may move); NULL on
 * OOM. The caller fills it and adds its values to p->total. */
struct prof_sample *prof_build_sample(struct prof_profile *p);

/* Adds a symbolization note (copied). 0 or -ENOMEM. */
int prof_build_warning(struct prof_profile *p, const char *s);

#endif
