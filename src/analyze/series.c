/*
 * series.c — the dumps of one run, found in a directory or given one by
 * one, loaded and put in time order: what growth works from.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/series.h"
#include "format/vocab.h"

static char errbuf[512];

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

static int by_time(const void *a, const void *b)
{
	const struct prof_profile *x = a, *y = b;
	if (x->ms >= 0 && y->ms >= 0 && x->ms != y->ms)
		return x->ms < y->ms ? -1 : 1;
	long sx = name_seq(x->path), sy = name_seq(y->path);
	if (sx != sy)
		return sx < sy ? -1 : 1;
	return strcmp(x->path, y->path);
}

static int has_suffix(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);
	return n >= m && !strcmp(s + n - m, suf);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int prof_series_load(char **paths, size_t npaths, const struct prof_load_opts *o,
		     struct prof_profile **out, size_t *n, const char **err,
		     const char **err_file)
{
	char **list = NULL;
	size_t nlist = 0, cap = 0;
	struct prof_sym_cache *cache = NULL;
	int rc = 0;
	*out = NULL;
	*n = 0;
	*err_file = NULL;
	for (size_t i = 0; i < npaths; i++) {
		DIR *dir = opendir(paths[i]);
		if (!dir) {
			if (errno != ENOTDIR) {
				rc = -errno;
				*err = strerror(errno);
				snprintf(errbuf, sizeof errbuf, "%s", paths[i]);
				*err_file = errbuf;
				goto out;
			}
			if (nlist == cap) {
				cap = cap ? 2 * cap : 64;
				char **nl = realloc(list, cap * sizeof *nl);
				if (!nl)
					goto nomem;
				list = nl;
			}
			if (!(list[nlist] = strdup(paths[i])))
				goto nomem;
			nlist++;
			continue;
		}
		struct dirent *e;
		size_t first = nlist;
		while ((e = readdir(dir))) {
			if (!has_suffix(e->d_name, FMT_HEAP_SUFFIX) || e->d_name[0] == '.')
				continue;
			if (nlist == cap) {
				cap = cap ? 2 * cap : 64;
				char **nl = realloc(list, cap * sizeof *nl);
				if (!nl) {
					closedir(dir);
					goto nomem;
				}
				list = nl;
			}
			if (asprintf(&list[nlist], "%s/%s", paths[i], e->d_name) < 0) {
				closedir(dir);
				goto nomem;
			}
			nlist++;
		}
		closedir(dir);
		qsort(list + first, nlist - first, sizeof *list, cmp_str);
		if (nlist == first) {
			rc = -ENOENT;
			*err = "no heap dumps (*.heap) in this directory";
			snprintf(errbuf, sizeof errbuf, "%s", paths[i]);
			*err_file = errbuf;
			goto out;
		}
	}
	*out = calloc(nlist + 1, sizeof **out);
	if (!*out)
		goto nomem;
	struct prof_load_opts shared = *o;
	if (!shared.sym_cache)
		shared.sym_cache = cache = prof_sym_cache_new(); /* NULL: no sharing */
	for (size_t i = 0; i < nlist; i++) {
		rc = prof_profile_load(&(*out)[i], list[i], &shared, err);
		if (rc) {
			static char file[4096];
			snprintf(file, sizeof file, "%s", list[i]);
			*err_file = file;
			for (size_t k = 0; k < i; k++)
				prof_profile_release(&(*out)[k]);
			free(*out);
			*out = NULL;
			goto out;
		}
		*n = i + 1;
	}
	qsort(*out, *n, sizeof **out, by_time);
	goto out;
nomem:
	rc = -ENOMEM;
	*err = "out of memory";
out:
	prof_sym_cache_free(cache);
	for (size_t i = 0; i < nlist; i++)
		free(list[i]);
	free(list);
	if (rc)
		*n = 0;
	return rc;
}
