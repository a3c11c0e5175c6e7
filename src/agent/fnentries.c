/*
 * fnentries.c — the real allocator's own entry points behind a jump at
 * an attach (fnhook.h: agent_fnhook_entries), so that calls through
 * pointers taken before the attach are seen too. Layer 2.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dlfcn.h>

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

/* ---------- the allocator's own entry points (an attach) ----------
 * The functions of the process's malloc (glibc's, or jemalloc's when
 * the program links it) get the same jump, to a stub of their own:
 *
 *   F:     jmp stub
 *   stub:  cmpb $0, %fs:IN_REAL     (this thread's agent_tls.in_real)
 *          jne orig
 *          jmp *HOOK                (the agent's malloc, free...)
 *   orig:  F's first instructions, relocated ; jmp *(F + n)
 *
 * The agent's function is entered as if F's caller had called it: no
 * frame of ours in between, so its stack is the caller's. The agent
 * reaches the real allocator through orig (attach.c points agent_real
 * at it), so a call that came through a relocation slot never comes
 * back in. Where the allocator calls its own entry points (glibc's
 * realloc calls malloc and free; its memalign family, malloc), the
 * agent makes the outer call with in_real set (hooks.c), and the inner
 * call goes straight on to orig. */

/* agent_tls.in_real's offset from the thread pointer: initial-exec TLS,
 * the same in every thread. */
static int32_t in_real_offset(void)
{
	return (int32_t)((intptr_t)&agent_tls.in_real - (intptr_t)__builtin_thread_pointer());
}

/* Where in a stub its jmp *(%rip) keeps the target: 8 bytes within
 * the stub's first cache line (stubs are 128 bytes apart from a page's
 * start), so one store changes it for a thread that jumps meanwhile. */
#define STUB_TARGET 21

static void entry_stub(uint8_t *stub, uintptr_t target)
{
	int32_t off = in_real_offset(), rel;
	uint8_t *p = stub;
	*p++ = 0x64, *p++ = 0x80, *p++ = 0x3c, *p++ = 0x25;   /* cmpb $0, %fs:off */
	agent_memcpy(p, &off, 4);
	p += 4;
	*p++ = 0;
	*p++ = 0x0f, *p++ = 0x85;                             /* jne orig */
	rel = (int32_t)(STUB_LEN - (p + 4 - stub));
	agent_memcpy(p, &rel, 4);
	agent_fn_put_jmp_abs(p + 4, target);                           /* jmp *target */
	/* what agent_fnhook_retarget changes */
	_Static_assert(STUB_TARGET == 4 + 4 + 1 + 2 + 4 + 6, "the stub's layout");
}

typedef uint64_t __attribute__((aligned(1), may_alias)) unaligned_u64;

bool agent_fnhook_retarget(const char *name, uintptr_t to)
{
	for (int i = 0; i < agent_nfnhooks; i++) {
		struct fnhook *h = &agent_fnhooks[i];
		if (!h->target || !h->on || !agent_streq(h->spec.name, name))
			continue;
		uintptr_t page = (uintptr_t)h->page & ~(uintptr_t)(PAGE - 1);
		if (mprotect((void *)page, PAGE, PROT_READ | PROT_WRITE | PROT_EXEC))
			return false;
		*(volatile unaligned_u64 *)(h->page + STUB_TARGET) = to ? to : h->target;
		mprotect((void *)page, PAGE, PROT_READ | PROT_EXEC);
		return true;
	}
	return false;
}

struct exec_seg {
	uintptr_t fn, lo, hi;
};

static int find_exec_seg(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct exec_seg *x = arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && x->fn >= a &&
		    x->fn < a + ph->p_memsz) {
			x->lo = a, x->hi = a + ph->p_filesz;
			return 1;
		}
	}
	return 0;
}

/* Marks refused (why) each hook of h[0..n) whose first bytes [fn+1,
 * fn+n) some code of its module (its executable segment) reaches with
 * a rel32 jump or call: a byte scan, not a disassembly (a false match
 * is one chance in a billion per entry, and refuses, never harms).
 * What agent_fn_check() sees is F's own body only; this finds the jumps of a
 * part the compiler moved out of F (.cold, not named in .dynsym) or of
 * another function that shares F's tail. */
static void scan_module(struct fnhook **h, const size_t *len, int n)
{
	struct exec_seg x = { h[0]->fn, 0, 0 };
	dl_iterate_phdr(find_exec_seg, &x);
	if (!x.hi) {
		for (int k = 0; k < n; k++)
			h[k]->why = "its module's code cannot be found";
		return;
	}
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	for (int k = 0; k < n; k++) {
		lo = h[k]->fn + 1 < lo ? h[k]->fn + 1 : lo;
		hi = h[k]->fn + len[k] > hi ? h[k]->fn + len[k] : hi;
	}
	const uint8_t *c = (const uint8_t *)x.lo;
	size_t size = x.hi - x.lo;
	for (size_t p = 0; p + 6 <= size; p++) {
		uintptr_t to;
		int32_t rel;
		if (c[p] == 0xe8 || c[p] == 0xe9) {
			agent_memcpy(&rel, c + p + 1, 4);
			to = x.lo + p + 5 + (uintptr_t)(intptr_t)rel;
		} else if (c[p] == 0x0f && (c[p + 1] & 0xf0) == 0x80) {
			agent_memcpy(&rel, c + p + 2, 4);
			to = x.lo + p + 6 + (uintptr_t)(intptr_t)rel;
		} else {
			continue;
		}
		if (AGENT_LIKELY(to < lo || to >= hi))
			continue;
		for (int k = 0; k < n; k++)
			if (to > h[k]->fn && to < h[k]->fn + len[k] && !h[k]->why)
				h[k]->why = "some code of its library jumps into its first bytes, "
					    "which the hook replaces";
	}
}

/* The name of the entry of e[0..n) that the code [fn, fn+size) (its
 * copy: bytes) calls or jumps to directly, or NULL. */
static const char *calls_entry(const ZydisDecoder *dec, const uint8_t *bytes, uintptr_t fn,
			       uint64_t size, const struct agent_entry *e, int n)
{
	ZydisDecodedInstruction ins;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	for (size_t off = 0; off < size; off += ins.length) {
		if (ZYAN_FAILED(ZydisDecoderDecodeFull(dec, bytes + off, size - off, &ins, ops)))
			return "?";
		if (!(ins.attributes & ZYDIS_ATTRIB_IS_RELATIVE))
			continue;
		for (int i = 0; i < ins.operand_count_visible; i++) {
			ZyanU64 to;
			if (ops[i].type != ZYDIS_OPERAND_TYPE_IMMEDIATE || !ops[i].imm.is_relative ||
			    ZYAN_FAILED(ZydisCalcAbsoluteAddress(&ins, &ops[i], fn + off, &to)))
				continue;
			for (int k = 0; k < n; k++)
				if (e[k].fn && to == e[k].fn && to != fn)
					return e[k].name;
		}
	}
	return NULL;
}

int agent_fnhook_entries(struct agent_entry *e, int n)
{
	ZydisDecoder dec;
	struct fnhook *made[AGENT_MAX_ENTRIES];
	size_t made_len[AGENT_MAX_ENTRIES];
	int nmade = 0, ok = 0;
	bool failed = false;
	uint8_t *page = NULL;
	size_t used = 0;
	for (int i = 0; i < n; i++)
		e[i].orig = 0;
	if (n > AGENT_MAX_ENTRIES || !agent_fn_zydis_load() ||
	    ZYAN_FAILED(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64))) {
		agent_log("the allocator's entry points are left alone: calls through a pointer "
			  "to malloc taken before the attach are not seen", NULL, NULL);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		struct agent_entry *x = &e[i];
		struct fnhook *h = NULL;
		bool alias = false;   /* of one before (glibc's memalign, aligned_alloc) */
		for (int j = 0; j < i; j++)
			alias |= e[j].fn == x->fn;
		if (alias || !x->fn)
			continue;
		for (int j = 0; j < agent_nfnhooks; j++)
			if (agent_fnhooks[j].fn == x->fn)
				h = &agent_fnhooks[j];
		if (h) {   /* made by an earlier attach */
			if (!h->target) {
				agent_fn_say(x->name, "it is hooked by name already", NULL);
			} else if (!h->on && !agent_fn_same_bytes(h->fn, h->saved)) {
				agent_fn_say(x->name, "its code changed since an earlier attach hooked it", NULL);
			} else {
				h->want = true;
				h->why = NULL;
				x->orig = h->orig;
			}
			failed |= x->needed && !x->orig;
			continue;
		}
		if (agent_nfnhooks == MAX_HOOKS) {
			agent_fn_say(x->name, "too many functions hooked", NULL);
			failed |= x->needed;
			continue;
		}
		size_t code_len;
		const uint8_t *code = agent_fn_code_copy(x->fn, x->size, &code_len);
		size_t k = 0, len = 0;
		const char *calls = NULL;
		if (!code)
			agent_fn_say(x->name, x->size ? "its code cannot be read"
					     : "the symbol table gives no size for it, so its "
					       "code cannot be checked", NULL);
		else if (x->plain && (calls = calls_entry(&dec, code, x->fn, x->size, e, n)))
			agent_fn_say(x->name, "it calls another entry point of the allocator itself: ", calls);
		else
			k = agent_fn_check(&dec, x->name, code, x->fn, x->size, NULL);
		if (calls)   /* the agent's plain calls of it would be counted twice */
			failed = true;
		if (k && (!page || used + 128 > PAGE ||
			  (uintptr_t)page - x->fn + (1ull << 30) > (2ull << 30))) {
			if (page)
				mprotect(page, PAGE, PROT_READ | PROT_EXEC);
			page = agent_fn_near_page(x->fn), used = 0;
			if (!page)
				agent_fn_say(x->name, "no free memory within 2 GiB of it for the trampoline", NULL);
		}
		if (k && page)
			len = agent_fn_relocate(&dec, x->name, code, x->fn, k, page + used + STUB_LEN,
				       128 - STUB_LEN);
		h = &agent_fnhooks[agent_nfnhooks];
		*h = (struct fnhook){ 0 };
		if (len)
			agent_memcpy(h->saved, code, JMP_LEN);
		if (code)
			agent_munmap((void *)code, code_len);
		if (!len) {
			failed |= x->needed;
			continue;
		}
		h->page = page + used;
		h->orig = (uintptr_t)(h->page + STUB_LEN);
		h->fn = x->fn;
		h->target = x->hook;
		h->needed = x->needed;
		agent_strlcpy(h->spec.name, x->name, sizeof h->spec.name);
		h->next = h->spec;
		entry_stub(h->page, x->hook);
		used += 128;
		made[nmade] = h, made_len[nmade++] = k;
		agent_nfnhooks++;
	}
	if (page)
		mprotect(page, PAGE, PROT_READ | PROT_EXEC);
	if (nmade)
		scan_module(made, made_len, nmade);
	for (int i = 0; i < nmade; i++) {
		struct fnhook *h = made[i];
		if (h->why) {
			agent_fn_say(h->spec.name, h->why, NULL);
			h->why = NULL;
			failed |= h->needed;
			continue;
		}
		h->want = true;
		for (int j = 0; j < n; j++)
			if (e[j].fn == h->fn)
				e[j].orig = h->orig;
	}
	for (int i = 0; i < n; i++)   /* aliases of those just made */
		for (int j = 0; j < i && !e[i].orig; j++)
			if (e[j].fn == e[i].fn)
				e[i].orig = e[j].orig;
	for (int i = 0; i < agent_nfnhooks; i++) {
		if (!agent_fnhooks[i].target || !agent_fnhooks[i].want)
			continue;
		if (failed)
			agent_fnhooks[i].want = false;
		else
			ok++;
	}
	if (failed) {
		for (int i = 0; i < n; i++)
			e[i].orig = 0;
		agent_log("the allocator's entry points are left alone: calls through a pointer "
			  "to malloc or free taken before the attach are not seen", NULL, NULL);
	}
	return ok;
}

bool agent_fnhook_frees_on(void)
{
	int n = 0;
	for (int i = 0; i < agent_nfnhooks; i++) {
		const struct fnhook *h = &agent_fnhooks[i];
		if (h->target && h->needed && !h->on)
			return false;
		n += h->target && h->needed;
	}
	return n > 0;
}
