/*
 * attach.h — the agent loaded into a process that was started without it
 * (`heaptrail attach`, attach.c). Layer 3.
 */
#ifndef HEAPTRAIL_AGENT_ATTACH_H
#define HEAPTRAIL_AGENT_ATTACH_H

#include "agent/agent.h"

/* The first definition of a function among the loaded modules (not the
 * agent's, not a PLT entry), or NULL. Not hook-safe. */
void *agent_attach_definition(const char *name);

#endif
