/* flame.c — a heap profile as an interactive SVG flame graph.
 *
 * The stacks of the profile are merged into a tree (analyze/tree.h), root
 * first (or leaf first with reverse), one node per distinct path of
 * names; a node's value is the sum of the samples through it. Siblings are ordered by
 * name, so two graphs of the same program line up. Each node becomes a
 * rectangle whose width is its share of the root; nodes narrower than
 * MIN_PX are dropped with everything above them (a zoom cannot bring
 * them back: they are not in the file), which keeps big profiles small.
 *
 * The SVG carries its own script (flame.js): click to zoom, search by regex, a
 * details line, all working from the geometry of the rectangles, so
 * the C side and the script share only a handful of constants. Labels
 * are cut to fit by the same rule on both sides, assuming a monospace
 * font of CHAR_W pixels per character. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/tree.h"
#include "render/render.h"

#define FRAME_H   16      /* pixels per stack level */
#define FONT_PX   12
#define CHAR_W    7.23    /* DejaVu Sans Mono and its kin: 0.602 em */
#define PAD       10
#define TOP       54      /* y of the first row of frames */
#define BOTTOM    30      /* room for the details line */
#define MIN_PX    0.1

/* Where a node of the tree is drawn. */
struct place {
	double x;                       /* start, in value units from the left */
	int depth;
	bool drawn;
};

struct flame {
	struct prof_tree t;
	struct place *pl;               /* one per node */
};

static int cmp_siblings(const void *a, const void *b, void *ctx)
{
	const struct prof_tree *t = ctx;
	const struct prof_tree_node *x = &t->nodes[*(const uint32_t *)a];
	const struct prof_tree_node *y = &t->nodes[*(const uint32_t *)b];
	if (x->parent != y->parent)
		return x->parent < y->parent ? -1 : 1;
	return strcmp(t->names[x->name], t->names[y->name]);
}

/* Orders the nodes parent by parent, siblings by name, and places them:
 * x, depth, drawn. Returns the order (the root first; the caller frees)
 * or NULL when out of memory; *maxdepth is the deepest drawn level. */
static uint32_t *flame_layout(struct flame *fl, double scale, int *maxdepth)
{
	const struct prof_tree *t = &fl->t;
	uint32_t *order = malloc(t->n * sizeof *order);
	fl->pl = calloc(t->n, sizeof *fl->pl);
	if (!order || !fl->pl) {
		free(order);
		return NULL;
	}
	for (size_t i = 0; i < t->n; i++)
		order[i] = (uint32_t)i;
	/* a parent is made before its children, so sorting by parent id
	 * places every parent before its children are placed */
	qsort_r(order + 1, t->n - 1, sizeof *order, cmp_siblings, (void *)t);
	struct place *root = &fl->pl[0];
	root->x = 0;
	root->depth = 0;
	root->drawn = true;
	*maxdepth = 0;
	uint32_t parent = PROF_TREE_NONE;
	double off = 0;
	for (size_t i = 1; i < t->n; i++) {
		const struct prof_tree_node *nd = &t->nodes[order[i]];
		struct place *pl = &fl->pl[order[i]];
		const struct place *par = &fl->pl[nd->parent];
		if (nd->parent != parent) {
			parent = nd->parent;
			off = par->x;
		}
		pl->x = off;
		off += (double)nd->v;
		pl->depth = par->depth + 1;
		pl->drawn = par->drawn && (double)nd->v * scale >= MIN_PX;
		if (pl->drawn && pl->depth > *maxdepth)
			*maxdepth = pl->depth;
	}
	return order;
}

static void flame_release(struct flame *fl)
{
	prof_tree_release(&fl->t);
	free(fl->pl);
}

/* ---------- drawing ---------- */

static const char *const value_words[PROF_NVALUES] = {
	"objects in use", "in use", "objects allocated", "allocated",
};
static const char *const value_titles[PROF_NVALUES] = {
	"in-use objects", "in-use space", "allocated objects", "allocated space",
};

static bool is_space(int v)
{
	return v == PROF_INUSE_SPACE || v == PROF_ALLOC_SPACE;
}

/* A value as bytes or as a count, with a sign when asked. */
static const char *fmt_value(char *buf, size_t cap, int64_t x, int v, bool sign)
{
	char num[48];
	if (is_space(v)) {
		render_bytes(num, sizeof num, x < 0 ? -x : x);
	} else {
		render_thousands(num, (uint64_t)(x < 0 ? -x : x));
		strcat(num, " objects");
	}
	snprintf(buf, cap, "%s%s", x < 0 ? "-" : sign && x > 0 ? "+" : "", num);
	return buf;
}

static void hsl_rgb(double h, double s, double l, int rgb[3])
{
	double c = (1 - fabs(2 * l - 1)) * s, hp = h / 60;
	double x = c * (1 - fabs(fmod(hp, 2) - 1)), m = l - c / 2;
	double r = 0, g = 0, b = 0;
	switch ((int)hp) {
	case 0: r = c; g = x; break;
	case 1: r = x; g = c; break;
	case 2: g = c; b = x; break;
	case 3: g = x; b = c; break;
	case 4: r = x; b = c; break;
	default: r = c; b = x; break;
	}
	rgb[0] = (int)((r + m) * 255 + 0.5);
	rgb[1] = (int)((g + m) * 255 + 0.5);
	rgb[2] = (int)((b + m) * 255 + 0.5);
}

/* Memory colours: greens through teal to blues, fixed per name so a
 * function keeps its colour across graphs. */
static void colour_mem(const char *name, int rgb[3])
{
	uint64_t h = prof_hash_str(name);
	hsl_rgb(95 + (double)(h % 106), 0.42 + (double)((h >> 12) % 20) / 100,
		0.60 + (double)((h >> 24) % 12) / 100, rgb);
}

/* Differential colours: red for growth, blue for shrinking, paler the
 * smaller the change against the largest one. */
static void colour_diff(int64_t delta, int64_t maxabs, int rgb[3])
{
	double t = maxabs ? (double)(delta < 0 ? -delta : delta) / (double)maxabs : 0;
	int fade = (int)(235 - 170 * t + 0.5);
	rgb[0] = rgb[1] = rgb[2] = fade;
	if (delta > 0)
		rgb[0] = 255;
	else if (delta < 0)
		rgb[2] = 255;
}

/* The tooltip: name, value, change (diff), then where the function is,
 * last because it is the longest and the details line cuts the end. */
static void put_tip(FILE *out, const struct prof_tree *t, const struct prof_tree_node *nd, int v,
		    int64_t total, bool diff)
{
	char a[64], b[64];
	render_xml(out, nd == t->nodes ? "all" : t->names[nd->name], 0);
	fprintf(out, "\n%s %s, %.2f%% of all", fmt_value(a, sizeof a, nd->v, v, false),
		value_words[v], total ? 100.0 * (double)nd->v / (double)total : 0.0);
	if (diff) {
		int64_t d = nd->v - nd->old;
		fprintf(out, "\nchange %s from %s", fmt_value(a, sizeof a, d, v, true),
			fmt_value(b, sizeof b, nd->old, v, false));
		if (nd->old)
			fprintf(out, " (%+.1f%%)", 100.0 * (double)d / (double)nd->old);
		else
			fputs(" (new)", out);
	}
	const struct prof_frame *f = nd->f;
	if (f && (f->file || f->module)) {
		fputc('\n', out);
		if (f->file) {
			render_xml(out, f->file, 0);
			if (!nd->mixed && f->line > 0)
				fprintf(out, ":%d", f->line);
			else if (nd->mixed)
				fputs(" (several lines)", out);
		}
		if (f->module) {
			fputs(f->file ? " in " : "in ", out);
			render_xml(out, f->module, 0);
		}
	}
}

/* The label of a frame w pixels wide: the name when it fits, else at
 * least two of its first characters and "..", else nothing. The
 * script's label() is the same rule. */
static void put_label(FILE *out, const char *name, double w)
{
	long fit = (long)((w - 6) / CHAR_W);
	size_t len = render_utf8_len(name);
	if (fit >= (long)len) {
		render_xml(out, name, 0);
	} else if (fit >= 4) {
		render_xml(out, name, (size_t)fit - 2);
		fputs("..", out);
	}
}

static const char flame_style[] =
	"<style type=\"text/css\"><![CDATA[\n"
	".htf-f rect { stroke: #fbfbf8; stroke-width: 0.5; }\n"
	".htf-f:hover rect { stroke: #222; stroke-width: 0.6; }\n"
	".htf-f { cursor: pointer; }\n"
	".htf-f text { pointer-events: none; fill: #111; }\n"
	".htf-anc { opacity: 0.5; }\n"
	".htf-btn { cursor: pointer; }\n"
	".htf-btn rect { fill: #e8e8e8; stroke: #999; }\n"
	".htf-btn:hover rect { fill: #d4d4ff; }\n"
	"]]></style>\n";

/* Our own small script, src/render/flame.js, embedded at build time
 * (xxd -i into build/gen/flame_js.h: flame_js, flame_js_len). It reads
 * the frames back from the document (rect geometry, first line of each
 * title = the name) and works on those: nothing in it depends on how big
 * the profile was. The file is one expression, a function of the
 * constants object that follows it in the SVG; its last newline is not
 * written, so the call follows the function on the same line. */
#include "flame_js.h"

static void put_script(FILE *out)
{
	size_t n = flame_js_len;
	if (n && flame_js[n - 1] == '\n')
		n--;
	fwrite(flame_js, 1, n, out);
}

/* A button wide enough for labels of up to chars characters (the script
 * relabels some), its right or left edge at x. */
static void put_button(FILE *out, const char *id, const char *label_id, double x, int y,
		       const char *text, int chars, bool right, bool hidden)
{
	double w = chars * CHAR_W + 16, x0 = right ? x - w : x;
	fprintf(out, "<g id=\"%s\" class=\"htf-btn\"%s><rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" "
		"height=\"20\" rx=\"4\"/><text id=\"%s\" x=\"%.1f\" y=\"%d\" "
		"text-anchor=\"middle\">%s</text></g>\n", id, hidden ? " style=\"display:none\"" : "",
		x0, y - 15, w, label_id, x0 + w / 2, y, text);
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s && s[1] ? s + 1 : path;
}

/* The document's start: background, title, subtitle. */
static void put_head(FILE *out, const struct prof_profile *p, const struct prof_profile *base,
		     const struct render_flame_opts *o, unsigned width, int height)
{
	char a[64], b[64];
	int v = o->value;
	fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" id=\"htf-svg\" "
		"width=\"%u\" height=\"%d\" viewBox=\"0 0 %u %d\">\n", width, height, width, height);
	fputs(flame_style, out);
	fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%d\" fill=\"#fbfbf8\"/>\n",
		width, height);
	fprintf(out, "<g font-family=\"DejaVu Sans Mono, Menlo, Consolas, monospace\" "
		"font-size=\"%d\">\n", FONT_PX);
	fprintf(out, "<text x=\"%.1f\" y=\"24\" text-anchor=\"middle\" font-size=\"17\">",
		width / 2.0);
	if (o->title)
		render_xml(out, o->title, 0);
	else
		fprintf(out, "%s flame graph: %s", base ? "Differential heap" : "Heap",
			value_titles[v]);
	fputs("</text>\n", out);
	/* the subtitle: what was drawn, from which dumps */
	fprintf(out, "<text x=\"%.1f\" y=\"42\" text-anchor=\"middle\" fill=\"#555\">",
		width / 2.0);
	size_t room = (size_t)((width - 2 * PAD) / CHAR_W / 4);
	render_xml(out, base_name(p->path), room);
	if (base) {
		fputs(" against ", out);
		render_xml(out, base_name(base->path), room);
	}
	fprintf(out, ": %s %s", fmt_value(a, sizeof a, p->total[v], v, false), value_words[v]);
	if (base)
		fprintf(out, " (%s)", fmt_value(b, sizeof b, p->total[v] - base->total[v], v, true));
	if (p->sample > 1)
		fprintf(out, "; sampled every %" PRIu64 " bytes: estimates", p->sample);
	if (o->reverse)
		fputs("; reversed: allocation sites at the root", out);
	fputs("</text>\n", out);
}

int render_flame_svg(FILE *out, const struct prof_profile *p, const struct prof_profile *base,
		     const struct render_flame_opts *o)
{
	struct flame fl = { 0 };
	uint32_t *order = NULL;
	int rc = -ENOMEM, v = o->value;
	unsigned width = o->width ? o->width : 1200;
	double pw = width - 2 * PAD;
	if (prof_tree_init(&fl.t, false))
		goto out;
	if ((rc = prof_tree_add(&fl.t, p, v, false, o->lines, o->reverse)))
		goto out;
	if (base && (rc = prof_tree_add(&fl.t, base, v, true, o->lines, o->reverse)))
		goto out;
	const struct prof_tree *t = &fl.t;
	int64_t total = t->nodes[0].v;
	if (total <= 0) {
		int height = TOP + 80;
		put_head(out, p, base, o, width, height);
		fprintf(out, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"14\">"
			"Nothing to draw: no stack has any %s%s</text>\n</g>\n</svg>\n",
			width / 2.0, TOP + 40, value_titles[v],
			(v == PROF_ALLOC_SPACE || v == PROF_ALLOC_OBJECTS) && !p->has_alloc ?
			" (this dump has no allocation totals)" : "");
		rc = 0;
		goto out;
	}
	double scale = pw / (double)total;
	int maxdepth;
	rc = -ENOMEM;
	if (!(order = flame_layout(&fl, scale, &maxdepth)))
		goto out;
	int height = TOP + (maxdepth + 1) * FRAME_H + BOTTOM;
	put_head(out, p, base, o, width, height);
	int64_t maxabs = 0;
	for (size_t i = 0; base && i < t->n; i++) {
		int64_t d = t->nodes[i].v - t->nodes[i].old;
		if (fl.pl[i].drawn && (d < 0 ? -d : d) > maxabs)
			maxabs = d < 0 ? -d : d;
	}
	put_button(out, "htf-reset", "htf-reset-label", PAD, 24, "Reset zoom", 10, false, true);
	put_button(out, "htf-search", "htf-search-label", width - PAD, 24, "Search", 12, true,
		   false);
	fputs("<g id=\"htf-frames\">\n", out);
	for (size_t i = 0; i < t->n; i++) {
		const struct prof_tree_node *nd = &t->nodes[order[i]];
		const struct place *pl = &fl.pl[order[i]];
		if (!pl->drawn)
			continue;
		const char *name = order[i] ? t->names[nd->name] : "all";
		double x = PAD + pl->x * scale, w = (double)nd->v * scale;
		int y = TOP + (o->inverted ? pl->depth : maxdepth - pl->depth) * FRAME_H;
		int rgb[3];
		if (base)
			colour_diff(nd->v - nd->old, maxabs, rgb);
		else if (!order[i])
			rgb[0] = rgb[1] = rgb[2] = 208;
		else
			colour_mem(name, rgb);
		fputs("<g class=\"htf-f\"><title>", out);
		put_tip(out, t, nd, v, total, base != NULL);
		fprintf(out, "</title><rect x=\"%.3f\" y=\"%d\" width=\"%.3f\" height=\"%d\" "
			"fill=\"rgb(%d,%d,%d)\" rx=\"2\"/><text x=\"%.3f\" y=\"%d\">", x, y, w,
			FRAME_H - 1, rgb[0], rgb[1], rgb[2], x + 3, y + FRAME_H - 4);
		put_label(out, name, w);
		fputs("</text></g>\n", out);
	}
	fputs("</g>\n", out);
	fprintf(out, "<text id=\"htf-details\" x=\"%d\" y=\"%d\" fill=\"#333\">Click a frame to "
		"zoom in, 'all' or Esc to zoom out; Search or / to highlight.</text>\n",
		PAD, height - 10);
	fprintf(out, "<text id=\"htf-matched\" x=\"%u\" y=\"%d\" text-anchor=\"end\" "
		"fill=\"#333\"></text>\n", width - PAD, height - 10);
	fputs("</g>\n<script type=\"text/ecmascript\"><![CDATA[\n", out);
	put_script(out);
	fprintf(out, "({ pad: %d, pw: %.3f, y0: %d, fh: %d, maxd: %d, inv: %s, cw: %.2f, "
		"cols: %d, hit: 'rgb(224,64,192)' });\n", PAD, pw, TOP, FRAME_H, maxdepth,
		o->inverted ? "true" : "false", CHAR_W, (int)(pw * 0.8 / CHAR_W));
	fputs("]]></script>\n</svg>\n", out);
	rc = 0;
out:
	free(order);
	flame_release(&fl);
	return rc;
}
