/*
 * series.c — the dumps of one run, found in a directory or given one by
 * one, read one at a time and put in time order: what growth works from.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyze/series.h"
#include "format/input.h"
#include "format/vocab.h"


static const char *base_name(const char *path)
{
	const char *b = path ? strrchr(path, '/') : NULL;
	return b ? b + 1 : path;
}

/* ---------- a series of dumps ---------- */

/* The sequence number in a heaptrail dump name (PREFIX.PID.SEQ.KIND.heap),
 * or -1. */
static long name_seq(const char *path)
{
	const char *b = base_name(path);
	const char *end = strstr(b, FMT_HEAP_SUFFIX);
	long seq = -1;
	for (const char *s = b; s && s < end; s = strchr(s + 1, '.')) {
		const char *t = *s == '.' ? s + 1 : s;
		char *e;
		long v = strtol(t, &e, 10);
		if (e > t && *e == '.' && e - t == 4)
			seq = v;
	}
	return seq;
}

/* A dump's place in time: when it was taken, else its name's number. */
struct when {
	int64_t ms;
	const char *path;
	size_t i;               /* its place in the order read */
};

static int by_time(const void *a, const void *b)
{
	const struct when *x = a, *y = b;
	if (x->ms >= 0 && y->ms >= 0 && x->ms != y->ms)
		return x->ms < y->ms ? -1 : 1;
	long sx = name_seq(x->path), sy = name_seq(y->path);
	if (sx != sy)
		return sx < sy ? -1 : 1;
	return strcmp(x->path, y->path);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends s (owned; NULL: out of memory) to *list. 0 or -ENOMEM. */
static int push(char ***list, size_t *n, size_t *cap, char *s)
{
	if (!s)
		return -ENOMEM;
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 8;
		char **nl = realloc(*list, c * sizeof *nl);
		if (!nl) {
			free(s);
			return -ENOMEM;
		}
		*list = nl;
		*cap = c;
	}
	(*list)[(*n)++] = s;
	return 0;
}

int prof_dir_names(const char *dir, bool (*keep)(const char *name, long arg), long arg,
		   char ***names, size_t *n)
{
	size_t cap = 0;
	int rc = 0;
	*names = NULL;
	*n = 0;
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	for (struct dirent *e; !rc && (e = readdir(d));)
		if (keep(e->d_name, arg))
			rc = push(names, n, &cap, strdup(e->d_name));
	closedir(d);
	if (!rc)
		qsort(*names, *n, sizeof **names, cmp_str);
	return rc;
}

static bool is_dump_name(const char *name, long arg)
{
	(void)arg;
	size_t n = strlen(name), k = FMT_LEN(FMT_HEAP_SUFFIX);
	return name[0] != '.' && n >= k && !strcmp(name + n - k, FMT_HEAP_SUFFIX);
}

int prof_series_each(char **paths, size_t npaths, const struct prof_load_opts *o,
		     const struct prof_series_visit *v, size_t **order, size_t *n, char *why,
		     size_t whycap)
{
	char **list = NULL;
	size_t nlist = 0, cap = 0;
	struct prof_sym_cache *cache = NULL;
	struct when *when = NULL;
	int rc = 0;
	*order = NULL;
	*n = 0;
	for (size_t i = 0; i < npaths; i++) {
		char **names;
		size_t nnames;
		int r = prof_dir_names(paths[i], is_dump_name, 0, &names, &nnames);
		if (r == -ENOTDIR) {
			if (push(&list, &nlist, &cap, strdup(paths[i])))
				goto nomem;
			continue;
		}
		for (size_t k = 0; !r && k < nnames; k++) {
			char *path;
			r = push(&list, &nlist, &cap,
				 asprintf(&path, "%s/%s", paths[i], names[k]) < 0 ? NULL : path);
		}
		for (size_t k = 0; k < nnames; k++)
			free(names[k]);
		free(names);
		if (r == -ENOMEM)
			goto nomem;
		if (r || !nnames) {
			rc = r ? r : -ENOENT;
			snprintf(why, whycap, "cannot read '%s': %s", paths[i],
				 r ? strerror(-r) : "no heap dumps (*.heap) in this directory");
			goto out;
		}
	}
	when = calloc(nlist + 1, sizeof *when);
	*order = calloc(nlist + 1, sizeof **order);
	if (!when || !*order)
		goto nomem;
	struct prof_load_opts shared = *o;
	if (!shared.sym_cache)
		shared.sym_cache = cache = prof_sym_cache_new(); /* NULL: no sharing */
	for (size_t i = 0; i < nlist; i++) {
		const char *err;
		struct prof_profile p;
		int64_t ms;
		if (v->known && v->known(v->ctx, list[i], i, &ms)) {
			when[i] = (struct when){ ms, list[i], i };
			continue;
		}
		rc = prof_profile_load(&p, list[i], &shared, &err);
		if (rc) {
			snprintf(why, whycap, "cannot read '%s': %s", list[i], err);
			goto out;
		}
		when[i] = (struct when){ p.ms, list[i], i };
		rc = v->each(v->ctx, &p, i);
		prof_profile_release(&p);
		if (rc) {
			snprintf(why, whycap, "%s", rc == -ENOMEM ? "out of memory" : strerror(-rc));
			goto out;
		}
	}
	qsort(when, nlist, sizeof *when, by_time);
	for (size_t i = 0; i < nlist; i++)
		(*order)[i] = when[i].i;
	*n = nlist;
	goto out;
nomem:
	rc = -ENOMEM;
	snprintf(why, whycap, "out of memory");
out:
	prof_sym_cache_free(cache);
	for (size_t i = 0; i < nlist; i++)
		free(list[i]);
	free(list);
	free(when);
	if (rc) {
		free(*order);
		*order = NULL;
		*n = 0;
	}
	return rc;
}


long prof_timeline_pid(const char *name)
{
	const char *s = strrchr(name, '/');
	s = s ? s + 1 : name;
	const size_t k = FMT_LEN(FMT_FILE_PREFIX ".");
	if (strncmp(s, FMT_FILE_PREFIX ".", k))
		return -1;
	char *end;
	long pid = strtol(s + k, &end, 10);
	return end > s + k && !strcmp(end, FMT_TIMELINE_SUFFIX) ? pid : -1;
}

bool prof_is_dump_of(const char *name, long pid)
{
	size_t n = strlen(name), k = FMT_LEN(FMT_HEAP_SUFFIX);
	if (name[0] == '.' || n < k || strcmp(name + n - k, FMT_HEAP_SUFFIX))
		return false;
	if (pid < 0)
		return true;
	char prefix[48];
	int m = snprintf(prefix, sizeof prefix, FMT_FILE_PREFIX ".%ld.", pid);
	return !strncmp(name, prefix, (size_t)m);
}

bool prof_is_timeline(const char *name, long pid)
{
	return prof_timeline_pid(name) >= 0;
}

/* When the dump at path was written by an attached agent (its directory
 * holds heaptrail.PID.attach), "since attach at TIME UTC" into out, and
 * 0; else -1. */
int prof_attach_label(const char *path, long pid, char *out, size_t cap)
{
	char rec[PATH_MAX + 64];
	const char *slash = strrchr(path, '/');
	int dlen = slash ? (int)(slash - path) : 1;
	snprintf(rec, sizeof rec, "%.*s/heaptrail.%ld.attach", dlen, slash ? path : ".", pid);
	char *text, *at;
	size_t len;
	const char *err;
	int ret = -1;
	if (!fmt_input_read(rec, FMT_INPUT_MAX, &text, &len, &err) &&
	    (at = strstr(text, "\nattached "))) {
		time_t sec = (time_t)strtoll(at + 10, NULL, 10);
		struct tm tm;
		char when[64];
		if (gmtime_r(&sec, &tm) && strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm)) {
			snprintf(out, cap, "since attach at %s UTC", when);
			ret = 0;
		}
	}
	free(text);
	return ret;
}

