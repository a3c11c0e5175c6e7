/* fuzz_heapdump — libFuzzer target for the heap dump reader: the input is
 * a dump; when it parses, every stack also goes through the unbiasing
 * maths at the dump's sampling rate and at a few hostile ones. */
#include <stdint.h>
#include <stdio.h>

#include "analyze/unbias.h"
#include "format/heapdump.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* fmemopen of a zero-length buffer fails (EINVAL): read an empty
	 * stream from a one-byte buffer opened for zero bytes instead */
	static const uint8_t empty[1];
	FILE *f = fmemopen((void *)(size ? data : empty), size ? size : 1, "r");
	if (!f)
		return 0;
	if (!size)
		fgetc(f); /* consume the stand-in byte */
	struct fmt_heap_dump d;
	const char *err;
	if (fmt_heap_read(&d, f, &err) == 0) {
		static const uint64_t rates[] = { 1, 2, 524288, UINT64_MAX };
		for (size_t i = 0; i < d.nstacks; i++) {
			const struct fmt_heap_stack *st = &d.stacks[i];
			int64_t c, b;
			/* what the header promises of a parsed dump */
			for (int k = 0; k < FMT_HEAP_NVALUES; k++)
				if (st->v[k] > FMT_HEAP_MAX_COUNT)
					__builtin_trap();
			if (st->depth > FMT_HEAP_MAX_DEPTH || (st->depth && !st->pcs))
				__builtin_trap();
			prof_unbias_counts(d.sample, st->v[0], st->v[1], &c, &b);
			prof_unbias_counts(d.sample, st->v[2], st->v[3], &c, &b);
			for (size_t k = 0; k < sizeof rates / sizeof rates[0]; k++)
				prof_unbias_counts(rates[k], st->v[0], st->v[1], &c, &b);
			volatile uint64_t sink = 0;
			for (uint32_t k = 0; k < st->depth; k++)
				sink += st->pcs[k]; /* every pc is inside the pool */
			(void)sink;
		}
		for (size_t i = 0; i < d.nmaps; i++)
			if (d.maps[i].path[0] != '/')
				__builtin_trap();
		fmt_heap_release(&d);
	} else if (!err) {
		__builtin_trap(); /* a failure must say why */
	}
	fclose(f);
	return 0;
}
