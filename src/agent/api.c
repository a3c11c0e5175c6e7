/* api.c — the public API of include/heaptrail.h, as seen from inside. */
#include "heaptrail.h"
#include "agent/agent.h"
#include "agent/banned.h"

AGENT_API int heaptrail_set_active(int on)
{
	return agent_set_recording(on != 0);
}
