/*
 * lifecycle.h — the process's life as the agent sees it: the
 * constructor and fork (lifecycle.c), exit, the exit report and leak
 * checks (exitreport.c), the leak check signal and fatal signals
 * (sigchecks.c). Layer 3.
 */
#ifndef HEAPTRAIL_AGENT_LIFECYCLE_H
#define HEAPTRAIL_AGENT_LIFECYCLE_H

#include <signal.h>
#include "agent/agent.h"

/* Writes the at-exit report once; status < 0 when unknown; stack_from as
 * for agent_leakscan; extra: the exit caller's callee-saved registers
 * (roots), or NULL. Returns 0, or -errno when the report could not be
 * written (it says so on stderr); 0 too when it was written before or is
 * not wanted. Not hook-safe (it takes every table lock); called from exit
 * paths, after agent_exit_claim. */
int agent_report_exit(int status, uintptr_t stack_from, const uintptr_t *extra, int nextra);
/* Makes the calling thread the one that ends the process; in any other
 * thread that calls it later, waits for ever (the first one's exit ends
 * the process). Returns at once in a process that is not agent_pid (a
 * vfork child). */
void agent_exit_claim(void);
/* exit() was entered by this thread: the caller's callee-saved registers
 * (AGENT_CALLER_NREGS of them) and its stack pointer, roots for the
 * report that its exit handlers write later. Hook-safe. */
void agent_exit_entered(const uintptr_t *regs, uintptr_t sp);

/* Entry points that end in a leak scan (exit, _Exit, _exit,
 * heaptrail_leak_check) start with AGENT_CALLER_ENTRY: it pushes the
 * caller's callee-saved registers (rbx, rbp, r12-r15) and calls
 * TARGET(arg0, regs, sp), with sp the stack pointer at the entry (the
 * slot of the return address: every program frame is above it). C code
 * cannot do this: by its first line the compiler may have moved those
 * registers already, and whatever libc's exit machinery later spills
 * them to is below the caller's frames, where the scan does not look.
 * With RET, TARGET's return value is returned; else TARGET must not
 * return. x86-64 only. */
#define AGENT_CALLER_NREGS 6
#define AGENT_CALLER_ENTRY(name, target, ret)                              \
	__asm__(".text\n"                                                   \
		".globl " #name "\n"                                          \
		".type " #name ", @function\n"                                \
		".p2align 4\n" #name ":\n"                                    \
		"	.cfi_startproc\n"                                     \
		"	endbr64\n"                                            \
		"	push %r15\n	.cfi_adjust_cfa_offset 8\n"           \
		"	push %r14\n	.cfi_adjust_cfa_offset 8\n"           \
		"	push %r13\n	.cfi_adjust_cfa_offset 8\n"           \
		"	push %r12\n	.cfi_adjust_cfa_offset 8\n"           \
		"	push %rbp\n	.cfi_adjust_cfa_offset 8\n"           \
		"	push %rbx\n	.cfi_adjust_cfa_offset 8\n"           \
		"	mov %rsp, %rsi\n"                                     \
		"	lea 48(%rsp), %rdx\n"                                 \
		"	sub $8, %rsp\n	.cfi_adjust_cfa_offset 8\n"           \
		"	call " #target "\n"                                   \
		ret                                                         \
		"	.cfi_endproc\n"                                       \
		".size " #name ", .-" #name "\n")
#define AGENT_CALLER_RETURNS                                               \
	"	add $8, %rsp\n	.cfi_adjust_cfa_offset -8\n"                  \
	"	pop %rbx\n	.cfi_adjust_cfa_offset -8\n"                  \
	"	pop %rbp\n	.cfi_adjust_cfa_offset -8\n"                  \
	"	pop %r12\n	.cfi_adjust_cfa_offset -8\n"                  \
	"	pop %r13\n	.cfi_adjust_cfa_offset -8\n"                  \
	"	pop %r14\n	.cfi_adjust_cfa_offset -8\n"                  \
	"	pop %r15\n	.cfi_adjust_cfa_offset -8\n"                  \
	"	ret\n"
#define AGENT_CALLER_NORETURN "	ud2\n"
/* A leak check now: classifies and writes heaptrail.PID.check-N.leaks.
 * flags: HEAPTRAIL_LEAKS_*; extra roots (an interrupted context's
 * registers) may be NULL. Returns 0 or -errno (-EBUSY when another check
 * is running). When wrote is not NULL, the file's path goes there (cap
 * bytes). Not hook-safe. */
int agent_leak_check(int flags, uintptr_t stack_from, const uintptr_t *extra, int nextra,
		     char *wrote, size_t cap);


/* What the constructor starts, for an agent loaded into a running
 * process (attach.c), once the options are read. */
void agent_start_attached(void);
/* Attach and detach: the handlers that write the report of a process
 * killed by a fatal signal, installed where the program left the default
 * (on), or taken away where they are still the agent's (off). */
void agent_fatal_handlers(bool on);

/* The exit report of a process a signal is about to kill
 * ("exit signal N"), from that signal's handler. */
void agent_report_fatal(int sig, siginfo_t *si, void *uc);

/* Between the three files. */
/* At start-up: libc's exit and its text, the loader's text. */
void agent_exit_init(void);
/* The constructor's last two exit handlers (exitreport.c, exit_park). */
void agent_exit_parks(void);
/* In a forked child: no exit, report or scan of the parent's is under
 * way; reports false: this process writes no report. */
void agent_exit_forked(bool reports);
bool agent_exit_reports(void);
/* The report of a process sig is about to kill (status unknown). */
int agent_report_killed(int sig, uintptr_t stack_from, const uintptr_t *regs, int nregs);
/* When another thread has begun the exit report: waits for it to end
 * (up to 30 s) and returns true; false when none has begun. */
bool agent_report_wait_other(void);
/* The executable text of libc (whose exit machinery sits between the
 * program's last live frame and the report) and of the loader (its base
 * is AT_BASE), found by agent_exit_init: sigchecks.c's check_handler
 * tells from them whether it interrupted the loader. */
struct agent_text {
	uintptr_t lo, hi;
};
extern struct agent_text agent_libc_text, agent_ldso_text;
void agent_check_handler_install(void);
/* all: every signal whose default ends the process, else the classic
 * six; keep_faults: SIGSEGV, SIGBUS, SIGFPE and SIGILL keep theirs. */
void agent_fatal_handlers_install(bool all);
void agent_fatal_handlers_remove(bool keep_faults);

#endif
