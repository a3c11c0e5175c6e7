/* buildid.c — GNU build-ids read from ELF images in memory (see
 * buildid.h). Every read stays within the range the caller names, and
 * is a copy through the kernel: the image may be unmapped under us. */
#include <elf.h>
#include <errno.h>
#include <link.h>

#include "agent/agent.h"
#include "agent/buildid.h"
#include "agent/banned.h"

/* Copies n bytes at a into to; false when some of them cannot be read
 * (unmapped since the caller found them). Where the kernel refuses the
 * copy (seccomp), only an image the loader's lock holds in place (pinned)
 * is read directly. */
static bool fetch(void *to, uintptr_t a, size_t n, bool pinned)
{
	ssize_t got = agent_copy_self(to, a, n);
	if (got == (ssize_t)n)
		return true;
	if (!pinned || got == -EFAULT || got >= 0)
		return false;
	agent_memcpy(to, (const void *)a, n);
	return true;
}

uint32_t agent_build_id_in_notes(uintptr_t p, uintptr_t stop, char *hex, bool pinned)
{
	hex[0] = 0;
	while (p + sizeof(ElfW(Nhdr)) <= stop && p + sizeof(ElfW(Nhdr)) > p) {
		ElfW(Nhdr) nh;
		if (!fetch(&nh, p, sizeof nh, pinned))
			break;
		uintptr_t name = p + sizeof nh;
		uintptr_t desc = name + ((nh.n_namesz + 3) & ~3u);
		uintptr_t next = desc + ((nh.n_descsz + 3) & ~3u);
		if (next > stop || next <= p || desc < name)
			break;
		char owner[4];
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    fetch(owner, name, 4, pinned) && agent_memcmp(owner, "GNU", 4) == 0) {
			unsigned char d[20];
			uint32_t k = nh.n_descsz < 20 ? nh.n_descsz : 20;
			if (!fetch(d, desc, k, pinned))
				break;
			for (uint32_t j = 0; j < k; j++) {
				hex[2 * j] = "0123456789abcdef"[d[j] >> 4];
				hex[2 * j + 1] = "0123456789abcdef"[d[j] & 15];
			}
			hex[2 * k] = 0;
			return nh.n_descsz;
		}
		p = next;
	}
	return 0;
}

#define MAX_NOTES 8     /* PT_NOTE segments looked at */
#define PH_BATCH 16     /* program headers copied at a time */

bool agent_build_id_of_image(uintptr_t start, uintptr_t end, char *hex)
{
	ElfW(Ehdr) eh;
	hex[0] = 0;
	if (end - start < sizeof eh || !fetch(&eh, start, sizeof eh, false) ||
	    eh.e_ident[0] != 0x7f || eh.e_ident[1] != 'E' || eh.e_ident[2] != 'L' ||
	    eh.e_ident[3] != 'F' || eh.e_ident[4] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(ElfW(Phdr)))
		return false;
	if (eh.e_phoff > end - start ||
	    (uintptr_t)eh.e_phnum * sizeof(ElfW(Phdr)) > end - start - eh.e_phoff)
		return false;
	/* one pass over the program headers: the lowest PT_LOAD gives the
	 * bias, which the notes' addresses need */
	uintptr_t first = UINTPTR_MAX;
	uintptr_t note_at[MAX_NOTES], note_len[MAX_NOTES];
	int nnotes = 0;
	for (int i = 0; i < eh.e_phnum; i += PH_BATCH) {
		ElfW(Phdr) ph[PH_BATCH];
		int k = eh.e_phnum - i < PH_BATCH ? eh.e_phnum - i : PH_BATCH;
		if (!fetch(ph, start + eh.e_phoff + (uintptr_t)i * sizeof *ph, (size_t)k * sizeof *ph,
			   false))
			return false;
		for (int j = 0; j < k; j++) {
			if (ph[j].p_type == PT_LOAD && ph[j].p_vaddr < first)
				first = ph[j].p_vaddr;
			else if (ph[j].p_type == PT_NOTE && nnotes < MAX_NOTES) {
				note_at[nnotes] = ph[j].p_vaddr;
				note_len[nnotes++] = ph[j].p_memsz;
			}
		}
	}
	if (first == UINTPTR_MAX)
		return false;
	uintptr_t bias = start - (first & ~(uintptr_t)4095);
	for (int i = 0; i < nnotes; i++) {
		uintptr_t p = bias + note_at[i], stop = p + note_len[i];
		if (p < start || stop > end || stop < p)
			continue;
		uint32_t n = agent_build_id_in_notes(p, stop, hex, false);
		if (n && n <= 20)
			return true;
	}
	hex[0] = 0;
	return false;
}
