/* SPDX-License-Identifier: BSD-3-Clause
 *
 * A small event-driven server for the FT-TCP readiness tests: non-blocking
 * sockets from accept4(SOCK_NONBLOCK), one event loop on the readiness call
 * named by --api, reads with recvmsg or readv, writes with sendmsg or
 * writev. Protocol ("mirror", test_ftcp_lib.py's client): a 4-byte length
 * in network order and that many bytes; the reply is the bytes reversed.
 *
 *   ftcp_evserver --port P --api epoll-lt|epoll-et|epoll-oneshot|epoll-pwait|
 *                              poll|ppoll|select|pselect [--delay-ms D] [--io splice]
 *                              [--think async]
 *
 * --io splice: bytes in and out go through a pipe with splice() (socket to
 * pipe, pipe to socket) instead of recvmsg/readv and sendmsg/writev.
 * --delay-ms: think D ms before each reply, after printing "req N" (the
 * test kills the server in that pause: the request is logged and read, its
 * reply not sent, and the client sends nothing more until it comes).
 * --think async (epoll APIs): the pause is a timer, not a sleep: the loop
 * goes on reading while replies wait for their time, as a server does
 * that hands requests to a backend (nginx as a proxy). Replies go out in
 * order, each D ms after its request was read.
 *
 * Like nginx and redis it sleeps in the readiness call and reads only what
 * it was told is there: a recovered connection whose replay the kernel
 * cannot see must still be reported readable, or the server waits forever.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAXC 64

struct conn {
	int fd;
	uint8_t in[1 << 17];
	size_t have;
	uint8_t *out;
	size_t out_len, out_off;
	unsigned n_io; /* alternates recvmsg/readv and sendmsg/writev */
	/* --think async: replies waiting for their time, oldest first */
	struct later *later, *later_tail;
};

struct later {
	struct later *next;
	uint64_t due_ms;
	uint32_t len;
	uint8_t bytes[];
};

static struct conn *cs[MAXC];
static const char *api;
static int ep = -1, lfd, delay_ms;
static int pin[2] = {-1, -1}, pout[2] = {-1, -1}; /* --io splice */
static unsigned n_req;
static bool think_async;

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static bool is(const char *a)
{
	return !strcmp(api, a);
}

static void watch(int fd, bool add)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};

	if (ep < 0)
		return;
	if (is("epoll-et"))
		ev.events |= EPOLLET;
	if (is("epoll-oneshot") && fd != lfd)
		ev.events |= EPOLLONESHOT;
	if (epoll_ctl(ep, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev)) {
		perror("epoll_ctl");
		exit(1);
	}
}

static void drop(struct conn *c)
{
	for (int i = 0; i < MAXC; i++)
		if (cs[i] == c)
			cs[i] = NULL;
	close(c->fd);
	free(c->out);
	while (c->later) {
		struct later *l = c->later;
		c->later = l->next;
		free(l);
	}
	free(c);
}

/* Write what is pending; false when the peer is gone. */
static bool flush_out(struct conn *c)
{
	while (c->out_off < c->out_len) {
		struct iovec v[2];
		size_t left = c->out_len - c->out_off, h = left / 2;
		v[0] = (struct iovec){c->out + c->out_off, h};
		v[1] = (struct iovec){c->out + c->out_off + h, left - h};
		ssize_t n;
		if (pout[0] >= 0) {
			/* Into the pipe, then the pipe into the socket. */
			size_t k = left < 65536 ? left : 65536;
			ssize_t w = write(pout[1], c->out + c->out_off, k);
			if (w <= 0)
				return false;
			for (ssize_t moved = 0; moved < w;) {
				ssize_t m = splice(pout[0], NULL, c->fd, NULL, (size_t)(w - moved),
						   SPLICE_F_NONBLOCK);
				if (m < 0 && (errno == EAGAIN || errno == EINTR)) {
					struct pollfd p = {.fd = c->fd, .events = POLLOUT};
					poll(&p, 1, 1000);
					continue;
				}
				if (m <= 0)
					return false;
				moved += m;
			}
			n = w;
		} else if (c->n_io++ & 1) {
			n = writev(c->fd, v, 2);
		} else {
			struct msghdr m = {.msg_iov = v, .msg_iovlen = 2};
			n = sendmsg(c->fd, &m, MSG_NOSIGNAL);
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			struct pollfd p = {.fd = c->fd, .events = POLLOUT};
			poll(&p, 1, 1000); /* replies are small; wait for room */
			continue;
		}
		if (n <= 0)
			return false;
		c->out_off += (size_t)n;
	}
	c->out_len = c->out_off = 0;
	return true;
}

/* Requests complete in the buffer are answered. */
static bool serve(struct conn *c)
{
	for (;;) {
		uint32_t n;
		if (c->have < 4)
			return true;
		memcpy(&n, c->in, 4);
		n = ntohl(n);
		if (n > sizeof(c->in) - 4)
			return false;
		if (c->have < 4 + n)
			return true;
		if (delay_ms) {
			printf("req %u\n", ++n_req);
			fflush(stdout);
			if (!think_async)
				usleep((useconds_t)delay_ms * 1000);
		}
		if (think_async) {
			struct later *l = malloc(sizeof(*l) + (n ? n : 1));
			if (!l)
				return false;
			l->next = NULL;
			l->due_ms = now_ms() + (uint64_t)delay_ms;
			l->len = n;
			for (uint32_t i = 0; i < n; i++)
				l->bytes[i] = c->in[4 + n - 1 - i];
			if (c->later_tail)
				c->later_tail->next = l;
			else
				c->later = l;
			c->later_tail = l;
			memmove(c->in, c->in + 4 + n, c->have - 4 - n);
			c->have -= 4 + n;
			continue;
		}
		free(c->out);
		c->out = malloc(n ? n : 1);
		for (uint32_t i = 0; i < n; i++)
			c->out[i] = c->in[4 + n - 1 - i];
		c->out_len = n;
		c->out_off = 0;
		memmove(c->in, c->in + 4 + n, c->have - 4 - n);
		c->have -= 4 + n;
		if (!flush_out(c))
			return false;
	}
}

/* Read until EAGAIN (what an edge-triggered server must do). */
static void on_readable(struct conn *c)
{
	for (;;) {
		struct iovec v[2];
		size_t room = sizeof(c->in) - c->have;
		v[0] = (struct iovec){c->in + c->have, room / 2};
		v[1] = (struct iovec){c->in + c->have + room / 2, room - room / 2};
		ssize_t n;
		if (pin[0] >= 0) {
			/* The socket into the pipe, then the pipe into our buffer. */
			size_t k = room < 65536 ? room : 65536;
			n = splice(c->fd, NULL, pin[1], NULL, k, SPLICE_F_NONBLOCK);
			for (ssize_t got = 0; n > 0 && got < n;) {
				ssize_t g = read(pin[0], c->in + c->have + got, (size_t)(n - got));
				if (g <= 0) {
					perror("read from the pipe");
					exit(1);
				}
				got += g;
			}
		} else if (c->n_io++ & 1) {
			n = readv(c->fd, v, 2);
		} else {
			struct msghdr m = {.msg_iov = v, .msg_iovlen = 2};
			n = recvmsg(c->fd, &m, 0);
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			drop(c);
			return;
		}
		c->have += (size_t)n;
		if (!serve(c)) {
			drop(c);
			return;
		}
	}
	if (is("epoll-oneshot"))
		watch(c->fd, false);
}

static void on_accept(void)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		int i;
		for (i = 0; i < MAXC && cs[i]; i++)
			;
		if (i == MAXC) {
			close(fd);
			continue;
		}
		cs[i] = calloc(1, sizeof(struct conn));
		cs[i]->fd = fd;
		watch(fd, true);
	}
}

static struct conn *by_fd(int fd)
{
	for (int i = 0; i < MAXC; i++)
		if (cs[i] && cs[i]->fd == fd)
			return cs[i];
	return NULL;
}

/* --think async: send the replies whose time has come; returns the wait
 * until the next one (ms), or -1 with none waiting. */
static int send_due(void)
{
	uint64_t now = now_ms(), next = UINT64_MAX;

	for (int i = 0; i < MAXC; i++) {
		struct conn *c = cs[i];
		while (c && c->later && c->later->due_ms <= now) {
			struct later *l = c->later;
			c->later = l->next;
			if (!c->later)
				c->later_tail = NULL;
			free(c->out);
			c->out = malloc(l->len ? l->len : 1);
			memcpy(c->out, l->bytes, l->len);
			c->out_len = l->len;
			c->out_off = 0;
			free(l);
			if (!flush_out(c)) {
				drop(c);
				c = NULL;
			}
		}
		if (c && c->later && c->later->due_ms < next)
			next = c->later->due_ms;
	}
	return next == UINT64_MAX ? -1 : (int)(next - now);
}

static void loop_epoll(void)
{
	struct epoll_event ev[16];
	sigset_t none;

	sigemptyset(&none);
	for (;;) {
		int wait = think_async ? send_due() : -1;
		int n = is("epoll-pwait") ? epoll_pwait(ep, ev, 16, wait, &none)
					  : epoll_wait(ep, ev, 16, wait);
		for (int i = 0; i < n; i++) {
			if (ev[i].data.fd == lfd) {
				on_accept();
				continue;
			}
			struct conn *c = by_fd(ev[i].data.fd);
			if (c)
				on_readable(c);
		}
	}
}

static void loop_poll(void)
{
	for (;;) {
		struct pollfd p[MAXC + 1];
		struct conn *who[MAXC + 1];
		nfds_t n = 0;
		p[n] = (struct pollfd){.fd = lfd, .events = POLLIN};
		who[n++] = NULL;
		for (int i = 0; i < MAXC; i++)
			if (cs[i]) {
				p[n] = (struct pollfd){.fd = cs[i]->fd, .events = POLLIN};
				who[n++] = cs[i];
			}
		int r = is("ppoll") ? ppoll(p, n, NULL, NULL) : poll(p, n, -1);
		for (nfds_t i = 0; r > 0 && i < n; i++) {
			if (!p[i].revents)
				continue;
			if (!who[i])
				on_accept();
			else
				on_readable(who[i]);
		}
	}
}

static void loop_select(void)
{
	for (;;) {
		fd_set rd;
		int max = lfd;
		struct conn *who[MAXC];
		int nw = 0;
		FD_ZERO(&rd);
		FD_SET(lfd, &rd);
		for (int i = 0; i < MAXC; i++)
			if (cs[i]) {
				FD_SET(cs[i]->fd, &rd);
				max = cs[i]->fd > max ? cs[i]->fd : max;
				who[nw++] = cs[i];
			}
		int r = is("pselect") ? pselect(max + 1, &rd, NULL, NULL, NULL, NULL)
				      : select(max + 1, &rd, NULL, NULL, NULL);
		if (r <= 0)
			continue;
		if (FD_ISSET(lfd, &rd))
			on_accept();
		for (int i = 0; i < nw; i++)
			if (FD_ISSET(who[i]->fd, &rd) && by_fd(who[i]->fd) == who[i])
				on_readable(who[i]);
	}
}

int main(int argc, char **argv)
{
	int port = 5001, one = 1;

	api = "epoll-lt";
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--port"))
			port = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--api"))
			api = argv[i + 1];
		else if (!strcmp(argv[i], "--delay-ms"))
			delay_ms = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--think") && !strcmp(argv[i + 1], "async"))
			think_async = true;
		else if (!strcmp(argv[i], "--io") && !strcmp(argv[i + 1], "splice") &&
			 (pipe(pin) || pipe(pout)))
			return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 16)) {
		perror("bind/listen");
		return 1;
	}
	printf("listening (%s)\n", api);
	fflush(stdout);
	if (think_async && strncmp(api, "epoll", 5)) {
		fprintf(stderr, "--think async: with an epoll API only\n");
		return 2;
	}
	if (!strncmp(api, "epoll", 5)) {
		ep = epoll_create1(EPOLL_CLOEXEC);
		watch(lfd, true);
		loop_epoll();
	} else if (is("poll") || is("ppoll")) {
		loop_poll();
	} else if (is("select") || is("pselect")) {
		loop_select();
	}
	fprintf(stderr, "--api %s: use epoll-lt|epoll-et|epoll-oneshot|epoll-pwait|poll|ppoll|"
			"select|pselect\n", api);
	return 2;
}
