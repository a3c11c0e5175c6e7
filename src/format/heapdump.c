/* heapdump.c — the text heap profile reader; the layouts are in heapdump.h. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/heapdump.h"
#include "format/vocab.h"
#include "format/input.h"
#include "format/leakfile.h"   /* fmt_unescape */

#define MAX_LINE (1u << 20)

/* what, at line, in d's own buffer (the caller's) */
static const char *line_error(struct fmt_heap_dump *d, unsigned long line, const char *what)
{
	snprintf(d->error, sizeof d->error, "line %lu: %s", line, what);
	return d->error;
}

static void skip_spaces(const char **p)
{
	while (**p == ' ' || **p == '\t')
		++*p;
}

/* A decimal count no bigger than FMT_HEAP_MAX_COUNT; 0 on success. */
static int parse_count(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	if (!isdigit((unsigned char)*s))
		return -1;
	while (isdigit((unsigned char)*s)) {
		uint64_t digit = (uint64_t)(*s - '0');
		/* checked before multiplying: v * 10 must not wrap around 2^64 */
		if (v > (FMT_HEAP_MAX_COUNT - digit) / 10)
			return -1;
		v = v * 10 + digit;
		s++;
	}
	*out = v;
	*p = s;
	return 0;
}

static int expect(const char **p, char c)
{
	skip_spaces(p);
	if (**p != c)
		return -1;
	++*p;
	return 0;
}

/* "n: b [n2: b2]" with any spacing. */
static int parse_counts(const char **p, uint64_t v[FMT_HEAP_NVALUES])
{
	skip_spaces(p);
	if (parse_count(p, &v[0]) || expect(p, ':'))
		return -1;
	skip_spaces(p);
	if (parse_count(p, &v[1]) || expect(p, '['))
		return -1;
	skip_spaces(p);
	if (parse_count(p, &v[2]) || expect(p, ':'))
		return -1;
	skip_spaces(p);
	if (parse_count(p, &v[3]) || expect(p, ']'))
		return -1;
	return 0;
}

static int pool_push(struct fmt_heap_dump *d, uint64_t pc)
{
	if (d->pool_len == d->pool_cap) {
		size_t cap = d->pool_cap ? 2 * d->pool_cap : 4096;
		uint64_t *np = realloc(d->pool, cap * sizeof *np);
		if (!np)
			return -ENOMEM;
		d->pool = np;
		d->pool_cap = cap;
	}
	d->pool[d->pool_len++] = pc;
	return 0;
}

/* " 0xPC 0xPC ..." up to the end of the line: appended to the pool. */
static int parse_pcs(struct fmt_heap_dump *d, const char *s, uint32_t *depth, const char **err,
		     unsigned long lineno)
{
	uint32_t n = 0;
	for (;;) {
		skip_spaces(&s);
		if (!*s || *s == '\n' || *s == '\r')
			break;
		if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || !isxdigit((unsigned char)s[2])) {
			*err = line_error(d, lineno, "an address is not 0x-prefixed hex");
			return -EINVAL;
		}
		s += 2;
		uint64_t pc = 0;
		int digits = 0;
		while (isxdigit((unsigned char)*s)) {
			if (++digits > 16) {
				*err = line_error(d, lineno, "an address has more than 64 bits");
				return -EINVAL;
			}
			int c = tolower((unsigned char)*s++);
			pc = pc << 4 | (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
		}
		if (*s && *s != ' ' && *s != '\t' && *s != '\n' && *s != '\r') {
			*err = line_error(d, lineno, "an address is not 0x-prefixed hex");
			return -EINVAL;
		}
		if (++n > FMT_HEAP_MAX_DEPTH) {
			*err = line_error(d, lineno, "a stack deeper than 1024 frames");
			return -EINVAL;
		}
		if (pool_push(d, pc))
			return -ENOMEM;
	}
	*depth = n;
	return 0;
}

static int add_stack(struct fmt_heap_dump *d, const uint64_t v[FMT_HEAP_NVALUES],
		     size_t first, uint32_t depth, const char **err, unsigned long lineno)
{
	if (d->nstacks >= FMT_HEAP_MAX_STACKS) {
		*err = line_error(d, lineno, "more than 16 M stacks");
		return -EINVAL;
	}
	if (d->nstacks == d->stacks_cap) {
		size_t cap = d->stacks_cap ? 2 * d->stacks_cap : 1024;
		struct fmt_heap_stack *ns = realloc(d->stacks, cap * sizeof *ns);
		if (!ns)
			return -ENOMEM;
		d->stacks = ns;
		d->stacks_cap = cap;
	}
	struct fmt_heap_stack *st = &d->stacks[d->nstacks++];
	memcpy(st->v, v, sizeof st->v);
	st->pool_name = NULL;
	st->pcs = (uint64_t *)(uintptr_t)first; /* an offset until the pool stops moving */
	st->depth = depth;
	return 0;
}

/* "INDEX NAME": stack INDEX is pool NAME's. A line that names no stack
 * of the dump (or says it twice) is ignored, as comments are. */
static int add_pool(struct fmt_heap_dump *d, const char *s)
{
	char *end;
	errno = 0;
	unsigned long long idx = strtoull(s, &end, 10);
	if (end == s || *end != ' ' || errno || idx >= d->nstacks || d->stacks[idx].pool_name)
		return 0;
	s = end + 1;
	size_t n = strcspn(s, " \t\r\n");
	if (!n)
		return 0;
	char *name = strndup(s, n);
	if (!name)
		return -ENOMEM;
	name[fmt_unescape(name)] = 0;
	d->stacks[idx].pool_name = name;
	return 0;
}

/* "START-END PERMS OFFSET DEV INODE [PATH]" */
static int add_map(struct fmt_heap_dump *d, const char *s)
{
	char *end;
	errno = 0;
	uint64_t start = strtoull(s, &end, 16);
	if (end == s || *end != '-')
		return 0;
	s = end + 1;
	uint64_t stop = strtoull(s, &end, 16);
	if (end == s || (*end != ' ' && *end != '\t') || errno)
		return 0;
	s = end;
	skip_spaces(&s);
	char perms[5] = { 0 };
	for (int i = 0; i < 4 && *s && *s != ' '; i++)
		perms[i] = *s++;
	skip_spaces(&s);
	uint64_t offset = strtoull(s, &end, 16);
	if (end == s)
		return 0;
	s = end;
	skip_spaces(&s);
	while (*s && *s != ' ' && *s != '\t') /* device */
		s++;
	skip_spaces(&s);
	while (isdigit((unsigned char)*s)) /* inode */
		s++;
	skip_spaces(&s);
	if (*s != '/')
		return 0; /* anonymous, [heap], [stack], [vdso]: nothing to symbolize */
	size_t len = strcspn(s, "\r\n");
	if (len >= 10 && !strncmp(s + len - 10, " (deleted)", 10))
		len -= 10;
	if (d->nmaps == d->maps_cap) {
		size_t cap = d->maps_cap ? 2 * d->maps_cap : 64;
		struct fmt_heap_map *nm = realloc(d->maps, cap * sizeof *nm);
		if (!nm)
			return -ENOMEM;
		d->maps = nm;
		d->maps_cap = cap;
	}
	char *path = strndup(s, len);
	if (!path)
		return -ENOMEM;
	d->maps[d->nmaps++] = (struct fmt_heap_map){ start, stop, offset, perms[2] == 'x', path };
	return 0;
}

/* "# build-id HEX PATH" */
static int add_buildid(struct fmt_heap_dump *d, const char *s)
{
	skip_spaces(&s);
	size_t hl = 0;
	while (isxdigit((unsigned char)s[hl]))
		hl++;
	if (!hl || hl > 128 || (s[hl] != ' ' && s[hl] != '\t'))
		return 0;
	const char *path = s + hl;
	skip_spaces(&path);
	size_t pl = strcspn(path, "\r\n");
	if (!pl)
		return 0;
	if (d->nbuildids == d->buildids_cap) {
		size_t cap = d->buildids_cap ? 2 * d->buildids_cap : 32;
		struct fmt_heap_buildid *nb = realloc(d->buildids, cap * sizeof *nb);
		if (!nb)
			return -ENOMEM;
		d->buildids = nb;
		d->buildids_cap = cap;
	}
	char *h = strndup(s, hl), *p = strndup(path, pl);
	if (!h || !p) {
		free(h);
		free(p);
		return -ENOMEM;
	}
	for (char *c = h; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	d->buildids[d->nbuildids++] = (struct fmt_heap_buildid){ p, h };
	return 0;
}

int fmt_shape_parse(struct fmt_shape *s, const char *text)
{
	memset(s, 0, sizeof *s);
	const char *p = strstr(text, FMT_SHAPE_TEMPORARY), *q = strstr(text, FMT_SHAPE_SIZES);
	if (!p || !q)
		return -1;
	p += FMT_LEN(FMT_SHAPE_TEMPORARY);
	if (parse_count(&p, &s->temporary))
		return -1;
	q += FMT_LEN(FMT_SHAPE_SIZES);
	for (int k = 0; k < FMT_SHAPE_BUCKETS; k++) {
		if ((k && *q++ != ',') || parse_count(&q, &s->sizes[k])) {
			memset(s, 0, sizeof *s);
			return -1;
		}
	}
	s->known = true;
	return 0;
}

/* "# heaptrail-exe REAL STARTED", both '%XX'-escaped. */
static void parse_exe(struct fmt_heap_dump *d, const char *s)
{
	s += FMT_LEN(FMT_HEAP_EXE);
	if (*s++ != ' ' || d->exe_real)
		return;
	size_t a = strcspn(s, " \n");
	if (s[a] != ' ')
		return;
	const char *t = s + a + 1;
	size_t b = strcspn(t, " \n");
	char *real = strndup(s, a), *started = strndup(t, b);
	if (!real || !started || !a || !b) {
		free(real);
		free(started);
		return;
	}
	fmt_unescape(real);
	fmt_unescape(started);
	d->exe_real = real;
	d->exe_started = started;
}

static void parse_comment(struct fmt_heap_dump *d, const char *s)
{
	if (!strncmp(s, FMT_HEAP_EXE, FMT_LEN(FMT_HEAP_EXE))) {
		parse_exe(d, s);
		return;
	}
	if (!strncmp(s, FMT_HEAP_SHAPE " ", FMT_LEN(FMT_HEAP_SHAPE) + 1)) {
		fmt_shape_parse(&d->shape, s + FMT_LEN(FMT_HEAP_SHAPE));
		return;
	}
	if (!strncmp(s, FMT_HEAP_DUMP_LINE, FMT_LEN(FMT_HEAP_DUMP_LINE))) {
		const char *p;
		if ((p = strstr(s, " " FMT_HEAP_MS)))
			d->ms = strtoll(p + 1 + FMT_LEN(FMT_HEAP_MS), NULL, 10);
		if ((p = strstr(s, " " FMT_HEAP_UNIX_MS)))
			d->unix_ms = strtoll(p + 1 + FMT_LEN(FMT_HEAP_UNIX_MS), NULL, 10);
		if ((p = strstr(s, " " FMT_HEAP_PID)))
			d->pid = strtol(p + 1 + FMT_LEN(FMT_HEAP_PID), NULL, 10);
		if ((p = strstr(s, " " FMT_HEAP_AGENT_BYTES)))
			d->agent_bytes = strtoll(p + 1 + FMT_LEN(FMT_HEAP_AGENT_BYTES), NULL, 10);
		if ((p = strstr(s, " " FMT_HEAP_RSS)))
			d->rss = strtoll(p + 1 + FMT_LEN(FMT_HEAP_RSS), NULL, 10);
		if ((p = strstr(s, " " FMT_HEAP_ALLOC_IN_USE)))
			d->heap_in_use = strtoll(p + 1 + FMT_LEN(FMT_HEAP_ALLOC_IN_USE), NULL, 10);
		if ((p = strstr(s, " " FMT_HEAP_ENDS)) && strchr(" \n", p[1 + FMT_LEN(FMT_HEAP_ENDS)]))
			d->ends = FMT_HEAP_END_WANTED;
		if ((p = strstr(s, " " FMT_HEAP_RUN))) {
			p += 1 + FMT_LEN(FMT_HEAP_RUN);
			size_t n = strcspn(p, " \n");
			if (n < sizeof d->run) {
				memcpy(d->run, p, n);
				d->run[n] = 0;
			}
		}
	}
}

/* The header's "@ NAME/S" part: the sampling distance pprof would use. */
static int parse_sampler(struct fmt_heap_dump *d, const char *s)
{
	skip_spaces(&s);
	if (*s++ != '@')
		return -1;
	skip_spaces(&s);
	size_t n = strcspn(s, "/ \t\r\n");
	uint64_t rate = 0;
	if (s[n] == '/') {
		const char *r = s + n + 1;
		if (parse_count(&r, &rate))
			return -1;
	}
	if (n == FMT_LEN(FMT_HEAP_V2) && !strncmp(s, FMT_HEAP_V2, n))
		d->sample = rate ? rate : 1;
	else if (n == 8 && !strncmp(s, "heapz_v2", 8))
		d->sample = rate ? rate : 1;
	else if (n == FMT_LEN(FMT_HEAP_PROFILE) && !strncmp(s, FMT_HEAP_PROFILE, n))
		d->sample = 1;
	else if (n == 4 && !strncmp(s, "heap", 4))
		d->sample = rate / 2 ? rate / 2 : 1; /* the old sampler's S is twice the mean */
	else
		return -1;
	return 0;
}

enum state { HEADER, SAMPLES, JE_STACK_COUNTS, MAPS };

int fmt_heap_read(struct fmt_heap_dump *d, FILE *f, const char **err)
{
	memset(d, 0, sizeof *d);
	d->ms = d->unix_ms = d->agent_bytes = d->rss = d->heap_in_use = -1;
	d->pid = -1;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned long lineno = 0;
	enum state st = HEADER;
	int rc = 0;
	bool je_pending = false;       /* a jemalloc "@" line waits for its t*: line */
	bool cut = false;              /* the last line read had no end of line */
	size_t je_first = 0;
	uint32_t je_depth = 0;
	*err = NULL;

	while ((len = getline(&line, &cap, f)) > 0) {
		lineno++;
		cut = line[len - 1] != '\n';
		if ((size_t)len > MAX_LINE) {
			*err = line_error(d, lineno, "line longer than 1 MiB");
			rc = -EINVAL;
			goto out;
		}
		if (memchr(line, 0, (size_t)len)) {
			*err = line_error(d, lineno, "binary data (a NUL byte)");
			rc = -EINVAL;
			goto out;
		}
		const char *s = line;
		if (st == MAPS) {
			if (!strncmp(s, FMT_HEAP_BUILD_ID " ", FMT_LEN(FMT_HEAP_BUILD_ID " ")))
				rc = add_buildid(d, s + FMT_LEN(FMT_HEAP_BUILD_ID " "));
			else if (!strncmp(s, FMT_HEAP_POOL " ", FMT_LEN(FMT_HEAP_POOL " ")))
				rc = add_pool(d, s + FMT_LEN(FMT_HEAP_POOL " "));
			else if (!strncmp(s, FMT_HEAP_END_LINE, FMT_LEN(FMT_HEAP_END_LINE)) &&
				 strchr("\r\n", s[FMT_LEN(FMT_HEAP_END_LINE)]) && d->ends)
				d->ends = FMT_HEAP_END_SEEN;
			else if (*s != '#')
				rc = add_map(d, s);
			if (rc)
				goto out;
			continue;
		}
		skip_spaces(&s);
		if (*s == '#') {
			parse_comment(d, s);
			continue;
		}
		if (*s == '\n' || *s == '\r' || !*s)
			continue;
		if (!strncmp(s, FMT_HEAP_MAPS, FMT_LEN(FMT_HEAP_MAPS)) ||
		    !strncmp(s, FMT_HEAP_MAPS_OLD, FMT_LEN(FMT_HEAP_MAPS_OLD))) {
			if (st == HEADER)
				break; /* reported below as a missing header */
			if (je_pending) {
				*err = line_error(d, lineno, "a stack without its t*: counts");
				rc = -EINVAL;
				goto out;
			}
			st = MAPS;
			continue;
		}
		if (st == HEADER) {
			if (!strncmp(s, FMT_HEAP_HEADER, FMT_LEN(FMT_HEAP_HEADER))) {
				s += FMT_LEN(FMT_HEAP_HEADER);
				if (parse_counts(&s, d->total) || parse_sampler(d, s)) {
					*err = line_error(d, lineno, "malformed 'heap profile:' header");
					rc = -EINVAL;
					goto out;
				}
				d->layout = FMT_HEAP_GPERFTOOLS;
				st = SAMPLES;
			} else if (!strncmp(s, FMT_HEAP_V2 "/", FMT_LEN(FMT_HEAP_V2 "/"))) {
				s += FMT_LEN(FMT_HEAP_V2 "/");
				if (parse_count(&s, &d->sample) || !d->sample) {
					*err = line_error(d, lineno, "malformed 'heap_v2/' header");
					rc = -EINVAL;
					goto out;
				}
				d->layout = FMT_HEAP_JEMALLOC;
				st = JE_STACK_COUNTS;
			} else {
				*err = "not a heap profile (no 'heap profile:' or 'heap_v2/' header)";
				rc = -EINVAL;
				goto out;
			}
			continue;
		}
		if (d->layout == FMT_HEAP_GPERFTOOLS) {
			uint64_t v[FMT_HEAP_NVALUES];
			const char *at = strchr(s, '@');
			if (parse_counts(&s, v) || !at || expect(&s, '@')) {
				*err = line_error(d, lineno, "malformed sample line (want 'n: b [n2: b2] @ 0x...')");
				rc = -EINVAL;
				goto out;
			}
			size_t first = d->pool_len;
			uint32_t depth;
			if ((rc = parse_pcs(d, s, &depth, err, lineno)) ||
			    (rc = add_stack(d, v, first, depth, err, lineno)))
				goto out;
			continue;
		}
		/* jemalloc */
		if (*s == '@') {
			if (je_pending) {
				*err = line_error(d, lineno, "a stack without its t*: counts");
				rc = -EINVAL;
				goto out;
			}
			je_first = d->pool_len;
			if ((rc = parse_pcs(d, s + 1, &je_depth, err, lineno)))
				goto out;
			je_pending = true;
			st = SAMPLES;
			continue;
		}
		if (s[0] == 't' && s[1] == '*' && s[2] == ':') {
			uint64_t v[FMT_HEAP_NVALUES];
			s += 3;
			if (parse_counts(&s, v)) {
				*err = line_error(d, lineno, "malformed 't*:' counts");
				rc = -EINVAL;
				goto out;
			}
			if (st == JE_STACK_COUNTS) {
				memcpy(d->total, v, sizeof v);
			} else if (je_pending) {
				if ((rc = add_stack(d, v, je_first, je_depth, err, lineno)))
					goto out;
				je_pending = false;
			}
			continue;
		}
		if (s[0] == 't' && isdigit((unsigned char)s[1]))
			continue; /* per-thread counts */
		*err = line_error(d, lineno, "unexpected line in a jemalloc heap profile");
		rc = -EINVAL;
		goto out;
	}
	if (ferror(f)) {
		*err = "read error";
		rc = -EIO;
		goto out;
	}
	if (st == HEADER) {
		*err = lineno ? "not a heap profile (no 'heap profile:' or 'heap_v2/' header)"
			      : "empty file";
		rc = -EINVAL;
		goto out;
	}
	if (st != MAPS) {
		*err = "truncated: no MAPPED_LIBRARIES section";
		rc = -EINVAL;
		goto out;
	}
	/* every writer ends its last line: a file cut anywhere but between
	 * two lines (a full disk, a copy stopped) ends in the middle of one */
	if (cut) {
		*err = line_error(d, lineno, "truncated: the file ends in the middle of this line");
		rc = -EINVAL;
		goto out;
	}
	if (d->ends == FMT_HEAP_END_WANTED) {
		*err = "truncated: no '" FMT_HEAP_END_LINE "' line (its '" FMT_HEAP_DUMP_LINE
		       "' line says it has one)";
		rc = -EINVAL;
		goto out;
	}
	for (size_t i = 0; i < d->nstacks; i++) {
		/* an empty stack may come before any pc: the pool is still NULL */
		struct fmt_heap_stack *k = &d->stacks[i];
		k->pcs = k->depth ? d->pool + (uintptr_t)k->pcs : NULL;
	}
	d->has_alloc = (d->total[2] != d->total[0] && d->total[2]) ||
		       (d->total[3] != d->total[1] && d->total[3]);
	if (d->layout == FMT_HEAP_JEMALLOC)
		d->has_alloc = true;
out:
	free(line);
	if (rc) {
		if (rc == -ENOMEM)
			*err = "out of memory";
		char error[sizeof d->error];  /* where *err may point: kept */
		memcpy(error, d->error, sizeof error);
		fmt_heap_release(d);
		memcpy(d->error, error, sizeof error);
	}
	return rc;
}

int fmt_heap_read_path(struct fmt_heap_dump *d, const char *path, const char **err)
{
	FILE *f = fmt_input_fopen(path, FMT_INPUT_MAX, err);
	if (!f) {
		memset(d, 0, sizeof *d);
		return -errno;
	}
	int rc = fmt_heap_read(d, f, err);
	fclose(f);
	return rc;
}

void fmt_heap_release(struct fmt_heap_dump *d)
{
	for (size_t i = 0; i < d->nmaps; i++)
		free(d->maps[i].path);
	for (size_t i = 0; i < d->nbuildids; i++) {
		free(d->buildids[i].path);
		free(d->buildids[i].hex);
	}
	free(d->maps);
	free(d->buildids);
	for (size_t i = 0; i < d->nstacks; i++)
		free(d->stacks[i].pool_name);
	free(d->stacks);
	free(d->pool);
	free(d->exe_real);
	free(d->exe_started);
	memset(d, 0, sizeof *d);
}
