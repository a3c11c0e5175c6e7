/*
 * stopworld.h — stopping every other thread of the process for the leak
 * scan, and reading their registers (stopworld.c; the ptrace way in
 * stoptrace.c). Layer 1.
 */
#ifndef HEAPTRAIL_AGENT_STOPWORLD_H
#define HEAPTRAIL_AGENT_STOPWORLD_H

#include "agent/agent.h"

/* The registers of one stopped thread: the words of x86-64's
 * user_regs_struct (ptrace) or of its ucontext gregs (signal). */
#define AGENT_STOP_NREGS 32
enum { AGENT_STOP_WAITING, AGENT_STOP_STOPPED, AGENT_STOP_RELEASED, AGENT_STOP_GONE,
       AGENT_STOP_IN_SYSCALL, /* left in a call a stop would disturb (sp known) */
       AGENT_STOP_TRAPPED /* stopped, registers not read yet (internal) */ };
enum { AGENT_STOP_NONE, AGENT_STOP_PTRACE, AGENT_STOP_SIGNAL };
struct agent_stopped {
	pid_t tid;
	atomic_int state;        /* AGENT_STOP_*; WAITING after the stop = not stopped */
	int nregs;               /* words of regs filled in (0: unknown) */
	uintptr_t sp;            /* lowest live stack address (its stack pointer
				    less the red zone); for a thread not stopped,
				    from the system call it blocks in, or 0 */
	bool held;               /* IN_SYSCALL, seized and interrupted: it stops
				    before it runs any code of the program
				    (agent_stopworld_stop_all) */
	bool watched;            /* IN_SYSCALL, seized but not stopped: a signal
				    it takes meanwhile waits for the resume */
	int caught;              /* watched: the signal it stopped to take, to
				    deliver at the resume (0: none) */
	uint8_t settle;          /* the tracer's, at the resume */
	unsigned long runs;      /* the tracer's: times it was scheduled */
	uintptr_t regs[AGENT_STOP_NREGS];
};
/* Thread tid runs a request of heaptrail's CLI (sigchecks.c's
 * heaptrail_request) while the CLI traces it, on a stack of the CLI's:
 * its own stack's live part starts at sp. 0: none. A stop cannot seize
 * a thread traced by another, and scans it from there. Signal-safe. */
void agent_stopworld_lent(pid_t tid, uintptr_t sp);
/* Once, from the constructor: sig is the fallback's stop signal. */
void agent_stopworld_init(int sig);
/* Stops every thread of the process but the caller and skip (ptrace from
 * a tracer task; a signal when ptrace is not permitted), and points
 * *threads at their registers (valid until the resume). A thread blocked
 * in a system call that a stop would make fail or return early is left
 * in it (AGENT_STOP_IN_SYSCALL). Returns how many threads could not be
 * stopped, -1 when nothing could be done. One stop at a time: waits
 * while another thread's lasts; -1 at once when the caller's own is under
 * way. Not hook-safe; the caller must not hold a lock the stop takes
 * (none: it makes only system calls). Every call, even one that returned
 * -1, is followed by agent_stopworld_resume. Saves errno. */
int agent_stopworld_stop(pid_t skip, struct agent_stopped **threads, int *nthreads);
/* The same, for a caller about to rewrite code: with ptrace, the threads
 * in such system calls are stopped too (a call the stop made fail with
 * EINTR is started again at the resume), and one in uninterruptible sleep
 * is seized and interrupted (held: it stops before it runs any code).
 * With the signal, they stay as agent_stopworld_stop leaves them. */
int agent_stopworld_stop_all(struct agent_stopped **threads, int *nthreads);
/* While stopped: says on stderr (once per thread) which threads the
 * fallback's signal could not stop, for a leak scan. Not hook-safe
 * (writes to stderr); signal-safe. */
void agent_stopworld_warn(void);
/* AGENT_STOP_PTRACE or AGENT_STOP_SIGNAL while stopped, else NONE. */
int agent_stopworld_method(void);
/* Lets every stopped thread go on; returns when the tracer has gone.
 * From the stop to here the caller blocks every signal but the faults;
 * signals sent to the process meanwhile are sent again once the others
 * run, so that the kernel gives them to the thread it would have bare
 * (the main one, unless it blocks them). */
void agent_stopworld_resume(void);

#endif
