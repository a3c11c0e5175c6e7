/* Names shared by the agent (which writes them) and the readers. No
 * allocation here: this file is linked into the agent. */
#include "format/leakfile.h"
#include "format/vocab.h"
#include "agent/banned.h"   /* linked into the agent: held to its rules */

const char *const fmt_alloc_fn_names[FMT_FN_COUNT] = {
	[FMT_FN_MALLOC] = "malloc",
	[FMT_FN_CALLOC] = "calloc",
	[FMT_FN_REALLOC] = "realloc",
	[FMT_FN_REALLOCARRAY] = "reallocarray",
	[FMT_FN_POSIX_MEMALIGN] = "posix_memalign",
	[FMT_FN_ALIGNED_ALLOC] = "aligned_alloc",
	[FMT_FN_MEMALIGN] = "memalign",
	[FMT_FN_VALLOC] = "valloc",
	[FMT_FN_PVALLOC] = "pvalloc",
	[FMT_FN_NEW] = "new",
	[FMT_FN_NEW_ARRAY] = "new[]",
	[FMT_FN_POOL] = "pool_alloc",
	[FMT_FN_MALLOCLIKE] = "malloclike",
	[FMT_FN_MMAP] = "mmap",
	[FMT_FN_FREE] = "free",
	[FMT_FN_DELETE] = "delete",
	[FMT_FN_DELETE_ARRAY] = "delete[]",
};

const char *const fmt_error_kind_names[FMT_ERROR_KIND_COUNT] = {
	[FMT_ERROR_MISMATCHED] = FMT_LEAKS_MISMATCHED,
	[FMT_ERROR_INVALID] = FMT_LEAKS_INVALID,
	[FMT_ERROR_OVERFLOW] = FMT_LEAKS_OVERFLOW,
	[FMT_ERROR_USE_AFTER_FREE] = FMT_LEAKS_USE_AFTER_FREE,
	[FMT_ERROR_SIZE_MISMATCH] = FMT_LEAKS_SIZE_MISMATCH,
	[FMT_ERROR_ALIGN_MISMATCH] = FMT_LEAKS_ALIGN_MISMATCH,
};

const char *const fmt_error_where_names[FMT_WHERE_COUNT] = {
	[FMT_WHERE_NONE] = "-",
	[FMT_WHERE_BLOCK] = FMT_LEAKS_IN_BLOCK,
	[FMT_WHERE_DATA] = FMT_LEAKS_IN_DATA,
	[FMT_WHERE_STACK] = FMT_LEAKS_IN_STACK,
	[FMT_WHERE_FREED] = FMT_LEAKS_IN_FREED,
	[FMT_WHERE_READ] = FMT_LEAKS_READ,
	[FMT_WHERE_WRITE] = FMT_LEAKS_WRITE,
};

const char *const fmt_kind_names[FMT_KIND_COUNT] = {
	[FMT_KIND_IN_USE] = "in_use",
	[FMT_KIND_DEFINITELY] = "definitely_lost",
	[FMT_KIND_INDIRECTLY] = "indirectly_lost",
	[FMT_KIND_POSSIBLY] = "possibly_lost",
	[FMT_KIND_REACHABLE] = "still_reachable",
};
