/* push.c — the live endpoint's push client (live.h): the heap profile
 * sent to Pyroscope every push_every_ms. */
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
#include "control/live.h"
#include "format/options.h"
#include "format/vocab.h"
#include "render/render.h"

/* ---------- push to Pyroscope ----------
 *
 * Every push_every_ms: a profile now, sent to URL/ingest as Pyroscope's
 * clients send one (its ingest handler reads a multipart form, see
 * pkg/og/convert/pprof/profile.go in grafana/pyroscope): the parts
 * `profile` (the gzip'd pprof, file profile.pprof), `prev_profile` (the
 * one delivered before: Pyroscope subtracts it from the cumulative types
 * alloc_objects and alloc_space) and `sample_type_config` (JSON: which
 * types are cumulative, their units); the query gives name, from, until
 * (Unix seconds), spyName and sampleRate, and no `format` (which would
 * make the body a bare pprof). A failed push is retried at the next turn,
 * the wait doubling up to 5 minutes; only the newest profile and the last
 * one delivered are kept, so nothing grows while the server is down, and
 * nothing of this runs in the program. */

#define PUSH_IO_MS 5000          /* connect, send, answer: each */
#define PUSH_MAX_BACKOFF_MS 300000

int ctl_push_parse(struct ctl_live *l, const struct ctl_live_opts *o)
{
	const char *u = o->push + 7, *slash = strchr(u, '/');
	size_t hl = slash ? (size_t)(slash - u) : strlen(u);
	char hostport[300];
	if (!hl || hl >= sizeof hostport) {
		ctl_error("--push: no host in '%s'", o->push);
		return -1;
	}
	memcpy(hostport, u, hl);
	hostport[hl] = 0;
	char *colon = strrchr(hostport, ':');
	if (colon && !strchr(colon, ']')) {
		*colon = 0;
		if (!ctl_port_ok(colon + 1) || !atoi(colon + 1)) {
			ctl_error("--push: the port in '%s' is not a number from 1 to 65535", o->push);
			return -1;
		}
		snprintf(l->push_port, sizeof l->push_port, "%s", colon + 1);
	} else {
		snprintf(l->push_port, sizeof l->push_port, "80");
	}
	char *h = hostport;
	if (h[0] == '[' && h[strlen(h) - 1] == ']') {
		h[strlen(h) - 1] = 0;
		h++;
	}
	snprintf(l->push_host, sizeof l->push_host, "%s", h);
	/* the base path, without a trailing slash; /ingest goes after it */
	snprintf(l->push_path, sizeof l->push_path, "%s", slash ? slash : "");
	size_t pl = strlen(l->push_path);
	while (pl && l->push_path[pl - 1] == '/')
		l->push_path[--pl] = 0;
	if (strpbrk(l->push_path, "?# \r\n")) {
		ctl_error("--push: want a URL without a query, not '%s'", o->push);
		return -1;
	}
	if (o->push_name)
		snprintf(l->push_name, sizeof l->push_name, "%s", o->push_name);
	l->push_every_ms = o->push_every_ms ? o->push_every_ms : 15000;
	return 0;
}

/* Waits for fd to be ready for events, in slices that look at stop; 0,
 * or -1 on timeout, stop or error. */
static int push_wait(struct ctl_live *l, int fd, short events, long ms)
{
	long long end = ctl_now_ms() + ms;
	while (!atomic_load(&l->stop)) {
		long left = (long)(end - ctl_now_ms());
		if (left <= 0)
			return -1;
		struct pollfd p = { .fd = fd, .events = events };
		int r = poll(&p, 1, left < 100 ? (int)left : 100);
		if (r > 0)
			return (p.revents & (POLLERR | POLLNVAL)) && !(p.revents & events) ? -1 : 0;
		if (r < 0 && errno != EINTR)
			return -1;
	}
	return -1;
}

/* POSTs body to the server; 0 when it answered 2xx, else -1 with why. */
static int push_post(struct ctl_live *l, const char *target, const char *ctype,
		     const char *body, size_t blen, char *why, size_t cap)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
	int gr = getaddrinfo(l->push_host, l->push_port, &hints, &res);
	if (gr) {
		snprintf(why, cap, "cannot resolve '%s': %s", l->push_host, gai_strerror(gr));
		return -1;
	}
	int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int ret = -1;
	char *head = NULL;
	if (fd < 0) {
		snprintf(why, cap, "socket: %s", strerror(errno));
		goto out;
	}
	if (connect(fd, res->ai_addr, res->ai_addrlen) && errno != EINPROGRESS) {
		snprintf(why, cap, "cannot connect to %s:%s: %s", l->push_host, l->push_port,
			 strerror(errno));
		goto out;
	}
	int soerr = 0;
	socklen_t sl = sizeof soerr;
	if (push_wait(l, fd, POLLOUT, PUSH_IO_MS) ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) || soerr) {
		snprintf(why, cap, "cannot connect to %s:%s: %s", l->push_host, l->push_port,
			 soerr ? strerror(soerr) : "timed out");
		goto out;
	}
	int hn = asprintf(&head, "POST %s HTTP/1.1\r\nHost: %s:%s\r\nUser-Agent: heaptrail\r\n"
			  "Content-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			  target, l->push_host, l->push_port, ctype, blen);
	if (hn < 0) {
		head = NULL;
		snprintf(why, cap, "out of memory");
		goto out;
	}
	const char *parts[2] = { head, body };
	size_t lens[2] = { (size_t)hn, blen };
	for (int k = 0; k < 2; k++)
		for (size_t off = 0; off < lens[k];) {
			if (push_wait(l, fd, POLLOUT, PUSH_IO_MS)) {
				snprintf(why, cap, "sending to %s:%s timed out", l->push_host,
					 l->push_port);
				goto out;
			}
			ssize_t w = send(fd, parts[k] + off, lens[k] - off, MSG_NOSIGNAL);
			if (w < 0 && errno != EAGAIN && errno != EINTR) {
				snprintf(why, cap, "sending to %s:%s: %s", l->push_host,
					 l->push_port, strerror(errno));
				goto out;
			}
			if (w > 0)
				off += (size_t)w;
		}
	char ans[512];
	size_t got = 0;
	while (got < sizeof ans - 1 && !memchr(ans, '\n', got)) {
		if (push_wait(l, fd, POLLIN, PUSH_IO_MS)) {
			snprintf(why, cap, "no answer from %s:%s", l->push_host, l->push_port);
			goto out;
		}
		ssize_t r = recv(fd, ans + got, sizeof ans - 1 - got, 0);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
			break;
		if (r > 0)
			got += (size_t)r;
	}
	ans[got] = 0;
	int status = 0;
	if (sscanf(ans, "HTTP/1.%*d %d", &status) != 1 || status < 200 || status > 299) {
		snprintf(why, cap, "%s:%s answered '%.*s'", l->push_host, l->push_port,
			 (int)strcspn(ans, "\r\n"), ans);
		goto out;
	}
	ret = 0;
out:
	free(head);
	if (fd >= 0)
		close(fd);
	freeaddrinfo(res);
	return ret;
}

static void form_part(FILE *m, const char *boundary, const char *field, const char *file,
		      const char *ctype, const char *data, size_t len)
{
	fprintf(m, "--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
		"Content-Type: %s\r\n\r\n", boundary, field, file, ctype);
	fwrite(data, 1, len, m);
	fputs("\r\n", m);
}

static const char sample_type_config[] =
	"{\"alloc_objects\":{\"units\":\"objects\",\"cumulative\":true},"
	"\"alloc_space\":{\"units\":\"bytes\",\"cumulative\":true},"
	"\"inuse_objects\":{\"units\":\"objects\",\"aggregation\":\"average\"},"
	"\"inuse_space\":{\"units\":\"bytes\",\"aggregation\":\"average\"}}";

/* One push of pb (prev: the last delivered, or NULL); 0 or -1 with why. */
static int push_once(struct ctl_live *l, const char *pb, size_t pb_len, const char *prev,
		     size_t prev_len, time_t from, time_t until, char *why, size_t cap)
{
	char boundary[64], *body = NULL, *target = NULL, ctype[128];
	size_t blen = 0;
	snprintf(boundary, sizeof boundary, "heaptrail%016llx", (unsigned long long)ctl_now_ms());
	FILE *m = open_memstream(&body, &blen);
	if (!m) {
		snprintf(why, cap, "out of memory");
		return -1;
	}
	form_part(m, boundary, "profile", "profile.pprof", "application/octet-stream", pb, pb_len);
	if (prev)
		form_part(m, boundary, "prev_profile", "profile.pprof", "application/octet-stream",
			  prev, prev_len);
	form_part(m, boundary, "sample_type_config", "sample_type_config.json",
		  "application/json", sample_type_config, strlen(sample_type_config));
	fprintf(m, "--%s--\r\n", boundary);
	fclose(m);
	snprintf(ctype, sizeof ctype, "multipart/form-data; boundary=%s", boundary);
	int ret = -1;
	if (asprintf(&target, "%s/ingest?name=%s&from=%lld&until=%lld&spyName=heaptrail"
		     "&sampleRate=100", l->push_path, l->push_name, (long long)from,
		     (long long)until) < 0) {
		target = NULL;
		snprintf(why, cap, "out of memory");
	} else {
		ret = push_post(l, target, ctype, body, blen, why, cap);
	}
	free(body);
	free(target);
	return ret;
}

void *ctl_push_main(void *arg)
{
	struct ctl_live *l = arg;
	char *prev = NULL, why[PATH_MAX + 200], last_why[sizeof why] = "";
	size_t prev_len = 0;
	time_t prev_time = time(NULL);
	long backoff = 0;
	long long next = ctl_now_ms() + l->push_every_ms;
	while (!atomic_load(&l->stop)) {
		if (ctl_now_ms() < next) {
			usleep(50 * 1000);
			continue;
		}
		struct prof_profile p;
		char *pb = NULL;
		size_t pb_len = 0;
		int rc = ctl_live_profile(l, &p, why, sizeof why);
		if (!rc) {
			rc = render_pprof(&p, PROF_INUSE_SPACE, &pb, &pb_len);
			if (rc)
				snprintf(why, sizeof why, "cannot encode the profile");
			prof_profile_release(&p);
		}
		time_t now = time(NULL);
		if (now < prev_time)
			now = prev_time;   /* the clock stepped back: keep intervals in order */
		if (!rc)
			rc = push_once(l, pb, pb_len, prev, prev_len, prev_time, now, why, sizeof why);
		if (!rc) {
			/* delivered: the base of the next one */
			free(prev);
			prev = pb;
			prev_len = pb_len;
			prev_time = now;
			l->pushes++;
			backoff = 0;
			last_why[0] = 0;
			next = ctl_now_ms() + l->push_every_ms;
		} else {
			free(pb);
			l->push_errors++;
			if (strcmp(why, last_why)) {   /* each cause once, not every turn */
				fprintf(stderr, "heaptrail: push to Pyroscope failed: %s (retrying)\n",
					why);
				snprintf(last_why, sizeof last_why, "%s", why);
			}
			backoff = backoff ? 2 * backoff : l->push_every_ms;
			if (backoff > PUSH_MAX_BACKOFF_MS)
				backoff = PUSH_MAX_BACKOFF_MS;
			next = ctl_now_ms() + backoff;
		}
	}
	free(prev);
	return NULL;
}
