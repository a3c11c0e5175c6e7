/*
 * tree — the stacks of a profile merged into a tree, root (the outermost
 * caller) first or, reversed, leaf (the allocation site) first: one node
 * per distinct path of frame names (prof_frame_name: the function, or
 * "function file:line"), its value the sum of the samples through it.
 * The flame graph draws it; a base profile added with is_base fills the
 * nodes' old values for a differential graph.
 *
 * Ownership: the tree owns its nodes and names; a node's f points into
 * the profile it came from, which must outlive the tree.
 */
#ifndef HEAPTRAIL_ANALYZE_TREE_H
#define HEAPTRAIL_ANALYZE_TREE_H

#include "analyze/profile.h"

#define PROF_TREE_NONE UINT32_MAX

struct prof_tree_node {
	uint32_t name;          /* index into names; PROF_TREE_NONE for the root */
	uint32_t parent;        /* PROF_TREE_NONE for the root */
	int64_t v, old;         /* value in the profile, in the base */
	const struct prof_frame *f; /* the first frame seen, for file:line */
	bool mixed;             /* frames of several lines merged here */
};

struct prof_tree {
	struct prof_tree_node *nodes; /* nodes[0] is the root; parents before children */
	size_t n;
	char **names;
	size_t nnames;
	/* private */
	size_t priv_cap, priv_nslots, priv_names_cap, priv_nname_slots;
	uint32_t *priv_slots;       /* (parent, name) -> node id + 1 */
	uint32_t *priv_name_slots;  /* name -> id + 1 */
};

/* A tree with just its root. 0 or -ENOMEM. */
int prof_tree_init(struct prof_tree *t);

/* Adds every sample of p with a positive value v: into the nodes' v, or
 * their old when is_base. Frames by line when lines; from the leaf when
 * reverse. 0 or -ENOMEM (the tree then holds part of p). */
int prof_tree_add(struct prof_tree *t, const struct prof_profile *p, int v, bool is_base,
		  bool lines, bool reverse);

void prof_tree_release(struct prof_tree *t);

#endif
