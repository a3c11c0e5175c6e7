/*
 * fnhook_impl.h — what the files of the functions hooked by name share
 * (fnhook.c: the entry, writing the jumps, install and remove;
 * fnreloc.c; fnfind.c; fnentries.c): the table of hooks. Included by
 * them only; the rest of the agent uses fnhook.h. Layer 2.
 */
#ifndef HEAPTRAIL_AGENT_FNHOOK_IMPL_H
#define HEAPTRAIL_AGENT_FNHOOK_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include <Zydis/Zydis.h>

#include "agent/agent.h"
#include "format/fnspec.h"

#define JMP_LEN 5
#define MAX_HOOKS 64
#define STUB_LEN 32      /* the stub; orig follows */
#define PAGE 4096

struct fnhook {
	uintptr_t orig;          /* first: agent_fnhook_entry calls *(%rbx) */
	uintptr_t fn;            /* F */
	struct fmt_fnspec spec;
	uint8_t *page;           /* the stub and orig, kept after a detach
				  * (a thread may still run in it) */
	uint8_t saved[JMP_LEN];  /* F's first bytes, from which orig was made */
	struct fmt_fnspec next;  /* spec from switch_on: an attach after a
				  * detach may name F anew, and a thread still
				  * in the entry must not read it half-copied */
	bool want;               /* to be hooked by this install */
	bool on;                 /* F jumps to the stub */
	bool renamed;            /* next differs from spec: an attach named F again */
	bool busy;               /* commit_round: a thread is in the way */
	bool needed;             /* an entry point the others need (free, realloc) */
	uintptr_t target;        /* an allocator entry point (agent_fnhook_entries):
				  * the stub jumps to target, the agent's function
				  * of the same name, not to agent_fnhook_entry */
	const char *why, *why_more; /* a refusal to say after the resume */
};

/* Zydis, loaded only when there is something to hook, and RTLD_LOCAL:
 * the agent does not depend on it (an attach or a plain run loads
 * nothing more into the program), and a program with a Zydis of its own
 * keeps its own. The names below call through these pointers. */
struct agent_fn_zydis {
	__typeof__(ZydisDecoderInit) *decoder_init;
	__typeof__(ZydisDecoderDecodeFull) *decode_full;
	__typeof__(ZydisCalcAbsoluteAddress) *calc_absolute;
	__typeof__(ZydisEncoderDecodedInstructionToEncoderRequest) *to_request;
	__typeof__(ZydisEncoderEncodeInstructionAbsolute) *encode_absolute;
};
extern struct agent_fn_zydis agent_fn_zy;   /* fnreloc.c */
#define ZYDIS_SONAME "libZydis.so.4.0"
#define ZydisDecoderInit (*agent_fn_zy.decoder_init)
#define ZydisDecoderDecodeFull (*agent_fn_zy.decode_full)
#define ZydisCalcAbsoluteAddress (*agent_fn_zy.calc_absolute)
#define ZydisEncoderDecodedInstructionToEncoderRequest (*agent_fn_zy.to_request)
#define ZydisEncoderEncodeInstructionAbsolute (*agent_fn_zy.encode_absolute)

/* A function looked for by name (fnfind.c). */
struct found {
	const char *name;
	char mangled[FMT_FN_NAME_MAX + 64]; /* name's C++ mangling up to its
					     * parameters ("" when too long) */
	const char *part;        /* NULL: the function; ".cold": GCC's part of
				  * it by that suffix (for a mangled match) */
	bool exe_only;           /* look in the program only */
	bool active;             /* looked for in the module being read */
	bool done;               /* found (the first module that has it wins) */
	uintptr_t addr;
	uint64_t size;
	int count;               /* functions of that name at distinct addresses */
	char module[256];
};

/* The entry every hook's stub jumps to (fnhook.c, in assembly). */
extern char agent_fnhook_entry[];

/* The functions hooked, or to be (fnhook.c). */
extern struct fnhook agent_fnhooks[MAX_HOOKS];
extern int agent_nfnhooks;

/* ---- fnreloc.c ---- */
bool agent_fn_zydis_load(void);
void agent_fn_say(const char *name, const char *what, const char *more);
const uint8_t *agent_fn_code_copy(uintptr_t addr, uint64_t size, size_t *len);
size_t agent_fn_check(const ZydisDecoder *dec, const char *name, const uint8_t *bytes, uintptr_t fn,
		      uint64_t size, const struct found *cold);
uint8_t *agent_fn_put_jmp_abs(uint8_t *p, uintptr_t to);
size_t agent_fn_relocate(const ZydisDecoder *dec, const char *name, const uint8_t *bytes,
			 uintptr_t fn, size_t n, uint8_t *out, size_t cap);
uint8_t *agent_fn_near_page(uintptr_t fn);
bool agent_fn_write_entry(uintptr_t fn, const uint8_t *bytes);
bool agent_fn_same_bytes(uintptr_t code, const uint8_t *b);
void agent_fn_jump_bytes(const struct fnhook *h, uint8_t *jmp);
void agent_fn_switch_on(struct fnhook *h);
void agent_fn_hook_one(const ZydisDecoder *dec, const struct fmt_fnspec *spec, bool builtin,
		       const struct found *f, const struct found *cold);

/* ---- fnfind.c ---- */
void agent_fn_hook_lines(const ZydisDecoder *dec, const char *s, bool builtin);
/* The built-in profiles: which of them the program defines the key
 * function of (one pass over its symbols; none when builtin_fns=0), into
 * has[AGENT_FN_MAX_PROFILES], and whether any; then hooking the functions
 * of those has says. */
#define AGENT_FN_MAX_PROFILES 8
bool agent_fn_profiles_find(bool *has);
void agent_fn_profiles_hook(const ZydisDecoder *dec, const bool *has);

#endif
