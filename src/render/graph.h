/*
 * graph — a profile as folded stacks (Brendan Gregg's "a;b;c N", what
 * flamegraph.pl and speedscope read) and as a Graphviz call graph (what
 * jeprof and pprof draw). Renderers write to a stream they are given.
 */
#ifndef HEAPTRAIL_RENDER_GRAPH_H
#define HEAPTRAIL_RENDER_GRAPH_H

#include <stdio.h>

#include "analyze/profile.h"

/* One line per distinct stack of names, root first, and its value v
 * (stacks whose value is 0 are left out). With base (may be NULL), the
 * difffolded form "a;b;c OLD NEW" of flamegraph.pl's difffolded.pl, over
 * the stacks of both. Names contain no ';' (replaced by ':') and end in
 * no space. Lines are sorted. Returns 0 or -ENOMEM. */
int render_collapsed(FILE *out, const struct prof_profile *p, const struct prof_profile *base,
		     int v, bool lines);

struct render_dot_opts {
	int value;
	bool lines;
	double node_fraction;   /* drop nodes whose cum is below this share of the total */
	double edge_fraction;   /* drop edges below this share */
	long max_nodes;         /* keep at most this many nodes (by cum) */
	const char *title;
};

/* The call graph in dot: a node per function (flat and cum in its label,
 * its size by flat), an edge per caller -> callee pair (its width by the
 * bytes that went through it). Returns 0 or -ENOMEM. */
int render_dot(FILE *out, const struct prof_profile *p, const struct render_dot_opts *o);

#endif
