/* pprof.c — a profile as pprof's profile.proto, gzip-compressed: the
 * .pb.gz files Google's pprof reads. protobuf-c does the encoding, from
 * the schema in proto/profile.proto; this file only fills the messages in
 * and compresses the result.
 *
 * The model maps onto the message almost one to one: each model location
 * is a Location (id = index + 1) whose inlined frames are its Lines, each
 * distinct (name, file) of a symbolized frame is a Function, each sample a
 * Sample with its stack leaf first. Unsymbolized frames get no Line: that
 * is how pprof marks an address it may still symbolize itself. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "analyze/profile.h"
#include "profile.pb-c.h"
#include "render/render.h"

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__ValueType pb_value_type;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Label pb_label;
typedef Perftools__Profiles__Mapping pb_mapping;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Line pb_line;
typedef Perftools__Profiles__Function pb_function;

/* pprof's sample type order for heap profiles (what Go's runtime writes):
 * allocated first, in use last. */
static const int pprof_order[PROF_NVALUES] = {
	PROF_ALLOC_OBJECTS, PROF_ALLOC_SPACE, PROF_INUSE_OBJECTS, PROF_INUSE_SPACE,
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static uint64_t hash_u64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

/* An open-addressing table of indices (UINT32_MAX = empty), kept at most
 * half full; the caller compares keys. */
struct idx_table {
	uint32_t *slots;
	size_t cap;             /* a power of two */
};

static int idx_table_init(struct idx_table *t, size_t n)
{
	t->cap = 16;
	while (t->cap < 2 * n + 2)
		t->cap *= 2;
	t->slots = malloc(t->cap * sizeof *t->slots);
	if (!t->slots)
		return -ENOMEM;
	memset(t->slots, 0xff, t->cap * sizeof *t->slots);
	return 0;
}

/* The string table: string_table[0] is "" as pprof requires. The strings
 * themselves stay the profile's. */
struct str_table {
	char **s;
	size_t n;
	struct idx_table idx;
};

static int64_t str_index(struct str_table *t, const char *s)
{
	if (!s || !*s)
		return 0;
	size_t mask = t->idx.cap - 1, i = hash_str(s) & mask;
	for (; t->idx.slots[i] != UINT32_MAX; i = (i + 1) & mask)
		if (!strcmp(t->s[t->idx.slots[i]], s))
			return t->idx.slots[i];
	/* protobuf-c wants char *; packing never writes through it */
	t->s[t->n] = (char *)s;
	t->idx.slots[i] = (uint32_t)t->n;
	return (int64_t)t->n++;
}

/* Everything the messages point into, freed together. */
struct pprof_build {
	pb_profile prof;
	struct str_table strs;
	struct idx_table fn_idx;          /* (name, file) string indices -> function */
	uint64_t *fn_key;
	pb_value_type types[PROF_NVALUES], period_type;
	pb_value_type *type_ptrs[PROF_NVALUES];
	int64_t comment;
	pb_mapping *maps, **map_ptrs;
	uint64_t *map_id;                 /* model mapping index -> id, 0 = not written */
	pb_function *fns, **fn_ptrs;
	uint64_t *frame_fn;               /* model frame id -> function id, 0 = none */
	pb_location *locs, **loc_ptrs;
	pb_line *lines, **line_ptrs;
	pb_sample *samples, **sample_ptrs;
	pb_label *labels, **label_ptrs;   /* one per sample, used by those of a pool */
	uint64_t *loc_ids;
	int64_t *values;
};

static void pprof_build_release(struct pprof_build *b)
{
	free(b->strs.s);
	free(b->strs.idx.slots);
	free(b->fn_idx.slots);
	free(b->fn_key);
	free(b->maps);
	free(b->map_ptrs);
	free(b->map_id);
	free(b->fns);
	free(b->fn_ptrs);
	free(b->frame_fn);
	free(b->locs);
	free(b->loc_ptrs);
	free(b->lines);
	free(b->line_ptrs);
	free(b->samples);
	free(b->sample_ptrs);
	free(b->labels);
	free(b->label_ptrs);
	free(b->loc_ids);
	free(b->values);
}

/* The function id of a symbolized frame, one per distinct (name, file). */
static uint64_t function_of(struct pprof_build *b, const struct prof_frame *f)
{
	int64_t name = str_index(&b->strs, f->function);
	int64_t file = str_index(&b->strs, f->file);
	uint64_t key = (uint64_t)name << 32 | (uint64_t)file;
	size_t mask = b->fn_idx.cap - 1, i = hash_u64(key) & mask;
	for (; b->fn_idx.slots[i] != UINT32_MAX; i = (i + 1) & mask)
		if (b->fn_key[b->fn_idx.slots[i]] == key)
			return b->fn_idx.slots[i] + 1;
	size_t k = b->prof.n_function++;
	pb_function *fn = &b->fns[k];
	perftools__profiles__function__init(fn);
	fn->id = k + 1;
	fn->name = name;
	/* the model keeps only the demangled name; pprof does the same when it
	 * symbolizes without the mangled one */
	fn->system_name = name;
	fn->filename = file;
	b->fn_ptrs[k] = fn;
	b->fn_key[k] = key;
	b->fn_idx.slots[i] = (uint32_t)k;
	return k + 1;
}

/* Mappings: the executable ones (pprof keeps only those when it reads
 * /proc/self/maps) and any other a location falls in. The has_* bits say
 * what heaptrail's symbolizer found there: pprof symbolizes a mapping
 * again only when none of the first three is set. */
static void add_mappings(struct pprof_build *b, const struct prof_profile *p)
{
	for (size_t i = 0; i < p->nlocs; i++)
		if (p->locs[i].mapping >= 0)
			b->map_id[p->locs[i].mapping] = 1;
	for (size_t i = 0; i < p->nmaps; i++) {
		const struct prof_mapping *m = &p->maps[i];
		if (!m->exec && !b->map_id[i])
			continue;
		size_t k = b->prof.n_mapping++;
		pb_mapping *pm = &b->maps[k];
		perftools__profiles__mapping__init(pm);
		pm->id = k + 1;
		pm->memory_start = m->start;
		pm->memory_limit = m->limit;
		pm->file_offset = m->offset;
		pm->filename = str_index(&b->strs, m->file);
		pm->build_id = str_index(&b->strs, m->build_id);
		b->map_ptrs[k] = pm;
		b->map_id[i] = k + 1;
	}
	for (size_t i = 0; i < p->nlocs; i++) {
		const struct prof_location *l = &p->locs[i];
		if (l->mapping < 0)
			continue;
		pb_mapping *pm = &b->maps[b->map_id[l->mapping] - 1];
		for (uint32_t k = 0; k < l->nframes; k++) {
			const struct prof_frame *f = &p->frames[l->frames[k]];
			if (!f->symbolized)
				continue;
			pm->has_functions = true;
			if (f->file) {
				/* file names come from DWARF line info, and whenever
				 * the symbolizer reads it, it expands inlined calls */
				pm->has_filenames = true;
				pm->has_inline_frames = true;
			}
			if (f->line)
				pm->has_line_numbers = true;
		}
	}
}

static void add_locations(struct pprof_build *b, const struct prof_profile *p)
{
	size_t nlines = 0;
	for (size_t i = 0; i < p->nlocs; i++) {
		const struct prof_location *l = &p->locs[i];
		pb_location *pl = &b->locs[i];
		perftools__profiles__location__init(pl);
		pl->id = i + 1;
		pl->mapping_id = l->mapping >= 0 ? b->map_id[l->mapping] : 0;
		pl->address = l->pc;
		pl->line = &b->line_ptrs[nlines];
		/* frames are innermost first, as pprof wants its lines */
		for (uint32_t k = 0; k < l->nframes; k++) {
			uint32_t fid = l->frames[k];
			const struct prof_frame *f = &p->frames[fid];
			if (!f->symbolized)
				continue;
			if (!b->frame_fn[fid])
				b->frame_fn[fid] = function_of(b, f);
			pb_line *ln = &b->lines[nlines];
			perftools__profiles__line__init(ln);
			ln->function_id = b->frame_fn[fid];
			ln->line = f->line;
			b->line_ptrs[nlines++] = ln;
			pl->n_line++;
		}
		b->loc_ptrs[i] = pl;
	}
	b->prof.n_location = p->nlocs;
}

static int add_samples(struct pprof_build *b, const struct prof_profile *p)
{
	size_t nids = 0;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct prof_sample *s = &p->samples[i];
		/* a base profile's samples (prof_profile_subtract) have frames
		 * but no locations to point to */
		if (!s->locs && s->nframes)
			return -EINVAL;
		pb_sample *ps = &b->samples[i];
		perftools__profiles__sample__init(ps);
		ps->location_id = &b->loc_ids[nids];
		for (uint32_t k = 0; k < s->nlocs; k++)
			b->loc_ids[nids++] = (uint64_t)s->locs[k] + 1;
		ps->n_location_id = s->nlocs;
		ps->value = &b->values[i * PROF_NVALUES];
		for (int k = 0; k < PROF_NVALUES; k++)
			ps->value[k] = s->v[pprof_order[k]];
		ps->n_value = PROF_NVALUES;
		if (s->pool) {
			/* a string label, as Go's pprof.Labels writes */
			pb_label *l = &b->labels[i];
			perftools__profiles__label__init(l);
			l->key = str_index(&b->strs, "pool");
			l->str = str_index(&b->strs, s->pool);
			b->label_ptrs[i] = l;
			ps->label = &b->label_ptrs[i];
			ps->n_label = 1;
		}
		b->sample_ptrs[i] = ps;
	}
	b->prof.n_sample = p->nsamples;
	return 0;
}

static int alloc_arrays(struct pprof_build *b, const struct prof_profile *p)
{
	size_t nlines = 0, nids = 0;
	for (size_t i = 0; i < p->nlocs; i++)
		nlines += p->locs[i].nframes;
	for (size_t i = 0; i < p->nsamples; i++)
		nids += p->samples[i].nlocs;
	/* strings: per frame a name and a file, per mapping a file and a
	 * build-id, the value types and units, the comment */
	size_t nstrs = 2 * p->nframes + 2 * p->nmaps + 2 * PROF_NVALUES + 8;
	for (size_t i = 0; i < p->nsamples; i++)
		nstrs += p->samples[i].pool != NULL;  /* at most one new name each */
	b->strs.s = calloc(nstrs, sizeof *b->strs.s);
	b->fn_key = calloc(p->nframes + 1, sizeof *b->fn_key);
	b->maps = calloc(p->nmaps + 1, sizeof *b->maps);
	b->map_ptrs = calloc(p->nmaps + 1, sizeof *b->map_ptrs);
	b->map_id = calloc(p->nmaps + 1, sizeof *b->map_id);
	b->fns = calloc(p->nframes + 1, sizeof *b->fns);
	b->fn_ptrs = calloc(p->nframes + 1, sizeof *b->fn_ptrs);
	b->frame_fn = calloc(p->nframes + 1, sizeof *b->frame_fn);
	b->locs = calloc(p->nlocs + 1, sizeof *b->locs);
	b->loc_ptrs = calloc(p->nlocs + 1, sizeof *b->loc_ptrs);
	b->lines = calloc(nlines + 1, sizeof *b->lines);
	b->line_ptrs = calloc(nlines + 1, sizeof *b->line_ptrs);
	b->samples = calloc(p->nsamples + 1, sizeof *b->samples);
	b->sample_ptrs = calloc(p->nsamples + 1, sizeof *b->sample_ptrs);
	b->labels = calloc(p->nsamples + 1, sizeof *b->labels);
	b->label_ptrs = calloc(p->nsamples + 1, sizeof *b->label_ptrs);
	b->loc_ids = calloc(nids + 1, sizeof *b->loc_ids);
	b->values = calloc(p->nsamples * PROF_NVALUES + 1, sizeof *b->values);
	if (!b->strs.s || !b->fn_key || !b->maps || !b->map_ptrs || !b->map_id || !b->fns ||
	    !b->fn_ptrs || !b->frame_fn || !b->locs || !b->loc_ptrs || !b->lines ||
	    !b->line_ptrs || !b->samples || !b->sample_ptrs || !b->loc_ids || !b->values ||
	    !b->labels || !b->label_ptrs)
		return -ENOMEM;
	if (idx_table_init(&b->strs.idx, nstrs) || idx_table_init(&b->fn_idx, p->nframes))
		return -ENOMEM;
	b->strs.s[b->strs.n++] = "";
	return 0;
}

static int gzip_bytes(const uint8_t *in, size_t n, char **out, size_t *len)
{
	z_stream z = { 0 };
	int ret = 0;
	if (n > UINT_MAX)
		return -EFBIG;
	/* 16 + 15: a gzip header around a full-window deflate stream */
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + 15, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	size_t cap = deflateBound(&z, (uLong)n) + 32;
	char *buf = cap <= UINT_MAX ? malloc(cap) : NULL;
	if (!buf) {
		ret = -ENOMEM;
		goto out;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	z.next_out = (Bytef *)buf;
	z.avail_out = (uInt)cap;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
		free(buf);
		ret = -EIO;
		goto out;
	}
	*out = buf;
	*len = z.total_out;
out:
	deflateEnd(&z);
	return ret;
}

int render_pprof(const struct prof_profile *p, int default_value, char **out, size_t *len)
{
	struct pprof_build b = { 0 };
	uint8_t *packed = NULL;
	int ret;

	if (default_value < 0 || default_value >= PROF_NVALUES)
		return -EINVAL;
	perftools__profiles__profile__init(&b.prof);
	if ((ret = alloc_arrays(&b, p)))
		goto out;

	int64_t bytes = str_index(&b.strs, "bytes"), count = str_index(&b.strs, "count");
	for (int k = 0; k < PROF_NVALUES; k++) {
		int v = pprof_order[k];
		perftools__profiles__value_type__init(&b.types[k]);
		b.types[k].type = str_index(&b.strs, prof_value_names[v]);
		b.types[k].unit = v == PROF_ALLOC_SPACE || v == PROF_INUSE_SPACE ? bytes : count;
		b.type_ptrs[k] = &b.types[k];
	}
	b.prof.sample_type = b.type_ptrs;
	b.prof.n_sample_type = PROF_NVALUES;
	b.prof.default_sample_type = str_index(&b.strs, prof_value_names[default_value]);
	perftools__profiles__value_type__init(&b.period_type);
	b.period_type.type = str_index(&b.strs, "space");
	b.period_type.unit = bytes;
	b.prof.period_type = &b.period_type;
	b.prof.period = (int64_t)p->sample;
	if (p->unix_ms >= 0)
		b.prof.time_nanos = p->unix_ms * 1000000;
	/* a gperftools dump may leave the since-start columns zero: say so
	 * rather than let alloc_space read as "nothing allocated" */
	if (!p->has_alloc && !p->total[PROF_ALLOC_OBJECTS] && p->total[PROF_INUSE_OBJECTS]) {
		b.comment = str_index(&b.strs, "heaptrail: the dump has no allocated-since-start "
					       "counts; alloc_objects and alloc_space are 0");
		b.prof.comment = &b.comment;
		b.prof.n_comment = 1;
	}

	/* The model drops the allocator's locations from every stack; an
	 * allocator inlined into its caller (ld.so's malloc wrapper) is a line
	 * of the caller's location, which pprof drops by this name list. */
	b.prof.drop_frames = str_index(&b.strs, "malloc|calloc|realloc|reallocarray|free|"
				       "memalign|posix_memalign|aligned_alloc|valloc|pvalloc|"
				       "operator new.*|operator delete.*");

	add_mappings(&b, p);
	b.prof.mapping = b.map_ptrs;
	add_locations(&b, p);
	b.prof.location = b.loc_ptrs;
	b.prof.function = b.fn_ptrs;
	if ((ret = add_samples(&b, p)))
		goto out;
	b.prof.sample = b.sample_ptrs;
	b.prof.string_table = b.strs.s;
	b.prof.n_string_table = b.strs.n;

	size_t n = perftools__profiles__profile__get_packed_size(&b.prof);
	packed = malloc(n ? n : 1);
	if (!packed) {
		ret = -ENOMEM;
		goto out;
	}
	perftools__profiles__profile__pack(&b.prof, packed);
	ret = gzip_bytes(packed, n, out, len);
out:
	free(packed);
	pprof_build_release(&b);
	return ret;
}
