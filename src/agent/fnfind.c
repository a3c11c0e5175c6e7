/*
 * fnfind.c — the functions to hook (fnhook.h): found by name in the
 * program and its libraries (.symtab, static functions included, else
 * .dynsym; a C++ name by its mangling), and the built-in profiles of the
 * allocators programs carry a copy of. Layer 2.
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
#include "format/elfsyms.h"
#include "format/fnspec.h"
#include "format/leakfile.h"
#include "agent/banned.h"

/* ---------- finding a function by name ---------- */


typedef void each_func_fn(const char *name, size_t room, uint64_t value, uint64_t size, void *arg);

struct each_func {
	each_func_fn *fn;
	void *arg;
};

static bool each_func_sym(const char *name, size_t room, const Elf64_Sym *sym, void *arg)
{
	const struct each_func *e = arg;
	if (ELF64_ST_TYPE(sym->st_info) == STT_FUNC)
		e->fn(name, room, sym->st_value, sym->st_size, e->arg);
	return false;
}

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
	struct each_func e = { fn, arg };
	ret = fmt_elf_syms((const void *)m, (size_t)st.st_size, type, each_func_sym, &e);
	if (ret == -EINVAL)
		ret = -ENOENT;
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
_Static_assert(NPROFILES <= AGENT_FN_MAX_PROFILES, "has[] holds every profile");

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
void agent_fn_hook_lines(const ZydisDecoder *dec, const char *s, bool builtin)
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
		agent_fn_hook_one(dec, &b->spec[i], builtin, &b->f[2 * i], &b->f[2 * i + 1]);
	agent_munmap(b, sizeof *b);
}

/* The profiles whose key the program (the first module) defines. */
static int program_keys(struct dl_phdr_info *info, size_t size, void *has)
{
	each_func(info, "/proc/self/exe", match_keys, has);
	return 1;
}

bool agent_fn_profiles_find(bool *has)
{
	bool any = false;
	if (agent_config.builtin_fns)
		dl_iterate_phdr(program_keys, has);
	for (size_t i = 0; i < NPROFILES; i++)
		any |= has[i];
	return any;
}

void agent_fn_profiles_hook(const ZydisDecoder *dec, const bool *has)
{
	for (size_t i = 0; i < NPROFILES; i++)
		if (has[i])
			agent_fn_hook_lines(dec, profiles[i].specs, true);
}
