/* growth.c — trend fits over a series of dumps (see growth.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/growth.h"
#include "analyze/unbias.h"

const char *const prof_trend_names[] = {
	"growing", "grew, then flat", "fluctuating", "flat", "shrinking", "too few samples",
	"replacing",
};

/* Two-sided 90 % quantiles of Student's t, by degrees of freedom (index
 * 1..30; beyond, the normal's 1.645 is close enough). */
static double t90(size_t dof)
{
	static const double q[] = {
		0, 6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812,
		1.796, 1.782, 1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725,
		1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697,
	};
	return dof < sizeof q / sizeof q[0] ? q[dof] : PROF_Z90;
}

struct fit {
	double slope, r2;
	double pm_scatter;      /* 90 % half-width from the points' scatter */
	double pm_sampling;     /* 90 % half-width from the sampling noise */
};

/*
 * Least squares over points [from, n): the slope b = sum c_i y_i with
 * c_i = (x_i - mean x) / Sxx, r², and two 90 % half-widths for b.
 *
 * Scatter: the textbook one, t(n-2) * sqrt(RSS / (n-2) / Sxx): what the
 * points do about the line, whatever makes them (churn, bursts).
 *
 * Sampling: each y_i is an estimate of variance v_i (unbias.h). Two
 * models bound how the errors of the dumps go together, and the larger
 * counts:
 *  - independent errors (a site whose blocks are freed and replaced
 *    between dumps, so each dump draws new samples): Var b = sum c_i^2 v_i;
 *  - persistent errors (a leak: a block sampled, or missed, stays so in
 *    every later dump, so the errors add up like a random walk): the
 *    blocks new at dump i bring v_i - v_{i-1} of variance to every dump
 *    from i on, so Var b = sum_i (v_i - v_{i-1})^+ C_i^2, C_i = sum_{k>=i} c_k;
 *  - errors that last a while and then change (a cache whose entries
 *    are replaced: its size stays, its samples are drawn anew as they
 *    turn over, so its estimate wanders for seconds at a time; neither
 *    of the above sees that, and a line fitted to a wandering estimate
 *    of a flat cache slopes). The worst such case is one error before
 *    some dump m and an independent one from m on:
 *    Var b = C_m^2 (mean v before m + mean v from m), taken at the worst m.
 * For a leak of r bytes/s sampled every S bytes over T seconds, the
 * second is r S / T in order of magnitude: the noise of a slope shrinks
 * as sqrt(S / T), which is what "need" (classify) turns into advice.
 */
static void fit(const double *x, const int64_t *y, const double *var, size_t from, size_t n,
		struct fit *f)
{
	double sx = 0, sy = 0, m = (double)(n - from);
	memset(f, 0, sizeof *f);
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
	f->slope = sxx > 0 ? sxy / sxx : 0;
	f->r2 = sxx > 0 && syy > 0 ? sxy * sxy / (sxx * syy) : (syy > 0 ? 0 : 1);
	if (!(sxx > 0))
		return;
	if (n - from > 2) {
		double rss = syy - f->slope * sxy;
		rss = rss > 0 ? rss : 0;
		f->pm_scatter = t90(n - from - 2) * sqrt(rss / (m - 2) / sxx);
	}
	if (!var)
		return;
	double indep = 0, persist = 0, step = 0, tail = 0, vtail = 0, vall = 0;
	for (size_t i = from; i < n; i++)
		vall += var[i];
	for (size_t i = n; i-- > from;) {
		double c = (x[i] - mx) / sxx;
		indep += c * c * var[i];
		tail += c;
		vtail += var[i];
		if (i > from && var[i] > var[i - 1])
			persist += (var[i] - var[i - 1]) * tail * tail;
		if (i > from) {
			double before = (vall - vtail) / (double)(i - from);
			double after = vtail / (double)(n - i);
			double st = tail * tail * (before + after);
			step = st > step ? st : step;
		}
	}
	double worst = indep > persist ? indep : persist;
	worst = step > worst ? step : worst;
	f->pm_sampling = PROF_Z90 * sqrt(worst);
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

static void classify_whole(struct prof_growth_site *s, const double *x, size_t n, int64_t scale,
			   bool sampled);

/* Residual sum of squares of v[from, to) about their mean (line: false)
 * or about their least-squares line against x (line: true). */
static double rss(const double *x, const int64_t *v, size_t from, size_t to, bool line)
{
	double m = (double)(to - from), sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
	for (size_t i = from; i < to; i++) {
		sx += x[i];
		sy += (double)v[i];
	}
	for (size_t i = from; i < to; i++) {
		double dx = x[i] - sx / m, dy = (double)v[i] - sy / m;
		sxx += dx * dx;
		sxy += dx * dy;
		syy += dy * dy;
	}
	double r = line && sxx > 0 ? syy - sxy * sxy / sxx : syy;
	return r > 0 ? r : 0;
}

/* The onset rule of growth.h: of the dumps k whose values before are
 * flat (within an eighth of the rise after), the one where "flat, then a
 * line from k" fits best (the least residuals; the earliest of equals).
 * When that fits far better than one line over the whole run (a quarter
 * of its residuals: the flat part is then not noise about the line),
 * the dumps from k on give the verdict. */
static void find_onset(struct prof_growth_site *s, const double *x, size_t n, int64_t scale,
		       bool sampled)
{
	size_t least = sampled ? PROF_GROWTH_MIN_DUMPS : 3;
	if (least < (n + 3) / 4)
		least = (n + 3) / 4;
	int64_t lo = s->values[0], hi = s->values[0];
	size_t best = 0;
	double best_rss = 0;
	for (size_t k = 1; k + least <= n; k++) {
		int64_t rise = s->values[n - 1] - s->values[k];
		if (rise > 0 && (hi - lo) * 8 <= rise) {
			double r = rss(x, s->values, 0, k, false) + rss(x, s->values, k, n, true);
			if (!best || r < best_rss) {
				best = k;
				best_rss = r;
			}
		}
		/* the values before the next k: [0, k] */
		lo = s->values[k] < lo ? s->values[k] : lo;
		hi = s->values[k] > hi ? s->values[k] : hi;
	}
	if (!best || !(best_rss * 4 < rss(x, s->values, 0, n, true)))
		return;
	struct prof_growth_site sub = { .values = s->values + best, .vars = s->vars + best };
	classify_whole(&sub, x + best, n - best, scale, sampled);
	if (sub.trend == PROF_TREND_GREW_FLAT) {
		/* it rose late and stayed (a cache filled late): the whole
		 * run's figures describe it as well as any */
		s->trend = sub.trend;
		s->need = 0;
		return;
	}
	if (sub.trend != PROF_TREND_GROWING)
		return;  /* the later dumps alone say less: the whole run's verdict */
	s->trend = sub.trend;
	s->need = 0;
	s->onset = best;
	s->slope = sub.slope;
	s->late_slope = sub.late_slope;
	s->r2 = sub.r2;
	s->slope_pm = sub.slope_pm;
	s->late_pm = sub.late_pm;
}

/* The plateau rule of growth.h: of the dumps k from which the values
 * stay within an eighth of their rise up to k (three dumps at least, and
 * a quarter of the run), the one where "a line up to k, then flat" fits
 * best; the site grew, then stayed flat, when that fits far better than
 * one line over the whole run (a quarter of its residuals), its rise is
 * visible and more than the sampling alone could make, and, sampled,
 * the rise's pace would have brought 4.6 new samples over the plateau
 * (none comes one time in a hundred: a leak whose samples are sparse
 * stays what the other rules say), the pace taken from the fewest
 * samples the rise may stand for (99 %: on the estimates' test server at
 * 512k, three samples of the 24 KB/s leak came within 4 s, and their pace
 * said the 19 s after should have brought 6). */
static void find_plateau(struct prof_growth_site *s, const double *x, size_t n, int64_t scale,
			 bool sampled)
{
	double visible = (double)scale / 100 > 1 ? (double)scale / 100 : 1;
	const int64_t *v = s->values;
	int64_t lo = v[n - 1], hi = v[n - 1];
	size_t best = 0;
	double best_rss = 0;
	for (size_t k = n - 1; k-- > 2;) {   /* the plateau: [k, n), n - k >= 3 */
		lo = v[k] < lo ? v[k] : lo;
		hi = v[k] > hi ? v[k] : hi;
		int64_t rise = v[k] - v[0];
		if (n - k < 3 || (x[n - 1] - x[k]) * 4 < x[n - 1] - x[0] || rise <= 0 ||
		    (double)rise < visible || (hi - lo) * 8 > rise)
			continue;
		if (sampled) {
			double noise = PROF_Z90 * sqrt(s->vars[0] + s->vars[k]);
			if ((double)rise <= noise)
				continue;
			/* the samples behind the rise, at the fewest the data
			 * allow (99 %, one-sided): three samples that came
			 * close together by chance are no pace */
			double per_sample = v[k] > 0 ? s->vars[k] / (double)v[k] : 0;
			if (per_sample > 0) {
				double got = (double)rise / per_sample;
				double fewest = got - 2.33 * sqrt(got);
				if (fewest <= 0 || fewest * (x[n - 1] - x[k]) / (x[k] - x[0]) < 4.6)
					continue;
			}
		}
		double r = rss(x, v, 0, k, true) + rss(x, v, k, n, false);
		if (!best || r < best_rss) {
			best = k;
			best_rss = r;
		}
	}
	if (!best || !(best_rss * 4 < rss(x, v, 0, n, true)))
		return;
	s->trend = PROF_TREND_GREW_FLAT;
	s->need = 0;
	s->onset = 0;
}

static void classify(struct prof_growth_site *s, const double *x, size_t n, int64_t scale,
		     bool sampled)
{
	classify_whole(s, x, n, scale, sampled);
	s->onset = 0;
	find_onset(s, x, n, scale, sampled);
	if (s->trend == PROF_TREND_GROWING || s->trend == PROF_TREND_UNSURE ||
	    s->trend == PROF_TREND_FLUCTUATING)
		find_plateau(s, x, n, scale, sampled);
	/* first, last and peak stay the whole run's */
}

static void classify_whole(struct prof_growth_site *s, const double *x, size_t n, int64_t scale,
			   bool sampled)
{
	s->first = s->values[0];
	s->last = s->values[n - 1];
	s->peak = s->values[0];
	for (size_t i = 1; i < n; i++)
		if (s->values[i] > s->peak)
			s->peak = s->values[i];
	struct fit all, late;
	size_t from = n / 2 > n - 3 ? n - 3 : n / 2;
	fit(x, s->values, sampled ? s->vars : NULL, 0, n, &all);
	fit(x, s->values, sampled ? s->vars : NULL, from, n, &late);
	s->slope = all.slope;
	s->r2 = all.r2;
	s->late_slope = late.slope;
	double late_r2 = late.r2;
	s->slope_pm = all.pm_scatter > all.pm_sampling ? all.pm_scatter : all.pm_sampling;
	s->late_pm = late.pm_scatter > late.pm_sampling ? late.pm_scatter : late.pm_sampling;
	s->need = 0;
	double span = x[n - 1] - x[0];
	/* "visible": the fitted change over the run is at least 1% of the
	 * whole heap's peak, and more than a trace */
	double change = s->slope * span, late_change = s->late_slope * span / 2;
	double visible = (double)scale / 100 > 1 ? (double)scale / 100 : 1;
	bool rises = s->slope > 0 && late_change >= visible && s->late_slope >= 0.5 * s->slope;
	/* Sampled: the whole run's slope 99 % interval above zero (growth.h
	 * says why 99), over enough dumps, with a visible change; the later
	 * half still rising and not clearly slower than half the whole
	 * run's slope, nor clearly below the visible change (its interval,
	 * on half the points, is wide: asking it to exclude zero too would
	 * miss small leaks) */
	double k99 = PROF_GROWTH_Z / PROF_Z90;  /* 90 % half-widths -> 99 % */
	/* and its floor rose: the later half's lowest value above the first
	 * half's. A leak's samples stay (its estimate only steps up); a
	 * site that comes and goes (a buffer held a moment now and then)
	 * returns to its floor, however its visits fall against the dumps,
	 * whose slope over a few visits can look sure by chance */
	int64_t floor_early = s->values[0], floor_late = s->values[from];
	for (size_t i = 1; i < from; i++)
		if (s->values[i] < floor_early)
			floor_early = s->values[i];
	for (size_t i = from + 1; i < n; i++)
		if (s->values[i] < floor_late)
			floor_late = s->values[i];
	bool sure = n >= PROF_GROWTH_MIN_DUMPS && s->slope - k99 * s->slope_pm > 0 &&
		    floor_late > floor_early &&
		    change >= visible && s->late_slope > 0 &&
		    s->late_slope + s->late_pm >= 0.5 * s->slope &&
		    (s->late_slope + s->late_pm) * span / 2 >= visible;
	/* what the sampling alone could make of the rise from the first
	 * value to the peak (two estimates: their variances add) */
	double rise_noise = 0;
	if (sampled) {
		size_t ip = 0;
		for (size_t i = 1; i < n; i++)
			if (s->values[i] > s->values[ip])
				ip = i;
		rise_noise = PROF_Z90 * sqrt(s->vars[0] + s->vars[ip]);
	}
	bool small = fabs(change) < visible && fabs(late_change) < visible &&
		     (double)(s->peak - s->first) < visible;
	/* sampled, a small site that rose at all (a leak below the
	 * sampling's reach: its first sample appears mid-run and stays) is
	 * only "flat" when the slope's interval rules out a visible change
	 * too. One that never rose is flat when a visible rise would have
	 * brought a new sample 9 times in 10 (visible >= 2.3 S, S the bytes
	 * a sample stands for: var / value); else it may be a leak that
	 * brought none (at 512k a 24 KB/s leak brings none in 30 s one run in
	 * four), and one that went up and came back is no leak. */
	double reach = (fabs(s->slope) + s->slope_pm) * span;
	double per_sample = s->first > 0 ? s->vars[0] / (double)s->first : 0;
	bool no_rise = s->last <= s->first &&
		       (s->peak > s->first || visible >= 2.3 * per_sample);
	if (small && (!sampled || no_rise || reach < visible))
		s->trend = PROF_TREND_FLAT;
	else if (small) {
		s->trend = PROF_TREND_UNSURE;
		s->need = reach / visible;
		if (s->need < 1)
			s->need = 1;
	} else if (sampled ? sure : rises && (s->r2 >= 0.6 || late_r2 >= 0.8))
		s->trend = PROF_TREND_GROWING;
	else if ((double)(s->peak - s->first) >= visible && fabs(late_change) < visible &&
		 late_range(s->values, n) * 2 < s->peak - s->first &&
		 (double)(s->peak - s->first) > rise_noise &&
		 (!sampled || s->late_slope + s->late_pm < s->slope))
		/* flat later means the later half stays put, not only that its
		 * fitted line is level: a site that jumps up and down (churn)
		 * can fit a level line by chance; sampled, the later half's
		 * slope must also be clearly below the whole run's (a leak of
		 * a few samples whose last came early looks flat later) */
		s->trend = PROF_TREND_GREW_FLAT;
	else if (sampled && s->slope > 0 &&
		 (s->slope - all.pm_scatter > 0 || n < PROF_GROWTH_MIN_DUMPS) &&
		 (s->slope + s->slope_pm) * span >= visible) {
		/* a line the points follow (their scatter does not explain the
		 * rise away), but which the sampling alone could have drawn:
		 * no verdict, and by how much the noise must shrink for one
		 * (the slope's sampling half-width at 99 % over the slope) */
		s->trend = PROF_TREND_UNSURE;
		s->need = k99 * all.pm_sampling / s->slope;
		if (s->need < 1)
			s->need = 1;  /* too few dumps, or the later half lags */
	} else if (s->slope < 0 && (sampled ? s->slope + s->slope_pm < 0 : s->r2 >= 0.6))
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

/* A dump's stacks that start with the same frames: the first frames as
 * wrappers.h takes them (owned function names) and their value; valued:
 * a stack of them has a value (the others count for wrappers only). */
struct digest_row {
	struct prof_wrapper_stack w;
	int64_t v;
	double var;
	bool valued;
};

/* ... and each frame's site key, while a digest is made (by line, the
 * keys are kept beside the rows; by function, they are w's names) */
struct wide_row {
	struct digest_row r;
	const char *key[PROF_WRAPPER_CHAIN + 1];
};

struct prof_growth_dump {
	int64_t ms, total, total_space, rss, agent_bytes, heap_in_use;
	double total_var;
	uint64_t sample;
	struct digest_row *rows;
	size_t nrows;
	const char **keys;              /* by line: PROF_WRAPPER_CHAIN + 1 per row */
	const char **high;              /* wrappers.h's high functions */
	size_t nhigh;
	char **strs;                    /* the strings above, owned */
	size_t nstrs, strcap;
};

/* Growing sites that only replace memory allocated before an attach
 * (growth.h: replacing). Sites sorted growing first, fastest first. */
static int judge_replacing(struct prof_growth *g, struct prof_growth_dump *const *ps, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += ps[i]->heap_in_use > 0;
	if (k < 3)
		return 0;
	double *x = calloc(k, sizeof *x), *var = calloc(k, sizeof *var);
	int64_t *alloc = calloc(k, sizeof *alloc), *seen = calloc(k, sizeof *seen);
	int rc = -ENOMEM;
	if (!x || !var || !alloc || !seen)
		goto out;
	k = 0;
	for (size_t i = 0; i < n; i++)
		if (ps[i]->heap_in_use > 0) {
			x[k] = g->x[i];
			alloc[k] = ps[i]->heap_in_use;
			seen[k] = g->total.values[i];
			var[k++] = g->total.vars[i];
		}
	struct fit fa, fs;
	fit(x, alloc, NULL, 0, k, &fa);
	fit(x, seen, var, 0, k, &fs);
	g->heap_known = true;
	g->alloc_first = alloc[0];
	g->alloc_last = alloc[k - 1];
	g->unseen_last = alloc[k - 1] - seen[k - 1];
	g->seen_rise = seen[k - 1] - seen[0];
	g->replaced_rate = fs.slope - fa.slope;
	double pm_s = fs.pm_scatter > fs.pm_sampling ? fs.pm_scatter : fs.pm_sampling;
	double pm = sqrt(fa.pm_scatter * fa.pm_scatter + pm_s * pm_s);
	rc = 0;
	if (!(g->replaced_rate > pm) || g->replaced_rate <= 0)
		goto out;
	/* The memory not seen, u = allocator's count - seen heap, falls as
	 * a replacing site rises and by as much, whatever else the heap
	 * does (a leak raises both), so the site plus u stays flat, where a
	 * leak beside a replacing cache plus u bends with the cache. Each
	 * round takes the growing site whose sum with u varies least against
	 * its own variation; within a quarter (of the variance) it replaces,
	 * and u takes it in for the next round (two caches refreshed). */
	int64_t *u = calloc(k, sizeof *u);
	if (!u) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t j = 0; j < k; j++)
		u[j] = alloc[j] - seen[j];
	for (;;) {
		struct prof_growth_site *best = NULL;
		double best_ratio = 0.25;
		for (size_t i = 0; i < g->nsites; i++) {
			struct prof_growth_site *s = &g->sites[i];
			if (s->trend != PROF_TREND_GROWING)
				continue;
			double ms = 0, mr = 0, vs = 0, vr = 0;
			for (size_t j = 0, d = 0; d < n; d++)
				if (ps[d]->heap_in_use > 0) {
					ms += (double)s->values[d];
					mr += (double)(s->values[d] + u[j++]);
				}
			ms /= (double)k, mr /= (double)k;
			for (size_t j = 0, d = 0; d < n; d++)
				if (ps[d]->heap_in_use > 0) {
					double a = (double)s->values[d] - ms;
					double b = (double)(s->values[d] + u[j++]) - mr;
					vs += a * a, vr += b * b;
				}
			if (vs > 0 && vr / vs <= best_ratio) {
				best = s;
				best_ratio = vr / vs;
			}
		}
		if (!best)
			break;
		best->trend = PROF_TREND_REPLACING;
		g->nreplacing++;
		g->replacing_rate += best->slope;
		for (size_t j = 0, d = 0; d < n; d++)
			if (ps[d]->heap_in_use > 0)
				u[j++] += best->values[d];
	}
	free(u);
out:
	free(x);
	free(var);
	free(alloc);
	free(seen);
	return rc;
}

struct entry {
	const char *name;
	size_t dump;
	int64_t value;
	double var;
};

static int cmp_entries(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x->dump < y->dump ? -1 : x->dump > y->dump;
}

/* ---------- a dump's digest ---------- */

/* A copy of s owned by d, one per distinct string. */
static const char *own(struct prof_growth_dump *d, const char *s)
{
	if (!s)
		return NULL;
	if (2 * (d->nstrs + 1) > d->strcap) {
		size_t cap = d->strcap ? 2 * d->strcap : 256;
		char **ns = calloc(cap, sizeof *ns);
		if (!ns)
			return NULL;
		for (size_t i = 0; i < d->strcap; i++)
			if (d->strs[i])
				for (size_t h = prof_hash_str(d->strs[i]) & (cap - 1);; h = (h + 1) & (cap - 1))
					if (!ns[h]) {
						ns[h] = d->strs[i];
						break;
					}
		free(d->strs);
		d->strs = ns;
		d->strcap = cap;
	}
	size_t h = prof_hash_str(s) & (d->strcap - 1);
	for (; d->strs[h]; h = (h + 1) & (d->strcap - 1))
		if (!strcmp(d->strs[h], s))
			return d->strs[h];
	if (!(d->strs[h] = strdup(s)))
		return NULL;
	d->nstrs++;
	return d->strs[h];
}

static int cmp_rows(const void *a, const void *b)
{
	const struct wide_row *x = a, *y = b;
	/* owned strings: one pointer per string */
	for (int k = 0; k <= PROF_WRAPPER_CHAIN; k++) {
		if (x->r.w.fn[k] != y->r.w.fn[k])
			return x->r.w.fn[k] < y->r.w.fn[k] ? -1 : 1;
		if (x->key[k] != y->key[k])
			return x->key[k] < y->key[k] ? -1 : 1;
	}
	return (x->r.w.unnamed > y->r.w.unnamed) - (x->r.w.unnamed < y->r.w.unnamed);
}

static int cmp_ptrs(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	return x < y ? -1 : x > y;
}

void prof_growth_digest_free(struct prof_growth_dump *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->strcap; i++)
		free(d->strs[i]);
	free(d->strs);
	free(d->rows);
	free(d->keys);
	free(d->high);
	free(d);
}

struct prof_growth_dump *prof_growth_digest(const struct prof_profile *p, int v, bool lines)
{
	struct prof_growth_dump *d = calloc(1, sizeof *d);
	const char **key = calloc(p->nframes + 1, sizeof *key);
	bool *high = NULL;
	struct wide_row *wide = NULL;
	if (!d || !key)
		goto nomem;
	d->ms = p->ms;
	d->total = p->total[v];
	d->total_var = p->total_var[v];
	d->total_space = p->total[PROF_INUSE_SPACE];
	d->rss = p->rss;
	d->agent_bytes = p->agent_bytes;
	d->heap_in_use = p->heap_in_use;
	d->sample = p->sample;
	/* each frame's site key, owned: equal keys are one pointer */
	for (size_t f = 0; f < p->nframes; f++) {
		char buf[4096];
		if (!(key[f] = own(d, prof_frame_name(&p->frames[f], lines, buf, sizeof buf))))
			goto nomem;
	}
	/* the stacks' values per first frames, as a table's flat rows are
	 * per leaf (a stack with no frame counts for no site); every stack
	 * is kept for wrappers.h, valued or not */
	size_t nw = 0;
	wide = malloc((p->nsamples + 1) * sizeof *wide);
	high = calloc(p->nframes + 1, sizeof *high);
	if (!wide || !high)
		goto nomem;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct prof_sample *s = &p->samples[i];
		if (!s->nframes)
			continue;
		struct wide_row *r = &wide[nw++];
		*r = (struct wide_row){ .r = { .v = s->v[v], .var = s->var[v], .valued = s->v[v] != 0 } };
		uint32_t at[PROF_WRAPPER_CHAIN + 1];
		prof_wrapper_stack_of(p, s, &r->r.w, at);
		if (r->r.w.fn[PROF_WRAPPER_CHAIN])
			for (uint32_t k = at[PROF_WRAPPER_CHAIN] + 1; k < s->nframes; k++)
				high[s->frames[k]] = true;
		for (int k = 0; k <= PROF_WRAPPER_CHAIN && r->r.w.fn[k]; k++) {
			if (!(r->r.w.fn[k] = own(d, r->r.w.fn[k])))
				goto nomem;
			r->key[k] = key[s->frames[at[k]]];
		}
	}
	/* what cannot matter to wrappers.h cut off (the frames cut are high
	 * ones), so that stacks with the same first frames are one row */
	const char **cut = malloc((nw * (PROF_WRAPPER_CHAIN + 1) + 1) * sizeof *cut);
	struct prof_wrapper_stack *ws = malloc((nw + 1) * sizeof *ws);
	size_t ncut = 0;
	if (!cut || !ws) {
		free(cut);
		free(ws);
		goto nomem;
	}
	for (size_t i = 0; i < nw; i++)
		ws[i] = wide[i].r.w;
	int trc = prof_wrapper_trim(ws, nw, cut, &ncut);
	for (size_t i = 0; !trc && i < nw; i++) {
		wide[i].r.w = ws[i];
		for (int k = 0; k <= PROF_WRAPPER_CHAIN; k++)
			if (!ws[i].fn[k])
				wide[i].key[k] = NULL;
	}
	free(ws);
	if (trc) {
		free(cut);
		goto nomem;
	}
	qsort(wide, nw, sizeof *wide, cmp_rows);
	size_t kept = 0;
	for (size_t i = 0; i < nw; i++) {
		struct digest_row *r = &wide[i].r, *last = kept ? &wide[kept - 1].r : NULL;
		if (last && !cmp_rows(&wide[i], &wide[kept - 1])) {
			last->v += r->v;
			last->var += r->var;
			last->valued |= r->valued;
		} else {
			wide[kept++] = wide[i];
		}
	}
	/* a series holds many digests: no slack, and by function no keys */
	d->rows = malloc((kept + 1) * sizeof *d->rows);
	if (lines)
		d->keys = malloc((kept * (PROF_WRAPPER_CHAIN + 1) + 1) * sizeof *d->keys);
	if (!d->rows || (lines && !d->keys)) {
		free(cut);
		goto nomem;
	}
	d->nrows = kept;
	for (size_t i = 0; i < kept; i++) {
		d->rows[i] = wide[i].r;
		if (lines)
			memcpy(&d->keys[i * (PROF_WRAPPER_CHAIN + 1)], wide[i].key, sizeof wide[i].key);
	}
	free(wide);
	wide = NULL;
	/* the functions seen above the rows' frames, for wrappers.h */
	size_t nh = ncut;
	for (size_t f = 0; f < p->nframes; f++)
		nh += high[f];
	d->high = malloc((nh + 1) * sizeof *d->high);
	if (d->high)
		memcpy(d->high, cut, ncut * sizeof *cut);
	free(cut);
	if (!d->high)
		goto nomem;
	d->nhigh = ncut;
	for (size_t f = 0; f < p->nframes; f++)
		if (high[f] && !(d->high[d->nhigh++] = own(d, p->frames[f].function)))
			goto nomem;
	qsort(d->high, d->nhigh, sizeof *d->high, cmp_ptrs);
	kept = 0;
	for (size_t i = 0; i < d->nhigh; i++)
		if (!kept || d->high[i] != d->high[kept - 1])
			d->high[kept++] = d->high[i];
	d->nhigh = kept;
	const char **hfit = realloc(d->high, (kept + 1) * sizeof *hfit);
	if (hfit)
		d->high = hfit;
	free(high);
	free(key);
	return d;
nomem:
	free(wide);
	free(high);
	free(key);
	prof_growth_digest_free(d);
	return NULL;
}

/* ---------- the fit ---------- */

int prof_growth_compute_digests(struct prof_growth *g, struct prof_growth_dump *const *ds,
				size_t n, bool fold)
{
	memset(g, 0, sizeof *g);
	if (n < 3)
		return -EINVAL;
	struct entry *es = NULL;
	struct prof_wrapper_stack *stacks = NULL;
	size_t nes = 0, cap = 0, ns = 0;
	int rc = -ENOMEM;
	g->ndumps = n;
	g->x = calloc(n, sizeof *g->x);
	g->total.values = calloc(n, sizeof *g->total.values);
	g->total.vars = calloc(n, sizeof *g->total.vars);
	if (!g->x || !g->total.values || !g->total.vars)
		goto out;
	if (fold) {
		/* the wrappers of the whole series, then each stack counts for
		 * the wrapper's caller, as if pprof's -hide had taken the
		 * wrapper out (a stack of wrappers alone stays whole); each
		 * dump's stacks kept once now and then, as a long series
		 * repeats the same ones */
		size_t scap = 0;
		for (size_t i = 0; i < n; i++) {
			size_t more = ds[i]->nrows + ds[i]->nhigh;
			if (ns + more > scap &&
			    (ns = prof_wrapper_stacks_unique(stacks, ns)) + more > scap / 2) {
				size_t nc = 2 * (ns + more) + 1024;  /* room to repeat */
				struct prof_wrapper_stack *nst = realloc(stacks, nc * sizeof *nst);
				if (!nst)
					goto out;
				stacks = nst;
				scap = nc;
			}
			for (size_t r = 0; r < ds[i]->nrows; r++)
				stacks[ns++] = ds[i]->rows[r].w;
			for (size_t h = 0; h < ds[i]->nhigh; h++)
				stacks[ns++] = (struct prof_wrapper_stack){ .fn = { ds[i]->high[h] },
									    .high = true };
		}
		rc = prof_wrappers_find(stacks, ns, &g->wrappers, &g->nwrappers);
		free(stacks);
		stacks = NULL;
		if (rc)
			goto out;
		rc = -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		if (ds[i]->sample > 1) {
			g->sampled = true;
			if (ds[i]->sample > g->sample)
				g->sample = ds[i]->sample;
		}
	g->timed = true;
	for (size_t i = 0; i < n; i++)
		if (ds[i]->ms < 0 || (i && ds[i]->ms <= ds[i - 1]->ms))
			g->timed = false;
	int64_t scale = 0;
	for (size_t i = 0; i < n; i++) {
		const struct prof_growth_dump *d = ds[i];
		g->x[i] = g->timed ? (double)(d->ms - ds[0]->ms) / 1000.0 : (double)i;
		g->total.values[i] = d->total;
		g->total.vars[i] = d->total_var;
		if (d->total > scale)
			scale = d->total;
		if (nes + d->nrows > cap) {
			cap = 2 * (nes + d->nrows) + 1024;
			struct entry *ne = realloc(es, cap * sizeof *ne);
			if (!ne)
				goto out;
			es = ne;
		}
		for (size_t r = 0; r < d->nrows; r++) {
			const struct digest_row *row = &d->rows[r];
			if (!row->valued)
				continue;
			size_t site = g->nwrappers ? prof_wrapper_site(g->wrappers, g->nwrappers, &row->w) : 0;
			const char *name = d->keys ? d->keys[r * (PROF_WRAPPER_CHAIN + 1) + site]
				: row->w.fn[site];
			es[nes++] = (struct entry){ name, i, row->v, row->var };
		}
	}
	const struct prof_growth_dump *a = ds[0], *z = ds[n - 1];
	if (a->rss >= 0 && z->rss >= 0) {
		g->rss_known = true;
		g->rss_rise = z->rss - a->rss;
		if (a->agent_bytes >= 0 && z->agent_bytes >= 0)
			g->rss_rise -= z->agent_bytes - a->agent_bytes;
		g->heap_rise = z->total_space - a->total_space;
	}
	g->total.name = "(all)";
	/* the whole heap's row is the whole run's: its rate may change as
	 * sites start and stop, none of which is its start */
	classify_whole(&g->total, g->x, n, scale, g->sampled);
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
			    !(s->values = calloc(n, sizeof *s->values)) ||
			    !(s->vars = calloc(n, sizeof *s->vars)))
				goto out;
			s->name = g->names[g->nsites++];
		}
		g->sites[g->nsites - 1].values[es[i].dump] += es[i].value;
		g->sites[g->nsites - 1].vars[es[i].dump] += es[i].var;
	}
	for (size_t i = 0; i < g->nsites; i++)
		classify(&g->sites[i], g->x, n, scale, g->sampled);
	qsort(g->sites, g->nsites, sizeof *g->sites, cmp_sites);
	if (judge_replacing(g, ds, n))
		goto out;
	if (g->nreplacing)
		qsort(g->sites, g->nsites, sizeof *g->sites, cmp_sites);
	rc = 0;
out:
	free(stacks);
	free(es);
	if (rc)
		prof_growth_release(g);
	return rc;
}

/* The fit of whole profiles: each digested, then as above. */
static int compute(struct prof_growth *g, const struct prof_profile *ps, size_t n, int v,
		   bool lines, bool fold)
{
	memset(g, 0, sizeof *g);
	struct prof_growth_dump **ds = calloc(n + 1, sizeof *ds);
	int rc = ds ? 0 : -ENOMEM;
	for (size_t i = 0; !rc && i < n; i++)
		if (!(ds[i] = prof_growth_digest(&ps[i], v, lines)))
			rc = -ENOMEM;
	if (!rc)
		rc = prof_growth_compute_digests(g, ds, n, fold);
	for (size_t i = 0; ds && i < n; i++)
		prof_growth_digest_free(ds[i]);
	free(ds);
	return rc;
}

int prof_growth_compute(struct prof_growth *g, const struct prof_profile *ps, size_t n,
			int v, bool lines)
{
	return compute(g, ps, n, v, lines, false);
}

int prof_growth_fold_compute(struct prof_growth *g, const struct prof_profile *ps, size_t n,
			     int v, bool lines)
{
	return compute(g, ps, n, v, lines, true);
}

void prof_growth_release(struct prof_growth *g)
{
	prof_wrappers_release(g->wrappers, g->nwrappers);
	for (size_t i = 0; i < g->nsites; i++) {
		free(g->sites[i].values);
		free(g->sites[i].vars);
		free(g->names ? g->names[i] : NULL);
	}
	free(g->sites);
	free(g->names);
	free(g->x);
	free(g->total.values);
	free(g->total.vars);
	memset(g, 0, sizeof *g);
}
