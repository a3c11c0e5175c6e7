/*
 * aggregate — a profile summed by function (or by source line), the way
 * `pprof -top` and `jeprof --text` present it: flat is what a function
 * allocated itself (it is the leaf of the stack), cum what it and
 * everything it called allocated (each stack counted once even when the
 * function recurses). Pure computation on a loaded profile.
 */
#ifndef HEAPTRAIL_ANALYZE_AGGREGATE_H
#define HEAPTRAIL_ANALYZE_AGGREGATE_H

#include "analyze/profile.h"

struct prof_row {
	const char *name;       /* prof_frame_name(); owned by the table */
	uint32_t frame;         /* a frame id that has this name */
	uint32_t id;            /* private: its index before sorting */
	int64_t flat[PROF_NVALUES], cum[PROF_NVALUES];
	/* their variances (unbias.h; 0 when exact) and the sampled blocks
	 * behind them (each stack's |nsampled| summed) */
	double flat_var[PROF_NVALUES], cum_var[PROF_NVALUES];
	int64_t flat_n[PROF_NVALUES], cum_n[PROF_NVALUES];
};

struct prof_table {
	struct prof_row *rows;
	size_t nrows;
	uint32_t *row_of_frame; /* frame id -> index into rows */
	/* private */
	char **names;
	size_t nnames;
};

enum prof_sort { PROF_SORT_FLAT, PROF_SORT_CUM, PROF_SORT_GROWTH };

/* Sums p by function (lines = false) or by source line. Rows are sorted
 * on value v: by |flat| (PROF_SORT_FLAT), |cum|, or signed flat, largest
 * growth first (PROF_SORT_GROWTH); ties by name. Returns 0 or -ENOMEM. */
int prof_table_build(struct prof_table *t, const struct prof_profile *p, bool lines,
		     int v, enum prof_sort sort);
void prof_table_release(struct prof_table *t);

/* A caller -> callee pair of rows and the value v of the stacks in which
 * `from` calls `to` (each stack counted once per pair, as cum counts it
 * once per function; a function calling itself makes no pair). */
struct prof_edge {
	uint32_t from, to;
	int64_t v;
};

/* The pairs of p's stacks between the rows of t (built from p), those
 * with a row in want (indexed by row; NULL: all), sorted by from, then
 * to; pairs whose v sums to 0 are left out. *out is malloc'd (the caller
 * frees it). Returns 0 or -ENOMEM. */
int prof_table_edges(const struct prof_table *t, const struct prof_profile *p, int v,
		     const bool *want, struct prof_edge **out, size_t *n);

#endif
