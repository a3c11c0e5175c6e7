/*
 * cfi.h — the DWARF call-frame information parser of the agent's unwinder
 * (cfi.c): from a module's .eh_frame_hdr and .eh_frame, the rule that
 * finds the caller's frame from a frame at a given pc, and the evaluator
 * of the DWARF expressions such a rule may hold.
 *
 * Called by unwind.c on a rule-cache miss, inside malloc hooks and signal
 * handlers: every function here is hook-safe and async-signal-safe, takes
 * no lock, allocates nothing and keeps no state (but whether the kernel
 * refuses copies).
 *
 * The bytes it reads belong to whatever library the target loaded, so
 * they are untrusted: every read of a module stays inside the segment the
 * caller named (cfi_module.seg_lo .. seg_hi), every read of the stack
 * inside the frame's bounds (cfi_frame.lo .. lo + span), and anything
 * malformed or not understood gives a rule that ends the walk instead of
 * a guess. tests/fuzz/fuzz_cfi.c drives it with hostile bytes.
 *
 * The library may also be unloaded by another thread while it is read.
 * The module of a return address that its callee's CFI gave is held by
 * the program (a thread runs inside it) and is read in place; one that a
 * walk reached by a guess (rbp chaining) may be any, so a module marked
 * by_copy, and an expression evaluated by_copy, is read only through
 * agent_copy_self, which fails where a read would fault: what cannot be
 * read gives no rule.
 */
#ifndef HEAPTRAIL_AGENT_CFI_H
#define HEAPTRAIL_AGENT_CFI_H

#include <link.h>
#include <stdbool.h>
#include <stdint.h>

enum cfi_kind {
	CFI_K_NONE = 0,     /* unused slot */
	CFI_K_CFA_RSP,      /* CFA = rsp + off, return address at CFA-8 */
	CFI_K_CFA_RBP,      /* CFA = rbp + off */
	CFI_K_CFA_EXPR,     /* CFA = value of the DWARF expression at expr */
	CFI_K_END,          /* return address undefined: outermost frame */
	CFI_K_STOP,         /* not understood: end the walk */
	CFI_K_FP,           /* no FDE: follow rbp if it looks like a frame */
	CFI_K_NOMOD,        /* like CFI_K_FP, for a pc in no module (never
			     * cached: a library may be loaded there later) */
	CFI_K_SIGNAL,       /* rt_sigreturn trampoline: registers in a ucontext */
};

enum cfi_bp_how {
	CFI_BP_SAME = 0,     /* caller's rbp is this frame's rbp */
	CFI_BP_OFFSET,       /* saved at CFA + off */
	CFI_BP_UNKNOWN,      /* caller's rbp cannot be known */
	CFI_BP_EXPR,         /* saved at the address the expression computes */
};

/* One frame's recipe. off is signed; expr points at a DWARF expression's
 * ULEB128 length inside the module's mapped .eh_frame. */
struct cfi_rule {
	uint8_t kind, bp_how;
	int64_t cfa_off, bp_off;
	const uint8_t *cfa_expr, *bp_expr;
};

/* What a miss needs to know about the object holding a pc. */
struct cfi_module {
	uintptr_t lo, hi;               /* executable PT_LOAD span */
	uintptr_t seg_lo, seg_hi;       /* PT_LOAD holding .eh_frame_hdr */
	uintptr_t hdr;                  /* .eh_frame_hdr, 0 when none */
	bool code_readable;             /* every PF_X segment also PF_R */
	bool by_copy;                   /* read its bytes only by copy (see
					 * below), never in place */
};

/* A frame's registers, and where its stack may be read: 8-byte reads at
 * addresses lo .. lo + span. bp 0: this frame's rbp is not known (no
 * frame can be found from an rbp of 0). */
struct cfi_frame {
	uintptr_t pc, sp, bp;
	uintptr_t lo, span;
};

/* Reads the stack word at addr into *out when it lies inside f's bounds;
 * false (nothing read) otherwise. */
static inline bool cfi_stack_read(const struct cfi_frame *f, uintptr_t addr, uintptr_t *out)
{
	if (addr - f->lo > f->span)
		return false;
	/* an expression may compute any address: not always aligned */
	__builtin_memcpy(out, (const void *)addr, sizeof *out);
	return true;
}

/* Fills m from an object's program headers (loaded at base); false when
 * it has no executable segment. */
bool cfi_describe(uintptr_t base, const ElfW(Phdr) *phdr, int phnum, struct cfi_module *m);

/* The FDE covering address a from m's .eh_frame_hdr table, or NULL (no
 * table, a table layout not read, or no covering entry; the FDE's own
 * range is checked by cfi_rule_from_fde). */
const uint8_t *cfi_fde_search(const struct cfi_module *m, uintptr_t a);

/* Computes the rule for address a from the FDE at fde (inside m's
 * segment). Returns false when the FDE does not cover a (the caller falls
 * back to rbp chaining); true with r->kind CFI_K_STOP when the FDE or its
 * CIE is malformed or holds what the walk does not understand. Expression
 * pointers in r point into m's segment. */
bool cfi_rule_from_fde(const struct cfi_module *m, const uint8_t *fde, uintptr_t a,
		       struct cfi_rule *r);

/* Evaluates the DWARF expression blk (a ULEB128 length, then the bytes:
 * as cfi_rule_from_fde returns it) for frame f, with cfa pushed first
 * when push_cfa. Constants, arithmetic, comparisons, rsp/rbp/rip as base
 * registers and dereferences inside f's stack bounds. False when the
 * expression is malformed, not understood or reads outside the stack. */
bool cfi_eval(const struct cfi_frame *f, const uint8_t *blk, bool push_cfa, uintptr_t cfa,
	      bool by_copy, uintptr_t *out);

/* Whether pc starts the Linux rt_sigreturn trampoline (mov $15, %rax;
 * syscall), read only when m's code is readable and pc inside it. */
bool cfi_is_sigreturn(const struct cfi_module *m, uintptr_t pc);
/* That code: the return address of every signal handler's frame. */
#define CFI_SIGRETURN_LEN 9
extern const uint8_t cfi_sigreturn_code[CFI_SIGRETURN_LEN];

#endif
