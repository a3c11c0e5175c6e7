/* http.c — the live endpoint's server (live.h): binding the address,
 * the poll loop and its connections, the threads started and stopped. */
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

long long ctl_now_ns(const struct timespec *ts)
{
	return (long long)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

long long ctl_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------- options and binding ---------- */

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(a))
			return true;
		if (IN6_IS_ADDR_V4MAPPED(a))
			return a->s6_addr[12] == 127;
	}
	return false;
}

/* A port as given: decimal digits, 0 to 65535 (getaddrinfo would take
 * 99999 and use 99999 - 65536). */
bool ctl_port_ok(const char *s)
{
	unsigned long v = 0;
	if (!*s || strlen(s) > 5)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		v = v * 10 + (unsigned long)(*s - '0');
	}
	return v <= 65535;
}

struct ctl_live *ctl_live_bind(const struct ctl_live_opts *o)
{
	struct ctl_live *l = calloc(1, sizeof *l);
	if (!l) {
		ctl_error("out of memory");
		return NULL;
	}
	l->fd = -1;
	pthread_mutex_init(&l->dump_lock, NULL);
	for (int i = 0; i < LIVE_MAX_CONN; i++)
		l->conns[i].fd = -1;
	l->page = o->page;
	if (o->push && ctl_push_parse(l, o))
		goto fail;
	if (!o->addr)
		return l;   /* push only */
	const char *a = o->addr;
	if (!strncmp(a, "unix:", 5) || a[0] == '/' || a[0] == '.') {
		const char *path = strncmp(a, "unix:", 5) ? a : a + 5;
		struct sockaddr_un un = { .sun_family = AF_UNIX };
		if (!*path) {
			/* an empty sun_path would bind an abstract socket, which
			 * has no file mode: anyone on the machine could connect */
			ctl_error("--http: 'unix:' needs a socket path");
			goto fail;
		}
		if (strlen(path) >= sizeof un.sun_path) {
			ctl_error("--http: socket path '%s' is too long", path);
			goto fail;
		}
		strcpy(un.sun_path, path);
		l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		/* 0600 from the start: only this user may talk to it */
		mode_t old = umask(0177);
		int r = l->fd < 0 ? -1 : bind(l->fd, (struct sockaddr *)&un, sizeof un);
		umask(old);
		if (r || listen(l->fd, 128)) {
			ctl_error("--http: cannot listen on '%s': %s", path, strerror(errno));
			goto fail;
		}
		snprintf(l->unix_path, sizeof l->unix_path, "%s", path);
		snprintf(l->shown, sizeof l->shown, "unix:%s", path);
		return l;
	}
	const char *colon = strrchr(a, ':');
	if (!colon || !colon[1]) {
		ctl_error("--http: want HOST:PORT or a socket path, not '%s'", a);
		goto fail;
	}
	if (!ctl_port_ok(colon + 1)) {
		ctl_error("--http: the port in '%s' is not a number from 0 to 65535", a);
		goto fail;
	}
	char host[256];
	size_t hl = (size_t)(colon - a);
	if (hl >= sizeof host) {
		ctl_error("--http: host too long in '%s'", a);
		goto fail;
	}
	memcpy(host, a, hl);
	host[hl] = 0;
	if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = 0;
	}
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *res = NULL;
	int gr = getaddrinfo(*host ? host : NULL, colon + 1, &hints, &res);
	if (gr) {
		ctl_error("--http: cannot resolve '%s': %s", a, gai_strerror(gr));
		goto fail;
	}
	if (!is_loopback(res->ai_addr)) {
		if (!o->public_ok) {
			ctl_error("--http: '%s' is not a loopback address: anyone who can reach it "
				  "could read the program's heap profile; add --http-allow-remote "
				  "to bind it anyway", a);
			freeaddrinfo(res);
			goto fail;
		}
		fprintf(stderr, "heaptrail: warning: the live endpoint on '%s' is reachable "
			"beyond this machine, without authentication\n", a);
	}
	l->fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	if (l->fd >= 0)
		setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (l->fd < 0 || bind(l->fd, res->ai_addr, res->ai_addrlen) || listen(l->fd, 128)) {
		ctl_error("--http: cannot listen on '%s': %s", a, strerror(errno));
		freeaddrinfo(res);
		goto fail;
	}
	freeaddrinfo(res);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char ip[INET6_ADDRSTRLEN] = "?";
	int port = 0;
	if (!getsockname(l->fd, (struct sockaddr *)&ss, &sl)) {
		if (ss.ss_family == AF_INET) {
			inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof ip);
			port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		} else {
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, ip, sizeof ip);
			port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
		}
	}
	snprintf(l->shown, sizeof l->shown, ss.ss_family == AF_INET6 ? "http://[%s]:%d" :
		 "http://%s:%d", ip, port);
	return l;
fail:
	if (l->fd >= 0)
		close(l->fd);
	free(l);
	return NULL;
}

static const char *reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 413: return "Payload Too Large";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	default: return "Error";
	}
}

/* ---------- the server ---------- */

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	if (c->delta) {
		prof_profile_release(&c->delta->base);
		free(c->delta);
	}
	free(c->buf);
	memset(c, 0, sizeof *c);
	c->fd = -1;
}

static void conn_answer(struct conn *c, struct answer *a, bool head)
{
	char hdr[512];
	int n = snprintf(hdr, sizeof hdr,
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "X-Content-Type-Options: nosniff\r\nConnection: close\r\n%s\r\n",
			 a->status, reason(a->status), a->type ? a->type : "text/plain",
			 a->len, a->extra ? a->extra : "");
	size_t blen = head ? 0 : a->len;
	char *out = malloc((size_t)n + blen + 1);
	free(c->buf);
	c->buf = out;
	c->len = c->off = 0;
	if (out) {
		memcpy(out, hdr, (size_t)n);
		if (blen)
			memcpy(out + n, a->body, blen);
		c->len = (size_t)n + blen;
	}
	free(a->body);
	a->body = NULL;
	c->writing = true;
	c->deadline = ctl_now_ms() + LIVE_WRITE_MS;
}

static void conn_error(struct conn *c, int status, const char *msg)
{
	struct answer a = { 0 };
	ctl_answer_text(&a, status, "%s\n", msg);
	conn_answer(c, &a, false);
}

/* 1 when c holds a whole request (answered), 0 when more is needed. */
static int conn_request(struct ctl_live *l, struct conn *c)
{
	char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
	size_t hl = 4;
	if (!end) {
		end = memmem(c->buf, c->len, "\n\n", 2);
		hl = 2;
	}
	if (!end) {
		if (c->len >= LIVE_MAX_HEAD) {
			conn_error(c, 431, "request headers too large");
			return 1;
		}
		return 0;
	}
	size_t head = (size_t)(end - c->buf) + hl;
	char saved = *end;
	*end = 0;  /* put back below while the body is still coming */
	/* the request line: METHOD SP TARGET SP HTTP/x.y */
	char method[16], target[2048], version[16];
	if (sscanf(c->buf, "%15[A-Z] %2047[^ \r\n] %15[^ \r\n]", method, target, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7) || target[0] != '/') {
		conn_error(c, 400, "bad request line");
		return 1;
	}
	long clen = 0;
	for (char *h = strchr(c->buf, '\n'); h; h = strchr(h + 1, '\n'))
		if (!strncasecmp(h + 1, "content-length:", 15)) {
			char *v = h + 16 + strspn(h + 16, " \t"), *e;
			errno = 0;
			clen = *v >= '0' && *v <= '9' ? strtol(v, &e, 10) : -1;
			if (clen >= 0 && (errno || (*e && !strchr(" \t\r\n", *e))))
				clen = -1;
			if (clen < 0 || clen > LIVE_MAX_BODY) {
				conn_error(c, 413, "body too large or bad content-length");
				return 1;
			}
		}
	if (c->len < head + (size_t)clen) {
		*end = saved;
		return 0;
	}
	char *q = strchr(target, '?');
	if (q)
		*q++ = 0;
	struct answer a = { .status = 500 };
	ctl_route(l, method, target, q, c->buf + head, (size_t)clen, &a);
	if (a.delta) {
		c->delta = a.delta;
		c->head = !strcmp(method, "HEAD");
		c->deadline = a.delta->due + LIVE_WRITE_MS;
		return 1;
	}
	if (!a.body && a.status == 500)
		ctl_answer_text(&a, 500, "out of memory\n");
	conn_answer(c, &a, !strcmp(method, "HEAD"));
	return 1;
}

static void conn_read(struct ctl_live *l, struct conn *c)
{
	if (!c->buf && !(c->buf = malloc(LIVE_MAX_HEAD + LIVE_MAX_BODY + 1))) {
		conn_close(c);
		return;
	}
	size_t room = LIVE_MAX_HEAD + LIVE_MAX_BODY - c->len;
	ssize_t n = recv(c->fd, c->buf + c->len, room, 0);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		conn_close(c);
		return;
	}
	if (n < 0)
		return;
	c->len += (size_t)n;
	conn_request(l, c);
}

static void conn_write(struct conn *c)
{
	while (c->off < c->len) {
		ssize_t n = send(c->fd, c->buf + c->off, c->len - c->off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			break;
		}
		c->off += (size_t)n;
	}
	shutdown(c->fd, SHUT_WR);
	conn_close(c);
}

static void live_accept(struct ctl_live *l)
{
	for (int k = 0; k < 16; k++) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct conn *slot = NULL, *oldest = NULL;
		for (int i = 0; i < LIVE_MAX_CONN; i++) {
			struct conn *c = &l->conns[i];
			if (c->fd < 0) {
				slot = c;
				break;
			}
			if (!oldest || c->deadline < oldest->deadline)
				oldest = c;
		}
		if (!slot) {
			/* full: the connection that has waited longest makes room */
			conn_close(oldest);
			slot = oldest;
		}
		slot->fd = fd;
		slot->deadline = ctl_now_ms() + LIVE_READ_MS;
	}
}

static void *live_main(void *arg)
{
	struct ctl_live *l = arg;
	struct pollfd pfd[LIVE_MAX_CONN + 1];
	int who[LIVE_MAX_CONN + 1];
	while (!atomic_load(&l->stop)) {
		int n = 0;
		pfd[n] = (struct pollfd){ .fd = l->fd, .events = POLLIN };
		who[n++] = -1;
		for (int i = 0; i < LIVE_MAX_CONN; i++) {
			struct conn *c = &l->conns[i];
			if (c->fd < 0)
				continue;
			pfd[n] = (struct pollfd){ .fd = c->fd, .events = c->delta ? 0 :
						  c->writing ? POLLOUT : POLLIN };
			who[n++] = i;
		}
		long long t = ctl_now_ms(), wait = 200;
		for (int i = 0; i < LIVE_MAX_CONN; i++) {
			struct conn *c = &l->conns[i];
			if (c->fd >= 0 && c->delta && c->delta->due - t < wait)
				wait = c->delta->due > t ? c->delta->due - t : 0;
		}
		int r = poll(pfd, (nfds_t)n, (int)wait);
		if (r < 0 && errno != EINTR)
			break;
		for (int k = 1; r > 0 && k < n; k++) {
			struct conn *c = &l->conns[who[k]];
			if (!pfd[k].revents || c->fd != pfd[k].fd)
				continue;
			if (c->delta)
				conn_close(c);  /* hung up while waiting */
			else if (c->writing)
				conn_write(c);
			else if (pfd[k].revents & (POLLIN | POLLHUP | POLLERR))
				conn_read(l, c);
			if (c->fd >= 0 && c->writing)
				conn_write(c);
		}
		if (r > 0 && pfd[0].revents & POLLIN)
			live_accept(l);
		t = ctl_now_ms();
		for (int i = 0; i < LIVE_MAX_CONN; i++) {
			struct conn *c = &l->conns[i];
			if (c->fd >= 0 && c->delta && t >= c->delta->due) {
				struct answer a = { .status = 500 };
				struct delta *d = c->delta;
				c->delta = NULL;
				ctl_finish_profile(l, &d->base, d->dflt, d->debug, &a);
				prof_profile_release(&d->base);
				free(d);
				conn_answer(c, &a, c->head);
				conn_write(c);
				continue;
			}
			if (c->fd < 0 || t <= c->deadline)
				continue;
			if (c->writing) {
				conn_close(c);  /* a client that does not read */
			} else {
				conn_error(c, 408, "request timeout");
				conn_write(c);
			}
		}
	}
	return NULL;
}

int ctl_live_start(struct ctl_live *l, const struct ctl_agent *a, const char *name)
{
	l->ag = *a;
	l->cache = prof_sym_cache_new();
	if (!l->push_name[0]) {
		/* the program's name, as Pyroscope's application name */
		const char *b = name ? strrchr(name, '/') : NULL;
		b = b ? b + 1 : name ? name : "heaptrail";
		size_t k = 0;
		for (; *b && k < sizeof l->push_name - 1; b++)
			l->push_name[k++] = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
						   "0123456789._-", *b) ? *b : '_';
		l->push_name[k] = 0;
	}
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);  /* the program's signals stay the main thread's */
	int r = 0;
	if (l->fd >= 0) {
		r = pthread_create(&l->thread, NULL, live_main, l);
		l->started = r == 0;
	}
	if (!r && l->push_host[0]) {
		r = pthread_create(&l->push_thread, NULL, ctl_push_main, l);
		l->push_started = r == 0;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r) {
		ctl_error("cannot start the live endpoint's thread: %s", strerror(r));
		return -1;
	}
	if (l->unix_path[0])
		fprintf(stderr, "heaptrail: live endpoint for process %ld at %s (/debug/pprof/, "
			"/metrics)\n", a->pid, l->shown);
	else if (l->fd >= 0)
		fprintf(stderr, "heaptrail: live endpoint for process %ld at %s/debug/pprof/\n",
			a->pid, l->shown);
	if (l->push_host[0])
		fprintf(stderr, "heaptrail: pushing process %ld's heap profile to http://%s:%s%s "
			"as '%s' every %ld ms\n", a->pid, l->push_host, l->push_port, l->push_path,
			l->push_name, l->push_every_ms);
	return 0;
}

void ctl_live_stop(struct ctl_live *l)
{
	if (!l)
		return;
	atomic_store(&l->stop, true);
	if (l->started)
		pthread_join(l->thread, NULL);
	if (l->push_started)
		pthread_join(l->push_thread, NULL);
	for (int i = 0; i < LIVE_MAX_CONN; i++)
		if (l->conns[i].fd >= 0)
			conn_close(&l->conns[i]);
	if (l->fd >= 0)
		close(l->fd);
	if (l->unix_path[0])
		unlink(l->unix_path);
	if (l->ag.pid > 0) {
		/* a dump that arrived after its request was answered */
		char path[sizeof l->ag.dir + 64];
		snprintf(path, sizeof path, "%s/" FMT_FILE_PREFIX ".%ld." FMT_HEAP_LIVE
			 FMT_HEAP_SUFFIX, l->ag.dir, l->ag.pid);
		unlink(path);
		if (l->live_path[0])
			unlink(l->live_path);
	}
	if (l->cache)
		prof_sym_cache_free(l->cache);
	pthread_mutex_destroy(&l->dump_lock);
	free(l);
}
