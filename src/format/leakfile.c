/* leakfile.c — reader of heaptrail.PID.leaks (layout in leakfile.h).
 * Hostile input is expected: every number is range-checked, every stack
 * reference must point at a stack defined earlier, and a file without its
 * "end" line is refused. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/input.h"
#include "format/leakfile.h"

#define MAX_FILE (1ull << 32)
#define MAX_DEPTH 4096

size_t fmt_escape_len(const char *s)
{
	size_t n = 0;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		n += (c <= 0x20 || c >= 0x7f || c == '%') ? 3 : 1;
	}
	return n;
}

void fmt_escape(char *dst, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c <= 0x20 || c >= 0x7f || c == '%') {
			*dst++ = '%';
			*dst++ = "0123456789ABCDEF"[c >> 4];
			*dst++ = "0123456789ABCDEF"[c & 15];
		} else {
			*dst++ = (char)c;
		}
	}
	*dst = 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

size_t fmt_unescape(char *s)
{
	char *d = s, *p = s;
	while (*p) {
		int hi, lo;
		if (p[0] == '%' && (hi = hexval(p[1])) >= 0 && (lo = hexval(p[2])) >= 0) {
			*d++ = (char)(hi * 16 + lo);
			p += 3;
		} else {
			*d++ = *p++;
		}
	}
	*d = 0;
	return (size_t)(d - s);
}

/* ---- tokenizer over one line ---- */

struct line {
	char *tok[8];
	int ntok;
	char *rest;   /* what follows the first 8 tokens, for stack pcs */
};

static void split(char *s, struct line *l)
{
	l->ntok = 0;
	l->rest = NULL;
	while (*s) {
		while (*s == ' ')
			s++;
		if (!*s)
			break;
		if (l->ntok == 8) {
			l->rest = s;
			return;
		}
		l->tok[l->ntok++] = s;
		while (*s && *s != ' ')
			s++;
		if (*s)
			*s++ = 0;
	}
}

static int parse_u64(const char *s, int base, uint64_t *out)
{
	char *end;
	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, base);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

static int parse_addr(const char *s, uint64_t *out)
{
	if (!s || s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
		return -1;
	return parse_u64(s + 2, 16, out);
}

static char *dup_unescaped(const char *s)
{
	char *d = strdup(s);
	if (d)
		fmt_unescape(d);
	return d;
}

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 16;
	void *p = realloc(*arr, ncap * elem);
	if (!p)
		return -1;
	*arr = p;
	*cap = ncap;
	return 0;
}

/* Stack ids are arbitrary numbers in the file; records refer to them. A
 * sorted lookup would do, but ids are written in increasing order, so a
 * binary search over the array as read is enough. */
static long find_stack(const struct fmt_leaks *l, uint64_t id)
{
	size_t lo = 0, hi = l->nstacks;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (l->stacks[mid].id == id)
			return (long)mid;
		if (l->stacks[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* "error size_mismatch COUNT SIZE ALLOC FREE GIVEN" or "error
 * align_mismatch COUNT SIZE ALLOC FREE ALLOC_ALIGN GIVEN": a delete of
 * the right family disagreeing with its new; both stacks named. Returns
 * 0, -ENOMEM, or -EINVAL for a malformed line. */
static int parse_new_delete(struct fmt_leaks *l, const struct line *ln, int kind, size_t *cap)
{
	bool align = kind == FMT_ERROR_ALIGN_MISMATCH;
	uint64_t count, size, as, fs, given, aa = 0;
	long ai, fi;
	if (ln->ntok != (align ? 8 : 7) || ln->rest || parse_u64(ln->tok[2], 10, &count) ||
	    parse_u64(ln->tok[3], 10, &size) || parse_u64(ln->tok[4], 10, &as) ||
	    parse_u64(ln->tok[5], 10, &fs) || (align && parse_u64(ln->tok[6], 10, &aa)) ||
	    parse_u64(ln->tok[align ? 7 : 6], 10, &given) || (ai = find_stack(l, as)) < 0 ||
	    (fi = find_stack(l, fs)) < 0)
		return -EINVAL;
	if (grow((void **)&l->errors, cap, l->nerrors, sizeof *l->errors))
		return -ENOMEM;
	l->errors[l->nerrors++] = (struct fmt_error){
		.kind = kind, .count = count, .size = size, .alloc_stack = (size_t)ai,
		.free_stack = (size_t)fi, .where = FMT_WHERE_NONE, .prev_stack = SIZE_MAX,
		.given = given, .align = aa };
	return 0;
}

static int parse_stack(struct fmt_leaks *l, struct line *ln, size_t *cap)
{
	uint64_t id;
	int fn = -1;
	if (ln->ntok < 3 || parse_u64(ln->tok[1], 10, &id))
		return -1;
	for (int i = 0; i < FMT_FN_COUNT; i++)
		if (!strcmp(ln->tok[2], fmt_alloc_fn_names[i]))
			fn = i;
	if (fn < 0)
		return -1;
	if (l->nstacks && l->stacks[l->nstacks - 1].id >= id)
		return -1;  /* ids must increase */
	if (grow((void **)&l->stacks, cap, l->nstacks, sizeof *l->stacks))
		return -1;
	struct fmt_stack *s = &l->stacks[l->nstacks];
	memset(s, 0, sizeof *s);
	s->id = id;
	s->fn = fn;
	size_t pcap = 0;
	struct line more;
	struct line *cur = ln;
	int first = 3;
	for (;;) {
		for (int i = first; i < cur->ntok; i++) {
			if (s->depth == MAX_DEPTH)
				goto bad;
			if (grow((void **)&s->pcs, &pcap, s->depth, sizeof *s->pcs) ||
			    parse_addr(cur->tok[i], &s->pcs[s->depth]))
				goto bad;
			s->depth++;
		}
		if (!cur->rest)
			break;
		split(cur->rest, &more);
		cur = &more;
		first = 0;
	}
	l->nstacks++;
	return 0;
bad:
	free(s->pcs);
	return -1;
}

int fmt_leaks_parse(const char *buf, size_t len, struct fmt_leaks *out,
		    const char **err)
{
	struct fmt_leaks l = { 0 };
	size_t argcap = 0, modcap = 0, stackcap = 0, reccap = 0, poolcap = 0, errcap = 0;
	bool saw_end = false, saw_totals = false;
	char *copy = malloc(len + 1);
	int lineno = 0;

	*err = NULL;
	memset(out, 0, sizeof *out);
	if (!copy) {
		*err = "out of memory";
		return -ENOMEM;
	}
	memcpy(copy, buf, len);
	copy[len] = 0;
	if (memchr(buf, 0, len)) {
		*err = "not a heaptrail leak file (binary data)";
		goto fail;
	}

	for (char *p = copy, *nl; p && *p; p = nl) {
		nl = strchr(p, '\n');
		if (nl)
			*nl++ = 0;
		else if (!saw_end) {
			/* a last line without its newline: truncated */
			*err = "truncated file (no end line)";
			goto fail;
		}
		struct line ln;
		split(p, &ln);
		lineno++;
		if (!ln.ntok)
			continue;
		const char *k = ln.tok[0];
		if (saw_end) {
			*err = "data after the end line";
			goto fail;
		}
		if (lineno == 1) {
			uint64_t v;
			if (strcmp(k, FMT_LEAKS_MAGIC) || ln.ntok != 2 || parse_u64(ln.tok[1], 10, &v)) {
				*err = "not a heaptrail leak file";
				goto fail;
			}
			if (v != FMT_LEAKS_VERSION) {
				*err = "unsupported leak file version";
				goto fail;
			}
			continue;
		}
		uint64_t a, b, c, d, e;
		if (!strcmp(k, FMT_LEAKS_PID) && ln.ntok == 2 && !parse_u64(ln.tok[1], 10, &a) && a < (1u << 31)) {
			l.pid = (long)a;
		} else if (!strcmp(k, FMT_LEAKS_PPID) && ln.ntok == 2 && !parse_u64(ln.tok[1], 10, &a) && a < (1u << 31)) {
			l.ppid = (long)a;
		} else if (!strcmp(k, FMT_LEAKS_RUN) && ln.ntok == 2 && strlen(ln.tok[1]) < sizeof l.run) {
			strcpy(l.run, ln.tok[1]);
		} else if (!strcmp(k, FMT_LEAKS_EXE) && ln.ntok == 2) {
			free(l.exe);
			if (!(l.exe = dup_unescaped(ln.tok[1])))
				goto oom;
		} else if (!strcmp(k, FMT_LEAKS_ARG) && ln.ntok == 2) {
			if (grow((void **)&l.argv, &argcap, l.argc + 1, sizeof *l.argv) ||
			    !(l.argv[l.argc] = dup_unescaped(ln.tok[1])))
				goto oom;
			l.argv[++l.argc] = NULL;
		} else if (!strcmp(k, FMT_LEAKS_EXIT) && ln.ntok >= 2) {
			if (!strcmp(ln.tok[1], FMT_LEAKS_STATUS) && ln.ntok == 3 && !parse_u64(ln.tok[2], 10, &a) && a < 256) {
				l.exit_how = FMT_EXIT_STATUS;
				l.exit_code = (int)a;
			} else if (!strcmp(ln.tok[1], FMT_LEAKS_SIGNAL) && ln.ntok == 3 && !parse_u64(ln.tok[2], 10, &a) && a < 128) {
				l.exit_how = FMT_EXIT_SIGNAL;
				l.exit_code = (int)a;
			} else {
				l.exit_how = FMT_EXIT_UNKNOWN;
			}
		} else if (!strcmp(k, FMT_LEAKS_TOTALS)) {
			if (ln.ntok != 6 || parse_u64(ln.tok[1], 10, &a) || parse_u64(ln.tok[2], 10, &b) ||
			    parse_u64(ln.tok[3], 10, &c) || parse_u64(ln.tok[4], 10, &d) ||
			    parse_u64(ln.tok[5], 10, &e))
				goto bad_line;
			l.allocs = a, l.frees = b, l.bytes_allocated = c;
			l.in_use_bytes = d, l.in_use_blocks = e;
			saw_totals = true;
		} else if (!strcmp(k, FMT_LEAKS_DROPPED) && ln.ntok == 2 && !parse_u64(ln.tok[1], 10, &a)) {
			l.dropped = a;
		} else if (!strcmp(k, FMT_LEAKS_CHECK_LINE) && ln.ntok == 3 && !parse_u64(ln.tok[1], 10, &a) && a < (1u << 31)) {
			l.check = (unsigned)a;
			l.check_increased = !strcmp(ln.tok[2], FMT_LEAKS_INCREASED);
		} else if (!strcmp(k, FMT_LEAKS_UNSTOPPED) && ln.ntok == 2 && !parse_u64(ln.tok[1], 10, &a) &&
			   a < (1u << 31)) {
			l.unstopped_threads = (unsigned)a;
		} else if (!strcmp(k, FMT_LEAKS_SUMMARY) && ln.ntok == 4 && !parse_u64(ln.tok[2], 10, &a) &&
			   !parse_u64(ln.tok[3], 10, &b)) {
			for (int i = 0; i < FMT_KIND_COUNT; i++)
				if (!strcmp(ln.tok[1], fmt_kind_names[i])) {
					l.kind_bytes[i] = a;
					l.kind_blocks[i] = b;
					l.has_summary = true;
				}
		} else if (!strcmp(k, FMT_LEAKS_SHAPE) && ln.ntok == 3) {
			char both[1024];
			snprintf(both, sizeof both, "%s %s", ln.tok[1], ln.tok[2]);
			if (fmt_shape_parse(&l.shape, both))
				goto bad_line;
		} else if (!strcmp(k, FMT_LEAKS_SAMPLE) && ln.ntok == 2 && !parse_u64(ln.tok[1], 10, &a)) {
			l.sample = a;
		} else if (!strcmp(k, FMT_LEAKS_SCAN_US) && ln.ntok == 2 && !parse_u64(ln.tok[1], 10, &a)) {
			l.scan_us = a;
		} else if (!strcmp(k, FMT_LEAKS_CLASSIFIED) && ln.ntok == 2) {
			l.classified = !strcmp(ln.tok[1], FMT_YES);
		} else if (!strcmp(k, FMT_LEAKS_BYPASSED) && ln.ntok == 2) {
			free(l.allocator_bypassed);
			if (!(l.allocator_bypassed = dup_unescaped(ln.tok[1])))
				goto oom;
		} else if (!strcmp(k, FMT_LEAKS_FREERES) && ln.ntok == 2) {
			l.freeres = !strcmp(ln.tok[1], FMT_YES);
		} else if (!strcmp(k, FMT_LEAKS_MODULE)) {
			if (ln.ntok != 7 || parse_addr(ln.tok[1], &a) || parse_addr(ln.tok[2], &b) ||
			    parse_addr(ln.tok[3], &c) || b > c)
				goto bad_line;
			if (grow((void **)&l.modules, &modcap, l.nmodules, sizeof *l.modules))
				goto oom;
			struct fmt_module *m = &l.modules[l.nmodules];
			memset(m, 0, sizeof *m);
			m->base = a, m->lo = b, m->hi = c;
			m->unloaded = !strcmp(ln.tok[5], FMT_LEAKS_UNLOADED);
			m->path = dup_unescaped(ln.tok[6]);
			m->build_id = strcmp(ln.tok[4], "-") ? strdup(ln.tok[4]) : NULL;
			l.nmodules++;
			if (!m->path || (strcmp(ln.tok[4], "-") && !m->build_id))
				goto oom;
		} else if (!strcmp(k, FMT_LEAKS_STACK)) {
			if (parse_stack(&l, &ln, &stackcap))
				goto bad_line;
		} else if (!strcmp(k, FMT_LEAKS_POOL)) {
			if (ln.ntok != 7 || parse_u64(ln.tok[1], 10, &a) || parse_u64(ln.tok[2], 10, &b) ||
			    parse_u64(ln.tok[4], 10, &c) || parse_u64(ln.tok[5], 10, &d) || !a ||
			    (strcmp(ln.tok[3], FMT_LEAKS_ALIVE) && strcmp(ln.tok[3], FMT_LEAKS_GONE)) ||
			    (l.npools && l.pools[l.npools - 1].id >= a))  /* ids increase */
				goto bad_line;
			if (grow((void **)&l.pools, &poolcap, l.npools, sizeof *l.pools))
				goto oom;
			struct fmt_pool *pl = &l.pools[l.npools];
			pl->id = a, pl->parent = b, pl->bytes = c, pl->blocks = d;
			pl->alive = !strcmp(ln.tok[3], FMT_LEAKS_ALIVE);
			pl->name = strcmp(ln.tok[6], "-") ? dup_unescaped(ln.tok[6]) : strdup("");
			if (!pl->name)
				goto oom;
			l.npools++;
		} else if (!strcmp(k, FMT_LEAKS_IN_POOL)) {
			long si;
			if (ln.ntok != 3 || parse_u64(ln.tok[1], 10, &a) || parse_u64(ln.tok[2], 10, &b) ||
			    (si = find_stack(&l, a)) < 0)
				goto bad_line;
			l.stacks[si].pool = b;
		} else if (!strcmp(k, FMT_LEAKS_RECORD)) {
			int kind = -1;
			long si;
			if ((ln.ntok != 5 && ln.ntok != 7) || parse_u64(ln.tok[2], 10, &a) ||
			    parse_u64(ln.tok[3], 10, &b) || parse_u64(ln.tok[4], 10, &c) ||
			    (ln.ntok == 7 && (parse_u64(ln.tok[5], 10, &d) || parse_u64(ln.tok[6], 10, &e))))
				goto bad_line;
			for (int i = 0; i < FMT_KIND_COUNT; i++)
				if (!strcmp(ln.tok[1], fmt_kind_names[i]))
					kind = i;
			if (kind < 0 || (si = find_stack(&l, c)) < 0)
				goto bad_line;
			if (grow((void **)&l.records, &reccap, l.nrecords, sizeof *l.records))
				goto oom;
			l.records[l.nrecords++] = (struct fmt_record){ kind, a, b, (size_t)si, ln.ntok == 7,
								       ln.ntok == 7 ? d : 0, ln.ntok == 7 ? e : 0 };
		} else if (!strcmp(k, FMT_LEAKS_ERROR)) {
			int kind = -1, where = FMT_WHERE_NONE;
			long ai = -1, fi, pi = -1;
			uint64_t pv = 0;
			for (int i = 0; ln.ntok > 1 && i < FMT_ERROR_KIND_COUNT; i++)
				if (!strcmp(ln.tok[1], fmt_error_kind_names[i]))
					kind = i;
			if (kind < 0)
				continue;  /* a newer writer's kind: skipped */
			if (fmt_error_new_delete(kind)) {
				int r = parse_new_delete(&l, &ln, kind, &errcap);
				if (r == -ENOMEM)
					goto oom;
				if (r)
					goto bad_line;
				continue;
			}
			/* a ninth word (the first free's stack) is the line's rest */
			int nt = ln.ntok + (ln.ntok == 8 && ln.rest);
			if ((nt != 6 && nt != 8 && nt != 9) || parse_u64(ln.tok[2], 10, &a) ||
			    parse_u64(ln.tok[3], 10, &b) || parse_u64(ln.tok[4], 10, &c) ||
			    parse_u64(ln.tok[5], 10, &d) ||
			    (nt >= 8 && parse_u64(ln.tok[6], 10, &e)) ||
			    (nt == 9 && parse_u64(ln.rest, 10, &pv)))
				goto bad_line;
			for (int i = 0; nt >= 8 && i < FMT_WHERE_COUNT; i++)
				if (!strcmp(ln.tok[7], fmt_error_where_names[i]))
					where = i;
			/* a mismatch names its block; an invalid free may name none;
			 * a double free may name its first free; a guarded block's
			 * fault names its block, its access and the access's stack,
			 * and its free when it was freed; an overflow into a
			 * block's slack, found at its free or a leak report, has
			 * no access stack (0) */
			bool guarded = fmt_error_guarded(kind);
			bool access = where == FMT_WHERE_READ || where == FMT_WHERE_WRITE;
			fi = -1;
			if ((nt >= 8) != (kind == FMT_ERROR_INVALID || guarded) ||
			    (nt == 9) != (where == FMT_WHERE_FREED || guarded) || access != guarded ||
			    (c && (ai = find_stack(&l, c)) < 0) ||
			    (!c && kind != FMT_ERROR_INVALID) ||
			    ((d || kind != FMT_ERROR_OVERFLOW) && (fi = find_stack(&l, d)) < 0) ||
			    (kind == FMT_ERROR_USE_AFTER_FREE && !pv) ||
			    (kind == FMT_ERROR_OVERFLOW && !pv && (where != FMT_WHERE_WRITE || e < b)) ||
			    (pv && (pi = find_stack(&l, pv)) < 0))
				goto bad_line;
			if (grow((void **)&l.errors, &errcap, l.nerrors, sizeof *l.errors))
				goto oom;
			l.errors[l.nerrors++] = (struct fmt_error){
				.kind = kind, .count = a, .size = b,
				.alloc_stack = ai < 0 ? SIZE_MAX : (size_t)ai,
				.free_stack = fi < 0 ? SIZE_MAX : (size_t)fi,
				.offset = nt >= 8 ? e : 0, .where = where,
				.prev_stack = pi < 0 ? SIZE_MAX : (size_t)pi };
		} else if (!strcmp(k, FMT_LEAKS_GUARDED) && ln.ntok == 3 &&
			   !parse_u64(ln.tok[1], 10, &a) && !parse_u64(ln.tok[2], 10, &b)) {
			l.guard = true;
			l.guarded = a;
			l.guard_full = b;
		} else if (!strcmp(k, FMT_LEAKS_ERRORS_CHECKED) && ln.ntok == 1) {
			l.errors_checked = true;
		} else if (!strcmp(k, FMT_LEAKS_ERRORS_DROPPED) && ln.ntok == 2 &&
			   !parse_u64(ln.tok[1], 10, &a)) {
			l.errors_dropped = a;
		} else if (!strcmp(k, FMT_LEAKS_END) && ln.ntok == 1) {
			saw_end = true;
		}
		/* anything else: a newer writer's line; skipped */
	}
	if (lineno == 0) {
		*err = "empty file";
		goto fail;
	}
	if (!saw_end) {
		*err = "truncated file (no end line)";
		goto fail;
	}
	if (!saw_totals) {
		*err = "malformed file (no totals line)";
		goto fail;
	}
	free(copy);
	*out = l;
	return 0;

bad_line:
	*err = "malformed line in leak file";
	goto fail;
oom:
	*err = "out of memory";
fail:
	free(copy);
	fmt_leaks_release(&l);
	return -EINVAL;
}

int fmt_leaks_read(const char *path, struct fmt_leaks *out, const char **err)
{
	char *buf;
	size_t len;
	int ret = fmt_input_read(path, MAX_FILE, &buf, &len, err);

	memset(out, 0, sizeof *out);
	if (ret)
		return ret;
	ret = fmt_leaks_parse(buf, len, out, err);
	free(buf);
	return ret;
}

void fmt_leaks_release(struct fmt_leaks *l)
{
	free(l->exe);
	free(l->allocator_bypassed);
	for (size_t i = 0; i < l->argc; i++)
		free(l->argv[i]);
	free(l->argv);
	for (size_t i = 0; i < l->nmodules; i++) {
		free(l->modules[i].path);
		free(l->modules[i].build_id);
	}
	free(l->modules);
	for (size_t i = 0; i < l->nstacks; i++)
		free(l->stacks[i].pcs);
	free(l->stacks);
	free(l->records);
	free(l->errors);
	for (size_t i = 0; i < l->npools; i++)
		free(l->pools[i].name);
	free(l->pools);
	memset(l, 0, sizeof *l);
}

const struct fmt_pool *fmt_leaks_pool(const struct fmt_leaks *l, uint64_t id)
{
	size_t lo = 0, hi = l->npools;  /* ids increase */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (l->pools[mid].id == id)
			return &l->pools[mid];
		if (l->pools[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}
