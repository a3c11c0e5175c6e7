/* wrappers.c — allocation wrappers found from the first frames of a
 * series' stacks (see wrappers.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/wrappers.h"

#define W (PROF_WRAPPER_CHAIN + 1)

void prof_wrapper_stack_of(const struct prof_profile *p, const struct prof_sample *s,
			   struct prof_wrapper_stack *w, uint32_t *at)
{
	memset(w, 0, sizeof *w);
	int k = 0;
	for (uint32_t i = 0; i < s->nframes && k < W; i++) {
		const struct prof_frame *f = &p->frames[s->frames[i]];
		if (k && !strcmp(f->function, w->fn[k - 1]))
			continue;  /* recursion, or a function inlined into itself */
		w->fn[k] = f->function;
		if (!f->symbolized)
			w->unnamed |= 1u << k;
		if (at)
			at[k] = i;
		k++;
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_stacks(const void *a, const void *b)
{
	const struct prof_wrapper_stack *x = a, *y = b;
	for (int k = 0; k < W; k++) {
		if (!x->fn[k] || !y->fn[k]) {
			if (x->fn[k] || y->fn[k])
				return x->fn[k] ? 1 : -1;
			break;
		}
		int c = strcmp(x->fn[k], y->fn[k]);
		if (c)
			return c;
	}
	if (x->unnamed != y->unnamed)
		return x->unnamed < y->unnamed ? -1 : 1;
	return (x->high > y->high) - (x->high < y->high);
}

size_t prof_wrapper_stacks_unique(struct prof_wrapper_stack *s, size_t n)
{
	qsort(s, n, sizeof *s, cmp_stacks);
	size_t kept = 0;
	for (size_t i = 0; i < n; i++)
		if (!kept || cmp_stacks(&s[i], &s[kept - 1]))
			s[kept++] = s[i];
	return kept;
}

/* A function's id: its index in the sorted names. */
static uint32_t id_of(const char *const *names, size_t n, const char *s)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(s, names[mid]);
		if (!c)
			return (uint32_t)mid;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return UINT32_MAX;  /* not reached: every name is in names */
}

struct edge {
	uint32_t a, b;
};

static int cmp_edge(const void *x, const void *y)
{
	const struct edge *e = x, *f = y;
	if (e->a != f->a)
		return e->a < f->a ? -1 : 1;
	return (e->b > f->b) - (e->b < f->b);
}

/* Sorts e and keeps each once; returns how many are left. */
static size_t unique_edges(struct edge *e, size_t n)
{
	qsort(e, n, sizeof *e, cmp_edge);
	size_t kept = 0;
	for (size_t i = 0; i < n; i++)
		if (!kept || cmp_edge(&e[i], &e[kept - 1]))
			e[kept++] = e[i];
	return kept;
}

enum { NONE = -1 };

struct fn {
	int layer;              /* NONE, or 0 (calls only the allocator) up */
	bool above, high, unnamed;
	bool pass;              /* this round: calls only layered functions */
	bool shielded;          /* this round: every caller is pass */
	bool wrapper;
	bool called, only_wrappers;  /* while deciding: called, by wrappers only */
	size_t callers;
};

/* The functions of a set of stacks, by id (the index of their sorted
 * names), and who calls whom. */
struct graph {
	const char **names;
	size_t nn;
	uint32_t *ids;          /* W per stack; UINT32_MAX past the root */
	struct fn *fs;
	struct edge *calls;     /* (caller, callee), each once */
	size_t ne;
	int top;                /* the highest layer */
};

static void graph_release(struct graph *g)
{
	free(g->names);
	free(g->ids);
	free(g->fs);
	free(g->calls);
}

static int graph_build(struct graph *g, const struct prof_wrapper_stack *s, size_t n)
{
	memset(g, 0, sizeof *g);
	g->names = malloc((n * W + 1) * sizeof *g->names);
	g->ids = malloc((n * W + 1) * sizeof *g->ids);
	g->calls = malloc((n * W + 1) * sizeof *g->calls);
	if (!g->names || !g->ids || !g->calls)
		return -ENOMEM;
	size_t nn = 0, ne = 0;
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < W && s[i].fn[k]; k++)
			g->names[nn++] = s[i].fn[k];
	qsort(g->names, nn, sizeof *g->names, cmp_str);
	size_t kept = 0;
	for (size_t i = 0; i < nn; i++)
		if (!kept || strcmp(g->names[i], g->names[kept - 1]))
			g->names[kept++] = g->names[i];
	g->nn = nn = kept;
	if (!(g->fs = calloc(nn + 1, sizeof *g->fs)))
		return -ENOMEM;
	for (size_t f = 0; f < nn; f++)
		g->fs[f].layer = NONE;
	for (size_t i = 0; i < n; i++) {
		uint32_t *id = &g->ids[i * W];
		for (int k = 0; k < W; k++) {
			id[k] = s[i].fn[k] ? id_of(g->names, nn, s[i].fn[k]) : UINT32_MAX;
			if (id[k] == UINT32_MAX)
				continue;
			struct fn *f = &g->fs[id[k]];
			if (s[i].high || k == W - 1)
				f->high = true;
			if (k)
				f->above = true;
			if (s[i].unnamed & (1u << k))
				f->unnamed = true;
			if (k && id[k] != id[k - 1])
				g->calls[ne++] = (struct edge){ id[k], id[k - 1] };
		}
	}
	g->ne = unique_edges(g->calls, ne);
	return 0;
}

/* Layer 0: the functions that called the allocator in every stack.
 * Layer L + 1: the functions that call nothing but the allocator and
 * layered functions (pass), when shield, one of these a function of
 * layer L that only such functions call (shielded); else any. */
static void graph_layer(struct graph *g, bool shield)
{
	struct fn *fs = g->fs;
	for (size_t f = 0; f < g->nn; f++)
		if (!fs[f].above && !fs[f].high && !fs[f].unnamed)
			fs[f].layer = 0;
	for (int L = 0; L + 1 < PROF_WRAPPER_CHAIN; L++) {
		for (size_t f = 0; f < g->nn; f++) {
			fs[f].pass = fs[f].layer == NONE && !fs[f].high && !fs[f].unnamed;
			fs[f].shielded = !shield || fs[f].layer == L;
		}
		for (size_t e = 0; e < g->ne; e++)
			if (fs[g->calls[e].b].layer == NONE)
				fs[g->calls[e].a].pass = false;
		for (size_t e = 0; e < g->ne; e++)
			if (!fs[g->calls[e].a].pass)
				fs[g->calls[e].b].shielded = false;
		bool more = false;
		for (size_t e = 0; e < g->ne; e++) {
			struct fn *a = &fs[g->calls[e].a];
			if (a->pass && (!shield || fs[g->calls[e].b].shielded)) {
				a->pass = false;  /* once */
				a->layer = L + 1;
				more = true;
			}
		}
		if (!more)
			break;
		g->top = L + 1;
	}
}

int prof_wrapper_trim(struct prof_wrapper_stack *s, size_t n, const char **cut, size_t *ncut)
{
	struct graph g;
	int rc = graph_build(&g, s, n);
	*ncut = 0;
	if (rc)
		goto out;
	graph_layer(&g, false);
	for (size_t i = 0; i < n; i++) {
		const uint32_t *id = &g.ids[i * W];
		int k = 0;
		while (k < W && id[k] != UINT32_MAX && g.fs[id[k]].layer != NONE)
			k++;
		for (int m = k + 1; m < W && s[i].fn[m]; m++) {
			cut[(*ncut)++] = s[i].fn[m];
			s[i].fn[m] = NULL;
			s[i].unnamed &= (uint8_t)~(1u << m);
		}
	}
out:
	graph_release(&g);
	return rc;
}

int prof_wrappers_find(struct prof_wrapper_stack *s, size_t n, struct prof_wrapper **out,
		       size_t *nout)
{
	struct prof_wrapper *w = NULL;
	struct edge *sites = NULL;  /* (function, its site) */
	size_t nw = 0;
	struct graph g;
	n = prof_wrapper_stacks_unique(s, n);
	int rc = graph_build(&g, s, n);
	*out = NULL;
	*nout = 0;
	if (rc)
		goto out;
	rc = -ENOMEM;
	graph_layer(&g, true);
	const char **names = g.names;
	const uint32_t *ids = g.ids;
	struct fn *fs = g.fs;
	size_t nn = g.nn;
	int top = g.top;
	/* the callers, counted past the wrappers above, the highest layer
	 * first (whatever is above a function is in a higher layer or in
	 * none) */
	if (!(sites = malloc((n * W + 1) * sizeof *sites)))
		goto out;
	for (int L = top; L >= 0; L--) {
		size_t ns = 0;
		for (size_t i = 0; i < n; i++) {
			const uint32_t *id = &ids[i * W];
			for (int k = 0; k < W && id[k] != UINT32_MAX; k++) {
				if (fs[id[k]].layer != L)
					continue;
				int q = k + 1;
				while (q < W && id[q] != UINT32_MAX && (id[q] == id[k] || fs[id[q]].wrapper))
					q++;
				if (q < W && id[q] != UINT32_MAX)
					sites[ns++] = (struct edge){ id[k], id[q] };
			}
		}
		ns = unique_edges(sites, ns);
		for (size_t e = 0; e < ns; e++)
			fs[sites[e].a].callers++;
		/* a function only wrappers call is one too, whatever its count
		 * (the wrappers above it are what its stacks count for) */
		for (size_t f = 0; f < nn; f++) {
			fs[f].called = false;
			fs[f].only_wrappers = true;
		}
		for (size_t e = 0; e < g.ne; e++) {
			struct fn *b = &fs[g.calls[e].b];
			b->called = true;
			b->only_wrappers &= fs[g.calls[e].a].wrapper;
		}
		for (size_t f = 0; f < nn; f++)
			if (fs[f].layer == L && (fs[f].callers >= PROF_WRAPPER_MIN_CALLERS ||
						 (fs[f].called && fs[f].only_wrappers))) {
				fs[f].wrapper = true;
				nw++;
			}
	}
	if (!(w = calloc(nw + 1, sizeof *w)))
		goto out;
	nw = 0;
	for (size_t f = 0; f < nn; f++)  /* names are sorted */
		if (fs[f].wrapper) {
			w[nw].callers = fs[f].callers;
			if (!(w[nw++].name = strdup(names[f]))) {
				prof_wrappers_release(w, nw - 1);
				w = NULL;
				nw = 0;
				goto out;
			}
		}
	*out = w;
	*nout = nw;
	rc = 0;
out:
	free(sites);
	graph_release(&g);
	return rc;
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

size_t prof_wrapper_site(const struct prof_wrapper *w, size_t n,
			 const struct prof_wrapper_stack *s)
{
	for (size_t k = 0; k < W && s->fn[k]; k++)
		if ((s->unnamed & (1u << k)) || !prof_is_wrapper(w, n, s->fn[k]))
			return k;
	return 0;
}

void prof_wrappers_release(struct prof_wrapper *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(w[i].name);
	free(w);
}
