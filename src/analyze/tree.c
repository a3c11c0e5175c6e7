/* tree.c — the stacks of a profile merged into a tree of names (see
 * tree.h): names and (parent, name) pairs interned in open-addressed
 * hash tables. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/tree.h"

static uint64_t hash_pair(uint32_t parent, uint32_t name)
{
	uint64_t h = ((uint64_t)parent << 32 | name) * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

/* ---------- names ---------- */

static int names_grow(struct prof_tree *fl)
{
	size_t ns = fl->priv_nname_slots ? 2 * fl->priv_nname_slots : 1024;
	uint32_t *s = calloc(ns, sizeof *s);
	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < fl->nnames; i++) {
		size_t k = prof_hash_str(fl->names[i]) & (ns - 1);
		while (s[k])
			k = (k + 1) & (ns - 1);
		s[k] = (uint32_t)i + 1;
	}
	free(fl->priv_name_slots);
	fl->priv_name_slots = s;
	fl->priv_nname_slots = ns;
	return 0;
}

/* The id of name, added when new; PROF_TREE_NONE when out of memory. */
static uint32_t name_id(struct prof_tree *fl, const char *name)
{
	if (2 * (fl->nnames + 1) > fl->priv_nname_slots && names_grow(fl))
		return PROF_TREE_NONE;
	size_t mask = fl->priv_nname_slots - 1, k = prof_hash_str(name) & mask;
	for (; fl->priv_name_slots[k]; k = (k + 1) & mask)
		if (!strcmp(fl->names[fl->priv_name_slots[k] - 1], name))
			return fl->priv_name_slots[k] - 1;
	if (fl->nnames == fl->priv_names_cap) {
		size_t nc = fl->priv_names_cap ? 2 * fl->priv_names_cap : 256;
		char **nn = realloc(fl->names, nc * sizeof *nn);
		if (!nn)
			return PROF_TREE_NONE;
		fl->names = nn;
		fl->priv_names_cap = nc;
	}
	if (!(fl->names[fl->nnames] = strdup(name)))
		return PROF_TREE_NONE;
	fl->priv_name_slots[k] = (uint32_t)++fl->nnames;
	return (uint32_t)fl->nnames - 1;
}

/* ---------- the tree ---------- */

static int nodes_rehash(struct prof_tree *fl)
{
	size_t ns = fl->priv_nslots ? 2 * fl->priv_nslots : 4096;
	uint32_t *s = calloc(ns, sizeof *s);
	if (!s)
		return -ENOMEM;
	for (size_t i = 1; i < fl->n; i++) {
		size_t k = hash_pair(fl->nodes[i].parent, fl->nodes[i].name) & (ns - 1);
		while (s[k])
			k = (k + 1) & (ns - 1);
		s[k] = (uint32_t)i + 1;
	}
	free(fl->priv_slots);
	fl->priv_slots = s;
	fl->priv_nslots = ns;
	return 0;
}

static uint32_t node_new(struct prof_tree *fl, uint32_t parent, uint32_t name)
{
	if (fl->n == fl->priv_cap) {
		size_t nc = fl->priv_cap ? 2 * fl->priv_cap : 1024;
		struct prof_tree_node *nn = realloc(fl->nodes, nc * sizeof *nn);
		if (!nn)
			return PROF_TREE_NONE;
		fl->nodes = nn;
		fl->priv_cap = nc;
	}
	struct prof_tree_node *nd = &fl->nodes[fl->n];
	memset(nd, 0, sizeof *nd);
	nd->name = name;
	nd->parent = parent;
	return (uint32_t)fl->n++;
}

/* The child of parent called name, made when missing; PROF_TREE_NONE when out
 * of memory. */
static uint32_t node_child(struct prof_tree *fl, uint32_t parent, uint32_t name)
{
	if (2 * (fl->n + 1) > fl->priv_nslots && nodes_rehash(fl))
		return PROF_TREE_NONE;
	size_t mask = fl->priv_nslots - 1, k = hash_pair(parent, name) & mask;
	for (; fl->priv_slots[k]; k = (k + 1) & mask) {
		const struct prof_tree_node *c = &fl->nodes[fl->priv_slots[k] - 1];
		if (c->parent == parent && c->name == name)
			return fl->priv_slots[k] - 1;
	}
	uint32_t id = node_new(fl, parent, name);
	if (id != PROF_TREE_NONE)
		fl->priv_slots[k] = id + 1;
	return id;
}

static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static void node_note_frame(struct prof_tree_node *nd, const struct prof_frame *f)
{
	if (!nd->f)
		nd->f = f;
	else if (nd->f != f && (nd->f->line != f->line || !same_str(nd->f->file, f->file)))
		nd->mixed = true;
}

int prof_tree_add(struct prof_tree *fl, const struct prof_profile *p, int v, bool is_base,
		     bool lines, bool reverse)
{
	char buf[4096];
	int rc = 0;
	uint32_t *name_of = malloc((p->nframes + 1) * sizeof *name_of);
	if (!name_of)
		return -ENOMEM;
	for (size_t i = 0; i < p->nframes; i++)
		if ((name_of[i] = name_id(fl, prof_frame_name(&p->frames[i], lines, buf,
							       sizeof buf))) == PROF_TREE_NONE)
			goto nomem;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct prof_sample *s = &p->samples[i];
		int64_t x = s->v[v];
		if (fl->any_sign ? !x : x <= 0)
			continue;
		uint32_t cur = 0;
		for (uint32_t k = 0;; k++) {
			struct prof_tree_node *nd = &fl->nodes[cur];
			*(is_base ? &nd->old : &nd->v) += x;
			if (k == s->nframes) {
				*(is_base ? &nd->old_self : &nd->self) += x;
				nd->ends = true;
				break;
			}
			uint32_t fid = s->frames[reverse ? k : s->nframes - 1 - k];
			if ((cur = node_child(fl, cur, name_of[fid])) == PROF_TREE_NONE)
				goto nomem;
			node_note_frame(&fl->nodes[cur], &p->frames[fid]);
		}
	}
	goto out;
nomem:
	rc = -ENOMEM;
out:
	free(name_of);
	return rc;
}

int prof_tree_init(struct prof_tree *t, bool any_sign)
{
	memset(t, 0, sizeof *t);
	t->any_sign = any_sign;
	return node_new(t, PROF_TREE_NONE, PROF_TREE_NONE) == PROF_TREE_NONE ? -ENOMEM : 0;
}

void prof_tree_release(struct prof_tree *t)
{
	for (size_t i = 0; i < t->nnames; i++)
		free(t->names[i]);
	free(t->names);
	free(t->priv_name_slots);
	free(t->priv_slots);
	free(t->nodes);
	memset(t, 0, sizeof *t);
}
