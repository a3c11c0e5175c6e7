/*
 * unwind.c — a fast x86_64 unwinder driven by .eh_frame call-frame
 * information, for capturing the stack of every allocation: the walk, the
 * pc -> rule cache and the walk memo (walk_memo.h). The rules come from
 * cfi.c, which parses the untrusted bytes.
 *
 * agent_unwind_cfi returns the return addresses of the
 * current thread, the caller of the allocator first (leading frames inside
 * [agent_self_lo, agent_self_hi) are dropped), at most max of them. It is
 * hook-safe and async-signal-safe, takes no lock and needs nothing at
 * fork().
 *
 * How it is fast: what a frame needs — where the CFA is (rsp or rbp plus
 * an offset), where rbp was saved — depends only on the pc, so it is
 * worked out once per pc and kept in a global, lock-free table (2-way
 * set-associative, in mmap'd memory; each slot guarded by its own sequence
 * number, so readers never wait and writers never block: a reader that
 * races a writer just misses). In the steady state a frame costs one hash
 * probe and one or two loads from the stack. The table is rulecache.h's
 * (the lookup inline there, the store in rulecache.c).
 *
 * A miss (the first time a pc is seen) asks glibc's _dl_find_object for
 * the object holding the pc (lock-free; no loader lock, which matters:
 * glibc does not reset dl_iterate_phdr's lock in a forked child, so a
 * fork racing a dl_iterate_phdr call hangs the child), binary-searches
 * its .eh_frame_hdr table for the FDE, and runs the CIE and FDE programs
 * up to the pc. Every cached rule is dropped at once by bumping a
 * generation number (agent_unwind_cfi_flush), which the dlclose hook
 * should call; the cache holds only numbers, never pointers into a
 * module, so a stale rule can mislead a walk but not make it fault.
 *
 * Invariants that keep the host alive:
 *  - no libc allocation, no stdio; memory comes from agent_mmap;
 *  - every read of the stack stays inside [lo, hi): lo is the stack pointer
 *    the walk started from, hi the top of the current thread's stack (the
 *    thread pointer for a glibc thread, whose descriptor and TLS sit at
 *    the top of its stack mapping; __libc_stack_end for the main thread;
 *    otherwise a guess of 1 MiB). The stack pointer must grow at every
 *    frame and a zero return address ends the walk;
 *  - reads of .eh_frame stay inside the PT_LOAD segment holding the
 *    object's .eh_frame_hdr; anything malformed or not understood ends the
 *    walk instead of guessing;
 *  - a module may be unloaded by another thread while a miss reads it
 *    only if the walk reached it by a guess (rbp chaining, which marks
 *    the walk guessed): the module of a pc found by its callee's CFI is
 *    held by the program, a thread running inside it. A guessed walk's
 *    misses read the module by copy (cfi.h: by_copy), never in place.
 *
 * What it understands: CFA = rsp/rbp + offset or a DWARF expression (the
 * PLT's, a realigned frame's *(rbp-8)), rbp saved at CFA+offset, unchanged
 * or given by an expression, return address at CFA-8 or undefined (the
 * outermost frame: _start, clone3), the Linux rt_sigreturn trampoline
 * (recognised by its code, as libunwind does), and rbp chaining for a pc
 * without an FDE (JIT code) when rbp looks like a frame of this stack.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stddef.h>

#include "agent/agent.h"
#include "agent/cfi.h"
#include "agent/rulecache.h"
#include "agent/unwind.h"
#include "agent/banned.h"


/* Top of the main thread's stack, set by the dynamic loader. Weak so that
 * an odd libc without it only loses the precise bound. */
extern void *__libc_stack_end __attribute__((weak));

#define RELAXED memory_order_relaxed

/* Drops every cached rule: call after a library was unloaded. Hook-safe,
 * signal-safe. */
void agent_unwind_cfi_flush(void)
{
	atomic_fetch_add(&agent_unwind_gen, 1);
}

/* ---------- modules ---------- */

#ifdef DLFO_EH_SEGMENT_TYPE
/* glibc >= 2.35: _dl_find_object is lock-free and async-signal-safe. It
 * gives the object's mapping and its PT_GNU_EH_FRAME; the program headers
 * come from the ELF header at the start of the mapping, checked before
 * use (they must lie in its first page, which is mapped). by_copy (a pc
 * the walk guessed, in a library another thread may be unloading): they
 * are copied, never read in place, and the load bias comes from them, not
 * from the link map (freed by a dlclose). When they cannot be had, the
 * whole mapping bounds the reads of .eh_frame and the code is not read
 * (no signal-frame check); when the object is gone, there is no module. */
#define MAX_PHDRS 16
static bool module_find(uintptr_t a, bool by_copy, struct cfi_module *m)
{
	struct dl_find_object fo;
	if (_dl_find_object((void *)a, &fo) != 0 || !fo.dlfo_link_map)
		return false;
	uintptr_t start = (uintptr_t)fo.dlfo_map_start & ~(uintptr_t)4095;
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)start;
	const ElfW(Phdr) *ph = NULL;
	ElfW(Ehdr) eh_copy;
	ElfW(Phdr) ph_copy[MAX_PHDRS];
	ssize_t got = sizeof eh_copy;
	if (by_copy && (got = agent_copy_self(&eh_copy, start, sizeof eh_copy)) >= 0) {
		if (got != (ssize_t)sizeof eh_copy)
			return false;   /* unmapped since _dl_find_object saw it */
		eh = &eh_copy;
	} else if (got == -EFAULT) {
		return false;
	}
	if (eh->e_ident[EI_MAG0] == ELFMAG0 && eh->e_ident[EI_MAG1] == ELFMAG1 &&
	    eh->e_ident[EI_MAG2] == ELFMAG2 && eh->e_ident[EI_MAG3] == ELFMAG3 &&
	    eh->e_phentsize == sizeof(ElfW(Phdr)) && eh->e_phoff < 4096 &&
	    eh->e_phnum <= (4096 - eh->e_phoff) / sizeof(ElfW(Phdr))) {
		ph = (const ElfW(Phdr) *)(start + eh->e_phoff);
		if (eh == &eh_copy) {
			size_t len = eh->e_phnum * sizeof *ph;
			ph = NULL;
			if (eh->e_phnum <= MAX_PHDRS) {
				got = agent_copy_self(ph_copy, start + eh->e_phoff, len);
				if (got >= 0 && got != (ssize_t)len)
					return false;
				if (got >= 0)
					ph = ph_copy;
			}
		}
	}
	uintptr_t first = UINTPTR_MAX;
	for (int i = 0; ph && i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < first)
			first = ph[i].p_vaddr;
	if (first != UINTPTR_MAX &&
	    cfi_describe(start - (first & ~(uintptr_t)4095), ph, eh->e_phnum, m)) {
		m->by_copy = by_copy;
		return true;
	}
	m->lo = m->seg_lo = (uintptr_t)fo.dlfo_map_start;
	m->hi = m->seg_hi = (uintptr_t)fo.dlfo_map_end;
	m->hdr = (uintptr_t)fo.dlfo_eh_frame;
	m->code_readable = false;
	m->by_copy = by_copy;
	return true;
}
#else
/* Older glibc: dl_iterate_phdr, which takes the loader's lock. Note that
 * glibc does not reset that lock in a forked child: a fork while another
 * thread is inside dl_iterate_phdr leaves it held for good in the child. */
struct iter {
	uintptr_t a;
	struct cfi_module found;
	bool have;
};

static int iter_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct iter *it = arg;
	struct cfi_module m;
	if (cfi_describe(info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum, &m) &&
	    it->a >= m.lo && it->a < m.hi) {
		it->found = m;
		it->have = true;
		return 1;
	}
	return 0;
}

static bool module_find(uintptr_t a, bool by_copy, struct cfi_module *m)
{
	struct iter it = { .a = a };
	dl_iterate_phdr(iter_cb, &it);
	*m = it.found;
	m->by_copy = by_copy;   /* read after the loader's lock is let go */
	return it.have;
}
#endif
/* ---------- the walk ---------- */

/* A frame's registers, and where its stack may be read. */
struct walk {
	struct cfi_frame f;
	bool exact;             /* pc is not a return address (signal frame) */
	bool guessed;           /* a step went by rbp chaining: the pcs from
				 * there on may lie in any module, even one
				 * being unloaded, which is then read by copy */
	uint32_t gen;
	struct agent_rule_slot *cache;
};

#define STACK_MAX ((uintptr_t)1 << 30)
#define STACK_GUESS ((uintptr_t)1 << 20)

/* Bounds of the stack holding sp, as lo and span (see the header). */
static void stack_bounds(struct walk *w, uintptr_t sp)
{
	uintptr_t tp, hi;
	__asm__("mov %%fs:0, %0" : "=r"(tp));
	uintptr_t end = &__libc_stack_end ? (uintptr_t)__libc_stack_end : 0;
	if (sp < tp && tp - sp <= STACK_MAX)
		hi = tp;
	else if (sp < end && end - sp <= STACK_MAX)
		hi = end;
	else
		hi = sp + STACK_GUESS;
	w->f.lo = sp;
	w->f.span = hi - sp >= 8 ? hi - sp - 8 : 0;
}

/* The slow path: module, FDE, CFA program for w->pc; caches what it
 * finds. */
static AGENT_NOINLINE struct agent_rule rule_slow(struct walk *w)
{
	uintptr_t a = w->f.pc - !w->exact;   /* the call, for a return address */
	struct cfi_module m;
	struct cfi_rule r;
	agent_memset(&r, 0, sizeof r);
	uint32_t gen = w->gen;
	if (!module_find(a, w->guessed, &m)) {
		r.kind = CFI_K_NOMOD;
	} else if (!w->exact && cfi_is_sigreturn(&m, a + 1)) {
		r.kind = CFI_K_SIGNAL;
	} else {
		const uint8_t *fde = cfi_fde_search(&m, a);
		r.kind = CFI_K_FP;
		if (fde && !cfi_rule_from_fde(&m, fde, a, &r))
			r.kind = CFI_K_FP;
	}
	if (!agent_rule_fits56(r.cfa_off) || !agent_rule_fits56(r.bp_off))
		r.kind = CFI_K_STOP;
	struct agent_rule p = { agent_rule_pack(r.kind, r.cfa_off, r.cfa_expr),
			    agent_rule_pack(r.bp_how, r.bp_off, r.bp_expr) };
	/* Only plain numbers are cached, never a pointer into a module's
	 * .eh_frame (an expression), so that a stale entry left by a library
	 * unloaded behind our back can mislead a walk but never make it read
	 * unmapped memory; expression frames are rare (PLT entries, reached
	 * only through a signal frame, and realigned frames). */
	w->gen = atomic_load_explicit(&agent_unwind_gen, RELAXED);
	if (gen == w->gen && r.kind != CFI_K_NOMOD && !r.cfa_expr && !r.bp_expr)
		agent_rule_put(agent_rule_key(w->f.pc, w->exact), gen, p);
	if (!w->cache)
		w->cache = atomic_load_explicit(&agent_rule_cache, memory_order_acquire);
	return p;
}

/* Moves w to the caller's frame by any rule. Returns false at the end of
 * the stack or when the frame cannot be trusted. */
static AGENT_NOINLINE bool step_slow(struct walk *w, struct agent_rule r)
{
	uintptr_t cfa, ra, bp = w->f.bp;
	uint64_t w0 = r.w0, w1 = r.w1;
	switch (agent_rule_kind(w0)) {
	case CFI_K_CFA_RSP:
		cfa = w->f.sp + (uintptr_t)agent_rule_off(w0);
		break;
	case CFI_K_CFA_RBP:
		if (!w->f.bp)
			return false;
		cfa = w->f.bp + (uintptr_t)agent_rule_off(w0);
		break;
	case CFI_K_CFA_EXPR:
		if (!cfi_eval(&w->f, agent_rule_expr(w0), false, 0, w->guessed, &cfa))
			return false;
		break;
	case CFI_K_FP:
	case CFI_K_NOMOD:
		/* No FDE: believe rbp only if it points into this stack above
		 * the stack pointer, as a frame-pointer frame would. */
		if (!w->f.bp || w->f.bp < w->f.sp)
			return false;
		cfa = w->f.bp + 16;
		if (!cfi_stack_read(&w->f, w->f.bp, &bp))
			return false;
		w->guessed = true;
		break;
	case CFI_K_SIGNAL: {
		/* The handler returned into the trampoline: sp points at the
		 * ucontext (uc_mcontext.gregs at +40: rbp 10, rsp 15, rip 16). */
		uintptr_t nsp, nbp, npc;
		if (!cfi_stack_read(&w->f, w->f.sp + 40 + 10 * 8, &nbp) ||
		    !cfi_stack_read(&w->f, w->f.sp + 40 + 15 * 8, &nsp) ||
		    !cfi_stack_read(&w->f, w->f.sp + 40 + 16 * 8, &npc))
			return false;
		w->f.pc = npc;
		w->f.sp = nsp;
		w->f.bp = nbp;
		w->exact = true;
		/* The interrupted code may run on another stack (sigaltstack). */
		stack_bounds(w, nsp);
		return npc != 0;
	}
	default:
		return false;
	}
	if (cfa <= w->f.sp || !cfi_stack_read(&w->f, cfa - 8, &ra))
		return false;
	switch (agent_rule_kind(w1)) {
	case CFI_BP_SAME:
		break;
	case CFI_BP_OFFSET:
		if (!cfi_stack_read(&w->f, cfa + (uintptr_t)agent_rule_off(w1), &bp))
			return false;
		break;
	case CFI_BP_EXPR: {
		uintptr_t at;
		if (!cfi_eval(&w->f, agent_rule_expr(w1), true, cfa, w->guessed, &at) ||
		    !cfi_stack_read(&w->f, at, &bp))
			return false;
		break;
	}
	default:
		bp = 0;
		break;
	}
	w->f.pc = ra;
	w->f.sp = cfa;
	w->f.bp = bp;
	w->exact = false;
	return ra != 0;
}

static inline size_t join_slot(uintptr_t sp)
{
	return (size_t)((sp >> 4) * 0x9E3779B97F4A7C15ull >> 56) & (MEMO_JOIN_SLOTS - 1);
}

/* Finishes a walk that has just reached frame (pc, sp, bp), with n pcs
 * found so far, from a recorded walk that went through the same frame:
 * returns the new count of pcs (the recorded rest appended), or -1 when no
 * recorded walk can vouch for the rest. The rest of a walk is a function
 * of the frame's registers, the rules (same generation) and the stack
 * words it read; these are checked, as replay does, and lie between sp
 * and the stack's top (hi), so reading them is safe. m (the entry being
 * recorded, k records so far; k < 0 when not recording) is completed
 * with the rest, so the whole new walk can be replayed later. */
static int join(struct walk_memos *ms, struct walk_memo *m, int k, int bp_src, uintptr_t pc,
		uintptr_t sp, uintptr_t bp, uintptr_t hi, uint32_t gen, int max, uintptr_t *pcs,
		int n, uint8_t *fail_below)
{
	const struct walk_join *js = &ms->join[join_slot(sp)];
	if (js->sp != sp || js->ra != pc || js->way >= MEMO_WAYS)
		return -1;
	const struct walk_memo *e = &ms->e[js->way];
	int j = js->frame;
	/* this walk already found a word of e's that differs above frame j:
	 * e's rest cannot be this stack's (without this, a walk that meets
	 * e's frames one after another checks e's rest at each: n^2) */
	if (j < fail_below[js->way])
		return -1;
	if (e == m || !e->valid || !e->ended || e->gen != gen || e->max != max ||
	    j >= e->nframes || e->fr[j].at + 8 != sp || e->fr[j].ra != pc)
		return -1;
	if (e->tail_bp[j + 1] && e->bp[j] != bp)
		return -1;
	if (e->nframes > j + 1 && e->fr[e->nframes - 1].at + 8 > hi)
		return -1;  /* not this stack's words */
	for (int r = j + 1; r < e->nframes; r++) {
		if (*(const uintptr_t *)e->fr[r].at != e->fr[r].ra ||
		    (e->bp_need[r] && *(const uintptr_t *)e->bp_at[r] != e->bp[r])) {
			fail_below[js->way] = (uint8_t)r;
			return -1;
		}
	}
	int from = e->n_after[j], tail = e->npcs - from;
	if (tail > max - n)
		tail = max - n;
	for (int i = 0; i < tail; i++)
		pcs[n + i] = e->pcs[from + i];
	ms->joins++;
	int nrec = e->nframes - (j + 1);
	if (k >= 0 && tail == e->npcs - from && k + nrec <= MEMO_FRAMES &&
	    n + tail <= MEMO_FRAMES) {
		for (int r = 0; r < nrec; r++) {
			int s = j + 1 + r, d = k + r;
			m->fr[d].at = e->fr[s].at;
			m->fr[d].ra = e->fr[s].ra;
			m->bp_at[d] = e->bp_at[s];
			m->bp[d] = e->bp[s];
			m->bp_need[d] = e->bp_need[s];
			int src = e->rbp_src[s];
			m->rbp_src[d] = (int8_t)(src == -2 ? -2 : src > j ? src - (j + 1) + k : bp_src);
			m->n_after[d] = (uint8_t)(e->n_after[s] - from + n);
		}
		/* the rest used the rbp this walk arrived with: where it came from
		 * must be checked on a replay of the whole walk */
		if (e->tail_bp[j + 1] && bp_src >= 0)
			m->bp_need[bp_src] = true;
		m->nframes = k + nrec;
		m->ended = true;
		return -(n + tail) - 2;  /* recorded whole: see walk */
	}
	return n + tail;
}

const uintptr_t agent_memo_end_word = 0;

/* Records m's frames for later joins, and which records need their rbp. */
static void memo_finish(struct walk_memos *ms, struct walk_memo *m)
{
	int low = INT8_MAX;
	bool any_bp = false;
	uint8_t way = (uint8_t)(m - ms->e);
	m->tail_bp[m->nframes] = false;
	for (int t = m->nframes - 1; t >= 0; t--) {
		any_bp |= m->bp_need[t];
		if (m->rbp_src[t] != -2 && m->rbp_src[t] < low)
			low = m->rbp_src[t];
		m->tail_bp[t] = low < t;
		struct walk_join *js = &ms->join[join_slot(m->fr[t].at + 8)];
		js->sp = m->fr[t].at + 8;
		js->ra = m->fr[t].ra;
		js->way = way;
		js->frame = (uint8_t)t;
	}
	m->any_bp = any_bp;
	m->need_bp0 = m->tail_bp[0];
}

/* Counts what a recorded walk cost (pcs walked) and what the memo gave it
 * (pcs joined), and every MEMO_WINDOW walks decides whether the memo pays
 * (replays count in agent_memo_find): a frame walked while recording,
 * with its tries to join, costs several times a frame of the plain
 * walk's loop (16-17 instructions), and a pc replayed or joined saves less
 * than one, so the memo must give back MEMO_PAYS times the pcs it walked
 * (2 while a plain frame cost about 80). On cc1,
 * which most tells them apart (bench/exact-instructions), 2 gave 2,677
 * instructions an allocation, 4 2,264, 8 2,071, 16 2,091, 32 2,096; the
 * other workloads moved by 2 at most. */
#define MEMO_PAYS 8
static void memo_account(struct walk_memos *ms, int walked, int joined)
{
	ms->win_walked += (uint64_t)walked;
	ms->win_saved += (uint64_t)joined;
	if (++ms->win_n == MEMO_WINDOW) {
		if (ms->win_saved >= MEMO_PAYS * ms->win_walked)
			ms->sparse = 0;
		else
			ms->sparse = ms->sparse ? (ms->sparse < MEMO_SPARSE_MAX ? ms->sparse + 1
							   : MEMO_SPARSE_MAX) : 3;
		ms->win_n = 0;
		ms->win_saved = ms->win_walked = 0;
		agent_memo_quiet_update(ms);
	}
}

/* ---------- the thread's own rule cache (walk_memos.l1) ---------- */

/* Bits 3 to 12 of the pc: two instructions with the scaling by 32 that
 * l1_run_frames needs (a lea and an and), where a multiplicative hash
 * took four. Return addresses of different calls are at least 5 bytes
 * apart; the frames of one walk sharing a slot need pcs 8 KiB apart
 * with the same low bits. Against the multiplicative hash:
 * paths-65536 96 instructions an allocation fewer, cc1 55 (fewer
 * collisions there too), sqlite3 the same. */
static inline unsigned l1_index(uint64_t key)
{
	return (unsigned)(key >> 3) & (MEMO_L1_SLOTS - 1);
}

/* The byte offset of l1_index(key)'s slot, as l1_run_frames takes it:
 * (key << 2) & L1_OFF_MASK, bits 3-12 already scaled by the slot's 32. */
#define L1_OFF_MASK ((MEMO_L1_SLOTS - 1) << 5)

/* Forgets the thread's rules of an older generation. */
static inline void l1_check_gen(struct walk_memos *ms, uint32_t gen)
{
	if (ms && AGENT_UNLIKELY(ms->l1_gen != gen)) {
		agent_memset(ms->l1, 0, sizeof ms->l1);
		ms->l1[0].fast = MEMO_L1_SLOW;  /* key 0: see l1_run */
		ms->l1_gen = gen;
	}
}

/* A fast word with MEMO_L1_BP (l1_put): the frame's CFA is rsp + its k,
 * and rbp was saved d below the CFA. */
#define L1_FIELD_BITS 24
#define L1_BP_BIT 61
_Static_assert(MEMO_L1_BP == (uint64_t)1 << L1_BP_BIT, "l1_run_frames tests bit 61");
static inline uintptr_t l1_bp_k(uint64_t fast)
{
	return fast & ((1u << L1_FIELD_BITS) - 1);
}

static inline uintptr_t l1_bp_d(uint64_t fast)
{
	return (fast >> L1_FIELD_BITS) & ((1u << L1_FIELD_BITS) - 1);
}

/* Keeps rule r of key in the thread's cache, when it is of the cache's
 * generation (a walk that met an unloaded module has a newer one). */
static inline void l1_put(struct walk_memos *ms, unsigned i, uint64_t key, uint32_t gen,
			  struct agent_rule r)
{
	if (!ms || gen != ms->l1_gen || agent_rule_kind(r.w0) == CFI_K_NONE)
		return;
	int64_t k = agent_rule_off(r.w0), off = agent_rule_off(r.w1);
	bool rsp = agent_rule_kind(r.w0) == CFI_K_CFA_RSP && k >= 8 && k < (1 << L1_FIELD_BITS);
	uint64_t fast = MEMO_L1_SLOW;
	if (rsp && agent_rule_kind(r.w1) == CFI_BP_SAME)
		fast = (uint64_t)k;
	else if (rsp && agent_rule_kind(r.w1) == CFI_BP_OFFSET && off >= -k && off <= -8)
		/* rbp saved inside the frame, below the return address */
		fast = MEMO_L1_SLOW | MEMO_L1_BP | (uint64_t)-off << L1_FIELD_BITS | (uint64_t)k;
	ms->l1[i].pc = key, ms->l1[i].w0 = r.w0, ms->l1[i].w1 = r.w1;
	ms->l1[i].fast = fast;
}

/* Steps from return address pc at stack pointer sp through the frames
 * whose rule is one of the two commonest and in the thread's cache,
 * appending each return address to pcs[n..max): the whole of most walks.
 * Returns the new count; *pcp, *spp and *bpp are the frame it stopped at
 * (already in pcs; a pc of 0 when a zero return address ended the
 * stack), which the caller steps by the general rules.
 *
 * The plain loop, 17 instructions a frame with the trail's store, takes
 * the commonest rule (CFA = rsp + k, rbp unchanged): no key bit for
 * exact frames (pc is a return address), no test of the rule's kind
 * (MEMO_L1_SLOW fails the bound), no test of a zero pc (slot 0 holds
 * key 0 with MEMO_L1_SLOW, or another key: either way a zero pc leaves
 * the loop). The next commonest
 * (the same with rbp saved in the frame: a function without frame
 * pointer that uses rbp) costs a few instructions more.
 *
 * Each frame of that loop waits for the last: the return address read
 * gives the rule, the rule the next place to read. So it first follows
 * the trail (walk_memos.trail), the places the last walk read: while
 * each frame's rule leads where the trail says, the reads' addresses are
 * known before the rules are looked up, and the processor overlaps them
 * (a replay of the walk memo is as fast for the same reason). Every read
 * is still checked by the rule first, at the place the loop below would
 * read: the trail only lets the processor start it sooner. From the
 * first frame the trail gets wrong, the loop below takes over and writes
 * the trail for the next walk. tr is the trail's entry for out[0]. */
_Static_assert(sizeof(((struct walk_memos *)0)->l1[0]) == 1 << 5, "l1_run scales by 32");

static AGENT_NOINLINE uintptr_t *l1_run_frames(const struct walk_memos *ms, uintptr_t *pcp,
					       uintptr_t *spp, uintptr_t *bpp, uintptr_t hi,
					       uintptr_t *out, uintptr_t *end, uintptr_t *tr)
{
	/* a function of its own: inlined, GCC keeps two copies of out */
	uintptr_t pc = *pcp, sp = *spp;
	const char *l1 = (const char *)ms->l1;
	const __typeof__(ms->l1[0]) *e;
	/* &ms->l1[l1_index(pc)]: the shift by 2 scales bits 3-12 by 32 */
#define L1_ENTRY(pc) ((const void *)(l1 + (((pc) << 2) & L1_OFF_MASK)))
	/* The loop along the trail, in assembly: GCC's own kept two copies
	 * of the index and reloaded constants, 24 instructions a frame where
	 * these are 16. Leaves at a frame not in the thread's cache (pc and
	 * sp are that frame), at one whose rule does not lead where the trail
	 * says or past hi (stepped below), or at max. */
	uintptr_t x, d, bp = *bpp;
	size_t i = 0, lim = (size_t)(end - out);
	__asm__("test %[lim], %[lim]\n\t"
		"je 9f\n"
		"1:\n\t"
		"lea (,%[pc],4), %[x]\n\t"
		"and %[mask], %k[x]\n\t"
		"cmp %[pc], (%[l1],%[x])\n\t"       /* e->pc */
		"jne 9f\n\t"
		"mov 24(%[l1],%[x]), %[d]\n\t"      /* e->fast */
		"add %[sp], %[d]\n\t"
		"cmp (%[tr],%[i],8), %[d]\n\t"
		"jne 2f\n\t"
		"cmp %[hi], %[d]\n\t"
		"ja 9f\n"
		"3:\n\t"
		/* sp from the trail, not from the rule: the next read need
		 * not wait for the rule's */
		"mov (%[tr],%[i],8), %[sp]\n\t"
		"mov -8(%[sp]), %[pc]\n\t"
		"mov %[pc], (%[out],%[i],8)\n\t"
		"inc %[i]\n\t"
		"cmp %[lim], %[i]\n\t"
		"jb 1b\n\t"
		"jmp 9f\n"
		"2:\n\t"
		/* the next commonest rule (MEMO_L1_BP: k and d in the
		 * fast word), where the trail says? */
		"mov 24(%[l1],%[x]), %[d]\n\t"
		"bt %[bpbit], %[d]\n\t"
		"jnc 9f\n\t"
		"mov %[d], %[x]\n\t"
		"and %[fmask], %k[d]\n\t"
		"add %[sp], %[d]\n\t"
		"cmp (%[tr],%[i],8), %[d]\n\t"
		"jne 9f\n\t"
		"cmp %[hi], %[d]\n\t"
		"ja 9f\n\t"
		"shr %[fbits], %[x]\n\t"
		"and %[fmask], %k[x]\n\t"
		"neg %[x]\n\t"
		"mov (%[d],%[x]), %[bp]\n\t"        /* rbp, saved d below the CFA */
		"jmp 3b\n"
		"9:"
		: [pc] "+r"(pc), [sp] "+r"(sp), [bp] "+r"(bp), [i] "+r"(i), [x] "=&r"(x),
		  [d] "=&r"(d)
		: [l1] "r"(l1), [hi] "r"(hi), [out] "r"(out), [tr] "r"(tr),
		  [lim] "r"(lim), [mask] "i"(L1_OFF_MASK),
		  [bpbit] "i"(L1_BP_BIT), [fbits] "i"(L1_FIELD_BITS),
		  [fmask] "i"((1u << L1_FIELD_BITS) - 1)
		: "cc", "memory");
	*bpp = bp;
	out += i, tr += i;
	if (out >= end)
		goto done;
	e = L1_ENTRY(pc);
	if (e->pc != pc)
		goto done;
	goto step;
	while (out < end) {
		e = L1_ENTRY(pc);
		if (e->pc != pc)
			break;
	step:;
		uintptr_t cfa = sp + e->fast;
		if (AGENT_UNLIKELY(cfa > hi)) {
			/* the next commonest rule? */
			uint64_t f = e->fast;
			cfa = sp + l1_bp_k(f);
			if (!(f & MEMO_L1_BP) || cfa > hi)
				break;
			*bpp = *(const uintptr_t *)(cfa - l1_bp_d(f));
		}
		sp = cfa;
		pc = *(const uintptr_t *)(cfa - 8);
		*out++ = pc;
		*tr++ = sp;
	}
#undef L1_ENTRY
done:
	*pcp = pc, *spp = sp;
	return out;
}

static inline __attribute__((always_inline)) int l1_run(struct walk_memos *ms,
							uintptr_t *pcp, uintptr_t *spp,
							uintptr_t *bpp, uintptr_t hi,
							uintptr_t *pcs, int n, int max)
{
	uintptr_t *out = l1_run_frames(ms, pcp, spp, bpp, hi, pcs + n, pcs + max, ms->trail + n);
	return (int)(out - pcs) - (*pcp == 0);  /* the zero is no frame */
}

/* The rule of (pc, exact) when the thread's cache has none: from the
 * shared cache, else from cfi.c (rule_slow, which may move the walk to a
 * newer generation and cache table: *c and *gen follow), then kept in the
 * thread's cache at index i1. */
static inline __attribute__((always_inline)) struct agent_rule rule_miss(
	struct walk *w, struct walk_memos *ms, unsigned i1, uint64_t key, uintptr_t pc, bool exact,
	struct agent_rule_slot **c, uint32_t *gen)
{
	struct agent_rule r = { CFI_K_NONE, 0 };
	if (AGENT_LIKELY(*c))
		r = agent_rule_get(*c, key, *gen);
	if (AGENT_UNLIKELY(agent_rule_kind(r.w0) == CFI_K_NONE)) {
		w->f.pc = pc, w->exact = exact;
		r = rule_slow(w);
		*c = w->cache;
		*gen = w->gen;
	}
	l1_put(ms, i1, key, *gen, r);
	return r;
}

/* walk without a memo: the same steps, with nothing recorded and no
 * joins tried, so that the loop keeps its few registers in registers
 * (the memo's bookkeeping spills them: about twice the instructions per
 * frame). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-slp-vectorize")))
#endif
static AGENT_NOINLINE int walk_plain(uintptr_t pc, uintptr_t sp, uintptr_t bp, uintptr_t *pcs, int max,
				     struct walk_memos *ms)
{
	struct walk w_, *w = &w_;
	uint32_t gen = atomic_load_explicit(&agent_unwind_gen, RELAXED);
	l1_check_gen(ms, gen);
	w->gen = gen;
	w->f.pc = pc, w->f.sp = sp, w->f.bp = bp, w->exact = true, w->guessed = false;
	stack_bounds(w, sp);
	w->cache = atomic_load_explicit(&agent_rule_cache, memory_order_acquire);
	uintptr_t hi = w->f.lo + w->f.span + 8;
	bool exact = true;
	struct agent_rule_slot *c = w->cache;
	int n = 0, skip = 64;  /* the agent's own frames first, 64 at most */
	if (max <= 0)
		return 0;
	for (;;) {
		struct agent_rule r;
		uint64_t key = agent_rule_key(pc, exact);
		unsigned i1 = l1_index(key);
		if (AGENT_LIKELY(ms) && AGENT_LIKELY(ms->l1[i1].pc == key)) {
			uintptr_t k = ms->l1[i1].fast;
			if (AGENT_LIKELY(sp + k <= hi)) {
				/* the commonest frame, its rule checked once */
				sp += k;
				pc = *(const uintptr_t *)(sp - 8);
				exact = false;
				if (pc == 0)
					break;
				goto found;
			}
			if ((k & MEMO_L1_BP) && sp + l1_bp_k(k) <= hi) {
				/* the next commonest, as in l1_run_frames: the
				 * agent's own frames that save rbp, each walk */
				sp += l1_bp_k(k);
				bp = *(const uintptr_t *)(sp - l1_bp_d(k));
				pc = *(const uintptr_t *)(sp - 8);
				exact = false;
				if (pc == 0)
					break;
				goto found;
			}
			r.w0 = ms->l1[i1].w0, r.w1 = ms->l1[i1].w1;
		} else {
			r = rule_miss(w, ms, i1, key, pc, exact, &c, &gen);
		}
		uint8_t kind = agent_rule_kind(r.w0), how = agent_rule_kind(r.w1);
		uintptr_t cfa = (kind == CFI_K_CFA_RSP ? sp : bp) + (uintptr_t)agent_rule_off(r.w0);
		uintptr_t at = cfa + (uintptr_t)agent_rule_off(r.w1);
		intptr_t room = (intptr_t)(cfa - sp) - 8;
		intptr_t limit = (intptr_t)(hi - sp) - 8;
		if (AGENT_LIKELY((kind == CFI_K_CFA_RSP || kind == CFI_K_CFA_RBP) && how <= CFI_BP_OFFSET &&
			   room >= 0 && room <= limit &&
			   (how == CFI_BP_SAME || at - sp <= (uintptr_t)room))) {
			pc = *(const uintptr_t *)(cfa - 8);
			if (how == CFI_BP_OFFSET)
				bp = *(const uintptr_t *)at;
			sp = cfa;
			exact = false;
			if (pc == 0)
				break;
		} else {
			if (kind == CFI_K_END)
				break;
			w->f.pc = pc, w->f.sp = sp, w->f.bp = bp, w->exact = exact;
			if (!step_slow(w, r))
				break;
			pc = w->f.pc, sp = w->f.sp, bp = w->f.bp, exact = w->exact;
			hi = w->f.lo + w->f.span + 8;
			c = w->cache;
			gen = w->gen;
		}
	found:
		if (AGENT_UNLIKELY(skip)) {
			if (pc - agent_self_lo < agent_self_hi - agent_self_lo) {
				if (--skip)
					continue;
				break;
			}
			skip = 0;
		}
		pcs[n] = pc;
		if (AGENT_LIKELY(ms))
			ms->trail[n] = sp;
		if (++n == max)
			break;
		if (AGENT_LIKELY(ms) && AGENT_LIKELY(!exact)) {
			n = l1_run(ms, &pc, &sp, &bp, hi, pcs, n, max);
			if (pc == 0 || n == max)
				break;
		}
	}
	return n;
}

/* The loop keeps the registers in locals (the compiler cannot prove that
 * stores to pcs leave a struct alone) and handles inline the two shapes
 * nearly every compiled frame has: CFA = rsp or rbp + k, rbp unchanged or
 * saved at CFA + k. Its bounds checks need no lower bound: the return
 * address and the saved rbp must lie in [sp, CFA - 8] (inside the frame),
 * and the CFA at most at the stack's top. A frame failing them is not
 * dropped but handed, like every other shape, to step_slow, which checks
 * reads against the stack's bounds only. */
#if defined(__GNUC__) && !defined(__clang__)
/* GCC's SLP vectoriser packs pc/sp into vector registers and spills them:
 * a 1.3x slower loop. */
__attribute__((optimize("no-tree-slp-vectorize")))
#endif
/* The registers come as arguments, read by the caller in the frame the
 * walk starts from (AGENT_FRAME_REGS): pc there is not a return address,
 * so its rule is looked up as is. */
static AGENT_NOINLINE struct agent_walk walk_record(uintptr_t pc, uintptr_t sp, uintptr_t bp,
						    uintptr_t *pcs, int max, struct walk_memos *ms)
{
	struct walk w_, *w = &w_;
	uint32_t gen = atomic_load_explicit(&agent_unwind_gen, RELAXED);
	l1_check_gen(ms, gen);
	w->gen = gen;
	w->f.pc = pc, w->f.sp = sp, w->f.bp = bp, w->exact = true, w->guessed = false;
	int n = 0, k = 0, bp_src = -1;  /* which record's read gave bp (-1: bp0) */
	struct walk_memo *m = NULL;
	bool record = ms != NULL, ended = false, joined = false;
	uint8_t fail_below[MEMO_WAYS];  /* join: see there */
	int walked = -1;                /* pcs found by walking, when a join found the rest */

	/* a new walk, recorded into the next entry (the caller has looked
	 * for one to replay: agent_memo_find) */
	if (ms) {
		int way = (int)(ms->next++ % MEMO_WAYS);
		ms->e[ms->last % MEMO_WAYS].succ = (uint8_t)way;
		ms->last = ms->pred = (unsigned)way;
		m = &ms->e[way];
		ms->sp0[way] = sp;
		ms->sp0_lo[way] = (uint32_t)sp;
		m->valid = false;
		m->succ = (uint8_t)way;
		m->pc0 = pc, m->sp0 = sp, m->bp0 = bp, m->max = max, m->gen = gen;
		__builtin_memset(fail_below, 0, sizeof fail_below);
	}
	stack_bounds(w, w->f.sp);
	w->cache = atomic_load_explicit(&agent_rule_cache, memory_order_acquire);
	uintptr_t hi = w->f.lo + w->f.span + 8;
	bool exact = w->exact;
	struct agent_rule_slot *c = w->cache;
	for (int budget = max + 64; n < max && budget > 0; budget--) {
		struct agent_rule r;
		uint64_t key = agent_rule_key(pc, exact);
		unsigned i1 = l1_index(key);
		if (AGENT_LIKELY(ms) && AGENT_LIKELY(ms->l1[i1].pc == key)) {
			r.w0 = ms->l1[i1].w0, r.w1 = ms->l1[i1].w1;
		} else {
			r = rule_miss(w, ms, i1, key, pc, exact, &c, &gen);
		}
		uint8_t kind = agent_rule_kind(r.w0), how = agent_rule_kind(r.w1);
		uintptr_t cfa = (kind == CFI_K_CFA_RSP ? sp : bp) + (uintptr_t)agent_rule_off(r.w0);
		uintptr_t at = cfa + (uintptr_t)agent_rule_off(r.w1);
		/* Signed: user addresses are below 2^63, and neither may wrap. */
		intptr_t room = (intptr_t)(cfa - sp) - 8;       /* frame less the RA */
		intptr_t limit = (intptr_t)(hi - sp) - 8;
		if (AGENT_LIKELY((kind == CFI_K_CFA_RSP || kind == CFI_K_CFA_RBP) && how <= CFI_BP_OFFSET &&
			   room >= 0 && room <= limit &&
			   (how == CFI_BP_SAME || at - sp <= (uintptr_t)room))) {
			pc = *(const uintptr_t *)(cfa - 8);
			if (how == CFI_BP_OFFSET)
				bp = *(const uintptr_t *)at;
			if (record) {
				/* A restored rbp matters only if a later frame finds
				 * its CFA from it; code without frame pointers keeps
				 * anything in rbp, and checking that would fail. */
				if (kind == CFI_K_CFA_RBP && bp_src >= 0)
					m->bp_need[bp_src] = true;
				if (k < MEMO_FRAMES) {
					m->rbp_src[k] = (int8_t)(kind == CFI_K_CFA_RBP ? bp_src : -2);
					m->fr[k].at = cfa - 8;
					m->fr[k].ra = pc;
					m->bp_at[k] = at;
					m->bp[k] = bp;
					m->bp_need[k] = false;
					if (how == CFI_BP_OFFSET)
						bp_src = k;
					k++;
				} else {
					record = false;
				}
			}
			sp = cfa;
			exact = false;
			if (pc == 0) {
				ended = true;
				break;
			}
		} else {
			/* The outermost frame (_start, clone) ends every walk: its
			 * rule alone decides that, so the record stays good. Any
			 * other slow step reads more than the record keeps. */
			if (kind == CFI_K_END) {
				ended = true;
				break;
			}
			record = false;
			w->f.pc = pc, w->f.sp = sp, w->f.bp = bp, w->exact = exact;
			if (!step_slow(w, r))
				break;
			pc = w->f.pc, sp = w->f.sp, bp = w->f.bp, exact = w->exact;
			hi = w->f.lo + w->f.span + 8;
			c = w->cache;
			gen = w->gen;
		}
		if (n == 0 && pc - agent_self_lo < agent_self_hi - agent_self_lo) {
			if (record && k > 0 && k <= MEMO_FRAMES)
				m->n_after[k - 1] = 0;
			continue;
		}
		pcs[n++] = pc;
		if (record && k > 0 && k <= MEMO_FRAMES)
			m->n_after[k - 1] = (uint8_t)(n < 255 ? n : 255);
		if (ms && n > 1) {
			int got = join(ms, m, record && k <= MEMO_FRAMES ? k : -1, bp_src, pc, sp, bp,
				       hi, gen, max, pcs, n, fail_below);
			if (got >= 0) {          /* finished, m not completed */
				walked = n;
				n = got;
				record = false;
				break;
			}
			if (got < -1) {          /* finished, m completed */
				walked = n;
				n = -got - 2;
				joined = true;
				break;
			}
		}
	}
	if (record && n <= MEMO_FRAMES && gen == m->gen) {
		if (!joined)
			m->nframes = k;
		m->npcs = n;
		m->ended = joined || ended;
		for (int i = 0; i < n; i++)
			m->pcs[i] = pcs[i];
		agent_memo_mark_end(m);  /* before valid: a replay's loop needs it */
		m->valid = true;
		memo_finish(ms, m);
	}
	if (ms)
		memo_account(ms, walked < 0 ? n : walked, walked < 0 ? 0 : n - walked);
	return (struct agent_walk){ .memo = m && m->valid ? m : NULL, .npcs = n };
}

/* A new walk: recorded into ms, or plain. Inline, so that a plain walk
 * does not pay walk_record's prologue (about 40 instructions). */
static inline __attribute__((always_inline)) struct agent_walk walk(uintptr_t pc, uintptr_t sp,
								   uintptr_t bp, uintptr_t *pcs,
								   int max, struct walk_memos *ms)
{
	/* a memo that does not pay records one walk in 2^sparse (memo_account) */
	if (!ms || (AGENT_UNLIKELY(ms->sparse) && (ms->sparse_tick++ & ((1u << ms->sparse) - 1))))
		return (struct agent_walk){ .memo = NULL, .npcs = walk_plain(pc, sp, bp, pcs, max, ms) };
	return walk_record(pc, sp, bp, pcs, max, ms);
}

/* A walk from the frame this is inlined into (its caller's frame is the
 * first one reported). */
static inline __attribute__((always_inline)) struct agent_walk capture(uintptr_t *pcs, int max,
								    struct walk_memos *ms)
{
	uintptr_t pc, sp, bp;
	if (max <= 0)
		return (struct agent_walk){ .memo = NULL, .npcs = 0 };
	AGENT_FRAME_REGS(pc, sp, bp);
	struct walk_memo *m = ms ? agent_memo_find(ms, pc, sp, bp, max) : NULL;
	if (m)
		return (struct agent_walk){ .memo = m, .npcs = agent_memo_npcs(m), .replayed = true };
	return walk(pc, sp, bp, pcs, max, ms);
}

AGENT_NOINLINE int agent_unwind_cfi(uintptr_t *pcs, int max)
{
	int n = capture(pcs, max, NULL).npcs;
	__asm__ volatile("" ::: "memory");      /* keep this frame, no tail call */
	return n;
}

AGENT_NOINLINE struct agent_walk agent_unwind_cfi_memo(uintptr_t *pcs, int max, struct walk_memos *ms)
{
	struct agent_walk r = capture(pcs, max, ms);
	__asm__ volatile("" ::: "memory");      /* keep this frame, no tail call */
	return r;
}

AGENT_NOINLINE struct agent_walk agent_unwind_cfi_at(uintptr_t pc, uintptr_t sp, uintptr_t bp,
						     uintptr_t *pcs, int max, struct walk_memos *ms)
{
	if (max <= 0)
		return (struct agent_walk){ .memo = NULL, .npcs = 0 };
	return walk(pc, sp, bp, pcs, max, ms);
}

/* A plain walk that keeps every frame and its stack pointer: the rule of
 * each frame from the cache or cfi.c, every step by step_slow (which
 * knows every rule). */
AGENT_NOINLINE int agent_unwind_frames(uintptr_t *pcs, uintptr_t *sps, int max)
{
	struct walk w_, *w = &w_;
	uintptr_t pc, sp, bp;
	AGENT_FRAME_REGS(pc, sp, bp);
	w->f.pc = pc, w->f.sp = sp, w->f.bp = bp, w->exact = true, w->guessed = false;
	w->gen = atomic_load_explicit(&agent_unwind_gen, RELAXED);
	w->cache = atomic_load_explicit(&agent_rule_cache, memory_order_acquire);
	stack_bounds(w, sp);
	int n = 0;
	for (int budget = max + 64; n < max && budget > 0; budget--) {
		struct agent_rule r = { CFI_K_NONE, 0 };
		if (w->cache)
			r = agent_rule_get(w->cache, agent_rule_key(w->f.pc, w->exact), w->gen);
		if (agent_rule_kind(r.w0) == CFI_K_NONE)
			r = rule_slow(w);
		if (agent_rule_kind(r.w0) == CFI_K_END || !step_slow(w, r))
			break;
		pcs[n] = w->f.pc;
		sps[n] = w->f.sp;
		n++;
	}
	__asm__ volatile("" ::: "memory");      /* keep this frame, no tail call */
	return n;
}
