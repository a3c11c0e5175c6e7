/* elfsyms.c — see elfsyms.h. */
#include <errno.h>

#include "format/elfsyms.h"
#include "agent/banned.h"   /* linked into the agent: held to its rules */

int fmt_elf_syms(const void *image, size_t len, uint32_t type, fmt_elf_sym_fn *fn, void *arg)
{
	const unsigned char *base = image;
	const Elf64_Ehdr *eh = image;
	if (len < sizeof *eh || base[EI_MAG0] != ELFMAG0 || base[EI_MAG1] != ELFMAG1 ||
	    base[EI_MAG2] != ELFMAG2 || base[EI_MAG3] != ELFMAG3 ||
	    base[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    eh->e_shoff > len || (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > len - eh->e_shoff)
		return -EINVAL;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(base + eh->e_shoff);
	int ret = -ENOENT;
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
			if (sym[k].st_shndx != SHN_UNDEF && sym[k].st_name < str->sh_size &&
			    fn(strs + sym[k].st_name, str->sh_size - sym[k].st_name, &sym[k], arg))
				return 0;
	}
	return ret;
}
