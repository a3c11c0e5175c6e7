/* tables.c — the text tables of `heaptrail top`, `diff`, `growth` and the
 * top of `timeline` (the sites at the peak), from the models the CLI
 * built (aggregate.h's tables, growth.h's fit). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analyze/unbias.h"
#include "render/render.h"

static const char *const value_titles[PROF_NVALUES] = {
	"in-use objects", "in-use space", "allocated objects", "allocated space",
};

static bool is_space(int v)
{
	return v == PROF_INUSE_SPACE || v == PROF_ALLOC_SPACE;
}

const char *render_amount(char *buf, size_t cap, int64_t v, bool exact)
{
	if (exact) {
		snprintf(buf, cap, "%" PRId64, v);
		return buf;
	}
	return render_bytes(buf, cap, v);
}

/* x of value v: bytes (exact or KiB/MiB) or a count, "+" before a
 * positive change when sign. */
static const char *fmt_value(char *buf, size_t cap, int64_t x, int v, bool exact, bool sign)
{
	char tmp[48];
	if (is_space(v))
		render_amount(tmp, sizeof tmp, x, exact);
	else
		snprintf(tmp, sizeof tmp, "%" PRId64, x);
	snprintf(buf, cap, "%s%s", sign && x > 0 ? "+" : "", tmp);
	return buf;
}

const char *render_pm(char *buf, size_t cap, double est, double lo, double hi, bool space,
		      bool exact)
{
	double up = hi > est ? hi - est : 0, down = est > lo ? est - lo : 0;
	double m = up > down ? up : down, unit = 1;
	int prec = 0; /* integers: counts, --bytes, and plain bytes */
	if (!(m > 0)) {
		snprintf(buf, cap, "±0");
		return buf;
	}
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	const char *suffix = "";
	if (space && !exact) {
		/* render_bytes()'s unit for est; the half-width's own, named,
		 * when it needs a bigger one ("+12.00 KiB ±1.50 MiB") */
		double a = fabs(est), am = m;  /* 0 is "0 B": a bigger unit is named */
		int u = 0, um = 0;
		for (; a >= 1024 && u < 5; u++)
			a /= 1024;
		for (; am >= 1024 && um < 5; um++)
			am /= 1024;
		if (um > u) {
			u = um;
			suffix = units[u];
		}
		for (int i = 0; i < u; i++)
			unit *= 1024;
		/* two or three significant digits: 0.30, 4.6, 463 */
		prec = unit == 1 || m / unit >= 100 ? 0 : m / unit >= 10 ? 1 : 2;
	}
	if (up - down > 0.25 * m || down - up > 0.25 * m)
		snprintf(buf, cap, "+%.*f/-%.*f%s%s", prec, up / unit, prec, down / unit,
			 *suffix ? " " : "", suffix);
	else
		snprintf(buf, cap, "±%.*f%s%s", prec, m / unit, *suffix ? " " : "", suffix);
	return buf;
}

/* The uncertainty of a site's (or a total's) estimate x of variance var. */
static const char *fmt_pm(char *buf, size_t cap, int64_t x, double var, int v, bool exact)
{
	double lo, hi;
	prof_interval90((double)x, var, &lo, &hi);
	return render_pm(buf, cap, (double)x, lo, hi, is_space(v), exact);
}

/* The same for a change (new minus old), and whether it is within the
 * noise (its 90 % interval holds zero). */
static const char *fmt_pm_delta(char *buf, size_t cap, int64_t x, double var, int v, bool exact,
				bool *noise)
{
	double lo, hi;
	prof_interval90_delta((double)x, var, &lo, &hi);
	*noise = lo <= 0 && hi >= 0;
	return render_pm(buf, cap, (double)x, lo, hi, is_space(v), exact);
}

/* ", ±X at 90 %, from N samples" after a sampled total; nothing when exact */
static void put_total_pm(FILE *out, const struct prof_profile *p, int v, bool exact, bool delta)
{
	char a[48];
	bool noise;
	if (p->sample <= 1)
		return;
	if (delta)
		fmt_pm_delta(a, sizeof a, p->total[v], p->total_var[v], v, exact, &noise);
	else
		fmt_pm(a, sizeof a, p->total[v], p->total_var[v], v, exact);
	fprintf(out, " %s at 90 %%, from %" PRId64 " sample%s", a, p->total_nsampled[v],
		p->total_nsampled[v] == 1 ? "" : "s");
}

static double pct(int64_t x, int64_t total)
{
	return total ? 100.0 * (double)x / (double)total : 0.0;
}

static void put_filter(FILE *out, const struct render_table_opts *o)
{
	if (o->focus || o->ignore)
		fprintf(out, "(stacks%s%s%s%s)\n", o->focus ? " matching " : "",
			o->focus ? o->focus : "", o->ignore ? " without " : "",
			o->ignore ? o->ignore : "");
}

/* ---------- top ---------- */

void render_top(FILE *out, const struct prof_profile *p, const struct prof_table *t,
		const struct render_table_opts *o)
{
	char a[48], b[48];
	int v = o->value;
	int64_t total = p->total[v];
	fprintf(out, "%s: %s%s %s", o->name, o->base ? "change in " : "", value_titles[v],
		fmt_value(a, sizeof a, total, v, o->exact, o->base != NULL));
	bool sampled = p->sample > 1;
	if (sampled) {
		fprintf(out, " (sampled every %" PRIu64 " bytes on average: estimates", p->sample);
		put_total_pm(out, p, v, o->exact, o->base != NULL);
		fprintf(out, ")");
	}
	if (o->since)
		fprintf(out, " %s", o->since);
	fprintf(out, "\n");
	if (o->base)
		fprintf(out, "(minus %s)\n", o->base);
	put_filter(out, o);
	if (sampled)
		/* ±: the 90 % interval, samples: the sampled blocks behind flat */
		fprintf(out, "%12s %10s %7s %6s %6s %12s %10s %6s  %s\n", "flat", "±90%", "samples",
			"flat%", "sum%", "cum", "±90%", "cum%",
			o->lines ? "function file:line" : "function");
	else
		fprintf(out, "%12s %6s %6s %12s %6s  %s\n", "flat", "flat%", "sum%", "cum", "cum%",
			o->lines ? "function file:line" : "function");
	int64_t sum = 0;
	long shown = 0;
	for (size_t i = 0; i < t->nrows && shown < o->max; i++) {
		const struct prof_row *r = &t->rows[i];
		if (!r->flat[v] && !r->cum[v])
			continue;
		sum += r->flat[v];
		if (sampled) {
			char c[48], d[48];
			bool noise;
			if (o->base) {
				fmt_pm_delta(c, sizeof c, r->flat[v], r->flat_var[v], v, o->exact, &noise);
				fmt_pm_delta(d, sizeof d, r->cum[v], r->cum_var[v], v, o->exact, &noise);
			} else {
				fmt_pm(c, sizeof c, r->flat[v], r->flat_var[v], v, o->exact);
				fmt_pm(d, sizeof d, r->cum[v], r->cum_var[v], v, o->exact);
			}
			fprintf(out, "%12s %10s %7" PRId64 " %5.1f%% %5.1f%% %12s %10s %5.1f%%  %s\n",
				fmt_value(a, sizeof a, r->flat[v], v, o->exact, false), c,
				r->flat_n[v], pct(r->flat[v], total), pct(sum, total),
				fmt_value(b, sizeof b, r->cum[v], v, o->exact, false), d,
				pct(r->cum[v], total), r->name);
		} else {
			fprintf(out, "%12s %5.1f%% %5.1f%% %12s %5.1f%%  %s\n",
				fmt_value(a, sizeof a, r->flat[v], v, o->exact, false),
				pct(r->flat[v], total), pct(sum, total),
				fmt_value(b, sizeof b, r->cum[v], v, o->exact, false),
				pct(r->cum[v], total), r->name);
		}
		shown++;
	}
	size_t rest = 0;
	for (size_t i = 0; i < t->nrows; i++)
		if (t->rows[i].flat[v] || t->rows[i].cum[v])
			rest++;
	if (rest > (size_t)shown)
		fprintf(out, "(%zu more; -n to see them)\n", rest - (size_t)shown);
}

void render_peak_top(FILE *out, const struct prof_profile *p, const struct prof_table *t,
		     size_t ndumps, const struct render_table_opts *o)
{
	static const char *const words[PROF_NVALUES] = {
		"objects in use", "in use", "objects allocated", "allocated",
	};
	char a[48], b[48];
	int v = o->value;
	int64_t total = p->total[v];
	const char *name = strrchr(p->path, '/');
	fprintf(out, "\ntop allocation sites at the peak: %s", name ? name + 1 : p->path);
	if (p->ms >= 0)
		fprintf(out, ", taken at %.3f s", (double)p->ms / 1000);
	bool sampled = p->sample > 1;
	fprintf(out, ", %s %s", fmt_value(a, sizeof a, total, v, o->exact, false), words[v]);
	fprintf(out, " (");
	if (sampled) {
		fprintf(out, "estimate");
		put_total_pm(out, p, v, o->exact, false);
		fprintf(out, "; ");
	}
	fprintf(out, "the nearest the peak of %zu dump%s)\n", ndumps, ndumps == 1 ? "" : "s");
	put_filter(out, o);
	if (sampled)
		fprintf(out, "%12s %10s %7s %6s %12s %6s  %s\n", "flat", "±90%", "samples", "flat%",
			"cum", "cum%", o->lines ? "function file:line" : "function");
	else
		fprintf(out, "%12s %6s %12s %6s  %s\n", "flat", "flat%", "cum", "cum%",
			o->lines ? "function file:line" : "function");
	long shown = 0;
	for (size_t i = 0; i < t->nrows && shown < o->max; i++) {
		const struct prof_row *r = &t->rows[i];
		if (!r->flat[v])
			continue;  /* callers only: not an allocation site */
		if (sampled) {
			char c[48];
			fprintf(out, "%12s %10s %7" PRId64 " %5.1f%% %12s %5.1f%%  %s\n",
				fmt_value(a, sizeof a, r->flat[v], v, o->exact, false),
				fmt_pm(c, sizeof c, r->flat[v], r->flat_var[v], v, o->exact),
				r->flat_n[v], pct(r->flat[v], total),
				fmt_value(b, sizeof b, r->cum[v], v, o->exact, false),
				pct(r->cum[v], total), r->name);
		} else {
			fprintf(out, "%12s %5.1f%% %12s %5.1f%%  %s\n",
				fmt_value(a, sizeof a, r->flat[v], v, o->exact, false),
				pct(r->flat[v], total),
				fmt_value(b, sizeof b, r->cum[v], v, o->exact, false),
				pct(r->cum[v], total), r->name);
		}
		shown++;
	}
	if (!shown)
		fprintf(out, "  (none)\n");
}

/* ---------- diff ---------- */

/* The row named name in t, or NULL. */
static const struct prof_row *row_named(const struct prof_table *t, const char *name)
{
	for (size_t i = 0; i < t->nrows; i++)
		if (!strcmp(t->rows[i].name, name))
			return &t->rows[i];
	return NULL;
}

/* The flat value of the row named name in t, or 0. */
static int64_t flat_of(const struct prof_table *t, const char *name, int v)
{
	const struct prof_row *r = row_named(t, name);
	return r ? r->flat[v] : 0;
}

static void put_diff_rows(FILE *out, const struct render_diff *d,
			  const struct render_table_opts *o, int sign, size_t *nnoise)
{
	char a[48], b[48], c[48];
	int v = o->value;
	long shown = 0;
	size_t more = 0;
	const struct prof_table *delta = d->delta_rows;
	for (size_t k = 0; k < delta->nrows; k++) {
		size_t i = sign > 0 ? k : delta->nrows - 1 - k;
		const struct prof_row *r = &delta->rows[i];
		if (sign > 0 ? r->flat[v] <= 0 : r->flat[v] >= 0)
			continue;
		if (shown >= o->max) {
			more++;
			continue;
		}
		if (d->sampled) {
			/* "~" before a change whose 90 % interval holds zero: what
			 * sampling alone could have made */
			char e[48];
			bool noise;
			fmt_pm_delta(e, sizeof e, r->flat[v], r->flat_var[v], v, o->exact, &noise);
			fprintf(out, " %c%12s %10s %12s %12s  %s\n", noise ? '~' : ' ',
				fmt_value(a, sizeof a, r->flat[v], v, o->exact, true), e,
				fmt_value(b, sizeof b, flat_of(d->old_rows, r->name, v), v, o->exact,
					  false),
				fmt_value(c, sizeof c, flat_of(d->new_rows, r->name, v), v, o->exact,
					  false),
				r->name);
			*nnoise += noise;
		} else {
			fprintf(out, "  %12s %12s %12s  %s\n",
				fmt_value(a, sizeof a, r->flat[v], v, o->exact, true),
				fmt_value(b, sizeof b, flat_of(d->old_rows, r->name, v), v, o->exact,
					  false),
				fmt_value(c, sizeof c, flat_of(d->new_rows, r->name, v), v, o->exact,
					  false),
				r->name);
		}
		shown++;
	}
	if (!shown)
		fprintf(out, "  (none)\n");
	if (more)
		fprintf(out, "  (%zu more; -n to see them)\n", more);
}

void render_diff(FILE *out, const struct render_diff *d, const struct render_table_opts *o)
{
	char a[48], b[48], c[48];
	int v = o->value;
	size_t nnoise = 0;
	fprintf(out, "%s -> %s: %s %s (%s -> %s)", d->old_name, d->new_name, value_titles[v],
		fmt_value(a, sizeof a, d->delta->total[v], v, o->exact, true),
		fmt_value(b, sizeof b, d->old->total[v], v, o->exact, false),
		fmt_value(c, sizeof c, d->new->total[v], v, o->exact, false));
	if (d->sampled) {
		fprintf(out, " (sampled: estimates;");
		put_total_pm(out, d->delta, v, o->exact, true);
		fprintf(out, ")");
	}
	fprintf(out, "\n");
	if (d->sampled)
		fprintf(out, "grew:\n  %12s %10s %12s %12s  %s\n", "change", "±90%", "old", "new",
			o->lines ? "function file:line" : "function");
	else
		fprintf(out, "grew:\n  %12s %12s %12s  %s\n", "change", "old", "new",
			o->lines ? "function file:line" : "function");
	put_diff_rows(out, d, o, 1, &nnoise);
	fprintf(out, "shrank:\n");
	put_diff_rows(out, d, o, -1, &nnoise);
	if (nnoise)
		fprintf(out, "(~: %zu change%s within the noise: sampling alone could make %s, "
			"its 90 %% interval holds zero)\n", nnoise, nnoise == 1 ? "" : "s",
			nnoise == 1 ? "it" : "them");
}

/* ---------- growth ---------- */

static const char *fmt_v(char *buf, size_t cap, double x, bool space, bool exact, bool sign)
{
	char tmp[48];
	if (space)
		render_amount(tmp, sizeof tmp, (int64_t)llround(x), exact);
	else
		snprintf(tmp, sizeof tmp, "%.0f", x);
	snprintf(buf, cap, "%s%s", sign && x > 0 ? "+" : "", tmp);
	return buf;
}

void render_growth_cells(const struct prof_growth *g, const struct prof_growth_site *s,
			 bool space, bool exact, struct render_growth_cells *c)
{
	char a[48];
	const char *unit = g->timed ? "s" : "dump";
	fmt_v(a, sizeof a, s->slope, space, exact, true);
	snprintf(c->slope, sizeof c->slope, "%s/%s", a, unit);
	fmt_v(a, sizeof a, s->late_slope, space, exact, true);
	snprintf(c->late, sizeof c->late, "%s/%s", a, unit);
	c->pm[0] = 0;
	if (g->sampled)
		render_pm(c->pm, sizeof c->pm, s->slope, s->slope - s->slope_pm,
			  s->slope + s->slope_pm, space, exact);
	snprintf(c->r2, sizeof c->r2, "%5.2f", s->r2);
	fmt_v(c->first, sizeof c->first, (double)s->first, space, exact, false);
	fmt_v(c->last, sizeof c->last, (double)s->last, space, exact, false);
}

static void put_site(FILE *out, const struct prof_growth *g, const struct prof_growth_site *s,
		     const char *rank, bool space, bool exact)
{
	struct render_growth_cells c;
	render_growth_cells(g, s, space, exact, &c);
	if (g->sampled) {
		fprintf(out, "%4s  %-16s %16s %11s %16s %s %12s -> %-12s %s\n", rank,
			prof_trend_names[s->trend], c.slope, c.pm, c.late, c.r2, c.first, c.last,
			s->name);
		return;
	}
	fprintf(out, "%4s  %-16s %16s %16s %s %12s -> %-12s %s\n", rank,
		prof_trend_names[s->trend], c.slope, c.late, c.r2, c.first, c.last, s->name);
}

/* The growing sites that started mid-run (growth.h: onset), by their
 * rank: their slopes are since then. */
static void put_onsets(FILE *out, const struct prof_growth *g)
{
	bool any = false;
	for (size_t i = 0; i < g->nsites && g->sites[i].trend == PROF_TREND_GROWING; i++) {
		const struct prof_growth_site *s = &g->sites[i];
		if (!s->onset)
			continue;
		if (!any)
			fprintf(out, "\nstarted later (slope, later half and r2 from then on):\n");
		any = true;
		if (g->timed)
			fprintf(out, "%4zu  from %.1f s (dump %zu of %zu)  %s\n", i + 1, g->x[s->onset],
				s->onset + 1, g->ndumps, s->name);
		else
			fprintf(out, "%4zu  from dump %zu of %zu  %s\n", i + 1, s->onset + 1, g->ndumps,
				s->name);
	}
}

/* A resident set that grew far more than the heap the dumps hold
 * (growth.h: rss_rise): growth cannot rank what it does not see, and
 * says so rather than call the heap flat. */
static void put_unseen(FILE *out, const struct prof_growth *g, bool exact)
{
	char a[48], b[48];
	int64_t excess = g->alloc_last - g->alloc_first - g->seen_rise;
	if (g->heap_known && excess >= PROF_GROWTH_UNSEEN_ALLOC &&
	    excess > 2 * (g->seen_rise > 0 ? g->seen_rise : 0)) {
		fprintf(out, "\nthe allocator's own count of the heap grew by %s over these dumps, "
			"the heap heaptrail sees by %s: memory it does not see is growing (a "
			"pointer to malloc saved before an attach with --slots-only, an allocator "
			"it does not hook)\n",
			fmt_v(a, sizeof a, (double)(g->alloc_last - g->alloc_first), true, exact, false),
			fmt_v(b, sizeof b, (double)g->seen_rise, true, exact, false));
		return;
	}
	int64_t heap = g->heap_rise > 0 ? g->heap_rise : 0;
	if (!g->rss_known || g->rss_rise < 2 * PROF_GROWTH_UNSEEN ||
	    g->rss_rise <= 2 * heap + PROF_GROWTH_UNSEEN)
		return;
	fprintf(out, "\nthe process's private resident memory grew by %s over these dumps, the heap "
		"heaptrail sees by %s: memory it does not see is growing (a pointer to malloc "
		"saved before an attach, an allocator it does not hook, the program's own "
		"mmap); 'heaptrail timeline' draws both\n",
		fmt_v(a, sizeof a, (double)g->rss_rise, true, exact, false),
		fmt_v(b, sizeof b, (double)g->heap_rise, true, exact, false));
}

/* The names of the first few sites of trend t, for advice about them:
 * "a, b and 3 more". */
static void put_names(FILE *out, const struct prof_growth *g, enum prof_trend t)
{
	size_t n = 0, shown = 0;
	for (size_t i = 0; i < g->nsites; i++)
		if (g->sites[i].trend == t)
			n++;
	for (size_t i = 0; i < g->nsites && shown < 3; i++) {
		if (g->sites[i].trend != t)
			continue;
		shown++;
		fprintf(out, "%s%s", shown == 1 ? "" : shown == n ? " and " : ", ", g->sites[i].name);
	}
	if (n > shown)
		fprintf(out, " and %zu more", n - shown);
}

/* Sites that rose only by replacing memory the dumps do not hold
 * (growth.h: replacing), and how long to watch to be sure. */
static void put_replacing(FILE *out, const struct prof_growth *g, bool exact)
{
	if (!g->nreplacing)
		return;
	char a[48], b[48], u[48];
	fprintf(out, "\n%zu site%s (", g->nreplacing, g->nreplacing == 1 ? "" : "s");
	put_names(out, g, PROF_TREND_REPLACING);
	fprintf(out, ") rose while the allocator's own count of the heap went from %s to %s: "
		"%s memory allocated before the attach, not growth",
		fmt_v(a, sizeof a, (double)g->alloc_first, true, exact, false),
		fmt_v(b, sizeof b, (double)g->alloc_last, true, exact, false),
		g->nreplacing == 1 ? "it replaces" : "they replace");
	if (g->unseen_last > 0 && g->replacing_rate > 0) {
		double t = (double)g->unseen_last / g->replacing_rate;
		fprintf(out, "; replacing can add at most the %s not seen yet: rising by more "
			"than that (at %s%s, %.0f %s from the last dump at the earliest) is growth",
			fmt_v(a, sizeof a, (double)g->unseen_last, true, exact, false),
			fmt_v(u, sizeof u, g->replacing_rate, true, exact, false),
			g->timed ? "/s" : " a dump", t, g->timed ? "s" : "dumps");
	}
	fputs("\n", out);
}

/* A run longer than this many times the one dumped is not advice. */
#define GROWTH_LONGER_MAX 100

/* What would make the "too few samples" sites sure: the slope's sampling
 * noise shrinks as sqrt(S / T) (analyze/growth.c), so by need F with a
 * run F^2 times longer, or S divided by F^2. */
static void put_advice(FILE *out, const struct prof_growth *g)
{
	size_t n = 0;
	double need = 1;
	for (size_t i = 0; i < g->nsites; i++)
		if (g->sites[i].trend == PROF_TREND_UNSURE) {
			n++;
			if (g->sites[i].need > need)
				need = g->sites[i].need;
		}
	if (g->sampled && g->ndumps < PROF_GROWTH_MIN_DUMPS) {
		/* the dumps are what is missing, whatever the samples say */
		fprintf(out, "\n%zu dumps: a sampled run needs at least %d to call a site growing "
			"(a longer run, or dumps more often: --every)\n",
			g->ndumps, PROF_GROWTH_MIN_DUMPS);
		return;
	}
	if (!n)
		return;
	double k = ceil(need * need * 1.2);  /* some margin: the slope itself is noisy */
	if (k > 1e6)
		k = 1e6;
	uint64_t s = (uint64_t)((double)g->sample / k);
	/* a round size: a power of two */
	uint64_t p2 = 1;
	while (p2 * 2 <= s)
		p2 *= 2;
	char size[32];
	if (p2 >= 1024 * 1024 && !(p2 % (1024 * 1024)))
		snprintf(size, sizeof size, "%" PRIu64 "m", p2 >> 20);
	else if (p2 >= 1024)
		snprintf(size, sizeof size, "%" PRIu64 "k", p2 >> 10);
	else
		snprintf(size, sizeof size, "%" PRIu64, p2);
	fprintf(out, "\nnot enough samples to tell whether %zu site%s (", n, n == 1 ? "" : "s");
	put_names(out, g, PROF_TREND_UNSURE);
	fprintf(out, ") grow%s (\"too few samples\": sampling alone could make their rise, or "
		"hide one); to be sure, ", n == 1 ? "s" : "");
	if (k > GROWTH_LONGER_MAX)
		fprintf(out, "--sample %s (now %" PRIu64 "): a longer run alone would have to "
			"be over %d times this one\n", size, g->sample, GROWTH_LONGER_MAX);
	else
		fprintf(out, "a run about %.0f times longer, or --sample %s (now %" PRIu64 ")\n",
			k, size, g->sample);
}

void render_growth_note(FILE *out, const struct prof_growth *g, bool exact)
{
	put_onsets(out, g);
	put_replacing(out, g, exact);
	put_unseen(out, g, exact);
	put_advice(out, g);
}

void render_growth_head(FILE *out, const struct prof_growth *g, long pid, bool sampled,
			const struct render_table_opts *o)
{
	bool space = o->value == PROF_INUSE_SPACE, exact = o->exact;
	size_t n = g->ndumps;
	char a[48], b[48];
	fprintf(out, "%zu dumps", n);
	if (pid >= 0)
		fprintf(out, " of pid %ld", pid);
	if (g->timed)
		fprintf(out, " over %.1f s", g->x[n - 1]);
	if (o->since)
		fprintf(out, " %s", o->since);
	fprintf(out, ", %s %s -> %s", space ? "in-use space" : "in-use objects",
		fmt_v(a, sizeof a, (double)g->total.first, space, exact, false),
		fmt_v(b, sizeof b, (double)g->total.last, space, exact, false));
	if (sampled) {
		double lo, hi, last = (double)g->total.last;
		prof_interval90(last, g->total.vars[n - 1], &lo, &hi);
		fprintf(out, " (sampled: estimates, the last %s at 90 %%; ±90%%: the slope's "
			"interval)", render_pm(a, sizeof a, last, lo, hi, space, exact));
	}
}

void render_growth(FILE *out, const struct prof_growth *g, long pid, bool sampled,
		   const struct render_table_opts *o)
{
	bool space = o->value == PROF_INUSE_SPACE, exact = o->exact;
	render_growth_head(out, g, pid, sampled, o);
	if (g->sampled)
		fprintf(out, "\n\n%4s  %-16s %16s %11s %16s %5s %12s    %-12s %s\n", "rank", "trend",
			"slope", "±90%", "later half", "r2", "first", "last",
			o->lines ? "site (file:line)" : "site");
	else
		fprintf(out, "\n\n%4s  %-16s %16s %16s %5s %12s    %-12s %s\n", "rank", "trend",
			"slope", "later half", "r2", "first", "last",
			o->lines ? "site (file:line)" : "site");
	long shown = 0;
	for (size_t i = 0; i < g->nsites && g->sites[i].trend == PROF_TREND_GROWING; i++) {
		if (shown == o->max)
			break;
		char rank[16];
		snprintf(rank, sizeof rank, "%ld", ++shown);
		put_site(out, g, &g->sites[i], rank, space, exact);
	}
	if (!shown)
		fprintf(out, "   -  (no site grows steadily)\n");
	fprintf(out, "\nnot growing:\n");
	long others = 0;
	size_t hidden = 0;
	for (size_t i = 0; i < g->nsites; i++) {
		if (g->sites[i].trend == PROF_TREND_GROWING)
			continue;
		if (others == o->max) {
			hidden++;
			continue;
		}
		others++;
		put_site(out, g, &g->sites[i], "-", space, exact);
	}
	if (!others)
		fprintf(out, "   -  (none)\n");
	if (hidden)
		fprintf(out, "(%zu more; -n to see them)\n", hidden);
	fprintf(out, "\n");
	put_site(out, g, &g->total, "all", space, exact);
	render_growth_note(out, g, exact);
	if (g->nwrappers) {
		fputc('\n', out);
		render_growth_wrappers(out, g);
	}
}

/* The reader must know the sites are the wrappers' callers. */
void render_growth_wrappers(FILE *out, const struct prof_growth *g)
{
	size_t n = g->nwrappers;
	if (!n)
		return;
	fprintf(out, "folded %zu allocation wrapper%s into %s callers (--keep-wrappers shows %s): ",
		n, n == 1 ? "" : "s", n == 1 ? "its" : "their", n == 1 ? "it as a site" : "them as sites");
	/* the first 10 by name; a generated program can have hundreds */
	for (size_t i = 0; i < n && i < 10; i++)
		fprintf(out, "%s%s (%zu caller%s)", i ? ", " : "", g->wrappers[i].name,
			g->wrappers[i].callers, g->wrappers[i].callers == 1 ? "" : "s");
	if (n > 10)
		fprintf(out, " and %zu more", n - 10);
	fputc('\n', out);
}
