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
#include "agent/pool.h"
#include "agent/poolrec.h"
#include "agent/procmaps.h"
#include "agent/stopworld.h"
#include "format/fnspec.h"
#include "format/leakfile.h"
#include "agent/banned.h"

/* Zydis, loaded only when there is something to hook, and RTLD_LOCAL:
 * the agent does not depend on it (an attach or a plain run loads
 * nothing more into the program), and a program with a Zydis of its own
 * keeps its own. The names below call through these pointers. */
static struct {
	__typeof__(ZydisDecoderInit) *decoder_init;
	__typeof__(ZydisDecoderDecodeFull) *decode_full;
	__typeof__(ZydisCalcAbsoluteAddress) *calc_absolute;
	__typeof__(ZydisEncoderDecodedInstructionToEncoderRequest) *to_request;
	__typeof__(ZydisEncoderEncodeInstructionAbsolute) *encode_absolute;
} zy;
#define ZYDIS_SONAME "libZydis.so.4.0"
#define ZydisDecoderInit (*zy.decoder_init)
#define ZydisDecoderDecodeFull (*zy.decode_full)
#define ZydisCalcAbsoluteAddress (*zy.calc_absolute)
#define ZydisEncoderDecodedInstructionToEncoderRequest (*zy.to_request)
#define ZydisEncoderEncodeInstructionAbsolute (*zy.encode_absolute)

static bool zydis_load(void)
{
	if (zy.encode_absolute)
		return true;
	void *h = dlopen(ZYDIS_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (h) {
		zy.decoder_init = (__typeof__(zy.decoder_init))dlsym(h, "ZydisDecoderInit");
		zy.decode_full = (__typeof__(zy.decode_full))dlsym(h, "ZydisDecoderDecodeFull");
		zy.calc_absolute = (__typeof__(zy.calc_absolute))dlsym(h, "ZydisCalcAbsoluteAddress");
		zy.to_request = (__typeof__(zy.to_request))dlsym(
			h, "ZydisEncoderDecodedInstructionToEncoderRequest");
		zy.encode_absolute = (__typeof__(zy.encode_absolute))dlsym(
			h, "ZydisEncoderEncodeInstructionAbsolute");
	}
	if (h && zy.decoder_init && zy.decode_full && zy.calc_absolute && zy.to_request &&
	    zy.encode_absolute)
		return true;
	zy.encode_absolute = NULL;
	agent_log("cannot hook allocator functions: ", ZYDIS_SONAME,
		  " (Debian package libzydis4.0) cannot be loaded");
	return false;
}

#define JMP_LEN 5
#define MAX_HOOKS 64
#define STUB_LEN 32      /* the stub; orig follows */
#define PAGE 4096

struct fnhook {
	uintptr_t orig;          /* first: agent_fnhook_entry calls *(%rbx) */
	uintptr_t fn;            /* F */
	struct fmt_fnspec spec;
	uint8_t *page;           /* the stub and orig, kept after a detach
				  * (a thread may still run in it) */
	uint8_t saved[JMP_LEN];  /* F's first bytes, from which orig was made */
	struct fmt_fnspec next;  /* spec from switch_on: an attach after a
				  * detach may name F anew, and a thread still
				  * in the entry must not read it half-copied */
	bool want;               /* to be hooked by this install */
	bool on;                 /* F jumps to the stub */
	bool renamed;            /* next differs from spec: an attach named F again */
	bool busy;               /* commit_round: a thread is in the way */
	bool needed;             /* an entry point the others need (free, realloc) */
	uintptr_t target;        /* an allocator entry point (agent_fnhook_entries):
				  * the stub jumps to target, the agent's function
				  * of the same name, not to agent_fnhook_entry */
	const char *why, *why_more; /* a refusal to say after the resume */
};

static struct fnhook hooks[MAX_HOOKS];
static int nhooks;

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
extern char agent_fnhook_entry[];

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

/* ---------- finding a function by name ---------- */

struct found {
	const char *name;
	char mangled[FMT_FN_NAME_MAX + 64]; /* name's C++ mangling up to its
					     * parameters ("" when too long) */
	const char *part;        /* NULL: the function; ".cold": GCC's part of
				  * it by that suffix (for a mangled match) */
	bool exe_only;           /* look in the program only */
	bool active;             /* looked for in the module being read */
	bool done;               /* found (the first module that has it wins) */
	uintptr_t addr;
	uint64_t size;
	int count;               /* functions of that name at distinct addresses */
	char module[256];
};

typedef void each_func_fn(const char *name, size_t room, uint64_t value, uint64_t size, void *arg);

/* Calls fn(name, room, value, size, arg) for each function the symbol
 * table of type (SHT_SYMTAB, SHT_DYNSYM) of the ELF file at path defines:
 * name has at most room bytes, maybe not NUL-terminated before them.
 * Returns 0, -ENOENT when the file has no such table, or -errno. */
static int elf_funcs(const char *path, uint32_t type, each_func_fn *fn, void *arg)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	long m = -ENOMEM;
	int ret = -ENOENT;
	if (fstat(fd, &st) || st.st_size < (off_t)sizeof(Elf64_Ehdr))
		goto out;
	m = syscall(SYS_mmap, NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m < 0 && m > -4096)
		goto out;
	const unsigned char *base = (const unsigned char *)m;
	size_t len = (size_t)st.st_size;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
	if (base[EI_MAG0] != ELFMAG0 || base[EI_MAG1] != ELFMAG1 || base[EI_MAG2] != ELFMAG2 ||
	    base[EI_MAG3] != ELFMAG3 || base[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > len ||
	    (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > len - eh->e_shoff)
		goto out;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(base + eh->e_shoff);
	for (int i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != type || sh[i].sh_link >= eh->e_shnum ||
		    sh[i].sh_offset > len || sh[i].sh_size > len - sh[i].sh_offset)
			continue;
		const Elf64_Shdr *str = &sh[sh[i].sh_link];
		if (str->sh_offset > len || str->sh_size > len - str->sh_offset)
			continue;
		ret = 0;
		const char *strs = (const char *)base + str->sh_offset;
		const Elf64_Sym *sym = (const Elf64_Sym *)(base + sh[i].sh_offset);
		size_t nsym = sh[i].sh_size / sizeof *sym;
		for (size_t k = 0; k < nsym; k++)
			if (ELF64_ST_TYPE(sym[k].st_info) == STT_FUNC && sym[k].st_shndx != SHN_UNDEF &&
			    sym[k].st_name < str->sh_size)
				fn(strs + sym[k].st_name, str->sh_size - sym[k].st_name, sym[k].st_value,
				   sym[k].st_size, arg);
	}
out:
	if (!(m < 0 && m > -4096))
		syscall(SYS_munmap, (void *)m, (size_t)st.st_size);
	close(fd);
	return ret;
}

/* The separate debug file of the module info describes, by its build-id
 * (DEBUG_DIR/.build-id/xx/yyyy.debug, as Debian's -dbgsym packages lay
 * them out), into out; false when it has no build-id. */
static bool debug_file(const struct dl_phdr_info *info, char *out, size_t cap)
{
	char hex[41] = "";
	for (int i = 0; i < info->dlpi_phnum && !hex[0]; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_NOTE)
			agent_build_id_in_notes(info->dlpi_addr + ph->p_vaddr,
						info->dlpi_addr + ph->p_vaddr + ph->p_memsz, hex, true);
	}
	size_t n = agent_strlen(hex);
	if (n < 4 || cap < sizeof agent_config.debug_dir + 64)
		return false;
	size_t k = agent_strlcpy(out, agent_config.debug_dir[0] ? agent_config.debug_dir
							       : "/usr/lib/debug", cap);
	k += agent_strlcpy(out + k, "/.build-id/", cap - k);
	out[k++] = hex[0], out[k++] = hex[1], out[k++] = '/';
	k += agent_strlcpy(out + k, hex + 2, cap - k);
	agent_strlcpy(out + k, ".debug", cap - k);
	return true;
}

/* Calls fn for each function the module info describes (path, its ELF
 * file) defines: from its .symtab (static functions too), else from its
 * separate debug file's, else from its .dynsym. */
static void each_func(const struct dl_phdr_info *info, const char *path, each_func_fn *fn,
		      void *arg)
{
	char debug[sizeof agent_config.debug_dir + 64];
	if (elf_funcs(path, SHT_SYMTAB, fn, arg) == -ENOENT &&
	    !(debug_file(info, debug, sizeof debug) && elf_funcs(debug, SHT_SYMTAB, fn, arg) == 0))
		elf_funcs(path, SHT_DYNSYM, fn, arg);
}

/* name[0..room) is the NUL-terminated string want. */
static bool name_is(const char *name, size_t room, const char *want)
{
	size_t j = 0;
	while (j < room && name[j] && name[j] == want[j])
		j++;
	return j < room && !name[j] && !want[j];
}

/* The start of the Itanium C++ ABI's mangling of a function named name
 * (f, ns::f, Class::method: "_Z1f", "_ZN2ns1fE"), whatever its
 * parameters: "" when it does not fit. */
static void mangle_prefix(const char *name, char *out, size_t cap)
{
	bool nested = false;
	for (const char *p = name; *p; p++)
		nested |= p[0] == ':' && p[1] == ':';
	size_t n = agent_strlcpy(out, nested ? "_ZN" : "_Z", cap);
	for (const char *p = name; *p && n + 24 < cap;) {
		size_t len = 0;
		while (p[len] && p[len] != ':')
			len++;
		if (!len || len + n + 24 >= cap)
			break;
		n = (size_t)(agent_put_dec(out + n, len) - out);
		agent_memcpy(out + n, p, len);
		n += len;
		out[n] = 0;
		p += len;
		if (*p == ':' && p[1] == ':')
			p += 2;
		else if (*p) {
			break;
		} else {
			if (nested)
				agent_strlcpy(out + n, "E", cap - n);
			return;
		}
	}
	out[0] = 0;
}

/* name[0..room) starts with the NUL-terminated string prefix. */
static bool name_starts(const char *name, size_t room, const char *prefix)
{
	size_t j = 0;
	while (prefix[j] && j < room && name[j] == prefix[j])
		j++;
	return !prefix[j];
}

/* Whether name[0..room), which starts with f's mangled prefix, is f: its
 * parameters and then no GCC suffix (".cold", ".part.0", ".isra.0",
 * ".constprop.0": a part or a clone of the function, another symbol),
 * or exactly f->part when f is looking for that part. */
static bool mangled_is(const char *name, size_t room, const struct found *f)
{
	size_t j = agent_strlen(f->mangled);
	while (j < room && name[j] && name[j] != '.')
		j++;
	if (j >= room)
		return false;
	return f->part ? name_is(name + j, room - j, f->part) : !name[j];
}

static void match_one(const char *name, size_t room, uint64_t value, uint64_t size, void *arg)
{
	struct found *f = arg;
	if (!name_is(name, room, f->name) &&
	    !(f->mangled[0] && name_starts(name, room, f->mangled) && mangled_is(name, room, f)))
		return;   /* another name */
	if (f->count && value == f->addr)
		return;   /* an alias, or .dynsym's copy */
	f->addr = value;
	f->size = size;
	f->count++;
}

/* Every name looked for at once: each module's symbols are read once. */
struct finds {
	struct found *f;
	int n;
	bool seen_exe;
};

static void match_active(const char *name, size_t room, uint64_t value, uint64_t size, void *arg)
{
	struct finds *b = arg;
	for (int i = 0; i < b->n; i++) {
		struct found *f = &b->f[i];
		if (f->active && (name[0] == f->name[0] || name[0] == f->mangled[0]))
			match_one(name, room, value, size, f);
	}
}

static int find_in_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct finds *b = arg;
	const char *path = info->dlpi_name;
	if (!path || !*path) {
		if (b->seen_exe)    /* only the first unnamed one is the program */
			return 0;
		path = "/proc/self/exe";
	}
	bool exe = !b->seen_exe;
	b->seen_exe = true;
	if (info->dlpi_addr == agent_self_lo)
		return 0;   /* ourselves (our ELF header is at our load address) */
	int want = 0;
	for (int i = 0; i < b->n; i++)
		want += b->f[i].active = !b->f[i].done && (exe || !b->f[i].exe_only);
	if (!want)
		return 1;
	each_func(info, path, match_active, b);
	for (int i = 0; i < b->n; i++)
		if (b->f[i].active && b->f[i].count) {
			b->f[i].done = true;
			b->f[i].addr += info->dlpi_addr;
			agent_strlcpy(b->f[i].module, path, sizeof b->f[i].module);
		}
	return 0;
}

/* ---------- checking and relocating the first instructions ---------- */

static void say(const char *name, const char *what, const char *more)
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
static const uint8_t *code_copy(uintptr_t addr, uint64_t size, size_t *len)
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
static size_t check(const ZydisDecoder *dec, const char *name, const uint8_t *bytes, uintptr_t fn,
		    uint64_t size, const struct found *cold)
{
	char buf[64], num[24];
	if (size == 0) {
		say(name, "the symbol table gives no size for it, so its code cannot be checked", NULL);
		return 0;
	}
	if (size < JMP_LEN) {
		agent_put_dec(num, size);
		agent_strlcpy(buf, num, sizeof buf);
		agent_strlcpy(buf + agent_strlen(buf), " bytes long, shorter than the 5-byte jump",
			      sizeof buf - agent_strlen(buf));
		say(name, "the function is ", buf);
		return 0;
	}
	ZydisDecodedInstruction ins;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	size_t n = 0;
	while (n < JMP_LEN) {
		if (ZYAN_FAILED(ZydisDecoderDecodeFull(dec, bytes + n, size - n, &ins, ops))) {
			say(name, "cannot decode its instruction at +", hex(num, n));
			return 0;
		}
		n += ins.length;
	}
	/* every branch of the function's, into the bytes the jump replaces */
	size_t at;
	long r = branch_into(dec, bytes, fn, size, fn, fn + n, &at);
	if (r == -2) {
		say(name, "cannot decode its instruction at +", hex(num, at));
		return 0;
	}
	if (r == 0 && cold) {
		size_t cold_len;
		const uint8_t *cold_bytes = code_copy(cold->addr, cold->size, &cold_len);
		if (!cold_bytes) {
			say(name, "its .cold part cannot be read (its library unloaded?)", NULL);
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
		say(name, r == -3 ? "a branch of its .cold part at +" : "its branch at +", buf);
		return 0;
	}
	return n;
}

/* Writes `jmp *0(%rip)` to `to` at p; returns the end. */
static uint8_t *put_jmp_abs(uint8_t *p, uintptr_t to)
{
	static const uint8_t op[6] = { 0xff, 0x25, 0, 0, 0, 0 };
	agent_memcpy(p, op, 6);
	agent_memcpy(p + 6, &to, 8);
	return p + 14;
}

/* Relocates F's first n bytes (read from their copy bytes) to out (at
 * most cap), then a jump back to F + n; returns the length, or 0 after
 * saying why not. */
static size_t relocate(const ZydisDecoder *dec, const char *name, const uint8_t *bytes, uintptr_t fn,
		       size_t n, uint8_t *out, size_t cap)
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
				say(name, "a call among its first bytes cannot be moved, at +", hex(num, off));
				return 0;
			}
			if (len + 26 > cap)
				return 0;
			out[len] = 0x49, out[len + 1] = 0xbb;          /* mov $back, %r11 */
			agent_memcpy(out + len + 2, &back, 8);
			out[len + 10] = 0x41, out[len + 11] = 0x53;    /* push %r11 */
			len = (size_t)(put_jmp_abs(out + len + 12, to) - out);
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
			say(name, "cannot re-encode its instruction at +", hex(num, off));
			return 0;
		}
		for (int i = 0; i < ins.operand_count_visible; i++) {
			ZyanU64 abs;
			bool rip = ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY && ops[i].mem.base == ZYDIS_REGISTER_RIP;
			bool rel = ops[i].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[i].imm.is_relative;
			if (!rip && !rel)
				continue;
			if (ZYAN_FAILED(ZydisCalcAbsoluteAddress(&ins, &ops[i], fn + off, &abs))) {
				say(name, "cannot relocate its instruction at +", hex(num, off));
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
			say(name, "cannot relocate its instruction at +", hex(num, off));
			return 0;
		}
		len += got;
		off += ins.length;
	}
	if (len + 14 > cap)
		return 0;
	return (size_t)(put_jmp_abs(out + len, fn + n) - out);
}

/* A page within reach of a rel32 jump from fn (the jump's end), RW. */
static uint8_t *near_page(uintptr_t fn)
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
static bool write_entry(uintptr_t fn, const uint8_t *bytes)
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
static bool same_bytes(uintptr_t code, const uint8_t *b)
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
static void jump_bytes(const struct fnhook *h, uint8_t *jmp)
{
	jmp[0] = 0xe9;
	int32_t rel = (int32_t)((intptr_t)h->page - (intptr_t)(h->fn + JMP_LEN));
	agent_memcpy(jmp + 1, &rel, 4);
}

/* Points F at its stub; the spec from next. Stopped threads only: says
 * nothing (the caller does, after the resume: see why). */
static void switch_on(struct fnhook *h)
{
	uint8_t jmp[JMP_LEN];
	jump_bytes(h, jmp);
	h->spec = h->next;
	if (!same_bytes(h->fn, h->saved)) {
		h->why = "its code changed since its trampoline was made", h->why_more = NULL;
		h->want = false;
		return;
	}
	if (!write_entry(h->fn, jmp)) {
		h->why = "cannot write its code: ", h->why_more = agent_strerror(errno);
		h->want = false;
		return;
	}
	h->on = true;
}

/* Finds the function spec names and makes its stub (F is not written
 * yet: see commit); a built-in one (profiles below) is looked for in the
 * program only, and its absence is not worth a word. */
static void hook_one(const ZydisDecoder *dec, const struct fmt_fnspec *spec, bool builtin,
		     const struct found *f, const struct found *cold)
{
	if (!f->count) {
		if (!builtin)
			agent_log("cannot hook '", spec->name,
				  "': no function of that name in the program or its libraries");
		return;
	}
	if (f->count > 1) {
		say(spec->name, "several functions have that name in ", f->module);
		return;
	}
	for (int i = 0; i < nhooks; i++)
		if (hooks[i].fn == f->addr) {
			if (hooks[i].want) {
				if (!builtin)
					say(spec->name, "it is named twice", NULL);
			} else if (!hooks[i].on &&
				   !same_bytes(f->addr, hooks[i].saved)) {
				/* hooked by an attach, put back by its detach, and
				 * its code is not what the stub was made from */
				say(spec->name, "its code changed since an earlier attach hooked it",
				    NULL);
			} else {   /* hooked by an attach, put back by its detach
				    * (or left on by it): the stub is reused */
				hooks[i].next = *spec;
				hooks[i].renamed = hooks[i].on;
				hooks[i].want = true;
			}
			return;
		}
	if (nhooks == MAX_HOOKS) {
		say(spec->name, "too many allocator functions", NULL);
		return;
	}
	if (f->size > CODE_MAX) {
		say(spec->name, "the function is too large to check", NULL);
		return;
	}
	size_t code_len;
	const uint8_t *code = f->size ? code_copy(f->addr, f->size, &code_len) : NULL;
	if (f->size && !code) {
		say(spec->name, "its code cannot be read (its library unloaded?)", NULL);
		return;
	}
	size_t n = check(dec, spec->name, code, f->addr, f->size, cold->count == 1 ? cold : NULL);
	uint8_t *page = n ? near_page(f->addr) : NULL;
	if (n && !page)
		say(spec->name, "no free memory within 2 GiB of it for the trampoline", NULL);
	struct fnhook *h = &hooks[nhooks];
	size_t len = page ? relocate(dec, spec->name, code, f->addr, n, page + STUB_LEN,
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
	put_jmp_abs(page + 10, (uintptr_t)agent_fnhook_entry);
	if (mprotect(page, PAGE, PROT_READ | PROT_EXEC)) {
		say(spec->name, "cannot write its code: ", agent_strerror(errno));
		syscall(SYS_munmap, page, PAGE);
		return;
	}
	h->orig = (uintptr_t)(page + STUB_LEN);
	h->fn = f->addr;
	h->spec = h->next = *spec;
	h->page = page;
	h->want = true;
	h->on = false;
	nhooks++;
}

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
	put_jmp_abs(p + 4, target);                           /* jmp *target */
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
 * What check() sees is F's own body only; this finds the jumps of a
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
	if (n > AGENT_MAX_ENTRIES || !zydis_load() ||
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
		for (int j = 0; j < nhooks; j++)
			if (hooks[j].fn == x->fn)
				h = &hooks[j];
		if (h) {   /* made by an earlier attach */
			if (!h->target) {
				say(x->name, "it is hooked by name already", NULL);
			} else if (!h->on && !same_bytes(h->fn, h->saved)) {
				say(x->name, "its code changed since an earlier attach hooked it", NULL);
			} else {
				h->want = true;
				h->why = NULL;
				x->orig = h->orig;
			}
			failed |= x->needed && !x->orig;
			continue;
		}
		if (nhooks == MAX_HOOKS) {
			say(x->name, "too many functions hooked", NULL);
			failed |= x->needed;
			continue;
		}
		size_t code_len;
		const uint8_t *code = code_copy(x->fn, x->size, &code_len);
		size_t k = 0, len = 0;
		const char *calls = NULL;
		if (!code)
			say(x->name, x->size ? "its code cannot be read"
					     : "the symbol table gives no size for it, so its "
					       "code cannot be checked", NULL);
		else if (x->plain && (calls = calls_entry(&dec, code, x->fn, x->size, e, n)))
			say(x->name, "it calls another entry point of the allocator itself: ", calls);
		else
			k = check(&dec, x->name, code, x->fn, x->size, NULL);
		if (calls)   /* the agent's plain calls of it would be counted twice */
			failed = true;
		if (k && (!page || used + 128 > PAGE ||
			  (uintptr_t)page - x->fn + (1ull << 30) > (2ull << 30))) {
			if (page)
				mprotect(page, PAGE, PROT_READ | PROT_EXEC);
			page = near_page(x->fn), used = 0;
			if (!page)
				say(x->name, "no free memory within 2 GiB of it for the trampoline", NULL);
		}
		if (k && page)
			len = relocate(&dec, x->name, code, x->fn, k, page + used + STUB_LEN,
				       128 - STUB_LEN);
		h = &hooks[nhooks];
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
		nhooks++;
	}
	if (page)
		mprotect(page, PAGE, PROT_READ | PROT_EXEC);
	if (nmade)
		scan_module(made, made_len, nmade);
	for (int i = 0; i < nmade; i++) {
		struct fnhook *h = made[i];
		if (h->why) {
			say(h->spec.name, h->why, NULL);
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
	for (int i = 0; i < nhooks; i++) {
		if (!hooks[i].target || !hooks[i].want)
			continue;
		if (failed)
			hooks[i].want = false;
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
	for (int i = 0; i < nhooks; i++) {
		hooks[i].busy = false;
		if (hooks[i].want && !hooks[i].on) {
			lo = hooks[i].fn + 1 < lo ? hooks[i].fn + 1 : lo;
			hi = hooks[i].fn + JMP_LEN > hi ? hooks[i].fn + JMP_LEN : hi;
		}
	}
	for (int i = 0; i <= nth; i++) {
		const struct agent_stopped *t = i < nth ? &th[i] : &borrowed;
		uintptr_t end = 0, a = 0;
		if (t->state == AGENT_STOP_STOPPED && t->nregs > 16) {
			/* regs[16]: rip, in user_regs_struct and in gregs */
			a = t->regs[16];
			if (a >= lo && a < hi)
				for (int k = 0; k < nhooks; k++)
					hooks[k].busy |= a > hooks[k].fn && a < hooks[k].fn + JMP_LEN;
		}
		if (!t->sp || !top[i])
			continue;
		end = top[i] - t->sp > STACK_LOOK ? t->sp + STACK_LOOK : top[i];
		for (a = (t->sp + 7) & ~(uintptr_t)7; a + 8 <= end; a += 8) {
			uintptr_t w = *(const uintptr_t *)a;
			if (AGENT_UNLIKELY(w >= lo && w < hi))
				for (int k = 0; k < nhooks; k++)
					hooks[k].busy |= w > hooks[k].fn && w < hooks[k].fn + JMP_LEN;
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
	for (int i = 0; i < nhooks; i++)
		failed |= hooks[i].target && hooks[i].needed && !hooks[i].want && !hooks[i].on &&
			  hooks[i].why;
	if (!failed)
		return;
	for (int i = 0; i < nhooks; i++) {
		struct fnhook *h = &hooks[i];
		if (!h->target || (!h->on && !h->want))
			continue;
		if (h->on && !write_entry(h->fn, h->saved))
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
	for (int i = 0; i < nhooks; i++)
		if (hooks[i].why) {
			say(hooks[i].spec.name, hooks[i].why, hooks[i].why_more);
			hooks[i].why = hooks[i].why_more = NULL;
		}
}

/* Stops the other threads and writes the jumps no thread is in the way
 * of (and the spec of a hook on already, named again); returns how many
 * are left to write. */
static int commit_round(bool last)
{
	int todo = 0;
	for (int i = 0; i < nhooks; i++)
		todo += hooks[i].want && (!hooks[i].on || hooks[i].renamed);
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
		for (int i = 0; i < nhooks; i++)
			group_busy |= hooks[i].target && hooks[i].want && !hooks[i].on && hooks[i].busy;
		for (int i = 0; i < nhooks; i++)
			if (hooks[i].target)
				hooks[i].busy = group_busy;
	}
	int left = 0;
	for (int i = 0; i < nhooks; i++) {
		struct fnhook *h = &hooks[i];
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
			switch_on(h);
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
		for (int i = 0; i < nhooks; i++)
			if (hooks[i].want && !hooks[i].on)
				switch_on(&hooks[i]);
		say_refused();
		return;
	}
	for (int t = 0; t < TRIES && commit_round(t == TRIES - 1); t++) {
		agent_nap_us(2000);
	}
}

/* ---------- built-in profiles ----------
 * The allocators programs carry a copy of, under their own names, which
 * an LD_PRELOAD malloc never sees: when the program itself defines the
 * key function, its functions are hooked as malloc-like blocks (no pool),
 * unless builtin_fns=0. Functions a version lacks are skipped. */
static const struct profile {
	const char *key;
	const char *specs;   /* "KIND SPEC\n" lines, as agent_config.fns */
} profiles[] = {
	{ "mi_malloc",
	  "alloc mi_malloc(size=arg1)->ret\n"
	  "alloc mi_zalloc(size=arg1)->ret\n"
	  "alloc mi_calloc(count=arg1,size=arg2)->ret\n"
	  "alloc mi_mallocn(count=arg1,size=arg2)->ret\n"
	  "alloc mi_malloc_aligned(size=arg1)->ret\n"
	  "alloc mi_zalloc_aligned(size=arg1)->ret\n"
	  "alloc mi_heap_malloc(size=arg2)->ret\n"
	  "alloc mi_heap_zalloc(size=arg2)->ret\n"
	  "realloc mi_realloc(ptr=arg1,size=arg2)->ret\n"
	  "free mi_free(ptr=arg1)\n" },
	/* jemalloc built with a prefix: je_ (--with-jemalloc-prefix), _rjem_
	 * (Rust's tikv-jemallocator) */
	{ "je_malloc",
	  "alloc je_malloc(size=arg1)->ret\n"
	  "alloc je_calloc(count=arg1,size=arg2)->ret\n"
	  "alloc je_mallocx(size=arg1)->ret\n"
	  "alloc je_aligned_alloc(size=arg2)->ret\n"
	  "realloc je_realloc(ptr=arg1,size=arg2)->ret\n"
	  "realloc je_rallocx(ptr=arg1,size=arg2)->ret\n"
	  "free je_free(ptr=arg1)\n"
	  "free je_dallocx(ptr=arg1)\n"
	  "free je_sdallocx(ptr=arg1)\n" },
	{ "_rjem_malloc",
	  "alloc _rjem_malloc(size=arg1)->ret\n"
	  "alloc _rjem_calloc(count=arg1,size=arg2)->ret\n"
	  "alloc _rjem_mallocx(size=arg1)->ret\n"
	  "realloc _rjem_realloc(ptr=arg1,size=arg2)->ret\n"
	  "realloc _rjem_rallocx(ptr=arg1,size=arg2)->ret\n"
	  "free _rjem_free(ptr=arg1)\n"
	  "free _rjem_dallocx(ptr=arg1)\n"
	  "free _rjem_sdallocx(ptr=arg1)\n" },
	/* gperftools' tcmalloc, statically linked (its tc_ entry points) */
	{ "tc_malloc",
	  "alloc tc_malloc(size=arg1)->ret\n"
	  "alloc tc_calloc(count=arg1,size=arg2)->ret\n"
	  "realloc tc_realloc(ptr=arg1,size=arg2)->ret\n"
	  "free tc_free(ptr=arg1)\n" },
	/* Rust with a #[global_allocator] of its own (__rg_alloc: the
	 * default one, __rdl_alloc, calls malloc, which is seen already) */
	{ "__rg_alloc",
	  "alloc __rust_alloc(size=arg1)->ret\n"
	  "alloc __rust_alloc_zeroed(size=arg1)->ret\n"
	  "realloc __rust_realloc(ptr=arg1,size=arg4)->ret\n"
	  "free __rust_dealloc(ptr=arg1)\n" },
};

#define NPROFILES (sizeof profiles / sizeof profiles[0])

static void match_keys(const char *name, size_t room, uint64_t value, uint64_t size, void *arg)
{
	bool *has = arg;
	for (size_t i = 0; i < NPROFILES; i++)
		if (name[0] == profiles[i].key[0] && name_is(name, room, profiles[i].key))
			has[i] = true;
}

/* Hooks each "KIND SPEC" line of lines: the functions they name (and
 * their GCC .cold parts: the unlikely paths, which jump back into F) are
 * looked for together, in one reading of each module's symbols. */
static void hook_lines(const ZydisDecoder *dec, const char *s, bool builtin)
{
	enum { MAX_SPECS = MAX_HOOKS + 8 };
	struct batch {
		struct fmt_fnspec spec[MAX_SPECS];
		char cold_name[MAX_SPECS][FMT_FN_NAME_MAX + 8];
		struct found f[2 * MAX_SPECS];   /* F, then its .cold part */
	} *b = agent_mmap(sizeof *b);
	if (!b) {
		agent_log("cannot hook allocator functions: out of memory", NULL, NULL);
		return;
	}
	int n = 0;
	while (*s) {
		const char *e = s;
		while (*e && *e != '\n')
			e++;
		const char *sp = s;
		while (sp < e && *sp != ' ')
			sp++;
		int kind = fmt_fn_kind_parse(s, (size_t)(sp - s));
		if (n == MAX_SPECS) {
			char num[24];
			agent_put_dec(num, MAX_SPECS);
			agent_log("cannot hook allocator functions: more than ", num, " named");
			break;
		}
		if (sp < e && !fmt_fnspec_parse(kind, sp + 1, (size_t)(e - sp - 1), &b->spec[n])) {
			struct found *f = &b->f[2 * n], *cold = f + 1;
			f->name = b->spec[n].name;
			f->exe_only = cold->exe_only = builtin;
			mangle_prefix(f->name, f->mangled, sizeof f->mangled);
			agent_strlcpy(b->cold_name[n], f->name, sizeof b->cold_name[n]);
			agent_strlcpy(b->cold_name[n] + agent_strlen(b->cold_name[n]), ".cold", 8);
			cold->name = b->cold_name[n];
			/* a C++ name's cold part: its mangled name + ".cold" */
			agent_strlcpy(cold->mangled, f->mangled, sizeof cold->mangled);
			cold->part = ".cold";
			n++;
		}
		s = *e ? e + 1 : e;
	}
	struct finds all = { b->f, 2 * n, false };
	dl_iterate_phdr(find_in_module, &all);
	for (int i = 0; i < n; i++)
		hook_one(dec, &b->spec[i], builtin, &b->f[2 * i], &b->f[2 * i + 1]);
	agent_munmap(b, sizeof *b);
}

/* The profiles whose key the program (the first module) defines. */
static int program_keys(struct dl_phdr_info *info, size_t size, void *has)
{
	each_func(info, "/proc/self/exe", match_keys, has);
	return 1;
}

int agent_fnhook_install(uintptr_t pc, uintptr_t sp)
{
	borrowed = (struct agent_stopped){ .state = pc ? AGENT_STOP_STOPPED : AGENT_STOP_GONE,
					   .nregs = pc ? 17 : 0, .sp = sp > 128 ? sp - 128 : sp };
	borrowed.regs[16] = pc;
	/* the profiles whose key the program defines: one pass over its symbols */
	bool has[NPROFILES] = { false };
	bool any = false;
	if (agent_config.builtin_fns)
		dl_iterate_phdr(program_keys, has);
	for (size_t i = 0; i < NPROFILES; i++)
		any |= has[i];
	int entries = 0;
	for (int i = 0; i < nhooks; i++)
		entries += hooks[i].target && hooks[i].want;
	if (!agent_config.fns[0] && !any && !entries)
		return 0;
	/* Zydis is loaded, and every stub made, before any thread is stopped:
	 * a stopped thread may hold the loader's lock or malloc's */
	ZydisDecoder dec;
	if (!zydis_load() ||
	    ZYAN_FAILED(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)))
		return 0;
	if (agent_config.fns[0])
		hook_lines(&dec, agent_config.fns, false);
	for (size_t i = 0; i < NPROFILES; i++)
		if (has[i])
			hook_lines(&dec, profiles[i].specs, true);
	commit(agent_thread_count() == 1 && !pc);
	int on = 0;
	for (int i = 0; i < nhooks; i++)
		on += hooks[i].on;
	return on;
}

void agent_fnhook_remove(void)
{
	int on = 0;
	for (int i = 0; i < nhooks; i++) {
		hooks[i].want = false;
		on += hooks[i].on;
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
	for (int i = 0; i < nhooks; i++) {
		struct fnhook *h = &hooks[i];
		uint8_t jmp[JMP_LEN];
		jump_bytes(h, jmp);
		if (!h->on || !held)
			continue;
		if (!same_bytes(h->fn, jmp))
			h->on = false;   /* gone, or not ours any more: left alone */
		else if (write_entry(h->fn, h->saved))
			h->on = false;
	}
	agent_stopworld_resume();
	for (int i = 0; i < nhooks; i++)
		if (hooks[i].on)   /* its stub records nothing once detached */
			say(hooks[i].spec.name,
			    held ? "left hooked: its first bytes cannot be written"
				 : "left hooked: not every thread of the program could be stopped",
			    NULL);
}
