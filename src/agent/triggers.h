/*
 * triggers.h — when heap profiles are written by themselves, and the
 * timeline (triggers.c). Layer 2.
 */
#ifndef HEAPTRAIL_AGENT_TRIGGERS_H
#define HEAPTRAIL_AGENT_TRIGGERS_H

#include "agent/agent.h"

/* Checks the interval and peak triggers against the current totals.
 * Called now and then by agent_sample_note. */
void agent_triggers_check(void);
/* Starts the ticker thread and installs the dump signal (constructor;
 * again in a forked child, which fork left without the thread). */
void agent_triggers_start(void);
/* The ticker thread's id, or 0: it is the agent's, not the program's. */
extern atomic_int agent_ticker_tid;

#endif
