/*
 * fnreloc.c — a hooked function's first instructions (fnhook.h): checked
 * (long enough, no branch of the function's own into them), relocated by
 * Zydis to the stub's page within ±2 GiB of the function, and the jump
 * to the stub made ready; Zydis loaded on first use. Layer 2.
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

struct agent_fn_zydis agent_fn_zy;

bool agent_fn_zydis_load(void)
{
	struct agent_fn_zydis *zy = &agent_fn_zy;

	if (zy->encode_absolute)
		return true;
	void *h = dlopen(ZYDIS_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (h) {
		zy->decoder_init = (__typeof__(zy->decoder_init))dlsym(h, "ZydisDecoderInit");
		zy->decode_full = (__typeof__(zy->decode_full))dlsym(h, "ZydisDecoderDecodeFull");
		zy->calc_absolute = (__typeof__(zy->calc_absolute))dlsym(h, "ZydisCalcAbsoluteAddress");
		zy->to_request = (__typeof__(zy->to_request))dlsym(
			h, "ZydisEncoderDecodedInstructionToEncoderRequest");
		zy->encode_absolute = (__typeof__(zy->encode_absolute))dlsym(
			h, "ZydisEncoderEncodeInstructionAbsolute");
	}
	if (h && zy->decoder_init && zy->decode_full && zy->calc_absolute && zy->to_request &&
	    zy->encode_absolute)
		return true;
	zy->encode_absolute = NULL;
	agent_log("cannot hook allocator functions: ", ZYDIS_SONAME,
		  " (Debian package libzydis4.0) cannot be loaded");
	return false;
}

/* ---------- checking and relocating the first instructions ---------- */

void agent_fn_say(const char *name, const char *what, const char *more)
{
	char line[512];
	size_t n = agent_strlcpy(line, "cannot hook '", sizeof line);
	n += agent_strlcpy(line + n, name, sizeof line - n);
	if (n < sizeof line)
		n += agent_strlcpy(line + n, "': ", sizeof line - n);
	if (n < sizeof line)
		agent_strlcpy(line + n, what, sizeof line - n);
	agent_log(line, more, NULL);
}

static const char *hex(char *buf, uint64_t v)
{
	static const char digits[] = "0123456789abcdef";
	char tmp[20];
	int n = 0;
	do
		tmp[n++] = digits[v & 15];
	while (v >>= 4);
	buf[0] = '0', buf[1] = 'x';
	for (int i = 0; i < n; i++)
		buf[2 + i] = tmp[n - 1 - i];
	buf[2 + n] = 0;
	return buf;
}

/* A copy of the code [addr, addr + size), and of up to 15 bytes after it
 * (an instruction that starts at its last byte), where they are mapped,
 * into *len bytes of agent_mmap'd memory (agent_munmap): the functions
 * are found under the loader's lock, but read after it, while another
 * thread may unload their library (an attach). NULL when they cannot be
 * read. */
#define CODE_MAX (64u << 20)
const uint8_t *agent_fn_code_copy(uintptr_t addr, uint64_t size, size_t *len)
{
	if (size == 0 || size > CODE_MAX)
		return NULL;
	*len = (size_t)size + 15;
	uint8_t *buf = agent_mmap(*len);
	if (!buf)
		return NULL;
	ssize_t got = agent_copy_self(buf, addr, *len);
	if (got < 0 && got != -EFAULT) {   /* refused (seccomp): in place */
		agent_memcpy(buf, (const void *)addr, (size_t)size);
		got = (ssize_t)size;
	}
	if (got < (ssize_t)size) {
		agent_munmap(buf, *len);
		return NULL;
	}
	return buf;
}

/* Looks at the code [code, code+size), whose copy is bytes, for a jump
 * (not a call) into [lo, hi): -1 and its offset in *at when there is one,
 * -2 and the offset when an instruction cannot be decoded, 0 when there
 * is none. */
static long branch_into(const ZydisDecoder *dec, const uint8_t *bytes, uintptr_t code,
			uint64_t size, uintptr_t lo, uintptr_t hi, size_t *at)
{
	ZydisDecodedInstruction ins;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	for (size_t off = 0; off < size; off += ins.length) {
		*at = off;
		if (ZYAN_FAILED(ZydisDecoderDecodeFull(dec, bytes + off, size - off, &ins, ops)))
			return -2;
		if (!(ins.attributes & ZYDIS_ATTRIB_IS_RELATIVE) || ins.meta.category == ZYDIS_CATEGORY_CALL)
			continue;
		for (int i = 0; i < ins.operand_count_visible; i++) {
			ZyanU64 to;
			if (ops[i].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[i].imm.is_relative &&
			    ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&ins, &ops[i], code + off, &to)) &&
			    to >= lo && to < hi)
				return -1;
		}
	}
	return 0;
}

/* How many bytes of F the jump displaces (whole instructions, >= 5), or
 * 0 after saying why F cannot be hooked. F's code is read from its copy
 * bytes (code_copy). cold, when it was found, is F's part GCC moved away
 * (NAME.cold), whose jumps into F are looked at too. */
size_t agent_fn_check(const ZydisDecoder *dec, const char *name, const uint8_t *bytes, uintptr_t fn,
		      uint64_t size, const struct found *cold)
{
	char buf[64], num[24];
	if (size == 0) {
		agent_fn_say(name, "the symbol table gives no size for it, so its code cannot be checked", NULL);
		return 0;
	}
	if (size < JMP_LEN) {
		agent_put_dec(num, size);
		agent_strlcpy(buf, num, sizeof buf);
		agent_strlcpy(buf + agent_strlen(buf), " bytes long, shorter than the 5-byte jump",
			      sizeof buf - agent_strlen(buf));
		agent_fn_say(name, "the function is ", buf);
		return 0;
	}
	ZydisDecodedInstruction ins;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	size_t n = 0;
	while (n < JMP_LEN) {
		if (ZYAN_FAILED(ZydisDecoderDecodeFull(dec, bytes + n, size - n, &ins, ops))) {
			agent_fn_say(name, "cannot decode its instruction at +", hex(num, n));
			return 0;
		}
		n += ins.length;
	}
	/* every branch of the function's, into the bytes the jump replaces */
	size_t at;
	long r = branch_into(dec, bytes, fn, size, fn, fn + n, &at);
	if (r == -2) {
		agent_fn_say(name, "cannot decode its instruction at +", hex(num, at));
		return 0;
	}
	if (r == 0 && cold) {
		size_t cold_len;
		const uint8_t *cold_bytes = agent_fn_code_copy(cold->addr, cold->size, &cold_len);
		if (!cold_bytes) {
			agent_fn_say(name, "its .cold part cannot be read (its library unloaded?)", NULL);
			return 0;
		}
		if (branch_into(dec, cold_bytes, cold->addr, cold->size, fn, fn + n, &at) == -1)
			r = -3;
		agent_munmap((void *)cold_bytes, cold_len);
	}
	if (r < 0) {
		char off[24];
		hex(off, at);
		agent_strlcpy(buf, off, sizeof buf);
		agent_strlcpy(buf + agent_strlen(buf), " jumps back into its first ",
			      sizeof buf - agent_strlen(buf));
		agent_put_dec(buf + agent_strlen(buf), n);
		agent_strlcpy(buf + agent_strlen(buf), " bytes, which the hook replaces",
			      sizeof buf - agent_strlen(buf));
		agent_fn_say(name, r == -3 ? "a branch of its .cold part at +" : "its branch at +", buf);
		return 0;
	}
	return n;
}

/* Writes `jmp *0(%rip)` to `to` at p; returns the end. */
uint8_t *agent_fn_put_jmp_abs(uint8_t *p, uintptr_t to)
{
	static const uint8_t op[6] = { 0xff, 0x25, 0, 0, 0, 0 };
	agent_memcpy(p, op, 6);
	agent_memcpy(p + 6, &to, 8);
	return p + 14;
}

/* Relocates F's first n bytes (read from their copy bytes) to out (at
 * most cap), then a jump back to F + n; returns the length, or 0 after
 * saying why not. */
size_t agent_fn_relocate(const ZydisDecoder *dec, const char *name, const uint8_t *bytes,
			 uintptr_t fn, size_t n, uint8_t *out, size_t cap)
{
	size_t len = 0;
	for (size_t off = 0; off < n;) {
		ZydisDecodedInstruction ins;
		ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
		char num[24];
		if (ZYAN_FAILED(ZydisDecoderDecodeFull(dec, bytes + off, n - off + 15, &ins, ops)))
			return 0;
		if (ins.meta.category == ZYDIS_CATEGORY_CALL) {
			/* A call made from here would leave a return address in
			 * our page, which no unwinder (a C++ exception's, ours)
			 * knows: the call returns to F's own code after it
			 * instead (push it, then jump), which needs that code
			 * intact (past the 5-byte jump) and a target we know. */
			ZyanU64 to;
			uintptr_t back = fn + off + ins.length;
			if (!(ins.attributes & ZYDIS_ATTRIB_IS_RELATIVE) || back < fn + JMP_LEN ||
			    ZYAN_FAILED(ZydisCalcAbsoluteAddress(&ins, &ops[0], fn + off, &to))) {
				agent_fn_say(name, "a call among its first bytes cannot be moved, at +", hex(num, off));
				return 0;
			}
			if (len + 26 > cap)
				return 0;
			out[len] = 0x49, out[len + 1] = 0xbb;          /* mov $back, %r11 */
			agent_memcpy(out + len + 2, &back, 8);
			out[len + 10] = 0x41, out[len + 11] = 0x53;    /* push %r11 */
			len = (size_t)(agent_fn_put_jmp_abs(out + len + 12, to) - out);
			off += ins.length;
			continue;
		}
		if (!(ins.attributes & ZYDIS_ATTRIB_IS_RELATIVE)) {
			if (len + ins.length > cap)
				return 0;
			agent_memcpy(out + len, bytes + off, ins.length);
			len += ins.length;
			off += ins.length;
			continue;
		}
		ZydisEncoderRequest req;
		if (ZYAN_FAILED(ZydisEncoderDecodedInstructionToEncoderRequest(&ins, ops,
									       ins.operand_count_visible, &req))) {
			agent_fn_say(name, "cannot re-encode its instruction at +", hex(num, off));
			return 0;
		}
		for (int i = 0; i < ins.operand_count_visible; i++) {
			ZyanU64 abs;
			bool rip = ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY && ops[i].mem.base == ZYDIS_REGISTER_RIP;
			bool rel = ops[i].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[i].imm.is_relative;
			if (!rip && !rel)
				continue;
			if (ZYAN_FAILED(ZydisCalcAbsoluteAddress(&ins, &ops[i], fn + off, &abs))) {
				agent_fn_say(name, "cannot relocate its instruction at +", hex(num, off));
				return 0;
			}
			if (rip)
				req.operands[i].mem.displacement = (ZyanI64)abs;
			else
				req.operands[i].imm.u = abs;
		}
		if (ins.meta.category == ZYDIS_CATEGORY_COND_BR || ins.meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
		    ins.meta.category == ZYDIS_CATEGORY_CALL) {
			req.branch_type = ZYDIS_BRANCH_TYPE_NONE;
			req.branch_width = ZYDIS_BRANCH_WIDTH_NONE;
		}
		ZyanUSize got = cap - len;
		if (ZYAN_FAILED(ZydisEncoderEncodeInstructionAbsolute(&req, out + len, &got,
								      (uintptr_t)(out + len)))) {
			agent_fn_say(name, "cannot relocate its instruction at +", hex(num, off));
			return 0;
		}
		len += got;
		off += ins.length;
	}
	if (len + 14 > cap)
		return 0;
	return (size_t)(agent_fn_put_jmp_abs(out + len, fn + n) - out);
}

/* A page within reach of a rel32 jump from fn (the jump's end), RW. */
uint8_t *agent_fn_near_page(uintptr_t fn)
{
	const uintptr_t step = 1u << 20, reach = (1u << 31) - 2 * step;
	uintptr_t start = fn & ~(step - 1);
	for (uintptr_t d = step; d < reach; d += step) {
		for (int side = 0; side < 2; side++) {
			uintptr_t want = side ? start + d : start - d;
			if (side == 0 && start < d)
				continue;
			long r = syscall(SYS_mmap, (void *)want, PAGE, PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			if (r < 0 && r > -4096)
				continue;
			if ((uintptr_t)r == want)
				return (uint8_t *)r;
			syscall(SYS_munmap, (void *)r, PAGE);   /* an old kernel took it as a hint */
		}
	}
	return NULL;
}

/* Writes bytes[0..JMP_LEN) at fn, every other thread of the program
 * stopped or held (commit_round), or none running; false (errno set)
 * when the page cannot be made writable. */
bool agent_fn_write_entry(uintptr_t fn, const uint8_t *bytes)
{
	uintptr_t lo = fn & ~(uintptr_t)(PAGE - 1), hi = (fn + JMP_LEN + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
	if (mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE | PROT_EXEC))
		return false;
	agent_memcpy((void *)fn, bytes, JMP_LEN);
	mprotect((void *)lo, hi - lo, PROT_READ | PROT_EXEC);
	return true;
}

/* Whether the JMP_LEN bytes at code are b's; false when code is not
 * mapped any more (its module was unloaded since the function was found:
 * read by copy, never in place, where the kernel allows it). */
bool agent_fn_same_bytes(uintptr_t code, const uint8_t *b)
{
	uint8_t now[JMP_LEN];
	ssize_t got = agent_copy_self(now, code, JMP_LEN);
	if (got == -EFAULT || (got >= 0 && got != JMP_LEN))
		return false;
	if (got < 0)    /* refused (seccomp): read in place */
		agent_memcpy(now, (const void *)code, JMP_LEN);
	return agent_memcmp(now, b, JMP_LEN) == 0;
}

/* F's first bytes as the hook writes them: jmp rel32 to the stub. */
void agent_fn_jump_bytes(const struct fnhook *h, uint8_t *jmp)
{
	jmp[0] = 0xe9;
	int32_t rel = (int32_t)((intptr_t)h->page - (intptr_t)(h->fn + JMP_LEN));
	agent_memcpy(jmp + 1, &rel, 4);
}

/* Points F at its stub; the spec from next. Stopped threads only: says
 * nothing (the caller does, after the resume: see why). */
void agent_fn_switch_on(struct fnhook *h)
{
	uint8_t jmp[JMP_LEN];
	agent_fn_jump_bytes(h, jmp);
	h->spec = h->next;
	if (!agent_fn_same_bytes(h->fn, h->saved)) {
		h->why = "its code changed since its trampoline was made", h->why_more = NULL;
		h->want = false;
		return;
	}
	if (!agent_fn_write_entry(h->fn, jmp)) {
		h->why = "cannot write its code: ", h->why_more = agent_strerror(errno);
		h->want = false;
		return;
	}
	h->on = true;
}

/* Finds the function spec names and makes its stub (F is not written
 * yet: see commit); a built-in one (profiles below) is looked for in the
 * program only, and its absence is not worth a word. */
void agent_fn_hook_one(const ZydisDecoder *dec, const struct fmt_fnspec *spec, bool builtin,
		       const struct found *f, const struct found *cold)
{
	if (!f->count) {
		if (!builtin)
			agent_log("cannot hook '", spec->name,
				  "': no function of that name in the program or its libraries");
		return;
	}
	if (f->count > 1) {
		agent_fn_say(spec->name, "several functions have that name in ", f->module);
		return;
	}
	for (int i = 0; i < agent_nfnhooks; i++)
		if (agent_fnhooks[i].fn == f->addr) {
			if (agent_fnhooks[i].want) {
				if (!builtin)
					agent_fn_say(spec->name, "it is named twice", NULL);
			} else if (!agent_fnhooks[i].on &&
				   !agent_fn_same_bytes(f->addr, agent_fnhooks[i].saved)) {
				/* hooked by an attach, put back by its detach, and
				 * its code is not what the stub was made from */
				agent_fn_say(spec->name, "its code changed since an earlier attach hooked it",
				    NULL);
			} else {   /* hooked by an attach, put back by its detach
				    * (or left on by it): the stub is reused */
				agent_fnhooks[i].next = *spec;
				agent_fnhooks[i].renamed = agent_fnhooks[i].on;
				agent_fnhooks[i].want = true;
			}
			return;
		}
	if (agent_nfnhooks == MAX_HOOKS) {
		agent_fn_say(spec->name, "too many allocator functions", NULL);
		return;
	}
	if (f->size > CODE_MAX) {
		agent_fn_say(spec->name, "the function is too large to check", NULL);
		return;
	}
	size_t code_len;
	const uint8_t *code = f->size ? agent_fn_code_copy(f->addr, f->size, &code_len) : NULL;
	if (f->size && !code) {
		agent_fn_say(spec->name, "its code cannot be read (its library unloaded?)", NULL);
		return;
	}
	size_t n = agent_fn_check(dec, spec->name, code, f->addr, f->size, cold->count == 1 ? cold : NULL);
	uint8_t *page = n ? agent_fn_near_page(f->addr) : NULL;
	if (n && !page)
		agent_fn_say(spec->name, "no free memory within 2 GiB of it for the trampoline", NULL);
	struct fnhook *h = &agent_fnhooks[agent_nfnhooks];
	size_t len = page ? agent_fn_relocate(dec, spec->name, code, f->addr, n, page + STUB_LEN,
				     PAGE - STUB_LEN) : 0;
	if (len)
		agent_memcpy(h->saved, code, JMP_LEN);   /* what orig was made from */
	if (code)
		agent_munmap((void *)code, code_len);
	if (!len) {
		if (page)
			syscall(SYS_munmap, page, PAGE);
		return;
	}
	/* the stub: mov $h, %r11; jmp *agent_fnhook_entry */
	page[0] = 0x49, page[1] = 0xbb;
	uintptr_t hp = (uintptr_t)h;
	agent_memcpy(page + 2, &hp, 8);
	agent_fn_put_jmp_abs(page + 10, (uintptr_t)agent_fnhook_entry);
	if (mprotect(page, PAGE, PROT_READ | PROT_EXEC)) {
		agent_fn_say(spec->name, "cannot write its code: ", agent_strerror(errno));
		syscall(SYS_munmap, page, PAGE);
		return;
	}
	h->orig = (uintptr_t)(page + STUB_LEN);
	h->fn = f->addr;
	h->spec = h->next = *spec;
	h->page = page;
	h->want = true;
	h->on = false;
	agent_nfnhooks++;
}
