/* timeline.c — heaptrail.PID.timeline files read back. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/timeline.h"
#include "format/input.h"
#include "format/vocab.h"


/* Reads one unsigned decimal at *s, skipping blanks before it. */
static int take_num(const char **s, const char *end, int64_t *v)
{
	const char *p = *s;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p == end || *p < '0' || *p > '9')
		return -1;
	uint64_t x = 0;
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		if (x > (uint64_t)INT64_MAX / 10)
			return -1;
		x = x * 10 + (uint64_t)(*p - '0');
		if (x > (uint64_t)INT64_MAX)
			return -1;
	}
	*v = (int64_t)x;
	*s = p;
	return 0;
}

/* Whether [s, eol) could be the start of a row: digits and blanks. */
static bool row_start(const char *s, const char *eol)
{
	for (; s < eol; s++)
		if (!(*s >= '0' && *s <= '9') && *s != ' ' && *s != '\t')
			return false;
	return true;
}

int prof_timeline_parse(struct prof_timeline *t, const char *text, size_t len,
			const char **err)
{
	size_t cap = 0;
	int rc = 0;
	memset(t, 0, sizeof *t);
	const char *s = text, *end = text + len;
	const size_t hl = FMT_LEN(FMT_TIMELINE_HEADER);
	if (!len) {
		snprintf(t->error, sizeof t->error, "empty file: not a heaptrail timeline");
		rc = -EINVAL;
		goto out;
	}
	for (long lineno = 1; s < end; lineno++) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *eol = nl ? nl : end;
		/* the header, then ':' (version 1, not 12) and text */
		if (lineno == 1 && ((size_t)(eol - s) < hl || memcmp(s, FMT_TIMELINE_HEADER, hl) ||
				     ((size_t)(eol - s) > hl && s[hl] != ':') ||
				     memchr(s, 0, (size_t)(eol - s)))) {
			snprintf(t->error, sizeof t->error,
				 "line 1: not a heaptrail timeline (version 1)");
			rc = -EINVAL;
			goto out;
		}
		if (*s == '#') {
			const char *q = memmem(s, (size_t)(eol - s), FMT_TIMELINE_SAMPLE,
					       FMT_LEN(FMT_TIMELINE_SAMPLE));
			if (q) {
				int64_t v;
				q += FMT_LEN(FMT_TIMELINE_SAMPLE);
				if (!take_num(&q, eol, &v))
					t->sample = (uint64_t)v;
			}
		} else if (eol > s) {
			struct prof_tick k;
			const char *p = s;
			int bad = take_num(&p, eol, &k.ms) || take_num(&p, eol, &k.live_bytes) ||
				  take_num(&p, eol, &k.live_blocks) ||
				  take_num(&p, eol, &k.allocated_bytes) ||
				  take_num(&p, eol, &k.rss_bytes);
			while (!bad && p < eol && (*p == ' ' || *p == '\t' || *p == '\r'))
				p++;
			if (bad || p != eol) {
				/* a row cut short while being written: digits
				 * and blanks, the start of a row; anything else
				 * is not a timeline's */
				if (!nl && row_start(s, eol))
					break;
				snprintf(t->error, sizeof t->error,
					 "line %ld: want 5 numbers (ms live_bytes live_blocks "
					 "allocated_bytes rss_bytes)", lineno);
				rc = -EINVAL;
				goto out;
			}
			if (t->nticks && k.ms < t->ticks[t->nticks - 1].ms) {
				snprintf(t->error, sizeof t->error, "line %ld: time goes back", lineno);
				rc = -EINVAL;
				goto out;
			}
			if (t->nticks == cap) {
				cap = cap ? 2 * cap : 256;
				struct prof_tick *n = realloc(t->ticks, cap * sizeof *n);
				if (!n) {
					snprintf(t->error, sizeof t->error, "out of memory");
					rc = -ENOMEM;
					goto out;
				}
				t->ticks = n;
			}
			t->ticks[t->nticks++] = k;
		}
		s = nl ? nl + 1 : end;
	}
out:
	if (rc) {
		char error[sizeof t->error];  /* where *err points: kept */
		memcpy(error, t->error, sizeof error);
		prof_timeline_release(t);
		memcpy(t->error, error, sizeof error);
		*err = t->error;
	}
	return rc;
}

int prof_timeline_load(struct prof_timeline *t, const char *path, const char **err)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int rc = 0;
	memset(t, 0, sizeof *t);
	FILE *f = fmt_input_fopen(path, FMT_INPUT_MAX, err);
	if (!f)
		return -errno;
	for (;;) {
		if (cap - len < 4096) {
			cap = cap ? 2 * cap : 65536;
			char *n = realloc(buf, cap);
			if (!n) {
				rc = -ENOMEM;
				*err = "out of memory";
				goto out;
			}
			buf = n;
		}
		size_t r = fread(buf + len, 1, cap - len, f);
		len += r;
		if (r == 0)
			break;
	}
	if (ferror(f)) {
		rc = -EIO;
		*err = strerror(EIO);
		goto out;
	}
	rc = prof_timeline_parse(t, buf, len, err);
out:
	fclose(f);
	free(buf);
	return rc;
}

long prof_timeline_peak(const struct prof_timeline *t)
{
	long best = -1;
	for (size_t i = 0; i < t->nticks; i++)
		if (best < 0 || t->ticks[i].live_bytes > t->ticks[best].live_bytes)
			best = (long)i;
	return best;
}

void prof_timeline_release(struct prof_timeline *t)
{
	free(t->ticks);
	t->ticks = NULL;
	t->nticks = 0;
}
