/* suppress.c — loading and applying suppression files (see suppress.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/report.h"
#include "analyze/suppress.h"
#include "format/input.h"

static bool glob(const char *p, const char *s, const char *pend)
{
	for (; p < pend; p++, s++) {
		if (*p == '*') {
			while (p + 1 < pend && p[1] == '*')
				p++;
			if (p + 1 == pend)
				return true;
			for (; *s; s++)
				if (glob(p + 1, s, pend))
					return true;
			return glob(p + 1, s, pend);
		}
		if (!*s || *p != *s)
			return false;
	}
	return *s == 0;
}

bool prof_supp_match(const char *pattern, const char *str)
{
	if (!pattern || !str)
		return false;
	/* '^x$' is the glob "x"; otherwise the unanchored ends get a '*'. */
	size_t n = strlen(pattern);
	bool start = pattern[0] == '^', end = n > (size_t)start && pattern[n - 1] == '$';
	size_t core = n - start - end;
	char small[256], *g = core + 3 <= sizeof small ? small : malloc(core + 3);
	if (!g)
		return false;
	size_t k = 0;
	if (!start)
		g[k++] = '*';
	memcpy(g + k, pattern + start, core);
	k += core;
	if (!end)
		g[k++] = '*';
	bool r = glob(g, str, g + k);
	if (g != small)
		free(g);
	return r;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
		s[--n] = 0;
	return s;
}

int prof_supps_load(struct prof_supps *s, const char *path, const char **err, int *line)
{
	static const char *const other_types[] = { "called_from_lib:", "interceptor_via_fun:",
						   "interceptor_via_lib:", "race:", "thread:",
						   "signal:", "deadlock:", "mutex:", "src:", "fun:" };
	char buf[4096];
	int ret = 0;
	*line = 0;
	FILE *f = fmt_input_fopen(path, FMT_INPUT_MAX, err);
	if (!f)
		return -errno;
	while (fgets(buf, sizeof buf, f)) {
		++*line;
		char *l = trim(buf);
		if (!*l || *l == '#')
			continue;
		if (strncmp(l, "leak:", 5)) {
			bool known = false;
			for (size_t i = 0; i < sizeof other_types / sizeof *other_types; i++)
				known |= !strncmp(l, other_types[i], strlen(other_types[i]));
			if (known)
				continue;
			*err = "not a suppression (expected 'leak:PATTERN')";
			ret = -EINVAL;
			goto out;
		}
		char *pat = trim(l + 5);
		struct prof_supp sp = { 0 };
		char *lim = strstr(pat, ":max_bytes=");
		if (lim) {
			char *end;
			errno = 0;
			unsigned long long v = strtoull(lim + 11, &end, 10);
			if (errno || end == lim + 11 || *trim(end) || lim[11] == '-') {
				*err = "bad max_bytes value";
				ret = -EINVAL;
				goto out;
			}
			*lim = 0;
			sp.has_limit = true;
			sp.max_bytes = v;
		}
		if (!*pat) {
			*err = "empty pattern";
			ret = -EINVAL;
			goto out;
		}
		struct prof_supp *nv = realloc(s->v, (s->n + 1) * sizeof *nv);
		if (!nv) {
			ret = -ENOMEM;
			*err = "out of memory";
			goto out;
		}
		s->v = nv;
		sp.pattern = strdup(pat);
		size_t olen = strlen(path) + 16;
		sp.origin = malloc(olen);
		if (!sp.pattern || !sp.origin) {
			free(sp.pattern);
			free(sp.origin);
			ret = -ENOMEM;
			*err = "out of memory";
			goto out;
		}
		snprintf(sp.origin, olen, "%s:%d", path, *line);
		s->v[s->n++] = sp;
	}
	if (ferror(f)) {
		*err = strerror(errno);
		ret = -EIO;
	}
out:
	fclose(f);
	return ret;
}

void prof_supps_release(struct prof_supps *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].pattern);
		free(s->v[i].origin);
	}
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

static bool record_matches(const struct prof_supp *sp, const struct prof_record *r)
{
	for (size_t i = 0; i < r->nframes; i++) {
		const struct sym_frame *f = &r->frames[i];
		if (prof_supp_match(sp->pattern, f->function) || prof_supp_match(sp->pattern, f->file) ||
		    prof_supp_match(sp->pattern, f->module))
			return true;
	}
	return false;
}

void prof_supps_apply(const struct prof_supps *s, struct prof_process *p)
{
	if (!s || !s->n)
		return;
	uint64_t *matched = calloc(s->n, sizeof *matched);
	if (!matched)
		return;
	/* First pass: which pattern claims each record, and how much each
	 * pattern claims in all, so a limit applies to the pattern's total. */
	for (size_t i = 0; i < p->nrecords; i++) {
		struct prof_record *r = &p->records[i];
		r->suppressed_by = r->over_limit = 0;
		for (size_t k = 0; k < s->n; k++)
			if (record_matches(&s->v[k], r)) {
				r->suppressed_by = (int)k + 1;
				matched[k] += r->bytes;
				break;
			}
	}
	for (size_t i = 0; i < p->nrecords; i++) {
		struct prof_record *r = &p->records[i];
		if (!r->suppressed_by)
			continue;
		const struct prof_supp *sp = &s->v[r->suppressed_by - 1];
		if (sp->has_limit && matched[r->suppressed_by - 1] > sp->max_bytes) {
			r->over_limit = r->suppressed_by;
			r->suppressed_by = 0;
			continue;
		}
		p->supp_bytes += r->bytes;
		p->supp_blocks += r->blocks;
		p->kind_bytes[r->kind] -= r->bytes;
		p->kind_blocks[r->kind] -= r->blocks;
	}
	free(matched);
}
