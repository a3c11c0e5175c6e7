/*
 * symbolize — libdwfl session, pc cache and string interning behind
 * symbolize.h. Demangling lives in demangle.c.
 *
 * Modules are reported with dwfl_report_elf(..., add_p_vaddr = true): with
 * true, libdwfl takes `base` as the load bias (what dl_iterate_phdr gives),
 * with false as the address of the first PT_LOAD, which is the same thing
 * only when that segment's p_vaddr is 0.
 */
#include "symbolize/symbolize.h"

#include <ctype.h>
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libiberty/hashtab.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One module as the agent recorded it; reached from a Dwfl_Module through
 * its userdata slot. */
struct sym_mod {
	const char *path; /* interned */
	uint64_t lo, hi;
	bool warned;      /* at most one warning per module */
	/* The module's code symbols sorted by address, built on its first
	 * lookup without DWARF: libdwfl's dwfl_module_addrinfo scans the
	 * whole table per address, seconds per process in a big stripped
	 * program such as cc1. */
	struct sym_addr *syms;
	size_t nsyms;
	bool syms_built;
};

struct sym_addr {
	uint64_t addr, size;  /* runtime address */
	const char *name;     /* owned by libelf, valid while the Dwfl lives */
	int rank;             /* global 2, weak 1, local 0: the better name */
};

/* A cached answer: all frames for one pc, allocated in one piece. */
struct sym_entry {
	uint64_t pc;
	size_t n;
	struct sym_frame frames[];
};

struct symbolizer {
	Dwfl *dwfl;
	Dwfl_Callbacks cb;    /* must outlive dwfl */
	char *debuginfo_path; /* NULL: libdwfl's default search path */
	struct sym_mod *mods;
	size_t nmods;
	htab_t strings;       /* interned char * */
	htab_t cache;         /* struct sym_entry * keyed by pc */
	char **warnings;
	size_t nwarnings;
	struct sym_frame oom; /* handed out when a lookup cannot allocate */
};

static const char unknown[] = "??";

static hashval_t entry_hash(const void *p)
{
	uint64_t pc = ((const struct sym_entry *)p)->pc;

	return (hashval_t)(pc ^ (pc >> 32));
}

static int entry_eq(const void *a, const void *b)
{
	return ((const struct sym_entry *)a)->pc ==
	       ((const struct sym_entry *)b)->pc;
}

/* Returns the symbolizer's copy of str, or NULL when str is NULL or memory
 * runs out. */
static const char *intern(struct symbolizer *s, const char *str)
{
	char *dup, *found;
	void **slot;

	if (!str)
		return NULL;
	found = htab_find(s->strings, str);
	if (found)
		return found;
	dup = strdup(str);
	slot = dup ? htab_find_slot(s->strings, dup, INSERT) : NULL;
	if (!slot) {
		free(dup);
		return NULL;
	}
	*slot = dup;
	return dup;
}

/* Interns the demangled form of name when it is mangled, else name. */
static const char *intern_symbol(struct symbolizer *s, const char *name)
{
	char *demangled = sym_demangle(name);
	const char *ret;

	if (!demangled)
		return intern(s, name);
	ret = intern(s, demangled);
	free(demangled);
	return ret;
}

/* File names come as the compiler wrote them, often relative to the
 * compilation directory; hand them out absolute, as binutils addr2line
 * does, so a renderer can shorten them as it likes. A relative directory
 * (Debian builds with -fdebug-prefix-map=/build/...=.) adds nothing. */
static const char *intern_path(struct symbolizer *s, const char *dir,
			       const char *file)
{
	const char *ret;
	char *full;

	if (!file || file[0] == '/' || !dir || dir[0] != '/')
		return intern(s, file);
	if (asprintf(&full, "%s/%s", dir, file) < 0)
		return NULL;
	ret = intern(s, full);
	free(full);
	return ret;
}

static void warn(struct symbolizer *s, struct sym_mod *m, const char *fmt, ...)
{
	char **grown, *msg;
	va_list ap;
	int len;

	if (m->warned)
		return;
	m->warned = true;
	va_start(ap, fmt);
	len = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (len < 0)
		return;
	grown = realloc(s->warnings, (s->nwarnings + 1) * sizeof(*grown));
	if (!grown) {
		free(msg);
		return;
	}
	s->warnings = grown;
	s->warnings[s->nwarnings++] = msg;
}

char *sym_locate(const char *path, const char *binary_path)
{
	const char *base = strrchr(path, '/'), *dir, *end;
	char *cand;

	base = base ? base + 1 : path;
	for (dir = binary_path; dir && *dir; dir = *end ? end + 1 : end) {
		end = strchrnul(dir, ':');
		if (end == dir)
			continue;
		if (asprintf(&cand, "%.*s/%s", (int)(end - dir), dir, base) < 0)
			return NULL;
		if (access(cand, R_OK) == 0)
			return cand;
		free(cand);
	}
	return strdup(path);
}

static bool build_id_matches(const unsigned char *bits, int len, const char *hex)
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < len; i++, hex += 2) {
		if (!hex[0] || tolower((unsigned char)hex[0]) != digits[bits[i] >> 4] ||
		    !hex[1] || tolower((unsigned char)hex[1]) != digits[bits[i] & 15])
			return false;
	}
	return *hex == '\0';
}

static void report_module(struct symbolizer *s, const struct sym_module *in,
			  struct sym_mod *m, const char *binary_path)
{
	const unsigned char *bits;
	GElf_Addr id_vaddr;
	Dwfl_Module *mod;
	char *file;
	void **ud;
	int len;
	struct stat st;

	file = sym_locate(in->path, binary_path);
	if (!file)
		return;
	/* a dump may name anything: opening a FIFO or a tty would block */
	if (stat(file, &st) == 0 && !S_ISREG(st.st_mode)) {
		warn(s, m, "not a regular file: '%s'", file);
		goto out;
	}
	mod = dwfl_report_elf(s->dwfl, in->path, file, -1, in->base, true);
	if (!mod) {
		warn(s, m, "cannot open '%s': %s", file, dwfl_errmsg(-1));
		goto out;
	}
	dwfl_module_info(mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
	*ud = m;
	if (in->build_id && *in->build_id) {
		len = dwfl_module_build_id(mod, &bits, &id_vaddr);
		if (len > 0 && !build_id_matches(bits, len, in->build_id))
			warn(s, m, "build-id mismatch for '%s'", file);
	}
out:
	free(file);
}

struct symbolizer *sym_new(const struct sym_module *mods, size_t n,
			   const char *binary_path)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->cb.find_elf = dwfl_build_id_find_elf;
	s->cb.find_debuginfo = dwfl_standard_find_debuginfo;
	s->cb.section_address = dwfl_offline_section_address;
	s->cb.debuginfo_path = &s->debuginfo_path;
	s->strings = htab_create_alloc(64, htab_hash_string, htab_eq_string,
				       free, calloc, free);
	s->cache = htab_create_alloc(256, entry_hash, entry_eq, free, calloc, free);
	s->mods = calloc(n ? n : 1, sizeof(*s->mods));
	s->dwfl = dwfl_begin(&s->cb);
	if (!s->strings || !s->cache || !s->mods || !s->dwfl)
		goto fail;

	dwfl_report_begin(s->dwfl);
	for (size_t i = 0; i < n; i++) {
		struct sym_mod *m = &s->mods[s->nmods];

		if (!mods[i].path || !*mods[i].path)
			continue;
		m->path = intern(s, mods[i].path);
		if (!m->path)
			goto fail;
		m->lo = mods[i].lo;
		m->hi = mods[i].hi;
		s->nmods++;
		report_module(s, &mods[i], m, binary_path);
	}
	if (dwfl_report_end(s->dwfl, NULL, NULL) != 0)
		goto fail;
	return s;
fail:
	sym_free(s);
	return NULL;
}

static int cmp_sym_addr(const void *a, const void *b)
{
	const struct sym_addr *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* at one address the best-ranked name comes last, where lookups land */
	if (x->rank != y->rank)
		return x->rank - y->rank;
	return x->size < y->size ? -1 : x->size > y->size;
}

static void build_syms(Dwfl_Module *mod, struct sym_mod *m)
{
	int n = dwfl_module_getsymtab(mod);
	m->syms_built = true;
	if (n <= 0)
		return;
	m->syms = malloc((size_t)n * sizeof *m->syms);
	if (!m->syms)
		return;
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, NULL, NULL);
		int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);
		if (!name || !*name || shndx == SHN_UNDEF || !addr ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE))
			continue;
		m->syms[m->nsyms++] = (struct sym_addr){
			.addr = addr, .size = sym.st_size, .name = name,
			.rank = bind == STB_GLOBAL ? 2 : bind == STB_WEAK ? 1 : 0,
		};
	}
	qsort(m->syms, m->nsyms, sizeof *m->syms, cmp_sym_addr);
}

/* The name of the code symbol holding addr: the nearest symbol at or
 * below it whose size covers it (or that has no size), by binary search. */
static const char *symbol_at(Dwfl_Module *mod, struct sym_mod *m, uint64_t addr)
{
	size_t lo = 0, hi;
	if (!m->syms_built)
		build_syms(mod, m);
	hi = m->nsyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* lo: the first symbol above addr; look back a little for one that
	 * contains it (a sized symbol may sit inside a bigger one) */
	for (size_t i = lo, k = 0; i > 0 && k < 16; i--, k++) {
		const struct sym_addr *e = &m->syms[i - 1];
		if (!e->size || addr < e->addr + e->size)
			return e->name;
	}
	return NULL;
}

/* The recorded module whose range holds addr, for pcs libdwfl cannot
 * place (the file was missing). */
static struct sym_mod *module_by_range(struct symbolizer *s, uint64_t addr)
{
	for (size_t i = 0; i < s->nmods; i++)
		if (addr >= s->mods[i].lo && addr < s->mods[i].hi)
			return &s->mods[i];
	return NULL;
}

/* Name of a subprogram or inlined instance, following abstract origins and
 * specifications. A demangled linkage name wins, since only it carries
 * namespaces and parameters; one that does not demangle is an asm label
 * (glibc's __GI___libc_malloc) and the source name reads better. */
static const char *die_name(struct symbolizer *s, Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	const char *linkage, *ret;
	char *demangled;

	linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
	if (!linkage)
		linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name,
								&attr));
	demangled = sym_demangle(linkage);
	if (demangled) {
		ret = intern(s, demangled);
		free(demangled);
		return ret;
	}
	return intern(s, dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr)));
}

/* Where an inlined instance was called from: the caller frame's position. */
static void call_site(struct symbolizer *s, Dwarf_Die *inl,
		      const char **file, int *line)
{
	Dwarf_Attribute attr;
	Dwarf_Files *files;
	Dwarf_Word v;
	Dwarf_Die cu;
	size_t nfiles;

	*file = NULL;
	*line = 0;
	if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_line, &attr), &v) == 0)
		*line = (int)v;
	if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_file, &attr), &v) == 0 &&
	    dwarf_diecu(inl, &cu, NULL, NULL) &&
	    dwarf_getsrcfiles(&cu, &files, &nfiles) == 0 && v < nfiles)
		*file = intern_path(s, dwarf_formstring(dwarf_attr(&cu, DW_AT_comp_dir,
								     &attr)),
				    dwarf_filesrc(files, v, NULL, NULL));
}

/* Lexical scopes around addr (relative to the CU's bias), innermost first.
 * Past an inlined instance, dwarf_getscopes continues with the scopes
 * around its abstract definition (for variable lookup), so the function it
 * was inlined into is missing; the plain DIE parent chain of the innermost
 * scope, from dwarf_getscopes_die, has it (eu-addr2line does the same). */
static int scope_chain(Dwarf_Die *cu, Dwarf_Addr addr, Dwarf_Die **chain)
{
	Dwarf_Die *scopes = NULL;
	int n = dwarf_getscopes(cu, addr, &scopes);

	*chain = NULL;
	if (n > 0)
		n = dwarf_getscopes_die(&scopes[0], chain);
	free(scopes);
	return n;
}

static struct sym_entry *resolve(struct symbolizer *s, uint64_t pc)
{
	Dwarf_Addr addr = pc - 1, bias;
	Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, addr);
	struct sym_mod *m = NULL;
	Dwarf_Die *cu = NULL, *chain = NULL, *sub = NULL;
	const char *file = NULL, *modpath = NULL, *name = NULL;
	struct sym_entry *e = NULL;
	size_t ninl = 0;
	int nchain = 0, line = 0;

	if (mod) {
		void **ud;

		dwfl_module_info(mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
		m = *ud;
		cu = dwfl_module_addrdie(mod, addr, &bias);
		if (cu)
			nchain = scope_chain(cu, addr - bias, &chain);
		else if (!dwfl_module_getdwarf(mod, &bias) && m)
			warn(s, m, "no debug info for '%s'", m->path);
	} else {
		m = module_by_range(s, addr);
	}
	if (m)
		modpath = m->path;

	for (int i = 0; i < nchain && !sub; i++) {
		int tag = dwarf_tag(&chain[i]);

		if (tag == DW_TAG_inlined_subroutine)
			ninl++;
		else if (tag == DW_TAG_subprogram)
			sub = &chain[i];
	}
	e = malloc(sizeof(*e) + (ninl + 1) * sizeof(e->frames[0]));
	if (!e)
		goto out;
	e->pc = pc;
	e->n = ninl + 1;

	if (mod) {
		Dwfl_Line *l = dwfl_module_getsrc(mod, addr);

		if (l)
			file = intern_path(s, dwfl_line_comp_dir(l),
					   dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL));
	}
	/* Each inlined instance is a frame at the current position; its call
	 * site becomes the position of the frame around it. */
	for (size_t i = 0, k = 0; k < ninl; i++) {
		if (dwarf_tag(&chain[i]) != DW_TAG_inlined_subroutine)
			continue;
		name = die_name(s, &chain[i]);
		e->frames[k++] = (struct sym_frame){
			.pc = pc, .function = name ? name : unknown,
			.file = file, .line = line, .module = modpath, .inlined = true,
		};
		call_site(s, &chain[i], &file, &line);
	}
	name = sub ? die_name(s, sub) : NULL;
	if (!name && mod && m)
		name = intern_symbol(s, symbol_at(mod, m, addr));
	e->frames[ninl] = (struct sym_frame){
		.pc = pc, .function = name ? name : unknown,
		.file = file, .line = line, .module = modpath, .inlined = false,
	};
out:
	free(chain);
	return e;
}

size_t sym_resolve(struct symbolizer *s, uint64_t pc,
		   const struct sym_frame **frames)
{
	struct sym_entry key = { .pc = pc }, *e;
	void **slot;

	e = htab_find(s->cache, &key);
	if (e)
		goto out;
	e = resolve(s, pc);
	if (!e)
		goto oom;
	slot = htab_find_slot(s->cache, e, INSERT);
	if (!slot) {
		free(e);
		goto oom;
	}
	*slot = e;
out:
	*frames = e->frames;
	return e->n;
oom:
	s->oom = (struct sym_frame){ .pc = pc, .function = unknown };
	*frames = &s->oom;
	return 1;
}

size_t sym_warnings(const struct symbolizer *s, const char *const **out)
{
	*out = (const char *const *)s->warnings;
	return s->nwarnings;
}

void sym_free(struct symbolizer *s)
{
	if (!s)
		return;
	if (s->dwfl)
		dwfl_end(s->dwfl);
	if (s->cache)
		htab_delete(s->cache);
	if (s->strings)
		htab_delete(s->strings);
	for (size_t i = 0; i < s->nwarnings; i++)
		free(s->warnings[i]);
	free(s->warnings);
	for (size_t i = 0; s->mods && i < s->nmods; i++)
		free(s->mods[i].syms);
	free(s->mods);
	free(s);
}

int sym_elf_info(const char *file, uint64_t map_start, uint64_t map_end, uint64_t map_offset,
		 uint64_t *bias, char *build_id, size_t cap)
{
	/* O_NONBLOCK: a dump may name a FIFO, whose open would wait for a writer */
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK), rc = -ENOEXEC;
	Elf *elf = NULL;
	struct stat st;
	size_t nph;

	if (build_id && cap)
		build_id[0] = 0;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		goto out; /* a device, a FIFO, a directory: not an ELF file */
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &nph))
		goto out;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (ph.p_offset >= map_offset && ph.p_offset < map_offset + (map_end - map_start)) {
			*bias = map_start + (ph.p_offset - map_offset) - ph.p_vaddr;
			rc = 0;
			break;
		}
	}
	if (build_id && cap) {
		const unsigned char *bits;
		ssize_t len = dwelf_elf_gnu_build_id(elf, (const void **)&bits);

		for (ssize_t j = 0; j < len && (size_t)(2 * j + 2) < cap; j++)
			snprintf(build_id + 2 * j, 3, "%02x", bits[j]);
	}
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return rc;
}
