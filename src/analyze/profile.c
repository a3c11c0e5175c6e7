/*
 * profile.c — the model of profile.h: interned strings, the frame table
 * (equal frames share one id), the arena of id arrays, and what is done
 * to a loaded profile (subtract a base, filter, release). Loading lives
 * in load.c, through the builder calls of profile_build.h.
 */
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/profile.h"
#include "analyze/profile_build.h"

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

/* The profile's copy of s (NULL stays NULL); NULL on OOM sets *oom. */
static const char *strtab_intern(struct strtab *t, const char *s, bool *oom)
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
			size_t j = prof_hash_str(t->slots[i]) & (cap - 1);
			while (ns[j])
				j = (j + 1) & (cap - 1);
			ns[j] = t->slots[i];
		}
		free(t->slots);
		t->slots = ns;
		t->cap = cap;
	}
	size_t j = prof_hash_str(s) & (t->cap - 1);
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
	return prof_hash_mix((uintptr_t)f->function * 31 + (uintptr_t)f->file * 7 +
		   (uintptr_t)f->module * 3 + (uint64_t)f->line);
}

/* The id of a frame equal to *f (its strings already interned), added
 * when new. Returns -1 on OOM. */
int64_t prof_build_frame(struct prof_profile *p, const struct prof_frame *f)
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
uint32_t *prof_build_ids(struct prof_profile *p, size_t n)
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

struct prof_sample *prof_build_sample(struct prof_profile *p)
{
	if (reserve_samples(p, p->nsamples + 1))
		return NULL;
	struct prof_sample *s = &p->samples[p->nsamples++];
	memset(s, 0, sizeof *s);
	return s;
}


int prof_build_init(struct prof_profile *p)
{
	memset(p, 0, sizeof *p);
	p->priv = calloc(1, sizeof *p->priv);
	return p->priv ? 0 : -ENOMEM;
}

const char *prof_build_intern(struct prof_profile *p, const char *s, bool *oom)
{
	return strtab_intern(&p->priv->strings, s, oom);
}

int prof_build_warning(struct prof_profile *p, const char *s)
{
	struct prof_profile_priv *pv = p->priv;
	bool oom = false;
	const char *w = strtab_intern(&pv->strings, s, &oom);
	if (!w)
		return -ENOMEM;
	const char **nw = realloc(pv->warnings, (pv->nwarnings + 1) * sizeof *nw);
	if (!nw)
		return -ENOMEM;
	pv->warnings = nw;
	pv->warnings[pv->nwarnings++] = w;
	return 0;
}

int prof_profile_subtract(struct prof_profile *p, const struct prof_profile *base)
{
	bool oom = false;
	uint32_t *map = malloc((base->nframes + 1) * sizeof *map);
	if (!map)
		return -ENOMEM;
	for (size_t i = 0; i < base->nframes; i++) {
		struct prof_frame f = base->frames[i];
		f.function = prof_build_intern(p, f.function, &oom);
		f.file = prof_build_intern(p, f.file, &oom);
		f.module = prof_build_intern(p, f.module, &oom);
		int64_t id = oom ? -1 : prof_build_frame(p, &f);
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
		struct prof_sample *s = prof_build_sample(p);
		if (!s || !(s->frames = prof_build_ids(p, b->nframes ? b->nframes : 1))) {
			free(map);
			return -ENOMEM;
		}
		for (int k = 0; k < PROF_NVALUES; k++) {
			s->v[k] = -b->v[k];
			s->var[k] = b->var[k];
			s->nsampled[k] = -b->nsampled[k];
			p->total[k] -= b->v[k];
			p->total_var[k] += b->var[k];
			p->total_nsampled[k] += b->nsampled[k] < 0 ? -b->nsampled[k] : b->nsampled[k];
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
		snprintf(p->error, sizeof p->error, "bad regular expression '%s'", focus);
		*err = p->error;
		return -EINVAL;
	}
	if (ignore && regcomp(&ire, ignore, REG_EXTENDED | REG_NOSUB)) {
		if (focus)
			regfree(&fre);
		snprintf(p->error, sizeof p->error, "bad regular expression '%s'", ignore);
		*err = p->error;
		return -EINVAL;
	}
	size_t kept = 0;
	memset(p->total, 0, sizeof p->total);
	memset(p->total_var, 0, sizeof p->total_var);
	memset(p->total_nsampled, 0, sizeof p->total_nsampled);
	for (size_t i = 0; i < p->nsamples; i++) {
		struct prof_sample *s = &p->samples[i];
		if (focus && !sample_matches(p, s, &fre))
			continue;
		if (ignore && sample_matches(p, s, &ire))
			continue;
		for (int k = 0; k < PROF_NVALUES; k++) {
			p->total[k] += s->v[k];
			p->total_var[k] += s->var[k];
			p->total_nsampled[k] += s->nsampled[k] < 0 ? -s->nsampled[k] : s->nsampled[k];
		}
		p->samples[kept++] = *s;
	}
	p->nsamples = kept;
	if (focus)
		regfree(&fre);
	if (ignore)
		regfree(&ire);
	return 0;
}

/* Hides the frames whose hidden[frame id] is set (prof_profile_hide). */
static int hide_frames(struct prof_profile *p, const bool *hidden)
{
	/* a location (a pc, its inlined frames) goes when all its frames do:
	 * pprof's output is written from the locations */
	bool *loc_hidden = calloc(p->nlocs ? p->nlocs : 1, sizeof *loc_hidden);
	if (!loc_hidden)
		return -ENOMEM;
	for (size_t l = 0; l < p->nlocs; l++) {
		loc_hidden[l] = p->locs[l].nframes > 0;
		for (uint32_t k = 0; k < p->locs[l].nframes; k++)
			loc_hidden[l] &= hidden[p->locs[l].frames[k]];
	}
	for (size_t i = 0; i < p->nsamples; i++) {
		struct prof_sample *s = &p->samples[i];
		uint32_t n = 0;
		for (uint32_t k = 0; k < s->nframes; k++)
			n += !hidden[s->frames[k]];
		if (!n)
			continue;   /* nothing would be left: kept as it is */
		n = 0;
		for (uint32_t k = 0; k < s->nframes; k++)
			if (!hidden[s->frames[k]])
				s->frames[n++] = s->frames[k];
		s->nframes = n;
		n = 0;
		for (uint32_t k = 0; s->locs && k < s->nlocs; k++)
			if (!loc_hidden[s->locs[k]])
				s->locs[n++] = s->locs[k];
		if (s->locs)
			s->nlocs = n;
	}
	free(loc_hidden);
	return 0;
}

int prof_profile_hide(struct prof_profile *p, const char *hide, const char **err)
{
	regex_t re;
	if (regcomp(&re, hide, REG_EXTENDED | REG_NOSUB)) {
		snprintf(p->error, sizeof p->error, "bad regular expression '%s'", hide);
		*err = p->error;
		return -EINVAL;
	}
	bool *hidden = calloc(p->nframes ? p->nframes : 1, sizeof *hidden);
	if (!hidden) {
		regfree(&re);
		*err = "out of memory";
		return -ENOMEM;
	}
	for (size_t f = 0; f < p->nframes; f++)
		hidden[f] = !regexec(&re, p->frames[f].function, 0, NULL, 0);
	regfree(&re);
	int rc = hide_frames(p, hidden);
	free(hidden);
	if (rc)
		*err = "out of memory";
	return rc;
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

/* Key of a sample: its pcs, leaf first (a dump's stack, as recorded). */
static uint64_t sample_key(const struct prof_profile *p, const struct prof_sample *s)
{
	uint64_t h = 1469598103934665603ull ^ s->nlocs;
	for (uint32_t i = 0; i < s->nlocs; i++)
		h = prof_hash_mix(h ^ p->locs[s->locs[i]].pc) + i;
	return h;
}

static bool same_stack(const struct prof_profile *a, const struct prof_sample *x,
		       const struct prof_profile *b, const struct prof_sample *y)
{
	if (x->nlocs != y->nlocs)
		return false;
	for (uint32_t i = 0; i < x->nlocs; i++)
		if (a->locs[x->locs[i]].pc != b->locs[y->locs[i]].pc)
			return false;
	return true;
}

int prof_profile_delta(struct prof_profile *p, const struct prof_profile *base)
{
	size_t cap = 16;
	while (cap < 2 * base->nsamples + 2)
		cap *= 2;
	uint32_t *slot = malloc(cap * sizeof *slot);   /* sample index + 1, 0 = empty */
	if (!slot)
		return -ENOMEM;
	memset(slot, 0, cap * sizeof *slot);
	for (size_t i = 0; i < base->nsamples; i++) {
		const struct prof_sample *b = &base->samples[i];
		if (!b->locs)
			continue;
		size_t j = sample_key(base, b) & (cap - 1);
		while (slot[j])
			j = (j + 1) & (cap - 1);
		slot[j] = (uint32_t)i + 1;
	}
	size_t kept = 0;
	for (int k = 0; k < PROF_NVALUES; k++)
		p->total[k] = 0;
	for (size_t i = 0; i < p->nsamples; i++) {
		struct prof_sample *s = &p->samples[i];
		if (s->locs) {
			for (size_t j = sample_key(p, s) & (cap - 1); slot[j]; j = (j + 1) & (cap - 1)) {
				const struct prof_sample *b = &base->samples[slot[j] - 1];
				if (!same_stack(p, s, base, b))
					continue;
				for (int k = 0; k < PROF_NVALUES; k++)
					s->v[k] -= b->v[k];
				break;
			}
		}
		bool zero = true;
		for (int k = 0; k < PROF_NVALUES; k++)
			zero &= s->v[k] == 0;
		if (zero)
			continue;
		for (int k = 0; k < PROF_NVALUES; k++)
			p->total[k] += s->v[k];
		p->samples[kept++] = *s;
	}
	p->nsamples = kept;
	free(slot);
	return 0;
}
