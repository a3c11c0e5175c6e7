/* profopts.c — options and loading shared by the analyzer's commands. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "render/render.h"

/* On a terminal, long loads say how far they are, on one line that is
 * cleared at the end. */
static void show_progress(void *ctx, const char *path, size_t done, size_t total)
{
	static bool shown;
	struct timespec *start = ctx, now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (done >= total) {
		if (shown)
			fprintf(stderr, "\r\033[K");
		shown = false;
	} else if ((now.tv_sec - start->tv_sec) * 1000 + (now.tv_nsec - start->tv_nsec) / 1000000 >= 500) {
		/* quick loads print nothing */
		fprintf(stderr, "\rheaptrail: reading %s: %zu of %zu stacks", path, done, total);
		shown = true;
	}
	fflush(stderr);
}

int cli_prof_opts_parse(struct cli_prof_opts *o, int argc, char **argv, const char *usage,
			int (*extra)(int argc, char **argv, int *i, void *ctx), void *ctx)
{
	const char *v;
	memset(o, 0, sizeof *o);
	o->value = -1;
	o->args = calloc((size_t)argc + 1, sizeof *o->args);
	if (!o->args) {
		cli_error("out of memory");
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (extra) {
			int r = extra(argc, argv, &i, ctx);
			if (r < 0)
				return 2;
			if (r > 0)
				continue;
		}
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage, stdout);
			return 1;
		} else if (!strcmp(a, "--inuse-space") || !strcmp(a, "--inuse_space")) {
			o->value = PROF_INUSE_SPACE;
		} else if (!strcmp(a, "--inuse-objects") || !strcmp(a, "--inuse_objects")) {
			o->value = PROF_INUSE_OBJECTS;
		} else if (!strcmp(a, "--alloc-space") || !strcmp(a, "--alloc_space")) {
			o->value = PROF_ALLOC_SPACE;
		} else if (!strcmp(a, "--alloc-objects") || !strcmp(a, "--alloc_objects")) {
			o->value = PROF_ALLOC_OBJECTS;
		} else if ((v = cli_opt_value(argc, argv, &i, "--sample-index"))) {
			if ((o->value = prof_value_parse(v)) < 0) {
				cli_error("--sample-index: unknown value '%s'", cli_shown(v));
				return 2;
			}
		} else if (!strcmp(a, "--lines")) {
			o->lines = true;
		} else if (!strcmp(a, "--bytes")) {
			o->bytes = true;
		} else if ((v = cli_opt_value(argc, argv, &i, "--base"))) {
			if (!*v)
				goto missing;
			o->base = v;
		} else if ((v = cli_opt_value(argc, argv, &i, "--focus"))) {
			o->focus = v;
		} else if ((v = cli_opt_value(argc, argv, &i, "--ignore"))) {
			o->ignore = v;
		} else if ((v = cli_opt_value(argc, argv, &i, "--hide"))) {
			o->hide = v;
		} else if ((v = cli_opt_value(argc, argv, &i, "--pool"))) {
			if (!*v)
				goto missing;
			o->load.pool = v;
		} else if ((v = cli_opt_value(argc, argv, &i, "--binary-path"))) {
			o->load.binary_path = v;
		} else if ((v = cli_opt_value(argc, argv, &i, "-o")) ||
			   (v = cli_opt_value(argc, argv, &i, "--output"))) {
			if (!*v)
				goto missing;
			o->output = v;
		} else if ((v = cli_opt_value(argc, argv, &i, "-n")) ||
			   (v = cli_opt_value(argc, argv, &i, "--nodecount"))) {
			if ((o->nodecount = ctl_parse_count(v, 1000000000)) < 1) {
				cli_error("%s: want a positive number, not '%s'", a, cli_shown(v));
				return 2;
			}
		} else if (!strcmp(a, "--no-symbolize")) {
			o->load.no_symbolize = true;
		} else if (a[0] == '-' && a[1]) {
			cli_error("%s: unknown option '%s'", argv[0], cli_shown(a));
			fputs(usage, stderr);
			return 2;
		} else {
			o->args[o->nargs++] = argv[i];
		}
		continue;
missing:
		cli_error("%s: '%s' needs a value", argv[0], cli_shown(a));
		return 2;
	}
	if (!o->load.binary_path)
		o->load.binary_path = getenv("PPROF_BINARY_PATH");
	if (isatty(2)) {
		static struct timespec start;
		clock_gettime(CLOCK_MONOTONIC, &start);
		o->load.progress = show_progress;
		o->load.progress_ctx = &start;
	}
	return 0;
}

void cli_prof_opts_release(struct cli_prof_opts *o)
{
	free(o->args);
	o->args = NULL;
}

int cli_prof_load(const struct cli_prof_opts *o, const char *path, struct prof_profile *p)
{
	const char *err;
	int rc = prof_profile_load(p, path, &o->load, &err);
	if (rc) {
		cli_error("cannot read '%s': %s", path, err);
		return -1;
	}
	if (o->base) {
		struct prof_profile b;
		if (prof_profile_load(&b, o->base, &o->load, &err)) {
			cli_error("cannot read '%s': %s", o->base, err);
			prof_profile_release(p);
			return -1;
		}
		rc = prof_profile_subtract(p, &b);
		prof_profile_release(&b);
		if (rc) {
			cli_error("out of memory");
			prof_profile_release(p);
			return -1;
		}
	}
	if (cli_prof_filter(o, p)) {
		prof_profile_release(p);
		return -1;
	}
	return 0;
}

int cli_prof_filter(const struct cli_prof_opts *o, struct prof_profile *p)
{
	const char *err;
	if (((o->focus || o->ignore) && prof_profile_filter(p, o->focus, o->ignore, &err)) ||
	    (o->hide && prof_profile_hide(p, o->hide, &err))) {
		cli_error("%s", err);
		return -1;
	}
	return 0;
}

void cli_prof_notes(const struct prof_profile *p)
{
	const char *const *w;
	size_t nw = prof_profile_warnings(p, &w);
	for (size_t i = 0; i < nw; i++)
		fprintf(stderr, "heaptrail: note: %s\n", w[i]);
}

size_t cli_prof_pool_text(const struct cli_prof_opts *o, const struct prof_profile *p, char *buf,
			  size_t cap)
{
	if (cap)
		buf[0] = 0;
	if (o->load.pool)
		return 0;
	int64_t bytes = 0;
	const char *one = NULL;
	bool several = false;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct prof_sample *s = &p->samples[i];
		if (!s->pool)
			continue;
		bytes += s->v[PROF_INUSE_SPACE];
		several |= one && strcmp(one, s->pool);
		one = one ? one : s->pool;
	}
	if (!one || bytes <= 0)
		return 0;
	int n = snprintf(buf, cap, "heaptrail: note: %" PRId64 " bytes in use are chunks of %s%s%s: "
			 "the total counts them and the blocks the pools carved them from too, when "
			 "those came from malloc; --pool NAME shows one pool's chunks alone\n", bytes,
			 several ? "memory pools (" : "the memory pool '", cli_shown(one),
			 several ? " and others)" : "'");
	return n > 0 ? (size_t)n : 0;
}

void cli_prof_pool_note(const struct cli_prof_opts *o, const struct prof_profile *p)
{
	char buf[1024];
	if (cli_prof_pool_text(o, p, buf, sizeof buf))
		fputs(buf, stderr);
}

/* The allocator's count includes its chunks' headers and rounding: up
 * to 24 bytes a block in glibc, more for blocks of a few bytes; twice
 * the dump plus that, and 8 MiB at least, is memory not seen. */
void cli_prof_unseen_note(const struct cli_prof_opts *o, const struct prof_profile *p)
{
	if (o->load.pool || o->focus || o->ignore || o->hide || o->base || p->heap_in_use <= 0)
		return;
	int64_t seen = p->total[PROF_INUSE_SPACE], blocks = p->total[PROF_INUSE_OBJECTS];
	int64_t unseen = p->heap_in_use - seen;
	if (unseen < (8ll << 20) || unseen <= seen + 24 * blocks)
		return;
	char a[48], b[48], c[48];
	fprintf(stderr, "heaptrail: note: the allocator counts %s in use, this dump holds %s: "
		"heaptrail does not see %s of it (allocated before an attach, through a pointer "
		"to malloc saved before one with --slots-only, or by an allocator it does not "
		"hook); 'heaptrail growth' over the dumps says whether that part grows\n",
		render_bytes(a, sizeof a, p->heap_in_use), render_bytes(b, sizeof b, seen),
		render_bytes(c, sizeof c, unseen));
}

int cli_emit(const char *path, const char *data, size_t len)
{
	if (!strcmp(path, "-")) {
		if (fwrite(data, 1, len, stdout) != len || fflush(stdout)) {
			cli_error("cannot write standard output: %s", strerror(errno));
			return -1;
		}
		return 0;
	}
	int rc = cli_write_file(path, data, len);
	if (rc) {
		cli_error("cannot write '%s': %s", path, strerror(-rc));
		return -1;
	}
	return 0;
}
