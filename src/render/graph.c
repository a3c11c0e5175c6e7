/* graph.c — folded stacks and the dot call graph (see graph.h). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/aggregate.h"
#include "analyze/tree.h"
#include "render/graph.h"
#include "render/render.h"

/* ---------- folded stacks ---------- */

struct folded {
	char *stack;
	int64_t v[2];           /* base, profile */
};

static int cmp_folded(const void *a, const void *b)
{
	return strcmp(((const struct folded *)a)->stack, ((const struct folded *)b)->stack);
}

/* The folded stack of node id: the names from the root down, ';'
 * between them; in a name ';' and newlines become ':' and trailing
 * spaces go. NULL when out of memory. */
static char *fold(const struct prof_tree *t, uint32_t id)
{
	size_t depth = 0, cap = 256, len = 0;
	for (uint32_t k = id; k; k = t->nodes[k].parent)
		depth++;
	uint32_t *chain = malloc((depth + 1) * sizeof *chain);
	char *out = malloc(cap), name[4096];
	if (!chain || !out)
		goto nomem;
	size_t d = depth;
	for (uint32_t k = id; k; k = t->nodes[k].parent)
		chain[--d] = k;
	out[0] = 0;
	for (d = 0; d < depth; d++) {
		snprintf(name, sizeof name, "%s", t->names[t->nodes[chain[d]].name]);
		for (char *c = name; *c; c++)
			if (*c == ';' || *c == '\n')
				*c = ':';
		size_t n = strlen(name);
		while (n && name[n - 1] == ' ')
			name[--n] = 0;
		if (len + n + 2 > cap) {
			while (len + n + 2 > cap)
				cap *= 2;
			char *no = realloc(out, cap);
			if (!no)
				goto nomem;
			out = no;
		}
		if (len)
			out[len++] = ';';
		memcpy(out + len, name, n + 1);
		len += n;
	}
	free(chain);
	if (!len) {
		free(out);
		return strdup("(no stack)");
	}
	return out;
nomem:
	free(chain);
	free(out);
	return NULL;
}

int render_collapsed(FILE *out, const struct prof_profile *p, const struct prof_profile *base,
		     int v, bool lines)
{
	struct prof_tree t;
	struct folded *fs = NULL;
	size_t n = 0;
	int rc = prof_tree_init(&t, true);
	if (rc)
		return rc;
	if ((rc = prof_tree_add(&t, p, v, false, lines, false)) ||
	    (base && (rc = prof_tree_add(&t, base, v, true, lines, false))))
		goto out;
	rc = -ENOMEM;
	if (!(fs = calloc(t.n, sizeof *fs)))
		goto out;
	for (size_t i = 0; i < t.n; i++) {
		const struct prof_tree_node *nd = &t.nodes[i];
		if (!nd->ends)
			continue;
		if (!(fs[n].stack = fold(&t, (uint32_t)i)))
			goto out;
		fs[n].v[0] = nd->old_self;
		fs[n++].v[1] = nd->self;
	}
	/* names that differ only in what fold() replaces fold alike: merged */
	qsort(fs, n, sizeof *fs, cmp_folded);
	for (size_t i = 0; i < n;) {
		int64_t sum[2] = { 0, 0 };
		size_t j = i;
		for (; j < n && !strcmp(fs[j].stack, fs[i].stack); j++) {
			sum[0] += fs[j].v[0];
			sum[1] += fs[j].v[1];
		}
		if (base)
			fprintf(out, "%s %" PRId64 " %" PRId64 "\n", fs[i].stack, sum[0], sum[1]);
		else if (sum[1])
			fprintf(out, "%s %" PRId64 "\n", fs[i].stack, sum[1]);
		i = j;
	}
	rc = 0;
out:
	for (size_t i = 0; i < n; i++)
		free(fs[i].stack);
	free(fs);
	prof_tree_release(&t);
	return rc;
}

/* ---------- the call graph ---------- */

struct edge {
	uint32_t from, to;      /* rows: caller, callee */
	int64_t w;
};

static int cmp_edges(const void *a, const void *b)
{
	const struct edge *x = a, *y = b;
	if (x->from != y->from)
		return x->from < y->from ? -1 : 1;
	return x->to < y->to ? -1 : x->to > y->to;
}

static void put_dot_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', out);
		if (*s == '\n')
			fputs("\\n", out);
		else
			fputc(*s, out);
	}
	fputc('"', out);
}

static const char *fmt_val(char *buf, size_t cap, int64_t x, int v)
{
	if (v == PROF_INUSE_SPACE || v == PROF_ALLOC_SPACE)
		return render_bytes(buf, cap, x);
	snprintf(buf, cap, "%" PRId64, x);
	return buf;
}

static int64_t abs64(int64_t x)
{
	return x < 0 ? -x : x;
}

int render_dot(FILE *out, const struct prof_profile *p, const struct render_dot_opts *o)
{
	struct prof_table t;
	int v = o->value;
	if (prof_table_build(&t, p, o->lines, v, PROF_SORT_CUM))
		return -ENOMEM;
	int rc = -ENOMEM;
	struct edge *es = NULL;
	size_t nes = 0, cap = 0;
	const uint32_t *row_of = t.row_of_frame;
	bool *keep = calloc(t.nrows + 1, sizeof *keep);
	if (!keep)
		goto out;
	int64_t total = 0;
	for (size_t i = 0; i < p->nsamples; i++)
		total += abs64(p->samples[i].v[v]);
	long kept = 0;
	for (size_t r = 0; r < t.nrows; r++) {
		if (kept >= o->max_nodes)
			break;
		if (!t.rows[r].cum[v] ||
		    (double)abs64(t.rows[r].cum[v]) < o->node_fraction * (double)total)
			continue;
		keep[r] = true;
		kept++;
	}
	/* edges between kept nodes; a dropped frame in between is skipped
	 * over, as pprof does, so the graph stays connected */
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct prof_sample *s = &p->samples[i];
		if (!s->v[v])
			continue;
		uint32_t callee = UINT32_MAX;
		for (uint32_t k = 0; k < s->nframes; k++) {
			uint32_t r = row_of[s->frames[k]];
			if (!keep[r])
				continue;
			if (callee != UINT32_MAX && callee != r) {
				if (nes == cap) {
					cap = cap ? 2 * cap : 1024;
					struct edge *ne = realloc(es, cap * sizeof *ne);
					if (!ne)
						goto out;
					es = ne;
				}
				es[nes++] = (struct edge){ r, callee, s->v[v] };
			}
			callee = r;
		}
	}
	qsort(es, nes, sizeof *es, cmp_edges);
	fprintf(out, "digraph heaptrail {\n"
		     "  node [shape=box, style=filled, fontname=\"Helvetica\"];\n"
		     "  edge [fontname=\"Helvetica\", fontsize=10];\n"
		     "  label=");
	char a[64], b[64], lab[512];
	snprintf(lab, sizeof lab, "%s\\n%s: %s total; %ld of %zu nodes shown", o->title ? o->title : p->path,
		 prof_value_names[v], fmt_val(a, sizeof a, p->total[v], v), kept, t.nrows);
	fprintf(out, "\"");
	for (const char *c = lab; *c; c++) {
		if (*c == '"')
			fputc('\\', out);
		fputc(*c, out);
	}
	fprintf(out, "\";\n  labelloc=t;\n");
	for (size_t r = 0; r < t.nrows; r++) {
		if (!keep[r])
			continue;
		const struct prof_row *row = &t.rows[r];
		double fp = total ? 100.0 * (double)row->flat[v] / (double)total : 0;
		double cp = total ? 100.0 * (double)row->cum[v] / (double)total : 0;
		if (row->flat[v])
			snprintf(lab, sizeof lab, "%s\n%s (%.1f%%)\nof %s (%.1f%%)", row->name,
				 fmt_val(a, sizeof a, row->flat[v], v), fp,
				 fmt_val(b, sizeof b, row->cum[v], v), cp);
		else
			snprintf(lab, sizeof lab, "%s\n0 of %s (%.1f%%)", row->name,
				 fmt_val(b, sizeof b, row->cum[v], v), cp);
		double share = total ? fabs((double)row->flat[v]) / (double)total : 0;
		/* warm for the big allocators, pale for the callers */
		int red = 255, green = (int)(235 - 150 * share), blue = (int)(205 - 190 * share);
		if (row->flat[v] < 0) {
			red = (int)(205 - 190 * share);
			blue = 255;
		}
		fprintf(out, "  n%zu [label=", r);
		put_dot_string(out, lab);
		fprintf(out, ", fontsize=%.0f, fillcolor=\"#%02x%02x%02x\"];\n", 10 + 22 * share, red,
			green, blue);
	}
	for (size_t i = 0; i < nes;) {
		int64_t w = 0;
		size_t j = i;
		for (; j < nes && es[j].from == es[i].from && es[j].to == es[i].to; j++)
			w += es[j].w;
		if (w && (double)abs64(w) >= o->edge_fraction * (double)total) {
			double share = total ? fabs((double)w) / (double)total : 0;
			fprintf(out, "  n%u -> n%u [label=\" %s\", penwidth=%.1f, weight=%d];\n",
				es[i].from, es[i].to, fmt_val(a, sizeof a, w, v), 1 + 5 * share,
				1 + (int)(100 * share));
		}
		i = j;
	}
	fprintf(out, "}\n");
	rc = 0;
out:
	free(keep);
	free(es);
	prof_table_release(&t);
	return rc;
}
