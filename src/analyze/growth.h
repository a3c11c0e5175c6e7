/*
 * growth — which allocation sites grow across a series of dumps of one
 * run, and how steadily: the question an exit-time leak check cannot
 * answer ("what keeps growing while the program runs?").
 *
 * For each site (the function that called the allocator, or its source
 * line), the in-use value at each dump is fitted with a least-squares line
 * against time (the dumps' ms, else their order). A site is *growing*
 * when the fit rises (slope > 0), explains the points well (r² >= 0.6,
 * or >= 0.8 for the later half alone: a leak that started late), and
 * still rises over the later half of the run (its slope at least half the
 * whole run's) by a visible amount (1% of the heap's peak). A cache that
 * fills up and then stays flat fails the last test ("grew, then flat":
 * its later half moves by less than half of what it grew); a site that
 * allocates and frees fails the r² test ("fluctuating").
 * Growing sites are ranked by the later half's slope: what grows now,
 * fastest first.
 */
#ifndef HEAPTRAIL_ANALYZE_GROWTH_H
#define HEAPTRAIL_ANALYZE_GROWTH_H

#include "analyze/profile.h"

enum prof_trend {
	PROF_TREND_GROWING,     /* steady growth up to the end */
	PROF_TREND_GREW_FLAT,   /* grew early, flat (or shrinking) later */
	PROF_TREND_FLUCTUATING, /* goes up and down */
	PROF_TREND_FLAT,        /* does not change much */
	PROF_TREND_SHRINKING,   /* steady decrease */
};
extern const char *const prof_trend_names[];

struct prof_growth_site {
	const char *name;       /* owned by the result */
	enum prof_trend trend;
	double slope;           /* value per second (per dump when untimed), whole run */
	double late_slope;      /* the same over the later half of the dumps */
	double r2;              /* how well a line fits: 1 = a straight line */
	int64_t first, last, peak;
	int64_t *values;        /* one per dump, in time order */
};

struct prof_growth {
	size_t ndumps;
	bool timed;             /* x is seconds (else dump numbers) */
	double *x;              /* seconds since the first dump, or 0, 1, 2... */
	struct prof_growth_site total; /* the whole heap */
	struct prof_growth_site *sites; /* growing first (by late_slope), then the rest by |slope| */
	size_t nsites;
	/* private */
	char **names;
};

/* Fits every site of the n profiles (time order) on value v (by function,
 * or by source line). Returns 0 or -ENOMEM; -EINVAL when n < 3 (a trend
 * needs three points). */
int prof_growth_compute(struct prof_growth *g, const struct prof_profile *ps, size_t n,
			int v, bool lines);
void prof_growth_release(struct prof_growth *g);

#endif
