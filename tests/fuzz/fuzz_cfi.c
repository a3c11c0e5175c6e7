/* fuzz_cfi — libFuzzer target for the agent's DWARF CFI parser
 * (src/agent/cfi.c), which reads the .eh_frame of whatever library the
 * target loaded, inside the target.
 *
 * Input: 8 bytes of header, then the bytes of one module segment.
 *   [0, 4)  where .eh_frame_hdr starts in the segment (taken modulo its size)
 *   [4, 8)  the address looked up, relative to .eh_frame_hdr (signed)
 *   [8, )   the segment: .eh_frame_hdr, its table and .eh_frame
 * The segment is copied into a buffer of exactly its size, so a read past
 * its end is an ASan error. For the rule found, each DWARF expression is
 * evaluated on a fake stack whose words come from the input too; the
 * module's code range is the segment itself, so the signal-trampoline
 * check reads it as well.
 *
 * What a parsed rule must satisfy: a known kind, and expression pointers
 * inside the segment.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/cfi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_cfi: %s\n", what);
	abort();
}

static void check_expr(const struct cfi_module *m, const uint8_t *e)
{
	if (e && ((uintptr_t)e < m->seg_lo || (uintptr_t)e >= m->seg_hi))
		fail("an expression outside the segment");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 9)
		return 0;
	size_t n = size - 8;
	uint8_t *seg = malloc(n);
	if (!seg)
		return 0;
	memcpy(seg, data + 8, n);
	struct cfi_module m = {
		.lo = (uintptr_t)seg, .hi = (uintptr_t)seg + n,
		.seg_lo = (uintptr_t)seg, .seg_hi = (uintptr_t)seg + n,
		.hdr = (uintptr_t)seg + le32(data) % n,
		.code_readable = true,
	};
	uintptr_t a = m.hdr + (uintptr_t)(intptr_t)(int32_t)le32(data + 4);

	/* a stack of 64 words, filled from the input's first bytes: the
	 * frame's sp in its middle, rbp pointing into it */
	uintptr_t stack[64];
	for (size_t i = 0; i < 64; i++)
		stack[i] = (uintptr_t)data[i % size] * 0x0101010101010101ull;
	struct cfi_frame f = {
		.pc = a, .sp = (uintptr_t)&stack[16], .bp = (uintptr_t)&stack[32],
		.lo = (uintptr_t)&stack[0], .span = sizeof stack - 8,
	};

	(void)cfi_is_sigreturn(&m, a);
	(void)cfi_is_sigreturn(&m, (uintptr_t)seg + le32(data + 4) % n);
	const uint8_t *fde = cfi_fde_search(&m, a);
	if (fde) {
		if ((uintptr_t)fde < m.seg_lo || (uintptr_t)fde >= m.seg_hi)
			fail("an FDE outside the segment");
		struct cfi_rule r;
		memset(&r, 0, sizeof r);
		if (cfi_rule_from_fde(&m, fde, a, &r)) {
			if (r.kind > CFI_K_SIGNAL || r.bp_how > CFI_BP_EXPR)
				fail("a rule of no known kind");
			check_expr(&m, r.cfa_expr);
			check_expr(&m, r.bp_expr);
			uintptr_t out;
			if (r.cfa_expr)
				(void)cfi_eval(&f, r.cfa_expr, false, 0, false, &out);
			if (r.bp_expr)
				(void)cfi_eval(&f, r.bp_expr, true, f.sp + 16, false, &out);
		}
	}
	free(seg);
	return 0;
}
