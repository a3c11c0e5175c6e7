/* html.c — a run as one self-contained HTML page: the analyzer's models
 * (the leak report, growth's fit, the timeline, each dump's tree of
 * stacks) written as JSON into the page, with a small script and style
 * of our own (src/render/html/, embedded at build time) that draw them.
 * Every figure the page shows that a text view also prints comes from
 * the same code as the text view (render_json_process, the growth
 * table's cells, render_text's summary); the script only lays out, sums
 * what a search matched, and formats the sums.
 *
 * Size is bounded: each dump's tree keeps the nodes of at least
 * o->min_share of its total (under a kept parent); the rest are summed
 * per parent into one "n more" node, so nothing is dropped unsaid. The
 * same for the leak records (o->max_records), growth's sites
 * (o->max_sites) and the timeline's ticks (o->max_ticks: the highest of
 * each run of ticks, so the peak stays). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyze/tree.h"
#include "render/render.h"

/* build/gen/html_assets.h: html_app_js, html_style_css (xxd -i). */
#include "html_assets.h"

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s && s[1] ? s + 1 : path;
}

static void put_num(FILE *out, const char *key, int64_t v, bool comma)
{
	fprintf(out, "\"%s\": %" PRId64 "%s", key, v, comma ? ", " : "");
}

static void put_str(FILE *out, const char *key, const char *v, bool comma)
{
	fprintf(out, "\"%s\": ", key);
	if (v)
		render_json_string(out, v);
	else
		fputs("null", out);
	if (comma)
		fputs(", ", out);
}

/* "1.50 MiB" */
static const char *bytes(char *buf, size_t cap, int64_t v)
{
	return render_bytes(buf, cap, v);
}

/* text that a renderer writes, as a JSON member */
static int put_rendered(FILE *out, const char *key, void (*fn)(FILE *, const void *), const void *arg)
{
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);
	if (!m)
		return -ENOMEM;
	fn(m, arg);
	if (fclose(m)) {
		free(text);
		return -ENOMEM;
	}
	/* no blank lines around it */
	char *s = text;
	while (*s == '\n')
		s++;
	for (size_t n = strlen(s); n && s[n - 1] == '\n'; n--)
		s[n - 1] = 0;
	put_str(out, key, *s ? s : NULL, true);
	free(text);
	return 0;
}

/* The summary the text report prints for a process (render_text,
 * summary only). */
static void summary_text(FILE *m, const void *arg)
{
	struct prof_run one = { .procs = (struct prof_process *)arg, .nprocs = 1 };
	render_text(m, &one, &(struct render_text_opts){ .summary_only = true });
}

/* ---------- the timeline ---------- */

static void put_timeline(FILE *out, const struct prof_timeline *t, size_t max)
{
	long ip = prof_timeline_peak(t);
	size_t step = max && t->nticks > max ? (t->nticks + max - 1) / max : 1;
	fputs("\"timeline\": {", out);
	put_num(out, "ticks", (int64_t)t->nticks, true);
	put_num(out, "step", (int64_t)step, true);
	put_num(out, "sample", (int64_t)t->sample, true);
	if (ip >= 0) {
		char a[48];
		const struct prof_tick *pk = &t->ticks[ip];
		fprintf(out, "\"peak\": {\"ms\": %" PRId64 ", \"live\": %" PRId64 ", \"rss\": %" PRId64
			", ", pk->ms, pk->live_bytes, pk->rss_bytes);
		put_str(out, "text", bytes(a, sizeof a, pk->live_bytes), false);
		fputs("}, ", out);
	}
	/* the highest tick of each run of step ticks: the peak is always one */
	fputs("\"points\": [", out);
	for (size_t i = 0, k = 0; i < t->nticks; i += step, k++) {
		size_t best = i;
		for (size_t j = i; j < i + step && j < t->nticks; j++)
			if (t->ticks[j].live_bytes > t->ticks[best].live_bytes)
				best = j;
		const struct prof_tick *tk = &t->ticks[best];
		fprintf(out, "%s[%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]", k ? "," : "",
			tk->ms, tk->live_bytes, tk->rss_bytes, tk->allocated_bytes);
	}
	fputs("]}, ", out);
}

/* ---------- growth ---------- */

static void put_site(FILE *out, const struct prof_growth *g, const struct prof_growth_site *s,
		     long rank)
{
	struct render_growth_cells c;
	render_growth_cells(g, s, true, false, &c);
	char *r2 = c.r2;
	while (*r2 == ' ')
		r2++;
	fputs("{", out);
	if (rank > 0)
		put_num(out, "rank", rank, true);
	put_str(out, "name", s->name, true);
	put_str(out, "trend", prof_trend_names[s->trend], true);
	put_str(out, "slope", c.slope, true);
	put_str(out, "pm", c.pm, true);
	put_str(out, "late", c.late, true);
	put_str(out, "r2", r2, true);
	put_str(out, "first", c.first, true);
	put_str(out, "last", c.last, true);
	fprintf(out, "\"slope_bps\": %.3f, ", s->slope);
	fputs("\"values\": [", out);
	for (size_t i = 0; i < g->ndumps; i++)
		fprintf(out, "%s%" PRId64, i ? "," : "", s->values[i]);
	fputs("]}", out);
}

struct growth_arg {
	const struct prof_growth *g;
	long pid;
	bool sampled;
	const char *since;
};

static void growth_head(FILE *m, const void *arg)
{
	const struct growth_arg *a = arg;
	render_growth_head(m, a->g, a->pid, a->sampled, &(struct render_table_opts){
		.value = PROF_INUSE_SPACE, .since = a->since });
}

static void growth_note(FILE *m, const void *arg)
{
	render_growth_note(m, ((const struct growth_arg *)arg)->g, false);
}

static void growth_wrappers(FILE *m, const void *arg)
{
	render_growth_wrappers(m, ((const struct growth_arg *)arg)->g);
}

/* The sites that held the most at any dump, massif's picture: the
 * AREA_SITES largest peaks, each with its values, and what the others
 * held together ("other": the whole heap less those), so the stacked
 * areas add up to the whole heap at every dump. */
#define AREA_SITES 8

static int put_area(FILE *out, const struct prof_growth *g)
{
	size_t top[AREA_SITES], ntop = 0;
	for (size_t i = 0; i < g->nsites; i++) {
		const struct prof_growth_site *s = &g->sites[i];
		if (s->peak <= 0)
			continue;
		size_t k = ntop < AREA_SITES ? ntop++ : AREA_SITES;
		if (k == AREA_SITES) {
			if (s->peak <= g->sites[top[AREA_SITES - 1]].peak)
				continue;
			k = AREA_SITES - 1;
		}
		while (k > 0 && g->sites[top[k - 1]].peak < s->peak) {
			top[k] = top[k - 1];
			k--;
		}
		top[k] = i;
	}
	int64_t *other = malloc((g->ndumps ? g->ndumps : 1) * sizeof *other);
	if (!other)
		return -ENOMEM;
	memcpy(other, g->total.values, g->ndumps * sizeof *other);
	fputs("{\"sites\": [", out);
	for (size_t k = 0; k < ntop; k++) {
		const struct prof_growth_site *s = &g->sites[top[k]];
		fputs(k ? ", {" : "{", out);
		put_str(out, "name", s->name, true);
		put_str(out, "trend", prof_trend_names[s->trend], true);
		fputs("\"values\": [", out);
		for (size_t i = 0; i < g->ndumps; i++) {
			fprintf(out, "%s%" PRId64, i ? "," : "", s->values[i]);
			other[i] -= s->values[i];
		}
		fputs("]}", out);
	}
	fprintf(out, "], \"others\": %zu, \"other\": [", g->nsites - ntop);
	for (size_t i = 0; i < g->ndumps; i++)
		fprintf(out, "%s%" PRId64, i ? "," : "", other[i] > 0 ? other[i] : 0);
	fputs("]}", out);
	free(other);
	return 0;
}

static int put_growth(FILE *out, const struct render_html_proc *pr, size_t max)
{
	const struct prof_growth *g = pr->growth;
	const char *since = pr->since;
	struct growth_arg ga = { g, pr->pid, pr->ndumps && pr->dumps[0].sample > 1, since };
	int ret;
	fputs("\"growth\": {", out);
	/* the words of `heaptrail growth`: its first line and its advice */
	if ((ret = put_rendered(out, "head", growth_head, &ga)) ||
	    (ret = put_rendered(out, "note", growth_note, &ga)) ||
	    (ret = put_rendered(out, "wrappers", growth_wrappers, &ga)))
		return ret;
	put_num(out, "dumps", (int64_t)g->ndumps, true);
	fprintf(out, "\"timed\": %s, \"sampled\": %s, ", g->timed ? "true" : "false",
		g->sampled ? "true" : "false");
	put_num(out, "sample", (int64_t)g->sample, true);
	put_str(out, "since", since, true);
	fputs("\"x\": [", out);
	for (size_t i = 0; i < g->ndumps; i++)
		fprintf(out, "%s%.3f", i ? "," : "", g->x[i]);
	fputs("], \"sites\": [", out);
	size_t shown = 0, more = 0;
	long rank = 0;
	int64_t more_last = 0;
	for (size_t i = 0; i < g->nsites; i++) {
		const struct prof_growth_site *s = &g->sites[i];
		bool growing = s->trend == PROF_TREND_GROWING;
		if (growing)
			rank++;
		/* every growing site is shown; the others up to max */
		if (!growing && shown >= max) {
			more++;
			more_last += s->last;
			continue;
		}
		fputs(shown ? ",\n  " : "\n  ", out);
		put_site(out, g, s, growing ? rank : 0);
		shown++;
	}
	fprintf(out, "], \"more\": {\"sites\": %zu, \"last\": %" PRId64 "}, \"total\": ", more,
		more_last);
	put_site(out, g, &g->total, 0);
	fputs(",\n \"area\": ", out);
	if ((ret = put_area(out, g)))
		return ret;
	fputs("}, ", out);
	return 0;
}

/* ---------- a dump's tree ---------- */

static int put_flame(FILE *out, const struct prof_profile *p, double min_share, bool reverse)
{
	struct prof_tree t;
	int ret = prof_tree_init(&t, false);
	if (ret)
		return ret;
	ret = prof_tree_add(&t, p, PROF_INUSE_SPACE, false, false, reverse);
	uint32_t *id = calloc(t.n ? t.n : 1, sizeof *id);
	uint32_t *name_id = calloc(t.nnames ? t.nnames : 1, sizeof *name_id);
	uint32_t *more_n = calloc(t.n ? t.n : 1, sizeof *more_n);
	int64_t *more_v = calloc(t.n ? t.n : 1, sizeof *more_v);
	if (ret || !id || !name_id || !more_n || !more_v) {
		ret = -ENOMEM;
		goto out;
	}
	int64_t total = t.nodes[0].v;
	double thresh = min_share * (double)total;
	/* kept: the root, and nodes of at least thresh under a kept parent
	 * (id: 1 + the index written); the rest summed into their parent's
	 * "more" */
	uint32_t nkept = 0, nnames = 0;
	id[0] = ++nkept;
	for (size_t i = 1; i < t.n; i++) {
		const struct prof_tree_node *nd = &t.nodes[i];
		if (!id[nd->parent])
			continue;
		if ((double)nd->v >= thresh && nd->v > 0) {
			id[i] = ++nkept;
			if (!name_id[nd->name])
				name_id[nd->name] = ++nnames;
		} else {
			more_n[nd->parent]++;
			more_v[nd->parent] += nd->v;
		}
	}
	/* names in the order of their first use, each with where its first
	 * frame is ("file:line in module") */
	fputs("\"names\": [", out);
	uint32_t k = 0;
	for (size_t i = 1; i < t.n; i++) {
		const struct prof_tree_node *nd = &t.nodes[i];
		if (!id[i] || name_id[nd->name] != k + 1)
			continue;
		fputs(k ? ",\n  [" : "\n  [", out);
		render_json_string(out, t.names[nd->name]);
		fputs(", ", out);
		const struct prof_frame *f = nd->f;
		char where[1024] = "";
		if (f && f->file && f->line > 0 && !nd->mixed)
			snprintf(where, sizeof where, "%s:%d", f->file, f->line);
		else if (f && f->file)
			snprintf(where, sizeof where, "%s", f->file);
		if (f && f->module)
			snprintf(where + strlen(where), sizeof where - strlen(where), "%sin %s",
				 *where ? " " : "", f->module);
		render_json_string(out, where);
		fputs("]", out);
		k++;
	}
	/* [parent, name, value, self] per node, parents first; the root is
	 * node 0 with parent and name -1 */
	fprintf(out, "],\n \"total\": %" PRId64 ", \"nodes\": [[-1,-1,%" PRId64 ",%" PRId64 "]",
		total, total, t.nodes[0].self);
	for (size_t i = 1; i < t.n; i++) {
		const struct prof_tree_node *nd = &t.nodes[i];
		if (id[i])
			fprintf(out, ",[%u,%u,%" PRId64 ",%" PRId64 "]", id[nd->parent] - 1,
				name_id[nd->name] - 1, nd->v, nd->self);
	}
	/* [parent, how many nodes, their value] per kept node with pruned
	 * children */
	fputs("],\n \"more\": [", out);
	bool first = true;
	for (size_t i = 0; i < t.n; i++)
		if (id[i] && more_n[i]) {
			fprintf(out, "%s[%u,%u,%" PRId64 "]", first ? "" : ",", id[i] - 1, more_n[i],
				more_v[i]);
			first = false;
		}
	fputs("]", out);
out:
	free(id);
	free(name_id);
	free(more_n);
	free(more_v);
	prof_tree_release(&t);
	return ret;
}

#define PEEK_MAX 10  /* callers, and callees, listed per function */

static int cmp_edge_value(const void *a, const void *b)
{
	const struct prof_edge *x = a, *y = b;
	int64_t ax = x->v < 0 ? -x->v : x->v, ay = y->v < 0 ? -y->v : y->v;
	return ax != ay ? (ax < ay ? 1 : -1) : 0;
}

/* The callers (or the callees) of row r with the bytes of the stacks
 * through each pair: "[[name, bytes], ...], [n more, their bytes]", the
 * largest first. side: room for n edges. */
static void put_peek_side(FILE *out, const struct prof_table *t, const struct prof_edge *es,
			  size_t n, uint32_t r, bool callers, struct prof_edge *side)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if ((callers ? es[i].to : es[i].from) == r)
			side[m++] = es[i];
	qsort(side, m, sizeof *side, cmp_edge_value);
	fputs("[", out);
	int64_t more = 0;
	for (size_t i = 0; i < m; i++) {
		if (i >= PEEK_MAX) {
			more += side[i].v;
			continue;
		}
		fputs(i ? ",[" : "[", out);
		render_json_string(out, t->rows[callers ? side[i].from : side[i].to].name);
		fprintf(out, ",%" PRId64 "]", side[i].v);
	}
	fprintf(out, "],[%zu,%" PRId64 "]", m > PEEK_MAX ? m - PEEK_MAX : 0, more);
}

/* `heaptrail top`'s rows of a dump (in-use space, by function): the
 * first max by flat, the rest counted; and for each row shown, its
 * callers and callees (prof_table_edges), "peek" as pprof names it:
 * [callers, callers_more, callees, callees_more]. */
static int put_top(FILE *out, const struct prof_profile *p, size_t max)
{
	struct prof_table t;
	if (prof_table_build(&t, p, false, PROF_INUSE_SPACE, PROF_SORT_FLAT))
		return -ENOMEM;
	size_t shown = 0, more = 0, nes = 0;
	int64_t more_flat = 0;
	int ret = -ENOMEM;
	struct prof_edge *es = NULL, *side = NULL;
	uint32_t *rows = malloc((max ? max : 1) * sizeof *rows);
	bool *want = calloc(t.nrows + 1, sizeof *want);
	if (!rows || !want)
		goto out;
	fputs(",\n \"top\": [", out);
	for (size_t i = 0; i < t.nrows; i++) {
		const struct prof_row *r = &t.rows[i];
		int64_t flat = r->flat[PROF_INUSE_SPACE], cum = r->cum[PROF_INUSE_SPACE];
		if (!flat && !cum)
			continue;
		if (shown == max) {
			more++;
			more_flat += flat;
			continue;
		}
		want[i] = true;
		rows[shown] = (uint32_t)i;
		fputs(shown++ ? ",[" : "[", out);
		render_json_string(out, r->name);
		fprintf(out, ",%" PRId64 ",%" PRId64 "]", flat, cum);
	}
	fprintf(out, "], \"top_more\": {\"rows\": %zu, \"flat\": %" PRId64 "}", more, more_flat);
	if (prof_table_edges(&t, p, PROF_INUSE_SPACE, want, &es, &nes) ||
	    !(side = malloc((nes ? nes : 1) * sizeof *side)))
		goto out;
	fputs(",\n \"peek\": [", out);
	for (size_t i = 0; i < shown; i++) {
		fputs(i ? ",\n  [" : "\n  [", out);
		put_peek_side(out, &t, es, nes, rows[i], true, side);
		fputs(",", out);
		put_peek_side(out, &t, es, nes, rows[i], false, side);
		fputs("]", out);
	}
	fputs("]", out);
	ret = 0;
out:
	free(rows);
	free(want);
	free(es);
	free(side);
	prof_table_release(&t);
	return ret;
}

/* ---------- a dump ---------- */

int render_html_dump(FILE *out, const struct prof_profile *d, const struct render_html_opts *o)
{
	char a[48];
	int ret;
	fputs("{", out);
	put_str(out, "name", base_name(d->path), true);
	put_num(out, "ms", d->ms, true);
	put_num(out, "sample", (int64_t)d->sample, true);
	put_num(out, "stacks", (int64_t)d->nsamples, true);
	put_num(out, "inuse", d->total[PROF_INUSE_SPACE], true);
	put_str(out, "inuse_text", bytes(a, sizeof a, d->total[PROF_INUSE_SPACE]), true);
	fputs("\n   ", out);
	if ((ret = put_flame(out, d, o->min_share, false)))
		return ret;
	/* the same stacks merged from the allocation site */
	fputs(",\n \"rev\": {", out);
	if ((ret = put_flame(out, d, o->min_share, true)))
		return ret;
	fputs("}", out);
	if ((ret = put_top(out, d, o->max_top ? o->max_top : 100)))
		return ret;
	fputs("}", out);
	return ferror(out) ? -EIO : 0;
}

/* ---------- a process ---------- */

/* The allocations' shape (FMT_HEAP_SHAPE): the exit report's, which
 * covers the whole run, else the last dump's that has one; null when
 * none has (a sampled run, or files of another writer). */
static void put_shape(FILE *out, const struct render_html_proc *pr)
{
	const struct fmt_leaks *l = pr->leaks ? &pr->leaks->raw : NULL;
	const struct fmt_shape *sh = l && l->shape.known ? &l->shape : NULL;
	const char *from = sh ? (l->check ? "the leak check" : "the exit report") : NULL;
	for (size_t i = pr->ndumps; !sh && i-- > 0;)
		if (pr->dumps[i].shape.known) {
			sh = &pr->dumps[i].shape;
			from = base_name(pr->dumps[i].path);
		}
	if (!sh) {
		fputs("\"shape\": null,\n ", out);
		return;
	}
	uint64_t allocs = 0;
	for (int k = 0; k < FMT_SHAPE_BUCKETS; k++)
		allocs += sh->sizes[k];
	fputs("\"shape\": {", out);
	put_str(out, "from", from, true);
	put_num(out, "allocs", (int64_t)allocs, true);
	put_num(out, "temporary", (int64_t)sh->temporary, true);
	fputs("\"sizes\": [", out);
	for (int k = 0; k < FMT_SHAPE_BUCKETS; k++)
		fprintf(out, "%s%" PRIu64, k ? "," : "", sh->sizes[k]);
	fputs("]},\n ", out);
}

static int put_process(FILE *out, const struct render_html_proc *pr,
		       const struct render_html_opts *o)
{
	char a[48];
	int ret;
	const struct prof_process *lp = pr->leaks;
	const struct fmt_leaks *l = lp ? &lp->raw : NULL;
	fputs("{", out);
	put_num(out, "pid", pr->pid, true);
	/* the command, from the leak report (or /proc, for the live page) */
	fputs("\"command\": [", out);
	char *const *argv = l ? l->argv : pr->argv;
	size_t argc = l ? l->argc : pr->argc;
	for (size_t i = 0; i < argc; i++) {
		if (i)
			fputs(", ", out);
		render_json_string(out, argv[i]);
	}
	fputs("], ", out);
	put_str(out, "since", pr->since, true);
	/* a leak file says "sample S" only when it sampled */
	uint64_t sample = l ? (l->sample > 1 ? l->sample : 1) : pr->ndumps ? pr->dumps[0].sample
				: pr->timeline ? pr->timeline->sample : 0;
	put_num(out, "sample", (int64_t)sample, true);
	/* how long it ran, as far as the files tell: the last tick or dump */
	int64_t dur = -1;
	if (pr->timeline && pr->timeline->nticks)
		dur = pr->timeline->ticks[pr->timeline->nticks - 1].ms;
	for (size_t i = 0; i < pr->ndumps; i++)
		if (pr->dumps[i].ms > dur)
			dur = pr->dumps[i].ms;
	put_num(out, "duration_ms", dur, true);
	/* the peak: the timeline's, else the largest dump's */
	long ip = pr->timeline ? prof_timeline_peak(pr->timeline) : -1;
	int64_t peak = -1;
	const char *peak_from = NULL;
	if (ip >= 0) {
		peak = pr->timeline->ticks[ip].live_bytes;
		peak_from = "timeline";
	} else {
		for (size_t i = 0; i < pr->ndumps; i++)
			if (pr->dumps[i].total[PROF_INUSE_SPACE] > peak) {
				peak = pr->dumps[i].total[PROF_INUSE_SPACE];
				peak_from = "dumps";
			}
	}
	put_num(out, "peak_bytes", peak, true);
	put_str(out, "peak_text", peak >= 0 ? bytes(a, sizeof a, peak) : NULL, true);
	put_str(out, "peak_from", peak_from, true);
	int64_t final = l ? (int64_t)l->in_use_bytes
		: pr->ndumps ? pr->dumps[pr->ndumps - 1].total[PROF_INUSE_SPACE] : -1;
	put_num(out, "final_bytes", final, true);
	put_str(out, "final_text", final >= 0 ? bytes(a, sizeof a, final) : NULL, true);
	put_str(out, "final_from", l ? (l->check ? "check" : "exit") : pr->ndumps ? "dump" : NULL,
		true);
	if (l) {
		char t[32];
		put_str(out, "allocs_text", render_thousands(t, l->allocs), true);
	}
	put_shape(out, pr);
	fputs("\n \"report\": ", out);
	if (lp) {
		render_json_process(out, lp, &(struct render_json_opts){
			.max_records = o->max_records, .suppressions = true });
		fputs(",\n ", out);
		if ((ret = put_rendered(out, "summary_text", summary_text, lp)))
			return ret;
	} else {
		fputs("null,\n ", out);
	}
	fputs("\n \"dumps\": [", out);
	for (size_t i = 0; i < pr->ndumps; i++) {
		fputs(i ? ",\n  " : "\n  ", out);
		fputs(pr->dump_json[i], out);
	}
	fputs("],\n ", out);
	if (pr->timeline)
		put_timeline(out, pr->timeline, o->max_ticks);
	if (pr->growth && (ret = put_growth(out, pr, o->max_sites)))
		return ret;
	put_str(out, "growth_why", pr->growth_why, false);
	fputs("}", out);
	return 0;
}

/* Copies JSON text to out fit for a <script> element: '<' (only ever
 * inside strings) as \u003c, so no "</script>" or "<!--" can end it. */
static void put_script_safe(FILE *out, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '<')
			fputs("\\u003c", out);
		else
			fputc(s[i], out);
	}
}

static void put_bytes(FILE *out, const unsigned char *s, unsigned n)
{
	fwrite(s, 1, n, out);
}

int render_html_data(FILE *out, const struct render_html_proc *procs, size_t n,
		     const struct render_html_opts *o)
{
	int ret = 0;
	fputs("{\"heaptrail_html\": 1, ", out);
	put_str(out, "title", o->title, true);
	put_str(out, "dir", o->dir, true);
	if (o->live_url) {
		fputs("\"live\": {", out);
		put_str(out, "url", o->live_url, true);
		put_num(out, "every_ms", o->live_every_ms, false);
		fputs("}, ", out);
	}
	fprintf(out, "\"min_share\": %g, \"procs\": [", o->min_share);
	for (size_t i = 0; i < n && !ret; i++) {
		fputs(i ? ",\n" : "\n", out);
		ret = put_process(out, &procs[i], o);
	}
	fputs("]}\n", out);
	return ret ? ret : ferror(out) ? -EIO : 0;
}

int render_html(FILE *out, const struct render_html_proc *procs, size_t n,
		const struct render_html_opts *o)
{
	char *data = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&data, &len);
	if (!m)
		return -ENOMEM;
	int ret = render_html_data(m, procs, n, o);
	if (fclose(m) || ret) {
		free(data);
		return ret ? ret : -ENOMEM;
	}
	/* No network: the policy forbids every request, but for the live
	 * page's own data from where it came from; the page's style and
	 * script are inline. */
	fprintf(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
		"<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
		"style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:%s\">\n"
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
		"<meta name=\"color-scheme\" content=\"light dark\">\n<title>",
		o->live_url ? "; connect-src 'self'" : "");
	render_xml(out, o->title ? o->title : "heaptrail", 0);
	fputs("</title>\n<style>\n", out);
	put_bytes(out, html_style_css, html_style_css_len);
	fputs("</style>\n</head>\n<body>\n<script type=\"application/json\" id=\"ht-data\">", out);
	put_script_safe(out, data, len);
	fputs("</script>\n<noscript><p>This report draws its views with JavaScript; "
	      "<code>heaptrail report</code>, <code>growth</code>, <code>timeline</code> and "
	      "<code>flame</code> print the same figures.</p></noscript>\n<script>\n", out);
	put_bytes(out, html_app_js, html_app_js_len);
	fputs("</script>\n</body>\n</html>\n", out);
	free(data);
	return ferror(out) ? -EIO : 0;
}
