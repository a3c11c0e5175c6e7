/*
 * tree — the stacks of a profile merged into a tree, root (the outermost
 * caller) first or, reversed, leaf (the allocation site) first: one node
 * per distinct path of frame names (prof_frame_name: the function, or
 * "function file:line"), its value the sum of the samples through it.
 * The flame graph draws it (positive values only); the folded stacks are
 * its nodes where samples end (every non-zero value). A base profile
 * added with is_base fills the nodes' old values.
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
	int64_t self, old_self; /* the part of those of stacks that end here */
	bool ends;              /* a stack ends here (its self may net to 0) */
	const struct prof_frame *f; /* the first frame seen, for file:line */
	bool mixed;             /* frames of several lines merged here */
};

struct prof_tree {
	struct prof_tree_node *nodes; /* nodes[0] is the root; parents before children */
	size_t n;
	char **names;
	size_t nnames;
	bool any_sign;          /* samples of any non-zero value, not just positive ones */
	/* private */
	size_t priv_cap, priv_nslots, priv_names_cap, priv_nname_slots;
	uint32_t *priv_slots;       /* (parent, name) -> node id + 1 */
	uint32_t *priv_name_slots;  /* name -> id + 1 */
};

/* A tree with just its root, that takes the samples of positive value
 * (any_sign: of any non-zero value). 0 or -ENOMEM. */
int prof_tree_init(struct prof_tree *t, bool any_sign);

/* Adds every sample of p with a value v (as init said): into the nodes' v, or
 * their old when is_base. Frames by line when lines; from the leaf when
 * reverse. 0 or -ENOMEM (the tree then holds part of p). */
int prof_tree_add(struct prof_tree *t, const struct prof_profile *p, int v, bool is_base,
		  bool lines, bool reverse);

void prof_tree_release(struct prof_tree *t);

#endif
