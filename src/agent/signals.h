/*
 * signals.h — the signals the agent owns (signals.c). Layer 0.
 */
#ifndef HEAPTRAIL_AGENT_SIGNALS_H
#define HEAPTRAIL_AGENT_SIGNALS_H

#include <signal.h>
#include "agent/agent.h"

/* Signals the agent owns keep the agent's handler in the
 * kernel; the program's sigaction/signal calls on them are recorded and
 * answered as the kernel would. agent_flags: SA_NODEFER or 0, for the
 * agent's handler. Signal-safe. */
bool agent_sig_own(int sig, void (*fn)(int, siginfo_t *, void *), const sigset_t *agent_mask,
		   int agent_flags);
/* Whether the kernel still has the agent's handler for owned signal
 * sig: attached, the program's libc sigaction is not hooked, and a
 * handler it sets replaces the agent's. Signal-safe. */
bool agent_sig_still_ours(int sig);
/* Gives sig back (a detach that needs it no more): the program's
 * disposition goes into the kernel, where the agent's handler still is
 * (the program may have replaced it since, through libc's sigaction,
 * which is not hooked while attached). Signal-safe. */
void agent_sig_disown(int sig);
/* Hands a signal that is not heaptrail's to the program's disposition. */
void agent_sig_program(int sig, siginfo_t *si, void *uc);
/* fn, installed by the agent where the program left sig at SIG_DFL,
 * reports and then acts as the default action: the program's sigaction,
 * signal() and sigset() read SIG_DFL (or what it last set) while fn is
 * in place, and setting SIG_DFL puts fn back instead. */
void agent_sig_hide_default(int sig, void (*fn)(int, siginfo_t *, void *));
/* Puts SIG_DFL in the kernel for sig, whatever the agent hid there
 * (before the agent re-raises a fatal signal). Signal-safe. */
int agent_sig_kernel_default(int sig);
bool agent_sig_program_has_handler(int sig);
/* Whether the agent owns sig (agent_sig_own). Signal-safe. */
bool agent_sig_owned(int sig);
void agent_signals_init(void);
/* What a signal whose default action ends the process runs first (the
 * exit report: sigchecks.c's agent_report_fatal, set by the constructor;
 * signals sit below it). */
void agent_signals_on_fatal(void (*fn)(int, siginfo_t *, void *));
/* In a fork child: a thread of the parent that held the table lock is gone. */
void agent_signals_forked(void);

#endif
