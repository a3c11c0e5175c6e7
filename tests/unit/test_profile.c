/*
 * test_profile — the profile model (analyze/profile.h) loaded from two
 * small dumps written here, and what is computed from it (aggregate.h's
 * table, unbias.h's estimates), checked against values worked out by
 * hand below. No symbolization (no_symbolize): a frame is named
 * "MODULE+0xOFFSET" from the dump's maps.
 *
 * The exact dump (heap_v2/1). Maps: prog at 0x400000 (offset 0) and the
 * agent, libheaptrail.so, at 0x7f0000. Stacks, leaf first:
 *   s1  4: 400 [10: 1000]  ht+0x10 prog+0x100 prog+0x200
 *   s2  1:  64 [ 2:  128]  prog+0x300 prog+0x200
 *   s3  0:   0 [ 5:   50]  prog+0x100 prog+0x400
 * s1's leaf is in the agent's module: dropped at load, so s1's leaf is
 * prog+0x100. Five distinct pcs: five locations and five frames (the
 * dropped one is interned too). Totals: in-use 5 objects, 464 bytes;
 * allocated 17 objects, 1178 bytes.
 * By function, in-use space: prog+0x100 flat 400 cum 400; prog+0x300
 * flat 64 cum 64; prog+0x200 flat 0 cum 464 (s1 + s2); prog+0x400
 * flat 0 cum 0; libheaptrail.so+0x10 (interned, then dropped) 0. Allocated space: prog+0x100 flat 1000 + 50 = 1050;
 * prog+0x300 flat 128; prog+0x200 cum 1128; prog+0x400 cum 50.
 *
 * The sampled dump (heap_v2/1024), one stack "2: 64 [4: 4096]":
 *   in-use: mean block 32 bytes, scale 1 / (1 - e^(-32/1024))
 *     = 1 / (1 - 0.969233234) = 32.5026; 2 x 32.5026 = 65.005 -> 65
 *     objects, 64 x 32.5026 = 2080.17 -> 2080 bytes (truncated, as pprof)
 *   allocated: mean 1024, scale 1 / (1 - e^-1) = 1.581977;
 *     4 x 1.581977 = 6.33 -> 6 objects, 4096 x 1.581977 = 6479.8 -> 6479
 *
 * Prints "ok - ..." / "not ok - ..." per check; exits 1 when one failed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/aggregate.h"
#include "analyze/load.h"
#include "analyze/profile.h"
#include <math.h>

#include "analyze/unbias.h"

static int failures;

static void expect_i64(int64_t got, int64_t want, const char *what)
{
	printf("%s - %s: %" PRId64 " (expected %" PRId64 ")\n", got == want ? "ok" : "not ok", what,
	       got, want);
	if (got != want)
		failures++;
}

static void expect_str(const char *got, const char *want, const char *what)
{
	bool same = got && !strcmp(got, want);
	printf("%s - %s: '%s' (expected '%s')\n", same ? "ok" : "not ok", what,
	       got ? got : "(null)", want);
	if (!same)
		failures++;
}

static const char exact_dump[] =
	"heap profile: 5: 464 [17: 1178] @ heap_v2/1\n"
	"4: 400 [10: 1000] @ 0x7f0010 0x400100 0x400200\n"
	"1: 64 [2: 128] @ 0x400300 0x400200\n"
	"0: 0 [5: 50] @ 0x400100 0x400400\n"
	"\n"
	"MAPPED_LIBRARIES:\n"
	"00400000-00401000 r-xp 00000000 00:00 0 /nonexistent/test/prog\n"
	"007f0000-007f1000 r-xp 00000000 00:00 0 /nonexistent/test/libheaptrail.so\n";

/* exact_dump a moment later: the first stack grew by 2 blocks of 100
 * bytes, the second did not change, the third allocated (and freed) one
 * more block of 100 bytes */
static const char later_dump[] =
	"heap profile: 7: 664 [20: 1478] @ heap_v2/1\n"
	"6: 600 [12: 1200] @ 0x7f0010 0x400100 0x400200\n"
	"1: 64 [2: 128] @ 0x400300 0x400200\n"
	"0: 0 [6: 150] @ 0x400100 0x400400\n"
	"\n"
	"MAPPED_LIBRARIES:\n"
	"00400000-00401000 r-xp 00000000 00:00 0 /nonexistent/test/prog\n"
	"007f0000-007f1000 r-xp 00000000 00:00 0 /nonexistent/test/libheaptrail.so\n";

static const char sampled_dump[] =
	"heap profile: 2: 64 [4: 4096] @ heap_v2/1024\n"
	"2: 64 [4: 4096] @ 0x400100 0x400200\n"
	"\n"
	"MAPPED_LIBRARIES:\n"
	"00400000-00401000 r-xp 00000000 00:00 0 /nonexistent/test/prog\n";

/* Writes text to a fresh file in dir; returns its path (static). */
static const char *write_dump(const char *dir, const char *name, const char *text)
{
	static char path[2][4096];
	static int k;
	char *p = path[k++ & 1];
	snprintf(p, sizeof path[0], "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	if (!f || fputs(text, f) < 0 || fclose(f)) {
		perror(p);
		exit(2);
	}
	return p;
}

static const char *leaf_name(const struct prof_profile *p, size_t i)
{
	const struct prof_sample *s = &p->samples[i];
	return s->nframes ? p->frames[s->frames[0]].function : NULL;
}

static const struct prof_row *row(const struct prof_table *t, const char *name)
{
	for (size_t i = 0; i < t->nrows; i++)
		if (!strcmp(t->rows[i].name, name))
			return &t->rows[i];
	printf("not ok - no row '%s'\n", name);
	failures++;
	static const struct prof_row none;
	return &none;
}

/* Loads the exact dump at path, unsymbolized, into *p; false (and a
 * failure) when it cannot. */
static bool load_exact(const char *path, struct prof_profile *p)
{
	struct prof_load_opts o = { .no_symbolize = true };
	const char *err = NULL;
	if (!prof_profile_load(p, path, &o, &err))
		return true;
	printf("not ok - load the exact dump: %s\n", err);
	failures++;
	return false;
}

static void test_exact(const char *path)
{
	struct prof_profile p;
	const char *err = NULL;
	if (!load_exact(path, &p))
		return;
	expect_i64((int64_t)p.sample, 1, "exact: sample");
	expect_i64((int64_t)p.nsamples, 3, "exact: samples");
	expect_i64((int64_t)p.nlocs, 5, "exact: locations (distinct pcs)");
	expect_i64((int64_t)p.nframes, 5, "exact: frames");
	expect_i64(p.total[PROF_INUSE_OBJECTS], 5, "exact: in-use objects");
	expect_i64(p.total[PROF_INUSE_SPACE], 464, "exact: in-use space");
	expect_i64(p.total[PROF_ALLOC_OBJECTS], 17, "exact: allocated objects");
	expect_i64(p.total[PROF_ALLOC_SPACE], 1178, "exact: allocated space");
	expect_i64(p.samples[0].nframes, 2, "exact: s1 without the agent's frame");
	expect_str(leaf_name(&p, 0), "prog+0x100", "exact: s1's leaf");
	expect_str(leaf_name(&p, 1), "prog+0x300", "exact: s2's leaf");
	expect_i64(p.samples[1].v[PROF_ALLOC_SPACE], 128, "exact: s2 allocated space");
	/* s1 and s2 share the frame of pc 0x400200: one id */
	expect_i64(p.samples[0].frames[1], p.samples[1].frames[1], "exact: shared frame id");

	struct prof_table t;
	if (prof_table_build(&t, &p, false, PROF_INUSE_SPACE, PROF_SORT_FLAT)) {
		printf("not ok - table\n");
		failures++;
	} else {
		/* a row per frame name, the agent's dropped frame too (all zero:
		 * top does not show it) */
		expect_i64((int64_t)t.nrows, 5, "table: rows");
		expect_i64(row(&t, "libheaptrail.so+0x10")->cum[PROF_ALLOC_SPACE], 0,
			   "table: the dropped frame holds nothing");
		expect_str(t.rows[0].name, "prog+0x100", "table: first row by flat");
		expect_i64(row(&t, "prog+0x100")->flat[PROF_INUSE_SPACE], 400, "table: 0x100 flat");
		expect_i64(row(&t, "prog+0x100")->cum[PROF_INUSE_SPACE], 400, "table: 0x100 cum");
		expect_i64(row(&t, "prog+0x300")->flat[PROF_INUSE_SPACE], 64, "table: 0x300 flat");
		expect_i64(row(&t, "prog+0x200")->flat[PROF_INUSE_SPACE], 0, "table: 0x200 flat");
		expect_i64(row(&t, "prog+0x200")->cum[PROF_INUSE_SPACE], 464, "table: 0x200 cum");
		expect_i64(row(&t, "prog+0x400")->cum[PROF_INUSE_SPACE], 0, "table: 0x400 cum");
		expect_i64(row(&t, "prog+0x100")->flat[PROF_ALLOC_SPACE], 1050,
			   "table: 0x100 allocated flat");
		expect_i64(row(&t, "prog+0x300")->flat[PROF_ALLOC_SPACE], 128,
			   "table: 0x300 allocated flat");
		expect_i64(row(&t, "prog+0x200")->cum[PROF_ALLOC_SPACE], 1128,
			   "table: 0x200 allocated cum");
		expect_i64(row(&t, "prog+0x400")->cum[PROF_ALLOC_SPACE], 50,
			   "table: 0x400 allocated cum");
		prof_table_release(&t);
	}

	/* focus on 0x300: s2 alone */
	if (prof_profile_filter(&p, "0x300", NULL, &err)) {
		printf("not ok - filter: %s\n", err);
		failures++;
	} else {
		expect_i64((int64_t)p.nsamples, 1, "filter: samples left");
		expect_i64(p.total[PROF_INUSE_SPACE], 64, "filter: in-use space");
		expect_i64(p.total[PROF_ALLOC_OBJECTS], 2, "filter: allocated objects");
	}
	/* p - p: every value nets to zero, the samples double */
	if (prof_profile_subtract(&p, &p)) {
		printf("not ok - subtract\n");
		failures++;
	} else {
		expect_i64((int64_t)p.nsamples, 2, "subtract: samples");
		expect_i64(p.total[PROF_INUSE_SPACE], 0, "subtract: in-use space");
		expect_i64(p.samples[1].v[PROF_ALLOC_SPACE], -128, "subtract: negated sample");
		expect_i64(p.samples[1].frames[0], p.samples[0].frames[0],
			   "subtract: the base's frames matched by name");
	}
	prof_profile_release(&p);
}

/* prof_profile_hide, on the exact dump: hiding prof+0x100 (s1's and s3's
 * leaf) makes prog+0x200 s1's leaf (flat 400 in use, 1000 allocated) and
 * prog+0x400 s3's (flat 50 allocated); a regex matching every frame of
 * s2 leaves it whole; a bad regex is refused. */
static void test_hide(const char *path)
{
	struct prof_profile p;
	const char *err = NULL;
	if (!load_exact(path, &p))
		return;
	if (prof_profile_hide(&p, "0x100$", &err)) {
		printf("not ok - hide: %s\n", err);
		failures++;
	} else {
		expect_i64(p.samples[0].nframes, 1, "hide: s1's frames left");
		expect_str(leaf_name(&p, 0), "prog+0x200", "hide: s1's leaf");
		expect_str(leaf_name(&p, 2), "prog+0x400", "hide: s3's leaf");
		expect_i64(p.total[PROF_INUSE_SPACE], 464, "hide: in-use space unchanged");
		struct prof_table t;
		if (prof_table_build(&t, &p, false, PROF_INUSE_SPACE, PROF_SORT_FLAT)) {
			printf("not ok - table\n");
			failures++;
		} else {
			expect_i64(row(&t, "prog+0x200")->flat[PROF_INUSE_SPACE], 400, "hide: 0x200 flat");
			expect_i64(row(&t, "prog+0x200")->flat[PROF_ALLOC_SPACE], 1000,
				   "hide: 0x200 allocated flat");
			expect_i64(row(&t, "prog+0x400")->flat[PROF_ALLOC_SPACE], 50,
				   "hide: 0x400 allocated flat");
			prof_table_release(&t);
		}
	}
	if (prof_profile_hide(&p, "prog", &err)) {
		printf("not ok - hide all: %s\n", err);
		failures++;
	} else {
		expect_i64(p.samples[1].nframes, 2, "hide: a stack hidden whole stays whole");
	}
	expect_i64(prof_profile_hide(&p, "(", &err), -EINVAL, "hide: bad regex");
	prof_profile_release(&p);
}

/* prof_profile_delta (the live endpoint's ?seconds=N): what changed,
 * by stack, with the locations kept; the unchanged stack is dropped. */
static void test_delta(const char *old_path, const char *new_path)
{
	struct prof_load_opts o = { .no_symbolize = true };
	struct prof_profile a, b;
	const char *err = NULL;
	if (prof_profile_load(&a, old_path, &o, &err) || prof_profile_load(&b, new_path, &o, &err)) {
		printf("not ok - load the delta's dumps: %s\n", err);
		failures++;
		return;
	}
	if (prof_profile_delta(&b, &a)) {
		printf("not ok - delta\n");
		failures++;
	} else {
		expect_i64((int64_t)b.nsamples, 2, "delta: samples (the unchanged one dropped)");
		expect_i64(b.total[PROF_INUSE_OBJECTS], 2, "delta: in-use objects");
		expect_i64(b.total[PROF_INUSE_SPACE], 200, "delta: in-use space");
		expect_i64(b.total[PROF_ALLOC_OBJECTS], 3, "delta: allocated objects");
		expect_i64(b.total[PROF_ALLOC_SPACE], 300, "delta: allocated space");
		expect_str(leaf_name(&b, 0), "prog+0x100", "delta: the grown stack's leaf");
		expect_i64(b.samples[0].v[PROF_INUSE_SPACE], 200, "delta: the grown stack");
		expect_i64(b.samples[1].v[PROF_ALLOC_SPACE], 100, "delta: the churning stack");
		expect_i64(b.samples[0].locs != NULL, 1, "delta: locations kept (renders as pprof)");
	}
	prof_profile_release(&a);
	prof_profile_release(&b);
}

static void test_sampled(const char *path)
{
	struct prof_load_opts o = { .no_symbolize = true };
	struct prof_profile p;
	const char *err = NULL;
	if (prof_profile_load(&p, path, &o, &err)) {
		printf("not ok - load the sampled dump: %s\n", err);
		failures++;
		return;
	}
	expect_i64((int64_t)p.sample, 1024, "sampled: sample");
	expect_i64(p.total[PROF_INUSE_OBJECTS], 65, "sampled: in-use objects");
	expect_i64(p.total[PROF_INUSE_SPACE], 2080, "sampled: in-use space");
	expect_i64(p.total[PROF_ALLOC_OBJECTS], 6, "sampled: allocated objects");
	expect_i64(p.total[PROF_ALLOC_SPACE], 6479, "sampled: allocated space");
	prof_profile_release(&p);
}

static void test_unbias(void)
{
	int64_t c, b;
	prof_unbias_counts(1, 3, 30, &c, &b);
	expect_i64(c, 3, "unbias: exact counts unchanged");
	expect_i64(b, 30, "unbias: exact bytes unchanged");
	prof_unbias_counts(1024, 0, 64, &c, &b);
	expect_i64(c + b, 0, "unbias: no blocks, nothing");
	/* 2^62 blocks of 1 byte at S = 2^20: far beyond 2^62 after scaling */
	prof_unbias_counts(1u << 20, UINT64_C(1) << 62, UINT64_C(1) << 62, &c, &b);
	expect_i64(c, INT64_C(1) << 62, "unbias: saturated at 2^62");
	/* mean block 1024 at S = 1024: 1 / (1 - e^-1) = 1.5819767 */
	expect_i64((int64_t)(prof_unbias_scale(1024, 4, 4096) * 1e6), 1581976,
		   "unbias: scale for a mean block of S");
	expect_i64((int64_t)(prof_unbias_scale(1, 4, 4096) * 1e6), 1000000, "unbias: exact scale 1");
	expect_i64(prof_value_parse("alloc-space"), PROF_ALLOC_SPACE, "value names: alloc-space");
	expect_i64(prof_value_parse("inuse_objects"), PROF_INUSE_OBJECTS, "value names: inuse_objects");
	expect_i64(prof_value_parse("inuse"), -1, "value names: unknown");
}

/* Draws a Poisson sample of a heap of nblocks blocks of sizes from
 * size(i) the way the agent does (each block sampled with probability
 * 1 - exp(-s/S), independently), unbiases it as load.c does, and
 * counts how often prof_interval90 holds the true total. */
static uint64_t rng_state = 88172645463325252ull;
static double uniform(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (double)(rng_state >> 11) * 0x1.0p-53;
}

static double coverage(uint64_t sample, size_t nblocks, uint64_t (*size)(size_t), int trials)
{
	uint64_t truth = 0;
	for (size_t i = 0; i < nblocks; i++)
		truth += size(i);
	int inside = 0;
	for (int t = 0; t < trials; t++) {
		/* per size, as a dump keeps it per stack */
		uint64_t cnt[4] = { 0 }, bytes[4] = { 0 };
		for (size_t i = 0; i < nblocks; i++) {
			uint64_t s = size(i);
			if (uniform() < -expm1(-(double)s / (double)sample)) {
				cnt[i % 4]++;
				bytes[i % 4] += s;
			}
		}
		double est = 0, var = 0;
		for (int k = 0; k < 4; k++) {
			int64_t c, b;
			double vc, vb;
			prof_unbias_counts(sample, cnt[k], bytes[k], &c, &b);
			prof_unbias_var(sample, cnt[k], bytes[k], &vc, &vb);
			est += (double)b;
			var += vb;
		}
		double lo, hi;
		prof_interval90(est, var, &lo, &hi);
		inside += lo <= (double)truth && (double)truth <= hi;
	}
	return (double)inside / trials;
}

static uint64_t small_blocks(size_t i)
{
	return 1000 + 0 * i;
}

/* four stacks: 512 B, 4 KiB, 64 KiB, 1 MiB blocks */
static uint64_t mixed_blocks(size_t i)
{
	static const uint64_t sz[4] = { 512, 4096, 65536, 1 << 20 };
	return sz[i % 4];
}

static void expect_between(double got, double lo, double hi, const char *what)
{
	bool ok = got >= lo && got <= hi;
	printf("%s - %s: %.3f (expected %.2f to %.2f)\n", ok ? "ok" : "not ok", what, got, lo, hi);
	if (!ok)
		failures++;
}

static void test_interval(void)
{
	double vc, vb, lo, hi;
	/* 4 blocks of mean size S = 1024: p = 1 - e^-1, (1 - p) / p^2 =
	 * 0.9206736; 4 of them, and 1024^2 times that for bytes */
	prof_unbias_var(1024, 4, 4096, &vc, &vb);
	expect_i64((int64_t)(vc * 1e6 + 0.5), 3682694, "variance: count, 4 blocks of S");
	expect_i64((int64_t)(vb + 0.5), 3861585, "variance: bytes, 4 blocks of S");
	prof_unbias_var(1, 4, 4096, &vc, &vb);
	expect_i64((int64_t)(vc + vb), 0, "variance: exact is 0");
	/* X = 100, V = 100: n = 100, lambda = n + z^2/2 -+ z sqrt(n + z^2/4) */
	prof_interval90(100, 100, &lo, &hi);
	expect_i64((int64_t)(lo * 1000 + 0.5), 84849, "interval: low end, n = 100");
	expect_i64((int64_t)(hi * 1000 + 0.5), 117857, "interval: high end, n = 100");
	prof_interval90(5, 0, &lo, &hi);
	expect_i64((int64_t)(lo * 10 + hi), 55, "interval: exact, no width");
	/* one sample: never below zero */
	prof_interval90(1000, 1e6, &lo, &hi);
	expect_i64(lo >= 0 && lo < 1000 && hi > 2000, 1, "interval: one sample, 0 <= lo, wide");
	/* coverage under the sampling itself: ~20 samples of small blocks
	 * (the 10 MB heap at 512 KiB of the issue), ~5 samples, ~200, and a
	 * mix of sizes around S */
	expect_between(coverage(65536, 1311, small_blocks, 4000), 0.86, 0.94,
		       "coverage, about 20 samples of 1000-byte blocks");
	expect_between(coverage(65536, 330, small_blocks, 4000), 0.84, 0.96,
		       "coverage, about 5 samples");
	expect_between(coverage(65536, 13107, small_blocks, 2000), 0.86, 0.94,
		       "coverage, about 200 samples");
	expect_between(coverage(65536, 400, mixed_blocks, 4000), 0.86, 0.95,
		       "coverage, blocks of 512 B to 1 MiB");
}

int main(void)
{
	char dir[] = "/tmp/test_profile.XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 2;
	}
	const char *exact = write_dump(dir, "exact.heap", exact_dump);
	char exact_path[4096];
	snprintf(exact_path, sizeof exact_path, "%s", exact);
	const char *later = write_dump(dir, "later.heap", later_dump);
	test_delta(exact_path, later);
	unlink(later);
	exact = write_dump(dir, "exact.heap", exact_dump);
	const char *sampled = write_dump(dir, "sampled.heap", sampled_dump);
	test_exact(exact);
	test_hide(exact);
	test_sampled(sampled);
	test_unbias();
	test_interval();
	unlink(exact);
	unlink(sampled);
	rmdir(dir);
	return failures ? 1 : 0;
}
