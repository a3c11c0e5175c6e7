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

const char *const prof_supp_type_names[PROF_SUPP_TYPE_COUNT] = {
	[PROF_SUPP_LEAK] = "leak",
	[PROF_SUPP_MISMATCH] = "alloc_dealloc_mismatch",
	[PROF_SUPP_INVALID_FREE] = "invalid_free",
	[PROF_SUPP_BAD_FREE] = "bad_free",
	[PROF_SUPP_DOUBLE_FREE] = "double_free",
	[PROF_SUPP_OVERFLOW] = "heap_buffer_overflow",
	[PROF_SUPP_USE_AFTER_FREE] = "heap_use_after_free",
	[PROF_SUPP_NEW_DELETE] = "new_delete_type_mismatch",
};

/* The type l starts with ("TYPE:"), its pattern after the ':' in *pat;
 * -1 when it names none of ours. */
static int line_type(char *l, char **pat)
{
	for (int t = 0; t < PROF_SUPP_TYPE_COUNT; t++) {
		size_t n = strlen(prof_supp_type_names[t]);
		if (!strncmp(l, prof_supp_type_names[t], n) && l[n] == ':') {
			*pat = l + n + 1;
			return t;
		}
	}
	return -1;
}

int prof_supps_load(struct prof_supps *s, const char *path, const char **err, int *line)
{
	/* LSan's, ASan's and the other sanitizers' types: nothing of theirs
	 * is ours to hide */
	static const char *const other_types[] = { "called_from_lib:", "interceptor_via_fun:",
						   "interceptor_via_lib:", "interceptor_name:",
						   "odr_violation:", "race:", "thread:",
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
		char *pat;
		int type = line_type(l, &pat);
		if (type < 0) {
			bool known = false;
			for (size_t i = 0; i < sizeof other_types / sizeof *other_types; i++)
				known |= !strncmp(l, other_types[i], strlen(other_types[i]));
			if (known)
				continue;
			*err = "not a suppression (expected TYPE:PATTERN, TYPE one of leak, "
			       "alloc_dealloc_mismatch, invalid_free, bad_free, double_free, "
			       "heap_buffer_overflow, heap_use_after_free, "
			       "new_delete_type_mismatch)";
			ret = -EINVAL;
			goto out;
		}
		pat = trim(pat);
		struct prof_supp sp = { .type = type };
		char *lim = strstr(pat, ":max_bytes=");
		if (lim && type != PROF_SUPP_LEAK) {
			/* an error has no bytes to total */
			*err = "max_bytes is for leak: suppressions only";
			ret = -EINVAL;
			goto out;
		}
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

static bool frames_match(const struct prof_supp *sp, const struct sym_frame *frames, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct sym_frame *f = &frames[i];
		if (prof_supp_match(sp->pattern, f->function) || prof_supp_match(sp->pattern, f->file) ||
		    prof_supp_match(sp->pattern, f->module))
			return true;
	}
	return false;
}

static bool record_matches(const struct prof_supp *sp, const struct prof_record *r)
{
	return sp->type == PROF_SUPP_LEAK && frames_match(sp, r->frames, r->nframes);
}

enum prof_supp_type prof_supp_type_of(const struct prof_heap_error *e)
{
	switch (e->kind) {
	case FMT_ERROR_MISMATCHED: return PROF_SUPP_MISMATCH;
	case FMT_ERROR_OVERFLOW: return PROF_SUPP_OVERFLOW;
	case FMT_ERROR_USE_AFTER_FREE: return PROF_SUPP_USE_AFTER_FREE;
	case FMT_ERROR_SIZE_MISMATCH:
	case FMT_ERROR_ALIGN_MISMATCH: return PROF_SUPP_NEW_DELETE;
	default:
		return e->where == FMT_WHERE_FREED ? PROF_SUPP_DOUBLE_FREE : PROF_SUPP_BAD_FREE;
	}
}

/* Does sp hide e: of its kind, and a frame of a stack of e's (where the
 * block was allocated, where it was given back, and for a double free
 * where it was given back first, for a guarded block's fault where the
 * access was) matching? */
static bool error_matches(const struct prof_supp *sp, const struct prof_heap_error *e)
{
	int t = prof_supp_type_of(e);
	bool kind = sp->type == t ||
		    (sp->type == PROF_SUPP_INVALID_FREE && e->kind == FMT_ERROR_INVALID);
	return kind && (frames_match(sp, e->free_frames, e->nfree) ||
			frames_match(sp, e->alloc_frames, e->nalloc) ||
			frames_match(sp, e->prev_frames, e->nprev));
}

static void apply_errors(const struct prof_supps *s, struct prof_process *p)
{
	for (size_t i = 0; i < p->nerrors; i++) {
		struct prof_heap_error *e = &p->errors[i];
		e->suppressed_by = 0;
		for (size_t k = 0; k < s->n && !e->suppressed_by; k++)
			if (error_matches(&s->v[k], e))
				e->suppressed_by = (int)k + 1;
		if (!e->suppressed_by)
			continue;
		p->error_count -= e->count;
		p->error_contexts--;
		p->supp_errors += e->count;
		p->supp_error_contexts++;
	}
}

void prof_supps_apply(const struct prof_supps *s, struct prof_process *p)
{
	if (!s || !s->n)
		return;
	apply_errors(s, p);
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
