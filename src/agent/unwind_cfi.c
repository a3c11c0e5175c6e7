/*
 * unwind_cfi.c — a fast x86_64 unwinder driven by .eh_frame call-frame
 * information, for capturing the stack of every allocation.
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
 * probe and one or two loads from the stack.
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
 *    walk instead of guessing.
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
#include <link.h>
#include <stddef.h>

#include "agent/agent.h"
#include "agent/unwind.h"
#include "agent/banned.h"


/* Top of the main thread's stack, set by the dynamic loader. Weak so that
 * an odd libc without it only loses the precise bound. */
extern void *__libc_stack_end __attribute__((weak));

/* ---------- rules ---------- */

enum rule_kind {
	K_NONE = 0,     /* unused slot */
	K_CFA_RSP,      /* CFA = rsp + off, return address at CFA-8 */
	K_CFA_RBP,      /* CFA = rbp + off */
	K_CFA_EXPR,     /* CFA = value of the DWARF expression at expr */
	K_END,          /* return address undefined: outermost frame */
	K_STOP,         /* not understood: end the walk */
	K_FP,           /* no FDE: follow rbp if it looks like a frame */
	K_NOMOD,        /* like K_FP, for a pc in no module (never cached:
			 * a library may be loaded there later) */
	K_SIGNAL,       /* rt_sigreturn trampoline: registers in a ucontext */
};

enum bp_how {
	B_SAME = 0,     /* caller's rbp is this frame's rbp */
	B_OFFSET,       /* saved at CFA + off */
	B_UNKNOWN,      /* caller's rbp cannot be known */
	B_EXPR,         /* saved at the address the expression computes */
};

/* One frame's recipe. off is signed; expr points at a DWARF expression's
 * ULEB128 length inside the module's mapped .eh_frame. */
struct rule {
	uint8_t kind, bp_how;
	int64_t cfa_off, bp_off;
	const uint8_t *cfa_expr, *bp_expr;
};

/* Packed as two words for the cache: kind/how in the low byte, offset or
 * pointer in the other 56 bits (user-space pointers fit). */
static inline uint64_t pack(uint8_t tag, int64_t off, const uint8_t *p)
{
	uint64_t v = p ? (uint64_t)(uintptr_t)p : (uint64_t)off;
	return (v << 8) | tag;
}

static inline bool fits56(int64_t v)
{
	return v >= -((int64_t)1 << 55) && v < ((int64_t)1 << 55);
}

static inline uint8_t kind_of(uint64_t w) { return (uint8_t)w; }
static inline int64_t off_of(uint64_t w) { return (int64_t)w >> 8; }
static inline const uint8_t *expr_of(uint64_t w) { return (const uint8_t *)(uintptr_t)(w >> 8); }

/* ---------- the pc → rule cache ---------- */

/* tag = generation << 32 | sequence; the sequence is odd while a writer
 * fills the slot. Slot 0 of a set and slot 1 share a cache line. */
struct slot {
	_Atomic uint64_t tag;
	_Atomic uint64_t key;
	_Atomic uint64_t w0, w1;
};

#define CACHE_BITS 15                   /* 32768 slots, 1 MiB reserved */
#define CACHE_SLOTS (1u << CACHE_BITS)

static struct slot *_Atomic cache;
/* Starts at 1 so that a zeroed slot never matches. */
_Atomic uint32_t agent_unwind_gen = 1;

/* Slots are keyed by the frame's pc, with bit 63 set when the pc is not a
 * return address (after a signal frame: its rule is the one at pc, not at
 * pc - 1). The set is chosen by the pc alone. */
static inline uint64_t cache_key(uintptr_t pc, bool exact)
{
	return (uint64_t)pc | (uint64_t)exact << 63;
}

static inline struct slot *cache_set(struct slot *c, uint64_t key)
{
	/* Shift and xor rather than a multiply: this sits on the chain of
	 * dependent loads every frame waits for. Return addresses differ in
	 * their low bits; the high ones tell objects apart. */
	uint64_t h = key ^ (key >> CACHE_BITS) ^ (key >> 29);
	return &c[h & (CACHE_SLOTS - 2)];
}

#define RELAXED memory_order_relaxed

/* A packed rule: kind (or bp_how) in the low byte of each word. */
struct packed {
	uint64_t w0, w1;
};

/* The packed rule for key, or one of kind K_NONE when the cache does not
 * have it for this generation. */
static inline struct packed cache_get(struct slot *c, uint64_t key, uint32_t gen)
{
	struct slot *s = cache_set(c, key);
	uint64_t want = (uint64_t)gen << 32;
	for (int i = 0; i < 2; i++, s++) {
		uint64_t t = atomic_load_explicit(&s->tag, memory_order_acquire);
		if (((t ^ want) & 0xffffffff00000001ull) ||
		    atomic_load_explicit(&s->key, RELAXED) != key)
			continue;
		struct packed r = { atomic_load_explicit(&s->w0, RELAXED),
				    atomic_load_explicit(&s->w1, RELAXED) };
		atomic_thread_fence(memory_order_acquire);
		if (AGENT_LIKELY(atomic_load_explicit(&s->tag, RELAXED) == t))
			return r;
	}
	return (struct packed){ K_NONE, 0 };
}

static struct slot *cache_table(void)
{
	struct slot *c = atomic_load_explicit(&cache, memory_order_acquire);
	if (c)
		return c;
	struct slot *fresh = agent_mmap(CACHE_SLOTS * sizeof *fresh);
	if (!fresh)
		return NULL;
	if (atomic_compare_exchange_strong(&cache, &c, fresh))
		return fresh;
	agent_munmap(fresh, CACHE_SLOTS * sizeof *fresh);
	return c;
}

/* Stores a packed rule unless the slot is busy: the cache is only ever an
 * optimisation. */
static void cache_put(uint64_t key, uint32_t gen, struct packed r)
{
	struct slot *c = cache_table();
	if (!c)
		return;
	struct slot *s = cache_set(c, key);
	int victim = (key >> 4) & 1;
	for (int i = 0; i < 2; i++) {
		uint64_t t = atomic_load_explicit(&s[i].tag, RELAXED);
		if ((uint32_t)(t >> 32) != gen || atomic_load_explicit(&s[i].key, RELAXED) == key) {
			victim = i;
			break;
		}
	}
	s += victim;
	uint64_t t = atomic_load_explicit(&s->tag, RELAXED);
	if (t & 1)
		return;
	uint32_t seq = (uint32_t)t;
	uint64_t busy = (uint64_t)gen << 32 | (uint32_t)(seq + 1);
	if (!atomic_compare_exchange_strong(&s->tag, &t, busy))
		return;
	/* Orders the odd tag before the data (a seqlock writer's fence; free
	 * on x86): a reader that sees new data then sees the tag moved. */
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&s->key, key, RELAXED);
	atomic_store_explicit(&s->w0, r.w0, RELAXED);
	atomic_store_explicit(&s->w1, r.w1, RELAXED);
	atomic_store_explicit(&s->tag, (uint64_t)gen << 32 | (uint32_t)(seq + 2),
			      memory_order_release);
}

/* Drops every cached rule: call after a library was unloaded. Hook-safe,
 * signal-safe. */
void agent_unwind_cfi_flush(void)
{
	atomic_fetch_add(&agent_unwind_gen, 1);
}

/* ---------- modules ---------- */

/* What a miss needs to know about the object holding a pc. */
struct mod {
	uintptr_t lo, hi;               /* executable PT_LOAD span */
	uintptr_t seg_lo, seg_hi;       /* PT_LOAD holding .eh_frame_hdr */
	uintptr_t hdr;                  /* .eh_frame_hdr, 0 when none */
	bool code_readable;             /* every PF_X segment also PF_R */
};

/* Fills m from an object's program headers; false when it has no
 * executable segment. */
static bool describe(uintptr_t base, const ElfW(Phdr) *phdr, int phnum, struct mod *m)
{
	uintptr_t hdr_vaddr = 0;
	bool have_hdr = false;
	m->lo = UINTPTR_MAX;
	m->hi = 0;
	m->seg_lo = m->seg_hi = m->hdr = 0;
	m->code_readable = true;
	for (int i = 0; i < phnum; i++) {
		const ElfW(Phdr) *ph = &phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			uintptr_t a = base + ph->p_vaddr;
			if (a < m->lo)
				m->lo = a;
			if (a + ph->p_memsz > m->hi)
				m->hi = a + ph->p_memsz;
			if (!(ph->p_flags & PF_R))
				m->code_readable = false;
		} else if (ph->p_type == PT_GNU_EH_FRAME) {
			hdr_vaddr = ph->p_vaddr;
			have_hdr = true;
		}
	}
	if (m->hi == 0)
		return false;
	for (int i = 0; have_hdr && i < phnum; i++) {
		const ElfW(Phdr) *ph = &phdr[i];
		if (ph->p_type == PT_LOAD && hdr_vaddr >= ph->p_vaddr &&
		    hdr_vaddr < ph->p_vaddr + ph->p_memsz) {
			m->seg_lo = base + ph->p_vaddr;
			m->seg_hi = m->seg_lo + ph->p_memsz;
			m->hdr = base + hdr_vaddr;
		}
	}
	return true;
}

#ifdef DLFO_EH_SEGMENT_TYPE
/* glibc >= 2.35: _dl_find_object is lock-free and async-signal-safe. It
 * gives the object's mapping, its PT_GNU_EH_FRAME and its link map; the
 * program headers come from the ELF header at the start of the mapping,
 * checked before use (they must lie in its first page, which is mapped).
 * Without them, the whole mapping bounds the reads of .eh_frame and the
 * code is not read (no signal-frame check). */
static bool module_find(uintptr_t a, struct mod *m)
{
	struct dl_find_object fo;
	if (_dl_find_object((void *)a, &fo) != 0 || !fo.dlfo_link_map)
		return false;
	uintptr_t start = (uintptr_t)fo.dlfo_map_start & ~(uintptr_t)4095;
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)start;
	if (eh->e_ident[EI_MAG0] == ELFMAG0 && eh->e_ident[EI_MAG1] == ELFMAG1 &&
	    eh->e_ident[EI_MAG2] == ELFMAG2 && eh->e_ident[EI_MAG3] == ELFMAG3 &&
	    eh->e_phentsize == sizeof(ElfW(Phdr)) && eh->e_phoff < 4096 &&
	    eh->e_phnum <= (4096 - eh->e_phoff) / sizeof(ElfW(Phdr)) &&
	    describe(fo.dlfo_link_map->l_addr, (const ElfW(Phdr) *)(start + eh->e_phoff),
		     eh->e_phnum, m))
		return true;
	m->lo = m->seg_lo = (uintptr_t)fo.dlfo_map_start;
	m->hi = m->seg_hi = (uintptr_t)fo.dlfo_map_end;
	m->hdr = (uintptr_t)fo.dlfo_eh_frame;
	m->code_readable = false;
	return true;
}
#else
/* Older glibc: dl_iterate_phdr, which takes the loader's lock. Note that
 * glibc does not reset that lock in a forked child: a fork while another
 * thread is inside dl_iterate_phdr leaves it held for good in the child. */
struct iter {
	uintptr_t a;
	struct mod found;
	bool have;
};

static int iter_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct iter *it = arg;
	struct mod m;
	if (describe(info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum, &m) &&
	    it->a >= m.lo && it->a < m.hi) {
		it->found = m;
		it->have = true;
		return 1;
	}
	return 0;
}

static bool module_find(uintptr_t a, struct mod *m)
{
	struct iter it = { .a = a };
	dl_iterate_phdr(iter_cb, &it);
	*m = it.found;
	return it.have;
}
#endif

/* ---------- bounded byte reader over module memory ---------- */

struct bytes {
	const uint8_t *p, *end;
	bool bad;
};

static inline uint8_t rd_u8(struct bytes *b)
{
	if (b->p >= b->end) {
		b->bad = true;
		return 0;
	}
	return *b->p++;
}

static uint64_t rd_fixed(struct bytes *b, int n)
{
	if (b->end - b->p < n) {
		b->bad = true;
		b->p = b->end;
		return 0;
	}
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v |= (uint64_t)b->p[i] << (8 * i);
	b->p += n;
	return v;
}

static uint64_t rd_uleb(struct bytes *b)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		uint8_t c = rd_u8(b);
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
	}
	b->bad = true;
	return 0;
}

static int64_t rd_sleb(struct bytes *b)
{
	uint64_t v = 0;
	int shift = 0;
	uint8_t c;
	do {
		if (shift >= 64) {
			b->bad = true;
			return 0;
		}
		c = rd_u8(b);
		v |= (uint64_t)(c & 0x7f) << shift;
		shift += 7;
	} while (c & 0x80);
	if (shift < 64 && (c & 0x40))
		v |= ~(uint64_t)0 << shift;
	return (int64_t)v;
}

#define PE_OMIT 0xff

/* Reads a DW_EH_PE-encoded value. Only absolute, pc-relative and (with a
 * base) data-relative values are accepted; indirect ones are refused. */
static bool rd_encoded(struct bytes *b, uint8_t enc, uintptr_t datarel, uintptr_t *out)
{
	if (enc == PE_OMIT || (enc & 0x80))
		return false;
	uintptr_t at = (uintptr_t)b->p;
	uint64_t v;
	switch (enc & 0x0f) {
	case 0x00: case 0x04: v = rd_fixed(b, 8); break;
	case 0x01: v = rd_uleb(b); break;
	case 0x02: v = rd_fixed(b, 2); break;
	case 0x03: v = rd_fixed(b, 4); break;
	case 0x09: v = (uint64_t)rd_sleb(b); break;
	case 0x0a: v = (uint64_t)(int64_t)(int16_t)rd_fixed(b, 2); break;
	case 0x0b: v = (uint64_t)(int64_t)(int32_t)rd_fixed(b, 4); break;
	case 0x0c: v = rd_fixed(b, 8); break;
	default: return false;
	}
	switch (enc & 0x70) {
	case 0x00: break;
	case 0x10: v += at; break;
	case 0x30:
		if (!datarel)
			return false;
		v += datarel;
		break;
	default: return false;
	}
	*out = (uintptr_t)v;
	return !b->bad;
}

/* ---------- FDE search ---------- */

/* Returns the FDE covering a from the module's .eh_frame_hdr table, or
 * NULL (no table, a table layout we do not read, or no covering entry; the
 * FDE's own range is checked by the caller). */
static const uint8_t *fde_search(const struct mod *m, uintptr_t a)
{
	if (!m->hdr)
		return NULL;
	struct bytes b = { (const uint8_t *)m->hdr, (const uint8_t *)m->seg_hi, false };
	uint8_t version = rd_u8(&b), ptr_enc = rd_u8(&b), cnt_enc = rd_u8(&b);
	uint8_t tab_enc = rd_u8(&b);
	uintptr_t eh_frame, count;
	if (b.bad || version != 1 || tab_enc != 0x3b ||
	    !rd_encoded(&b, ptr_enc, m->hdr, &eh_frame) ||
	    !rd_encoded(&b, cnt_enc, m->hdr, &count) || count == 0)
		return NULL;
	const int32_t *tab = (const int32_t *)b.p;
	if ((uintptr_t)(b.end - b.p) / 8 < count)
		return NULL;
	intptr_t rel = (intptr_t)(a - m->hdr);
	if (rel < tab[0])
		return NULL;
	size_t lo = 0, hi = count;      /* tab[lo] <= rel < tab[hi] */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (tab[2 * mid] <= rel)
			lo = mid;
		else
			hi = mid;
	}
	uintptr_t fde = m->hdr + (intptr_t)tab[2 * lo + 1];
	if (fde < m->seg_lo || fde >= m->seg_hi)
		return NULL;
	return (const uint8_t *)fde;
}

/* ---------- CIE/FDE parsing and the CFA program ---------- */

struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra_reg;
	uint8_t fde_enc;
	bool aug_z;
	const uint8_t *insns, *end;
};

/* Reads an entry's length; returns the end of the entry or NULL. */
static const uint8_t *entry_end(struct bytes *b)
{
	uint64_t len = rd_fixed(b, 4);
	if (len == 0xffffffffu)
		len = rd_fixed(b, 8);
	if (b->bad || len == 0 || len > (uint64_t)(b->end - b->p))
		return NULL;
	return b->p + len;
}

static bool cie_parse(const uint8_t *p, const struct mod *m, struct cie *c)
{
	struct bytes b = { p, (const uint8_t *)m->seg_hi, false };
	const uint8_t *end = entry_end(&b);
	if (!end || rd_fixed(&b, 4) != 0)
		return false;
	b.end = end;
	uint8_t version = rd_u8(&b);
	if (version != 1 && version != 3 && version != 4)
		return false;
	char aug[8];
	int n = 0;
	for (;;) {
		uint8_t ch = rd_u8(&b);
		if (b.bad || n == (int)sizeof aug)
			return false;
		aug[n++] = (char)ch;
		if (!ch)
			break;
	}
	if (version == 4) {
		if (rd_u8(&b) != 8)     /* address size */
			return false;
		rd_u8(&b);              /* segment selector size */
	}
	c->code_align = rd_uleb(&b);
	c->data_align = rd_sleb(&b);
	c->ra_reg = version == 1 ? rd_u8(&b) : rd_uleb(&b);
	c->fde_enc = 0;
	c->aug_z = aug[0] == 'z';
	if (c->aug_z) {
		uint64_t len = rd_uleb(&b);
		if (b.bad || len > (uint64_t)(b.end - b.p))
			return false;
		const uint8_t *after = b.p + len;
		for (int i = 1; aug[i]; i++) {
			switch (aug[i]) {
			case 'R':
				c->fde_enc = rd_u8(&b);
				break;
			case 'L':
				rd_u8(&b);
				break;
			case 'P': {
				uint8_t enc = rd_u8(&b);
				static const int8_t size[16] = { 8, -1, 2, 4, 8, -1, -1, -1,
								 -1, -1, 2, 4, 8, -1, -1, -1 };
				if (size[enc & 0x0f] < 0 || (enc & 0x70) == 0x50)
					return false;
				rd_fixed(&b, size[enc & 0x0f]);
				break;
			}
			case 'S':       /* signal frames are recognised by code */
			case 'B':
				break;
			default:
				return false;
			}
		}
		b.p = after;
	} else if (aug[0]) {
		return false;
	}
	c->insns = b.p;
	c->end = end;
	return !b.bad && c->code_align != 0;
}

enum reg_how { R_SAME, R_UNDEF, R_OFFSET, R_EXPR, R_OTHER };

struct reg_rule {
	uint8_t how;
	int64_t off;
	const uint8_t *expr;
};

struct row {
	bool cfa_is_expr;
	uint64_t cfa_reg;
	int64_t cfa_off;
	const uint8_t *cfa_expr;
	struct reg_rule bp, ra;
	bool sp_odd;            /* a rule for rsp itself: not understood */
};

#define DW_RBP 6
#define DW_RSP 7
#define STATE_DEPTH 8

struct cfa_prog {
	const struct cie *cie;
	uintptr_t a, loc;
	struct row row, init;
	struct row stack[STATE_DEPTH];
	int depth;
};

static struct reg_rule *reg_slot(struct cfa_prog *s, struct row *r, uint64_t reg)
{
	if (reg == DW_RBP)
		return &r->bp;
	if (reg == s->cie->ra_reg)
		return &r->ra;
	if (reg == DW_RSP)
		r->sp_odd = true;
	return NULL;
}

static void set_rule(struct cfa_prog *s, uint64_t reg, uint8_t how, int64_t off,
		     const uint8_t *expr)
{
	struct reg_rule *rr = reg_slot(s, &s->row, reg);
	if (rr) {
		rr->how = how;
		rr->off = off;
		rr->expr = expr;
	}
}

static void restore_rule(struct cfa_prog *s, uint64_t reg)
{
	struct reg_rule *rr = reg_slot(s, &s->row, reg);
	if (rr)
		*rr = reg == DW_RBP ? s->init.bp : s->init.ra;
}

/* Reads an expression block (ULEB length, then bytes); returns where it
 * starts (at the length) or NULL when it runs past the segment. */
static const uint8_t *rd_block(struct bytes *b)
{
	const uint8_t *at = b->p;
	uint64_t len = rd_uleb(b);
	if (b->bad || len > 64 || len > (uint64_t)(b->end - b->p)) {
		b->bad = true;
		return NULL;
	}
	b->p += len;
	return at;
}

/* Runs [p, end) until the row for s->a is complete. Returns false on
 * anything malformed or not understood. */
static bool run_cfa(struct cfa_prog *s, const uint8_t *p, const uint8_t *end)
{
	struct bytes b = { p, end, false };
	const struct cie *c = s->cie;
	while (b.p < b.end && !b.bad) {
		uint8_t op = rd_u8(&b);
		uint64_t reg, delta = 0;
		bool advance = false;
		switch (op >> 6) {
		case 1:
			delta = (op & 0x3f) * c->code_align;
			advance = true;
			break;
		case 2:
			set_rule(s, op & 0x3f, R_OFFSET, (int64_t)rd_uleb(&b) * c->data_align, NULL);
			continue;
		case 3:
			restore_rule(s, op & 0x3f);
			continue;
		}
		if (!advance) {
			switch (op) {
			case 0x00:      /* nop */
				break;
			case 0x01: {    /* set_loc */
				uintptr_t to;
				if (!rd_encoded(&b, c->fde_enc, 0, &to))
					return false;
				if (to > s->a)
					return true;
				s->loc = to;
				break;
			}
			case 0x02: delta = rd_fixed(&b, 1) * c->code_align; advance = true; break;
			case 0x03: delta = rd_fixed(&b, 2) * c->code_align; advance = true; break;
			case 0x04: delta = rd_fixed(&b, 4) * c->code_align; advance = true; break;
			case 0x05:      /* offset_extended */
				reg = rd_uleb(&b);
				set_rule(s, reg, R_OFFSET, (int64_t)rd_uleb(&b) * c->data_align, NULL);
				break;
			case 0x06:      /* restore_extended */
				restore_rule(s, rd_uleb(&b));
				break;
			case 0x07:      /* undefined */
				set_rule(s, rd_uleb(&b), R_UNDEF, 0, NULL);
				break;
			case 0x08:      /* same_value */
				set_rule(s, rd_uleb(&b), R_SAME, 0, NULL);
				break;
			case 0x09:      /* register */
				reg = rd_uleb(&b);
				rd_uleb(&b);
				set_rule(s, reg, R_OTHER, 0, NULL);
				break;
			case 0x0a:      /* remember_state */
				if (s->depth == STATE_DEPTH)
					return false;
				s->stack[s->depth++] = s->row;
				break;
			case 0x0b:      /* restore_state */
				if (s->depth == 0)
					return false;
				s->row = s->stack[--s->depth];
				break;
			case 0x0c:      /* def_cfa */
				s->row.cfa_reg = rd_uleb(&b);
				s->row.cfa_off = (int64_t)rd_uleb(&b);
				s->row.cfa_is_expr = false;
				break;
			case 0x0d:      /* def_cfa_register */
				s->row.cfa_reg = rd_uleb(&b);
				s->row.cfa_is_expr = false;
				break;
			case 0x0e:      /* def_cfa_offset */
				s->row.cfa_off = (int64_t)rd_uleb(&b);
				break;
			case 0x0f:      /* def_cfa_expression */
				s->row.cfa_expr = rd_block(&b);
				s->row.cfa_is_expr = true;
				break;
			case 0x10: {    /* expression */
				reg = rd_uleb(&b);
				const uint8_t *e = rd_block(&b);
				set_rule(s, reg, R_EXPR, 0, e);
				break;
			}
			case 0x11:      /* offset_extended_sf */
				reg = rd_uleb(&b);
				set_rule(s, reg, R_OFFSET, rd_sleb(&b) * c->data_align, NULL);
				break;
			case 0x12:      /* def_cfa_sf */
				s->row.cfa_reg = rd_uleb(&b);
				s->row.cfa_off = rd_sleb(&b) * c->data_align;
				s->row.cfa_is_expr = false;
				break;
			case 0x13:      /* def_cfa_offset_sf */
				s->row.cfa_off = rd_sleb(&b) * c->data_align;
				break;
			case 0x14:      /* val_offset */
			case 0x15:      /* val_offset_sf */
				reg = rd_uleb(&b);
				rd_uleb(&b);
				set_rule(s, reg, R_OTHER, 0, NULL);
				break;
			case 0x16:      /* val_expression */
				reg = rd_uleb(&b);
				rd_block(&b);
				set_rule(s, reg, R_OTHER, 0, NULL);
				break;
			case 0x2e:      /* GNU_args_size */
				rd_uleb(&b);
				break;
			case 0x2f:      /* GNU_negative_offset_extended */
				reg = rd_uleb(&b);
				set_rule(s, reg, R_OFFSET, -(int64_t)rd_uleb(&b) * c->data_align, NULL);
				break;
			default:
				return false;
			}
		}
		if (advance) {
			if (delta > s->a - s->loc)
				return true;    /* the next row starts after a */
			s->loc += delta;
		}
	}
	return !b.bad;
}

/* Computes the rule for address a covered by the FDE at fde. Returns false
 * when the FDE does not cover a (the caller falls back to rbp chaining). */
static bool rule_from_fde(const struct mod *m, const uint8_t *fde, uintptr_t a,
			  struct rule *r)
{
	struct bytes b = { fde, (const uint8_t *)m->seg_hi, false };
	const uint8_t *end = entry_end(&b);
	if (!end)
		return false;
	b.end = end;
	const uint8_t *at = b.p;
	uint32_t cie_off = (uint32_t)rd_fixed(&b, 4);
	if (b.bad || cie_off == 0 || (uintptr_t)at - m->seg_lo < cie_off)
		return false;
	struct cie c;
	if (!cie_parse(at - cie_off, m, &c))
		return false;
	uintptr_t begin, range;
	if (!rd_encoded(&b, c.fde_enc, 0, &begin) ||
	    !rd_encoded(&b, c.fde_enc & 0x0f, 0, &range))
		return false;
	if (a < begin || a - begin >= range)
		return false;
	if (c.aug_z) {
		uint64_t len = rd_uleb(&b);
		if (b.bad || len > (uint64_t)(b.end - b.p))
			return false;
		b.p += len;
	}

	struct cfa_prog s;
	s.cie = &c;
	s.a = UINTPTR_MAX;
	s.loc = begin;
	s.depth = 0;
	s.row = (struct row){ .cfa_reg = DW_RSP, .cfa_off = 8 };
	s.row.ra.how = R_SAME;
	r->kind = K_STOP;
	r->bp_how = B_UNKNOWN;
	r->cfa_off = r->bp_off = 0;
	r->cfa_expr = r->bp_expr = NULL;
	if (!run_cfa(&s, c.insns, c.end))
		return true;
	s.init = s.row;
	s.a = a;
	s.depth = 0;
	if (!run_cfa(&s, b.p, b.end))
		return true;

	const struct row *w = &s.row;
	if (w->ra.how == R_UNDEF) {
		r->kind = K_END;
		return true;
	}
	if (w->ra.how != R_OFFSET || w->ra.off != -8 || w->sp_odd)
		return true;
	if (w->cfa_is_expr) {
		if (!w->cfa_expr)
			return true;
		r->kind = K_CFA_EXPR;
		r->cfa_expr = w->cfa_expr;
	} else if (w->cfa_reg == DW_RSP || w->cfa_reg == DW_RBP) {
		r->kind = w->cfa_reg == DW_RSP ? K_CFA_RSP : K_CFA_RBP;
		r->cfa_off = w->cfa_off;
	} else {
		return true;
	}
	switch (w->bp.how) {
	case R_SAME: r->bp_how = B_SAME; break;
	case R_OFFSET: r->bp_how = B_OFFSET; r->bp_off = w->bp.off; break;
	case R_EXPR:
		r->bp_how = w->bp.expr ? B_EXPR : B_UNKNOWN;
		r->bp_expr = w->bp.expr;
		break;
	default: r->bp_how = B_UNKNOWN; break;
	}
	return true;
}

/* ---------- the walk ---------- */

/* A frame's registers, and where its stack may be read. */
struct walk {
	uintptr_t pc, sp, bp;   /* bp 0: this frame's rbp is not known (no
				 * frame can be found from an rbp of 0) */
	bool exact;             /* pc is not a return address (signal frame) */
	uintptr_t lo, span;     /* stack reads: lo <= addr <= lo + span, 8 bytes */
	uint32_t gen;
	struct slot *cache;
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
	w->lo = sp;
	w->span = hi - sp >= 8 ? hi - sp - 8 : 0;
}

static inline bool stack_read(const struct walk *w, uintptr_t addr, uintptr_t *out)
{
	if (addr - w->lo > w->span)
		return false;
	*out = *(const uintptr_t *)addr;
	return true;
}

/* A tiny DWARF expression evaluator for CFA and register expressions:
 * constants, arithmetic, comparisons, rsp/rbp/rip as base registers and
 * dereferences of this stack. */
static bool eval(const struct walk *w, const uint8_t *blk, bool push_cfa, uintptr_t cfa,
		 uintptr_t *out)
{
	uintptr_t st[8];
	int n = 0;
	const uint8_t *p = blk;
	struct bytes b = { p, p + 10, false };
	uint64_t len = rd_uleb(&b);
	b.end = b.p + len;      /* checked against the segment by rd_block */
	if (push_cfa)
		st[n++] = cfa;
#define NEED(k) do { if (n < (k)) return false; } while (0)
#define PUSH(v) do { if (n == 8) return false; uintptr_t v_ = (v); st[n++] = v_; } while (0)
	while (b.p < b.end) {
		uint8_t op = rd_u8(&b);
		uintptr_t x, y;
		if (op >= 0x30 && op <= 0x4f) {                 /* lit0..31 */
			PUSH(op - 0x30u);
			continue;
		}
		if (op >= 0x70 && op <= 0x8f) {                 /* breg0..31 */
			int64_t off = rd_sleb(&b);
			unsigned reg = op - 0x70u;
			if (reg == DW_RSP)
				x = w->sp;
			else if (reg == DW_RBP && w->bp)
				x = w->bp;
			else if (reg == 16)
				x = w->pc;
			else
				return false;
			PUSH(x + (uintptr_t)off);
			continue;
		}
		switch (op) {
		case 0x06:      /* deref */
			NEED(1);
			if (!stack_read(w, st[n - 1], &st[n - 1]))
				return false;
			break;
		case 0x08: PUSH(rd_fixed(&b, 1)); break;
		case 0x09: PUSH((uintptr_t)(int8_t)rd_fixed(&b, 1)); break;
		case 0x0a: PUSH(rd_fixed(&b, 2)); break;
		case 0x0b: PUSH((uintptr_t)(int16_t)rd_fixed(&b, 2)); break;
		case 0x0c: PUSH(rd_fixed(&b, 4)); break;
		case 0x0d: PUSH((uintptr_t)(int32_t)rd_fixed(&b, 4)); break;
		case 0x0e: case 0x0f: PUSH(rd_fixed(&b, 8)); break;
		case 0x10: PUSH(rd_uleb(&b)); break;
		case 0x11: PUSH((uintptr_t)rd_sleb(&b)); break;
		case 0x12: NEED(1); PUSH(st[n - 1]); break;             /* dup */
		case 0x13: NEED(1); n--; break;                         /* drop */
		case 0x14: NEED(2); PUSH(st[n - 2]); break;             /* over */
		case 0x16: NEED(2); x = st[n - 1]; st[n - 1] = st[n - 2]; st[n - 2] = x; break;
		case 0x1f: NEED(1); st[n - 1] = -st[n - 1]; break;      /* neg */
		case 0x20: NEED(1); st[n - 1] = ~st[n - 1]; break;      /* not */
		case 0x23: NEED(1); st[n - 1] += rd_uleb(&b); break;    /* plus_uconst */
		case 0x96: break;                                       /* nop */
		case 0x1a: case 0x1c: case 0x1e: case 0x21: case 0x22: case 0x24:
		case 0x25: case 0x26: case 0x27: case 0x29: case 0x2a: case 0x2b:
		case 0x2c: case 0x2d: case 0x2e:
			NEED(2);
			y = st[--n];
			x = st[n - 1];
			switch (op) {
			case 0x1a: x &= y; break;
			case 0x1c: x -= y; break;
			case 0x1e: x *= y; break;
			case 0x21: x |= y; break;
			case 0x22: x += y; break;
			case 0x24: x = y < 64 ? x << y : 0; break;
			case 0x25: x = y < 64 ? x >> y : 0; break;
			case 0x26: x = (uintptr_t)((intptr_t)x >> (y < 63 ? y : 63)); break;
			case 0x27: x ^= y; break;
			case 0x29: x = x == y; break;
			case 0x2a: x = (intptr_t)x >= (intptr_t)y; break;
			case 0x2b: x = (intptr_t)x > (intptr_t)y; break;
			case 0x2c: x = (intptr_t)x <= (intptr_t)y; break;
			case 0x2d: x = (intptr_t)x < (intptr_t)y; break;
			case 0x2e: x = x != y; break;
			}
			st[n - 1] = x;
			break;
		default:
			return false;
		}
	}
#undef NEED
#undef PUSH
	if (b.bad || n == 0)
		return false;
	*out = st[n - 1];
	return true;
}

/* Code of the rt_sigreturn trampoline: mov $15, %rax; syscall. */
static bool is_sigreturn(const struct mod *m, uintptr_t pc)
{
	static const uint8_t code[9] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };
	if (!m->code_readable || pc < m->lo || pc > m->hi - sizeof code)
		return false;
	const uint8_t *p = (const uint8_t *)pc;
	for (size_t i = 0; i < sizeof code; i++)
		if (p[i] != code[i])
			return false;
	return true;
}

/* The slow path: module, FDE, CFA program for w->pc; caches what it
 * finds. */
static AGENT_NOINLINE struct packed rule_slow(struct walk *w)
{
	uintptr_t a = w->pc - !w->exact;   /* the call, for a return address */
	struct mod m;
	struct rule r;
	agent_memset(&r, 0, sizeof r);
	uint32_t gen = w->gen;
	if (!module_find(a, &m)) {
		r.kind = K_NOMOD;
	} else if (!w->exact && is_sigreturn(&m, a + 1)) {
		r.kind = K_SIGNAL;
	} else {
		const uint8_t *fde = fde_search(&m, a);
		r.kind = K_FP;
		if (fde && !rule_from_fde(&m, fde, a, &r))
			r.kind = K_FP;
	}
	if (!fits56(r.cfa_off) || !fits56(r.bp_off))
		r.kind = K_STOP;
	struct packed p = { pack(r.kind, r.cfa_off, r.cfa_expr),
			    pack(r.bp_how, r.bp_off, r.bp_expr) };
	/* Only plain numbers are cached, never a pointer into a module's
	 * .eh_frame (an expression), so that a stale entry left by a library
	 * unloaded behind our back can mislead a walk but never make it read
	 * unmapped memory; expression frames are rare (PLT entries, reached
	 * only through a signal frame, and realigned frames). */
	w->gen = atomic_load_explicit(&agent_unwind_gen, RELAXED);
	if (gen == w->gen && r.kind != K_NOMOD && !r.cfa_expr && !r.bp_expr)
		cache_put(cache_key(w->pc, w->exact), gen, p);
	if (!w->cache)
		w->cache = atomic_load_explicit(&cache, memory_order_acquire);
	return p;
}

/* Moves w to the caller's frame by any rule. Returns false at the end of
 * the stack or when the frame cannot be trusted. */
static AGENT_NOINLINE bool step_slow(struct walk *w, struct packed r)
{
	uintptr_t cfa, ra, bp = w->bp;
	uint64_t w0 = r.w0, w1 = r.w1;
	switch (kind_of(w0)) {
	case K_CFA_RSP:
		cfa = w->sp + (uintptr_t)off_of(w0);
		break;
	case K_CFA_RBP:
		if (!w->bp)
			return false;
		cfa = w->bp + (uintptr_t)off_of(w0);
		break;
	case K_CFA_EXPR:
		if (!eval(w, expr_of(w0), false, 0, &cfa))
			return false;
		break;
	case K_FP:
	case K_NOMOD:
		/* No FDE: believe rbp only if it points into this stack above
		 * the stack pointer, as a frame-pointer frame would. */
		if (!w->bp || w->bp < w->sp)
			return false;
		cfa = w->bp + 16;
		if (!stack_read(w, w->bp, &bp))
			return false;
		break;
	case K_SIGNAL: {
		/* The handler returned into the trampoline: sp points at the
		 * ucontext (uc_mcontext.gregs at +40: rbp 10, rsp 15, rip 16). */
		uintptr_t nsp, nbp, npc;
		if (!stack_read(w, w->sp + 40 + 10 * 8, &nbp) ||
		    !stack_read(w, w->sp + 40 + 15 * 8, &nsp) ||
		    !stack_read(w, w->sp + 40 + 16 * 8, &npc))
			return false;
		w->pc = npc;
		w->sp = nsp;
		w->bp = nbp;
		w->exact = true;
		/* The interrupted code may run on another stack (sigaltstack). */
		stack_bounds(w, nsp);
		return npc != 0;
	}
	default:
		return false;
	}
	if (cfa <= w->sp || !stack_read(w, cfa - 8, &ra))
		return false;
	switch (kind_of(w1)) {
	case B_SAME:
		break;
	case B_OFFSET:
		if (!stack_read(w, cfa + (uintptr_t)off_of(w1), &bp))
			return false;
		break;
	case B_EXPR: {
		uintptr_t at;
		if (!eval(w, expr_of(w1), true, cfa, &at) || !stack_read(w, at, &bp))
			return false;
		break;
	}
	default:
		bp = 0;
		break;
	}
	w->pc = ra;
	w->sp = cfa;
	w->bp = bp;
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
		int n)
{
	const struct walk_join *js = &ms->join[join_slot(sp)];
	if (js->sp != sp || js->way >= MEMO_WAYS)
		return -1;
	const struct walk_memo *e = &ms->e[js->way];
	int j = js->frame;
	if (e == m || !e->valid || !e->ended || e->gen != gen || e->max != max ||
	    j >= e->nframes || e->fr[j].at + 8 != sp || e->fr[j].ra != pc)
		return -1;
	if (e->tail_bp[j + 1] && e->bp[j] != bp)
		return -1;
	if (e->nframes > j + 1 && e->fr[e->nframes - 1].at + 8 > hi)
		return -1;  /* not this stack's words */
	for (int r = j + 1; r < e->nframes; r++) {
		if (*(const uintptr_t *)e->fr[r].at != e->fr[r].ra)
			return -1;
		if (e->bp_need[r] && *(const uintptr_t *)e->bp_at[r] != e->bp[r])
			return -1;
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
		js->way = way;
		js->frame = (uint8_t)t;
	}
	m->any_bp = any_bp;
	m->need_bp0 = m->tail_bp[0];
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
static AGENT_NOINLINE int walk(uintptr_t pc, uintptr_t sp, uintptr_t bp, uintptr_t *pcs, int max,
			 struct walk_memos *ms, int *replayed)
{
	struct walk w_, *w = &w_;
	uint32_t gen = atomic_load_explicit(&agent_unwind_gen, RELAXED);
	w->gen = gen;
	w->pc = pc, w->sp = sp, w->bp = bp, w->exact = true;
	int n = 0, k = 0, bp_src = -1;  /* which record's read gave bp (-1: bp0) */
	struct walk_memo *m = NULL;
	bool record = ms != NULL, ended = false, joined = false;

	/* a new walk, recorded into the next entry (the caller has looked
	 * for one to replay: agent_memo_find) */
	if (ms) {
		int way = (int)(ms->next++ % MEMO_WAYS);
		ms->e[ms->last % MEMO_WAYS].succ = (uint8_t)way;
		ms->last = ms->pred = (unsigned)way;
		m = &ms->e[way];
		ms->sp0[way] = sp;
		ms->sp0_lo[way] = (uint32_t)sp;
		*replayed = -1 - way;  /* recorded into this entry */
		m->valid = false;
		m->succ = (uint8_t)way;
		m->pc0 = pc, m->sp0 = sp, m->bp0 = bp, m->max = max, m->gen = gen;
	}
	stack_bounds(w, w->sp);
	w->cache = atomic_load_explicit(&cache, memory_order_acquire);
	uintptr_t hi = w->lo + w->span + 8;
	bool exact = w->exact;
	struct slot *c = w->cache;
	for (int budget = max + 64; n < max && budget > 0; budget--) {
		struct packed r = { K_NONE, 0 };
		if (AGENT_LIKELY(c))
			r = cache_get(c, cache_key(pc, exact), gen);
		if (AGENT_UNLIKELY(kind_of(r.w0) == K_NONE)) {
			w->pc = pc, w->exact = exact;
			r = rule_slow(w);
			c = w->cache;
			gen = w->gen;
		}
		uint8_t kind = kind_of(r.w0), how = kind_of(r.w1);
		uintptr_t cfa = (kind == K_CFA_RSP ? sp : bp) + (uintptr_t)off_of(r.w0);
		uintptr_t at = cfa + (uintptr_t)off_of(r.w1);
		/* Signed: user addresses are below 2^63, and neither may wrap. */
		intptr_t room = (intptr_t)(cfa - sp) - 8;       /* frame less the RA */
		intptr_t limit = (intptr_t)(hi - sp) - 8;
		if (AGENT_LIKELY((kind == K_CFA_RSP || kind == K_CFA_RBP) && how <= B_OFFSET &&
			   room >= 0 && room <= limit &&
			   (how == B_SAME || at - sp <= (uintptr_t)room))) {
			pc = *(const uintptr_t *)(cfa - 8);
			if (how == B_OFFSET)
				bp = *(const uintptr_t *)at;
			if (record) {
				/* A restored rbp matters only if a later frame finds
				 * its CFA from it; code without frame pointers keeps
				 * anything in rbp, and checking that would fail. */
				if (kind == K_CFA_RBP && bp_src >= 0)
					m->bp_need[bp_src] = true;
				if (k < MEMO_FRAMES) {
					m->rbp_src[k] = (int8_t)(kind == K_CFA_RBP ? bp_src : -2);
					m->fr[k].at = cfa - 8;
					m->fr[k].ra = pc;
					m->bp_at[k] = at;
					m->bp[k] = bp;
					m->bp_need[k] = false;
					if (how == B_OFFSET)
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
			if (kind == K_END) {
				ended = true;
				break;
			}
			record = false;
			w->pc = pc, w->sp = sp, w->bp = bp, w->exact = exact;
			if (!step_slow(w, r))
				break;
			pc = w->pc, sp = w->sp, bp = w->bp, exact = w->exact;
			hi = w->lo + w->span + 8;
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
				       hi, gen, max, pcs, n);
			if (got >= 0) {          /* finished, m not completed */
				n = got;
				record = false;
				break;
			}
			if (got < -1) {          /* finished, m completed */
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
		m->valid = true;
		memo_finish(ms, m);
	}
	return n;
}

AGENT_NOINLINE int agent_unwind_cfi(uintptr_t *pcs, int max)
{
	return agent_unwind_cfi_memo(pcs, max, NULL, NULL);
}

AGENT_NOINLINE int agent_unwind_cfi_memo(uintptr_t *pcs, int max, struct walk_memos *ms, int *replayed)
{
	uintptr_t pc, sp, bp;
	if (max <= 0)
		return 0;
	AGENT_FRAME_REGS(pc, sp, bp);
	int way = ms ? agent_memo_find(ms, pc, sp, bp, max) : -1;
	int n;
	if (way >= 0) {
		*replayed = way;
		n = ms->e[way].npcs;
	} else {
		n = walk(pc, sp, bp, pcs, max, ms, replayed);
	}
	__asm__ volatile("" ::: "memory");      /* keep this frame, no tail call */
	return n;
}

AGENT_NOINLINE int agent_unwind_cfi_at(uintptr_t pc, uintptr_t sp, uintptr_t bp, uintptr_t *pcs, int max,
				 struct walk_memos *ms, int *replayed)
{
	if (max <= 0)
		return 0;
	return walk(pc, sp, bp, pcs, max, ms, replayed);
}
