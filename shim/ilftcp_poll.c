/* SPDX-License-Identifier: BSD-3-Clause
 *
 * libilftcp.so: readiness of a recovered connection. Its replayed bytes
 * are in the shim, not in the socket, so the kernel would call it idle
 * and an event-driven server (nginx, redis) would wait for a request that
 * is already there. While a connection has replay pending, epoll_wait,
 * epoll_pwait, epoll_pwait2, poll, ppoll, select and pselect report it
 * readable, as they would a socket with data queued; once the replay is
 * read the kernel's own answer is the only one again.
 *
 * Edge-triggered epoll is served like level-triggered: the event is
 * reported at every wait while replay is pending. A server using edge
 * triggering reads until EAGAIN, which the shim gives only once both the
 * replay and the socket are empty, so it never waits with bytes left; an
 * extra report costs it one read. EPOLLONESHOT is honoured (reported once
 * until the next EPOLL_CTL_MOD). Only descriptors with replay pending are
 * tracked, so these calls cost nothing extra once recovery is over.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "ilftcp.h"

struct reg {
	int epfd, fd;
	uint32_t events;
	bool fired; /* EPOLLONESHOT: reported since the last MOD */
	epoll_data_t data;
};

#define MAX_REGS 1024
static struct reg regs[MAX_REGS];
static unsigned n_regs;
static pthread_mutex_t rmu = PTHREAD_MUTEX_INITIALIZER;

static void reg_del_at(unsigned i)
{
	regs[i] = regs[--n_regs];
}

void ilf_poll_forget(int fd)
{
	if (!n_regs)
		return;
	pthread_mutex_lock(&rmu);
	for (unsigned i = n_regs; i-- > 0;)
		if (regs[i].fd == fd || regs[i].epfd == fd)
			reg_del_at(i);
	pthread_mutex_unlock(&rmu);
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	int rc = REAL(epoll_ctl)(epfd, op, fd, ev);

	if (rc || (!n_regs && !atomic_load(&ilf_replaying)))
		return rc;
	pthread_mutex_lock(&rmu);
	unsigned i;
	for (i = 0; i < n_regs && !(regs[i].epfd == epfd && regs[i].fd == fd); i++)
		;
	bool track = op != EPOLL_CTL_DEL && ev && ilf_replay_ready(fd);
	if (!track) {
		if (i < n_regs)
			reg_del_at(i);
	} else if (i < n_regs || n_regs < MAX_REGS) {
		if (i == n_regs)
			n_regs++;
		regs[i] = (struct reg){.epfd = epfd, .fd = fd, .events = ev->events,
				       .data = ev->data};
	}
	pthread_mutex_unlock(&rmu);
	return rc;
}

/* The events the shim adds for epfd (up to max); 0: none, wait as usual. */
static int synth(int epfd, struct epoll_event *out, int max)
{
	int n = 0;

	pthread_mutex_lock(&rmu);
	for (unsigned i = 0; i < n_regs && n < max; i++) {
		struct reg *r = &regs[i];
		if (r->epfd != epfd || !(r->events & EPOLLIN) || !ilf_replay_ready(r->fd) ||
		    ((r->events & EPOLLONESHOT) && r->fired))
			continue;
		r->fired = true;
		out[n].events = EPOLLIN;
		out[n++].data = r->data;
	}
	pthread_mutex_unlock(&rmu);
	return n;
}

/* Merge the shim's events into what the kernel reported (same data: one
 * event with EPOLLIN added). */
static int merge(struct epoll_event *ev, int n, int max, const struct epoll_event *s, int ns)
{
	if (n < 0)
		n = 0;
	for (int i = 0; i < ns; i++) {
		int j;
		for (j = 0; j < n && ev[j].data.u64 != s[i].data.u64; j++)
			;
		if (j < n)
			ev[j].events |= EPOLLIN;
		else if (n < max)
			ev[n++] = s[i];
	}
	return n;
}

#define EPOLL_WRAP(call_real, call_zero)                                         \
	do {                                                                     \
		struct epoll_event s[64];                                        \
		int ns;                                                          \
		if (!atomic_load(&ilf_replaying) || !n_regs || max <= 0 ||      \
		    !(ns = synth(epfd, s, max < 64 ? max : 64)))                 \
			return call_real;                                        \
		return merge(ev, call_zero, max, s, ns);                         \
	} while (0)

int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	ilf_waits(timeout != 0);
	EPOLL_WRAP(REAL(epoll_wait)(epfd, ev, max, timeout), REAL(epoll_wait)(epfd, ev, max, 0));
}

int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout, const sigset_t *sm)
{
	ilf_waits(timeout != 0);
	EPOLL_WRAP(REAL(epoll_pwait)(epfd, ev, max, timeout, sm),
		   REAL(epoll_pwait)(epfd, ev, max, 0, sm));
}

int epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *t,
		 const sigset_t *sm)
{
	static const struct timespec zero;
	ilf_waits(!t || t->tv_sec || t->tv_nsec);
	EPOLL_WRAP(REAL(epoll_pwait2)(epfd, ev, max, t, sm),
		   REAL(epoll_pwait2)(epfd, ev, max, &zero, sm));
}

/* ---- poll, select ------------------------------------------------------- */

static unsigned poll_pending(const struct pollfd *f, nfds_t n)
{
	unsigned k = 0;
	for (nfds_t i = 0; i < n; i++)
		if ((f[i].events & (POLLIN | POLLRDNORM)) && ilf_replay_ready(f[i].fd))
			k++;
	return k;
}

static int poll_merge(struct pollfd *f, nfds_t n, int rc)
{
	if (rc < 0)
		return rc;
	for (nfds_t i = 0; i < n; i++) {
		if (!(f[i].events & (POLLIN | POLLRDNORM)) || !ilf_replay_ready(f[i].fd))
			continue;
		if (!f[i].revents)
			rc++;
		f[i].revents |= f[i].events & (POLLIN | POLLRDNORM);
	}
	return rc;
}

/* GCC 12 with -fsanitize=address warns that the pollfd array "may be used
 * uninitialized" when it is handed on to the real poll()/ppoll() (their
 * glibc declarations carry a read_write access attribute); the array is the
 * caller's, filled by it. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
int poll(struct pollfd *f, nfds_t n, int timeout)
{
	ilf_waits(timeout != 0);
	if (!atomic_load(&ilf_replaying) || !poll_pending(f, n))
		return REAL(poll)(f, n, timeout);
	return poll_merge(f, n, REAL(poll)(f, n, 0));
}

int __poll_chk(struct pollfd *f, nfds_t n, int timeout, size_t flen)
{
	if (n > flen / sizeof(*f))
		abort();
	return poll(f, n, timeout);
}

int ppoll(struct pollfd *f, nfds_t n, const struct timespec *t, const sigset_t *sm)
{
	static const struct timespec zero;

	ilf_waits(!t || t->tv_sec || t->tv_nsec);

	if (!atomic_load(&ilf_replaying) || !poll_pending(f, n))
		return REAL(ppoll)(f, n, t, sm);
	return poll_merge(f, n, REAL(ppoll)(f, n, &zero, sm));
}

#pragma GCC diagnostic pop

/* The read set's descriptors with replay pending, into `ready`. */
static int select_pending(int nfds, const fd_set *rd, fd_set *ready)
{
	int k = 0;

	FD_ZERO(ready);
	if (!rd || !atomic_load(&ilf_replaying))
		return 0;
	for (int fd = 0; fd < nfds && fd < FD_SETSIZE; fd++)
		if (FD_ISSET(fd, rd) && ilf_replay_ready(fd)) {
			FD_SET(fd, ready);
			k++;
		}
	return k;
}

static int select_merge(int nfds, fd_set *rd, const fd_set *ready, int rc)
{
	if (rc < 0)
		return rc;
	for (int fd = 0; fd < nfds && fd < FD_SETSIZE; fd++)
		if (FD_ISSET(fd, ready) && !FD_ISSET(fd, rd)) {
			FD_SET(fd, rd);
			rc++;
		}
	return rc;
}

int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	fd_set ready;
	struct timeval zero = {0, 0};

	ilf_waits(!tv || tv->tv_sec || tv->tv_usec);
	if (!select_pending(nfds, rd, &ready))
		return REAL(select)(nfds, rd, wr, ex, tv);
	return select_merge(nfds, rd, &ready, REAL(select)(nfds, rd, wr, ex, &zero));
}

int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *t,
	    const sigset_t *sm)
{
	fd_set ready;
	static const struct timespec zero;

	ilf_waits(!t || t->tv_sec || t->tv_nsec);
	if (!select_pending(nfds, rd, &ready))
		return REAL(pselect)(nfds, rd, wr, ex, t, sm);
	return select_merge(nfds, rd, &ready, REAL(pselect)(nfds, rd, wr, ex, &zero, sm));
}
