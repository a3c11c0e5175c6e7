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
 *
 * A site that is flat and then rises (a leak that started mid-run) fits
 * no line over the whole run well; it is growing from the dump where its
 * rise began when the dumps from there on (at least a quarter of them,
 * and three, or PROF_GROWTH_MIN_DUMPS sampled) pass the rules above by
 * themselves and the values up to there stay within an eighth of the
 * rise after, and "flat, then a line" fits the values far better than
 * one line: its rate is the one since then (`onset`). A site whose
 * rise from there grew, then stayed flat (a cache filled late) gets that
 * verdict; any other verdict of the later dumps alone (fluctuating, too
 * few samples) leaves the whole run's. A site that rose and then stayed
 * over few dumps keeps part of its rise in the later half: when "a line,
 * then flat" (the values within an eighth of the rise before, over three
 * dumps and a quarter of the run) fits far better than one line, the rise
 * is visible and, sampled, beyond the sampling's noise, with a pace (from
 * the fewest samples the rise may stand for) that would have brought 4.6
 * samples over the level part, a growing,
 * fluctuating or unsure verdict becomes "grew, then flat" (find_plateau).
 * The whole heap's row is always the whole run's.
 *
 * With sampled dumps each value is an estimate, and a small leak can be
 * lost in the noise (or noise look like a leak). Each slope then gets a
 * 90 % interval from two sources, the wider of which counts: the
 * scatter of the points about the line (Student's t on n - 2 degrees of
 * freedom: what the program itself does, churn) and the sampling noise
 * of the values (growth.c has the model). A sampled site is growing only
 * when, besides the rules above (r² aside: the interval replaces it), the
 * whole run's slope clears its 99 % interval (zero is below it), over at
 * least PROF_GROWTH_MIN_DUMPS dumps, and the later half is not clearly
 * slower. 99 %, not the 90 % shown: a verdict is given for every site of
 * every run, and a 90 % interval would call one flat site in twenty
 * growing (on tests/progs/est_server.c at 16k, over 60 runs, the
 * 10 MB cache's slope reached 1.15 times its 90 % half-width, the 24 KB/s
 * leak's never fell below 1.82; 99 % is 1.57). A site that rises but whose
 * rise the sampling noise alone could make is "too few samples" (not a
 * verdict either way), with the factor by which the noise would have to
 * shrink to tell (need: a smaller --sample or a longer run); so is one
 * that never rose when a visible rise would not have brought a new
 * sample 9 times in 10. Exact dumps keep the rules above unchanged.
 *
 * Replacing: a site that frees blocks it allocated before an attach and
 * allocates their successors (a cache refreshing its entries) rises in
 * the dumps, which hold only the successors, while the heap as a whole
 * stays flat. Dumps taken on the program's allocation path say what the
 * allocator itself counts in use (heap_in_use); over three or more such
 * dumps, the seen heap's slope less the allocator's is the rate at
 * which memory the dumps do not hold is given back (replaced). When
 * that rate clears its 90 % interval, a growing site whose values plus
 * the memory not seen (the allocator's count less the seen heap) vary
 * less than a quarter as much as its own values is "replacing", not
 * growing: the memory not seen falls as it rises (the test is made
 * site by site, the best first, each one taken into the memory not
 * seen for the next: two caches refreshed). A leak beside such a cache
 * raises the allocator's count, and stays growing. The memory still
 * unseen (the allocator's count less the heap seen, at the last such
 * dump) bounds what replacing can add: a site that rises by more than
 * that grows (their rate says how long that takes at the earliest).
 */
#ifndef HEAPTRAIL_ANALYZE_GROWTH_H
#define HEAPTRAIL_ANALYZE_GROWTH_H

#include "analyze/profile.h"
#include "analyze/unbias.h"
#include "analyze/wrappers.h"

enum prof_trend {
	PROF_TREND_GROWING,     /* steady growth up to the end */
	PROF_TREND_GREW_FLAT,   /* grew early, flat (or shrinking) later */
	PROF_TREND_FLUCTUATING, /* goes up and down */
	PROF_TREND_FLAT,        /* does not change much */
	PROF_TREND_SHRINKING,   /* steady decrease */
	PROF_TREND_UNSURE,      /* sampled: rises, but within the sampling noise */
	PROF_TREND_REPLACING,   /* rises as fast as memory the dumps do not hold is
				 * given back: replaces blocks allocated before an
				 * attach (see "replacing" above) */
};

/* The z of the interval a sampled slope must clear to be "growing"
 * (99 %, two-sided). */
#define PROF_GROWTH_Z 2.5758293035489004

/* The private resident memory rose by at least this many bytes and by more than
 * twice the heap's rise plus this: memory the agent does not see grew */
#define PROF_GROWTH_UNSEEN (16ll << 20)

/* The allocator's own count of the heap (heap_in_use) rose by at least
 * this many bytes more than the heap the dumps hold, and that excess is
 * more than twice the dumps' rise: memory the agent does not see grew
 * (the count is exact, so the bar is lower than the resident set's) */
#define PROF_GROWTH_UNSEEN_ALLOC (8ll << 20)

/* Fewer sampled dumps than this never make a "growing" verdict. */
#define PROF_GROWTH_MIN_DUMPS 5
extern const char *const prof_trend_names[];

struct prof_growth_site {
	const char *name;       /* owned by the result */
	enum prof_trend trend;
	double slope;           /* value per second (per dump when untimed), whole run */
	double late_slope;      /* the same over the later half of the dumps */
	double r2;              /* how well a line fits: 1 = a straight line */
	/* 90 % interval half-widths of slope and late_slope (0 when the
	 * dumps are exact and the points on a line) */
	double slope_pm, late_pm;
	/* sampled: by how much the sampling noise of the slope would have to
	 * shrink to tell (> 1 for PROF_TREND_UNSURE), else 0 */
	double need;
	/* growing from a later dump on (a leak that started mid-run): the
	 * index of the dump it rose from, and slope, late_slope, r2 and
	 * their intervals are of the dumps from there on; else 0 */
	size_t onset;
	int64_t first, last, peak;
	int64_t *values;        /* one per dump, in time order */
	double *vars;           /* their sampling variances (0: exact) */
};

struct prof_growth {
	size_t ndumps;
	bool sampled;           /* the dumps were sampled: values are estimates */
	uint64_t sample;        /* the largest mean sampling interval of the dumps */
	bool timed;             /* x is seconds (else dump numbers) */
	double *x;              /* seconds since the first dump, or 0, 1, 2... */
	struct prof_growth_site total; /* the whole heap */
	/* from the first dump to the last (both dumps must say, else
	 * rss_known is false): the process's private resident memory's rise
	 * less the agent's own mappings', and the in-use heap's rise as the dumps
	 * count it; a resident set that rises far more than the heap is
	 * memory the agent does not see (PROF_GROWTH_UNSEEN) */
	bool rss_known;
	int64_t rss_rise, heap_rise;
	/* the dumps that say what the allocator counts in use (at least
	 * three, else heap_known is false): its count at the first and the
	 * last of them, the rate (per second, or per dump when untimed) at
	 * which memory the dumps do not hold was given back over them (the
	 * seen heap's slope less the allocator's count's), the memory not
	 * seen at the last (allocator less seen), and what the "replacing"
	 * sites add up to (their count and summed slope) */
	bool heap_known;
	int64_t alloc_first, alloc_last, unseen_last;
	int64_t seen_rise;      /* the dumps' heap over those same dumps */
	double replaced_rate;
	size_t nreplacing;
	double replacing_rate;
	struct prof_growth_site *sites; /* growing first (by late_slope), then the rest by |slope| */
	size_t nsites;
	/* the allocation wrappers folded into their callers before the fit
	 * (prof_growth_fold_compute), name order; else none */
	struct prof_wrapper *wrappers;
	size_t nwrappers;
	/* private */
	char **names;
};

/* Fits every site of the n profiles (time order) on value v (by function,
 * or by source line). Returns 0 or -ENOMEM; -EINVAL when n < 3 (a trend
 * needs three points). */
int prof_growth_compute(struct prof_growth *g, const struct prof_profile *ps, size_t n,
			int v, bool lines);
/* Growth as `heaptrail growth` fits it by default, and so every view of
 * it (the text, the HTML page, the live endpoint): the series'
 * allocation wrappers (wrappers.h) folded into their callers, as if
 * pprof's -hide had taken them out of the stacks; g->wrappers says what
 * was folded. The profiles are not changed. */
int prof_growth_fold_compute(struct prof_growth *g, const struct prof_profile *ps, size_t n,
			     int v, bool lines);

/* What the fit needs of one dump (its times and totals, and its stacks'
 * value on v per their first frames, as wrappers.h takes them and cut
 * where no wrapper can be, sites keyed by function or by line), so a
 * long series can be fitted without holding every dump: digest each as
 * it is read, release it, fit the digests. NULL when out of memory. */
struct prof_growth_dump;
struct prof_growth_dump *prof_growth_digest(const struct prof_profile *p, int v, bool lines);
void prof_growth_digest_free(struct prof_growth_dump *d);
/* The fit of n digests in time order, wrappers folded when fold (as
 * prof_growth_fold_compute; prof_growth_compute is fold false). */
int prof_growth_compute_digests(struct prof_growth *g, struct prof_growth_dump *const *ds,
				size_t n, bool fold);
void prof_growth_release(struct prof_growth *g);

#endif
