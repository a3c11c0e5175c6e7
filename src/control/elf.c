/* elf.c — the target's modules (ptrace.h): a module's load address in
 * /proc/PID/maps, the agent's among them, and a dynamic symbol's value
 * read from the module's file or, for one loaded from a memory file, from
 * the process's memory; libc's rt_sigreturn for the calls. */
#include <elf.h>
#include <linux/magic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control/ptrace.h"
#include "format/elfsyms.h"
#include "format/options.h"
#include "format/vocab.h"

/* The load address (the mapping at file offset 0) and path of the first
 * module in maps whose path ends in one of suffixes. */
int ctl_find_module(const char *maps, const char *const *suffixes, uint64_t *base, char *path,
		    size_t cap)
{
	for (const char *l = maps; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		unsigned long lo, hi, off;
		char perms[8];
		int pos = 0;
		if (sscanf(l, "%lx-%lx %7s %lx %*s %*s%n", &lo, &hi, perms, &off, &pos) < 4 || !pos)
			continue;
		const char *p = l + pos;
		while (*p == ' ')
			p++;
		size_t n = strcspn(p, "\n");
		if (!n || *p != '/' || off != 0)
			continue;
		for (const char *const *s = suffixes; *s; s++) {
			size_t sl = strlen(*s);
			if (n >= sl && !memcmp(p + n - sl, *s, sl) &&
			    (n == sl || p[n - sl - 1] == '/')) {
				*base = lo;
				snprintf(path, cap, "%.*s", (int)n, p);
				return 0;
			}
		}
	}
	return -1;
}

/* The file a path of /proc/PID/maps names, as we can open it: the kernel
 * writes the path from our root when we can reach the file from it (a
 * process in a chroot, or under `unshare --root`), else from the root of
 * the process's mount namespace (a container that pivoted into its own
 * root), which /proc/PID/root is. */
void ctl_target_path(long pid, const char *path, char *out, size_t cap)
{
	snprintf(out, cap, "/proc/%ld/root%s", pid, path);
	if (access(out, F_OK) && !access(path, F_OK))
		snprintf(out, cap, "%s", path);
}

struct sym_want {
	const char *name;
	uint64_t value;
};

static bool sym_is(const char *name, size_t room, const Elf64_Sym *sym, void *arg)
{
	struct sym_want *w = arg;
	if (!sym->st_value || strnlen(name, room) == room || strcmp(name, w->name))
		return false;
	w->value = sym->st_value;
	return true;
}

/* The value of a dynamic symbol in the ELF file at path (an x86-64
 * shared object), or 0. */
uint64_t ctl_elf_symbol(const char *path, const char *name)
{
	size_t len;
	char *img = ctl_read_file(path, &len);
	struct sym_want w = { name, 0 };
	if (img)
		fmt_elf_syms(img, len, SHT_DYNSYM, sym_is, &w);
	free(img);
	return w.value;
}

/* 1 when the executable has no program interpreter (a static binary). */
int ctl_is_static(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/exe", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	Elf64_Ehdr eh;
	int interp = 0, ret = -1;
	if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && !memcmp(eh.e_ident, ELFMAG, SELFMAG)) {
		for (int i = 0; i < eh.e_phnum; i++) {
			Elf64_Phdr ph;
			if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * sizeof ph)) !=
			    (ssize_t)sizeof ph)
				break;
			if (ph.p_type == PT_INTERP)
				interp = 1;
		}
		ret = !interp;
	}
	close(fd);
	return ret;
}

/* The address of an rt_sigreturn in the target's libc (glibc's
 * __restore_rt, `mov $15, %rax; syscall`, the restorer of its signal
 * handlers), found in the file's executable segment; 0 when none. And
 * into *gadget, the address of a `syscall; ret` there (0f 05 c3: the end
 * of getpid and its kind), 0 when none: the park (see "the calls"). */
uint64_t ctl_find_restorer(pid_t pid, const char *maps, uint64_t *gadget)
{
	static const char *const libc[] = { "libc.so.6", NULL };
	static const unsigned char code[] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };
	static const unsigned char sysret[] = { 0x0f, 0x05, 0xc3 };
	char path[PATH_MAX], file[PATH_MAX + 32];
	uint64_t base, found = 0;
	size_t len;
	*gadget = 0;
	if (ctl_find_module(maps, libc, &base, path, sizeof path))
		return 0;
	ctl_target_path(pid, path, file, sizeof file);
	char *img = ctl_read_file(file, &len);
	if (!img || len < sizeof(Elf64_Ehdr))
		goto out;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > len)
		goto out;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(img + eh->e_phoff);
	for (int i = 0; i < eh->e_phnum && !(found && *gadget); i++) {
		if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X) ||
		    ph[i].p_offset + ph[i].p_filesz > len)
			continue;
		const unsigned char *s = (const unsigned char *)img + ph[i].p_offset;
		const unsigned char *hit = memmem(s, ph[i].p_filesz, code, sizeof code);
		if (hit && !found)
			found = base + ph[i].p_vaddr + (uint64_t)(hit - s);
		hit = memmem(s, ph[i].p_filesz, sysret, sizeof sysret);
		if (hit && !*gadget)
			*gadget = base + ph[i].p_vaddr + (uint64_t)(hit - s);
	}
out:
	free(img);
	return found;
}


/* The agent's load address and its file as the target sees it (for one
 * loaded from a memory file, "/memfd:NAME"). */
int ctl_agent_in(const char *maps, uint64_t *base, char *path, size_t cap)
{
	/* the load address is the mapping at offset 0 followed by the
	 * executable one of the same file: a dlopen that failed half-way can
	 * leave the first alone behind */
	const char *name = "/libheaptrail.so";
	size_t nl = strlen(name);
	uint64_t start = 0;
	char first[PATH_MAX] = "";
	for (const char *l = maps; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		unsigned long lo, hi, off;
		char perms[8];
		int pos = 0;
		if (sscanf(l, "%lx-%lx %7s %lx %*s %*s%n", &lo, &hi, perms, &off, &pos) < 4 || !pos)
			continue;
		const char *p = l + pos;
		while (*p == ' ')
			p++;
		size_t n = strcspn(p, "\n");
		/* loaded from a memory file (containers, below): its name */
		if (!strncmp(p, MEMFD_PREFIX, strlen(MEMFD_PREFIX)) && n > strlen(DELETED) &&
		    !memcmp(p + n - strlen(DELETED), DELETED, strlen(DELETED)))
			n -= strlen(DELETED);
		if (*p != '/' || n < nl || n >= sizeof first || memcmp(p + n - nl, name, nl))
			continue;
		if (off == 0) {
			start = lo;
			snprintf(first, sizeof first, "%.*s", (int)n, p);
		} else if (perms[2] == 'x' && first[0] && strlen(first) == n &&
			   !memcmp(first, p, n)) {
			*base = start;
			snprintf(path, cap, "%s", first);
			return 0;
		}
	}
	return -1;
}

/* The value of a dynamic symbol of the module loaded at base in process
 * pid, read from its memory through ctl_mem_rw (a module loaded from a memory file has no
 * path to read): its dynamic section, whose symbol table ends where the
 * string table starts (GNU ld and lld, as the agent's attach.c reads its
 * own). 0 when not found. */
uint64_t ctl_mem_symbol(long pid, uint64_t base, const char *name)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/mem", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct target vm = { .pid = (pid_t)pid, .memfd = fd };  /* for ctl_mem_rw */
	uint64_t found = 0, symtab = 0, strtab = 0, strsz = 0, dynat = 0;
	Elf64_Sym *syms = NULL;
	char *strs = NULL;
	Elf64_Ehdr eh;
	if (ctl_mem_rw(&vm, base, &eh, sizeof eh, false) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_phnum > 64)
		goto out;
	for (int i = 0; i < eh.e_phnum && !dynat; i++) {
		Elf64_Phdr ph;
		if (ctl_mem_rw(&vm, base + eh.e_phoff + (uint64_t)i * sizeof ph, &ph, sizeof ph, false))
			goto out;
		if (ph.p_type == PT_DYNAMIC)
			dynat = base + ph.p_vaddr;
	}
	for (int i = 0; dynat && i < 256; i++) {
		Elf64_Dyn dyn;
		if (ctl_mem_rw(&vm, dynat + (uint64_t)i * sizeof dyn, &dyn, sizeof dyn, false) ||
		    dyn.d_tag == DT_NULL)
			break;
		/* the loader relocates these in place, unless the section is
		 * read-only: an unrelocated one is below the load address */
		uint64_t v = dyn.d_un.d_ptr < base ? dyn.d_un.d_ptr + base : dyn.d_un.d_ptr;
		if (dyn.d_tag == DT_SYMTAB)
			symtab = v;
		else if (dyn.d_tag == DT_STRTAB)
			strtab = v;
		else if (dyn.d_tag == DT_STRSZ)
			strsz = dyn.d_un.d_val;
	}
	if (!symtab || strtab <= symtab || strtab - symtab > (4u << 20) || !strsz || strsz > (4u << 20))
		goto out;
	size_t n = (size_t)(strtab - symtab) / sizeof *syms;
	syms = malloc(n * sizeof *syms);
	strs = malloc(strsz + 1);
	if (!syms || !strs ||
	    ctl_mem_rw(&vm, symtab, syms, n * sizeof *syms, false) ||
	    ctl_mem_rw(&vm, strtab, strs, strsz, false))
		goto out;
	strs[strsz] = 0;
	for (size_t k = 1; k < n && !found; k++)
		if (syms[k].st_name < strsz && syms[k].st_shndx != SHN_UNDEF && syms[k].st_value &&
		    !strcmp(strs + syms[k].st_name, name))
			found = syms[k].st_value;
out:
	if (fd >= 0)
		close(fd);
	free(syms);
	free(strs);
	return found;
}

/* A symbol of the agent loaded at base in process pid, whose file the
 * process sees at path ("/memfd:..." for one loaded from a memory file). */
uint64_t ctl_agent_symbol(long pid, uint64_t base, const char *path, const char *name)
{
	char file[PATH_MAX + 32];
	if (!strncmp(path, MEMFD_PREFIX, strlen(MEMFD_PREFIX)))
		return ctl_mem_symbol(pid, base, name);
	ctl_target_path(pid, path, file, sizeof file);
	return ctl_elf_symbol(file, name);
}
