/* aggregate.c — flat and cumulative sums by function or line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/aggregate.h"

static int cmp_key(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int sort_value;
static enum prof_sort sort_kind;

static int64_t abs64(int64_t x)
{
	return x < 0 ? -x : x;
}

static int cmp_rows(const void *a, const void *b)
{
	const struct prof_row *x = a, *y = b;
	int64_t kx, ky;
	switch (sort_kind) {
	case PROF_SORT_CUM:
		kx = abs64(x->cum[sort_value]);
		ky = abs64(y->cum[sort_value]);
		break;
	case PROF_SORT_GROWTH:
		kx = x->flat[sort_value];
		ky = y->flat[sort_value];
		break;
	default:
		kx = abs64(x->flat[sort_value]);
		ky = abs64(y->flat[sort_value]);
		if (kx == ky) {
			kx = abs64(x->cum[sort_value]);
			ky = abs64(y->cum[sort_value]);
		}
	}
	if (kx != ky)
		return kx > ky ? -1 : 1;
	return strcmp(x->name, y->name);
}

int prof_table_build(struct prof_table *t, const struct prof_profile *p, bool lines,
		     int v, enum prof_sort sort)
{
	memset(t, 0, sizeof *t);
	/* frame id -> row; rows keyed by name through a sorted name list */
	uint32_t *row_of = malloc((p->nframes + 1) * sizeof *row_of);
	size_t *stamp = NULL;
	struct { const char *key; uint32_t frame; } *keys = malloc((p->nframes + 1) * sizeof *keys);
	int rc = -ENOMEM;
	if (!row_of || !keys)
		goto out;
	t->names = calloc(p->nframes + 1, sizeof *t->names);
	if (!t->names)
		goto out;
	for (size_t i = 0; i < p->nframes; i++) {
		char buf[4096];
		if (lines) {
			t->names[i] = strdup(prof_frame_name(&p->frames[i], true, buf, sizeof buf));
			if (!t->names[i])
				goto out;
			t->nnames = i + 1;
		}
		keys[i].key = lines ? t->names[i] : p->frames[i].function;
		keys[i].frame = (uint32_t)i;
	}
	/* group equal names: sort frame ids by key */
	qsort(keys, p->nframes, sizeof *keys, cmp_key);
	t->rows = calloc(p->nframes + 1, sizeof *t->rows);
	stamp = calloc(p->nframes + 1, sizeof *stamp);
	if (!t->rows || !stamp)
		goto out;
	for (size_t i = 0; i < p->nframes; i++) {
		if (!i || strcmp(keys[i].key, keys[i - 1].key)) {
			t->rows[t->nrows].name = keys[i].key;
			t->rows[t->nrows].frame = keys[i].frame;
			t->rows[t->nrows].id = (uint32_t)t->nrows;
			t->nrows++;
		}
		row_of[keys[i].frame] = (uint32_t)(t->nrows - 1);
	}
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct prof_sample *s = &p->samples[i];
		if (!s->nframes)
			continue;
		struct prof_row *leaf = &t->rows[row_of[s->frames[0]]];
		for (int k = 0; k < PROF_NVALUES; k++) {
			leaf->flat[k] += s->v[k];
			leaf->flat_var[k] += s->var[k];
			leaf->flat_n[k] += abs64(s->nsampled[k]);
		}
		for (uint32_t f = 0; f < s->nframes; f++) {
			uint32_t r = row_of[s->frames[f]];
			if (stamp[r] == i + 1)
				continue;
			stamp[r] = i + 1;
			for (int k = 0; k < PROF_NVALUES; k++) {
				t->rows[r].cum[k] += s->v[k];
				t->rows[r].cum_var[k] += s->var[k];
				t->rows[r].cum_n[k] += abs64(s->nsampled[k]);
			}
		}
	}
	sort_value = v;
	sort_kind = sort;
	qsort(t->rows, t->nrows, sizeof *t->rows, cmp_rows);
	/* stamp is free again: the new place of each row */
	for (size_t r = 0; r < t->nrows; r++)
		stamp[t->rows[r].id] = r;
	for (size_t f = 0; f < p->nframes; f++)
		row_of[f] = (uint32_t)stamp[row_of[f]];
	t->row_of_frame = row_of;
	row_of = NULL;
	rc = 0;
out:
	free(row_of);
	free(keys);
	free(stamp);
	if (rc)
		prof_table_release(t);
	return rc;
}

void prof_table_release(struct prof_table *t)
{
	for (size_t i = 0; i < t->nnames; i++)
		free(t->names[i]);
	free(t->names);
	free(t->rows);
	free(t->row_of_frame);
	memset(t, 0, sizeof *t);
}

struct stack_edge {
	uint32_t from, to;
	size_t stack;
	int64_t v;
};

static int cmp_stack_edges(const void *a, const void *b)
{
	const struct stack_edge *x = a, *y = b;
	if (x->from != y->from)
		return x->from < y->from ? -1 : 1;
	if (x->to != y->to)
		return x->to < y->to ? -1 : 1;
	return x->stack < y->stack ? -1 : x->stack > y->stack;
}

int prof_table_edges(const struct prof_table *t, const struct prof_profile *p, int v,
		     const bool *want, struct prof_edge **out, size_t *n)
{
	struct stack_edge *es = NULL;
	size_t nes = 0, cap = 0;
	*out = NULL;
	*n = 0;
	/* every (caller, callee, stack) once a frame pair is seen, then
	 * sorted so that a stack passing through a pair twice (recursion
	 * through another function) is counted once */
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct prof_sample *s = &p->samples[i];
		if (!s->v[v])
			continue;
		for (uint32_t k = 0; k + 1 < s->nframes; k++) {
			uint32_t to = t->row_of_frame[s->frames[k]];
			uint32_t from = t->row_of_frame[s->frames[k + 1]];
			if (from == to || (want && !want[from] && !want[to]))
				continue;
			if (nes == cap) {
				cap = cap ? 2 * cap : 1024;
				struct stack_edge *ne = realloc(es, cap * sizeof *ne);
				if (!ne) {
					free(es);
					return -ENOMEM;
				}
				es = ne;
			}
			es[nes++] = (struct stack_edge){ from, to, i, s->v[v] };
		}
	}
	if (!nes)
		return 0;
	qsort(es, nes, sizeof *es, cmp_stack_edges);
	struct prof_edge *r = malloc(nes * sizeof *r);
	if (!r) {
		free(es);
		return -ENOMEM;
	}
	size_t m = 0;
	for (size_t i = 0; i < nes; i++) {
		bool same_pair = i && es[i].from == es[i - 1].from && es[i].to == es[i - 1].to;
		if (same_pair && es[i].stack == es[i - 1].stack)
			continue;
		if (!same_pair) {
			if (m && !r[m - 1].v)
				m--;
			r[m++] = (struct prof_edge){ es[i].from, es[i].to, 0 };
		}
		r[m - 1].v += es[i].v;
	}
	if (m && !r[m - 1].v)
		m--;
	free(es);
	*out = r;
	*n = m;
	return 0;
}
