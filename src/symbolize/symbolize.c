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

/* A module file as libdwfl opened it, shared by every symbolizer of
 * this process: a report over the 70 processes of a `make -j2` would
 * otherwise open libc and inflate its compressed DWARF 70 times. Each
 * file sits alone in a Dwfl of its own, at the load bias of the first
 * process that brought it (`base`); another process's pc in the same file
 * is moved by the difference of the two biases. Kept until the process
 * ends, with its answers. */
struct lib_mod {
	char *key;            /* path, located file, build-id, file identity */
	size_t keylen;        /* the key has NULs between its parts */
	uint64_t base;
	Dwfl *dwfl;
	Dwfl_Callbacks cb;    /* must outlive dwfl */
	char *debuginfo_path;
	Dwfl_Module *mod;     /* NULL: the file could not be opened */
	char *open_warning;   /* why not, or a build-id mismatch */
	char *nodebug_warning;
	/* The module's code symbols sorted by address, built on its first
	 * lookup without DWARF: libdwfl's dwfl_module_addrinfo scans the
	 * whole table per address, seconds per process in a big stripped
	 * program such as cc1. */
	struct sym_addr *syms;
	size_t nsyms;
	bool syms_built;
	htab_t cache;         /* struct sym_entry * keyed by pc at base */
};

/* One module as one process recorded it. */
struct sym_mod {
	const char *path; /* interned */
	uint64_t base, lo, hi;
	struct lib_mod *lib;
	bool warned;      /* at most one warning per module and symbolizer */
};

struct sym_addr {
	uint64_t addr, size;  /* address at the lib_mod's base */
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
	struct sym_mod *mods;
	size_t nmods;
	htab_t cache;         /* struct sym_entry * keyed by this process's pc */
	char **warnings;
	size_t nwarnings;
	struct sym_frame oom; /* handed out when a lookup cannot allocate */
};

/* What every symbolizer shares: the module files and the strings. */
static struct {
	struct lib_mod **mods;
	size_t n, cap;
	htab_t strings;       /* interned char *, never freed */
} lib;

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
static const char *intern(const char *str)
{
	char *dup, *found;
	void **slot;

	if (!str)
		return NULL;
	if (!lib.strings) {
		lib.strings = htab_create_alloc(256, htab_hash_string, htab_eq_string,
						free, calloc, free);
		if (!lib.strings)
			return NULL;
	}
	found = htab_find(lib.strings, str);
	if (found)
		return found;
	dup = strdup(str);
	slot = dup ? htab_find_slot(lib.strings, dup, INSERT) : NULL;
	if (!slot) {
		free(dup);
		return NULL;
	}
	*slot = dup;
	return dup;
}

/* Interns the demangled form of name when it is mangled, else name. */
static const char *intern_symbol(const char *name)
{
	char *demangled = sym_demangle(name);
	const char *ret;

	if (!demangled)
		return intern(name);
	ret = intern(demangled);
	free(demangled);
	return ret;
}

/* File names come as the compiler wrote them, often relative to the
 * compilation directory; hand them out absolute, as binutils addr2line
 * does, so a renderer can shorten them as it likes. A relative directory
 * (Debian builds with -fdebug-prefix-map=/build/...=.) adds nothing. */
static const char *intern_path(const char *dir, const char *file)
{
	const char *ret;
	char *full;

	if (!file || file[0] == '/' || !dir || dir[0] != '/')
		return intern(file);
	if (asprintf(&full, "%s/%s", dir, file) < 0)
		return NULL;
	ret = intern(full);
	free(full);
	return ret;
}

static char *format(const char *fmt, ...)
{
	va_list ap;
	char *msg;
	int len;

	va_start(ap, fmt);
	len = vasprintf(&msg, fmt, ap);
	va_end(ap);
	return len < 0 ? NULL : msg;
}

/* Adds msg (a module's problem) to this symbolizer's list, once per module. */
static void warn(struct symbolizer *s, struct sym_mod *m, const char *msg)
{
	char **grown, *dup;

	if (!msg || m->warned)
		return;
	m->warned = true;
	dup = strdup(msg);
	grown = dup ? realloc(s->warnings, (s->nwarnings + 1) * sizeof(*grown)) : NULL;
	if (!grown) {
		free(dup);
		return;
	}
	s->warnings = grown;
	s->warnings[s->nwarnings++] = dup;
}

char *sym_locate(const char *path, const char *binary_path)
{
	const char *base = strrchr(path, '/'), *dir, *end;
	char *cand;

	base = base ? base + 1 : path;
	for (int whole = 0; whole < 2; whole++)
		for (dir = binary_path; dir && *dir; dir = *end ? end + 1 : end) {
			end = strchrnul(dir, ':');
			if (end == dir || (whole && path[0] != '/'))
				continue;
			if (asprintf(&cand, "%.*s%s%s", (int)(end - dir), dir, whole ? "" : "/",
				     whole ? path : base) < 0)
				return NULL;
			if (access(cand, R_OK) == 0)
				return cand;
			free(cand);
		}
	return strdup(path);
}

char *sym_process_path(long pid, const char *binary_path)
{
	char root[64];
	struct stat ours, theirs;
	char *out;

	snprintf(root, sizeof root, "/proc/%ld/root", pid);
	if (pid <= 0 || stat("/", &ours) || stat(root, &theirs) ||
	    (ours.st_dev == theirs.st_dev && ours.st_ino == theirs.st_ino))
		return strdup(binary_path ? binary_path : "");
	if (asprintf(&out, "%s%s%s", binary_path ? binary_path : "",
		     binary_path && *binary_path ? ":" : "", root) < 0)
		return NULL;
	return out;
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

/* Opens the module file for a lib_mod: in a Dwfl of its own, at base. */
static void lib_open(struct lib_mod *l, const struct sym_module *in, const char *file,
		     const struct stat *st, bool stat_ok)
{
	const unsigned char *bits;
	GElf_Addr id_vaddr;
	int len;

	/* a dump may name anything: opening a FIFO or a tty would block */
	if (stat_ok && !S_ISREG(st->st_mode)) {
		l->open_warning = format("not a regular file: '%s'", file);
		return;
	}
	l->cb.find_elf = dwfl_build_id_find_elf;
	l->cb.find_debuginfo = dwfl_standard_find_debuginfo;
	l->cb.section_address = dwfl_offline_section_address;
	l->cb.debuginfo_path = &l->debuginfo_path;
	l->dwfl = dwfl_begin(&l->cb);
	if (!l->dwfl)
		return;
	dwfl_report_begin(l->dwfl);
	l->mod = dwfl_report_elf(l->dwfl, in->path, file, -1, in->base, true);
	if (!l->mod)
		l->open_warning = format("cannot open '%s': %s", file, dwfl_errmsg(-1));
	if (dwfl_report_end(l->dwfl, NULL, NULL) != 0)
		l->mod = NULL;
	if (l->mod && in->build_id && *in->build_id) {
		len = dwfl_module_build_id(l->mod, &bits, &id_vaddr);
		if (len > 0 && !build_id_matches(bits, len, in->build_id))
			l->open_warning = format("build-id mismatch for '%s'", file);
	}
}

/* The shared lib_mod for a module as a process recorded it (opened on
 * first use); NULL only when out of memory. The key holds the file's
 * identity too, so a file rebuilt between two processes is opened again. */
static struct lib_mod *lib_get(const struct sym_module *in, const char *binary_path)
{
	struct lib_mod *l;
	struct stat st;
	char *file, *key;
	bool stat_ok;

	file = sym_locate(in->path, binary_path);
	if (!file)
		return NULL;
	stat_ok = stat(file, &st) == 0;
	key = format("%s%c%s%c%s%c%llu:%llu:%lld.%ld:%lld", in->path, 0, file, 0,
		     in->build_id ? in->build_id : "", 0,
		     stat_ok ? (unsigned long long)st.st_dev : 0ULL,
		     stat_ok ? (unsigned long long)st.st_ino : 0ULL,
		     stat_ok ? (long long)st.st_mtim.tv_sec : 0LL,
		     stat_ok ? st.st_mtim.tv_nsec : 0L,
		     stat_ok ? (long long)st.st_size : -1LL);
	if (!key)
		goto fail;
	size_t keylen = strlen(in->path) + strlen(file) + 2 +
			strlen(in->build_id ? in->build_id : "") + 1;
	keylen += strlen(key + keylen) + 1;
	for (size_t i = 0; i < lib.n; i++)
		if (lib.mods[i]->keylen == keylen && !memcmp(lib.mods[i]->key, key, keylen)) {
			free(key);
			free(file);
			return lib.mods[i];
		}
	if (lib.n == lib.cap) {
		size_t cap = lib.cap ? 2 * lib.cap : 16;
		struct lib_mod **grown = realloc(lib.mods, cap * sizeof(*grown));
		if (!grown)
			goto fail;
		lib.mods = grown;
		lib.cap = cap;
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		goto fail;
	l->cache = htab_create_alloc(256, entry_hash, entry_eq, free, calloc, free);
	if (!l->cache) {
		free(l);
		goto fail;
	}
	l->key = key;
	l->keylen = keylen;
	l->base = in->base;
	lib_open(l, in, file, &st, stat_ok);
	lib.mods[lib.n++] = l;
	free(file);
	return l;
fail:
	free(key);
	free(file);
	return NULL;
}

struct symbolizer *sym_new(const struct sym_module *mods, size_t n,
			   const char *binary_path)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->cache = htab_create_alloc(256, entry_hash, entry_eq, free, calloc, free);
	s->mods = calloc(n ? n : 1, sizeof(*s->mods));
	if (!s->cache || !s->mods)
		goto fail;

	for (size_t i = 0; i < n; i++) {
		struct sym_mod *m = &s->mods[s->nmods];

		if (!mods[i].path || !*mods[i].path)
			continue;
		m->path = intern(mods[i].path);
		if (!m->path)
			goto fail;
		m->base = mods[i].base;
		m->lo = mods[i].lo;
		m->hi = mods[i].hi;
		m->lib = lib_get(&mods[i], binary_path);
		if (!m->lib)
			goto fail;
		s->nmods++;
		warn(s, m, m->lib->open_warning);
	}
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

static void build_syms(struct lib_mod *l)
{
	int n = dwfl_module_getsymtab(l->mod);
	l->syms_built = true;
	if (n <= 0)
		return;
	l->syms = malloc((size_t)n * sizeof *l->syms);
	if (!l->syms)
		return;
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(l->mod, i, &sym, &addr, &shndx,
							   NULL, NULL);
		int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);
		if (!name || !*name || shndx == SHN_UNDEF || !addr ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE))
			continue;
		l->syms[l->nsyms++] = (struct sym_addr){
			.addr = addr, .size = sym.st_size, .name = name,
			.rank = bind == STB_GLOBAL ? 2 : bind == STB_WEAK ? 1 : 0,
		};
	}
	qsort(l->syms, l->nsyms, sizeof *l->syms, cmp_sym_addr);
}

/* The name of the code symbol holding addr: the nearest symbol at or
 * below it whose size covers it (or that has no size), by binary search. */
static const char *symbol_at(struct lib_mod *l, uint64_t addr)
{
	size_t lo = 0, hi;
	if (!l->syms_built)
		build_syms(l);
	hi = l->nsyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (l->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* lo: the first symbol above addr; look back a little for one that
	 * contains it (a sized symbol may sit inside a bigger one) */
	for (size_t i = lo, k = 0; i > 0 && k < 16; i--, k++) {
		const struct sym_addr *e = &l->syms[i - 1];
		if (!e->size || addr < e->addr + e->size)
			return e->name;
	}
	return NULL;
}

/* The recorded module whose range holds addr. */
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
static const char *die_name(Dwarf_Die *die)
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
		ret = intern(demangled);
		free(demangled);
		return ret;
	}
	return intern(dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr)));
}

/* Where an inlined instance was called from: the caller frame's position. */
static void call_site(Dwarf_Die *inl, const char **file, int *line)
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
		*file = intern_path(dwarf_formstring(dwarf_attr(&cu, DW_AT_comp_dir, &attr)),
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

/* The frames of pc (a return address at the lib_mod's base) in an opened
 * module; module is the path the frames carry. */
static struct sym_entry *lib_resolve(struct lib_mod *l, uint64_t pc, const char *module)
{
	Dwarf_Addr addr = pc - 1, bias;
	Dwarf_Die *cu, *chain = NULL, *sub = NULL;
	const char *file = NULL, *name = NULL;
	struct sym_entry *e = NULL;
	size_t ninl = 0;
	int nchain = 0, line = 0;

	cu = dwfl_module_addrdie(l->mod, addr, &bias);
	if (cu)
		nchain = scope_chain(cu, addr - bias, &chain);
	else if (!dwfl_module_getdwarf(l->mod, &bias) && !l->nodebug_warning)
		l->nodebug_warning = format("no debug info for '%s'", module);

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

	Dwfl_Line *dl = dwfl_module_getsrc(l->mod, addr);
	if (dl)
		file = intern_path(dwfl_line_comp_dir(dl),
				   dwfl_lineinfo(dl, NULL, &line, NULL, NULL, NULL));
	/* Each inlined instance is a frame at the current position; its call
	 * site becomes the position of the frame around it. */
	for (size_t i = 0, k = 0; k < ninl; i++) {
		if (dwarf_tag(&chain[i]) != DW_TAG_inlined_subroutine)
			continue;
		name = die_name(&chain[i]);
		e->frames[k++] = (struct sym_frame){
			.pc = pc, .function = name ? name : unknown,
			.file = file, .line = line, .module = module, .inlined = true,
		};
		call_site(&chain[i], &file, &line);
	}
	name = sub ? die_name(sub) : NULL;
	if (!name)
		name = intern_symbol(symbol_at(l, addr));
	e->frames[ninl] = (struct sym_frame){
		.pc = pc, .function = name ? name : unknown,
		.file = file, .line = line, .module = module, .inlined = false,
	};
out:
	free(chain);
	return e;
}

/* lib_resolve through the lib_mod's cache. */
static const struct sym_entry *lib_lookup(struct lib_mod *l, uint64_t pc, const char *module)
{
	struct sym_entry key = { .pc = pc }, *e;
	void **slot;

	e = htab_find(l->cache, &key);
	if (e)
		return e;
	e = lib_resolve(l, pc, module);
	if (!e)
		return NULL;
	slot = htab_find_slot(l->cache, e, INSERT);
	if (!slot) {
		free(e);
		return NULL;
	}
	*slot = e;
	return e;
}

static struct sym_entry *resolve(struct symbolizer *s, uint64_t pc)
{
	struct sym_mod *m = module_by_range(s, pc - 1);
	const struct sym_entry *shared = NULL;
	struct sym_entry *e;
	size_t n = 1;

	if (m && m->lib && m->lib->mod) {
		shared = lib_lookup(m->lib, pc - m->base + m->lib->base, m->path);
		if (!shared)
			return NULL;
		warn(s, m, m->lib->nodebug_warning);
		n = shared->n;
	}
	e = malloc(sizeof(*e) + n * sizeof(e->frames[0]));
	if (!e)
		return NULL;
	e->pc = pc;
	e->n = n;
	if (!shared) {
		e->frames[0] = (struct sym_frame){
			.pc = pc, .function = unknown, .module = m ? m->path : NULL,
		};
		return e;
	}
	for (size_t i = 0; i < n; i++) {
		e->frames[i] = shared->frames[i];
		e->frames[i].pc = pc;
		e->frames[i].module = m->path;
	}
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
	if (s->cache)
		htab_delete(s->cache);
	for (size_t i = 0; i < s->nwarnings; i++)
		free(s->warnings[i]);
	free(s->warnings);
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
