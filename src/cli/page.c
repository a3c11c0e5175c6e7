/* page.c — the HTML page of a run: its leak reports, dumps and
 * timelines as one self-contained page (render/html.c), per process: its
 * summary, leak records, growth ranking, timeline and the flame graph of
 * each dump. Not a command: `heaptrail html` (html.c), `heaptrail run
 * --html FILE` and `heaptrail attach --html FILE` write it
 * (cli_html_write), the live endpoint serves it (cli_html_build, handed
 * to control as ctl_live_opts.page). */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analyze/growth.h"
#include "analyze/series.h"
#include "analyze/timeline.h"
#include "cli/cli.h"
#include "format/vocab.h"
#include "render/render.h"

/* What the page keeps of a dump, taken as it is read and released (a
 * series of big dumps is never held whole): its totals and times (a
 * shell of the profile, its path owned), its part of the page, and
 * growth's digest of it; and the file's identity then. */
struct page_dump {
	struct prof_profile shell;
	char *json;
	struct prof_growth_dump *digest;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
};

static void page_dump_release(struct page_dump *d)
{
	free((char *)d->shell.path);
	free(d->json);
	prof_growth_digest_free(d->digest);
	memset(d, 0, sizeof *d);
}

/* The live page's dumps kept from one call to the next
 * (ctl_page_opts.keep_dumps): a dump is not changed once written, so a
 * call reads only the new ones. One for the process; its lock is held
 * through a build, which takes the entries it finds unchanged and gives
 * back every dump it shows. */
static struct {
	pthread_mutex_t lock;
	struct page_dump *e;
	size_t n;
	double min_share;
} kept = { .lock = PTHREAD_MUTEX_INITIALIZER };

struct html_run {
	const struct ctl_page_opts *o;
	char *why;                      /* quiet: where the error goes */
	size_t whycap;
	struct prof_run run;
	bool have_run;
	struct page_dump *dumps;        /* every dump, time order */
	size_t ndumps, nread, cap;
	struct prof_timeline *tls;
	long *tl_pid;
	char **tl_path;
	size_t ntls;
	struct render_html_proc *procs;
	struct prof_profile *by_pid;    /* the three above regrouped per process */
	struct prof_growth *growth;
	bool *has_growth;
	char (*since)[96];
	size_t nprocs;
	char **dump_json;
	struct prof_growth_dump **by_pid_digests;
	struct render_html_opts *ro;
	char *cmdline;                  /* o->pid's, from /proc (NUL-separated) */
	char *cmd_argv[64];
};

/* An error: printed, or (quiet) kept in h->why. */
__attribute__((format(printf, 2, 3)))
static void fail(struct html_run *h, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (h->o->quiet) {
		vsnprintf(h->why, h->whycap, fmt, ap);
	} else {
		fflush(stdout);
		fputs("heaptrail: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
	va_end(ap);
}

/* A file left out: a note, unless quiet. */
static void note(struct html_run *h, const char *file, const char *err)
{
	if (!h->o->quiet)
		fprintf(stderr, "heaptrail: note: cannot read '%s': %s; left out\n", file, err);
}

/* Whether a dump's name is one of process pid's numbered dumps
 * (PREFIX.PID.SEQ...: not the live endpoint's own PREFIX.PID.live.heap). */
static bool numbered_of(const char *name, long pid)
{
	char prefix[48];
	int n = snprintf(prefix, sizeof prefix, FMT_FILE_PREFIX ".%ld.", pid);
	return !strncmp(name, prefix, (size_t)n) && name[n] >= '0' && name[n] <= '9';
}

static void html_run_release(struct html_run *h)
{
	if (h->have_run)
		prof_run_release(&h->run);
	for (size_t i = 0; i < h->ndumps; i++)
		page_dump_release(&h->dumps[i]);
	free(h->dumps);
	for (size_t i = 0; i < h->ntls; i++) {
		prof_timeline_release(&h->tls[i]);
		free(h->tl_path[i]);
	}
	free(h->tls);
	free(h->tl_pid);
	free(h->tl_path);
	for (size_t i = 0; i < h->nprocs; i++)
		if (h->has_growth[i])
			prof_growth_release(&h->growth[i]);
	free(h->procs);
	free(h->dump_json);
	free(h->by_pid_digests);
	free(h->by_pid);
	free(h->growth);
	free(h->has_growth);
	free(h->since);
	free(h->cmdline);
}

static int add_pid(long **pids, size_t *n, long pid)
{
	for (size_t i = 0; i < *n; i++)
		if ((*pids)[i] == pid)
			return 0;
	long *p = realloc(*pids, (*n + 1) * sizeof *p);
	if (!p)
		return -1;
	p[(*n)++] = pid;
	*pids = p;
	return 0;
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return x < y ? -1 : x > y;
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static int grow_dumps(struct html_run *h, size_t i)
{
	if (i < h->cap)
		return 0;
	size_t cap = h->cap ? 2 * h->cap : 64;
	struct page_dump *d = realloc(h->dumps, cap * sizeof *d);
	if (!d)
		return -ENOMEM;
	memset(d + h->cap, 0, (cap - h->cap) * sizeof *d);
	h->dumps = d;
	h->cap = cap;
	return 0;
}

/* A dump the live page kept from its last call, the file unchanged:
 * taken back, not read again (prof_series_each's known). */
static bool known_dump(void *ctx, const char *path, size_t i, int64_t *ms)
{
	struct html_run *h = ctx;
	struct stat st;
	if (grow_dumps(h, i) || stat(path, &st))
		return false;
	struct page_dump *d = &h->dumps[i];
	d->dev = st.st_dev;
	d->ino = st.st_ino;
	d->size = st.st_size;
	d->mtime = st.st_mtim;
	if (!h->o->keep_dumps || kept.min_share != h->o->min_share)
		return false;
	for (size_t k = 0; k < kept.n; k++) {
		struct page_dump *e = &kept.e[k];
		if (e->json && e->ino == d->ino && e->dev == d->dev && e->size == d->size &&
		    e->mtime.tv_sec == d->mtime.tv_sec && e->mtime.tv_nsec == d->mtime.tv_nsec &&
		    !strcmp(e->shell.path, path)) {
			*d = *e;
			memset(e, 0, sizeof *e);
			*ms = d->shell.ms;
			h->nread = i + 1 > h->nread ? i + 1 : h->nread;
			return true;
		}
	}
	return false;
}

/* A dump just read (prof_series_each): its part of the page, growth's
 * digest and its shell kept, the rest released by the caller. */
static int take_dump(void *ctx, struct prof_profile *p, size_t i)
{
	struct html_run *h = ctx;
	if (grow_dumps(h, i))
		return -ENOMEM;
	struct page_dump *d = &h->dumps[i];
	size_t len;
	FILE *m = open_memstream(&d->json, &len);
	if (!m)
		return -ENOMEM;
	int rc = render_html_dump(m, p, h->ro);
	if (fclose(m) || rc) {
		free(d->json);
		d->json = NULL;
		return -ENOMEM;
	}
	d->digest = prof_growth_digest(p, PROF_INUSE_SPACE, false);
	/* the shell: what the page says of the dump besides its part */
	d->shell = (struct prof_profile){
		.path = strdup(p->path), .layout = p->layout, .sample = p->sample, .ms = p->ms,
		.unix_ms = p->unix_ms, .agent_bytes = p->agent_bytes, .rss = p->rss,
		.heap_in_use = p->heap_in_use, .pid = p->pid, .shape = p->shape,
		.has_alloc = p->has_alloc, .pool_absent = p->pool_absent,
		.nsamples = p->nsamples };
	memcpy(d->shell.total, p->total, sizeof p->total);
	memcpy(d->shell.total_var, p->total_var, sizeof p->total_var);
	memcpy(d->shell.total_nsampled, p->total_nsampled, sizeof p->total_nsampled);
	h->nread = i + 1 > h->nread ? i + 1 : h->nread;
	return d->digest && d->shell.path ? 0 : -ENOMEM;
}

/* After a build that kept its dumps: they are the live page's now, and
 * what it kept before and did not take back goes. */
static void keep_dumps(struct html_run *h, bool ok)
{
	for (size_t k = 0; k < kept.n; k++)
		page_dump_release(&kept.e[k]);
	free(kept.e);
	kept.e = NULL;
	kept.n = 0;
	if (!ok)
		return;
	kept.e = h->dumps;
	kept.n = h->ndumps;
	kept.min_share = h->o->min_share;
	h->dumps = NULL;
	h->ndumps = 0;
}

/* Reads everything the page shows of dir. Prints the error and returns
 * -1 on failure. */
static int html_load(struct html_run *h, const char *dir)
{
	const struct ctl_page_opts *o = h->o;
	const char *binary_path = o->binary_path;
	const char *err, *err_file;
	char **names = NULL;
	size_t n = 0;
	long *pids = NULL;
	size_t npids = 0;
	int ret = -1;
	int rc = prof_run_load_kinds(&h->run, dir, binary_path, PROF_KINDS_ALL, &err, &err_file);
	if (!rc) {
		h->have_run = true;
		for (size_t i = 0; i < h->run.nbad; i++)
			note(h, h->run.bad[i].file, h->run.bad[i].err);
	} else if (rc != -ENOENT) {
		fail(h, "cannot read '%s': %s", err_file ? err_file : dir, err);
		return -1;
	}
	/* the dumps */
	if ((rc = prof_dir_names(dir, prof_is_dump_of, -1, &names, &n))) {
		fail(h, "cannot open '%s': %s", dir, strerror(-rc));
		goto out;
	}
	if (o->pid > 0) {
		/* one process's numbered dumps, the last max_dumps of them */
		size_t k = 0;
		for (size_t i = 0; i < n; i++) {
			if (numbered_of(names[i], o->pid))
				names[k++] = names[i];
			else
				free(names[i]);
		}
		n = k;
		if (o->max_dumps && n > o->max_dumps) {
			size_t drop = n - o->max_dumps;
			for (size_t i = 0; i < drop; i++)
				free(names[i]);
			memmove(names, names + drop, o->max_dumps * sizeof *names);
			n = o->max_dumps;
		}
	}
	if (n) {
		for (size_t i = 0; i < n; i++) {
			char *path;
			if (asprintf(&path, "%s/%s", dir, names[i]) < 0)
				goto nomem;
			free(names[i]);
			names[i] = path;
		}
		struct prof_load_opts lo = { .binary_path = binary_path, .sym_cache = o->sym_cache };
		char why[4800];
		size_t *order = NULL;
		struct prof_series_visit v = { .known = known_dump, .each = take_dump, .ctx = h };
		if (prof_series_each(names, n, &lo, &v, &order, &h->ndumps, why, sizeof why)) {
			h->ndumps = h->nread;
			fail(h, "%s", why);
			goto out;
		}
		/* time order */
		struct page_dump *d = malloc((h->ndumps + 1) * sizeof *d);
		if (!d) {
			free(order);
			goto nomem;
		}
		for (size_t i = 0; i < h->ndumps; i++)
			d[i] = h->dumps[order[i]];
		free(order);
		free(h->dumps);
		h->dumps = d;
		h->cap = h->ndumps + 1;
	}
	free_names(names, n);
	names = NULL;
	n = 0;
	/* the timelines */
	if ((rc = prof_dir_names(dir, prof_is_timeline, 0, &names, &n))) {
		fail(h, "cannot open '%s': %s", dir, strerror(-rc));
		goto out;
	}
	h->tls = calloc(n + 1, sizeof *h->tls);
	h->tl_pid = calloc(n + 1, sizeof *h->tl_pid);
	h->tl_path = calloc(n + 1, sizeof *h->tl_path);
	if (!h->tls || !h->tl_pid || !h->tl_path)
		goto nomem;
	for (size_t i = 0; i < n; i++) {
		char *path;
		if (asprintf(&path, "%s/%s", dir, names[i]) < 0)
			goto nomem;
		if ((o->pid > 0 && prof_timeline_pid(names[i]) != o->pid) ||
		    prof_timeline_load(&h->tls[h->ntls], path, &err)) {
			if (o->pid <= 0 || prof_timeline_pid(names[i]) == o->pid)
				note(h, path, err);
			free(path);
			continue;
		}
		h->tl_path[h->ntls] = path;
		h->tl_pid[h->ntls++] = prof_timeline_pid(names[i]);
	}
	/* every process any file is of (or the one asked for) */
	if (o->pid > 0 && add_pid(&pids, &npids, o->pid))
		goto nomem;
	for (size_t i = 0; o->pid <= 0 && h->have_run && i < h->run.nprocs; i++)
		if (add_pid(&pids, &npids, h->run.procs[i].raw.pid))
			goto nomem;
	for (size_t i = 0; o->pid <= 0 && i < h->ndumps; i++)
		if (add_pid(&pids, &npids, h->dumps[i].shell.pid))
			goto nomem;
	for (size_t i = 0; o->pid <= 0 && i < h->ntls; i++)
		if (add_pid(&pids, &npids, h->tl_pid[i]))
			goto nomem;
	if (!npids) {
		fail(h, "nothing to show in '%s': no leak report (heaptrail.*.leaks), heap dump "
			  "(*.heap) or timeline", dir);
		goto out;
	}
	qsort(pids, npids, sizeof *pids, cmp_long);
	h->procs = calloc(npids, sizeof *h->procs);
	h->by_pid = calloc(h->ndumps + 1, sizeof *h->by_pid);
	h->dump_json = calloc(h->ndumps + 1, sizeof *h->dump_json);
	h->by_pid_digests = calloc(h->ndumps + 1, sizeof *h->by_pid_digests);
	h->growth = calloc(npids, sizeof *h->growth);
	h->has_growth = calloc(npids, sizeof *h->has_growth);
	h->since = calloc(npids, sizeof *h->since);
	if (!h->procs || !h->by_pid || !h->dump_json || !h->by_pid_digests || !h->growth || !h->has_growth || !h->since)
		goto nomem;
	h->nprocs = npids;
	size_t used = 0;
	for (size_t k = 0; k < npids; k++) {
		struct render_html_proc *pr = &h->procs[k];
		pr->pid = pids[k];
		for (size_t i = 0; h->have_run && i < h->run.nprocs; i++)
			if (h->run.procs[i].raw.pid == pids[k])
				pr->leaks = &h->run.procs[i];
		for (size_t i = 0; i < h->ntls; i++)
			if (h->tl_pid[i] == pids[k])
				pr->timeline = &h->tls[i];
		pr->dumps = &h->by_pid[used];
		pr->dump_json = &h->dump_json[used];
		for (size_t i = 0; i < h->ndumps; i++)
			if (h->dumps[i].shell.pid == pids[k]) {
				h->dump_json[used + pr->ndumps] = h->dumps[i].json;
				h->by_pid_digests[used + pr->ndumps] = h->dumps[i].digest;
				h->by_pid[used + pr->ndumps++] = h->dumps[i].shell;
			}
		used += pr->ndumps;
		/* attached: nothing from before the attach (a dump or the
		 * timeline says) */
		const char *any = pr->ndumps ? pr->dumps[0].path : NULL;
		for (size_t i = 0; !any && i < h->ntls; i++)
			if (h->tl_pid[i] == pids[k])
				any = h->tl_path[i];
		if (any && !prof_attach_label(any, pids[k], h->since[k], sizeof h->since[k]))
			pr->since = h->since[k];
		if (!pr->leaks && o->pid > 0 && pids[k] == o->pid) {
			/* a running process: its command from /proc */
			size_t len = 0;
			h->cmdline = ctl_read_proc(o->pid, "cmdline", &len);
			for (size_t i = 0; h->cmdline && i < len && pr->argc < 64;
			     i += strlen(h->cmdline + i) + 1)
				h->cmd_argv[pr->argc++] = h->cmdline + i;
			pr->argv = h->cmd_argv;
		}
		if (pr->ndumps >= 3) {
			rc = prof_growth_compute_digests(&h->growth[k],
							 &h->by_pid_digests[used - pr->ndumps],
							 pr->ndumps, true);
			if (rc == -ENOMEM)
				goto nomem;
			if (!rc) {
				h->has_growth[k] = true;
				pr->growth = &h->growth[k];
			}
		} else {
			pr->growth_why = !pr->ndumps ? "no heap dumps of this process"
				: pr->ndumps == 1 ? "1 heap dump: growth needs at least three"
				: "2 heap dumps: growth needs at least three";
		}
	}
	ret = 0;
	goto out;
nomem:
	fail(h, "out of memory");
out:
	free_names(names, n);
	free(pids);
	return ret;
}

int cli_html_build(const char *dir, const struct ctl_page_opts *o, char **out, size_t *len,
		   char *why, size_t whycap)
{
	struct render_html_opts ro = {
		.dir = dir, .min_share = o->min_share, .max_records = 500, .max_sites = 200,
		.max_ticks = 2000, .live_url = o->live_url, .live_every_ms = o->live_every_ms };
	struct html_run h = { .o = o, .why = why, .whycap = whycap, .ro = &ro };
	int ret = -1;
	*out = NULL;
	*len = 0;
	if (o->keep_dumps)
		pthread_mutex_lock(&kept.lock);
	if (html_load(&h, dir))
		goto out;
	const char *cmd = NULL;
	for (size_t i = 0; i < h.nprocs && !cmd; i++)
		if (h.procs[i].leaks && h.procs[i].leaks->raw.argc)
			cmd = h.procs[i].leaks->raw.argv[0];
	char title[512];
	if (cmd)
		snprintf(title, sizeof title, "heaptrail: %s", cmd);
	else if (o->pid > 0)
		snprintf(title, sizeof title, "heaptrail: process %ld", o->pid);
	else
		snprintf(title, sizeof title, "heaptrail: %s", dir);
	FILE *m = open_memstream(out, len);
	if (!m) {
		fail(&h, "out of memory");
		goto out;
	}
	ro.title = title;
	int rc = o->data_only ? render_html_data(m, h.procs, h.nprocs, &ro)
			      : render_html(m, h.procs, h.nprocs, &ro);
	if (fclose(m) || rc) {
		fail(&h, "out of memory");
		free(*out);
		*out = NULL;
		goto out;
	}
	ret = 0;
out:
	if (o->keep_dumps) {
		keep_dumps(&h, !ret);
		pthread_mutex_unlock(&kept.lock);
	}
	html_run_release(&h);
	return ret;
}

int cli_html_write(const char *dir, const char *path, const char *binary_path, double min_share)
{
	struct ctl_page_opts o = { .binary_path = binary_path, .min_share = min_share, .pid = -1 };
	char *page;
	size_t len;
	int ret = -1, rc;
	if (cli_html_build(dir, &o, &page, &len, NULL, 0))
		return -1;
	if (!strcmp(path, "-"))
		ret = cli_emit(path, page, len);
	else if ((rc = cli_write_file(path, page, len)))
		cli_error("cannot write '%s': %s", path, strerror(-rc));
	else
		ret = 0;
	free(page);
	return ret;
}
