/*
 * fnspec — what `--alloc-fn` and its siblings say: a function of the
 * program's, named by its symbol, to treat as one of a pool allocator's
 * operations, and which of its arguments carry what:
 *
 *   AllocSetAlloc(ctx=arg1,size=arg2)->ret
 *   AllocSetFree(ctx=arg1,ptr=arg2)
 *
 * An alloc or realloc function may say where a pool it first meets (one
 * made before heaptrail was there, at an attach) keeps its name:
 * name=*(ctx+K), the word at the pool's value + K being the address of a
 * C string (PostgreSQL 15: palloc(ctx=*(ret-8),size=arg1,name=*(ctx+56))).
 *
 * NAME(ROLE=argN,...) (NAME a C function's, a C++ function's mangled
 * name, or its qualified name: ns::Class::method) with N from 1 to 6 (the integer registers of the
 * System V ABI), then "->ret" when the return value is the block (alloc,
 * realloc) or the pool (create, move). Which roles each kind takes, and
 * which it needs, is in the table of fnspec.c. Parsed by the CLI (to
 * refuse a malformed spec before starting anything) and by the agent (from
 * HEAPTRAIL_OPTIONS: alloc_fn=SPEC,...). No allocation: linked into the
 * agent; every function is hook-safe and signal-safe.
 */
#ifndef HEAPTRAIL_FORMAT_FNSPEC_H
#define HEAPTRAIL_FORMAT_FNSPEC_H

#include <stdbool.h>
#include <stddef.h>

enum fmt_fn_kind {
	FMT_FNK_ALLOC, FMT_FNK_FREE, FMT_FNK_REALLOC, FMT_FNK_RESET, FMT_FNK_DESTROY,
	FMT_FNK_CREATE, FMT_FNK_MOVE, FMT_FNK_TRIM, FMT_FNK_COUNT
};
/* "alloc", "free", ...: the option is KIND_fn (agent) or --KIND-fn (CLI). */
extern const char *const fmt_fn_kind_names[FMT_FNK_COUNT];

enum fmt_fn_role {
	FMT_ROLE_CTX, FMT_ROLE_SIZE, FMT_ROLE_PTR, FMT_ROLE_COUNT, FMT_ROLE_PARENT,
	FMT_ROLE_NAME, FMT_ROLE_MAX
};

#define FMT_FN_NAME_MAX 128
#define FMT_FN_MAX_ARG 6
#define FMT_ARG_RET 7   /* arg[]: the return value (only in *(ret-K)) */
#define FMT_ARG_CTX 8   /* arg[]: the pool's value (only name=*(ctx+K)) */

/* A role's value is argument arg[role] (or the return value), or, when
 * deref[role], the word at that value + off[role]: ctx=*(arg1-8) for an
 * allocator that keeps the pool before each chunk (PostgreSQL's pfree). */
struct fmt_fnspec {
	int kind;
	char name[FMT_FN_NAME_MAX];
	signed char arg[FMT_ROLE_MAX];   /* 1..6: argN, FMT_ARG_RET; 0: not given */
	int off[FMT_ROLE_MAX];
	bool deref[FMT_ROLE_MAX];
	bool ret;                        /* "->ret" */
};

/* The kind named by s[0..n) ("alloc"...), or -1. */
int fmt_fn_kind_parse(const char *s, size_t n);

/* Parses s[0..n) as a spec of kind into *out. Returns NULL, or why it is
 * malformed (a static string, e.g. "size=argN is needed"). */
const char *fmt_fnspec_parse(int kind, const char *s, size_t n, struct fmt_fnspec *out);

#endif
