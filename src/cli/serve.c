/* serve.c — `heaptrail serve PID --http ADDR | --push URL`: the live
 * endpoint (src/control/live.h) for a process started under heaptrail or
 * attached, until it exits. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "analyze/aggregate.h"
#include "analyze/growth.h"
#include "analyze/load.h"
#include "analyze/series.h"
#include "cli/cli.h"
#include "format/options.h"
#include "format/vocab.h"
#include "render/render.h"

/* ---------- heaptrail serve PID --http ADDR ---------- */

static const char serve_usage[] =
	"usage: heaptrail serve --http ADDR | --push URL [options] PID\n"
	"  Serves the live endpoint (/debug/pprof/heap, /metrics, ...) of PID, a\n"
	"  process started under heaptrail or attached, until it exits.\n"
	"  --http ADDR            127.0.0.1:PORT (loopback), or a unix socket path\n"
	"  --http-allow-remote    allow an address beyond loopback (with a warning)\n"
	CTL_LIVE_PUSH_HELP;

static volatile sig_atomic_t serve_stop;
static void on_stop(int sig)
{
	(void)sig;
	serve_stop = 1;
}

int cmd_serve(int argc, char **argv)
{
	struct ctl_live_opts lo = { 0 };
	long pid = -1;
	for (int i = 1; i < argc; i++) {
		int r = cli_live_opt(argc, argv, &i, &lo);
		if (r < 0)
			return 2;
		if (r > 0)
			continue;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(serve_usage, stdout);
			return 0;
		}
		if (pid < 0 && (pid = ctl_parse_count(argv[i], INT_MAX)) > 0)
			continue;
		cli_error("serve: unexpected argument '%s'", argv[i]);
		fputs(serve_usage, stderr);
		return 2;
	}
	if (pid <= 0 || (!lo.addr && !lo.push)) {
		fputs(serve_usage, stderr);
		return 2;
	}
	struct ctl_agent ag;
	if (ctl_agent_open(pid, &ag, true))
		return 1;
	lo.page = cli_html_build;
	struct ctl_live *l = ctl_live_bind(&lo);
	if (!l)
		return 1;
	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	size_t clen;
	char *cmd = ctl_read_proc(pid, "cmdline", &clen);
	int sr = ctl_live_start(l, &ag, cmd);
	free(cmd);
	if (sr) {
		ctl_live_stop(l);
		return 1;
	}
	while (!serve_stop && kill((pid_t)pid, 0) == 0)
		usleep(200 * 1000);
	ctl_live_stop(l);
	return 0;
}
