/*
 * fnhook.c — allocator functions hooked by name (fnhook.h).
 *
 * A hooked function F starts with `jmp rel32` to a stub in a page of ours
 * mapped within ±2 GiB of F:
 *
 *   F:      jmp stub                     (5 bytes; the rest of the
 *                                         displaced instructions left as is)
 *   stub:   mov $hook, %r11 ; jmp *agent_fnhook_entry
 *   orig:   F's first instructions, relocated by Zydis ; jmp *(F + n)
 *
 * agent_fnhook_entry (below, with call-frame information, so the unwinder
 * walks through it to F's caller) saves the argument registers, calls
 * agent_fnhook_pre, calls orig with the arguments as they came, then calls
 * agent_fnhook_post with the return value, and returns it. Frees, resets,
 * destroys and trims are recorded before F runs (the address cannot be
 * reused in between), allocations after it, with the stack of F's caller
 * and F itself as the frame above pool_alloc.
 *
 * What this costs the hooked function: arguments passed on the stack are
 * not passed on (F is called from our frame, not its caller's): only
 * functions whose arguments all travel in registers (at most six integer
 * or pointer ones and eight floating ones, System V) may be hooked; the
 * spec language names arguments arg1..arg6 only. That holds for the
 * allocators this is for (AllocSetAlloc, mi_malloc, __rust_alloc...).
 *
 * Nesting: an allocation or free made while an allocation of the same
 * thread is in a hooked alloc or realloc function is the allocator's own
 * business (a realloc that allocates and frees), not recorded. The
 * outer call is known by the address of its saved registers and a cookie
 * written beside them, so a longjmp out of a hooked function (PostgreSQL's
 * elog(ERROR)) leaves at worst a stale mark that the next call overwrites.
 * Resets, destroys, creates and moves are always recorded.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dlfcn.h>
#include <Zydis/Zydis.h>

#include "agent/agent.h"
#include "agent/buildid.h"
#include "agent/config.h"
#include "agent/fnhook.h"
#include "agent/fnhook_impl.h"
#include "agent/pool.h"
#include "agent/poolrec.h"
#include "agent/procmaps.h"
#include "agent/stopworld.h"
#include "format/fnspec.h"
#include "format/leakfile.h"
#include "agent/banned.h"

struct fnhook agent_fnhooks[MAX_HOOKS];
int agent_nfnhooks;

/* ---------- the entry every hook goes through ----------
 * Frame (from %rsp after the sub): 0..64 rdi rsi rdx rcx r8 r9 rax r10
 * (the arguments, regs[0..5] = arg1..arg6), 64 the nesting cookie, 72 the
 * return value for post (REG_RET),
 * 80..208 xmm0-7, 208..224 rax rdx returned, 224..256 xmm0-1 returned. */
#define REG_COOKIE 8
__asm__(".text\n"
	".globl agent_fnhook_entry\n"
	".hidden agent_fnhook_entry\n"
	".type agent_fnhook_entry, @function\n"
	".p2align 4\n"
	"agent_fnhook_entry:\n"
	"	.cfi_startproc\n"
	"	push %rbp\n	.cfi_adjust_cfa_offset 8\n	.cfi_rel_offset %rbp, 0\n"
	"	mov %rsp, %rbp\n	.cfi_def_cfa_register %rbp\n"
	"	push %rbx\n	.cfi_offset %rbx, -24\n"
	"	push %r12\n	.cfi_offset %r12, -32\n"
	"	sub $256, %rsp\n"
	"	mov %r11, %rbx\n"
	"	mov %rdi, 0(%rsp)\n	mov %rsi, 8(%rsp)\n	mov %rdx, 16(%rsp)\n"
	"	mov %rcx, 24(%rsp)\n	mov %r8, 32(%rsp)\n	mov %r9, 40(%rsp)\n"
	"	mov %rax, 48(%rsp)\n	mov %r10, 56(%rsp)\n"
	"	movdqu %xmm0, 80(%rsp)\n	movdqu %xmm1, 96(%rsp)\n"
	"	movdqu %xmm2, 112(%rsp)\n	movdqu %xmm3, 128(%rsp)\n"
	"	movdqu %xmm4, 144(%rsp)\n	movdqu %xmm5, 160(%rsp)\n"
	"	movdqu %xmm6, 176(%rsp)\n	movdqu %xmm7, 192(%rsp)\n"
	"	mov %rbx, %rdi\n	mov %rsp, %rsi\n"
	"	call agent_fnhook_pre\n"
	"	mov %rax, %r12\n"
	"	movdqu 80(%rsp), %xmm0\n	movdqu 96(%rsp), %xmm1\n"
	"	movdqu 112(%rsp), %xmm2\n	movdqu 128(%rsp), %xmm3\n"
	"	movdqu 144(%rsp), %xmm4\n	movdqu 160(%rsp), %xmm5\n"
	"	movdqu 176(%rsp), %xmm6\n	movdqu 192(%rsp), %xmm7\n"
	"	mov 0(%rsp), %rdi\n	mov 8(%rsp), %rsi\n	mov 16(%rsp), %rdx\n"
	"	mov 24(%rsp), %rcx\n	mov 32(%rsp), %r8\n	mov 40(%rsp), %r9\n"
	"	mov 48(%rsp), %rax\n	mov 56(%rsp), %r10\n"
	"	call *(%rbx)\n"
	"	mov %rax, 208(%rsp)\n	mov %rdx, 216(%rsp)\n"
	"	movdqu %xmm0, 224(%rsp)\n	movdqu %xmm1, 240(%rsp)\n"
	"	mov %rbx, %rdi\n	mov %rsp, %rsi\n	mov %rax, %rdx\n	mov %r12, %rcx\n"
	"	call agent_fnhook_post\n"
	"	mov 208(%rsp), %rax\n	mov 216(%rsp), %rdx\n"
	"	movdqu 224(%rsp), %xmm0\n	movdqu 240(%rsp), %xmm1\n"
	"	lea -16(%rbp), %rsp\n"
	"	pop %r12\n	.cfi_restore %r12\n"
	"	pop %rbx\n	.cfi_restore %rbx\n"
	"	pop %rbp\n	.cfi_restore %rbp\n	.cfi_def_cfa %rsp, 8\n"
	"	ret\n"
	"	.cfi_endproc\n"
	".size agent_fnhook_entry, .-agent_fnhook_entry\n");

#define COOKIE 0x6865617074726c31ull   /* "heaptrl1" */

#define REG_RET 9   /* where agent_fnhook_post puts the return value */

/* The value of role (format/fnspec.h): an argument, or a word read at an
 * argument or the return value plus an offset (0 when that is NULL). */
static uintptr_t arg(const struct fnhook *h, const uintptr_t *regs, int role)
{
	int a = h->spec.arg[role];
	if (!a || a == FMT_ARG_CTX)   /* *(ctx+K): poolrec.c reads it */
		return 0;
	uintptr_t v = regs[a == FMT_ARG_RET ? REG_RET : a - 1];
	if (!h->spec.deref[role])
		return v;
	return v ? *(const uintptr_t *)(v + (intptr_t)h->spec.off[role]) : 0;
}

static bool allocates(int kind)
{
	return kind == FMT_FNK_ALLOC || kind == FMT_FNK_REALLOC;
}

/* Inside a hooked allocation of this thread's (see the top). */
static bool nested(uintptr_t *regs)
{
	uintptr_t outer = agent_tls.fn_outer;
	return outer && (uintptr_t)regs < outer &&
	       ((uintptr_t *)outer)[REG_COOKIE] == (outer ^ COOKIE);
}

static void pool_op(int kind, uintptr_t ctx, uintptr_t ptr, size_t size)
{
	if (!agent_poolrec_enter())
		return;
	switch (kind) {
	case FMT_FNK_RESET: agent_pool_reset(ctx); break;
	case FMT_FNK_DESTROY: agent_pool_destroy(ctx); break;
	case FMT_FNK_TRIM: agent_pool_trim(ctx, ptr, size); break;
	}
	agent_poolrec_leave(0);
}

/* Before F runs: returns the token agent_fnhook_post gets, 1 when it has
 * something to record. */
__attribute__((used)) uintptr_t agent_fnhook_pre(struct fnhook *h, uintptr_t *regs)
{
	int kind = h->spec.kind;
	regs[REG_RET] = 0;   /* no return value yet: *(ret-K) reads nothing */
	uintptr_t ctx = arg(h, regs, FMT_ROLE_CTX);
	switch (kind) {
	case FMT_FNK_ALLOC:
	case FMT_FNK_REALLOC:
		if (nested(regs))
			return 0;
		agent_tls.fn_outer = (uintptr_t)regs;
		regs[REG_COOKIE] = (uintptr_t)regs ^ COOKIE;
		return 1;
	case FMT_FNK_FREE: {
		uintptr_t ptr = arg(h, regs, FMT_ROLE_PTR);
		if (ptr && !nested(regs))
			agent_poolrec_free(ctx, ptr);
		return 0;
	}
	case FMT_FNK_CREATE:
	case FMT_FNK_MOVE:
		return 1;
	default:
		pool_op(kind, ctx, arg(h, regs, FMT_ROLE_PTR), arg(h, regs, FMT_ROLE_SIZE));
		return 0;
	}
}

static void made(struct fnhook *h, uintptr_t ctx, uintptr_t addr, size_t size)
{
	uintptr_t name_at = ctx && h->spec.arg[FMT_ROLE_NAME] == FMT_ARG_CTX
				    ? ctx + (uintptr_t)(intptr_t)h->spec.off[FMT_ROLE_NAME] : 0;
	agent_poolrec_alloc(ctx, addr, size, ctx ? FMT_FN_POOL : FMT_FN_MALLOCLIKE, h->fn + 1, true,
			    name_at);
}

static void created(struct fnhook *h, const uintptr_t *regs, uintptr_t pool)
{
	char name[AGENT_POOL_NAME_MAX];
	const char *from = (const char *)arg(h, regs, FMT_ROLE_NAME);
	size_t n = 0;
	if (from)
		while (n < sizeof name - 1 && from[n])
			n++, name[n - 1] = from[n - 1];
	name[n] = 0;
	if (!agent_poolrec_enter())
		return;
	uintptr_t parent = arg(h, regs, FMT_ROLE_PARENT);
	long r = agent_pool_create(pool, parent, from ? name : NULL);
	if (r == -EEXIST) {   /* the address of a pool never destroyed */
		agent_pool_destroy(pool);
		r = agent_pool_create(pool, parent, from ? name : NULL);
	}
	if (r == -ENOENT)     /* a parent we never saw made */
		agent_pool_create(pool, 0, from ? name : NULL);
	agent_poolrec_leave(0);
}

/* After F returned ret. */
__attribute__((used)) void agent_fnhook_post(struct fnhook *h, uintptr_t *regs, uintptr_t ret,
					     uintptr_t token)
{
	if (!token)
		return;
	int kind = h->spec.kind;
	regs[REG_RET] = ret;
	uintptr_t ctx = arg(h, regs, FMT_ROLE_CTX);
	if (allocates(kind)) {
		agent_tls.fn_outer = 0;
		regs[REG_COOKIE] = 0;
	}
	switch (kind) {
	case FMT_FNK_ALLOC: {
		size_t size = arg(h, regs, FMT_ROLE_SIZE);
		if (h->spec.arg[FMT_ROLE_COUNT])
			size *= arg(h, regs, FMT_ROLE_COUNT);
		if (ret)
			made(h, ctx, ret, size);
		break;
	}
	case FMT_FNK_REALLOC: {
		uintptr_t ptr = arg(h, regs, FMT_ROLE_PTR);
		size_t size = arg(h, regs, FMT_ROLE_SIZE);
		if (!ptr) {
			if (ret)
				made(h, ctx, ret, size);
		} else if (ret == ptr) {   /* in place: the block keeps its stack */
			int r = -EAGAIN;
			if (agent_poolrec_enter())
				r = agent_poolrec_leave(agent_pool_chunk_change(ctx, ptr, ret, size));
			if (r == -ENOENT)   /* not tracked (sampled out): maybe now */
				made(h, ctx, ret, size);
		} else if (ret) {          /* moved: a new block, as realloc's */
			agent_poolrec_free(ctx, ptr);
			made(h, ctx, ret, size);
		} else if (!size) {
			agent_poolrec_free(ctx, ptr);
		}
		break;
	}
	case FMT_FNK_CREATE:
		if (ret)
			created(h, regs, ret);
		break;
	case FMT_FNK_MOVE:
		if (ret && ret != ctx && agent_poolrec_enter())
			agent_poolrec_leave(agent_pool_move(ctx, ret));
		break;
	}
}

/* ---------- writing the jumps while other threads run ----------
 * Every other thread is stopped while the jumps are written
 * (agent_stopworld_stop_all: with ptrace, a thread blocked in a system
 * call too, its call started again afterwards; one in uninterruptible
 * sleep is held: it stops before it runs any code). A thread must not be
 * inside F's first 5 bytes then, nor come back into them later: its pc,
 * and every word of its stack above its stack pointer (a signal frame
 * keeps the pc the handler interrupted), are looked at. A function some
 * thread is inside is tried again after 2 ms, up to 50 times, as are all
 * when some thread could not be stopped or held (the fallback's signal
 * leaves threads in system calls running, and waits while a thread
 * blocks it; a thread in connect() is left in it): then refused. What is
 * refused is said after the resume: a stopped thread may be the reader
 * of our stderr. */

#define TRIES 50
#define STACK_LOOK (8u << 20)   /* bytes of a stack looked at, at most */
#define MAX_STOPPED 4096        /* threads (stopworld.c's limit) */

/* The thread running the install when it is not where its registers
 * say (an attach's calls run below its stack pointer, as a signal
 * handler would): where it was. */
static struct agent_stopped borrowed;

struct readable {
	struct agent_stopped *th;
	int nth;
	uintptr_t *top;          /* per thread: the end of its stack's mapping,
				  * then borrowed's */
};

static void stack_tops(const struct agent_maps_line *m, void *arg)
{
	struct readable *r = arg;
	if (m->perms[0] != 'r')
		return;
	for (int i = 0; i <= r->nth; i++) {
		uintptr_t sp = i < r->nth ? r->th[i].sp : borrowed.sp;
		if (sp >= m->start && sp < m->end)
			r->top[i] = m->end;
	}
}

/* Marks busy each hook to write (want, !on) whose first bytes a thread
 * is inside or may come back into (a pc, or a word of its stack, in
 * (fn, fn + 5)). One look at each stack word for all hooks. */
static void mark_busy(const struct agent_stopped *th, int nth, const uintptr_t *top)
{
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	for (int i = 0; i < agent_nfnhooks; i++) {
		agent_fnhooks[i].busy = false;
		if (agent_fnhooks[i].want && !agent_fnhooks[i].on) {
			lo = agent_fnhooks[i].fn + 1 < lo ? agent_fnhooks[i].fn + 1 : lo;
			hi = agent_fnhooks[i].fn + JMP_LEN > hi ? agent_fnhooks[i].fn + JMP_LEN : hi;
		}
	}
	for (int i = 0; i <= nth; i++) {
		const struct agent_stopped *t = i < nth ? &th[i] : &borrowed;
		uintptr_t end = 0, a = 0;
		if (t->state == AGENT_STOP_STOPPED && t->nregs > 16) {
			/* regs[16]: rip, in user_regs_struct and in gregs */
			a = t->regs[16];
			if (a >= lo && a < hi)
				for (int k = 0; k < agent_nfnhooks; k++)
					agent_fnhooks[k].busy |= a > agent_fnhooks[k].fn && a < agent_fnhooks[k].fn + JMP_LEN;
		}
		if (!t->sp || !top[i])
			continue;
		end = top[i] - t->sp > STACK_LOOK ? t->sp + STACK_LOOK : top[i];
		for (a = (t->sp + 7) & ~(uintptr_t)7; a + 8 <= end; a += 8) {
			uintptr_t w = *(const uintptr_t *)a;
			if (AGENT_UNLIKELY(w >= lo && w < hi))
				for (int k = 0; k < agent_nfnhooks; k++)
					agent_fnhooks[k].busy |= w > agent_fnhooks[k].fn && w < agent_fnhooks[k].fn + JMP_LEN;
		}
	}
}

/* Whether the stop left no thread able to run code of the program. */
static bool all_held(const struct agent_stopped *th, int nth)
{
	for (int i = 0; i < nth; i++)
		if (th[i].state != AGENT_STOP_STOPPED && th[i].state != AGENT_STOP_GONE &&
		    !(th[i].state == AGENT_STOP_IN_SYSCALL && th[i].held))
			return false;
	return true;
}

/* The allocator's entry points after a round, every other thread
 * stopped: when one that the others need (free, realloc) could not be
 * written, the others are put back (the relocation slots alone then,
 * as before the attach tried). */
static void group_undo(void)
{
	bool failed = false;
	for (int i = 0; i < agent_nfnhooks; i++)
		failed |= agent_fnhooks[i].target && agent_fnhooks[i].needed &&
			  !agent_fnhooks[i].want && !agent_fnhooks[i].on && agent_fnhooks[i].why;
	if (!failed)
		return;
	for (int i = 0; i < agent_nfnhooks; i++) {
		struct fnhook *h = &agent_fnhooks[i];
		if (!h->target || (!h->on && !h->want))
			continue;
		if (h->on && !agent_fn_write_entry(h->fn, h->saved))
			continue;   /* stays on: its stub still reaches the agent */
		h->on = h->want = false;
		if (!h->why)
			h->why = "left to the relocation slots: another entry point of the "
				 "allocator could not be hooked", h->why_more = NULL;
	}
}

/* Says why each hook refused since the last call was refused. */
static void say_refused(void)
{
	for (int i = 0; i < agent_nfnhooks; i++)
		if (agent_fnhooks[i].why) {
			agent_fn_say(agent_fnhooks[i].spec.name, agent_fnhooks[i].why, agent_fnhooks[i].why_more);
			agent_fnhooks[i].why = agent_fnhooks[i].why_more = NULL;
		}
}

/* Stops the other threads and writes the jumps no thread is in the way
 * of (and the spec of a hook on already, named again); returns how many
 * are left to write. */
static int commit_round(bool last)
{
	int todo = 0;
	for (int i = 0; i < agent_nfnhooks; i++)
		todo += agent_fnhooks[i].want && (!agent_fnhooks[i].on || agent_fnhooks[i].renamed);
	if (!todo)
		return 0;
	struct agent_stopped *th;
	int nth;
	int missing = agent_stopworld_stop_all(&th, &nth);
	static uintptr_t *top;
	static char buf[4096];
	if (!top)
		top = agent_mmap((MAX_STOPPED + 1) * sizeof *top);
	bool held = missing == 0 && top && nth <= MAX_STOPPED && all_held(th, nth);
	if (!held && !last) {
		agent_stopworld_resume();
		return todo;
	}
	if (held) {
		struct readable r = { th, nth, top };
		agent_memset(top, 0, (size_t)(nth + 1) * sizeof *top);
		agent_maps_read(buf, sizeof buf, stack_tops, &r);
		mark_busy(th, nth, top);
		/* the allocator's entry points go on together or not at all:
		 * a free left out would lose the frees of blocks its
		 * allocations recorded meanwhile */
		bool group_busy = false;
		for (int i = 0; i < agent_nfnhooks; i++)
			group_busy |= agent_fnhooks[i].target && agent_fnhooks[i].want &&
				      !agent_fnhooks[i].on && agent_fnhooks[i].busy;
		for (int i = 0; i < agent_nfnhooks; i++)
			if (agent_fnhooks[i].target)
				agent_fnhooks[i].busy = group_busy;
	}
	int left = 0;
	for (int i = 0; i < agent_nfnhooks; i++) {
		struct fnhook *h = &agent_fnhooks[i];
		if (!h->want)
			continue;
		if (h->on) {   /* left on by a detach that could not stop all */
			if (held && h->renamed)
				h->spec = h->next, h->renamed = false;
			continue;
		}
		if (!held) {
			h->want = false;
			h->why = "not every thread of the program could be stopped", h->why_more = NULL;
		} else if (h->busy && last) {
			h->want = false;
			h->why = "a thread of the program stayed inside its first bytes", h->why_more = NULL;
		} else if (h->busy) {
			left++;
		} else {
			agent_fn_switch_on(h);
		}
	}
	group_undo();
	agent_stopworld_resume();
	say_refused();
	return left;
}

/* Writes the jump of every hook made and not written yet. */
static void commit(bool alone)
{
	if (alone) {
		for (int i = 0; i < agent_nfnhooks; i++)
			if (agent_fnhooks[i].want && !agent_fnhooks[i].on)
				agent_fn_switch_on(&agent_fnhooks[i]);
		say_refused();
		return;
	}
	for (int t = 0; t < TRIES && commit_round(t == TRIES - 1); t++) {
		agent_nap_us(2000);
	}
}

int agent_fnhook_install(uintptr_t pc, uintptr_t sp)
{
	borrowed = (struct agent_stopped){ .state = pc ? AGENT_STOP_STOPPED : AGENT_STOP_GONE,
					   .nregs = pc ? 17 : 0, .sp = sp > 128 ? sp - 128 : sp };
	borrowed.regs[16] = pc;
	/* the profiles whose key the program defines: one pass over its symbols */
	bool has[AGENT_FN_MAX_PROFILES] = { false };
	bool any = agent_fn_profiles_find(has);
	int entries = 0;
	for (int i = 0; i < agent_nfnhooks; i++)
		entries += agent_fnhooks[i].target && agent_fnhooks[i].want;
	if (!agent_config.fns[0] && !any && !entries)
		return 0;
	/* Zydis is loaded, and every stub made, before any thread is stopped:
	 * a stopped thread may hold the loader's lock or malloc's */
	ZydisDecoder dec;
	if (!agent_fn_zydis_load() ||
	    ZYAN_FAILED(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)))
		return 0;
	if (agent_config.fns[0])
		agent_fn_hook_lines(&dec, agent_config.fns, false);
	agent_fn_profiles_hook(&dec, has);
	commit(agent_thread_count() == 1 && !pc);
	int on = 0;
	for (int i = 0; i < agent_nfnhooks; i++)
		on += agent_fnhooks[i].on;
	return on;
}

/* An entry point a detach keeps (keep_frees: free and realloc). */
static bool kept(const struct fnhook *h, bool keep_frees)
{
	return keep_frees && h->target && h->needed && h->on;
}

void agent_fnhook_remove(bool keep_frees)
{
	int on = 0;
	for (int i = 0; i < agent_nfnhooks; i++) {
		agent_fnhooks[i].want = false;
		on += agent_fnhooks[i].on && !kept(&agent_fnhooks[i], keep_frees);
	}
	if (!on)
		return;
	/* No thread can be inside a jump, only before it or in the stub; the
	 * threads are stopped or held so that none runs F while its bytes go
	 * back. F's bytes are put back only where they are still the jump
	 * (the module may have gone, and another come in its place). */
	struct agent_stopped *th;
	int nth;
	int missing = agent_stopworld_stop_all(&th, &nth);
	bool held = missing == 0 && all_held(th, nth);
	for (int i = 0; i < agent_nfnhooks; i++) {
		struct fnhook *h = &agent_fnhooks[i];
		uint8_t jmp[JMP_LEN];
		agent_fn_jump_bytes(h, jmp);
		if (!h->on || !held || kept(h, keep_frees))
			continue;
		if (!agent_fn_same_bytes(h->fn, jmp))
			h->on = false;   /* gone, or not ours any more: left alone */
		else if (agent_fn_write_entry(h->fn, h->saved))
			h->on = false;
	}
	agent_stopworld_resume();
	for (int i = 0; i < agent_nfnhooks; i++)
		if (agent_fnhooks[i].on && !kept(&agent_fnhooks[i], keep_frees))
			/* its stub records nothing once detached */
			agent_fn_say(agent_fnhooks[i].spec.name,
			    held ? "left hooked: its first bytes cannot be written"
				     : "left hooked: not every thread of the program could be stopped",
			    NULL);
}
