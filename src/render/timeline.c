/* timeline.c — a run's live heap over time: a massif-style text chart and
 * an SVG line chart. Time runs from the agent's start (0 s) to the last
 * tick; nothing is invented before the first tick or after the last. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analyze/unbias.h"
#include "render/render.h"

struct unit {
	const char *name;
	double div;
};

/* The unit the y axis counts in: the largest in which max is >= 1. */
static struct unit unit_for(int64_t max)
{
	static const struct unit units[] = {
		{ "GiB", 1024.0 * 1024 * 1024 }, { "MiB", 1024.0 * 1024 }, { "KiB", 1024.0 },
	};
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if ((double)max >= units[i].div)
			return units[i];
	return (struct unit){ "B", 1 };
}

static void put_y(char *buf, size_t cap, double v, struct unit u)
{
	snprintf(buf, cap, u.div == 1 ? "%.0f" : "%.2f", v / u.div);
}

static void put_peak_line(FILE *out, const struct prof_tick *pk, uint64_t sample)
{
	char a[48], b[48], c[48], d[48];
	fprintf(out, "peak: %s live (%s bytes, %s blocks) at %.3f s; RSS then %s\n",
		render_bytes(a, sizeof a, pk->live_bytes), render_thousands(b, (uint64_t)pk->live_bytes),
		render_thousands(c, (uint64_t)pk->live_blocks), (double)pk->ms / 1000,
		render_bytes(d, sizeof d, pk->rss_bytes));
	if (sample > 1 && pk->live_bytes > 0) {
		/* A tick holds the estimate only, not its samples; but no block
		 * adds more than S to the variance per byte it holds (a block of
		 * size s adds s^2 (1-p)/p^2 <= S s, see analyze/unbias.c), so
		 * V <= S X bounds it: exact for small blocks, wider for big ones. */
		double x = (double)pk->live_bytes, lo, hi;
		prof_interval90(x, (double)sample * x, &lo, &hi);
		fprintf(out, "      (an estimate, %s or better at 90 %%)\n",
			render_pm(a, sizeof a, x, lo, hi, true, false));
	}
}

/* ---------- text ---------- */

#define COLS 72
#define ROWS 20

void render_timeline_text(FILE *out, const struct prof_timeline *t,
			  const struct render_timeline_opts *o)
{
	long ip = prof_timeline_peak(t);
	if (ip < 0) {
		fprintf(out, "%s: no ticks recorded (the run ended before the first one)\n", o->name);
		return;
	}
	const struct prof_tick *pk = &t->ticks[ip], *last = &t->ticks[t->nticks - 1];
	fprintf(out, "%s: live heap over %.2f s, %zu tick%s", o->name, (double)last->ms / 1000,
		t->nticks, t->nticks == 1 ? "" : "s");
	if (t->sample > 1)
		fprintf(out, " (sampled every %" PRIu64 " bytes: estimates)", t->sample);
	if (o->since)
		fprintf(out, " %s", o->since);
	fputs("\n\n", out);

	/* each column holds the most live bytes of its ticks; a column
	 * without a tick goes on with the last tick before it */
	double tmax = last->ms > 0 ? (double)last->ms : 1;
	int64_t most[COLS], then[COLS];
	for (int c = 0; c < COLS; c++)
		most[c] = then[c] = -1;
	for (size_t i = 0; i < t->nticks; i++) {
		int c = (int)((double)t->ticks[i].ms / tmax * (COLS - 1) + 0.5);
		if (t->ticks[i].live_bytes > most[c])
			most[c] = t->ticks[i].live_bytes;
		then[c] = t->ticks[i].live_bytes;
	}
	for (int c = 1; c < COLS; c++)
		if (most[c] < 0)
			most[c] = then[c] = then[c - 1];
	int peak_col = (int)((double)pk->ms / tmax * (COLS - 1) + 0.5);
	double ymax = (double)pk->live_bytes;
	struct unit u = unit_for(pk->live_bytes);
	char labels[ROWS + 1][32];
	int lw = (int)strlen(u.name);
	for (int r = ROWS; r > 0; r -= 5) {
		put_y(labels[r], sizeof labels[r], ymax * r / ROWS, u);
		if ((int)strlen(labels[r]) > lw)
			lw = (int)strlen(labels[r]);
	}
	fprintf(out, "%*s\n", lw, u.name);
	for (int r = ROWS; r > 0; r--) {
		char line[COLS + 1];
		for (int c = 0; c < COLS; c++) {
			int h = ymax > 0 && most[c] > 0 ? (int)((double)most[c] / ymax * ROWS + 0.5) : 0;
			line[c] = h < r ? ' ' : c == peak_col ? '#' : ':';
		}
		int n = COLS;
		while (n > 0 && line[n - 1] == ' ')
			n--;
		line[n] = 0;
		fprintf(out, "%*s%c%s\n", lw, r % 5 ? "" : labels[r], r == ROWS ? '^' : '|', line);
	}
	fprintf(out, "%*s +", lw - 1, "0");
	for (int c = 0; c < COLS; c++)
		fputc('-', out);
	fputs("> s\n", out);
	char xl[COLS + 16], mid[32], end[32];
	memset(xl, ' ', sizeof xl);
	snprintf(mid, sizeof mid, "%.2f", tmax / 2000);
	snprintf(end, sizeof end, "%.2f", tmax / 1000);
	xl[0] = '0';
	memcpy(xl + COLS / 2 - strlen(mid) / 2, mid, strlen(mid));
	memcpy(xl + COLS - strlen(end), end, strlen(end));
	xl[COLS] = 0;
	fprintf(out, "%*s %s\n\n", lw, "", xl);
	put_peak_line(out, pk, t->sample);
}

/* ---------- SVG ---------- */

#define SW 960
#define SH 440
#define ML 84
#define MR 28
#define MT 68
#define MB 56

/* A round step (1, 2, 2.5 or 5 times a power of ten) that cuts span
 * into about n parts. */
static double nice_step(double span, int n)
{
	double raw = span / n, p = pow(10, floor(log10(raw))), f = raw / p;
	return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * p;
}

static void put_points(FILE *out, const struct prof_timeline *t, double sx, double sy,
		       bool rss)
{
	/* at most two points per pixel column (its lowest and its highest
	 * tick, in time order), so an hour-long run stays a small file */
	size_t i = 0;
	while (i < t->nticks) {
		long col = lround((double)t->ticks[i].ms * sx);
		size_t lo = i, hi = i, j = i;
		for (; j < t->nticks && lround((double)t->ticks[j].ms * sx) == col; j++) {
			int64_t v = rss ? t->ticks[j].rss_bytes : t->ticks[j].live_bytes;
			if (v < (rss ? t->ticks[lo].rss_bytes : t->ticks[lo].live_bytes))
				lo = j;
			if (v > (rss ? t->ticks[hi].rss_bytes : t->ticks[hi].live_bytes))
				hi = j;
		}
		size_t pick[2] = { lo < hi ? lo : hi, lo < hi ? hi : lo };
		for (int k = 0; k < (lo == hi ? 1 : 2); k++) {
			const struct prof_tick *tk = &t->ticks[pick[k]];
			fprintf(out, "%.2f,%.2f ", ML + (double)tk->ms * sx,
				MT + (SH - MT - MB) - (double)(rss ? tk->rss_bytes : tk->live_bytes) * sy);
		}
		i = j;
	}
}

void render_timeline_svg(FILE *out, const struct prof_timeline *t,
			 const struct render_timeline_opts *o)
{
	char a[48], b[48];
	fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
		"height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Verdana, "
		"sans-serif\" font-size=\"12\">\n"
		"<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fbfbf8\"/>\n",
		SW, SH, SW, SH, SW, SH);
	fprintf(out, "<text x=\"%d\" y=\"24\" text-anchor=\"middle\" font-size=\"17\">"
		"Live heap over time: ", SW / 2);
	render_xml(out, o->name, 60);
	if (o->since) {
		fputs(" (", out);
		render_xml(out, o->since, 48);
		fputs(")", out);
	}
	fputs("</text>\n", out);
	long ip = prof_timeline_peak(t);
	if (ip < 0) {
		fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"14\">"
			"No ticks recorded: the run ended before the first one.</text>\n</svg>\n",
			SW / 2, SH / 2);
		return;
	}
	const struct prof_tick *pk = &t->ticks[ip], *last = &t->ticks[t->nticks - 1];
	fprintf(out, "<text x=\"%d\" y=\"42\" text-anchor=\"middle\" fill=\"#555\">%zu ticks "
		"over %.2f s", SW / 2, t->nticks, (double)last->ms / 1000);
	if (t->sample > 1)
		fprintf(out, "; live bytes sampled every %" PRIu64 " bytes: estimates", t->sample);
	fputs("</text>\n", out);

	/* scales: y in the unit of the larger of the two curves */
	int64_t top = pk->live_bytes;
	for (size_t i = 0; i < t->nticks; i++)
		if (t->ticks[i].rss_bytes > top)
			top = t->ticks[i].rss_bytes;
	struct unit u = unit_for(top > 0 ? top : 1);
	double ytop_u = top > 0 ? (double)top / u.div : 1, ystep = nice_step(ytop_u, 5);
	ytop_u = ceil(ytop_u / ystep - 1e-9) * ystep;
	double xtop_s = last->ms > 0 ? (double)last->ms / 1000 : 1, xstep = nice_step(xtop_s, 8);
	xtop_s = ceil(xtop_s / xstep - 1e-9) * xstep;
	int pw = SW - ML - MR, ph = SH - MT - MB;
	double sx = pw / (xtop_s * 1000), sy = ph / (ytop_u * u.div);

	/* grid and axes */
	fputs("<g stroke=\"#ddd\" stroke-width=\"1\">\n", out);
	for (double y = ystep; y <= ytop_u + 1e-9; y += ystep)
		fprintf(out, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", ML,
			MT + ph - y * u.div * sy, ML + pw, MT + ph - y * u.div * sy);
	for (double x = xstep; x <= xtop_s + 1e-9; x += xstep)
		fprintf(out, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>\n",
			ML + x * 1000 * sx, MT, ML + x * 1000 * sx, MT + ph);
	fputs("</g>\n<g fill=\"#333\">\n", out);
	for (double y = 0; y <= ytop_u + 1e-9; y += ystep)
		fprintf(out, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", ML - 6,
			MT + ph - y * u.div * sy + 4, y);
	for (double x = 0; x <= xtop_s + 1e-9; x += xstep)
		fprintf(out, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n",
			ML + x * 1000 * sx, MT + ph + 18, x);
	fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">time (s)</text>\n",
		ML + pw / 2, SH - 14);
	fprintf(out, "<text transform=\"translate(22,%d) rotate(-90)\" text-anchor=\"middle\">"
		"%s</text>\n</g>\n", MT + ph / 2, u.name);
	fprintf(out, "<path d=\"M%d,%d V%d H%d\" fill=\"none\" stroke=\"#333\"/>\n", ML, MT,
		MT + ph, ML + pw);

	/* the curves: live bytes as an area, RSS as a line over it */
	fprintf(out, "<polygon fill=\"#3b7dd8\" fill-opacity=\"0.25\" stroke=\"none\" "
		"points=\"%.2f,%d ", ML + (double)t->ticks[0].ms * sx, MT + ph);
	put_points(out, t, sx, sy, false);
	fprintf(out, "%.2f,%d\"/>\n", ML + (double)last->ms * sx, MT + ph);
	fputs("<polyline id=\"htt-live\" fill=\"none\" stroke=\"#2a5fa8\" stroke-width=\"2\" "
	      "points=\"", out);
	put_points(out, t, sx, sy, false);
	fputs("\"/>\n<polyline id=\"htt-rss\" fill=\"none\" stroke=\"#dd6b20\" "
	      "stroke-width=\"1.5\" points=\"", out);
	put_points(out, t, sx, sy, true);
	fputs("\"/>\n", out);

	/* the dump the top sites came from, then the peak over it */
	if (o->dump_ms >= 0 && o->dump_ms <= xtop_s * 1000) {
		double dx = ML + (double)o->dump_ms * sx;
		fprintf(out, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"#777\" "
			"stroke-dasharray=\"4,3\"/>\n<text x=\"%.2f\" y=\"%d\" "
			"text-anchor=\"%s\" fill=\"#555\" font-size=\"11\">dump used for the top "
			"sites (%.2f s)</text>\n", dx, MT, dx, MT + ph,
			dx + (dx > ML + pw / 2 ? -4 : 4), MT + ph - 6,
			dx > ML + pw / 2 ? "end" : "start", (double)o->dump_ms / 1000);
	}
	/* the peak: a point, a dashed line up to the top of the plot, and the
	 * label above the plot, where no curve can run through it */
	double px = ML + (double)pk->ms * sx, py = MT + ph - (double)pk->live_bytes * sy;
	bool left = px > ML + pw * 0.6;
	fprintf(out, "<g id=\"htt-peak\"><title>peak: %s live (%s bytes) at %.3f s</title>"
		"<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#c53030\" "
		"stroke-dasharray=\"3,3\"/><circle cx=\"%.2f\" cy=\"%.2f\" r=\"4.5\" "
		"fill=\"#c53030\"/><text x=\"%.2f\" y=\"%d\" text-anchor=\"%s\" "
		"fill=\"#c53030\" font-weight=\"bold\">peak %s at %.2f s</text></g>\n",
		render_bytes(a, sizeof a, pk->live_bytes), render_thousands(b, (uint64_t)pk->live_bytes),
		(double)pk->ms / 1000, px, MT - 4, px, py, px, py, px + (left ? 4 : -4), MT - 8,
		left ? "end" : "start", render_bytes(a, sizeof a, pk->live_bytes),
		(double)pk->ms / 1000);

	/* legend */
	fprintf(out, "<g font-size=\"12\"><rect x=\"%d\" y=\"%d\" width=\"14\" height=\"10\" "
		"fill=\"#3b7dd8\" fill-opacity=\"0.45\" stroke=\"#2a5fa8\"/><text x=\"%d\" "
		"y=\"%d\">live heap</text><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
		"stroke=\"#dd6b20\" stroke-width=\"2\"/><text x=\"%d\" y=\"%d\">RSS</text></g>\n",
		ML + 10, MT - 16, ML + 30, MT - 7, ML + 110, MT - 11, ML + 124, MT - 11,
		ML + 130, MT - 7);
	fputs("</svg>\n", out);
}
