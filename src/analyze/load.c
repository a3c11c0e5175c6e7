/*
 * load.c — loading a heap dump into the symbolized model of profile.h:
 * mappings from the maps section (load bias and build-id read from each
 * file), one symbolizer session per dump (every pc resolved once), frames
 * and strings interned, allocator frames dropped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/load.h"
#include "analyze/profile_build.h"
#include "analyze/unbias.h"

/* ---------- allocator frames ---------- */

static const char *const alloc_names[] = {
	"malloc", "calloc", "realloc", "reallocarray", "free", "cfree", "memalign",
	"posix_memalign", "__posix_memalign", "aligned_alloc", "valloc", "pvalloc",
	"do_memalign", "mallocx", "rallocx", "xallocx", "sallocx", "dallocx",
	"sdallocx", "nallocx", "__libc_malloc", "__libc_calloc", "__libc_realloc",
	"__libc_memalign", "__malloc", "strdup", "strndup",
};

static bool is_alloc_module(const char *base)
{
	return base && (!strncmp(base, "libjemalloc", 11) || !strncmp(base, "libtcmalloc", 11) ||
			!strncmp(base, "libheaptrail", 12));
}

static bool is_alloc_function(const char *fn)
{
	if (!strncmp(fn, "operator new", 12) || !strncmp(fn, "operator delete", 15) ||
	    !strncmp(fn, "tcmalloc::", 10) || !strncmp(fn, "tc_", 3) || !strncmp(fn, "je_", 3) ||
	    !strncmp(fn, "heaptrail_", 10) || !strncmp(fn, "agent_", 6))
		return true;
	for (size_t i = 0; i < sizeof alloc_names / sizeof alloc_names[0]; i++)
		if (!strcmp(fn, alloc_names[i]))
			return true;
	return false;
}

/* ---------- loading ---------- */

static const char *base_name(const char *path)
{
	const char *b = path ? strrchr(path, '/') : NULL;
	return b ? b + 1 : path;
}

/* A module's name in frames: its file's base name, but the executable's
 * by the name it was started by (profile.h: exe_shown). */
static const char *module_name(const struct prof_profile *p, const char *path)
{
	return p->exe_real && path && !strcmp(path, p->exe_real) ? p->exe_shown : base_name(path);
}

struct pcmap {
	uint64_t *keys;
	uint32_t *vals;
	size_t cap;
};

static int pcmap_init(struct pcmap *m, size_t n)
{
	m->cap = 1024;
	while (m->cap < 2 * n + 2)
		m->cap *= 2;
	m->keys = malloc(m->cap * sizeof *m->keys);
	m->vals = malloc(m->cap * sizeof *m->vals);
	if (!m->keys || !m->vals)
		return -ENOMEM;
	memset(m->vals, 0xff, m->cap * sizeof *m->vals);
	return 0;
}

static uint32_t *pcmap_slot(struct pcmap *m, uint64_t pc)
{
	size_t j = prof_hash_mix(pc) & (m->cap - 1);
	while (m->vals[j] != UINT32_MAX && m->keys[j] != pc)
		j = (j + 1) & (m->cap - 1);
	m->keys[j] = pc;
	return &m->vals[j];
}

static void pcmap_free(struct pcmap *m)
{
	free(m->keys);
	free(m->vals);
}

static int build_mappings(struct prof_profile *p, const struct fmt_heap_dump *d,
			  const struct prof_load_opts *o, struct sym_module **mods_out,
			  size_t *nmods_out, bool *oom)
{
	p->maps = calloc(d->nmaps + 1, sizeof *p->maps);
	struct sym_module *mods = calloc(d->nmaps + 1, sizeof *mods);
	if (!p->maps || !mods) {
		free(mods);
		return -ENOMEM;
	}
	size_t nmods = 0;
	for (size_t i = 0; i < d->nmaps; i++) {
		const struct fmt_heap_map *m = &d->maps[i];
		const char *bid = NULL;
		for (size_t k = 0; k < d->nbuildids; k++)
			if (!strcmp(d->buildids[k].path, m->path))
				bid = d->buildids[k].hex;
		/* every mapping of one file shares one module, found by path */
		size_t k;
		for (k = 0; k < nmods; k++)
			if (!strcmp(mods[k].path, m->path))
				break;
		char hex[129] = "";
		if (k == nmods) {
			char *file = sym_locate(m->path, o->binary_path);
			if (!file)
				goto nomem;
			uint64_t bias = 0;
			int rc = sym_elf_info(file, m->start, m->end, m->offset, &bias, hex, sizeof hex);
			free(file);
			if (rc == -ENOEXEC && !hex[0])
				goto keep_map; /* not an ELF file (a font, a locale archive) */
			if (rc == -ENOENT && !m->exec && !bid)
				goto keep_map; /* gone and holds no code: a deleted file's or
						* a SysV shared memory segment's data */
			if (rc && rc != -ENOEXEC)
				bias = m->start - m->offset; /* file missing: a guess for the range */
			mods[nmods] = (struct sym_module){
				.path = prof_build_intern(p, m->path, oom),
				.build_id = prof_build_intern(p, bid ? bid : (hex[0] ? hex : NULL), oom),
				.base = bias, .lo = m->start, .hi = m->end,
			};
			if (*oom)
				goto nomem;
			nmods++;
		} else {
			if (m->start < mods[k].lo)
				mods[k].lo = m->start;
			if (m->end > mods[k].hi)
				mods[k].hi = m->end;
		}
	keep_map:;
		/* k is the file's module (just added, or found), or nmods: none */
		const char *build_id = k < nmods ? mods[k].build_id : NULL;
		p->maps[p->nmaps++] = (struct prof_mapping){
			.start = m->start, .limit = m->end, .offset = m->offset,
			.file = prof_build_intern(p, m->path, oom), .build_id = build_id,
			.exec = m->exec,
		};
		if (*oom)
			goto nomem;
	}
	*mods_out = mods;
	*nmods_out = nmods;
	return 0;
nomem:
	free(mods);
	return -ENOMEM;
}

static int mapping_of(const struct prof_profile *p, uint64_t pc)
{
	int best = -1;
	for (size_t i = 0; i < p->nmaps; i++)
		if (pc >= p->maps[i].start && pc < p->maps[i].limit) {
			best = (int)i;
			if (p->maps[i].exec)
				break;
		}
	return best;
}

/* The location for pc: its frames symbolized and interned. */
static int make_location(struct prof_profile *p, struct symbolizer *sym, uint64_t pc,
			 struct prof_location *loc, bool *oom)
{
	loc->pc = pc;
	loc->mapping = mapping_of(p, pc);
	const struct sym_frame *sf = NULL;
	size_t n = sym ? sym_resolve(sym, pc, &sf) : 0;
	struct sym_frame fallback = { .pc = pc, .function = "??" };
	if (!n) {
		sf = &fallback;
		n = 1;
	}
	loc->frames = prof_build_ids(p, n);
	if (!loc->frames)
		return -ENOMEM;
	loc->nframes = (uint32_t)n;
	for (size_t i = 0; i < n; i++) {
		char name[96];
		struct prof_frame f = { 0 };
		const char *modpath = sf[i].module;
		if (!modpath && loc->mapping >= 0)
			modpath = p->maps[loc->mapping].file;
		f.module = prof_build_intern(p, module_name(p, modpath), oom);
		f.symbolized = strcmp(sf[i].function, "??") != 0;
		if (f.symbolized) {
			f.function = prof_build_intern(p, sf[i].function, oom);
			f.file = prof_build_intern(p, sf[i].file, oom);
			f.line = sf[i].line;
		} else {
			/* stable across runs (ASLR): module+offset when the module is known */
			if (loc->mapping >= 0) {
				const struct prof_mapping *m = &p->maps[loc->mapping];
				snprintf(name, sizeof name, "%s+0x%llx", module_name(p, m->file),
					 (unsigned long long)(pc - m->start + m->offset));
			} else {
				snprintf(name, sizeof name, "0x%llx", (unsigned long long)pc);
			}
			f.function = prof_build_intern(p, name, oom);
		}
		if (*oom)
			return -ENOMEM;
		int64_t id = prof_build_frame(p, &f);
		if (id < 0)
			return -ENOMEM;
		loc->frames[i] = (uint32_t)id;
	}
	return 0;
}

static bool location_is_alloc(const struct prof_profile *p, const struct prof_location *l)
{
	const struct prof_frame *outer = &p->frames[l->frames[l->nframes - 1]];
	if (is_alloc_module(outer->module))
		return true;
	return outer->symbolized && is_alloc_function(outer->function);
}

/* The agent's own frame further down a stack: the trampoline of an
 * allocator function hooked by name (agent/fnhook.c), between the
 * function and its caller. */
static bool location_is_agent(const struct prof_profile *p, const struct prof_location *l)
{
	const char *base = base_name(p->frames[l->frames[0]].module);
	return base && !strncmp(base, "libheaptrail", 12);
}

static void collect_warnings(struct prof_profile *p, struct symbolizer *sym)
{
	const char *const *w;
	size_t n = sym ? sym_warnings(sym, &w) : 0;
	for (size_t i = 0; i < n; i++)
		if (prof_build_warning(p, w[i]))
			return; /* out of memory: the notes are not essential */
}

struct prof_sym_cache {
	struct symbolizer *sym;
	uint64_t key;             /* modules_key of the modules it was made for */
};

/* What identifies a symbolizer session: every module's path, build-id,
 * bias and range. */
static uint64_t modules_key(const struct sym_module *m, size_t n)
{
	uint64_t h = prof_hash_mix(n + 1);
	for (size_t i = 0; i < n; i++) {
		h = prof_hash_mix(h ^ prof_hash_str(m[i].path ? m[i].path : ""));
		h = prof_hash_mix(h ^ prof_hash_str(m[i].build_id ? m[i].build_id : ""));
		h = prof_hash_mix(h ^ m[i].base);
		h = prof_hash_mix(h ^ m[i].lo);
		h = prof_hash_mix(h ^ m[i].hi);
	}
	return h;
}

/* 0 when some stack of d is pool's; else -EINVAL, *err naming (some of)
 * the pools d has: --pool with a name the dump does not hold shows
 * nothing, as if that pool held nothing, and says why. */
static int pool_named(const struct fmt_heap_dump *d, const char *pool, char *errbuf,
		      size_t cap, const char **err)
{
	const char *names[8];
	size_t nnames = 0;
	for (size_t i = 0; i < d->nstacks; i++) {
		const char *name = d->stacks[i].pool_name;
		if (!name)
			continue;
		if (!strcmp(name, pool))
			return 0;
		size_t j = 0;
		while (j < nnames && strcmp(names[j], name))
			j++;
		if (j == nnames && nnames < sizeof names / sizeof names[0])
			names[nnames++] = name;
	}
	size_t n = (size_t)snprintf(errbuf, cap, "no pool named '%.100s' in the dump (%s",
				    pool, nnames ? "its pools: " : "it has none");
	for (size_t j = 0; j < nnames && n < cap; j++)
		n += (size_t)snprintf(errbuf + n, cap - n, "%s%.40s", j ? ", " : "", names[j]);
	if (n < cap)
		snprintf(errbuf + n, cap - n, ")");
	*err = errbuf;
	return -EINVAL;
}

int prof_profile_load(struct prof_profile *p, const char *path,
		      const struct prof_load_opts *o, const char **err)
{
	static const struct prof_load_opts defaults;
	struct fmt_heap_dump d;
	struct symbolizer *sym = NULL;
	struct sym_module *mods = NULL;
	size_t nmods = 0;
	struct pcmap pcs = { 0 };
	uint32_t *scratch = NULL;
	bool oom = false;
	int rc;

	if (!o)
		o = &defaults;
	memset(p, 0, sizeof *p);
	rc = fmt_heap_read_path(&d, path, err);
	if (rc) {
		if (*err == d.error) {  /* d is this call's: the words go to p */
			snprintf(p->error, sizeof p->error, "%s", d.error);
			*err = p->error;
		}
		return rc;
	}
	/* a process in a container named the files under its own root */
	struct prof_load_opts in_root = *o;
	char *bpath = sym_process_path(d.pid, o->binary_path);
	in_root.binary_path = bpath;
	o = &in_root;
	if (!bpath || prof_build_init(p))
		goto nomem;
	p->path = prof_build_intern(p, path, &oom);
	p->layout = d.layout;
	p->sample = d.sample;
	p->ms = d.ms;
	p->unix_ms = d.unix_ms;
	p->agent_bytes = d.agent_bytes;
	/* the process's resident set and the allocator's count of its heap
	 * are the whole process's: against one pool's blocks (--pool) they
	 * would call the rest of the heap memory not seen */
	p->rss = o->pool ? 0 : d.rss;
	p->heap_in_use = o->pool ? 0 : d.heap_in_use;
	if (d.exe_real && d.exe_started) {
		p->exe_real = prof_build_intern(p, d.exe_real, &oom);
		p->exe_shown = prof_build_intern(p, base_name(d.exe_started), &oom);
	}
	p->pid = d.pid;
	p->shape = d.shape;
	p->has_alloc = d.has_alloc;

	if ((rc = build_mappings(p, &d, o, &mods, &nmods, &oom)))
		goto fail;
	if (!o->no_symbolize) {
		uint64_t key = modules_key(mods, nmods);
		struct prof_sym_cache *c = o->sym_cache;
		if (c && c->sym && c->key == key) {
			sym = c->sym;
		} else {
			sym = sym_new(mods, nmods, o->binary_path);
			if (!sym)
				goto nomem;
			if (c) {
				if (c->sym)
					sym_free(c->sym);
				c->sym = sym;
				c->key = key;
			}
		}
	}

	size_t total_pcs = d.pool_len;
	if (pcmap_init(&pcs, total_pcs))
		goto nomem;
	p->locs = calloc(total_pcs + 1, sizeof *p->locs);
	scratch = malloc((FMT_HEAP_MAX_DEPTH * 8 + 8) * sizeof *scratch);
	if (!p->locs || !scratch)
		goto nomem;

	/* a note, not an error: in a series or a diff, an early dump may
	 * come before the pool was made */
	char why[512];
	const char *absent;
	if (o->pool && pool_named(&d, o->pool, why, sizeof why, &absent)) {
		p->pool_absent = true;
		if (prof_build_warning(p, absent))
			goto nomem;
	}
	double sum_abs = 0;
	for (size_t i = 0; i < d.nstacks; i++) {
		const struct fmt_heap_stack *st = &d.stacks[i];
		if (o->pool && (!st->pool_name || strcmp(st->pool_name, o->pool)))
			continue;
		if (o->progress && !(i & 1023))
			o->progress(o->progress_ctx, path, i, d.nstacks);
		int64_t v[PROF_NVALUES];
		prof_unbias_counts(d.sample, st->v[0], st->v[1], &v[PROF_INUSE_OBJECTS],
				  &v[PROF_INUSE_SPACE]);
		prof_unbias_counts(d.sample, st->v[2], st->v[3], &v[PROF_ALLOC_OBJECTS],
				  &v[PROF_ALLOC_SPACE]);
		double var[PROF_NVALUES];
		prof_unbias_var(d.sample, st->v[0], st->v[1], &var[PROF_INUSE_OBJECTS],
				&var[PROF_INUSE_SPACE]);
		prof_unbias_var(d.sample, st->v[2], st->v[3], &var[PROF_ALLOC_OBJECTS],
				&var[PROF_ALLOC_SPACE]);
		for (int k = 0; k < PROF_NVALUES; k++)
			sum_abs += (double)v[k];
		if (sum_abs > 0x1p61) {
			snprintf(p->error, sizeof p->error,
				 "stack %zu: counts add up to more than 2^61", i + 1);
			*err = p->error;
			rc = -EINVAL;
			goto fail;
		}
		/* locations, allocator frames at the top dropped */
		uint32_t nl = 0;
		bool leading = !o->keep_alloc_frames;
		for (uint32_t k = 0; k < st->depth; k++) {
			uint32_t *slot = pcmap_slot(&pcs, st->pcs[k]);
			if (*slot == UINT32_MAX) {
				if ((rc = make_location(p, sym, st->pcs[k], &p->locs[p->nlocs], &oom)))
					goto fail;
				*slot = (uint32_t)p->nlocs++;
			}
			if (leading && location_is_alloc(p, &p->locs[*slot]))
				continue;
			if (!leading && location_is_agent(p, &p->locs[*slot]))
				continue;
			leading = false;
			scratch[nl++] = *slot;
		}
		struct prof_sample *s = prof_build_sample(p);
		if (!s)
			goto nomem;
		memcpy(s->v, v, sizeof v);
		memcpy(s->var, var, sizeof var);
		s->nsampled[PROF_INUSE_OBJECTS] = s->nsampled[PROF_INUSE_SPACE] =
			st->v[0] && st->v[1] ? (int64_t)st->v[0] : 0;
		s->nsampled[PROF_ALLOC_OBJECTS] = s->nsampled[PROF_ALLOC_SPACE] =
			st->v[2] && st->v[3] ? (int64_t)st->v[2] : 0;
		s->pool = prof_build_intern(p, st->pool_name, &oom);
		s->nlocs = nl;
		s->locs = prof_build_ids(p, nl ? nl : 1);
		if (!s->locs)
			goto nomem;
		memcpy(s->locs, scratch, nl * sizeof *scratch);
		uint32_t nf = 0;
		for (uint32_t k = 0; k < nl; k++)
			nf += p->locs[s->locs[k]].nframes;
		s->frames = prof_build_ids(p, nf ? nf : 1);
		if (!s->frames)
			goto nomem;
		for (uint32_t k = 0; k < nl; k++) {
			const struct prof_location *l = &p->locs[s->locs[k]];
			memcpy(s->frames + s->nframes, l->frames, l->nframes * sizeof *l->frames);
			s->nframes += l->nframes;
		}
		/* an allocator inlined into its caller (ld.so's malloc wrapper) */
		uint32_t skip = 0;
		while (!o->keep_alloc_frames && skip + 1 < s->nframes &&
		       p->frames[s->frames[skip]].symbolized &&
		       is_alloc_function(p->frames[s->frames[skip]].function))
			skip++;
		s->frames += skip;
		s->nframes -= skip;
		for (int k = 0; k < PROF_NVALUES; k++) {
			p->total[k] += v[k];
			p->total_var[k] += var[k];
			p->total_nsampled[k] += s->nsampled[k];
		}
	}
	if (o->progress)
		o->progress(o->progress_ctx, path, d.nstacks, d.nstacks);
	collect_warnings(p, sym);
	if (oom)
		goto nomem;
	rc = 0;
	goto out;
nomem:
	rc = -ENOMEM;
	*err = "out of memory";
fail:
	prof_profile_release(p);
out:
	free(scratch);
	pcmap_free(&pcs);
	free(mods);
	if (sym && !(o->sym_cache && o->sym_cache->sym == sym))
		sym_free(sym);
	fmt_heap_release(&d);
	free(bpath);
	return rc;
}

struct prof_sym_cache *prof_sym_cache_new(void)
{
	return calloc(1, sizeof(struct prof_sym_cache));
}

void prof_sym_cache_free(struct prof_sym_cache *c)
{
	if (c && c->sym)
		sym_free(c->sym);
	free(c);
}
