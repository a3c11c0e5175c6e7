/*
 * profile.c — loading a heap dump into the symbolized model of profile.h:
 * mappings from the maps section (load bias and build-id read from each
 * file), one symbolizer session per dump (every pc resolved once), frames
 * and strings interned, allocator frames dropped.
 */
#include <dirent.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/profile.h"

const char *const prof_value_names[PROF_NVALUES] = {
	"inuse_objects", "inuse_space", "alloc_objects", "alloc_space",
};

/* ---------- an arena of interned strings and a frame table ---------- */

struct strtab {
	char **slots;
	size_t cap, n;
};

struct frametab {
	uint32_t *slots;        /* frame id + 1, 0 = empty */
	size_t cap;
};

struct prof_profile_priv {
	struct strtab strings;
	struct frametab frames;
	size_t frames_cap, samples_cap;
	struct chunk *chunks;    /* the id arrays of locations and samples */
	const char **warnings;
	size_t nwarnings;
};

struct chunk {
	struct chunk *next;
	size_t used, cap;
	uint32_t data[];
};

static uint64_t hash_bytes(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

/* The profile's copy of s (NULL stays NULL); NULL on OOM sets *oom. */
static const char *intern(struct strtab *t, const char *s, bool *oom)
{
	if (!s)
		return NULL;
	if (2 * (t->n + 1) > t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 1024;
		char **ns = calloc(cap, sizeof *ns);
		if (!ns) {
			*oom = true;
			return NULL;
		}
		for (size_t i = 0; i < t->cap; i++) {
			if (!t->slots[i])
				continue;
			size_t j = hash_bytes(t->slots[i]) & (cap - 1);
			while (ns[j])
				j = (j + 1) & (cap - 1);
			ns[j] = t->slots[i];
		}
		free(t->slots);
		t->slots = ns;
		t->cap = cap;
	}
	size_t j = hash_bytes(s) & (t->cap - 1);
	while (t->slots[j]) {
		if (!strcmp(t->slots[j], s))
			return t->slots[j];
		j = (j + 1) & (t->cap - 1);
	}
	t->slots[j] = strdup(s);
	if (!t->slots[j]) {
		*oom = true;
		return NULL;
	}
	t->n++;
	return t->slots[j];
}

static uint64_t frame_hash(const struct prof_frame *f)
{
	return mix((uintptr_t)f->function * 31 + (uintptr_t)f->file * 7 +
		   (uintptr_t)f->module * 3 + (uint64_t)f->line);
}

/* The id of a frame equal to *f (its strings already interned), added
 * when new. Returns -1 on OOM. */
static int64_t frame_id(struct prof_profile *p, const struct prof_frame *f)
{
	struct prof_profile_priv *pv = p->priv;
	struct frametab *t = &pv->frames;
	if (2 * (p->nframes + 1) > t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 1024;
		uint32_t *ns = calloc(cap, sizeof *ns);
		if (!ns)
			return -1;
		for (size_t i = 0; i < t->cap; i++) {
			if (!t->slots[i])
				continue;
			size_t j = frame_hash(&p->frames[t->slots[i] - 1]) & (cap - 1);
			while (ns[j])
				j = (j + 1) & (cap - 1);
			ns[j] = t->slots[i];
		}
		free(t->slots);
		t->slots = ns;
		t->cap = cap;
	}
	size_t j = frame_hash(f) & (t->cap - 1);
	while (t->slots[j]) {
		const struct prof_frame *g = &p->frames[t->slots[j] - 1];
		if (g->function == f->function && g->file == f->file && g->line == f->line &&
		    g->module == f->module)
			return t->slots[j] - 1;
		j = (j + 1) & (t->cap - 1);
	}
	if (p->nframes == pv->frames_cap) {
		size_t cap = pv->frames_cap ? 2 * pv->frames_cap : 1024;
		struct prof_frame *nf = realloc(p->frames, cap * sizeof *nf);
		if (!nf)
			return -1;
		p->frames = nf;
		pv->frames_cap = cap;
	}
	p->frames[p->nframes] = *f;
	t->slots[j] = (uint32_t)++p->nframes;
	return (int64_t)p->nframes - 1;
}

/* n uint32_t that live as long as the profile; NULL on OOM. */
static uint32_t *ids_alloc(struct prof_profile *p, size_t n)
{
	struct chunk *c = p->priv->chunks;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > 65536 ? n : 65536;
		c = malloc(sizeof *c + cap * sizeof(uint32_t));
		if (!c)
			return NULL;
		c->cap = cap;
		c->used = 0;
		c->next = p->priv->chunks;
		p->priv->chunks = c;
	}
	uint32_t *r = c->data + c->used;
	c->used += n;
	return r;
}

/* Room for n samples in all; 0 or -ENOMEM. */
static int reserve_samples(struct prof_profile *p, size_t n)
{
	struct prof_profile_priv *pv = p->priv;
	if (n <= pv->samples_cap)
		return 0;
	size_t cap = pv->samples_cap ? 2 * pv->samples_cap : 1024;
	while (cap < n)
		cap *= 2;
	struct prof_sample *ns = realloc(p->samples, cap * sizeof *ns);
	if (!ns)
		return -ENOMEM;
	p->samples = ns;
	pv->samples_cap = cap;
	return 0;
}

static struct prof_sample *sample_new(struct prof_profile *p)
{
	if (reserve_samples(p, p->nsamples + 1))
		return NULL;
	struct prof_sample *s = &p->samples[p->nsamples++];
	memset(s, 0, sizeof *s);
	return s;
}

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

static char errbuf[512];

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
	size_t j = mix(pc) & (m->cap - 1);
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
	struct prof_profile_priv *pv = p->priv;
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
			if (rc && rc != -ENOEXEC)
				bias = m->start - m->offset; /* file missing: a guess for the range */
			mods[nmods] = (struct sym_module){
				.path = intern(&pv->strings, m->path, oom),
				.build_id = intern(&pv->strings, bid ? bid : (hex[0] ? hex : NULL), oom),
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
			.file = intern(&pv->strings, m->path, oom), .build_id = build_id,
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
	struct prof_profile_priv *pv = p->priv;
	loc->pc = pc;
	loc->mapping = mapping_of(p, pc);
	const struct sym_frame *sf = NULL;
	size_t n = sym ? sym_resolve(sym, pc, &sf) : 0;
	struct sym_frame fallback = { .pc = pc, .function = "??" };
	if (!n) {
		sf = &fallback;
		n = 1;
	}
	loc->frames = ids_alloc(p, n);
	if (!loc->frames)
		return -ENOMEM;
	loc->nframes = (uint32_t)n;
	for (size_t i = 0; i < n; i++) {
		char name[96];
		struct prof_frame f = { 0 };
		const char *modpath = sf[i].module;
		if (!modpath && loc->mapping >= 0)
			modpath = p->maps[loc->mapping].file;
		f.module = intern(&pv->strings, base_name(modpath), oom);
		f.symbolized = strcmp(sf[i].function, "??") != 0;
		if (f.symbolized) {
			f.function = intern(&pv->strings, sf[i].function, oom);
			f.file = intern(&pv->strings, sf[i].file, oom);
			f.line = sf[i].line;
		} else {
			/* stable across runs (ASLR): module+offset when the module is known */
			if (loc->mapping >= 0) {
				const struct prof_mapping *m = &p->maps[loc->mapping];
				snprintf(name, sizeof name, "%s+0x%llx", base_name(m->file),
					 (unsigned long long)(pc - m->start + m->offset));
			} else {
				snprintf(name, sizeof name, "0x%llx", (unsigned long long)pc);
			}
			f.function = intern(&pv->strings, name, oom);
		}
		if (*oom)
			return -ENOMEM;
		int64_t id = frame_id(p, &f);
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

static void collect_warnings(struct prof_profile *p, struct symbolizer *sym)
{
	const char *const *w;
	size_t n = sym ? sym_warnings(sym, &w) : 0;
	bool oom = false;
	p->priv->warnings = calloc(n + 1, sizeof(char *));
	if (!p->priv->warnings)
		return;
	for (size_t i = 0; i < n; i++) {
		const char *s = intern(&p->priv->strings, w[i], &oom);
		if (s)
			p->priv->warnings[p->priv->nwarnings++] = s;
	}
}

struct prof_sym_cache {
	struct symbolizer *sym;
	uint64_t key;             /* modules_key of the modules it was made for */
};

/* What identifies a symbolizer session: every module's path, build-id,
 * bias and range. */
static uint64_t modules_key(const struct sym_module *m, size_t n)
{
	uint64_t h = mix(n + 1);
	for (size_t i = 0; i < n; i++) {
		h = mix(h ^ hash_bytes(m[i].path ? m[i].path : ""));
		h = mix(h ^ hash_bytes(m[i].build_id ? m[i].build_id : ""));
		h = mix(h ^ m[i].base);
		h = mix(h ^ m[i].lo);
		h = mix(h ^ m[i].hi);
	}
	return h;
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
	if (rc)
		return rc;
	p->priv = calloc(1, sizeof *p->priv);
	if (!p->priv)
		goto nomem;
	p->path = intern(&p->priv->strings, path, &oom);
	p->layout = d.layout;
	p->sample = d.sample;
	p->ms = d.ms;
	p->unix_ms = d.unix_ms;
	p->pid = d.pid;
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

	double sum_abs = 0;
	for (size_t i = 0; i < d.nstacks; i++) {
		const struct fmt_heap_stack *st = &d.stacks[i];
		if (o->progress && !(i & 1023))
			o->progress(o->progress_ctx, path, i, d.nstacks);
		int64_t v[PROF_NVALUES];
		fmt_heap_unsample(d.sample, st->v[0], st->v[1], &v[PROF_INUSE_OBJECTS],
				  &v[PROF_INUSE_SPACE]);
		fmt_heap_unsample(d.sample, st->v[2], st->v[3], &v[PROF_ALLOC_OBJECTS],
				  &v[PROF_ALLOC_SPACE]);
		for (int k = 0; k < PROF_NVALUES; k++)
			sum_abs += (double)v[k];
		if (sum_abs > 0x1p61) {
			snprintf(errbuf, sizeof errbuf, "stack %zu: counts add up to more than 2^61", i + 1);
			*err = errbuf;
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
			leading = false;
			scratch[nl++] = *slot;
		}
		struct prof_sample *s = sample_new(p);
		if (!s)
			goto nomem;
		memcpy(s->v, v, sizeof v);
		s->nlocs = nl;
		s->locs = ids_alloc(p, nl ? nl : 1);
		if (!s->locs)
			goto nomem;
		memcpy(s->locs, scratch, nl * sizeof *scratch);
		uint32_t nf = 0;
		for (uint32_t k = 0; k < nl; k++)
			nf += p->locs[s->locs[k]].nframes;
		s->frames = ids_alloc(p, nf ? nf : 1);
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
		for (int k = 0; k < PROF_NVALUES; k++)
			p->total[k] += v[k];
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

int prof_profile_subtract(struct prof_profile *p, const struct prof_profile *base)
{
	bool oom = false;
	uint32_t *map = malloc((base->nframes + 1) * sizeof *map);
	if (!map)
		return -ENOMEM;
	for (size_t i = 0; i < base->nframes; i++) {
		struct prof_frame f = base->frames[i];
		f.function = intern(&p->priv->strings, f.function, &oom);
		f.file = intern(&p->priv->strings, f.file, &oom);
		f.module = intern(&p->priv->strings, f.module, &oom);
		int64_t id = oom ? -1 : frame_id(p, &f);
		if (id < 0) {
			free(map);
			return -ENOMEM;
		}
		map[i] = (uint32_t)id;
	}
	/* base may be p itself: its sample count is taken before p grows, and
	 * the room is made first, so no sample of base moves under us */
	size_t nbase = base->nsamples;
	if (reserve_samples(p, p->nsamples + nbase)) {
		free(map);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nbase; i++) {
		const struct prof_sample *b = &base->samples[i];
		struct prof_sample *s = sample_new(p);
		if (!s || !(s->frames = ids_alloc(p, b->nframes ? b->nframes : 1))) {
			free(map);
			return -ENOMEM;
		}
		for (int k = 0; k < PROF_NVALUES; k++) {
			s->v[k] = -b->v[k];
			p->total[k] -= b->v[k];
		}
		s->nframes = b->nframes;
		for (uint32_t k = 0; k < b->nframes; k++)
			s->frames[k] = map[b->frames[k]];
	}
	p->has_alloc = p->has_alloc || base->has_alloc;
	free(map);
	return 0;
}

static bool sample_matches(const struct prof_profile *p, const struct prof_sample *s,
			   const regex_t *re)
{
	for (uint32_t k = 0; k < s->nframes; k++)
		if (!regexec(re, p->frames[s->frames[k]].function, 0, NULL, 0))
			return true;
	return false;
}

int prof_profile_filter(struct prof_profile *p, const char *focus, const char *ignore,
			const char **err)
{
	regex_t fre, ire;
	if (focus && regcomp(&fre, focus, REG_EXTENDED | REG_NOSUB)) {
		snprintf(errbuf, sizeof errbuf, "bad regular expression '%s'", focus);
		*err = errbuf;
		return -EINVAL;
	}
	if (ignore && regcomp(&ire, ignore, REG_EXTENDED | REG_NOSUB)) {
		if (focus)
			regfree(&fre);
		snprintf(errbuf, sizeof errbuf, "bad regular expression '%s'", ignore);
		*err = errbuf;
		return -EINVAL;
	}
	size_t kept = 0;
	memset(p->total, 0, sizeof p->total);
	for (size_t i = 0; i < p->nsamples; i++) {
		struct prof_sample *s = &p->samples[i];
		if (focus && !sample_matches(p, s, &fre))
			continue;
		if (ignore && sample_matches(p, s, &ire))
			continue;
		for (int k = 0; k < PROF_NVALUES; k++)
			p->total[k] += s->v[k];
		p->samples[kept++] = *s;
	}
	p->nsamples = kept;
	if (focus)
		regfree(&fre);
	if (ignore)
		regfree(&ire);
	return 0;
}

size_t prof_profile_warnings(const struct prof_profile *p, const char *const **out)
{
	*out = p->priv ? p->priv->warnings : NULL;
	return p->priv ? p->priv->nwarnings : 0;
}

void prof_profile_release(struct prof_profile *p)
{
	struct prof_profile_priv *pv = p->priv;
	if (pv) {
		for (size_t i = 0; i < pv->strings.cap; i++)
			free(pv->strings.slots[i]);
		free(pv->strings.slots);
		free(pv->frames.slots);
		for (struct chunk *c = pv->chunks, *n; c; c = n) {
			n = c->next;
			free(c);
		}
		free(pv->warnings);
		free(pv);
	}
	free(p->maps);
	free(p->locs);
	free(p->frames);
	free(p->samples);
	memset(p, 0, sizeof *p);
}

const char *prof_frame_name(const struct prof_frame *f, bool lines, char *buf, size_t cap)
{
	if (lines && f->file)
		snprintf(buf, cap, "%s %s:%d", f->function, f->file, f->line);
	else
		snprintf(buf, cap, "%s", f->function);
	return buf;
}

int prof_value_parse(const char *s)
{
	for (int i = 0; i < PROF_NVALUES; i++) {
		const char *n = prof_value_names[i];
		size_t k = 0;
		while (n[k] && (s[k] == n[k] || (n[k] == '_' && s[k] == '-')))
			k++;
		if (!n[k] && !s[k])
			return i;
	}
	return -1;
}

/* ---------- a series of dumps ---------- */

/* The sequence number in a heaptrail dump name (PREFIX.PID.SEQ.KIND.heap),
 * or -1. */
static long name_seq(const char *path)
{
	const char *b = base_name(path);
	const char *end = strstr(b, ".heap");
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
			if (!has_suffix(e->d_name, ".heap") || e->d_name[0] == '.')
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
