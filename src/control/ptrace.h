/*
 * ptrace.h — calls into a running process with ptrace alone: what
 * ptrace.c (the borrowed thread), remote.c (the calls and the park),
 * elf.c (the target's modules and symbols) and inject.c (the agent
 * loaded, and asked) share. Inside src/control only: the commands use
 * control.h.
 *
 *
 * One thread of the target is borrowed for the calls, and only it is
 * stopped; the others run on. The thread chosen is one blocked in a
 * system call that waits (read, epoll_wait, poll, nanosleep, accept...,
 * seen in /proc/PID/task/TID/syscall): such a thread holds no allocator
 * or loader lock, so dlopen can run on it. When there is none, a thread
 * waiting on a futex that is no lock of libc's or of the loader (a
 * condition variable, pthread_join) is taken instead. It is seized and
 * interrupted; the calls (dlopen, then the agent's entry points) run on
 * it as a signal handler would, on its own stack, returning into libc's
 * rt_sigreturn, which puts back its registers, extended state and mask
 * (see "the calls" below: every step leaves a thread that can run on if
 * heaptrail dies). The interrupted system call is restarted as the kernel
 * would have (and one the stop made fail with EINTR, as epoll_wait does,
 * is restarted too: the program never sees it).
 *
 * Nothing in the target is written but the thread's stack below its
 * stack pointer, unless allocator functions are named (--alloc-fn...,
 * --options-file, or a built-in profile the program matches): the agent
 * then rewrites their first bytes, with every other thread stopped for
 * the write (src/agent/fnhook.c), and puts them back at the detach.
 */
#ifndef HEAPTRAIL_CONTROL_PTRACE_H
#define HEAPTRAIL_CONTROL_PTRACE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>
#include <time.h>

#include "control/control.h"

#define RTLD_NOW_VALUE 2  /* dlfcn.h: RTLD_NOW, and the agent stays local */

#define XSTATE_MAX 16384
#define ERESTART_RESTARTBLOCK_RET (-516)  /* the kernel's: resumed from the restart record */
/* how long a thread waits in the park by itself (see "the calls") */
#define PARK_MS 1000
/* how long a request waits while another heaptrail, or the agent's own
 * scan, holds the threads it could borrow */
#define HELD_WAIT_MS 60000
#define FUTEX_WAIT_PRIVATE_OP 128  /* FUTEX_WAIT | FUTEX_PRIVATE_FLAG */
#define STRINGS_SPACE 16384        /* the calls' strings and the result */
/* the path of an agent loaded from a memory file, as maps shows it */
#define MEMFD_PREFIX "/memfd:"
#define DELETED " (deleted)"

/* What the CLI traces a process for: its refusal advises each its own
 * way (ctl_seize_error). */
enum target_use { USE_ATTACH, USE_DETACH, USE_DUMP, USE_LEAKS, USE_LIVE };

struct target {
	pid_t pid, tid;
	enum target_use use;
	struct user_regs_struct saved;
	unsigned char xstate[XSTATE_MAX];
	size_t xstate_len;
	int memfd;
	uint64_t restorer;      /* libc's rt_sigreturn */
	uint64_t gadget;        /* a `syscall; ret` in libc, for the park (0: none) */
	uint64_t frame;         /* the signal frame, below the thread's stack pointer */
	uint64_t park;          /* the park's frame, below that one (0: no park) */
	int scfd;               /* /proc/PID/task/TID/syscall, while calls run parked */
	bool parked;            /* held at the park after a call (see "the calls") */
	bool step;              /* the next call stepped with PTRACE_SYSCALL */
	uint64_t strings;       /* STRINGS_SPACE above the frame: the calls' strings */
	uint64_t result;        /* where heaptrail_attach_call stores a result */
	uint64_t sigmask;       /* the thread's blocked signals */
	long failed_nr;         /* the last system call that failed in a call, or -1 */
	int failed_err;
	sigset_t oldmask;       /* heaptrail's own, while the thread is borrowed */
	bool masked;
	struct timespec stopped_at;
	double stopped_ms;
	/* the thread was stopped in the program's own code, not in a system
	 * call: it is given back with its registers exactly as they were */
	bool busy;
};

/* Threads found unfit to borrow (no room on their stack, a mask of
 * their own...), passed over for the rest of the attach. */
struct avoid {
	pid_t tid[16];
	int n;
};

/* An error about process pid, or "process N exited" when it is gone: a
 * process that ends during an attach makes any step fail, and the step's
 * own message would mislead. */
#define target_error(pid, ...)                                                 \
	(ctl_process_gone(pid) ? ctl_error("process %ld exited", (long)(pid))        \
			   : ctl_error(__VA_ARGS__))

/* ---- ptrace.c ---- */
const char *ctl_status_field(const char *status, const char *key, char *out, size_t cap);
bool ctl_process_gone(long pid);
bool ctl_held_briefly(pid_t pid, pid_t tid);
bool ctl_held_by_others(pid_t pid);
int ctl_waiting_call(long nr);
pid_t ctl_pick_thread(pid_t pid, const struct avoid *avoid);
void ctl_stall_point(void);
long ctl_pt(int req, pid_t tid, void *addr, void *data);
int ctl_mem_rw(struct target *t, uint64_t addr, void *buf, size_t n, bool write);
void ctl_note_reaped(pid_t pid, int status);
int ctl_wait_stop(struct target *t, int *status);
const char *ctl_restart_names(long rax);
bool ctl_futex_ok(struct target *t);
bool ctl_own_code(const char *maps, uint64_t pc);
void ctl_seize_error(const struct target *t, int e);
int ctl_open_target(struct target *t, long pid, enum target_use use, char **maps);
bool ctl_seccomp_filtered(pid_t pid);
const char *ctl_syscall_name(long nr);

/* ---- remote.c ---- */
int ctl_remote_call(struct target *t, uint64_t fn, const uint64_t a[6]);
int ctl_agent_call(struct target *t, uint64_t call, uint64_t fn, uint64_t a0, uint64_t a1,
		   uint64_t a2, uint64_t a3, uint64_t *ret);
int ctl_start_calls(struct target *t, const char *maps);
void ctl_end_calls(struct target *t);

/* ---- elf.c ---- */
int ctl_find_module(const char *maps, const char *const *suffixes, uint64_t *base, char *path,
		    size_t cap);
void ctl_target_path(long pid, const char *path, char *out, size_t cap);
uint64_t ctl_elf_symbol(const char *path, const char *name);
int ctl_is_static(pid_t pid);
uint64_t ctl_find_restorer(pid_t pid, const char *maps, uint64_t *gadget);
int ctl_agent_in(const char *maps, uint64_t *base, char *path, size_t cap);
uint64_t ctl_mem_symbol(long pid, uint64_t base, const char *name);
uint64_t ctl_agent_symbol(long pid, uint64_t base, const char *path, const char *name);

/* ---- inject.c ---- */

#endif
