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
/* Sets up the time triggers (no thread: see time_check in triggers.c),
 * opens the timeline and installs the dump signal (constructor; again in
 * a forked child, and at an attach). */
void agent_triggers_start(void);
/* Stops the time triggers (detach); agent_triggers_start starts them
 * again. */
void agent_triggers_stop(void);
/* Writes the timeline's last row (exit report). */
void agent_time_final(void);

#endif
