/* report.c — leak files to the symbolized, sorted model in report.h. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analyze/report.h"
#include "analyze/unbias.h"
#include "format/vocab.h"

const char *prof_alloc_fn_name(int fn)
{
	if (fn == FMT_FN_NEW)
		return "operator new";
	if (fn == FMT_FN_NEW_ARRAY)
		return "operator new[]";
	if (fn == FMT_FN_DELETE)
		return "operator delete";
	if (fn == FMT_FN_DELETE_ARRAY)
		return "operator delete[]";
	return fn >= 0 && fn < FMT_FN_COUNT ? fmt_alloc_fn_names[fn] : "?";
}

/* Frames in heaptrail's own agent are not the user's business. */
static bool is_own_frame(const struct sym_frame *f)
{
	const char *base = f->module ? strrchr(f->module, '/') : NULL;
	base = base ? base + 1 : f->module;
	return base && !strncmp(base, "libheaptrail", 12);
}

static int cmp_record(const void *a, const void *b)
{
	const struct prof_record *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	if (x->blocks != y->blocks)
		return x->blocks < y->blocks ? 1 : -1;
	return 0;
}

void prof_unsample(uint64_t sample, uint64_t *bytes, uint64_t *blocks)
{
	if (sample <= 1 || !*blocks)
		return;
	double scale = prof_unbias_scale(sample, *blocks, *bytes);
	*bytes = (uint64_t)((double)*bytes * scale + 0.5);
	*blocks = (uint64_t)((double)*blocks * scale + 0.5);
}

/* Orders records by what a reader sees of them: kind, allocator, frames. */
static int cmp_shown(const void *a, const void *b)
{
	const struct prof_record *x = a, *y = b;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->alloc_fn != y->alloc_fn)
		return x->alloc_fn < y->alloc_fn ? -1 : 1;
	if (x->pool_id != y->pool_id)
		return x->pool_id < y->pool_id ? -1 : 1;
	if (x->nframes != y->nframes)
		return x->nframes < y->nframes ? -1 : 1;
	for (size_t i = 0; i < x->nframes; i++)
		if (x->frames[i].pc != y->frames[i].pc)
			return x->frames[i].pc < y->frames[i].pc ? -1 : 1;
	return 0;
}

/* Stacks that differ only in the agent's own frames (a signal handler's
 * allocation carries the frames of the agent code it interrupted) show
 * the same: one record each, as valgrind merges blocks by stack. */
static void merge_shown(struct prof_process *p)
{
	if (p->nrecords < 2)
		return;
	qsort(p->records, p->nrecords, sizeof *p->records, cmp_shown);
	size_t out = 0;
	for (size_t i = 1; i < p->nrecords; i++) {
		struct prof_record *a = &p->records[out], *b = &p->records[i];
		if (cmp_shown(a, b)) {
			p->records[++out] = *b;
			continue;
		}
		a->bytes += b->bytes;
		a->blocks += b->blocks;
		a->nsampled += b->nsampled;
		a->var_bytes += b->var_bytes;
		a->has_increase |= b->has_increase;
		a->inc_bytes += b->inc_bytes;
		a->inc_blocks += b->inc_blocks;
		free(b->frames);
	}
	p->nrecords = out + 1;
}

/* The process's symbolizer, made on first need: opening every module's
 * file costs time that a run whose records are not printed saves. */
static struct symbolizer *process_sym(struct prof_process *p, const char *binary_path)
{
	struct fmt_leaks *l = &p->raw;
	if (p->sym)
		return p->sym;
	struct sym_module *mods = calloc(l->nmodules + 1, sizeof *mods);
	if (!mods)
		return NULL;
	for (size_t i = 0; i < l->nmodules; i++)
		mods[i] = (struct sym_module){ l->modules[i].path, l->modules[i].build_id,
					       l->modules[i].base, l->modules[i].lo,
					       l->modules[i].hi };
	/* a process in a container named the files under its own root */
	char *bpath = sym_process_path(l->pid, binary_path);
	p->sym = bpath ? sym_new(mods, l->nmodules, bpath) : NULL;
	free(bpath);
	free(mods);
	return p->sym;
}

/* sym_kinds: records of these kinds (PROF_KIND_BIT mask) get source
 * frames; the others keep raw pcs (function "??"). */
/* s's frames, symbolized with sym (NULL: each frame its pc), the
 * agent's own left out, into *out (malloc'd) and *n. 0 or -ENOMEM. */
static int stack_frames(struct symbolizer *sym, const struct fmt_stack *s,
			struct sym_frame **out, size_t *nout)
{
	size_t cap = s->depth + 4, n = 0;
	struct sym_frame *frames = malloc(cap * sizeof *frames);
	if (!frames)
		return -ENOMEM;
	for (size_t d = 0; d < s->depth; d++) {
		const struct sym_frame *fr;
		struct sym_frame raw = { .pc = s->pcs[d], .function = "??" };
		size_t k = 1;
		if (sym)
			k = sym_resolve(sym, s->pcs[d], &fr);
		else
			fr = &raw;
		for (size_t j = 0; j < k; j++) {
			if (is_own_frame(&fr[j]))
				continue;
			if (n == cap) {
				struct sym_frame *nf = realloc(frames, 2 * cap * sizeof *nf);
				if (!nf) {
					free(frames);
					return -ENOMEM;
				}
				frames = nf;
				cap *= 2;
			}
			frames[n++] = fr[j];
		}
	}
	*out = frames;
	*nout = n;
	return 0;
}

/* The heap errors of p's leak file, symbolized (sym_kinds: when it asks
 * for symbols at all). */
static int build_errors(struct prof_process *p, const char *binary_path, unsigned sym_kinds)
{
	struct fmt_leaks *l = &p->raw;
	if (!l->nerrors)
		return 0;
	p->errors = calloc(l->nerrors, sizeof *p->errors);
	if (!p->errors)
		return -ENOMEM;
	struct symbolizer *sym = NULL;
	if (sym_kinds && !(sym = process_sym(p, binary_path)))
		return -ENOMEM;
	for (size_t i = 0; i < l->nerrors; i++) {
		const struct fmt_error *e = &l->errors[i];
		struct prof_heap_error *out = &p->errors[p->nerrors++];
		out->kind = e->kind;
		out->count = e->count;
		out->size = e->size;
		out->offset = e->offset;
		out->where = e->where;
		out->given = e->given;
		out->align = e->align;
		out->alloc_fn = e->alloc_stack == SIZE_MAX ? -1 : l->stacks[e->alloc_stack].fn;
		out->free_fn = e->free_stack == SIZE_MAX ? -1 : l->stacks[e->free_stack].fn;
		out->prev_fn = e->prev_stack == SIZE_MAX ? -1 : l->stacks[e->prev_stack].fn;
		if ((e->alloc_stack != SIZE_MAX &&
		     stack_frames(sym, &l->stacks[e->alloc_stack], &out->alloc_frames, &out->nalloc)) ||
		    (e->prev_stack != SIZE_MAX &&
		     stack_frames(sym, &l->stacks[e->prev_stack], &out->prev_frames, &out->nprev)) ||
		    (e->free_stack != SIZE_MAX &&
		     stack_frames(sym, &l->stacks[e->free_stack], &out->free_frames, &out->nfree)))
			return -ENOMEM;
		p->error_count += e->count;
	}
	p->error_contexts = p->nerrors;
	p->error_count += l->errors_dropped;
	return 0;
}

static int build_process(struct prof_process *p, const char *binary_path, unsigned sym_kinds)
{
	struct fmt_leaks *l = &p->raw;
	p->records = calloc(l->nrecords + 1, sizeof *p->records);
	if (!p->records)
		return -ENOMEM;
	for (size_t i = 0; i < l->nrecords; i++) {
		const struct fmt_record *r = &l->records[i];
		const struct fmt_stack *s = &l->stacks[r->stack];
		struct prof_record *out = &p->records[p->nrecords++];
		out->kind = r->kind;
		out->has_increase = r->has_increase;
		out->inc_bytes = r->inc_bytes;
		out->inc_blocks = r->inc_blocks;
		out->bytes = r->bytes;
		out->blocks = r->blocks;
		if (l->sample > 1) {
			double var_blocks;
			prof_unbias_var(l->sample, r->blocks, r->bytes, &var_blocks, &out->var_bytes);
			out->nsampled = r->blocks;
			if (r->kind == FMT_KIND_IN_USE) {
				p->in_use_var += out->var_bytes;
				p->in_use_nsampled += r->blocks;
			}
		}
		prof_unsample(l->sample, &out->bytes, &out->blocks);
		out->alloc_fn = s->fn;
		out->pool_id = s->pool;
		struct symbolizer *sym = NULL;
		if (sym_kinds & PROF_KIND_BIT(r->kind)) {
			if (!(sym = process_sym(p, binary_path)))
				return -ENOMEM;
		}
		if (stack_frames(sym, s, &out->frames, &out->nframes))
			return -ENOMEM;
		p->kind_bytes[r->kind] += out->bytes;
		p->kind_blocks[r->kind] += out->blocks;
	}
	if (l->sample > 1) {
		/* the header's totals are raw samples too */
		l->in_use_bytes = p->kind_bytes[FMT_KIND_IN_USE];
		l->in_use_blocks = p->kind_blocks[FMT_KIND_IN_USE];
	}
	if (l->has_summary)
		for (int k = 0; k < FMT_KIND_COUNT; k++) {
			p->kind_bytes[k] = l->kind_bytes[k];
			p->kind_blocks[k] = l->kind_blocks[k];
		}
	merge_shown(p);
	qsort(p->records, p->nrecords, sizeof *p->records, cmp_record);
	return 0;
}

const char *prof_pool_name(const struct prof_process *p, uint64_t id)
{
	static char buf[32];
	const struct fmt_pool *pl = fmt_leaks_pool(&p->raw, id);
	if (pl && *pl->name)
		return pl->name;
	snprintf(buf, sizeof buf, "pool#%llu", (unsigned long long)id);
	return buf;
}

bool prof_pool_under(const struct prof_process *p, uint64_t id, const char *name)
{
	/* parents come before children (ids increase), so a walk up ends;
	 * the bound guards against a file whose parents form a loop */
	for (size_t steps = 0; id && steps <= p->raw.npools; steps++) {
		if (!strcmp(prof_pool_name(p, id), name))
			return true;
		const struct fmt_pool *pl = fmt_leaks_pool(&p->raw, id);
		id = pl ? pl->parent : 0;
	}
	return false;
}

struct prof_pool_node *prof_pool_tree(const struct prof_process *p, size_t *n)
{
	const struct fmt_leaks *l = &p->raw;
	size_t np = l->npools, nout = 0, top = 0;
	size_t *first = NULL, *kids = NULL, *fill = NULL, *todo = NULL;
	long *parent = NULL, *pos = NULL;
	int *tdepth = NULL;
	struct prof_pool_node *out = NULL;
	*n = 0;
	if (!np)
		return NULL;
	first = calloc(np + 2, sizeof *first);  /* children of i: kids[first[i]..first[i+1]) */
	kids = calloc(np + 1, sizeof *kids);
	fill = calloc(np + 1, sizeof *fill);
	todo = calloc(np + 1, sizeof *todo);
	tdepth = calloc(np + 1, sizeof *tdepth);
	parent = calloc(np + 1, sizeof *parent);
	pos = calloc(np + 1, sizeof *pos);
	out = calloc(np + 1, sizeof *out);
	if (!first || !kids || !fill || !todo || !tdepth || !parent || !pos || !out) {
		free(out);
		out = NULL;
		goto out;
	}
	for (size_t i = 0; i < np; i++) {
		const struct fmt_pool *pp = fmt_leaks_pool(l, l->pools[i].parent);
		parent[i] = pp && pp != &l->pools[i] ? pp - l->pools : -1;
		if (parent[i] >= 0)
			first[parent[i] + 1]++;
		pos[i] = -1;
	}
	for (size_t i = 0; i < np; i++)
		first[i + 1] += first[i];
	for (size_t i = 0; i < np; i++)
		if (parent[i] >= 0)
			kids[first[parent[i]] + fill[parent[i]]++] = i;
	/* the roots, pushed in reverse so that they come out in id order */
	for (size_t i = np; i-- > 0;) {
		bool root = parent[i] < 0;
		if (p->pool_filter)
			root = !strcmp(prof_pool_name(p, l->pools[i].id), p->pool_filter) &&
			       !(parent[i] >= 0 &&
				 prof_pool_under(p, l->pools[parent[i]].id, p->pool_filter));
		if (root) {
			tdepth[top] = 0;
			todo[top++] = i;
		}
	}
	while (top) {
		size_t i = todo[--top];
		int d = tdepth[top];
		if (pos[i] >= 0)
			continue;  /* a parent loop in a bad file */
		pos[i] = (long)nout;
		out[nout++] = (struct prof_pool_node){ .pool = &l->pools[i], .depth = d,
						      .tree_bytes = l->pools[i].bytes,
						      .tree_blocks = l->pools[i].blocks };
		for (size_t k = first[i + 1]; k-- > first[i];)
			if (top < np && pos[kids[k]] < 0) {
				tdepth[top] = d + 1;
				todo[top++] = kids[k];
			}
	}
	for (size_t i = 0; i < p->nrecords; i++) {
		const struct prof_record *r = &p->records[i];
		const struct fmt_pool *pl = r->pool_id ? fmt_leaks_pool(l, r->pool_id) : NULL;
		long at = pl ? pos[pl - l->pools] : -1;
		if (at < 0 || r->suppressed_by ||
		    (r->kind != FMT_KIND_DEFINITELY && r->kind != FMT_KIND_INDIRECTLY))
			continue;
		out[at].lost_bytes += r->bytes;
		out[at].lost_blocks += r->blocks;
	}
	/* subtree totals: every node comes after its parent */
	for (size_t j = nout; j-- > 0;) {
		long pi = parent[out[j].pool - l->pools];
		if (pi >= 0 && pos[pi] >= 0 && out[j].depth > 0) {
			out[pos[pi]].tree_bytes += out[j].tree_bytes;
			out[pos[pi]].tree_blocks += out[j].tree_blocks;
		}
	}
	*n = nout;
out:
	free(first);
	free(kids);
	free(fill);
	free(todo);
	free(tdepth);
	free(parent);
	free(pos);
	return out;
}

size_t prof_process_filter_pool(struct prof_process *p, const char *name)
{
	size_t out = 0;
	for (int k = 0; k < FMT_KIND_COUNT; k++)
		p->kind_bytes[k] = p->kind_blocks[k] = 0;
	for (size_t i = 0; i < p->nrecords; i++) {
		struct prof_record *r = &p->records[i];
		if (!prof_pool_under(p, r->pool_id, name)) {
			free(r->frames);
			continue;
		}
		p->kind_bytes[r->kind] += r->bytes;
		p->kind_blocks[r->kind] += r->blocks;
		p->records[out++] = *r;
	}
	p->nrecords = out;
	p->pool_filter = name;
	return out;
}

static void release_process(struct prof_process *p)
{
	for (size_t i = 0; i < p->nrecords; i++)
		free(p->records[i].frames);
	free(p->records);
	for (size_t i = 0; i < p->nerrors; i++) {
		free(p->errors[i].alloc_frames);
		free(p->errors[i].free_frames);
		free(p->errors[i].prev_frames);
	}
	free(p->errors);
	if (p->sym)
		sym_free(p->sym);
	fmt_leaks_release(&p->raw);
	free((char *)p->file);
}

static int cmp_proc(const void *a, const void *b)
{
	const struct prof_process *x = a, *y = b;
	return (x->raw.pid > y->raw.pid) - (x->raw.pid < y->raw.pid);
}

static int is_leak_file(const char *name)
{
	size_t n = strlen(name);
	/* the exit reports only: a leak check's file is read by name */
	return !strncmp(name, FMT_FILE_PREFIX ".", FMT_LEN(FMT_FILE_PREFIX ".")) && n > 16 &&
	       !strcmp(name + n - FMT_LEN(FMT_LEAKS_SUFFIX), FMT_LEAKS_SUFFIX) &&
	       !strstr(name, "." FMT_LEAKS_CHECK);
}

/* The list of files to read: path itself, or the leak files in it. */
static int list_files(const char *path, char ***out, size_t *n, const char **err)
{
	struct stat st;
	*out = NULL;
	*n = 0;
	if (stat(path, &st)) {
		*err = strerror(errno);
		return -errno;
	}
	if (!S_ISDIR(st.st_mode)) {
		*out = malloc(sizeof **out);
		if (!*out || !((*out)[0] = strdup(path)))
			return -ENOMEM;
		*n = 1;
		return 0;
	}
	DIR *d = opendir(path);
	if (!d) {
		*err = strerror(errno);
		return -errno;
	}
	size_t cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!is_leak_file(e->d_name))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 8;
			char **nv = realloc(*out, cap * sizeof *nv);
			if (!nv)
				break;
			*out = nv;
		}
		size_t len = strlen(path) + strlen(e->d_name) + 2;
		char *full = malloc(len);
		if (!full)
			break;
		snprintf(full, len, "%s/%s", path, e->d_name);
		(*out)[(*n)++] = full;
	}
	closedir(d);
	if (*n == 0) {
		*err = "no heaptrail report files (heaptrail.PID.leaks) in directory";
		free(*out);
		*out = NULL;
		return -ENOENT;
	}
	return 0;
}

static int load(struct prof_run *run, const char *path, const char *binary_path,
		unsigned sym_kinds, const char *run_id, const char **err, const char **err_file)
{
	static char *failed_file;
	char **files;
	size_t nfiles;
	int ret;

	memset(run, 0, sizeof *run);
	*err_file = path;
	ret = list_files(path, &files, &nfiles, err);
	if (ret)
		return ret;
	struct stat st;
	bool dir = !stat(path, &st) && S_ISDIR(st.st_mode);
	run->procs = calloc(nfiles, sizeof *run->procs);
	run->bad = dir ? calloc(nfiles, sizeof *run->bad) : NULL;
	if (!run->procs || (dir && !run->bad)) {
		*err = "out of memory";
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < nfiles; i++) {
		struct prof_process *p = &run->procs[run->nprocs];
		ret = fmt_leaks_read(files[i], &p->raw, err);
		if (ret && ret != -ENOMEM && dir) {
			/* one bad file does not hide the others' reports */
			run->bad[run->nbad].file = files[i];
			run->bad[run->nbad++].err = *err;
			files[i] = NULL;
			ret = 0;
			continue;
		}
		if (ret) {
			free(failed_file);
			failed_file = strdup(files[i]);
			*err_file = failed_file ? failed_file : path;
			goto out;
		}
		if (run_id && strcmp(p->raw.run, run_id)) {
			/* another run's, written into the same directory */
			fmt_leaks_release(&p->raw);
			memset(p, 0, sizeof *p);
			continue;
		}
		p->file = files[i];
		files[i] = NULL;
		run->nprocs++;
		ret = build_process(p, binary_path, sym_kinds);
		if (!ret)
			ret = build_errors(p, binary_path, sym_kinds);
		if (ret) {
			*err = "out of memory";
			goto out;
		}
	}
	if (run_id && !run->nprocs && !run->nbad) {
		*err = "no report of this run in directory";
		ret = -ENOENT;
		goto out;
	}
	qsort(run->procs, run->nprocs, sizeof *run->procs, cmp_proc);
out:
	for (size_t i = 0; i < nfiles; i++)
		free(files[i]);
	free(files);
	if (ret)
		prof_run_release(run);
	return ret;
}

int prof_run_load(struct prof_run *run, const char *path, const char *binary_path,
		  const char **err, const char **err_file)
{
	return load(run, path, binary_path, PROF_KINDS_ALL, NULL, err, err_file);
}

int prof_run_load_kinds(struct prof_run *run, const char *path, const char *binary_path,
			unsigned sym_kinds, const char **err, const char **err_file)
{
	return load(run, path, binary_path, sym_kinds, NULL, err, err_file);
}

int prof_run_load_of(struct prof_run *run, const char *path, const char *binary_path,
		     unsigned sym_kinds, const char *run_id, const char **err,
		     const char **err_file)
{
	return load(run, path, binary_path, sym_kinds, run_id, err, err_file);
}

int prof_run_load_raw(struct prof_run *run, const char *path, const char **err,
		      const char **err_file)
{
	return load(run, path, NULL, 0, NULL, err, err_file);
}

void prof_run_release(struct prof_run *run)
{
	for (size_t i = 0; i < run->nprocs; i++)
		release_process(&run->procs[i]);
	free(run->procs);
	for (size_t i = 0; i < run->nbad; i++)
		free(run->bad[i].file);
	free(run->bad);
	memset(run, 0, sizeof *run);
}

int prof_kinds_parse(const char *s, unsigned *mask)
{
	static const struct { const char *word; int kind; } words[] = {
		{ "definite", FMT_KIND_DEFINITELY }, { "indirect", FMT_KIND_INDIRECTLY },
		{ "possible", FMT_KIND_POSSIBLY }, { "reachable", FMT_KIND_REACHABLE },
	};
	unsigned m = PROF_KIND_BIT(FMT_KIND_IN_USE);
	if (!strcmp(s, "all")) {
		*mask = PROF_KINDS_ALL;
		return 0;
	}
	if (!strcmp(s, "none")) {
		*mask = m;
		return 0;
	}
	while (*s) {
		size_t n = strcspn(s, ",");
		bool found = false;
		for (size_t i = 0; i < sizeof words / sizeof *words; i++)
			if (strlen(words[i].word) == n && !strncmp(s, words[i].word, n)) {
				m |= PROF_KIND_BIT(words[i].kind);
				found = true;
			}
		if (!found)
			return -1;
		s += n + (s[n] == ',');
	}
	*mask = m;
	return 0;
}

size_t prof_run_errors(const struct prof_run *run, unsigned mask)
{
	size_t n = 0;
	for (size_t i = 0; i < run->nprocs; i++) {
		n += run->procs[i].error_count;  /* whatever the leak kinds */
		for (size_t j = 0; j < run->procs[i].nrecords; j++) {
			const struct prof_record *r = &run->procs[i].records[j];
			if (!r->suppressed_by && (mask & PROF_KIND_BIT(r->kind)))
				n++;
		}
	}
	return n;
}
