/*
 * render — the report model (analyze/report.h) as text for people and as
 * JSON for programs; the profile model (analyze/profile.h) as the
 * formats other tools read, as a flame graph, and a run's timeline
 * (analyze/timeline.h) as a chart. Renderers write to a stream they are
 * given, or return bytes, and never open files.
 */
#ifndef HEAPTRAIL_RENDER_H
#define HEAPTRAIL_RENDER_H

#include <stdio.h>

#include "analyze/aggregate.h"
#include "analyze/growth.h"
#include "analyze/profile.h"
#include "analyze/report.h"
#include "analyze/timeline.h"

struct prof_supps;
struct prof_profile;

struct render_text_opts {
	bool summary_only;      /* no records, just each process's summary */
	unsigned kinds;         /* PROF_KIND_BIT mask of records to print; 0 = default */
	bool gen_suppressions;  /* print a ready suppression after each record
				   and each heap error */
	const struct prof_supps *supps;  /* to name a suppression whose limit broke */
};

/* The valgrind-like report: per process, each record with its stack, then
 * the summary. opts may be NULL. */
void render_text(FILE *out, const struct prof_run *run, const struct render_text_opts *opts);

struct render_json_opts {
	size_t max_records;     /* records written (the biggest); the rest are
				   counted in "records_more"; 0: all */
	bool suppressions;      /* each record's and heap error's "suppression"
				   (leak:^fn$, bad_free:^fn$...) */
};

/* The JSON report: one object for a single process, an array of objects
 * for several. o may be NULL (every record, no suppression). */
void render_json(FILE *out, const struct prof_run *run, const struct render_json_opts *o);
/* One process of render_json (o NULL: as render_json writes it). */
void render_json_process(FILE *out, const struct prof_process *p,
			 const struct render_json_opts *o);
/* s as a JSON string, quoted ("" for NULL). */
void render_json_string(FILE *out, const char *s);
/* The suppression a user would write for r: its first frame that has a
 * function name, anchored exactly ("leak:^fn$"), into buf; NULL when no
 * frame has a name. */
const char *render_suppression_pattern(const struct prof_record *r, char *buf, size_t cap);
/* The same for a heap error: the narrowest type that holds it
 * (prof_supp_type_of) and the first named frame of the stack that gave
 * the block back ("bad_free:^fn$"), or for a guarded block's fault of
 * the stack of the access. */
const char *render_error_suppression(const struct prof_heap_error *e, char *buf, size_t cap);

/* p as a gzip-compressed pprof profile (proto/profile.proto: a .pb.gz
 * file for `pprof`), with pprof's heap sample types alloc_objects,
 * alloc_space, inuse_objects, inuse_space and default_value (an enum
 * prof_value) as the one pprof shows by default. On success *out is a
 * malloc'd buffer of *len bytes that the caller frees; p is not changed.
 * Returns 0, -ENOMEM, or -EINVAL when default_value is out of range or p
 * has a base profile merged in (its samples have no locations). */
int render_pprof(const struct prof_profile *p, int default_value, char **out, size_t *len);

/* ---- the analyzer's text tables (tables.c) ---- */

struct render_table_opts {
	int value;              /* enum prof_value shown */
	bool lines;             /* rows are source lines (the heading says so) */
	bool exact;             /* byte counts as integers, not KiB/MiB */
	long max;               /* rows shown (of each part, for diff and growth) */
	const char *name;       /* the dump's name (top's heading) */
	const char *base;       /* top: the base subtracted, or NULL */
	const char *focus, *ignore; /* the filters applied, for the heading */
	const char *since;      /* top, growth: "since attach at ..." for the heading, or NULL */
};

/* `heaptrail top`: p's total, then t's rows (prof_table_build on
 * o->value), flat and cum with their shares and the running sum. */
void render_top(FILE *out, const struct prof_profile *p, const struct prof_table *t,
		const struct render_table_opts *o);

/* The top of `heaptrail timeline`: the allocation sites of p, the dump
 * taken nearest the peak (one of ndumps). */
void render_peak_top(FILE *out, const struct prof_profile *p, const struct prof_table *t,
		     size_t ndumps, const struct render_table_opts *o);

/* `heaptrail diff`: two dumps, their difference (new minus old) and the
 * three tables, the delta's sorted by growth (PROF_SORT_GROWTH). When
 * sampled, each change carries its 90 % interval and a '~' marks those
 * within the noise (the interval holds zero). */
struct render_diff {
	const char *old_name, *new_name;
	const struct prof_profile *old, *new, *delta;
	const struct prof_table *old_rows, *new_rows, *delta_rows;
	bool sampled;           /* either dump was sampled: changes get ±, noise marked */
};
void render_diff(FILE *out, const struct render_diff *d, const struct render_table_opts *o);

/* `heaptrail growth`: the fit g of one process's dumps (pid, or -1),
 * growing sites first, then the rest, then the whole heap. sampled: the
 * dumps were sampled (values are estimates). */
void render_growth(FILE *out, const struct prof_growth *g, long pid, bool sampled,
		   const struct render_table_opts *o);

/* The cells of one site's row of render_growth, as it prints them: the
 * slopes per second (or per dump), the ± of the slope ("" when exact),
 * r2, the first and last values. space: bytes (else counts); exact:
 * integers (--bytes). Shared with the HTML page, so both say the same. */
struct render_growth_cells {
	char slope[64], late[64], pm[48], r2[16], first[48], last[48];
};
void render_growth_cells(const struct prof_growth *g, const struct prof_growth_site *s,
			 bool space, bool exact, struct render_growth_cells *c);
/* render_growth's first line, without its newline: the dumps, the time
 * they span, the heap's first and last values. */
void render_growth_head(FILE *out, const struct prof_growth *g, long pid, bool sampled,
			const struct render_table_opts *o);
/* What follows render_growth's table, each part only when it applies:
 * the growing sites that started mid-run and from when; memory the
 * dumps do not see growing (the private resident memory's rise against
 * the heap's); the advice when sampled sites could not be told ("too few
 * samples", or too few dumps). exact: byte counts as --bytes. */
void render_growth_note(FILE *out, const struct prof_growth *g, bool exact);
/* The line render_growth ends with when g folded allocation wrappers
 * (the first ten names and how many callers each had, and how many
 * more); nothing otherwise. */
void render_growth_wrappers(FILE *out, const struct prof_growth *g);

/* v bytes as an integer (exact) or as render_bytes() writes it. */
const char *render_amount(char *buf, size_t cap, int64_t v, bool exact);

/* The uncertainty of an estimate est whose 90 % interval is [lo, hi],
 * compactly and in est's own unit, into buf: "±0.30" (beside "1.20 MiB":
 * 0.30 MiB), or "+1.5/-0.70" when the interval is lopsided (few samples),
 * with its unit named when bigger than est's ("±1.87 MiB" beside
 * "313.74 KiB"); integers when exact (--bytes) or for counts (space
 * false). "±0" when lo == hi. Returns buf. */
const char *render_pm(char *buf, size_t cap, double est, double lo, double hi, bool space,
		      bool exact);

/* 1234567 -> "1,234,567" into buf (at least 32 bytes); returns buf. */
const char *render_thousands(char *buf, uint64_t v);

/* ---- SVG (svg.c holds what the SVG renderers share) ---- */

/* Writes s as XML text, fit for character data and attribute values:
 * & < > " ' escaped, control characters and bytes that are not UTF-8
 * written as '?'. At most max characters of s are written (0: all). */
void render_xml(FILE *out, const char *s, size_t max);
/* The number of characters render_xml writes for s (max 0). */
size_t render_utf8_len(const char *s);
/* "1.50 MiB", "-12.00 KiB", "512 B" into buf; returns buf. */
const char *render_bytes(char *buf, size_t cap, int64_t v);

struct render_flame_opts {
	int value;              /* enum prof_value giving the widths */
	bool lines;             /* a frame per source line, not per function */
	bool reverse;           /* stacks merged from the leaf (allocation site) */
	bool inverted;          /* root at the top (an icicle graph) */
	unsigned width;         /* of the image in pixels; 0: 1200 */
	const char *title;      /* NULL: one naming the value */
};

/* p as a self-contained interactive SVG flame graph: a frame per
 * function on a stack, its width its share of value o->value, callers
 * below callees (unless o->inverted). With base (not NULL) a
 * differential graph: widths still from p, each frame coloured by its
 * change from base (red grew, blue shrank). Frames are matched by name,
 * so base may come from another run. An empty profile gives an SVG
 * that says so. Returns 0, or -ENOMEM (out then holds part of an SVG:
 * write it to a temporary file, not the final one). */
int render_flame_svg(FILE *out, const struct prof_profile *p, const struct prof_profile *base,
		     const struct render_flame_opts *o);

struct render_timeline_opts {
	const char *name;       /* the timeline's file, for headings */
	int64_t dump_ms;        /* when the dump used for the peak was taken; -1: none */
	const char *since;      /* "since attach at ..." for the heading, or NULL */
};

/* A massif-style text chart of live bytes over time, the peak marked,
 * then a line on the peak. */
void render_timeline_text(FILE *out, const struct prof_timeline *t,
			  const struct render_timeline_opts *o);
/* The same as an SVG line chart: live bytes (an area) and RSS over time,
 * with axes, the peak marked, and the dump used for the peak's top. */
void render_timeline_svg(FILE *out, const struct prof_timeline *t,
			 const struct render_timeline_opts *o);

/* ---- the HTML page (html.c) ---- */

/* One process of a run, as the page shows it; any part may be missing. */
struct render_html_proc {
	long pid;
	const struct prof_process *leaks;   /* its exit report (or a check's), or NULL */
	/* its dumps in time order: their times and totals (the rest may be
	 * gone: a long series is read one dump at a time), and each one's
	 * part of the page as render_html_dump wrote it */
	const struct prof_profile *dumps;
	char *const *dump_json;
	size_t ndumps;
	const struct prof_timeline *timeline; /* or NULL */
	const struct prof_growth *growth;   /* the fit of its dumps (in-use space), or NULL */
	const char *growth_why;             /* why there is none, or NULL */
	const char *since;                  /* "since attach at ..." or NULL */
	char *const *argv;                  /* the command when leaks has none */
	size_t argc;
};

struct render_html_opts {
	const char *title;      /* the page's title */
	const char *dir;        /* the run's directory, for headings */
	double min_share;       /* a dump's tree keeps nodes of at least this share */
	size_t max_records;     /* leak records per process (the rest counted) */
	size_t max_sites;       /* growth's sites that are not growing (the rest counted) */
	size_t max_ticks;       /* timeline points */
	size_t max_top;         /* top's rows per dump (0: 100; the rest counted) */
	const char *live_url;   /* the page fetches new data from this URL (the
				   live endpoint's), or NULL: a file */
	long live_every_ms;     /* how often */
};

/* The run's processes as one self-contained HTML page (its style, script
 * and data inline; no request leaves it). Returns 0, -ENOMEM, or -EIO
 * when out has an error. */
int render_html(FILE *out, const struct render_html_proc *procs, size_t n,
		const struct render_html_opts *o);
/* One dump's part of the page's data (a JSON object: its totals, its
 * flame graph's trees, top's rows). */
int render_html_dump(FILE *out, const struct prof_profile *d, const struct render_html_opts *o);
/* The page's data alone (JSON): what the live page fetches. */
int render_html_data(FILE *out, const struct render_html_proc *procs, size_t n,
		     const struct render_html_opts *o);

/* Prometheus' text format (prometheus.c). A label value: backslash,
 * quote and newline escaped, cut at 200 bytes. */
void render_prom_label(FILE *m, const char *s);
/* One metric with its HELP and TYPE lines. */
void render_prom_metric(FILE *m, const char *name, const char *type, const char *help, int64_t v);
/* p's live and allocated totals and its sampling interval. */
void render_prom_heap(FILE *m, const struct prof_profile *p);
/* The top sites of tab (flat, in-use space) by live bytes. */
void render_prom_sites(FILE *m, const struct prof_table *tab, size_t top);
/* The top sites g calls growing, their slope over the later half of
 * ndumps dumps. */
void render_prom_growing(FILE *m, const struct prof_growth *g, size_t top, int ndumps);

#endif
