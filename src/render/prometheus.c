/* prometheus.c — Prometheus' text exposition format: a heap profile's
 * totals, its top sites and the sites growing, as the live endpoint's
 * /metrics page serves them (src/control/routes.c). */
#include <stdint.h>
#include <stdio.h>

#include "render/render.h"

/* A Prometheus label value: backslash, quote and newline escaped, cut
 * at 200 bytes (a C++ name can be long; the label stays bounded). */
void render_prom_label(FILE *m, const char *s)
{
	for (size_t i = 0; s[i] && i < 200; i++) {
		if (s[i] == '\\' || s[i] == '"')
			fputc('\\', m);
		if (s[i] == '\n')
			fputs("\\n", m);
		else
			fputc(s[i], m);
	}
}

void render_prom_metric(FILE *m, const char *name, const char *type, const char *help, int64_t v)
{
	fprintf(m, "# HELP %s %s\n# TYPE %s %s\n%s %lld\n", name, help, name, type, name,
		(long long)v);
}

void render_prom_heap(FILE *m, const struct prof_profile *p)
{
	const int64_t *t = p->total;
	const char *est = p->sample > 1 ? " (an estimate: sampled)" : "";
	char help[256];
	snprintf(help, sizeof help, "Bytes in live heap blocks%s.", est);
	render_prom_metric(m, "heaptrail_live_bytes", "gauge", help, t[PROF_INUSE_SPACE]);
	snprintf(help, sizeof help, "Live heap blocks%s.", est);
	render_prom_metric(m, "heaptrail_live_blocks", "gauge", help, t[PROF_INUSE_OBJECTS]);
	render_prom_metric(m, "heaptrail_allocated_bytes_total", "counter",
			   "Bytes allocated since start.", t[PROF_ALLOC_SPACE]);
	render_prom_metric(m, "heaptrail_allocated_blocks_total", "counter",
			   "Blocks allocated since start.", t[PROF_ALLOC_OBJECTS]);
	render_prom_metric(m, "heaptrail_freed_bytes_total", "counter", "Bytes freed since start.",
			   t[PROF_ALLOC_SPACE] - t[PROF_INUSE_SPACE]);
	render_prom_metric(m, "heaptrail_freed_blocks_total", "counter", "Blocks freed since start.",
			   t[PROF_ALLOC_OBJECTS] - t[PROF_INUSE_OBJECTS]);
	render_prom_metric(m, "heaptrail_sampling_interval_bytes", "gauge",
			   "Mean bytes between sampled allocations (1: every allocation).", (int64_t)p->sample);
}

void render_prom_sites(FILE *m, const struct prof_table *tab, size_t top)
{
	fprintf(m, "# HELP heaptrail_site_live_bytes Live bytes allocated by a function "
		"(the caller of malloc), top %zu by live bytes.\n"
		"# TYPE heaptrail_site_live_bytes gauge\n", top);
	for (size_t i = 0, shown = 0; i < tab->nrows && shown < top; i++) {
		const struct prof_row *r = &tab->rows[i];
		if (r->flat[PROF_INUSE_SPACE] <= 0)
			continue;
		fputs("heaptrail_site_live_bytes{site=\"", m);
		render_prom_label(m, r->name);
		fprintf(m, "\"} %lld\n", (long long)r->flat[PROF_INUSE_SPACE]);
		shown++;
	}
}

void render_prom_growing(FILE *m, const struct prof_growth *g, size_t top, int ndumps)
{
	fprintf(m, "# HELP heaptrail_site_growing_bytes_per_second Sites `heaptrail "
		"growth` calls growing over the last %d dumps: their live bytes' slope "
		"over the later half.\n# TYPE heaptrail_site_growing_bytes_per_second "
		"gauge\n", ndumps);
	for (size_t i = 0, shown = 0; i < g->nsites && shown < top; i++) {
		if (g->sites[i].trend != PROF_TREND_GROWING)
			continue;
		fputs("heaptrail_site_growing_bytes_per_second{site=\"", m);
		render_prom_label(m, g->sites[i].name);
		fprintf(m, "\"} %.0f\n", g->sites[i].late_slope);
		shown++;
	}
}
