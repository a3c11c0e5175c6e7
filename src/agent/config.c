/*
 * config.c — HEAPTRAIL_OPTIONS, read once by the constructor.
 *
 *   HEAPTRAIL_OPTIONS="output=/tmp/run,depth=32,follow_children=0"
 *
 * output           directory for the agent's files (default: current dir)
 * depth            frames kept per allocation stack (1..256, default 64)
 * follow_children  1: exec'd programs are tracked too (default); 0: the
 *                  agent removes itself from LD_PRELOAD at start-up
 * freeres          1: release libc's and libstdc++'s internal caches
 *                  before the exit report, as valgrind does (default)
 * leak_kinds       1: classify blocks at exit into valgrind's four kinds
 *                  with a reachability scan (default); 0: report in use
 * stop_signal      signal used to stop threads during the scan
 *                  (default SIGRTMAX-1)
 * leak_check_signal  signal that asks for a leak check now, as
 *                  `heaptrail leaks PID` sends it (default SIGRTMAX-2; 0 off)
 *
 * HEAPTRAIL_OUTPUT, when set, names the output directory too (and wins):
 * it may hold commas. A malformed or unknown option is reported once on
 * stderr and ignored.
 */
#include <signal.h>
#include <stdlib.h>

#include "agent/agent.h"
#include "agent/banned.h"

struct agent_config agent_config = {
	.depth = AGENT_DEFAULT_DEPTH,
	.follow_children = true,
	.freeres = true,
	.leak_kinds = true,
	.stop_signal = 0,    /* SIGRTMAX - 1, set at load time */
};

static bool parse_uint(const char *s, size_t n, long *out)
{
	long v = 0;
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || v > 100000000)
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return true;
}

static bool eq(const char *key, size_t klen, const char *name)
{
	return agent_strlen(name) == klen && agent_strstarts(key, name);
}

static void apply(const char *opt, size_t len)
{
	char shown[256];
	const char *eqs = opt;
	while (eqs < opt + len && *eqs != '=')
		eqs++;
	size_t klen = (size_t)(eqs - opt);
	const char *val = eqs < opt + len ? eqs + 1 : NULL;
	size_t vlen = val ? (size_t)(opt + len - val) : 0;
	long v = 0;

	if (val && eq(opt, klen, "output")) {
		if (vlen < sizeof agent_config.output) {
			agent_memcpy(agent_config.output, val, vlen);
			agent_config.output[vlen] = 0;
			return;
		}
	} else if (val && eq(opt, klen, "depth") && parse_uint(val, vlen, &v) &&
		   v >= 1 && v <= AGENT_MAX_DEPTH) {
		agent_config.depth = (int)v;
		return;
	} else if (val && eq(opt, klen, "follow_children") && parse_uint(val, vlen, &v) && v <= 1) {
		agent_config.follow_children = v;
		return;
	} else if (val && eq(opt, klen, "freeres") && parse_uint(val, vlen, &v) && v <= 1) {
		agent_config.freeres = v;
		return;
	} else if (val && eq(opt, klen, "leak_kinds") && parse_uint(val, vlen, &v) && v <= 1) {
		agent_config.leak_kinds = v;
		return;
	} else if (val && eq(opt, klen, "leak_check_signal") && parse_uint(val, vlen, &v) &&
		   v < 65 && v != SIGKILL && v != SIGSTOP) {
		agent_config.leak_check_signal = (int)v;
		return;
	} else if (val && eq(opt, klen, "stop_signal") && parse_uint(val, vlen, &v) &&
		   v >= 1 && v < 65 && v != SIGKILL && v != SIGSTOP) {
		agent_config.stop_signal = (int)v;
		return;
	}
	size_t n = len < sizeof shown - 1 ? len : sizeof shown - 1;
	agent_memcpy(shown, opt, n);
	shown[n] = 0;
	agent_log("ignoring unknown or malformed option '", shown, "'");
}

void agent_config_load(void)
{
	agent_config.stop_signal = SIGRTMAX - 1;
	agent_config.leak_check_signal = SIGRTMAX - 2;
	const char *s = getenv("HEAPTRAIL_OPTIONS");
	const char *out = getenv("HEAPTRAIL_OUTPUT");
	while (s && *s) {
		const char *e = s;
		while (*e && *e != ',')
			e++;
		if (e > s)
			apply(s, (size_t)(e - s));
		s = *e ? e + 1 : e;
	}
	if (out && agent_strlen(out) < sizeof agent_config.output)
		agent_strlcpy(agent_config.output, out, sizeof agent_config.output);
}
