/* buildid.c — GNU build-ids read from ELF images in memory (see
 * buildid.h). Every read stays within the range the caller names. */
#include <elf.h>
#include <link.h>

#include "agent/agent.h"
#include "agent/buildid.h"
#include "agent/banned.h"

uint32_t agent_build_id_in_notes(uintptr_t p, uintptr_t stop, char *hex)
{
	hex[0] = 0;
	while (p + sizeof(ElfW(Nhdr)) <= stop && p + sizeof(ElfW(Nhdr)) > p) {
		const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
		uintptr_t name = p + sizeof *nh;
		uintptr_t desc = name + ((nh->n_namesz + 3) & ~3u);
		uintptr_t next = desc + ((nh->n_descsz + 3) & ~3u);
		if (next > stop || next <= p)
			break;
		if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
		    agent_streq((const char *)name, "GNU")) {
			const unsigned char *d = (const unsigned char *)desc;
			uint32_t k = nh->n_descsz < 20 ? nh->n_descsz : 20;
			for (uint32_t j = 0; j < k; j++) {
				hex[2 * j] = "0123456789abcdef"[d[j] >> 4];
				hex[2 * j + 1] = "0123456789abcdef"[d[j] & 15];
			}
			hex[2 * k] = 0;
			return nh->n_descsz;
		}
		p = next;
	}
	return 0;
}

bool agent_build_id_of_image(uintptr_t start, uintptr_t end, char *hex)
{
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)start;
	if (end - start < sizeof *eh || eh->e_ident[0] != 0x7f || eh->e_ident[1] != 'E' ||
	    eh->e_ident[2] != 'L' || eh->e_ident[3] != 'F' || eh->e_ident[4] != ELFCLASS64)
		return false;
	if (eh->e_phoff > end - start ||
	    (uintptr_t)eh->e_phnum * sizeof(ElfW(Phdr)) > end - start - eh->e_phoff)
		return false;
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(start + eh->e_phoff);
	uintptr_t first = UINTPTR_MAX;
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < first)
			first = ph[i].p_vaddr;
	if (first == UINTPTR_MAX)
		return false;
	uintptr_t bias = start - (first & ~(uintptr_t)4095);
	for (int i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type != PT_NOTE)
			continue;
		uintptr_t p = bias + ph[i].p_vaddr, stop = p + ph[i].p_memsz;
		if (p < start || stop > end || stop < p)
			continue;
		uint32_t n = agent_build_id_in_notes(p, stop, hex);
		if (n && n <= 20)
			return true;
	}
	hex[0] = 0;
	return false;
}
