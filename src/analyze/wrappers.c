/* wrappers.c — allocation wrappers found from the pairs of a series'
 * stacks (see wrappers.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/wrappers.h"

static int cmp_pairs(const void *a, const void *b)
{
	const struct prof_wrapper_pair *x = a, *y = b;
	int c = strcmp(x->leaf, y->leaf);
	if (c)
		return c;
	if (!x->caller || !y->caller)  /* the (f, NULL) pairs first */
		return (x->caller != NULL) - (y->caller != NULL);
	return strcmp(x->caller, y->caller);
}

static int push(struct prof_wrapper_pair **ps, size_t *n, size_t *cap, const char *leaf,
		const char *caller)
{
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 1024;
		struct prof_wrapper_pair *np = realloc(*ps, nc * sizeof *np);
		if (!np)
			return -ENOMEM;
		*ps = np;
		*cap = nc;
	}
	(*ps)[(*n)++] = (struct prof_wrapper_pair){ leaf, caller };
	return 0;
}

/* Sorts pairs and keeps each once; returns how many are left. */
static size_t unique(struct prof_wrapper_pair *pairs, size_t n)
{
	qsort(pairs, n, sizeof *pairs, cmp_pairs);
	size_t kept = 0;
	for (size_t i = 0; i < n; i++)
		if (!kept || cmp_pairs(&pairs[i], &pairs[kept - 1]))
			pairs[kept++] = pairs[i];
	return kept;
}

int prof_wrapper_pairs(const struct prof_profile *p, struct prof_wrapper_pair **out, size_t *nout)
{
	struct prof_wrapper_pair *pairs = NULL;
	size_t np = 0, cap = 0;
	*out = NULL;
	*nout = 0;
	/* the frames seen above a leaf */
	bool *above = calloc(p->nframes ? p->nframes : 1, sizeof *above);
	if (!above)
		return -ENOMEM;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct prof_sample *s = &p->samples[i];
		for (uint32_t k = 1; k < s->nframes; k++)
			above[s->frames[k]] = true;
		if (!s->nframes || !p->frames[s->frames[0]].symbolized)
			continue;  /* an address: nothing to name */
		if (push(&pairs, &np, &cap, p->frames[s->frames[0]].function,
			 s->nframes > 1 ? p->frames[s->frames[1]].function : ""))
			goto nomem;
	}
	for (size_t f = 0; f < p->nframes; f++)
		if (above[f] && push(&pairs, &np, &cap, p->frames[f].function, NULL))
			goto nomem;
	free(above);
	*out = pairs;
	*nout = unique(pairs, np);
	return 0;
nomem:
	free(above);
	free(pairs);
	return -ENOMEM;
}

int prof_wrappers_find(struct prof_wrapper_pair *pairs, size_t np, struct prof_wrapper **out,
		       size_t *nout)
{
	struct prof_wrapper *w = NULL;
	size_t nw = 0;
	*out = NULL;
	*nout = 0;
	np = unique(pairs, np);
	for (size_t i = 0; i < np;) {
		size_t j = i, callers = 0;
		bool above = false;
		for (; j < np && !strcmp(pairs[j].leaf, pairs[i].leaf); j++) {
			if (!pairs[j].caller)
				above = true;
			else if (*pairs[j].caller && strcmp(pairs[j].caller, pairs[i].leaf))
				callers++;  /* pairs are unique: each caller once */
		}
		if (!above && callers >= PROF_WRAPPER_MIN_CALLERS) {
			struct prof_wrapper *nw2 = realloc(w, (nw + 1) * sizeof *w);
			if (!nw2 || !(nw2[nw].name = strdup(pairs[i].leaf))) {
				prof_wrappers_release(nw2 ? nw2 : w, nw);
				return -ENOMEM;
			}
			w = nw2;
			w[nw++].callers = callers;
		}
		i = j;
	}
	*out = w;
	*nout = nw;
	return 0;
}

bool prof_is_wrapper(const struct prof_wrapper *w, size_t n, const char *function)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(function, w[mid].name);
		if (!c)
			return true;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return false;
}

void prof_wrappers_release(struct prof_wrapper *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(w[i].name);
	free(w);
}
