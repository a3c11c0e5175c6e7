/* fuzz_leakfile — libFuzzer target for the leak file reader. */
#include <stdint.h>
#include <string.h>

#include "format/leakfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* what the checks read goes here, so the reads are not optimized away */
volatile uint64_t fuzz_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fmt_leaks l;
	const char *err;
	if (fmt_leaks_parse((const char *)data, size, &l, &err) == 0) {
		uint64_t sink = 0;
		for (size_t i = 0; i < l.nrecords; i++) {
			const struct fmt_stack *st = &l.stacks[l.records[i].stack];
			for (size_t k = 0; k < st->depth; k++)
				sink += st->pcs[k];
			sink += (uint64_t)strlen(fmt_alloc_fn_names[st->fn]);
			sink += (uint64_t)strlen(fmt_kind_names[l.records[i].kind]);
		}
		for (size_t i = 0; i < l.nmodules; i++)
			sink += strlen(l.modules[i].path);
		for (size_t i = 0; i < l.argc; i++)
			sink += strlen(l.argv[i]);
		fuzz_sink = sink;
		fmt_leaks_release(&l);
	} else if (!err) {
		__builtin_trap();
	}
	return 0;
}
