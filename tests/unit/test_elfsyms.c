/*
 * test_elfsyms.c — format/elfsyms.c, the symbol-table walk the agent and
 * the control layer share. The oracle is the dynamic loader: for libc's
 * malloc, free and dlopen, the value the walk finds in libc's file plus
 * libc's load address (dladdr) must be the address dlsym gives. Then
 * every cut of the file, and a file with its section offsets and symbol
 * section headers scribbled over, must be walked with every name and
 * symbol handed out lying within the image.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/elfsyms.h"
#include "check.h"

struct want {
	const char *name;
	uint64_t value;
	int seen;
};

static bool find(const char *name, size_t room, const Elf64_Sym *sym, void *arg)
{
	struct want *w = arg;
	if (strnlen(name, room) < room && !strcmp(name, w->name) && sym->st_value) {
		w->value = sym->st_value;
		w->seen++;
		return true;
	}
	return false;
}

/* Counts the symbols walked, and whether each name and symbol lies
 * within the image [lo, hi). */
struct walk {
	const unsigned char *lo, *hi;
	int n;
	bool outside;
};

static bool count(const char *name, size_t room, const Elf64_Sym *sym, void *arg)
{
	struct walk *w = arg;
	const unsigned char *a = (const unsigned char *)name, *b = (const unsigned char *)sym;
	if (room == 0 || a < w->lo || a + room > w->hi || b < w->lo ||
	    b + sizeof *sym > w->hi)
		w->outside = true;
	w->n++;
	return false;
}

static unsigned char *read_all(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	unsigned char *b = malloc((size_t)st.st_size);
	size_t got = 0;
	while (b && got < (size_t)st.st_size) {
		ssize_t r = read(fd, b + got, (size_t)st.st_size - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	*len = got;
	return b;
}

int main(void)
{
	Dl_info info;
	void *m = dlsym(RTLD_DEFAULT, "malloc");
	if (!dladdr(m, &info) || !info.dli_fname) {
		check(false, "dladdr(malloc) names libc");
		return 1;
	}
	size_t len;
	unsigned char *img = read_all(info.dli_fname, &len);
	check(img && len > 4096, "read %s (%zu bytes)", info.dli_fname, img ? len : 0);
	if (!img)
		return 1;
	const char *names[] = { "malloc", "free", "dlopen" };
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		struct want w = { names[i], 0, 0 };
		int r = fmt_elf_syms(img, len, SHT_DYNSYM, find, &w);
		uintptr_t real = (uintptr_t)dlsym(RTLD_DEFAULT, names[i]);
		Dl_info di;
		bool in_libc = dladdr((void *)real, &di) && di.dli_fbase == info.dli_fbase;
		check(r == 0 && w.seen == 1 && in_libc &&
			      (uintptr_t)info.dli_fbase + w.value == real,
		      "%s: the walk's value %#llx + libc's base is dlsym's %#lx (r %d)", names[i],
		      (unsigned long long)w.value, (unsigned long)real, r);
	}
	struct walk all = { img, img + len, 0, false };
	int r = fmt_elf_syms(img, len, SHT_DYNSYM, count, &all);
	check(r == 0 && all.n > 1000 && !all.outside, "libc's dynamic symbols walked whole: %d",
	      all.n);
	check(fmt_elf_syms(img, len, SHT_SYMTAB_SHNDX, count, &all) == -ENOENT,
	      "a table type the file lacks: -ENOENT");
	check(fmt_elf_syms("\177ELF", 4, SHT_DYNSYM, count, &all) == -EINVAL,
	      "4 bytes: not an image, -EINVAL");
	/* every cut: the walk ends, each name within its table */
	bool ok = true;
	for (size_t cut = 0; cut < len; cut += cut < 4096 ? 1 : 4093) {
		struct walk w = { img, img + cut, 0, false };
		r = fmt_elf_syms(img, cut, SHT_DYNSYM, count, &w);
		ok &= !w.outside && (r == 0 || r == -ENOENT || r == -EINVAL);
	}
	check(ok, "every cut of the file walked within its bounds");
	/* scribbled: section offsets and sizes, and names, at random */
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
	ok = true;
	for (int round = 0; round < 2000; round++) {
		unsigned char *copy = malloc(len);
		memcpy(copy, img, len);
		Elf64_Shdr *sh = (Elf64_Shdr *)(copy + eh->e_shoff);
		int s = (int)(rnd() % eh->e_shnum);
		switch (rnd() % 4) {
		case 0: sh[s].sh_offset = rnd() % (2 * len); break;
		case 1: sh[s].sh_size = rnd(); break;
		case 2: sh[s].sh_link = (uint32_t)(rnd() % (eh->e_shnum + 2)); break;
		default: sh[s].sh_type = SHT_DYNSYM; break;
		}
		struct walk w = { copy, copy + len, 0, false };
		fmt_elf_syms(copy, len, SHT_DYNSYM, count, &w);
		ok &= !w.outside;
		free(copy);
	}
	check(ok, "2,000 files with a section header scribbled over walked within bounds");
	free(img);
	return failures ? 1 : 0;
}
