/*
 * cfi.c — DWARF call-frame information (.eh_frame, .eh_frame_hdr) for the
 * agent's unwinder: the FDE search, the CIE and FDE programs run up to a
 * pc, and the expression evaluator. See cfi.h for the contract; the bytes
 * read here are untrusted, so every reader below is bounded.
 */
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stddef.h>

#include "agent/cfi.h"
#define AGENT_CFI_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define AGENT_CFI_NOINLINE __attribute__((noinline))
#ifdef HEAPTRAIL_AGENT
#include "agent/agent.h"
#endif
#include "agent/banned.h"

/* ---------- modules ---------- */

/* Fills m from an object's program headers; false when it has no
 * executable segment. */
bool cfi_describe(uintptr_t base, const ElfW(Phdr) *phdr, int phnum, struct cfi_module *m)
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

/* ---------- module memory, in place or by copy ----------
 *
 * A module marked by_copy may be unloaded by another thread while a miss
 * reads it (see cfi.h), so its bytes are copied through the kernel
 * (agent_copy_self, which fails instead of faulting) into a small window,
 * read ahead up to the reader's end. Any other module is read in place by
 * the readers' fast path (a window that points into it, for the code).
 * Where the kernel refuses the copy (seccomp), and in the fuzz target (no
 * agent: ASan sees each read), the bytes are read in place too. */

#define WIN 128

struct win {
	uintptr_t lo, hi;       /* the module bytes data holds */
	const uint8_t *data;    /* buf, or the module itself */
	bool by_copy;
	uint8_t buf[WIN];
};

#define WIN_INIT(w, copy) ((w)->lo = (w)->hi = 0, (w)->by_copy = (copy))

#ifdef HEAPTRAIL_AGENT
static _Atomic bool copy_refused;
#endif

/* Points w at [a, end), copied when w is by_copy (at least need bytes,
 * need <= WIN); false when the first need bytes cannot be read. */
static AGENT_CFI_NOINLINE bool win_fill(struct win *w, uintptr_t a, uintptr_t end, size_t need)
{
	w->lo = w->hi = 0;
#ifdef HEAPTRAIL_AGENT
	if (w->by_copy && !atomic_load_explicit(&copy_refused, memory_order_relaxed)) {
		size_t want = end - a < WIN ? end - a : WIN;
		ssize_t got = agent_copy_self(w->buf, a, want);
		if (got == -EFAULT || (got >= 0 && (size_t)got < need))
			return false;
		if (got >= 0) {
			w->data = w->buf;
			w->lo = a;
			w->hi = a + (size_t)got;
			return true;
		}
		atomic_store_explicit(&copy_refused, true, memory_order_relaxed);
	}
#else
	(void)need;
#endif
	w->data = (const uint8_t *)a;
	w->lo = a;
	w->hi = end;
	return true;
}

/* Copies n (<= WIN) module bytes at at, all below end, into out through
 * w; false when they cannot be read. */
static inline bool win_read(struct win *w, const uint8_t *at, const uint8_t *end, void *out,
			    size_t n)
{
	uintptr_t a = (uintptr_t)at;
	if (AGENT_CFI_UNLIKELY(a < w->lo || a + n > w->hi) && !win_fill(w, a, (uintptr_t)end, n))
		return false;
	/* a loop, not memcpy: n is a small constant once inlined, and the
	 * agent is built with -fno-builtin */
	const uint8_t *from = w->data + (a - w->lo);
	for (size_t i = 0; i < n; i++)
		((uint8_t *)out)[i] = from[i];
	return true;
}

/* ---------- bounded byte reader over module memory ---------- */

struct bytes {
	const uint8_t *p, *end;
	bool bad;
	bool by_copy;           /* read through w, else in place */
	struct win *w;
};

#define BYTES(p, end, w) { (p), (end), false, (w)->by_copy, (w) }

static AGENT_CFI_NOINLINE uint64_t rd_copy(struct bytes *b, int n)
{
	uint8_t c[8];
	if (b->end - b->p < n || !win_read(b->w, b->p, b->end, c, (size_t)n)) {
		b->bad = true;
		b->p = b->end;
		return 0;
	}
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v |= (uint64_t)c[i] << (8 * i);
	b->p += n;
	return v;
}

/* n (<= 8) bytes, little-endian. */
static inline __attribute__((always_inline)) uint64_t rd_fixed(struct bytes *b, int n)
{
	if (AGENT_CFI_UNLIKELY(b->by_copy))
		return rd_copy(b, n);
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

static inline __attribute__((always_inline)) uint8_t rd_u8(struct bytes *b)
{
	return (uint8_t)rd_fixed(b, 1);
}

static inline __attribute__((always_inline)) uint64_t rd_uleb(struct bytes *b)
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

/* Entry i of the table, below end, into *v; false when it cannot be read
 * (its words are 4-byte aligned in every linker's output, but nothing in
 * the file promises it). */
static inline bool tab_at(struct win *w, const uint8_t *tab, const uint8_t *end, size_t i,
			  int32_t *v)
{
	if (AGENT_CFI_UNLIKELY(w->by_copy))
		return win_read(w, tab + 4 * i, end, v, sizeof *v);
	__builtin_memcpy(v, tab + 4 * i, sizeof *v);
	return true;
}

/* Returns the FDE covering a from the module's .eh_frame_hdr table, or
 * NULL (no table, a table layout we do not read, or no covering entry; the
 * FDE's own range is checked by the caller). */
const uint8_t *cfi_fde_search(const struct cfi_module *m, uintptr_t a)
{
	if (!m->hdr)
		return NULL;
	struct win w;
	WIN_INIT(&w, m->by_copy);
	struct bytes b = BYTES((const uint8_t *)m->hdr, (const uint8_t *)m->seg_hi, &w);
	uint8_t version = rd_u8(&b), ptr_enc = rd_u8(&b), cnt_enc = rd_u8(&b);
	uint8_t tab_enc = rd_u8(&b);
	uintptr_t eh_frame, count;
	if (b.bad || version != 1 || tab_enc != 0x3b ||
	    !rd_encoded(&b, ptr_enc, m->hdr, &eh_frame) ||
	    !rd_encoded(&b, cnt_enc, m->hdr, &count) || count == 0)
		return NULL;
	const uint8_t *tab = b.p;
	if ((uintptr_t)(b.end - b.p) / 8 < count)
		return NULL;
	intptr_t rel = (intptr_t)(a - m->hdr);
	int32_t v;
	if (!tab_at(&w, tab, b.end, 0, &v) || rel < v)
		return NULL;
	size_t lo = 0, hi = count;      /* tab[lo] <= rel < tab[hi] */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (!tab_at(&w, tab, b.end, 2 * mid, &v))
			return NULL;
		if (v <= rel)
			lo = mid;
		else
			hi = mid;
	}
	if (!tab_at(&w, tab, b.end, 2 * lo + 1, &v))
		return NULL;
	uintptr_t fde = m->hdr + (intptr_t)v;
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

static bool cie_parse(const uint8_t *p, const struct cfi_module *m, struct win *w, struct cie *c)
{
	struct bytes b = BYTES(p, (const uint8_t *)m->seg_hi, w);
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
	struct win *w;          /* for the program being run */
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

/* A factored offset times the data alignment, wrapping as the machine
 * does: a hostile CIE can ask for any product, and a wrapped offset only
 * names a wrong (still bounds-checked) stack slot. */
static inline int64_t scaled(uint64_t v, int64_t align)
{
	return (int64_t)(v * (uint64_t)align);
}

/* Runs [p, end) until the row for s->a is complete. Returns false on
 * anything malformed or not understood. */
static bool run_cfa(struct cfa_prog *s, const uint8_t *p, const uint8_t *end)
{
	struct bytes b = BYTES(p, end, s->w);
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
			set_rule(s, op & 0x3f, R_OFFSET, scaled(rd_uleb(&b), c->data_align), NULL);
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
				set_rule(s, reg, R_OFFSET, scaled(rd_uleb(&b), c->data_align), NULL);
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
				set_rule(s, reg, R_OFFSET, scaled((uint64_t)rd_sleb(&b), c->data_align), NULL);
				break;
			case 0x12:      /* def_cfa_sf */
				s->row.cfa_reg = rd_uleb(&b);
				s->row.cfa_off = scaled((uint64_t)rd_sleb(&b), c->data_align);
				s->row.cfa_is_expr = false;
				break;
			case 0x13:      /* def_cfa_offset_sf */
				s->row.cfa_off = scaled((uint64_t)rd_sleb(&b), c->data_align);
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
				set_rule(s, reg, R_OFFSET, scaled(0 - rd_uleb(&b), c->data_align), NULL);
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
bool cfi_rule_from_fde(const struct cfi_module *m, const uint8_t *fde, uintptr_t a,
			  struct cfi_rule *r)
{
	struct win fw, cw;      /* the FDE's bytes, the CIE's */
	WIN_INIT(&fw, m->by_copy);
	WIN_INIT(&cw, m->by_copy);
	struct bytes b = BYTES(fde, (const uint8_t *)m->seg_hi, &fw);
	const uint8_t *end = entry_end(&b);
	if (!end)
		return false;
	b.end = end;
	const uint8_t *at = b.p;
	uint32_t cie_off = (uint32_t)rd_fixed(&b, 4);
	if (b.bad || cie_off == 0 || (uintptr_t)at - m->seg_lo < cie_off)
		return false;
	struct cie c;
	if (!cie_parse(at - cie_off, m, &cw, &c))
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
	s.w = &cw;
	s.a = UINTPTR_MAX;
	s.loc = begin;
	s.depth = 0;
	s.row = (struct row){ .cfa_reg = DW_RSP, .cfa_off = 8 };
	s.row.ra.how = R_SAME;
	r->kind = CFI_K_STOP;
	r->bp_how = CFI_BP_UNKNOWN;
	r->cfa_off = r->bp_off = 0;
	r->cfa_expr = r->bp_expr = NULL;
	if (!run_cfa(&s, c.insns, c.end))
		return true;
	s.init = s.row;
	s.a = a;
	s.depth = 0;
	s.w = &fw;
	if (!run_cfa(&s, b.p, b.end))
		return true;

	const struct row *w = &s.row;
	if (w->ra.how == R_UNDEF) {
		r->kind = CFI_K_END;
		return true;
	}
	if (w->ra.how != R_OFFSET || w->ra.off != -8 || w->sp_odd)
		return true;
	if (w->cfa_is_expr) {
		if (!w->cfa_expr)
			return true;
		r->kind = CFI_K_CFA_EXPR;
		r->cfa_expr = w->cfa_expr;
	} else if (w->cfa_reg == DW_RSP || w->cfa_reg == DW_RBP) {
		r->kind = w->cfa_reg == DW_RSP ? CFI_K_CFA_RSP : CFI_K_CFA_RBP;
		r->cfa_off = w->cfa_off;
	} else {
		return true;
	}
	switch (w->bp.how) {
	case R_SAME: r->bp_how = CFI_BP_SAME; break;
	case R_OFFSET: r->bp_how = CFI_BP_OFFSET; r->bp_off = w->bp.off; break;
	case R_EXPR:
		r->bp_how = w->bp.expr ? CFI_BP_EXPR : CFI_BP_UNKNOWN;
		r->bp_expr = w->bp.expr;
		break;
	default: r->bp_how = CFI_BP_UNKNOWN; break;
	}
	return true;
}

/* ---------- expressions ---------- */

/* A tiny DWARF expression evaluator for CFA and register expressions:
 * constants, arithmetic, comparisons, rsp/rbp/rip as base registers and
 * dereferences of this stack. */
bool cfi_eval(const struct cfi_frame *w, const uint8_t *blk, bool push_cfa, uintptr_t cfa,
	      bool by_copy, uintptr_t *out)
{
	uintptr_t st[8];
	int n = 0;
	const uint8_t *p = blk;
	struct win win;
	WIN_INIT(&win, by_copy);
	struct bytes b = BYTES(p, p + 10, &win);
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
			if (!cfi_stack_read(w, st[n - 1], &st[n - 1]))
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

const uint8_t cfi_sigreturn_code[CFI_SIGRETURN_LEN] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00,
							 0x00, 0x00, 0x0f, 0x05 };

bool cfi_is_sigreturn(const struct cfi_module *m, uintptr_t pc)
{
	const uint8_t *code = cfi_sigreturn_code;
	enum { code_len = CFI_SIGRETURN_LEN };
	if (!m->code_readable || pc < m->lo || pc > m->hi - code_len)
		return false;
	struct win w;
	WIN_INIT(&w, m->by_copy);
	uint8_t p[code_len];
	if (!win_read(&w, (const uint8_t *)pc, (const uint8_t *)pc + code_len, p, sizeof p))
		return false;
	for (size_t i = 0; i < code_len; i++)
		if (p[i] != code[i])
			return false;
	return true;
}
