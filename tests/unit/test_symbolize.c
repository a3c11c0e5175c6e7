/*
 * test_symbolize — the symbolizer against this very process: its own
 * functions (plain and inlined), demangling, and the ways a module can go
 * wrong (missing file, wrong build-id, relocated dump).
 *
 * Must be built with -g; any -O level. Prints "ok - ..." / "not ok - ..."
 * per check and exits 1 when one failed.
 */
#include "symbolize/symbolize.h"

#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"

static bool streq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

static const char *base_name(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path;
}

/* ---- code to be symbolized -------------------------------------------- */

static uintptr_t captured_ra;
static int inner_call_line, outer_call_line, plain_call_line;

__attribute__((noinline)) static void capture(void)
{
	captured_ra = (uintptr_t)__builtin_return_address(0);
	__asm__ volatile("" ::: "memory");
}

static inline __attribute__((always_inline)) void inlined_helper(void)
{
	capture(); inner_call_line = __LINE__;
}

__attribute__((noinline)) static void outer_function(void)
{
	inlined_helper(); outer_call_line = __LINE__;
}

/* One line, so that whichever of the rows at its entry address the line
 * table lookup picks (declaration, first statement), the line is exact. */
enum { PLAIN_LINE = __LINE__ + 1 };
__attribute__((noinline)) static int plain_function(int x) { __asm__ volatile("" : "+r"(x)); return x * 3; }

__attribute__((noinline)) static void plain_caller(void)
{
	capture(); plain_call_line = __LINE__;
}

/* ---- modules of this process ------------------------------------------ */

struct mods {
	struct sym_module v[64];
	char id[64][129];
	char exe[PATH_MAX];
	size_t n;
};

static void note_build_id(const struct dl_phdr_info *info, const ElfW(Phdr) *ph,
			  char *out)
{
	const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
	const char *end = p + ph->p_memsz;

	while (p + sizeof(ElfW(Nhdr)) <= end) {
		const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
		const unsigned char *desc = (const unsigned char *)p + sizeof(*nh) +
					    ((nh->n_namesz + 3) & ~3u);

		if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
		    memcmp(p + sizeof(*nh), "GNU", 4) == 0 && nh->n_descsz <= 64) {
			for (unsigned i = 0; i < nh->n_descsz; i++)
				sprintf(out + 2 * i, "%02x", desc[i]);
			return;
		}
		p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
	}
}

static int add_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct mods *m = arg;
	struct sym_module *mod;
	uint64_t lo = UINT64_MAX, hi = 0;

	if (m->n == 64)
		return 1;
	mod = &m->v[m->n];
	m->id[m->n][0] = '\0';
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD) {
			if (ph->p_vaddr < lo)
				lo = ph->p_vaddr;
			if (ph->p_vaddr + ph->p_memsz > hi)
				hi = ph->p_vaddr + ph->p_memsz;
		} else if (ph->p_type == PT_NOTE && !m->id[m->n][0]) {
			note_build_id(info, ph, m->id[m->n]);
		}
	}
	mod->path = info->dlpi_name[0] ? info->dlpi_name : m->exe;
	mod->build_id = m->id[m->n][0] ? m->id[m->n] : NULL;
	mod->base = info->dlpi_addr;
	mod->lo = lo + info->dlpi_addr;
	mod->hi = hi + info->dlpi_addr;
	m->n++;
	return 0;
}

static struct sym_module *main_module(struct mods *m)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->v[i].path == m->exe)
			return &m->v[i];
	return NULL;
}

/* ---- checks ----------------------------------------------------------- */

static void test_plain(struct symbolizer *s, const char *exe)
{
	uint64_t pc = (uintptr_t)&plain_function + 1;
	const struct sym_frame *f, *again;
	size_t n = sym_resolve(s, pc, &f);

	check(n == 1, "plain function gives one frame (got %zu)", n);
	check(streq(f[0].function, "plain_function"),
	      "plain function name (got '%s')", f[0].function);
	check(streq(base_name(f[0].file), "test_symbolize.c"),
	      "plain function file (got '%s')", f[0].file);
	check(f[0].line == PLAIN_LINE, "plain function line %d (got %d)",
	      PLAIN_LINE, f[0].line);
	check(streq(f[0].module, exe), "plain function module (got '%s')",
	      f[0].module);
	check(!f[0].inlined && f[0].pc == pc, "plain function not inlined, pc kept");
	sym_resolve(s, pc, &again);
	check(again == f, "second lookup of a pc comes from the cache");

	plain_caller();
	n = sym_resolve(s, captured_ra, &f);
	check(n == 1 && streq(f[0].function, "plain_caller") && !f[0].inlined,
	      "return address in a plain function (got %zu frames, '%s')", n,
	      f[0].function);
	check(streq(base_name(f[0].file), "test_symbolize.c") &&
	      f[0].line == plain_call_line, "return address at test_symbolize.c:%d (got %s:%d)",
	      plain_call_line, base_name(f[0].file), f[0].line);
}

static void test_inlined(struct symbolizer *s)
{
	const struct sym_frame *f;
	size_t n;

	outer_function();
	n = sym_resolve(s, captured_ra, &f);
	check(n == 2, "inlined call gives two frames (got %zu)", n);
	if (n != 2)
		return;
	check(streq(f[0].function, "inlined_helper"),
	      "inner frame is the inlined function (got '%s')", f[0].function);
	check(f[0].inlined, "inner frame marked inlined");
	check(streq(base_name(f[0].file), "test_symbolize.c") &&
	      f[0].line == inner_call_line, "inner frame at test_symbolize.c:%d (got %s:%d)",
	      inner_call_line, base_name(f[0].file), f[0].line);
	check(streq(f[1].function, "outer_function"),
	      "outer frame is the caller (got '%s')", f[1].function);
	check(!f[1].inlined, "outer frame not inlined");
	check(f[0].file == f[1].file, "both frames share one interned file name");
	check(streq(base_name(f[1].file), "test_symbolize.c") &&
	      f[1].line == outer_call_line, "outer frame at test_symbolize.c:%d (got %s:%d)",
	      outer_call_line, base_name(f[1].file), f[1].line);
}

static void test_unknown(struct symbolizer *s)
{
	const struct sym_frame *f;
	size_t n = sym_resolve(s, 0x10, &f);

	check(n == 1 && streq(f[0].function, "??") && !f[0].module && !f[0].file,
	      "pc 0x10 gives '?\?' in no module");
	n = sym_resolve(s, 0, &f);
	check(n == 1 && streq(f[0].function, "??"), "pc 0 gives '?\?'");
}

static void test_demangle(void)
{
	static const char *const cases[][2] = {
		{ "_ZN3foo3barEi", "foo::bar(int)" },
		{ "_Z1fv", "f()" },
		{ "_ZNSt6vectorIiSaIiEE9push_backERKi",
		  "std::vector<int, std::allocator<int> >::push_back(int const&)" },
		{ "_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write" },
		{ "_ZN60_$LT$alloc..string..String$u20$as$u20$core..fmt..Display$GT$3fmt17h0123456789abcdefE",
		  "<alloc::string::String as core::fmt::Display>::fmt" },
		{ "_RNvCs15kBYyAo9fc_7mycrate4main", "mycrate::main" },
		{ "_RNvNtCs1234_7mycrate3foo3bar", "mycrate::foo::bar" },
	};
	static const char *const plain[] = { "main", "malloc", "_Rfoo", "_Z", "_Zfoo", "" };

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *d = sym_demangle(cases[i][0]);

		check(streq(d, cases[i][1]), "demangle %s -> %s (got '%s')",
		      cases[i][0], cases[i][1], d ? d : "(null)");
		free(d);
	}
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		char *d = sym_demangle(plain[i]);

		check(!d, "'%s' is not mangled", plain[i]);
		free(d);
	}
	check(!sym_demangle(NULL), "NULL is not mangled");
}

static bool has_warning(struct symbolizer *s, const char *want)
{
	const char *const *w;
	size_t n = sym_warnings(s, &w);

	for (size_t i = 0; i < n; i++)
		if (strstr(w[i], want))
			return true;
	return false;
}

/* A dump whose modules are partly wrong: the exe recorded with a foreign
 * build-id under a path that does not exist (found through binary_path),
 * plus a library that is gone. */
static void test_bad_modules(struct mods *m)
{
	struct sym_module mods[2], *exe = main_module(m);
	char dir[PATH_MAX], search[PATH_MAX + 16], want[PATH_MAX + 64];
	char recorded[PATH_MAX + 16], gone[PATH_MAX + 32];
	const struct sym_frame *f;
	struct symbolizer *s;

	mods[0] = *exe;
	snprintf(recorded, sizeof(recorded), "/no/such/dir/%s", base_name(m->exe));
	mods[0].path = recorded;
	mods[0].build_id = "00112233445566778899aabbccddeeff00112233";
	mods[1] = (struct sym_module){ .path = "/no/such/libgone.so",
				       .base = 0x10000000, .lo = 0x10000000,
				       .hi = 0x10100000 };
	strcpy(dir, m->exe);
	*strrchr(dir, '/') = '\0';
	s = sym_new(mods, 2, "/nonexistent");
	snprintf(gone, sizeof(gone), "cannot open '%s'", recorded);
	check(s && has_warning(s, gone),
	      "missing exe without a matching binary_path is reported");
	sym_free(s);

	snprintf(search, sizeof(search), "/nonexistent::%s", dir);
	s = sym_new(mods, 2, search);
	if (!s) {
		check(false, "sym_new with bad modules");
		return;
	}
	check(sym_resolve(s, (uintptr_t)&plain_function + 1, &f) == 1 &&
	      streq(f[0].function, "plain_function") &&
	      streq(f[0].module, recorded),
	      "exe found through binary_path, module named as recorded");
	snprintf(want, sizeof(want), "build-id mismatch for '%s/%s'", dir,
		 base_name(m->exe));
	check(has_warning(s, want), "build-id mismatch is reported");
	check(sym_resolve(s, 0x10000100, &f) == 1 && streq(f[0].function, "??") &&
	      streq(f[0].module, "/no/such/libgone.so"),
	      "pc in a missing module gives '?\?' with the module named");
	check(has_warning(s, "cannot open '/no/such/libgone.so'"),
	      "missing module is reported");
	sym_free(s);
}

int main(void)
{
	static struct mods m;
	struct sym_module *exe;
	struct symbolizer *s;
	const char *const *w;
	ssize_t len;

	len = readlink("/proc/self/exe", m.exe, sizeof(m.exe) - 1);
	if (len <= 0) {
		perror("readlink /proc/self/exe");
		return 1;
	}
	m.exe[len] = '\0';
	dl_iterate_phdr(add_module, &m);
	exe = main_module(&m);
	check(exe && exe->build_id, "own build-id found via dl_iterate_phdr");

	s = sym_new(m.v, m.n, NULL);
	if (!s) {
		check(false, "sym_new over own modules");
		return 1;
	}
	check(!has_warning(s, "build-id mismatch"), "no build-id mismatch for own modules");
	test_plain(s, m.exe);
	test_inlined(s);
	test_unknown(s);
	for (size_t i = 0, n = sym_warnings(s, &w); i < n; i++)
		printf("# warning: %s\n", w[i]);
	sym_free(s);

	test_demangle();
	test_bad_modules(&m);
	return failures ? 1 : 0;
}
