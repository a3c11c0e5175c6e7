/* api.c — the public API of include/heaptrail.h, as seen from inside. */
#include "heaptrail.h"
#include "agent/agent.h"
#include "agent/banned.h"

AGENT_API int heaptrail_set_active(int on)
{
	return agent_set_recording(on != 0);
}

AGENT_API NOINLINE int heaptrail_leak_check(int flags)
{
	__builtin_unwind_init();  /* the caller's registers become roots */
	return agent_leak_check(flags, agent_stack_pointer(), NULL, 0);
}
