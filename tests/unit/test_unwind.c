// build: agent
/*
 * test_unwind — the agent's CFI unwinder (src/agent/unwind.c) against
 * libunwind's unw_backtrace, the unwinder it replaces, on this very
 * process: plain call chains, a deep recursion, a second thread, a call
 * through libc (a qsort comparator), frames whose CFA is rbp or a DWARF
 * expression, signal handlers (on the thread's stack and on an alternate
 * stack), code without an FDE (frame-pointer fallback), frames that lie
 * (must stop, not crash), the agent's own-frame skipping, a library
 * loaded, unloaded and loaded again (zlib, whose allocator callback is
 * where we unwind from), many threads unwinding at once while the cache is
 * flushed under them, fork() while other threads unwind, and a module
 * read by copy (a walk that guessed) that is unmapped under the parser.
 *
 * Both unwinders are called through one indirect call site, so their lists
 * must be identical pc for pc, down to the outermost frame (_start or the
 * clone3 thread entry, whose CFI marks the return address undefined).
 *
 * Built by the Makefile against the agent's objects, or with the unwinder
 * linked in directly:
 *   cc -O2 -g -fomit-frame-pointer -D_GNU_SOURCE -Iinclude -Isrc \
 *      tests/unit/test_unwind.c src/agent/unwind.c src/agent/cfi.c src/agent/os.c \
 *      -lunwind -lpthread -ldl
 * Prints "ok - ..." / "not ok - ..." per check and exits 1 when one failed.
 */
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "agent/agent.h"
#include "agent/cfi.h"
#include "agent/unwind.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#if __has_include(<zlib.h>)
#include <zlib.h>
#include "check.h"
#define HAVE_ZLIB 1
#endif

/* What the agent's startup.c defines (the test links only the unwinder
 * and os.c): the agent's own text, which the unwinder skips. */
uintptr_t agent_self_lo, agent_self_hi;

#define MAXF 256

/* ---- capturing both lists from one call site --------------------------- */

typedef int (*unwind_fn)(uintptr_t *, int);

struct trace {
	int n;
	uintptr_t pc[MAXF];
};

struct pair {
	struct trace t[2];      /* [0] ours, [1] libunwind */
};

/* unw_backtrace(void **, int) is called through the same pointer type as
 * ours (the two pointer types are passed alike), with no wrapper frame in
 * between, so at any -O both lists start at the same return address. */
static unwind_fn fns[2] = { agent_unwind_cfi, (unwind_fn)(void (*)(void))unw_backtrace };
static volatile int nfns = 2;
static volatile unsigned sink;

static AGENT_NOINLINE int capture(unwind_fn fn, uintptr_t *buf, int max)
{
	int n = fn(buf, max);
	__asm__ volatile("" ::: "memory");
	return n;
}

static AGENT_NOINLINE void capture_both(struct pair *p, int max)
{
	/* One call site for both: i is hidden from the optimiser so that it
	 * cannot peel the loop into two calls. */
	for (int i = 0; i < nfns; i++) {
		int k = i;
		__asm__ volatile("" : "+r"(k));
		p->t[k].n = capture(fns[k], p->t[k].pc, max);
	}
	__asm__ volatile("" ::: "memory");
}

static void print_trace(const char *label, const struct trace *t)
{
	printf("#   %s (%d frames)\n", label, t->n);
	for (int i = 0; i < t->n; i++) {
		Dl_info d;
		const char *sym = dladdr((void *)t->pc[i], &d) && d.dli_sname ? d.dli_sname : "?";
		printf("#     %2d %#lx %s\n", i, (unsigned long)t->pc[i], sym);
	}
}

static bool same(const struct trace *a, const struct trace *b)
{
	return a->n == b->n && memcmp(a->pc, b->pc, sizeof a->pc[0] * (size_t)a->n) == 0;
}

static bool compare(const struct pair *p, int min_frames, const char *what)
{
	bool ok = same(&p->t[0], &p->t[1]) && p->t[0].n >= min_frames;
	check(ok, "%s: %d frames, same as unw_backtrace", what, p->t[0].n);
	if (!ok) {
		print_trace("agent_unwind_cfi", &p->t[0]);
		print_trace("unw_backtrace", &p->t[1]);
	}
	return ok;
}

/* ---- a call chain 5 deep ------------------------------------------------ */

static AGENT_NOINLINE int chain5(struct pair *p, int max);
static AGENT_NOINLINE int chain4(struct pair *p, int max);
static AGENT_NOINLINE int chain3(struct pair *p, int max);
static AGENT_NOINLINE int chain2(struct pair *p, int max);

static AGENT_NOINLINE int chain1(struct pair *p, int max)
{
	capture_both(p, max);
	sink++;
	return 1;
}

static AGENT_NOINLINE int chain2(struct pair *p, int max) { int r = chain1(p, max); sink += r; return r + 1; }
static AGENT_NOINLINE int chain3(struct pair *p, int max) { int r = chain2(p, max); sink += r; return r + 1; }
static AGENT_NOINLINE int chain4(struct pair *p, int max) { int r = chain3(p, max); sink += r; return r + 1; }
static AGENT_NOINLINE int chain5(struct pair *p, int max) { int r = chain4(p, max); sink += r; return r + 1; }

static struct pair pairs[4];

static void test_chain(void)
{
	/* One call site (the loop must stay a loop), so the three lists must
	 * be equal to each other. */
	for (int i = 0; i < nfns + 1; i++) {
		int k = i;
		__asm__ volatile("" : "+r"(k));
		if (k == 2)
			agent_unwind_cfi_flush();
		chain5(&pairs[k], MAXF);
	}
	compare(&pairs[0], 9, "chain 5 deep, first time (cache misses)");
	compare(&pairs[1], 9, "chain 5 deep, again (cache hits)");
	compare(&pairs[2], 9, "chain 5 deep, after a flush");
	check(same(&pairs[0].t[0], &pairs[1].t[0]) && same(&pairs[0].t[0], &pairs[2].t[0]),
	      "chain 5 deep: cold, warm and flushed lists agree");
}

/* Both unwinders start at the return address into capture(). */
static void test_alignment(void)
{
	Dl_info a, b;
	chain5(&pairs[0], MAXF);
	bool ok = pairs[0].t[0].n > 2 && pairs[0].t[1].n > 2 &&
		  pairs[0].t[0].pc[0] == pairs[0].t[1].pc[0] &&
		  dladdr((void *)pairs[0].t[0].pc[0], &a) && dladdr((void *)(uintptr_t)capture, &b) &&
		  a.dli_fbase == b.dli_fbase;
	check(ok, "the first pc is the return address into the unwinder's caller");
}

/* ---- a 60-deep recursion, and truncation -------------------------------- */

static AGENT_NOINLINE int recurse(int depth, struct pair *p, int max)
{
	if (depth == 0) {
		capture_both(p, max);
		return 0;
	}
	int r = recurse(depth - 1, p, max);
	sink += (unsigned)r;
	return r + depth;
}

static void test_recursion(void)
{
	recurse(60, &pairs[0], MAXF);
	compare(&pairs[0], 64, "recursion 60 deep");
	recurse(60, &pairs[1], MAXF);
	compare(&pairs[1], 64, "recursion 60 deep, warm");
	recurse(60, &pairs[2], 3);
	compare(&pairs[2], 3, "recursion 60 deep, max 3");
	bool ok = pairs[2].t[0].n == 3;
	check(ok, "max bounds the list (3 of 60+)");
	recurse(60, &pairs[3], 1);
	check(pairs[3].t[0].n == 1 && pairs[3].t[0].pc[0] == pairs[2].t[0].pc[0], "max 1");
	check(agent_unwind_cfi(pairs[3].t[0].pc, 0) == 0, "max 0 captures nothing");
}

/* ---- frames whose CFA is rbp (a VLA) ------------------------------------ */

static AGENT_NOINLINE int vla_frame(int n, struct pair *p, int max)
{
	volatile char buf[n];
	buf[0] = (char)n;
	int r = chain3(p, max);
	return r + buf[0];
}

static void test_vla(void)
{
	vla_frame(100 + (int)(sink & 1), &pairs[0], MAXF);
	compare(&pairs[0], 7, "through a frame with CFA = rbp + 16 (VLA)");
}

/* ---- a frame described by DWARF expressions ------------------------------
 * GCC's "DRAP" shape for realigned frames: CFA = *(rbp - 8), rbp saved at
 * [rbp]. expr_frame(fn, p, max) calls fn(p, max). */
int expr_frame(int (*fn)(struct pair *, int), struct pair *p, int max);
__asm__(".pushsection .text\n"
	".type expr_frame, @function\n"
	"expr_frame:\n"
	".cfi_startproc\n"
	"	lea 8(%rsp), %r10\n"
	"	.cfi_def_cfa %r10, 0\n"
	"	and $-64, %rsp\n"
	"	pushq -8(%r10)\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	push %r10\n"
	/* DW_CFA_def_cfa_expression { DW_OP_breg6 -8; DW_OP_deref } */
	"	.cfi_escape 0x0f, 0x03, 0x76, 0x78, 0x06\n"
	/* DW_CFA_expression rbp { DW_OP_breg6 0 } */
	"	.cfi_escape 0x10, 0x06, 0x02, 0x76, 0x00\n"
	"	sub $8, %rsp\n"
	"	mov %rdi, %rax\n"
	"	mov %rsi, %rdi\n"
	"	mov %edx, %esi\n"
	"	call *%rax\n"
	"	mov -8(%rbp), %r10\n"
	"	.cfi_def_cfa %r10, 0\n"
	"	leave\n"
	"	.cfi_restore %rbp\n"
	"	lea -8(%r10), %rsp\n"
	"	.cfi_def_cfa %rsp, 8\n"
	"	ret\n"
	".cfi_endproc\n"
	".size expr_frame, .-expr_frame\n"
	".popsection\n");

static AGENT_NOINLINE int via_expr(struct pair *p, int max)
{
	int r = expr_frame(chain2, p, max);
	sink += (unsigned)r;
	return r;
}

static void test_expr(void)
{
	via_expr(&pairs[0], MAXF);
	compare(&pairs[0], 7, "through a frame with CFA and rbp given by DWARF expressions");
}

/* ---- a second thread ----------------------------------------------------- */

static void *thread_main(void *arg)
{
	chain5(arg, MAXF);
	return NULL;
}

static void test_thread(void)
{
	pthread_t th;
	pthread_create(&th, NULL, thread_main, &pairs[0]);
	pthread_join(th, NULL);
	compare(&pairs[0], 9, "chain 5 deep on a second thread (down to clone3)");
}

/* ---- through libc: a qsort comparator ---------------------------------- */

static struct pair *qsort_pair;

static int by_value(const void *a, const void *b)
{
	if (qsort_pair) {
		capture_both(qsort_pair, MAXF);
		qsort_pair = NULL;
	}
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

static AGENT_NOINLINE void sort_some(struct pair *p)
{
	int v[64];
	for (int i = 0; i < 64; i++)
		v[i] = (i * 37) % 64;
	qsort_pair = p;
	qsort(v, 64, sizeof v[0], by_value);
	sink += (unsigned)v[7];
}

static void test_qsort(void)
{
	sort_some(&pairs[0]);
	Dl_info d;
	bool libc = false;
	for (int i = 0; i < pairs[0].t[0].n; i++)
		if (dladdr((void *)pairs[0].t[0].pc[i], &d) && d.dli_fname && strstr(d.dli_fname, "libc.so"))
			libc = true;
	compare(&pairs[0], 6, "from a qsort comparator back through libc");
	check(libc, "the qsort stack has frames inside libc.so");
}

/* ---- signal frames ------------------------------------------------------- */

static struct pair *signal_pair;

static void on_signal(int sig)
{
	capture_both(signal_pair, MAXF);
}

static AGENT_NOINLINE void raise_here(struct pair *p, int sig)
{
	signal_pair = p;
	raise(sig);
	sink++;
}

static bool has_pc_in(const struct trace *t, void *fn, size_t len)
{
	for (int i = 0; i < t->n; i++)
		if (t->pc[i] >= (uintptr_t)fn && t->pc[i] < (uintptr_t)fn + len)
			return true;
	return false;
}

static void test_signal(void)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	raise_here(&pairs[0], SIGUSR1);
	compare(&pairs[0], 8, "from a signal handler, through the sigreturn frame");
	check(has_pc_in(&pairs[0].t[0], (void *)(uintptr_t)raise_here, 64),
	      "the signal stack continues into the code that raised it");

	/* The same on an alternate signal stack: the walk must hop stacks. */
	size_t alt_size = 256 * 1024;
	stack_t ss = { .ss_sp = mmap(NULL, alt_size, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
		       .ss_size = alt_size };
	sigaltstack(&ss, NULL);
	sa.sa_flags = SA_ONSTACK;
	sigaction(SIGUSR2, &sa, NULL);
	raise_here(&pairs[1], SIGUSR2);
	compare(&pairs[1], 8, "from a signal handler on an alternate stack");
	check(has_pc_in(&pairs[1].t[0], (void *)(uintptr_t)raise_here, 64),
	      "the alternate-stack walk continues on the thread's stack");
	ss.ss_flags = SS_DISABLE;
	sigaltstack(&ss, NULL);
}

/* ---- code without an FDE ---------------------------------------------------
 * Stubs in anonymous executable memory, like JIT code: stub(fn, arg)
 * calls fn() with rbp set as the stub's bytes say. */

static struct pair *jit_pair;

static AGENT_NOINLINE void jit_callee(void)
{
	capture_both(jit_pair, MAXF);
	sink++;
}

typedef void (*stub_fn)(void (*fn)(void), void *arg);

static stub_fn make_stub(const unsigned char *code, size_t len)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	memcpy(p, code, len);
	if (mprotect(p, 4096, PROT_READ | PROT_EXEC) != 0)
		return NULL;
	return (stub_fn)p;
}

static AGENT_NOINLINE void call_stub(stub_fn stub, void *arg)
{
	stub(jit_callee, arg);
	sink++;
}

static void test_no_fde(void)
{
	/* push rbp; mov rsp,rbp; call *rdi; pop rbp; ret — a frame-pointer frame */
	static const unsigned char fp_code[] = { 0x55, 0x48, 0x89, 0xe5, 0xff, 0xd7, 0x5d, 0xc3 };
	/* push rbp; mov $0x1234,rbp; call *rdi; pop rbp; ret — rbp is garbage */
	static const unsigned char bad_code[] = { 0x55, 0x48, 0xc7, 0xc5, 0x34, 0x12, 0x00, 0x00,
						  0xff, 0xd7, 0x5d, 0xc3 };
	/* push rbp; mov rsi,rbp; call *rdi; pop rbp; ret — rbp points at a fake frame */
	static const unsigned char fake_code[] = { 0x55, 0x48, 0x89, 0xf5, 0xff, 0xd7, 0x5d, 0xc3 };

	stub_fn fp = make_stub(fp_code, sizeof fp_code);
	stub_fn bad = make_stub(bad_code, sizeof bad_code);
	stub_fn fake = make_stub(fake_code, sizeof fake_code);
	if (!fp || !bad || !fake) {
		check(false, "cannot map executable memory for the no-FDE tests");
		return;
	}

	/* Through the frame-pointer stub: the walk follows rbp across it and
	 * must then find call_stub and its callers as libunwind does. */
	jit_pair = &pairs[0];
	call_stub(fp, NULL);
	compare(&pairs[0], 6, "through code without an FDE (rbp chain)");
	jit_pair = &pairs[1];
	call_stub(fp, NULL);
	compare(&pairs[1], 6, "through code without an FDE, warm");
	/* cold: each frame past the stub is a miss of a walk that guessed,
	 * whose modules are read by copy */
	agent_unwind_cfi_flush();
	jit_pair = &pairs[1];
	call_stub(fp, NULL);
	compare(&pairs[1], 6, "through code without an FDE, cold (modules read by copy)");

	/* rbp garbage: the walk must stop at the stub, not crash. */
	jit_pair = &pairs[2];
	call_stub(bad, NULL);
	const struct trace *t = &pairs[2].t[0];
	check(t->n == 4 && t->pc[3] >= (uintptr_t)bad && t->pc[3] < (uintptr_t)bad + sizeof bad_code,
	      "code without an FDE and a garbage rbp: the walk ends at that code (%d frames)", t->n);

	/* rbp points at a fake frame whose return address is garbage and whose
	 * saved rbp loops back: one bogus pc at most, then a clean stop. */
	volatile uintptr_t frame[2];
	frame[0] = (uintptr_t)frame;
	frame[1] = 0x4141414141414141ull;
	jit_pair = &pairs[3];
	call_stub(fake, (void *)frame);
	t = &pairs[3].t[0];
	check(t->n == 5 && t->pc[4] == 0x4141414141414141ull,
	      "a fake frame with a looping rbp: stops after its bogus pc (%d frames)", t->n);
}

/* ---- a module that vanishes ----------------------------------------------- */

struct own_seg {
	uintptr_t a;
	struct cfi_module m;
	bool have;
};

static int own_seg_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct own_seg *o = arg;
	struct cfi_module m;
	(void)size;
	if (!o->have && cfi_describe(info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum, &m) &&
	    o->a >= m.lo && o->a < m.hi && m.hdr) {
		m.by_copy = false;
		o->m = m;
		o->have = true;
	}
	return 0;
}

/* A walk that went by rbp chaining reads the module of each later pc by
 * copy, as that pc may lie in a library another thread is unloading.
 * This program's .eh_frame segment is copied to a fresh mapping (the
 * table and the FDEs are position-independent, so the copy describes
 * the same code moved by delta): read by copy, it gives the rules the
 * original gives in place; once unmapped, every reader finds nothing
 * instead of faulting (in place, each would die of SIGSEGV). */
static void test_vanished(void)
{
	struct own_seg o = { .a = (uintptr_t)test_chain + 4 };
	dl_iterate_phdr(own_seg_cb, &o);
	if (!o.have) {
		check(false, "this program's .eh_frame_hdr found");
		return;
	}
	size_t off = o.m.seg_lo & 4095, len = (off + o.m.seg_hi - o.m.seg_lo + 4095) & ~(size_t)4095;
	uint8_t *copy = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (copy == MAP_FAILED) {
		check(false, "cannot map %zu bytes", len);
		return;
	}
	memcpy(copy + off, (const void *)o.m.seg_lo, o.m.seg_hi - o.m.seg_lo);
	uintptr_t delta = (uintptr_t)copy + off - o.m.seg_lo;
	struct cfi_module c = o.m;
	c.seg_lo += delta, c.seg_hi += delta, c.hdr += delta;
	c.lo = c.seg_lo, c.hi = c.seg_hi, c.code_readable = true;
	c.by_copy = true;

	/* functions of this file: the same rules from the copy */
	static void (*const funcs[])(void) = { test_chain, test_alignment, test_recursion,
					     test_vla, test_expr, test_thread, test_qsort,
					     test_signal, test_no_fde };
	int same_rules = 0, total = 0;
	const uint8_t *fde_copy = NULL, *expr_copy = NULL;
	uintptr_t a_copy = 0;
	for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++) {
		for (uintptr_t k = 1; k < 64; k += 7) {
			uintptr_t a = (uintptr_t)funcs[i] + k;
			const uint8_t *f0 = cfi_fde_search(&o.m, a);
			const uint8_t *f1 = cfi_fde_search(&c, a + delta);
			struct cfi_rule r0, r1;
			memset(&r0, 0, sizeof r0);
			memset(&r1, 0, sizeof r1);
			bool g0 = f0 && cfi_rule_from_fde(&o.m, f0, a, &r0);
			bool g1 = f1 && cfi_rule_from_fde(&c, f1, a + delta, &r1);
			total++;
			if (f1 == (f0 ? f0 + delta : NULL) && g0 == g1 && r0.kind == r1.kind &&
			    r0.bp_how == r1.bp_how && r0.cfa_off == r1.cfa_off && r0.bp_off == r1.bp_off &&
			    r1.cfa_expr == (r0.cfa_expr ? r0.cfa_expr + delta : NULL) &&
			    r1.bp_expr == (r0.bp_expr ? r0.bp_expr + delta : NULL))
				same_rules++;
			if (g1 && !fde_copy) {
				fde_copy = f1;
				a_copy = a + delta;
			}
			if (g1 && r1.cfa_expr && !expr_copy)
				expr_copy = r1.cfa_expr;
		}
	}
	check(total && same_rules == total && fde_copy,
	      "a module read by copy gives the rules read in place (%d of %d)", same_rules, total);

	munmap(copy, len);
	struct cfi_rule r;
	memset(&r, 0, sizeof r);
	struct cfi_frame f = { .pc = a_copy, .sp = (uintptr_t)&r, .bp = 0,
			       .lo = (uintptr_t)&r, .span = 0 };
	uintptr_t out;
	check(cfi_fde_search(&c, a_copy) == NULL, "unmapped module: no FDE found");
	check(!cfi_rule_from_fde(&c, fde_copy, a_copy, &r), "unmapped module: no rule from its FDE");
	check(!cfi_is_sigreturn(&c, a_copy), "unmapped module: no signal trampoline");
	check(!cfi_eval(&f, expr_copy ? expr_copy : (const uint8_t *)c.hdr, false, 0, true, &out),
	      "unmapped module: its expression is not evaluated");
}

/* ---- skipping the agent's own frames --------------------------------------- */

static void test_skip(void)
{
	chain5(&pairs[0], MAXF);
	/* Pretend capture() is the agent: its return address is dropped. */
	agent_self_lo = pairs[0].t[1].pc[0];
	agent_self_hi = agent_self_lo + 1;
	chain5(&pairs[1], MAXF);
	agent_self_lo = agent_self_hi = 0;
	const struct trace *mine = &pairs[1].t[0], *ref = &pairs[1].t[1];
	bool ok = mine->n == ref->n - 1 &&
		  memcmp(mine->pc, ref->pc + 1, sizeof mine->pc[0] * (size_t)mine->n) == 0;
	check(ok, "leading frames inside [agent_self_lo, agent_self_hi) are skipped");
}

/* ---- many threads at once, with flushes ----------------------------------- */

#define STRESS_THREADS 6
#define STRESS_ROUNDS 3000

struct stress {
	int id, bad;
	uint64_t rng;
	struct pair p;
};

static void *stress_main(void *arg)
{
	struct stress *s = arg;
	for (int i = 0; i < STRESS_ROUNDS; i++) {
		s->rng ^= s->rng << 13;
		s->rng ^= s->rng >> 7;
		s->rng ^= s->rng << 17;
		int depth = (int)(s->rng % 45);
		if (s->rng & 64)
			recurse(depth, &s->p, MAXF);
		else
			vla_frame(depth + 1, &s->p, MAXF);
		if (!same(&s->p.t[0], &s->p.t[1]))
			s->bad++;
		if (s->id == 0 && i % 97 == 0)
			agent_unwind_cfi_flush();
	}
	return NULL;
}

static void test_stress(void)
{
	static struct stress st[STRESS_THREADS];
	pthread_t th[STRESS_THREADS];
	for (int i = 0; i < STRESS_THREADS; i++) {
		st[i].id = i;
		st[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		pthread_create(&th[i], NULL, stress_main, &st[i]);
	}
	int bad = 0;
	for (int i = 0; i < STRESS_THREADS; i++) {
		pthread_join(th[i], NULL);
		bad += st[i].bad;
	}
	check(bad == 0, "%d threads x %d unwinds with cache flushes: %d mismatches",
	      STRESS_THREADS, STRESS_ROUNDS, bad);
}

/* ---- a library loaded and unloaded ------------------------------------- */

#ifdef HAVE_ZLIB
static struct pair *z_pair;

static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
	if (z_pair) {
		capture_both(z_pair, MAXF);
		z_pair = NULL;
	}
	return calloc(items, size);
}

static void z_free(voidpf opaque, voidpf p)
{
	free(p);
}

/* Runs zlib's deflateInit_ from lib, unwinding from its first allocation. */
static AGENT_NOINLINE bool deflate_in(void *lib, struct pair *p)
{
	int (*init)(z_streamp, int, const char *, int) =
		(int (*)(z_streamp, int, const char *, int))dlsym(lib, "deflateInit_");
	int (*end)(z_streamp) = (int (*)(z_streamp))dlsym(lib, "deflateEnd");
	if (!init || !end)
		return false;
	z_stream zs;
	memset(&zs, 0, sizeof zs);
	zs.zalloc = z_alloc;
	zs.zfree = z_free;
	z_pair = p;
	if (init(&zs, 6, ZLIB_VERSION, (int)sizeof zs) != Z_OK)
		return false;
	end(&zs);
	sink++;
	return true;
}

static bool in_module(const struct trace *t, const char *name)
{
	Dl_info d;
	for (int i = 0; i < t->n; i++)
		if (dladdr((void *)t->pc[i], &d) && d.dli_fname && strstr(d.dli_fname, name))
			return true;
	return false;
}
#endif

static void test_dlopen(void)
{
#ifdef HAVE_ZLIB
	/* Loaded, unloaded, loaded again: each time the module list changes
	 * and the next miss must notice (a rebuild; a flush after the unload). */
	for (int round = 0; round < 2; round++) {
		void *lib = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
		if (!lib) {
			check(true, "through a dlopen'd library # SKIP no libz.so.1");
			return;
		}
		bool ran = deflate_in(lib, &pairs[0]);
		check(ran, "zlib's deflateInit_ called our allocator (round %d)", round + 1);
		if (ran) {
			compare(&pairs[0], 6, round ? "through a library dlopen'd again after dlclose"
						    : "through a dlopen'd library (zlib's allocator callback)");
			check(in_module(&pairs[0].t[0], "libz.so"), "the stack has frames inside libz.so");
		}
		dlclose(lib);
		chain5(&pairs[1], MAXF);
		compare(&pairs[1], 9, "a fresh stack after dlclose");
	}
#else
	check(true, "through a dlopen'd library # SKIP no zlib.h");
#endif
}

/* ---- fork while other threads unwind ---------------------------------------- */

static atomic_int spin_stop;

static AGENT_NOINLINE int spin_down(int depth, uintptr_t *pcs)
{
	if (depth == 0)
		return agent_unwind_cfi(pcs, MAXF);
	int r = spin_down(depth - 1, pcs);
	sink += (unsigned)r;
	return r;
}

static void *spinner(void *arg)
{
	uintptr_t pcs[MAXF];
	for (long i = 0; !atomic_load(&spin_stop); i++) {
		spin_down((int)(i % 30), pcs);
		if (i % 64 == 0)
			agent_unwind_cfi_flush();   /* keep misses (and writers) going */
	}
	return NULL;
}

static void test_fork(void)
{
	pthread_t th[2];
	int bad = 0, children = 40;
	atomic_store(&spin_stop, 0);
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, spinner, NULL);
	for (int i = 0; i < children; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			alarm(20);      /* a deadlock shows as SIGALRM */
			chain5(&pairs[0], MAXF);
			_exit(same(&pairs[0].t[0], &pairs[0].t[1]) && pairs[0].t[0].n >= 9 ? 0 : 1);
		}
		int status = 0;
		if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			bad++;
	}
	atomic_store(&spin_stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	check(bad == 0, "fork while 2 threads unwind and flush: %d of %d children unwound correctly",
	      children - bad, children);
}

/* The memo: walks from two call chains, interleaved, through a memo set
 * must equal fresh walks every time — a replay may only happen when the
 * stack is really the same. */
static struct walk_memos memos;

static AGENT_NOINLINE int memo_leaf(uintptr_t *a, uintptr_t *b, bool *replayed)
{
	struct agent_walk w = agent_unwind_cfi_memo(a, 64, &memos);
	int n = w.npcs;
	int m = agent_unwind_cfi(b, 64);
	*replayed = w.replayed;
	if (w.replayed)  /* a replay leaves a alone: the pcs are the entry's */
		memcpy(a, agent_memo_pcs(w.memo), (size_t)n * sizeof *a);
	return n == m ? n : -1;
}

static AGENT_NOINLINE int memo_via_x(uintptr_t *a, uintptr_t *b, bool *replayed, volatile int depth)
{
	int r = depth ? memo_via_x(a, b, replayed, depth - 1) : memo_leaf(a, b, replayed);
	return r + 0 * depth;
}

static AGENT_NOINLINE int memo_via_y(uintptr_t *a, uintptr_t *b, bool *replayed)
{
	int r = memo_leaf(a, b, replayed);
	return r + 0;
}

static void test_memo(void)
{
	uintptr_t a[64], b[64];
	int bad = 0, replays = 0;
	for (int i = 0; i < 3000; i++) {
		bool replayed = false;
		int n;
		switch (i % 3) {
		case 0: n = memo_via_x(a, b, &replayed, i % 5); break;
		case 1: n = memo_via_y(a, b, &replayed); break;
		default: n = memo_via_x(a, b, &replayed, 2); break;
		}
		/* [0] is where in memo_leaf each walk was taken: differs */
		if (n < 2 || memcmp(a + 1, b + 1, (size_t)(n - 1) * sizeof *a))
			bad++;
		replays += replayed;
	}
	check(bad == 0, "memoised walks equal fresh walks over 3000 mixed calls (%d differ)", bad);
	check(replays > 2000, "most repeated walks are replays (%d of 3000)", replays);
	/* 48 call depths in turn: more than the memo's ways, so walks are
	 * rarely replayed whole, but each shares its outer frames (this
	 * function, main, libc's start) with the walks before it */
	bad = 0;
	unsigned long joins = agent_memo_joins(&memos);
	for (int i = 0; i < 2400; i++) {
		bool replayed = false;
		int n = memo_via_x(a, b, &replayed, (i * 7) % 48);
		if (n < 2 || memcmp(a + 1, b + 1, (size_t)(n - 1) * sizeof *a))
			bad++;
	}
	joins = agent_memo_joins(&memos) - joins;
	check(bad == 0, "walks finished from a recorded walk's outer frames equal fresh walks "
	      "over 2400 calls at 48 depths (%d differ)", bad);
	check(joins > 1000, "most of those walks join a recorded one (%lu of 2400)", joins);
	agent_unwind_cfi_flush();
	bool replayed = true;
	uintptr_t c[64];
	memo_via_y(c, b, &replayed);
	check(!replayed, "a flush makes the memo forget");
}

/* Many distinct deep stacks, as in bench/workloads/paths.c: a tree of
 * calls 40 levels deep whose function at each of 5 levels is chosen by a
 * base-4 digit of the path (1024 paths, more than the memo's ways), a
 * path chosen at random per walk. Every walk through the memo (replayed,
 * joined or fresh) must equal libunwind's, with and without frame
 * pointers, and from a signal handler on an alternate stack. */
#define PATH_LEVELS 40
#define PATH_DIGITS 5
#define PATH_BASE 4
static struct walk_memos path_memos, *path_ms = &path_memos;
static unsigned char path_choice[PATH_LEVELS];
static struct {
	uintptr_t a[MAXF], b[MAXF];
	int na, nb;
	long replays;
} pout;

static AGENT_NOINLINE void path_leaf(void)
{
	struct agent_walk w = agent_unwind_cfi_memo(pout.a, MAXF, path_ms);
	pout.na = w.npcs;
	pout.replays += w.replayed;
	if (w.replayed)
		memcpy(pout.a, agent_memo_pcs(w.memo), (size_t)w.npcs * sizeof *pout.a);
	pout.nb = unw_backtrace((void **)pout.b, MAXF);
}

typedef int (*path_fn)(int level, int x);
static path_fn path_nofp[PATH_BASE], path_fp[PATH_BASE];
static path_fn *path_fns;

#define PATH_STEP(name, i, attr)                                                 \
	attr AGENT_NOINLINE static int name(int level, int x)                           \
	{                                                                         \
		int r = level == 0 ? (path_leaf(), x)                             \
				   : path_fns[path_choice[level - 1]](level - 1, x * (3 + i) + 1); \
		return r + level * (i + 1);                                       \
	}
#define FP __attribute__((optimize("no-omit-frame-pointer")))
PATH_STEP(pn0, 0, ) PATH_STEP(pn1, 1, ) PATH_STEP(pn2, 2, ) PATH_STEP(pn3, 3, )
PATH_STEP(pf0, 0, FP) PATH_STEP(pf1, 1, FP) PATH_STEP(pf2, 2, FP) PATH_STEP(pf3, 3, FP)

/* Runs n random paths (among npaths); returns how many walks differed
 * from libunwind's. */
static int run_paths_of(int n, uint64_t *seed, unsigned npaths)
{
	int bad = 0;
	for (int i = 0; i < n; i++) {
		*seed ^= *seed << 13, *seed ^= *seed >> 7, *seed ^= *seed << 17;
		unsigned p = (unsigned)(*seed % npaths);
		memset(path_choice, 0, sizeof path_choice);
		for (int j = 0; j < PATH_DIGITS; j++, p /= PATH_BASE)
			path_choice[PATH_LEVELS - 1 - j * PATH_LEVELS / PATH_DIGITS] = (unsigned char)(p % PATH_BASE);
		path_fns[path_choice[PATH_LEVELS - 1]](PATH_LEVELS - 1, i);
		/* [0] is where in path_leaf each walk was taken: differs */
		if (pout.na != pout.nb || pout.na < PATH_LEVELS + 2 ||
		    memcmp(pout.a + 1, pout.b + 1, (size_t)(pout.na - 1) * sizeof *pout.a))
			bad++;
	}
	return bad;
}

static int run_paths(int n, uint64_t *seed)
{
	return run_paths_of(n, seed, 1024);
}

static volatile int path_bad_in_handler = -1;
static uint64_t path_seed = 0x9E3779B97F4A7C15ull;

static void on_path_signal(int sig)
{
	path_bad_in_handler = run_paths(300, &path_seed);
}

static void test_paths(void)
{
	path_fn nofp[PATH_BASE] = { pn0, pn1, pn2, pn3 }, fp[PATH_BASE] = { pf0, pf1, pf2, pf3 };
	memcpy(path_nofp, nofp, sizeof nofp);
	memcpy(path_fp, fp, sizeof fp);
	unsigned long joins = agent_memo_joins(&path_memos);
	path_fns = path_nofp;
	int bad = run_paths(4000, &path_seed);
	check(bad == 0, "1024 paths of 40 frames, no frame pointers: memo walks equal "
	      "libunwind's over 4000 walks (%d differ)", bad);
	path_fns = path_fp;
	bad = run_paths(4000, &path_seed);
	check(bad == 0, "1024 paths of 40 frames, frame pointers: memo walks equal "
	      "libunwind's over 4000 walks (%d differ)", bad);
	check(agent_memo_joins(&path_memos) > joins, "some of them were joins (%lu)",
	      agent_memo_joins(&path_memos) - joins);
	/* with more stacks than the memo holds, most walks are plain walks
	 * (walk_plain and its l1_run), compared above like the others */
	check(path_memos.sparse > 0, "the memo records one walk in 2^%u, the others are plain",
	      path_memos.sparse);
	check(path_memos.quiet, "and tries a replay one call in 16 only");
	/* the program settles on 4 stacks: the memo must notice and replay */
	long replays = pout.replays;
	bad = run_paths_of(20000, &path_seed, 4);
	check(bad == 0 && !path_memos.quiet,
	      "then 4 paths: walks equal libunwind's (%d differ), the memo is no longer quiet "
	      "(sparse %u)", bad, path_memos.sparse);
	check(pout.replays - replays > 15000, "and most of those 20000 walks are replays (%ld)",
	      pout.replays - replays);

	size_t alt_size = 256 * 1024;
	stack_t ss = { .ss_sp = mmap(NULL, alt_size, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
		       .ss_size = alt_size };
	sigaltstack(&ss, NULL);
	struct sigaction sa = { .sa_handler = on_path_signal, .sa_flags = SA_ONSTACK };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	path_fns = path_nofp;
	raise(SIGUSR1);
	check(path_bad_in_handler == 0, "the same from a signal handler on an alternate stack "
	      "(%d of 300 differ)", path_bad_in_handler);
	ss.ss_flags = SS_DISABLE;
	sigaltstack(&ss, NULL);
	signal(SIGUSR1, SIG_DFL);
}

/* A scan's facts (walk_memo.h, agent_memo_scan) only reject: a walk
 * they reject wrongly is walked again, which gives the same pcs, so the
 * paths above would not notice. Here the memo is filled by hand: 32 of
 * the 64 walks of 20 records of a binary tree of 6 levels (at records 3,
 * 6, ..., 18), like paths-64's, over a fake stack, where each walk reads
 * its records from a level on at places that depend on the digit it took
 * there, the level's own included: two walks that part at a record read
 * it at different places, as when a saved rbp they restored differently
 * (checked after the return addresses) moves a frame, so a fact about one
 * place must not reject a walk that reads another. The stack is then made
 * to hold one walk's words, the rest junk, and the memo must find that
 * walk, whichever it is and whatever the scan tried first. */
#define FACT_RECORDS 20
#define FACT_LEVELS 6
static uintptr_t fact_stack[4 * FACT_RECORDS];

static uintptr_t fact_at(unsigned path, int k)
{
	int shift = 0;  /* each level taken to the right moves it and the rest up a word */
	for (int l = 0; l < FACT_LEVELS && 3 * (l + 1) <= k; l++)
		shift += (int)(path >> l & 1);
	return (uintptr_t)&fact_stack[2 * k + shift];
}

static uintptr_t fact_ra(unsigned path, int k)
{
	uintptr_t ra = 0x400000 + 0x100 * (uintptr_t)k;
	if (k % 3 == 0 && k >= 3 && k <= 3 * FACT_LEVELS)
		ra += 0x10 * (path >> (k / 3 - 1) & 1);
	return ra;
}

static void fact_fill(struct walk_memos *ms, uintptr_t pc, uintptr_t sp)
{
	memset(ms, 0, sizeof *ms);
	uint32_t gen = atomic_load_explicit(&agent_unwind_gen, memory_order_relaxed);
	for (unsigned i = 0; i < MEMO_WAYS; i++) {
		struct walk_memo *m = &ms->e[i];
		m->valid = true;
		m->pc0 = pc, m->sp0 = sp, m->max = 64, m->gen = gen;
		m->nframes = m->npcs = FACT_RECORDS;
		m->succ = (uint8_t)i;
		for (int k = 0; k < FACT_RECORDS; k++) {
			m->fr[k].at = fact_at(i, k);
			m->fr[k].ra = m->pcs[k] = fact_ra(i, k);
		}
		agent_memo_mark_end(m);  /* as unwind.c does for every walk it records */
		ms->sp0[i] = sp;
		ms->sp0_lo[i] = (uint32_t)sp;
	}
}

/* The fake stack as walk `path` (0..63; 32..63 are in no entry) saw it,
 * junk elsewhere. */
static void fact_stack_as(unsigned path, uint64_t *seed)
{
	for (size_t i = 0; i < sizeof fact_stack / sizeof *fact_stack; i++) {
		*seed ^= *seed << 13, *seed ^= *seed >> 7, *seed ^= *seed << 17;
		fact_stack[i] = 0x500000 + (*seed & 0xfff0);
	}
	for (int k = 0; k < FACT_RECORDS; k++)
		*(uintptr_t *)fact_at(path, k) = fact_ra(path, k);
}

static void test_facts(void)
{
	static struct walk_memos fm;
	uintptr_t pc = 0x401234, sp = (uintptr_t)fact_stack - 64;
	uint64_t seed = 0x2545F4914F6CDD1Dull;
	fact_fill(&fm, pc, sp);
	int bad = 0, n = 2000;
	unsigned long refuted = agent_memo_refuted_count(&fm);
	for (int i = 0; i < n; i++) {
		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		unsigned path = (unsigned)(seed % 64);
		fact_stack_as(path, &seed);
		if (i % 2)  /* every other call, a guess at random (that scans skip) */
			fm.pred = (unsigned)(seed >> 32) % MEMO_WAYS;
		/* every lookup scans: half of them find nothing, which would
		 * soon make scans not pay (agent_memo_scan_cost) */
		fm.scan_debt = 0;
		struct walk_memo *m = agent_memo_find(&fm, pc, sp, 0, 64);
		bad += m != (path < MEMO_WAYS ? &fm.e[path] : NULL);
	}
	refuted = agent_memo_refuted_count(&fm) - refuted;
	check(bad == 0, "32 hand-made walks sharing inner records, a fake stack as one of 64: "
	      "the memo finds the walk it holds, or none (%d of %d wrong)", bad, n);
	check(refuted > (unsigned long)n * 8, "the scans' facts rejected most entries "
	      "without reading the stack (%lu over %d look-ups)", refuted, n);

	/* an entry that fails at a saved rbp, not a return address, leaves no
	 * fact: entry 5, with the same records as 4, must still be found */
	fact_fill(&fm, pc, sp);
	for (int k = 0; k < FACT_RECORDS; k++)
		fm.e[4].fr[k] = fm.e[5].fr[k];
	fm.e[4].any_bp = fm.e[4].bp_need[FACT_RECORDS - 1] = true;
	fm.e[4].bp_at[FACT_RECORDS - 1] = (uintptr_t)&fact_stack[4 * FACT_RECORDS - 1];
	fact_stack_as(5, &seed);
	fm.e[4].bp[FACT_RECORDS - 1] = fact_stack[4 * FACT_RECORDS - 1] + 1;
	check(agent_memo_find(&fm, pc, sp, 0, 64) == &fm.e[5],
	      "an entry whose rbp word fails, not its return addresses, rejects no other");

	/* entry 4 fails at record 18 only; entry 5, which holds, has 10
	 * records, and past them an older walk's, whose record 18 is read at
	 * the same place and differs: the fact must not reject it */
	fact_fill(&fm, pc, sp);
	for (int k = 0; k < FACT_RECORDS; k++)
		fm.e[4].fr[k] = fm.e[5].fr[k];
	fm.e[4].fr[18].ra += 0x1000;
	fm.e[5].nframes = fm.e[5].npcs = 10;
	agent_memo_mark_end(&fm.e[5]);
	fm.e[5].fr[18].ra += 0x2000;
	fact_stack_as(5, &seed);
	refuted = agent_memo_refuted_count(&fm);
	check(agent_memo_find(&fm, pc, sp, 0, 64) == &fm.e[5] &&
	      agent_memo_refuted_count(&fm) > refuted,
	      "a fact about a record past an entry's last rejects no walk");
}

/* 64 of the paths above (3 levels of 4 ways), as many as paths-64 of the
 * benchmarks: more paths than the memo's ways, so its scans see entries
 * fail at one of the levels, and their facts must reject without
 * changing a walk. */
static void test_paths_facts(void)
{
	static struct walk_memos pm;
	path_ms = &pm;
	int bad = 0;
	unsigned long refuted = agent_memo_refuted_count(&pm);
	long replays = pout.replays;
	/* scans kept on (their debt cleared every 10 walks): scans among
	 * 64 paths at random do not pay, and are soon made rare (below) */
	for (int c = 0; c < 600; c++) {
		pm.scan_debt = 0;
		path_fns = c < 300 ? path_nofp : path_fp;
		bad += run_paths_of(10, &path_seed, 64);
	}
	refuted = agent_memo_refuted_count(&pm) - refuted;
	check(bad == 0, "64 paths of 40 frames, with and without frame pointers: memo walks "
	      "equal libunwind's over 6000 walks (%d differ)", bad);
	check(refuted > 6000, "scans' facts rejected entries without reading the stack (%lu)",
	      refuted);
	check(pout.replays - replays > 1500, "and replays are still found (%ld of 6000)",
	      pout.replays - replays);
	/* left alone, the scans' cost (records read, entries checked) soon
	 * passes what their replays save: one call in 16 scans */
	path_fns = path_nofp;
	bad = run_paths_of(3000, &path_seed, 64);
	check(bad == 0 && pm.scan_debt >= MEMO_SCAN_DEBT,
	      "then left alone: walks still equal libunwind's (%d differ), and scans no "
	      "longer pay (debt %u of %u)", bad, pm.scan_debt, MEMO_SCAN_DEBT);
	path_ms = &path_memos;
}

/* The trail (walk_memos.trail, l1_run_frames): where the last walk found
 * each frame, so the next one can read ahead of its rules. A guess only:
 * each frame is still stepped by its rule, and a trail that is wrong in
 * any way (another depth's frames, near misses, junk, words past the
 * stack's top) must give the same walks, only slower. Plain walks, as the
 * hooks walk once a memo records one walk in 2^MEMO_SPARSE_MAX. */
static uintptr_t trail_junk(uint64_t *seed, uintptr_t real)
{
	*seed ^= *seed << 13, *seed ^= *seed >> 7, *seed ^= *seed << 17;
	switch (*seed % 6) {
	case 0: return 0;
	case 1: return ~(uintptr_t)0;
	case 2: return real + 8;
	case 3: return real - 8;
	case 4: return real + 4096;  /* past the stack's top, for the outer frames */
	default: return (uintptr_t)&path_seed + (*seed >> 40 & 0xff8);
	}
}

/* One plain walk through tm, of a path among npaths: no entry to replay,
 * and the walk is not the one in 2^sparse that is recorded. */
static int trail_walk(struct walk_memos *tm, uint64_t *seed, unsigned npaths)
{
	agent_memo_forget_all(tm);
	tm->sparse_tick = 1;
	return run_paths_of(1, seed, npaths);
}

static void test_trail(void)
{
	static struct walk_memos tm;
	static uintptr_t clean[AGENT_MAX_DEPTH];
	uint64_t seed = 0xD1B54A32D192ED03ull;
	long replays = pout.replays;
	int bad = 0;
	path_ms = &tm;
	tm.sparse = MEMO_SPARSE_MAX;
	path_fns = path_nofp;
	for (int i = 0; i < 200; i++)
		bad += trail_walk(&tm, &path_seed, 1024);
	check(bad == 0 && pout.na > PATH_LEVELS && pout.replays == replays,
	      "plain walks along the trail equal libunwind's (%d of 200 differ, %ld replays)",
	      bad, pout.replays - replays);
	uint64_t one = 7;
	trail_walk(&tm, &one, 1);
	memcpy(clean, tm.trail, sizeof clean);
	int wrong[3] = { 0, 0, 0 }, rewritten = 0, n = 300;
	for (int i = 0; i < n; i++) {
		int mode = i % 3;
		for (int k = 0; k < AGENT_MAX_DEPTH; k++)
			tm.trail[k] = mode == 0   ? clean[(k + 1) % AGENT_MAX_DEPTH]  /* a frame off */
				      : mode == 1 ? trail_junk(&seed, clean[k])
						  : clean[k] + (k % 2 ? 16 : 0);
		/* the same path each time: its frames lie where clean says */
		wrong[mode] += trail_walk(&tm, &one, 1);
		rewritten += memcmp(tm.trail, clean, (size_t)pout.na * sizeof *clean) == 0;
	}
	check(wrong[0] + wrong[1] + wrong[2] == 0,
	      "a trail a frame off, junk, or wrong every other frame: walks equal "
	      "libunwind's (%d, %d, %d of %d differ)", wrong[0], wrong[1], wrong[2], n / 3);
	check(rewritten == n, "and each walk leaves the trail its own frames (%d of %d)",
	      rewritten, n);
	/* frames with frame pointers after frames without: other frame
	 * sizes, the same places */
	bad = 0;
	for (int i = 0; i < 400; i++) {
		path_fns = i % 2 ? path_fp : path_nofp;
		bad += trail_walk(&tm, &path_seed, 1024);
	}
	check(bad == 0, "walks with and without frame pointers in turn, each along the "
	      "other's trail: equal libunwind's (%d of 400 differ)", bad);
	path_ms = &path_memos;
}

/* A function without frame pointer that keeps a value in rbp (so saves
 * its caller's rbp inside its frame) between functions with frame
 * pointers, whose CFA comes from rbp: a plain walk that steps it by the
 * thread's rule cache (l1_run) must restore rbp from the save slot, or
 * the frames above it are lost. Walked as the hooks walk (AGENT_FRAME_REGS
 * and agent_unwind_cfi_at, never a replay) through a memo that records
 * one walk in 256, so nearly every walk is plain and, after the first,
 * finds every rule in the thread's cache. */
static struct walk_memos rbp_memos;
static struct {
	uintptr_t a[MAXF], b[MAXF];
	int na, nb;
} rout;

__attribute__((optimize("no-omit-frame-pointer"))) AGENT_NOINLINE static void rbp_leaf(void)
{
	uintptr_t pc, sp, bp;
	AGENT_FRAME_REGS(pc, sp, bp);
	rout.na = agent_unwind_cfi_at(pc, sp, bp, rout.a, MAXF, &rbp_memos).npcs;
	rout.nb = unw_backtrace((void **)rout.b, MAXF);
}

__attribute__((optimize("omit-frame-pointer"))) AGENT_NOINLINE static long rbp_user(long x)
{
	/* rbp holds junk across the call: the caller's is in the frame */
	__asm__ volatile("mov %0, %%rbp" : : "r"(x * 0x10001) : "rbp");
	rbp_leaf();
	__asm__ volatile("" : : : "memory");
	return x + 1;
}

#define RBP_FP __attribute__((optimize("no-omit-frame-pointer"))) AGENT_NOINLINE static
RBP_FP long rbp_fp1(long x) { long r = rbp_user(x + 1); sink += (unsigned)r; return r + 1; }
RBP_FP long rbp_fp2(long x) { long r = rbp_fp1(x + 1); sink += (unsigned)r; return r + 1; }
RBP_FP long rbp_fp3(long x) { long r = rbp_fp2(x + 1); sink += (unsigned)r; return r + 1; }

static void test_rbp_saved(void)
{
	rbp_memos.sparse = MEMO_SPARSE_MAX;
	int bad = 0, rounds = 200;
	for (int i = 0; i < rounds; i++) {
		rbp_fp3(i);
		/* a: from rbp_leaf's caller; b: from rbp_leaf */
		if (rout.na < 6 || rout.na != rout.nb - 1 ||
		    memcmp(rout.a, rout.b + 1, (size_t)rout.na * sizeof *rout.a))
			bad++;
	}
	check(bad == 0, "a frame that saves rbp without frame pointer, between frames with: "
	      "plain walks equal libunwind's (%d of %d differ)", bad, rounds);
}

int main(void)
{
	test_memo();
	test_paths();
	test_facts();
	test_paths_facts();
	test_trail();
	test_rbp_saved();
	test_chain();
	test_alignment();
	test_recursion();
	test_vla();
	test_expr();
	test_thread();
	test_qsort();
	test_signal();
	test_no_fde();
	test_vanished();
	test_skip();
	test_dlopen();
	test_stress();
	test_fork();
	return failures ? 1 : 0;
}
