/*
 * elfsyms.h — the symbol tables of a 64-bit ELF file held whole in memory
 * (read or mapped by the caller), walked with every offset checked against
 * the image's length. Allocation-free: the agent (fnfind.c, allocator
 * functions by name) and the control layer (elf.c, the agent's entry
 * points in its file) share it.
 */
#ifndef HEAPTRAIL_FORMAT_ELFSYMS_H
#define HEAPTRAIL_FORMAT_ELFSYMS_H

#include <elf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Called for each defined symbol (st_shndx not SHN_UNDEF): name has at
 * most room bytes, maybe not NUL-terminated within them. Returns true to
 * stop the walk. */
typedef bool fmt_elf_sym_fn(const char *name, size_t room, const Elf64_Sym *sym, void *arg);

/* Walks every symbol table of type (SHT_SYMTAB or SHT_DYNSYM) of the
 * image [image, image + len). Returns 0 when it found such a table (and
 * walked it, or was stopped), -ENOENT when there is none, -EINVAL when
 * the image is not a 64-bit ELF file. */
int fmt_elf_syms(const void *image, size_t len, uint32_t type, fmt_elf_sym_fn *fn, void *arg);

#endif
