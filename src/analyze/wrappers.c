/* wrappers.c — allocation wrappers folded into their callers (see
 * wrappers.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/wrappers.h"

struct pair {
	const char *leaf, *caller;  /* caller NULL: the leaf appears above a leaf */
};

static int cmp_pairs(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;
	int c = strcmp(x->leaf, y->leaf);
	if (c)
		return c;
	if (!x->caller || !y->caller)  /* the (f, NULL) pairs first */
		return (x->caller != NULL) - (y->caller != NULL);
	return strcmp(x->caller, y->caller);
}

static int push(struct pair **ps, size_t *n, size_t *cap, const char *leaf, const char *caller)
{
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 1024;
		struct pair *np = realloc(*ps, nc * sizeof *np);
		if (!np)
			return -ENOMEM;
		*ps = np;
		*cap = nc;
	}
	(*ps)[(*n)++] = (struct pair){ leaf, caller };
	return 0;
}

int prof_fold_wrappers(struct prof_profile *ps, size_t n, struct prof_wrapper **out, size_t *nout)
{
	struct pair *pairs = NULL;
	size_t np = 0, cap = 0, nw = 0;
	struct prof_wrapper *w = NULL;
	bool *hidden = NULL;
	int rc = -ENOMEM;
	*out = NULL;
	*nout = 0;
	/* (leaf, caller) for each stack's allocator caller, and (f, NULL)
	 * for every function seen above the leaf: such a function is no
	 * wrapper. Each dump's pairs are made unique before the next dump's
	 * come: a series of big dumps repeats the same few */
	for (size_t d = 0; d < n; d++) {
		const struct prof_profile *p = &ps[d];
		size_t start = np;
		free(hidden);
		if (!(hidden = calloc(p->nframes ? p->nframes : 1, sizeof *hidden)))
			goto out;  /* here: the frames seen above a leaf */
		for (size_t i = 0; i < p->nsamples; i++) {
			const struct prof_sample *s = &p->samples[i];
			for (uint32_t k = 1; k < s->nframes; k++)
				hidden[s->frames[k]] = true;
			if (!s->nframes || !p->frames[s->frames[0]].symbolized)
				continue;  /* an address: nothing to name */
			if (push(&pairs, &np, &cap, p->frames[s->frames[0]].function,
				 s->nframes > 1 ? p->frames[s->frames[1]].function : ""))
				goto out;
		}
		for (size_t f = 0; f < p->nframes; f++)
			if (hidden[f] && push(&pairs, &np, &cap, p->frames[f].function, NULL))
				goto out;
		qsort(pairs + start, np - start, sizeof *pairs, cmp_pairs);
		size_t kept = start;
		for (size_t i = start; i < np; i++)
			if (i == start || cmp_pairs(&pairs[i], &pairs[kept - 1]))
				pairs[kept++] = pairs[i];
		np = kept;
	}
	qsort(pairs, np, sizeof *pairs, cmp_pairs);
	for (size_t i = 0; i < np;) {
		size_t j = i, callers = 0;
		bool above = false;
		for (; j < np && !strcmp(pairs[j].leaf, pairs[i].leaf); j++) {
			if (!pairs[j].caller)
				above = true;
			else if (*pairs[j].caller && strcmp(pairs[j].caller, pairs[i].leaf) &&
				 (j == i || !pairs[j - 1].caller || strcmp(pairs[j].caller, pairs[j - 1].caller)))
				callers++;
		}
		if (!above && callers >= PROF_WRAPPER_MIN_CALLERS) {
			struct prof_wrapper *nw2 = realloc(w, (nw + 1) * sizeof *w);
			if (!nw2)
				goto out;
			w = nw2;
			if (!(w[nw].name = strdup(pairs[i].leaf)))
				goto out;
			w[nw++].callers = callers;
		}
		i = j;
	}
	for (size_t d = 0; nw && d < n; d++) {
		struct prof_profile *p = &ps[d];
		free(hidden);
		if (!(hidden = calloc(p->nframes ? p->nframes : 1, sizeof *hidden)))
			goto out;
		for (size_t f = 0; f < p->nframes; f++)
			for (size_t k = 0; k < nw && !hidden[f]; k++)
				hidden[f] = !strcmp(p->frames[f].function, w[k].name);
		if (prof_profile_hide_frames(p, hidden))
			goto out;
	}
	*out = w;
	*nout = nw;
	w = NULL;
	nw = 0;
	rc = 0;
out:
	free(hidden);
	free(pairs);
	prof_wrappers_release(w, nw);
	return rc;
}

void prof_wrappers_release(struct prof_wrapper *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(w[i].name);
	free(w);
}
