/*
 * test_wrappers — the allocation wrappers wrappers.h finds, on stacks
 * written here (leaf first, "a;b;c": a called the allocator, b called
 * a), each program's expected wrappers worked out from who calls whom:
 *
 *   plain     xalloc called by four functions that call only it, each
 *             called by main; make_node called by two: xalloc only
 *   chain     inner called only by outer and outer_z, each called by
 *             three functions: the three of them (inner counts its
 *             callers' callers, 3)
 *   ctor      zmalloc called by create_object (itself called by three
 *             functions), list_create and create_client, which also
 *             calls list_create: zmalloc (3 callers) only; create_object
 *             stays a site, as zmalloc has a caller that does more
 *   helper    zrealloc called by three functions, and when it has no
 *             block to grow, by way of try_malloc, which only it calls,
 *             from one of them: both (try_malloc with its 1 caller:
 *             only a wrapper calls it)
 *   deep      four functions one above another, each called only by
 *             the next, the last by three: longer than
 *             PROF_WRAPPER_CHAIN, nothing folds
 *   unnamed   a leaf called by three functions, one of them an address
 *             ("prog+0x10"): the leaf (3 callers); an address is never
 *             a wrapper even when it calls only the allocator
 *
 * Each program's stacks are also split into two dumps, each trimmed as
 * a digest trims it (prof_wrapper_trim): the same wrappers. Prints
 * "ok - ..." / "not ok - ..." per check; exits 1 when one failed.
 */
#include <stdlib.h>
#include <string.h>

#include "analyze/wrappers.h"
#include "check.h"

#define W (PROF_WRAPPER_CHAIN + 1)
#define MAXS 256

struct set {
	struct prof_wrapper_stack s[MAXS];
	size_t n;
	char store[MAXS][W + 32][64];
};

/* Adds a stack ("leaf;caller;..."): its first frames, and a high entry
 * for each frame past them. */
static void add(struct set *t, const char *stack)
{
	char buf[512];
	snprintf(buf, sizeof buf, "%s", stack);
	struct prof_wrapper_stack *s = &t->s[t->n];
	memset(s, 0, sizeof *s);
	size_t row = t->n++;
	int k = 0;
	for (char *save, *f = strtok_r(buf, ";", &save); f; f = strtok_r(NULL, ";", &save), k++) {
		char *name = t->store[row][k];
		snprintf(name, 64, "%s", f);
		if (k < W) {
			s->fn[k] = name;
			if (strstr(f, "+0x"))
				s->unnamed |= 1u << k;
		} else {
			t->s[t->n++] = (struct prof_wrapper_stack){ .fn = { name }, .high = true };
		}
	}
}

/* The wrappers found, "name/callers" comma-separated, into out. */
static void found(struct prof_wrapper_stack *s, size_t n, char *out, size_t cap)
{
	struct prof_wrapper *w;
	size_t nw;
	out[0] = 0;
	if (prof_wrappers_find(s, n, &w, &nw)) {
		snprintf(out, cap, "ENOMEM");
		return;
	}
	for (size_t i = 0; i < nw; i++) {
		size_t len = strlen(out);
		snprintf(out + len, cap - len, "%s%s/%zu", i ? "," : "", w[i].name, w[i].callers);
	}
	prof_wrappers_release(w, nw);
}

/* The wrappers of t's stacks as two dumps, each trimmed. */
static void found_trimmed(const struct set *t, char *out, size_t cap)
{
	static struct prof_wrapper_stack all[4 * MAXS * W];
	static const char *cut[MAXS * W];
	size_t n = 0, half = t->n / 2;
	for (int d = 0; d < 2; d++) {
		size_t from = d ? half : 0, to = d ? t->n : half, ncut;
		struct prof_wrapper_stack *part = &all[n];
		memcpy(part, &t->s[from], (to - from) * sizeof *part);
		if (prof_wrapper_trim(part, to - from, cut, &ncut)) {
			snprintf(out, cap, "ENOMEM");
			return;
		}
		n += to - from;
		for (size_t i = 0; i < ncut; i++)
			all[n++] = (struct prof_wrapper_stack){ .fn = { cut[i] }, .high = true };
	}
	found(all, n, out, cap);
}

static void expect(const char *what, struct set *t, const char *want)
{
	char got[1024], trimmed[1024];
	found_trimmed(t, trimmed, sizeof trimmed);
	found(t->s, t->n, got, sizeof got);
	check(!strcmp(got, want), "%s: wrappers '%s' (want '%s')", what, got, want);
	check(!strcmp(trimmed, want), "%s, two dumps trimmed: wrappers '%s' (want '%s')", what,
	      trimmed, want);
}

static struct set t;

int main(void)
{
	memset(&t, 0, sizeof t);
	add(&t, "xalloc;leak_requests;main;__libc_start_main;_start");
	add(&t, "xalloc;cache_fill;main;__libc_start_main;_start");
	add(&t, "xalloc;scratch;main;__libc_start_main;_start");
	add(&t, "xalloc;parse_config;main;__libc_start_main;_start");
	add(&t, "make_node;build_index;main;__libc_start_main;_start");
	add(&t, "make_node;leak_nodes;main;__libc_start_main;_start");
	expect("plain", &t, "xalloc/4");

	memset(&t, 0, sizeof t);
	add(&t, "inner;outer;leak_chain;main;_start");
	add(&t, "inner;outer_z;leak_chain;main;_start");
	add(&t, "inner;outer;chain_scratch;main;_start");
	add(&t, "inner;outer_z;chain_scratch;main;_start");
	add(&t, "inner;outer;chain_config;main;_start");
	add(&t, "inner;outer_z;chain_config;main;_start");
	add(&t, "make_node;build_index;main;_start");
	add(&t, "make_node;leak_nodes;main;_start");
	expect("chain", &t, "inner/3,outer/3,outer_z/3");

	memset(&t, 0, sizeof t);
	add(&t, "zmalloc;create_object;create_string;call;main");
	add(&t, "zmalloc;create_object;create_int;call;main");
	add(&t, "zmalloc;create_object;load_data;main;_start");
	add(&t, "zmalloc;create_client;accept;main;_start");
	add(&t, "zmalloc;list_create;create_client;accept;main");
	add(&t, "zmalloc;list_create;init_server;main;_start");
	expect("ctor", &t, "zmalloc/3");

	memset(&t, 0, sizeof t);
	add(&t, "zrealloc;rax_insert;acl_init;main;_start");
	add(&t, "zrealloc;split_args;load_config;main;_start");
	add(&t, "zrealloc;sds_grow;append;main;_start");
	add(&t, "try_malloc;zrealloc;split_args;load_config;main");
	expect("helper", &t, "try_malloc/1,zrealloc/3");

	memset(&t, 0, sizeof t);
	add(&t, "a0;a1;a2;a3;s1;main");
	add(&t, "a0;a1;a2;a3;s2;main");
	add(&t, "a0;a1;a2;a3;s3;main");
	expect("deep", &t, "");

	memset(&t, 0, sizeof t);
	add(&t, "leaf;f;main;_start");
	add(&t, "leaf;g;main;_start");
	add(&t, "leaf;prog+0x10;main;_start");
	add(&t, "prog+0x20;x;main;_start");
	add(&t, "prog+0x20;y;main;_start");
	add(&t, "prog+0x20;z;main;_start");
	expect("unnamed", &t, "leaf/3");
	return failures ? 1 : 0;
}
