/* fuzz_profile — libFuzzer target for the profile model: the input is
 * written to a temporary file and loaded (without symbolization, but the
 * maps section's files are still opened for their load bias), subtracted
 * from itself, filtered and summed into a table by function and by line. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/aggregate.h"
#include "analyze/load.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* what the checks read goes here, so the reads are not optimized away */
volatile uint64_t fuzz_sink;

static char path[64];

/* The input goes to an unlinked temporary file, reached through
 * /proc/self/fd: the loader takes a path, and nothing is left in TMPDIR
 * when the fuzzer stops or crashes. */
static int write_input(const uint8_t *data, size_t size)
{
	if (!path[0]) {
		char tmpl[4096];
		const char *dir = getenv("TMPDIR");
		snprintf(tmpl, sizeof tmpl, "%s/fuzz_profile.XXXXXX", dir && *dir ? dir : "/tmp");
		int fd = mkstemp(tmpl);
		if (fd < 0 || unlink(tmpl))
			abort();
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	}
	FILE *f = fopen(path, "w");
	if (!f)
		abort();
	if (size && fwrite(data, 1, size, f) != size)
		abort();
	if (fclose(f))
		abort();
	return 0;
}

static void table(const struct prof_profile *p, bool lines, int v, enum prof_sort sort)
{
	struct prof_table t;
	if (prof_table_build(&t, p, lines, v, sort))
		return;
	int64_t sink = 0;
	for (size_t i = 0; i < t.nrows; i++)
		sink += t.rows[i].flat[v] + t.rows[i].cum[v] + (int64_t)strlen(t.rows[i].name);
	fuzz_sink = (uint64_t)sink;
	prof_table_release(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct prof_load_opts opts = { .no_symbolize = true };
	struct prof_profile p;
	const char *err;
	write_input(data, size);
	if (prof_profile_load(&p, path, &opts, &err)) {
		if (!err)
			__builtin_trap();
		return 0;
	}
	table(&p, false, PROF_INUSE_SPACE, PROF_SORT_FLAT);
	table(&p, true, PROF_ALLOC_OBJECTS, PROF_SORT_CUM);
	if (prof_profile_subtract(&p, &p) == 0)
		table(&p, false, PROF_INUSE_SPACE, PROF_SORT_GROWTH);
	if (prof_profile_filter(&p, "^0x|\\+0x", "x[0-9]", &err) == 0)
		table(&p, true, PROF_INUSE_OBJECTS, PROF_SORT_FLAT);
	prof_profile_release(&p);
	return 0;
}
