/* growth.c — trend fits over a series of dumps (see growth.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/aggregate.h"
#include "analyze/growth.h"

const char *const prof_trend_names[] = {
	"growing", "grew, then flat", "fluctuating", "flat", "shrinking",
};

/* Least squares over points [from, n): slope and r². */
static void fit(const double *x, const int64_t *y, size_t from, size_t n, double *slope,
		double *r2)
{
	double sx = 0, sy = 0, m = (double)(n - from);
	for (size_t i = from; i < n; i++) {
		sx += x[i];
		sy += (double)y[i];
	}
	double mx = sx / m, my = sy / m, sxx = 0, sxy = 0, syy = 0;
	for (size_t i = from; i < n; i++) {
		double dx = x[i] - mx, dy = (double)y[i] - my;
		sxx += dx * dx;
		sxy += dx * dy;
		syy += dy * dy;
	}
	*slope = sxx > 0 ? sxy / sxx : 0;
	*r2 = sxx > 0 && syy > 0 ? sxy * sxy / (sxx * syy) : (syy > 0 ? 0 : 1);
}

/* max - min over the later half of the values (the half fit() uses) */
static int64_t late_range(const int64_t *v, size_t n)
{
	size_t from = n / 2 > n - 3 ? n - 3 : n / 2;
	int64_t lo = v[from], hi = v[from];
	for (size_t i = from + 1; i < n; i++) {
		lo = v[i] < lo ? v[i] : lo;
		hi = v[i] > hi ? v[i] : hi;
	}
	return hi - lo;
}

static void classify(struct prof_growth_site *s, const double *x, size_t n, int64_t scale)
{
	s->first = s->values[0];
	s->last = s->values[n - 1];
	s->peak = s->values[0];
	for (size_t i = 1; i < n; i++)
		if (s->values[i] > s->peak)
			s->peak = s->values[i];
	fit(x, s->values, 0, n, &s->slope, &s->r2);
	double late_r2;
	fit(x, s->values, n / 2 > n - 3 ? n - 3 : n / 2, n, &s->late_slope, &late_r2);
	double span = x[n - 1] - x[0];
	/* "visible": the fitted change over the run is at least 1% of the
	 * whole heap's peak, and more than a trace */
	double change = s->slope * span, late_change = s->late_slope * span / 2;
	double visible = (double)scale / 100 > 1 ? (double)scale / 100 : 1;
	if (fabs(change) < visible && fabs(late_change) < visible &&
	    (double)(s->peak - s->first) < visible)
		s->trend = PROF_TREND_FLAT;
	else if (s->slope > 0 && late_change >= visible && s->late_slope >= 0.5 * s->slope &&
		 (s->r2 >= 0.6 || late_r2 >= 0.8))
		s->trend = PROF_TREND_GROWING;
	else if ((double)(s->peak - s->first) >= visible && fabs(late_change) < visible &&
		 late_range(s->values, n) * 2 < s->peak - s->first)
		/* flat later means the later half stays put, not only that its
		 * fitted line is level: a site that jumps up and down (churn)
		 * can fit a level line by chance */
		s->trend = PROF_TREND_GREW_FLAT;
	else if (s->slope < 0 && s->r2 >= 0.6)
		s->trend = PROF_TREND_SHRINKING;
	else
		s->trend = PROF_TREND_FLUCTUATING;
}

static int cmp_sites(const void *a, const void *b)
{
	const struct prof_growth_site *x = a, *y = b;
	bool gx = x->trend == PROF_TREND_GROWING, gy = y->trend == PROF_TREND_GROWING;
	if (gx != gy)
		return gx ? -1 : 1;
	double kx = gx ? x->late_slope : fabs(x->slope), ky = gy ? y->late_slope : fabs(y->slope);
	if (kx != ky)
		return kx > ky ? -1 : 1;
	return strcmp(x->name, y->name);
}

struct entry {
	const char *name;
	size_t dump;
	int64_t value;
};

static int cmp_entries(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x->dump < y->dump ? -1 : x->dump > y->dump;
}

int prof_growth_compute(struct prof_growth *g, const struct prof_profile *ps, size_t n,
			int v, bool lines)
{
	memset(g, 0, sizeof *g);
	if (n < 3)
		return -EINVAL;
	struct prof_table *tabs = calloc(n, sizeof *tabs);
	struct entry *es = NULL;
	size_t nes = 0, cap = 0;
	int rc = -ENOMEM;
	g->ndumps = n;
	g->x = calloc(n, sizeof *g->x);
	g->total.values = calloc(n, sizeof *g->total.values);
	if (!tabs || !g->x || !g->total.values)
		goto out;
	g->timed = true;
	for (size_t i = 0; i < n; i++)
		if (ps[i].ms < 0 || (i && ps[i].ms <= ps[i - 1].ms))
			g->timed = false;
	int64_t scale = 0;
	for (size_t i = 0; i < n; i++) {
		g->x[i] = g->timed ? (double)(ps[i].ms - ps[0].ms) / 1000.0 : (double)i;
		g->total.values[i] = ps[i].total[v];
		if (ps[i].total[v] > scale)
			scale = ps[i].total[v];
		if (prof_table_build(&tabs[i], &ps[i], lines, v, PROF_SORT_FLAT))
			goto out;
		for (size_t r = 0; r < tabs[i].nrows; r++) {
			if (!tabs[i].rows[r].flat[v])
				continue;
			if (nes == cap) {
				cap = cap ? 2 * cap : 1024;
				struct entry *ne = realloc(es, cap * sizeof *ne);
				if (!ne)
					goto out;
				es = ne;
			}
			es[nes++] = (struct entry){ tabs[i].rows[r].name, i, tabs[i].rows[r].flat[v] };
		}
	}
	g->total.name = "(all)";
	classify(&g->total, g->x, n, scale);
	qsort(es, nes, sizeof *es, cmp_entries);
	size_t nnames = 0;
	for (size_t i = 0; i < nes; i++)
		if (!i || strcmp(es[i].name, es[i - 1].name))
			nnames++;
	g->sites = calloc(nnames + 1, sizeof *g->sites);
	g->names = calloc(nnames + 1, sizeof *g->names);
	if (!g->sites || !g->names)
		goto out;
	for (size_t i = 0; i < nes; i++) {
		if (!i || strcmp(es[i].name, es[i - 1].name)) {
			struct prof_growth_site *s = &g->sites[g->nsites];
			if (!(g->names[g->nsites] = strdup(es[i].name)) ||
			    !(s->values = calloc(n, sizeof *s->values)))
				goto out;
			s->name = g->names[g->nsites++];
		}
		g->sites[g->nsites - 1].values[es[i].dump] += es[i].value;
	}
	for (size_t i = 0; i < g->nsites; i++)
		classify(&g->sites[i], g->x, n, scale);
	qsort(g->sites, g->nsites, sizeof *g->sites, cmp_sites);
	rc = 0;
out:
	if (tabs)
		for (size_t i = 0; i < n; i++)
			prof_table_release(&tabs[i]);
	free(tabs);
	free(es);
	if (rc)
		prof_growth_release(g);
	return rc;
}

void prof_growth_release(struct prof_growth *g)
{
	for (size_t i = 0; i < g->nsites; i++) {
		free(g->sites[i].values);
		free(g->names ? g->names[i] : NULL);
	}
	free(g->sites);
	free(g->names);
	free(g->x);
	free(g->total.values);
	memset(g, 0, sizeof *g);
}
