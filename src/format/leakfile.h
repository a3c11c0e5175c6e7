/*
 * leakfile — the record of what a process still had allocated when it
 * ended (or when a leak check ran), shared by the agent that writes it and
 * the CLI that reads it.
 *
 * The file is line-oriented text, so it streams, diffs and survives being
 * looked at with less(1). Every name is defined before it is used (modules,
 * then stacks, then records), and the last line is "end": a file without it
 * is truncated and is rejected. Numbers are decimal unless said otherwise;
 * addresses are 0x-prefixed hex. Strings (paths, arguments) are written
 * with '%XX' escapes for '%', bytes <= 0x20 and bytes >= 0x7f, so a
 * line splits on single spaces.
 *
 *   heaptrail-leaks 1
 *   pid 1234
 *   ppid 1200
 *   run ID                          the agent's `run` option: which run
 *                                   wrote the file (absent when not given)
 *   exe /usr/bin/prog
 *   arg ./prog                      one per argv element, in order
 *   exit status 0 | exit signal 9 | exit unknown
 *   totals ALLOCS FREES BYTES_ALLOCATED IN_USE_BYTES IN_USE_BLOCKS
 *   shape temporary=T sizes=N0,...,N31   exact runs: as a heap dump's
 *                                   "# heaptrail-shape" line (vocab.h)
 *   dropped N                       blocks not tracked (agent out of room, or written
 *                                   without a stack in a signal storm: hooks.c)
 *   freeres yes|no                  libc's/libstdc++'s caches released
 *   allocator_bypassed PATH         the program's malloc was PATH's, not
 *                                   the agent's: next to nothing was seen
 *   sample S                        sampling mode: records are raw samples
 *   module BASE LO HI BUILDID|- loaded|unloaded PATH
 *   classified yes                  records carry reachability kinds
 *   summary KIND BYTES BLOCKS       totals per kind (also of records left out)
 *   scan_us N                       how long the reachability scan took
 *   check N all|increased           only in a leak check's file
 *   unstopped_threads N             threads the scan could not stop
 *   stack ID FN PC PC ...           FN: allocator entry point (fmt_alloc_fn)
 *   pool ID PARENT alive|gone BYTES BLOCKS NAME
 *                                   a memory pool (heaptrail_pool_create):
 *                                   its parent's id (0 none), whether it
 *                                   still exists, its chunks now, its
 *                                   name ('-' none); every pool alive, and
 *                                   the gone ones a record names; ids
 *                                   increase
 *   in_pool STACKID POOLID          the stack's blocks are chunks of a pool
 *   record KIND BYTES BLOCKS STACKID [INC_BYTES INC_BLOCKS]
 *   end
 *
 * A pool line comes before the stacks; an in_pool line follows its stack.
 * KIND is a fmt_kind name. A record's optional last two numbers are its
 * increase since the previous check (files of "increased" checks).
 *
 * Lines with an unknown first word are skipped by readers, so the format
 * can grow without breaking old readers; the version number changes only
 * when a line's meaning does.
 */
#ifndef HEAPTRAIL_FORMAT_LEAKFILE_H
#define HEAPTRAIL_FORMAT_LEAKFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/vocab.h"   /* FMT_LEAKS_MAGIC, FMT_LEAKS_VERSION, keywords */
#include "format/heapdump.h" /* struct fmt_shape */

/* Allocator entry points, as recorded per stack (tokens without spaces:
 * "new" is operator new). Kept in this order: the
 * agent writes the index's name, the reader maps it back. */
enum fmt_alloc_fn {
	FMT_FN_MALLOC, FMT_FN_CALLOC, FMT_FN_REALLOC, FMT_FN_REALLOCARRAY,
	FMT_FN_POSIX_MEMALIGN, FMT_FN_ALIGNED_ALLOC, FMT_FN_MEMALIGN,
	FMT_FN_VALLOC, FMT_FN_PVALLOC, FMT_FN_NEW, FMT_FN_NEW_ARRAY,
	FMT_FN_POOL,        /* heaptrail_pool_alloc (VALGRIND_MEMPOOL_ALLOC) */
	FMT_FN_MALLOCLIKE,  /* heaptrail_block_alloc (VALGRIND_MALLOCLIKE_BLOCK) */
	FMT_FN_MMAP,        /* an anonymous mmap or mremap (config mmap=1) */
	/* the stacks of frees done wrong (heap errors): where the block was
	 * given back, and how */
	FMT_FN_FREE, FMT_FN_DELETE, FMT_FN_DELETE_ARRAY,
	FMT_FN_COUNT
};
extern const char *const fmt_alloc_fn_names[FMT_FN_COUNT];

/* Reachability kinds; FMT_KIND_IN_USE is "not classified". */
enum fmt_kind {
	FMT_KIND_IN_USE, FMT_KIND_DEFINITELY, FMT_KIND_INDIRECTLY,
	FMT_KIND_POSSIBLY, FMT_KIND_REACHABLE, FMT_KIND_COUNT
};
extern const char *const fmt_kind_names[FMT_KIND_COUNT];

struct fmt_module {
	char *path;
	char *build_id; /* hex, or NULL */
	uint64_t base, lo, hi;
	bool unloaded;
};

struct fmt_stack {
	uint64_t id;
	int fn;           /* enum fmt_alloc_fn */
	uint64_t *pcs;    /* innermost first */
	size_t depth;
	uint64_t pool;    /* pool id of its blocks (an in_pool line), 0 none */
};

struct fmt_pool {
	uint64_t id, parent;  /* parent 0: none */
	bool alive;
	uint64_t bytes, blocks;
	char *name;           /* "" when it has none */
};

struct fmt_record {
	int kind;         /* enum fmt_kind */
	uint64_t bytes, blocks;
	size_t stack;     /* index into run->stacks */
	bool has_increase;
	uint64_t inc_bytes, inc_blocks;
};

/* Heap errors (frees done wrong), one per context. SIZE_MISMATCH and
 * ALIGN_MISMATCH are a delete of the right family whose size or
 * alignment is not the new's (valgrind 3.22's SizeMismatch and
 * AlignMismatch, ASan's new-delete-type-mismatch). */
enum fmt_error_kind { FMT_ERROR_MISMATCHED, FMT_ERROR_INVALID, FMT_ERROR_OVERFLOW,
		      FMT_ERROR_USE_AFTER_FREE, FMT_ERROR_SIZE_MISMATCH,
		      FMT_ERROR_ALIGN_MISMATCH, FMT_ERROR_KIND_COUNT };
/* A sized or aligned delete that disagrees with its new. */
static inline bool fmt_error_new_delete(int kind)
{
	return kind == FMT_ERROR_SIZE_MISMATCH || kind == FMT_ERROR_ALIGN_MISMATCH;
}
/* A guarded block's fault (--guard): overflow or use_after_free. */
static inline bool fmt_error_guarded(int kind)
{
	return kind == FMT_ERROR_OVERFLOW || kind == FMT_ERROR_USE_AFTER_FREE;
}
extern const char *const fmt_error_kind_names[FMT_ERROR_KIND_COUNT];
/* Where an invalid free's address was; for a guarded block's fault, the
 * access (read or write). */
enum fmt_error_where { FMT_WHERE_NONE, FMT_WHERE_BLOCK, FMT_WHERE_DATA, FMT_WHERE_STACK,
		       FMT_WHERE_FREED, FMT_WHERE_READ, FMT_WHERE_WRITE, FMT_WHERE_COUNT };
extern const char *const fmt_error_where_names[FMT_WHERE_COUNT];

struct fmt_error {
	int kind;           /* enum fmt_error_kind */
	uint64_t count;     /* errors of this context */
	uint64_t size;      /* the block's size (the first error's) */
	size_t alloc_stack; /* index into stacks: where the block was allocated;
			       SIZE_MAX: no block (an invalid free outside any) */
	size_t free_stack;  /* index into stacks: where it was given back (its
			       fn says how: free, delete, delete[]); SIZE_MAX:
			       not given back (an overflow of a live block) */
	uint64_t offset;    /* invalid, in a block: how far past its start; a
			       guarded block's fault: the address's offset from
			       its start (two's complement when before it) */
	int where;          /* invalid, guarded: enum fmt_error_where */
	size_t prev_stack;  /* a double free (FMT_WHERE_FREED): index into
			       stacks of the first free (its caller alone); a
			       guarded block's fault: of the faulting access
			       (its first pc one past the access); SIZE_MAX:
			       none (an overflow into a guarded block's
			       slack, found at its free or a report) */
	uint64_t given;     /* size_mismatch: the size the delete gave;
			       align_mismatch: the alignment it gave (0: an
			       unaligned delete, "default-aligned") */
	uint64_t align;     /* align_mismatch: the block's new's alignment
			       (0: an unaligned new) */
};

struct fmt_leaks {
	long pid, ppid;
	char run[64];     /* the run id ("" when the file names none) */
	char *exe;
	char **argv;
	size_t argc;
	enum { FMT_EXIT_UNKNOWN, FMT_EXIT_STATUS, FMT_EXIT_SIGNAL } exit_how;
	int exit_code;    /* status or signal number */
	uint64_t allocs, frees, bytes_allocated, in_use_bytes, in_use_blocks;
	uint64_t dropped;
	bool freeres;
	char *allocator_bypassed; /* path of the allocator used instead, or NULL */
	uint64_t sample;  /* mean bytes between samples; 0 or 1 = exact */
	struct fmt_shape shape; /* its "shape" line (exact runs) */
	bool classified;  /* kinds computed (else every record is in_use) */
	bool has_summary; /* kind_bytes/kind_blocks below were in the file */
	uint64_t scan_us;
	uint64_t kind_bytes[FMT_KIND_COUNT], kind_blocks[FMT_KIND_COUNT];
	unsigned check;   /* leak check number, 0 for the exit report */
	bool check_increased;
	unsigned unstopped_threads;
	struct fmt_module *modules;
	size_t nmodules;
	struct fmt_stack *stacks;
	size_t nstacks;
	struct fmt_record *records;
	size_t nrecords;
	struct fmt_pool *pools;   /* in the file's order */
	size_t npools;
	struct fmt_error *errors; /* heap errors, in the order first seen */
	size_t nerrors;
	uint64_t errors_dropped;  /* errors beyond the contexts the agent kept */
	bool guard;               /* --guard was on: a "guarded" line */
	uint64_t guarded, guard_full; /* blocks placed on guarded pages; picked
					 while every slot held a live block */
	bool errors_checked;      /* the agent looked for heap errors (a file
				     without the line says nothing of them) */
};

/* The pool of that id, or NULL. */
const struct fmt_pool *fmt_leaks_pool(const struct fmt_leaks *l, uint64_t id);

/* Parses the file at path into *out (zeroed first). Returns 0, or -errno
 * for I/O failures and -EINVAL for a malformed or truncated file; in every
 * failure case *err is set to a static one-line reason (no path in it) and
 * *out holds nothing to release. On success release with fmt_leaks_release. */
int fmt_leaks_read(const char *path, struct fmt_leaks *out, const char **err);

/* Same, from a buffer of len bytes (need not be NUL-terminated). */
int fmt_leaks_parse(const char *buf, size_t len, struct fmt_leaks *out,
		    const char **err);

void fmt_leaks_release(struct fmt_leaks *l);

/* '%XX' escaping as described above. fmt_unescape works in place and
 * returns the new length. fmt_escape_len gives the escaped size without
 * the NUL; fmt_escape writes it (dst must hold fmt_escape_len + 1). */
size_t fmt_escape_len(const char *s);
void fmt_escape(char *dst, const char *s);
size_t fmt_unescape(char *s);

#endif
