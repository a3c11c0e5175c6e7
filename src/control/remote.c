/* remote.c — the calls into a borrowed thread (ptrace.h): a signal
 * frame of heaptrail's own, holding and giving back the thread, the park,
 * and one call of a function of the target's. */
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
#include "format/options.h"
#include "format/vocab.h"

/* ---------- the calls: a signal frame of heaptrail's own ----------
 *
 * heaptrail may die at any moment (a SIGKILL, a CI timeout): the kernel
 * then lets the borrowed thread run on with whatever registers it has.
 * So every state heaptrail puts the thread in is one it can run from
 * alone, and each change is a single write:
 *  - stopped: its registers are its own (a call the stop made fail with
 *    EINTR is set to run again first);
 *  - the frame, below its stack pointer (past the red zone, where a
 *    signal handler's frame would go), holds its registers, its
 *    extended state and its signal mask exactly as the kernel's signal
 *    delivery saves them, with a return address that is libc's
 *    rt_sigreturn (glibc's __restore_rt); writing it changes nothing the
 *    thread uses;
 *  - the park, a second such frame below the first, holds a system call
 *    instead of registers of the thread's: a futex wait of PARK_MS on a
 *    word no one wakes, every signal blocked, made by a `syscall; ret`
 *    of libc's whose ret takes the first frame's return address. A
 *    thread that runs into the park waits there PARK_MS, then goes
 *    through the first frame's rt_sigreturn back to where it was;
 *    writing it changes nothing the thread uses either;
 *  - one PTRACE_SETREGS starts a call (dlopen, or an agent entry point
 *    through heaptrail_attach_call, which stores the result in the
 *    frame's block) that returns into the park's rt_sigreturn: the call
 *    runs to its end, waits in the park and resumes where it was, as
 *    after a signal handler, whether heaptrail is there or not.
 * heaptrail lets the call run without a stop (PTRACE_CONT), watches
 * /proc/PID/task/TID/syscall until the thread waits in the park, and
 * stops it there (PTRACE_INTERRUPT): one round trip a call, however many
 * system calls the call makes. From the park it starts the next call
 * (one PTRACE_SETREGS again), or sends the thread into the first frame's
 * rt_sigreturn (one PTRACE_SETREGS) and lets it go. A heaptrail that dies
 * during a call, or is held up for longer than PARK_MS, costs the thread
 * PARK_MS at most; a thread that left the park by itself is let go as it
 * is (its call's result unknown). Without a `syscall; ret` in libc (and
 * once more for a dlopen that failed, to name the system call that
 * failed), heaptrail follows the call with PTRACE_SYSCALL instead, two
 * stops for each of its system calls, and takes the thread at the entry
 * of the first frame's rt_sigreturn.
 * Nothing is mapped or left behind. No PTRACE_O_EXITKILL;
 * PTRACE_O_TRACESYSGOOD, whose stops leave no signal behind when their
 * tracer is gone. A call runs with every signal blocked (see
 * ctl_remote_call), and so does the park: one for the thread waits, pending,
 * until the rt_sigreturn at the end; heaptrail holds no signal back. */

#define FP_XSTATE_MAGIC1 0x46505853U
#define FP_XSTATE_MAGIC2 0x46505845U
#define UC_FP_XSTATE 0x1
#define UC_SIGCONTEXT_SS 0x2
#define UC_STRICT_RESTORE_SS 0x4
#define RED_ZONE 128
/* room the calls may take below the frame: an attach with --sample 1, a
 * dump and a detach took 22 KiB of a thread's stack below the block */
#define CALL_STACK (128 * 1024)

/* The kernel's x86-64 rt_sigframe (arch/x86/include/asm/sigframe.h). */
struct k_sigcontext {
	uint64_t r8, r9, r10, r11, r12, r13, r14, r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp,
		rip, eflags;
	uint16_t cs, gs, fs, ss;
	uint64_t err, trapno, oldmask, cr2, fpstate, reserved1[8];
};
struct k_ucontext {
	uint64_t uc_flags, uc_link;
	struct {
		uint64_t sp;
		int32_t flags, pad;
		uint64_t size;
	} uc_stack;
	struct k_sigcontext mc;
	uint64_t sigmask;
};
struct k_rt_sigframe {
	uint64_t pretcode;
	struct k_ucontext uc;
	unsigned char info[128];
};
_Static_assert(sizeof(struct k_sigcontext) == 256, "sigcontext");
_Static_assert(sizeof(struct k_ucontext) == 304, "ucontext");

/* The thread's blocked signals (SigBlk in its status). */
static int thread_sigmask(struct target *t, uint64_t *mask)
{
	char path[96], buf[64];
	snprintf(path, sizeof path, "/proc/%d/task/%d/status", t->pid, t->tid);
	char *status = ctl_read_file(path, NULL);
	int ret = -1;
	if (status && ctl_status_field(status, "SigBlk", buf, sizeof buf)) {
		char *end;
		*mask = strtoull(buf, &end, 16);
		ret = end > buf ? 0 : -1;
	}
	free(status);
	return ret;
}

/* Whether the thread's call replaced its signal mask for the wait
 * (sigsuspend, ppoll/pselect/epoll_pwait given a mask): SigBlk then shows
 * the temporary mask, not the one to put back. */
static bool swaps_mask(const struct user_regs_struct *r)
{
	switch ((long)r->orig_rax) {
	case SYS_rt_sigsuspend: return true;
	case SYS_ppoll: return r->r10 != 0;
	case SYS_pselect6: return r->r9 != 0;
	case SYS_epoll_pwait: return r->r8 != 0;
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2: return r->r8 != 0;
#endif
	default: return false;
	}
}

/* Whether the stack the thread is on has room for the frame and the
 * calls below its stack pointer: the process's stack (it grows) with the
 * frame inside its mapping, or another mapping with CALL_STACK to spare. */
static bool stack_room(struct target *t, uint64_t sp)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", t->pid);
	char *maps = ctl_read_file(path, NULL);
	bool ok = false;
	uint64_t need = RED_ZONE + STRINGS_SPACE + XSTATE_MAX + 2048;
	for (const char *l = maps; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		unsigned long lo, hi;
		if (sscanf(l, "%lx-%lx", &lo, &hi) != 2 || sp <= lo || sp > hi)
			continue;
		size_t n = strcspn(l, "\n");
		bool grows = n >= 7 && !memcmp(l + n - 7, "[stack]", 7);
		ok = sp - lo >= need + (grows ? 0 : CALL_STACK);
		break;
	}
	free(maps);
	return ok;
}

/* The registers the thread resumes with when it is let go: a waiting
 * call the stop ended runs again, as the kernel restarts one (the
 * rt_sigreturn at the end of a call disables the kernel's restart, so
 * the frame must hold the restarted state). */
static struct user_regs_struct resume_regs(const struct target *t)
{
	struct user_regs_struct r = t->saved;
	if (!t->busy && (long)r.orig_rax >= 0 && ctl_restart_names((long)r.rax)) {
		r.rax = r.orig_rax;
		r.rip -= 2;
		r.orig_rax = (unsigned long long)-1;
	}
	return r;
}

static void fill_context(struct k_sigcontext *m, const struct user_regs_struct *r)
{
	m->r8 = r->r8; m->r9 = r->r9; m->r10 = r->r10; m->r11 = r->r11;
	m->r12 = r->r12; m->r13 = r->r13; m->r14 = r->r14; m->r15 = r->r15;
	m->rdi = r->rdi; m->rsi = r->rsi; m->rbp = r->rbp; m->rbx = r->rbx;
	m->rdx = r->rdx; m->rax = r->rax; m->rcx = r->rcx; m->rsp = r->rsp;
	m->rip = r->rip; m->eflags = r->eflags;
	m->cs = (uint16_t)r->cs;
	m->ss = (uint16_t)r->ss;
}

/* The park's futex word; its timeout 16 bytes above (both in the room
 * of the park's frame's siginfo, which rt_sigreturn does not read). */
static uint64_t park_word(const struct target *t)
{
	return t->park + offsetof(struct k_rt_sigframe, info);
}

/* Writes the park below the frame (see above). Returns 0 or -1. */
static int write_park(struct target *t)
{
	struct k_rt_sigframe p;
	memset(&p, 0, sizeof p);
	t->park = ((t->frame - sizeof p) & ~(uint64_t)15) - 8;
	struct user_regs_struct r = t->saved;
	r.rip = t->gadget;
	r.rsp = t->frame;  /* the ret takes the frame's return address */
	r.rax = SYS_futex;
	r.rdi = park_word(t);
	r.rsi = FUTEX_WAIT_PRIVATE_OP;
	r.rdx = 0;
	r.r10 = park_word(t) + 16;
	r.r8 = r.r9 = 0;
	r.eflags &= ~(0x100ull | 0x400ull | 0x40000ull);  /* TF, DF, AC */
	p.pretcode = t->restorer;
	p.uc.uc_flags = UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS;
	fill_context(&p.uc.mc, &r);
	p.uc.sigmask = ~0ull;
	struct timespec ts = { PARK_MS / 1000, (PARK_MS % 1000) * 1000000L };
	memcpy(p.info + 16, &ts, sizeof ts);
	if (ctl_mem_rw(t, t->park, &p, sizeof p, true)) {
		t->park = 0;
		return -1;
	}
	return 0;
}

/* Writes the frame below the thread's stack pointer, and the park below
 * it when libc has the park's `syscall; ret` (see above). Returns 0 or
 * -1. */
static int write_frame(struct target *t)
{
	struct user_regs_struct r = resume_regs(t);
	uint64_t top = (t->saved.rsp - RED_ZONE) & ~(uint64_t)63;
	t->strings = top - STRINGS_SPACE;
	t->result = top - 16;
	uint64_t fp = 0;
	unsigned char *x = t->xstate;
	size_t xlen = t->xstate_len;
	if (xlen >= 512) {
		/* the fxsave area's software bytes: the kernel's ptrace copy
		 * carries them; say them when it did not */
		uint32_t magic1, xsize;
		memcpy(&magic1, x + 464, 4);
		memcpy(&xsize, x + 464 + 16, 4);
		if (xlen > 512 + 64 && (magic1 != FP_XSTATE_MAGIC1 || xsize != xlen)) {
			uint32_t ext = (uint32_t)xlen + 4;
			uint64_t feat;
			memcpy(&feat, x + 512, 8);
			magic1 = FP_XSTATE_MAGIC1;
			xsize = (uint32_t)xlen;
			memcpy(x + 464, &magic1, 4);
			memcpy(x + 468, &ext, 4);
			memcpy(x + 472, &feat, 8);
			memcpy(x + 480, &xsize, 4);
		} else if (xlen <= 512 + 64) {
			memset(x + 464, 0, 48);  /* the legacy area alone */
		}
		uint32_t magic2 = FP_XSTATE_MAGIC2;
		memcpy(x + xlen, &magic2, 4);
		fp = (t->strings - (xlen + 4)) & ~(uint64_t)63;
	}
	uint64_t below = fp ? fp : t->strings;
	struct k_rt_sigframe f;
	memset(&f, 0, sizeof f);
	t->frame = ((below - sizeof f) & ~(uint64_t)15) - 8;  /* as at a function's entry */
	f.pretcode = t->restorer;
	f.uc.uc_flags = (fp && xlen > 512 + 64 ? UC_FP_XSTATE : 0) | UC_SIGCONTEXT_SS |
			UC_STRICT_RESTORE_SS;
	/* uc_stack left invalid (size 0): the thread's sigaltstack stays */
	fill_context(&f.uc.mc, &r);
	f.uc.mc.fpstate = fp;
	f.uc.sigmask = t->sigmask;
	if ((fp && ctl_mem_rw(t, fp, x, xlen + 4, true)) || ctl_mem_rw(t, t->frame, &f, sizeof f, true))
		return -1;
	return t->gadget ? write_park(t) : 0;
}

/* Checks that the stopped thread can run calls (a stack with room, a
 * mask it can be given back), saves its state and makes it resumable
 * (a wait the stop made fail with EINTR runs again). Returns 0, or -1
 * with the thread still held (give_back or detach it). */
static int hold(struct target *t)
{
	struct iovec iov = { t->xstate, XSTATE_MAX - 64 };
	if (t->busy ? false : swaps_mask(&t->saved))
		return -1;
	if (!stack_room(t, t->saved.rsp) || thread_sigmask(t, &t->sigmask))
		return -1;
	if (ctl_pt(PTRACE_GETREGSET, t->tid, (void *)NT_X86_XSTATE, &iov) == 0)
		t->xstate_len = iov.iov_len;
	else if (ctl_pt(PTRACE_GETFPREGS, t->tid, 0, t->xstate) == 0)
		t->xstate_len = 512;
	else
		return -1;
	return 0;
}

/* Lets go of a thread stopped but not held. */
static void let_go(struct target *t)
{
	ctl_pt(PTRACE_DETACH, t->tid, 0, 0);
	t->tid = 0;
	t->stopped_ms += ctl_ms_since(&t->stopped_at);
}

/* Seizes tid and stops it. Returns 0, -ESRCH when it is gone, or
 * -errno (-EPERM: another tracer holds it, or the kernel refuses). */
static int seize_stop(struct target *t, pid_t tid)
{
	if (ctl_pt(PTRACE_SEIZE, tid, 0, (void *)(long)PTRACE_O_TRACESYSGOOD))
		return -errno;
	t->tid = tid;
	clock_gettime(CLOCK_MONOTONIC, &t->stopped_at);
	ctl_pt(PTRACE_INTERRUPT, tid, 0, 0);
	int st, sig;
	while ((sig = ctl_wait_stop(t, &st)) > 0)
		ctl_pt(PTRACE_CONT, tid, 0, (void *)(long)sig);  /* a signal on its way: let it through */
	if (sig < 0 || ctl_pt(PTRACE_GETREGS, tid, 0, &t->saved)) {
		if (sig >= 0)
			let_go(t);
		t->tid = 0;
		return -ESRCH;
	}
	/* a wait the stop made fail with EINTR (epoll_wait does) runs again
	 * whatever comes next: the program never sees the EINTR */
	if ((long)t->saved.orig_rax >= 0 && (long)t->saved.rax == -EINTR) {
		struct user_regs_struct r = resume_regs(t);
		ctl_pt(PTRACE_SETREGS, tid, 0, &r);
	}
	return 0;
}

/* Third choice, for a process whose threads never wait in a system call
 * (CPU loops, spinning): stops each thread in turn and keeps the first
 * one found running the program's own code (see ctl_own_code). Returns 0
 * with t->busy set, or -EAGAIN. */
static int borrow_busy(struct target *t)
{
	char path[96];
	snprintf(path, sizeof path, "/proc/%d/maps", t->pid);
	char *maps = ctl_read_file(path, NULL);
	snprintf(path, sizeof path, "/proc/%d/task", t->pid);
	DIR *d = maps ? opendir(path) : NULL;
	int found = -EAGAIN;
	for (struct dirent *e; d && found && (e = readdir(d));) {
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid <= 0 || seize_stop(t, tid))
			continue;
		t->busy = true;
		if ((long)t->saved.orig_rax == -1 && ctl_own_code(maps, t->saved.rip) && !hold(t)) {
			found = 0;
			break;
		}
		t->busy = false;
		let_go(t);
	}
	if (d)
		closedir(d);
	free(maps);
	return found;
}

/* Seizes and stops one waiting thread and holds it (see hold). Returns
 * 0, or -errno with the reason printed. */
static int borrow(struct target *t)
{
	struct timespec start, t0;
	struct avoid unfit = { .n = 0 };
	clock_gettime(CLOCK_MONOTONIC, &start);
	t0 = start;
	int refused = 0;
	/* attempts count the threads looked at in vain; none is counted
	 * while another heaptrail holds one (up to HELD_WAIT_MS) */
	for (int attempt = 0; attempt < 200;) {
		bool wait_held = ctl_ms_since(&start) < HELD_WAIT_MS;
		pid_t tid = ctl_pick_thread(t->pid, &unfit);
		if (!tid && ctl_process_gone(t->pid))
			break;  /* said below: "process N exited" */
		if (!tid && wait_held && ctl_held_by_others(t->pid)) {
			/* the thread that waits is another request's for now:
			 * the wait below starts once it is let go */
			clock_gettime(CLOCK_MONOTONIC, &t0);
			usleep(2000);
			continue;
		}
		if (!tid) {
			/* no thread waits: after a short while, take one that
			 * runs the program's own code */
			if (ctl_ms_since(&t0) > 300 && borrow_busy(t) == 0)
				return 0;
			if (ctl_ms_since(&t0) > 5000)
				break;
			usleep(10000);
			attempt++;
			continue;
		}
		int e = seize_stop(t, tid);
		if (e == -ESRCH) {
			attempt++;
			continue;  /* the thread has just ended */
		}
		/* the agent's scan, or another request, for a moment; or one
		 * that let the thread go between its refusal and the look (a
		 * refusal of the kernel's comes again) */
		if (e == -EPERM && wait_held && (ctl_held_briefly(t->pid, tid) || refused++ < 10)) {
			usleep(2000);
			continue;
		}
		if (e)
			return e;
		attempt++;
		/* still in the waiting call: the stop aborted it */
		if ((long)t->saved.orig_rax >= 0 &&
		    (ctl_waiting_call((long)t->saved.orig_rax) ||
		     ((long)t->saved.orig_rax == SYS_futex && ctl_futex_ok(t))) &&
		    ctl_restart_names((long)t->saved.rax)) {
			unsigned char insn[2];
			if (!ctl_mem_rw(t, t->saved.rip - 2, insn, 2, false) && insn[0] == 0x0f &&
			    insn[1] == 0x05) {
				if (!hold(t))
					return 0;
				if (unfit.n < (int)(sizeof unfit.tid / sizeof unfit.tid[0]))
					unfit.tid[unfit.n++] = tid;
			}
		}
		let_go(t);
		if (attempt > 20)
			usleep(1000);  /* the one found cannot be held: others may come */
	}
	if (ctl_ms_since(&start) >= HELD_WAIT_MS && ctl_held_by_others(t->pid)) {
		target_error(t->pid, "the threads of process %d stayed held by another heaptrail (a "
			     "leak check or dump) for %d s: try again", t->pid, HELD_WAIT_MS / 1000);
		return -EAGAIN;
	}
	target_error(t->pid, "no thread of process %d could be borrowed safely: none waits in a system "
		  "call (read, poll, epoll_wait, a sleep, a condition variable...) or runs the "
		  "program's own code (not libc's, the loader's or an allocator's) with room on "
		  "its stack", t->pid);
	return -EAGAIN;
}

/* Gives the thread back: it resumes as it was (from the park, through
 * the frame's rt_sigreturn; from the entry of the last call's
 * rt_sigreturn; or from its stop). */
static void give_back(struct target *t)
{
	if (t->parked) {
		/* out of the park, into the frame's rt_sigreturn: as the park's
		 * ret would after its wait (if this fails, the wait ends it) */
		struct user_regs_struct r = t->saved;
		r.rip = t->restorer;
		r.rsp = t->frame + 8;
		r.rax = 0;
		r.orig_rax = (unsigned long long)-1;  /* the park's wait is not restarted */
		ctl_pt(PTRACE_SETREGS, t->tid, 0, &r);
		t->parked = false;
	}
	ctl_pt(PTRACE_DETACH, t->tid, 0, 0);
	t->stopped_ms += ctl_ms_since(&t->stopped_at);
	t->tid = 0;
	t->busy = false;
}

/* A stop of the thread during a call that is not heaptrail's own: 0 to
 * go on (a signal passed on to the kernel, see below), -EFAULT when the
 * call faulted (the fault is delivered and the thread let go: the
 * program would have died of it). */
static int pass_stop(struct target *t, int sig, int resume)
{
	if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE) {
		ctl_pt(PTRACE_DETACH, t->tid, 0, (void *)(long)sig);
		t->tid = 0;
		t->parked = false;
		return -EFAULT;
	}
	/* a signal before the call's own rt_sigreturn has blocked them all:
	 * delivered now (its handler returns to that rt_sigreturn), or
	 * queued again by the kernel when blocked (SIGSTOP is not: it stops
	 * the thread as it would); heaptrail holds none */
	if (ctl_pt(resume, t->tid, 0, (void *)(long)(sig > 0 ? sig : 0)))
		return -errno;
	return 0;
}

/* Whether the thread waits in the park now, as /proc/PID/task/TID/syscall
 * says. (Nothing else there tells that a call has ended: a call may wait
 * in a system call on a stack of the agent's own, anywhere.) */
static bool in_park(struct target *t)
{
	char buf[256];
	ssize_t n = pread(t->scfd, buf, sizeof buf - 1, 0);
	if (n <= 0)
		return false;
	buf[n] = 0;
	long nr;
	unsigned long a0, sp, pc;
	return sscanf(buf, "%ld %lx %*x %*x %*x %*x %*x %lx %lx", &nr, &a0, &sp, &pc) == 4 &&
	       nr == SYS_futex && a0 == park_word(t) && sp == t->frame && pc == t->gadget + 2;
}

/* Lets a call started by ctl_remote_call run (PTRACE_CONT) and stops the
 * thread in the park at its end (see "the calls"). Returns 0 with the
 * thread held there (t->parked), -ESRCH when the thread is gone,
 * -EFAULT when the call faulted, -ETIME when the thread left the park by
 * itself before heaptrail stopped it (it is stopped where it went: let
 * it go as it is). probe: no call, the thread sent into the park alone
 * (try_park): it is looked at every 50 ms, and -ETIME when it went back
 * without waiting there (a seccomp filter refused the wait). */
static int run_to_park(struct target *t, bool probe)
{
	struct timespec t0;
	bool seen;
again:
	if (ctl_pt(PTRACE_CONT, t->tid, 0, 0))
		return -errno;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long us = 20;
	for (;;) {
		int st, sig;
		pid_t w = waitpid(t->tid, &st, WNOHANG | __WALL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 || (w > 0 && (WIFEXITED(st) || WIFSIGNALED(st)))) {
			if (w == t->pid)
				ctl_note_reaped(w, st);
			return -ESRCH;
		}
		if (w > 0 && WIFSTOPPED(st)) {
			sig = st >> 16 ? 0 : WSTOPSIG(st);
			int e = pass_stop(t, sig, PTRACE_CONT);
			if (e)
				return e;
			continue;
		}
		if ((seen = in_park(t)) || (probe && ctl_ms_since(&t0) > 50)) {
			if (seen && !probe)
				ctl_stall_point();
			break;
		}
		struct timespec d = { 0, us * 1000 };
		nanosleep(&d, NULL);
		us = us * 3 / 2 > 500 ? 500 : us * 3 / 2;
	}
	if (ctl_pt(PTRACE_INTERRUPT, t->tid, 0, 0))
		return -errno;
	for (;;) {
		int st, sig = ctl_wait_stop(t, &st);
		if (sig < 0)
			return -ESRCH;
		if (!sig)
			break;  /* the interrupt's stop (or a group stop: where, the registers say) */
		int e = pass_stop(t, sig, PTRACE_CONT);
		if (e)
			return e;
	}
	struct user_regs_struct q;
	if (ctl_pt(PTRACE_GETREGS, t->tid, 0, &q))
		return -errno;
	bool waiting = q.rip == t->gadget + 2 && q.rsp == t->frame &&
		       (long)q.orig_rax == SYS_futex && (ctl_restart_names((long)q.rax) ||
							 (long)q.rax == -ETIMEDOUT);
	if (probe && !seen && !waiting) {
		/* on its way in (the park's rt_sigreturn, its system call not
		 * made yet: not run yet, on a busy machine), or gone back: the
		 * wait refused */
		if (((q.rip == t->restorer || q.rip == t->restorer + 7) && q.rsp == t->park + 8) ||
		    (q.rip == t->gadget && q.rsp == t->frame))
			goto again;
		return -ETIME;
	}
	/* in the park, or past its wait on the way to the frame's
	 * rt_sigreturn, not into it: the same place to go on from */
	if ((q.rip == t->gadget + 2 && q.rsp == t->frame) ||
	    ((q.rip == t->restorer || q.rip == t->restorer + 7) && q.rsp == t->frame + 8)) {
		t->parked = true;
		return 0;
	}
	return -ETIME;
}

/* Calls fn(a[0], ..., a[5]) in the thread, on its own stack below the
 * frames, returning into the park (or, stepped, into the frame's
 * rt_sigreturn). Returns 0 when the call ended (the thread held in the
 * park, or stopped at that rt_sigreturn), or an error of run_to_park's
 * (-ESRCH, -EFAULT, -ETIME) or -errno. The last system call that failed
 * during a stepped call is in t->failed_nr, t->failed_err. */
int ctl_remote_call(struct target *t, uint64_t fn, const uint64_t a[6])
{
	bool park = t->park && t->scfd >= 0 && !t->step;
	uint64_t ret_to = park ? t->park : t->frame;
	struct user_regs_struct r = t->saved;
	r.rip = fn;
	r.rsp = ret_to;
	r.rdi = a[0];
	r.rsi = a[1];
	r.rdx = a[2];
	r.rcx = a[3];
	r.r8 = a[4];
	r.r9 = a[5];
	r.rax = 0;
	r.eflags &= ~(0x100ull | 0x400ull | 0x40000ull);  /* TF, DF, AC: as for a handler */
	/* The call starts through a frame of its own too, under the others:
	 * an rt_sigreturn into fn with every signal blocked (one that comes
	 * waits until the call's end puts the thread's mask back: heaptrail
	 * holds none) and the initial floating-point state. */
	struct k_rt_sigframe f;
	memset(&f, 0, sizeof f);
	uint64_t setup = (ret_to - 256 - sizeof f) & ~(uint64_t)15;
	f.uc.uc_flags = UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS;
	fill_context(&f.uc.mc, &r);
	f.uc.sigmask = ~0ull;
	if (ctl_mem_rw(t, setup, &f, sizeof f, true))
		return -EIO;
	struct user_regs_struct go = t->saved;
	go.rip = t->restorer;
	go.rsp = setup + 8;  /* as after the restorer's return address is taken */
	go.rax = 0;
	go.orig_rax = (unsigned long long)-1;  /* no restart: at a stop in a call, none runs */
	t->failed_nr = -1;
	if (ctl_pt(PTRACE_SETREGS, t->tid, 0, &go))
		return -errno;
	t->parked = false;  /* out of the park, if it was there */
	if (park)
		return run_to_park(t, false);
	t->park = 0;  /* the call's stack runs over it: the next calls are stepped too */
	if (ctl_pt(PTRACE_SYSCALL, t->tid, 0, 0))
		return -errno;
	for (;;) {
		int st, sig = ctl_wait_stop(t, &st);
		if (sig < 0)
			return -ESRCH;
		if (sig == (SIGTRAP | 0x80)) {
			struct user_regs_struct q;
			if (ctl_pt(PTRACE_GETREGS, t->tid, 0, &q))
				return -errno;
			if ((long)q.orig_rax == SYS_rt_sigreturn && q.rsp == t->frame + 8 &&
			    (long)q.rax == -ENOSYS)
				return 0;  /* the call has returned */
			if ((long)q.rax < 0 && (long)q.rax > -4096 && (long)q.rax != -ENOSYS) {
				t->failed_nr = (long)q.orig_rax;
				t->failed_err = (int)-(long)q.rax;
			}
			sig = 0;
		}
		int e = pass_stop(t, sig, PTRACE_SYSCALL);
		if (e)
			return e;
	}
}

/* Calls the agent's fn(a0..a3) through its heaptrail_attach_call (at
 * call), which stores the result in the frame's block: *ret. */
int ctl_agent_call(struct target *t, uint64_t call, uint64_t fn, uint64_t a0, uint64_t a1,
		   uint64_t a2, uint64_t a3, uint64_t *ret)
{
	uint64_t unset = 0x5eadbeefdeadull;
	uint64_t a[6] = { fn, a0, a1, a2, a3, t->result };
	if (ctl_mem_rw(t, t->result, &unset, 8, true))
		return -EIO;
	int e = ctl_remote_call(t, call, a);
	if (!e && (ctl_mem_rw(t, t->result, ret, 8, false) || *ret == unset))
		e = -EIO;
	return e;
}

/* Sends the held thread into the park alone (its rt_sigreturn, then the
 * wait) and stops it there: 0, or an error of run_to_park's (-ETIME:
 * it went back at once, the wait refused). */
static int try_park(struct target *t)
{
	struct user_regs_struct go = t->saved;
	go.rip = t->restorer;
	go.rsp = t->park + 8;  /* as after the call's return took the address */
	go.rax = 0;
	go.orig_rax = (unsigned long long)-1;
	if (ctl_pt(PTRACE_SETREGS, t->tid, 0, &go))
		return -errno;
	return run_to_park(t, true);
}

/* Seizes and holds a thread, writes the frame of the calls. Returns 0
 * or prints and -1. */
int ctl_start_calls(struct target *t, const char *maps)
{
	char path[96];
	snprintf(path, sizeof path, "/proc/%d/mem", t->pid);
	/* the signals that ask heaptrail to end wait while it holds the
	 * thread (a SIGKILL cannot: see "the calls" above) */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGHUP);
	sigaddset(&stop, SIGQUIT);
	sigaddset(&stop, SIGPIPE);
	t->masked = !sigprocmask(SIG_BLOCK, &stop, &t->oldmask);
	t->restorer = ctl_find_restorer(t->pid, maps, &t->gadget);
	if (!t->restorer) {
		target_error(t->pid, "cannot find the signal return (__restore_rt) of the libc of "
			     "process %d", t->pid);
		return -1;
	}
	t->memfd = open(path, O_RDWR | O_CLOEXEC);
	if (t->memfd < 0 && (errno == EACCES || errno == EPERM)) {
		/* the file is its user's alone: process_vm_writev (ctl_mem_rw) */
	} else if (t->memfd < 0) {
		target_error(t->pid, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	int e = borrow(t);
	if (e) {
		if (e != -EAGAIN)
			ctl_seize_error(t, -e);
		return -1;
	}
	snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", t->pid, t->tid);
	t->scfd = t->gadget ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (write_frame(t)) {
		target_error(t->pid, "cannot write into the stack of process %d", t->pid);
		return -1;
	}
	/* A seccomp filter may refuse the park's futex wait (the filters of
	 * containers and of systemd allow it: every threaded program needs
	 * it): the thread would go back at once after a call, its result
	 * lost. Under a filter the park is tried alone first; refused, the
	 * thread is borrowed again and the calls are stepped. */
	if (t->scfd >= 0 && ctl_seccomp_filtered(t->pid)) {
		e = try_park(t);
		if (e == -ETIME) {
			give_back(t);
			close(t->scfd);
			t->scfd = -1;
			if ((e = borrow(t))) {
				if (e != -EAGAIN)
					ctl_seize_error(t, -e);
				return -1;
			}
			e = write_frame(t) ? -EIO : 0;
		}
		if (e) {
			target_error(t->pid, "cannot borrow a thread of process %d: %s", t->pid,
				     strerror(-e));
			return -1;
		}
	}
	return 0;
}

/* Gives the thread back. */
void ctl_end_calls(struct target *t)
{
	if (t->tid)
		give_back(t);
	if (t->memfd >= 0)
		close(t->memfd);
	t->memfd = -1;
	if (t->scfd >= 0)
		close(t->scfd);
	t->scfd = -1;
	t->park = 0;
	if (t->masked)
		sigprocmask(SIG_SETMASK, &t->oldmask, NULL);
	t->masked = false;
}
