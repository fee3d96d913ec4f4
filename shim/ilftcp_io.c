/* SPDX-License-Identifier: BSD-3-Clause
 *
 * libilftcp.so: the data calls on a protected connection (docs/ft-tcp.md,
 * "What the shim covers").
 *
 * Reads (read, recv, recvfrom, readv, recvmsg, splice from the socket)
 * serve the replay first, then the socket, and log every length they
 * return. Writes (write, send, sendto, writev, sendmsg, sendfile, splice
 * to the socket) wait until every earlier read length is logged (output
 * commit) and discard what the client already has (G4/G5: a write that
 * straddles the boundary is cut and reported whole). Non-blocking sockets
 * work as they do without the shim: the wait is for the local logger, and
 * EAGAIN and short writes pass through. Calls that could move a protected
 * connection's bytes behind the shim's back (recvmmsg, sendmmsg, dup*)
 * stop the process with a message naming the call. After a replay, while
 * output the client already had is still owed, the socket's new bytes
 * are held back (ilf_hold_input, ilftcp.c).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ilftcp.h"

/* ---- reads ------------------------------------------------------------- */

static ssize_t from_replay(struct pfd *p, void *buf, size_t n, int flags)
{
	pthread_mutex_lock(&ilf_mu);
	ssize_t r = ilf_replay_read(p, buf, n, flags & MSG_PEEK);
	pthread_mutex_unlock(&ilf_mu);
	return r;
}

static ssize_t after_read(struct pfd *p, ssize_t r, int flags)
{
	if (r > 0 && !(flags & MSG_PEEK)) {
		pthread_mutex_lock(&ilf_mu);
		ilf_log_read(p, (size_t)r);
		pthread_mutex_unlock(&ilf_mu);
	}
	return r;
}

ssize_t read(int fd, void *buf, size_t n)
{
	struct pfd *p = ilf_p(fd);
	ssize_t r;

	if (!p)
		return REAL(read)(fd, buf, n);
	if ((r = from_replay(p, buf, n, 0)) >= 0)
		return r;
	if (ilf_hold_input(p, fd, 0))
		return -1;
	return after_read(p, REAL(read)(fd, buf, n), 0);
}

ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *a, socklen_t *al)
{
	struct pfd *p = ilf_p(fd);
	ssize_t r;

	if (!p)
		return REAL(recvfrom)(fd, buf, n, flags, a, al);
	if ((r = from_replay(p, buf, n, flags)) >= 0) {
		if (al)
			*al = 0;
		return r;
	}
	if (ilf_hold_input(p, fd, flags))
		return -1;
	return after_read(p, REAL(recvfrom)(fd, buf, n, flags, a, al), flags);
}

ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	if (!ilf_p(fd))
		return REAL(recv)(fd, buf, n, flags);
	return recvfrom(fd, buf, n, flags, NULL, NULL);
}

/* One logged read fills the vector in order, as one read would. */
static ssize_t replay_vec(struct pfd *p, const struct iovec *iov, size_t cnt, int flags)
{
	ssize_t tot = 0, r;

	if (flags & MSG_PEEK) /* a peek sees the first element's worth */
		return cnt ? from_replay(p, iov[0].iov_base, iov[0].iov_len, flags) : -1;
	pthread_mutex_lock(&ilf_mu);
	if (p->rp.log_fd < 0 && p->peer_fin) { /* the client's FIN: end of stream */
		pthread_mutex_unlock(&ilf_mu);
		return 0;
	}
	for (size_t i = 0; i < cnt && p->rp.log_fd >= 0; i++) {
		r = ilf_replay_read(p, iov[i].iov_base, iov[i].iov_len, false);
		if (r < 0)
			break;
		tot += r;
		if ((size_t)r < iov[i].iov_len || p->rp.part == 0)
			break;
	}
	pthread_mutex_unlock(&ilf_mu);
	return tot ? tot : -1;
}

ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	struct pfd *p = ilf_p(fd);
	ssize_t r;

	if (!p)
		return REAL(readv)(fd, iov, cnt);
	if (cnt > 0 && (r = replay_vec(p, iov, (size_t)cnt, 0)) >= 0)
		return r;
	if (ilf_hold_input(p, fd, 0))
		return -1;
	return after_read(p, REAL(readv)(fd, iov, cnt), 0);
}

ssize_t recvmsg(int fd, struct msghdr *mh, int flags)
{
	struct pfd *p = ilf_p(fd);
	ssize_t r;

	if (!p)
		return REAL(recvmsg)(fd, mh, flags);
	if ((r = replay_vec(p, mh->msg_iov, mh->msg_iovlen, flags)) >= 0) {
		mh->msg_namelen = 0;
		mh->msg_controllen = 0;
		mh->msg_flags = 0;
		return r;
	}
	if (ilf_hold_input(p, fd, flags))
		return -1;
	return after_read(p, REAL(recvmsg)(fd, mh, flags), flags);
}

/* Fortified builds (_FORTIFY_SOURCE) call these when the buffer's size is
 * known at compile time. */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		abort();
	return read(fd, buf, n);
}

ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (n > buflen)
		abort();
	return recv(fd, buf, n, flags);
}

ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
		       struct sockaddr *a, socklen_t *al)
{
	if (n > buflen)
		abort();
	return recvfrom(fd, buf, n, flags, a, al);
}

/* ---- writes ------------------------------------------------------------ */

/* Where a write's bytes are, so that those discarded can be compared with
 * the crashed server's last output: a buffer, a vector, or a file at an
 * offset (sendfile). */
struct src {
	const uint8_t *buf;
	const struct iovec *iov;
	size_t cnt;
	int fd;
	off_t off;
};

/* Bytes [at, at + len) of the write into dst; false if they cannot be had. */
static bool src_copy(const struct src *s, size_t at, uint8_t *dst, size_t len)
{
	if (s->buf) {
		memcpy(dst, s->buf + at, len);
		return true;
	}
	if (s->iov) {
		for (size_t i = 0; i < s->cnt && len; i++) {
			size_t l = s->iov[i].iov_len;
			if (at >= l) {
				at -= l;
				continue;
			}
			size_t k = l - at < len ? l - at : len;
			memcpy(dst, (const uint8_t *)s->iov[i].iov_base + at, k);
			dst += k;
			len -= k;
			at = 0;
		}
		return len == 0;
	}
	return s->fd >= 0 && pread(s->fd, dst, len, s->off + (off_t)at) == (ssize_t)len;
}

/* Output commit, then how many leading bytes to discard; all n when the
 * restarted server's output is not the crashed one's (the connection is
 * being reset: nothing more of it may reach the client). */
static size_t commit(struct pfd *p, size_t n, const struct src *s)
{
	pthread_mutex_lock(&ilf_mu);
	size_t skip = ilf_before_write(p, n), at = 0, len;
	uint8_t b[FTC_OUT_TAIL];

	if (!p->diverged && (len = ilf_tail_overlap(p, p->out_pos, n, &at)) &&
	    src_copy(s, at, b, len))
		ilf_tail_match(p, p->out_pos + at, b, len);
	if (p->diverged)
		skip = n;
	else if (p->out_pos < p->tail_end)
		p->out_pos += skip;
	pthread_mutex_unlock(&ilf_mu);
	return skip;
}

/* r bytes of a write went to the socket: the position moves on. */
static ssize_t sent(struct pfd *p, ssize_t r)
{
	if (r > 0 && p->out_pos < p->tail_end) {
		pthread_mutex_lock(&ilf_mu);
		p->out_pos += (uint64_t)r;
		pthread_mutex_unlock(&ilf_mu);
	}
	return r;
}

/* r bytes went out after skip were discarded: what the caller is told. */
static ssize_t with_skip(ssize_t r, size_t skip)
{
	return r < 0 ? (skip ? (ssize_t)skip : r) : r + (ssize_t)skip;
}

ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *a,
	       socklen_t al)
{
	struct pfd *p = ilf_p(fd);

	if (!p)
		return REAL(sendto)(fd, buf, n, flags, a, al);
	size_t skip = commit(p, n, &(struct src){.buf = buf, .fd = -1});
	if (skip == n)
		return (ssize_t)n;
	return with_skip(sent(p, REAL(sendto)(fd, (const uint8_t *)buf + skip, n - skip, flags,
					       a, al)),
			 skip);
}

ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	if (!ilf_p(fd))
		return REAL(send)(fd, buf, n, flags);
	return sendto(fd, buf, n, flags, NULL, 0);
}

ssize_t write(int fd, const void *buf, size_t n)
{
	if (!ilf_p(fd))
		return REAL(write)(fd, buf, n);
	return sendto(fd, buf, n, MSG_NOSIGNAL, NULL, 0);
}

/* A vector write: output commit, and the discarded prefix cut off
 * (possibly in the middle of one element, G4). out gets the vector to
 * send (iov itself when nothing is cut; else *heap, to be freed). */
static size_t vec_commit(struct pfd *p, const struct iovec *iov, size_t cnt,
			 struct iovec **out, size_t *ocnt, struct iovec **heap, size_t *total)
{
	size_t tot = 0, skip, s, k = 0;

	for (size_t i = 0; i < cnt; i++)
		tot += iov[i].iov_len;
	*total = tot;
	*heap = NULL;
	*out = (struct iovec *)iov;
	*ocnt = cnt;
	skip = commit(p, tot, &(struct src){.iov = iov, .cnt = cnt, .fd = -1});
	if (!skip || skip == tot)
		return skip;
	struct iovec *v = malloc(sizeof(*v) * cnt);
	if (!v)
		ilf_die("malloc");
	s = skip;
	for (size_t i = 0; i < cnt; i++) {
		if (s >= iov[i].iov_len) {
			s -= iov[i].iov_len;
			continue;
		}
		v[k].iov_base = (uint8_t *)iov[i].iov_base + s;
		v[k++].iov_len = iov[i].iov_len - s;
		s = 0;
	}
	*heap = *out = v;
	*ocnt = k;
	return skip;
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	struct pfd *p = ilf_p(fd);
	struct iovec *v, *heap;
	size_t n, total, skip;

	if (!p || cnt <= 0)
		return REAL(writev)(fd, iov, cnt);
	skip = vec_commit(p, iov, (size_t)cnt, &v, &n, &heap, &total);
	if (skip == total)
		return (ssize_t)total;
	ssize_t r = with_skip(sent(p, REAL(writev)(fd, v, (int)n)), skip);
	free(heap);
	return r;
}

ssize_t sendmsg(int fd, const struct msghdr *mh, int flags)
{
	struct pfd *p = ilf_p(fd);
	struct iovec *v, *heap;
	size_t n, total, skip;

	if (!p)
		return REAL(sendmsg)(fd, mh, flags);
	skip = vec_commit(p, mh->msg_iov, mh->msg_iovlen, &v, &n, &heap, &total);
	if (skip == total)
		return (ssize_t)total;
	struct msghdr m2 = *mh;
	m2.msg_iov = v;
	m2.msg_iovlen = n;
	ssize_t r = with_skip(sent(p, REAL(sendmsg)(fd, &m2, flags)), skip);
	free(heap);
	return r;
}

/* nginx's `sendfile on`: the file's bytes go to the socket without passing
 * through the process. The discarded prefix is skipped in the file. Both
 * names are defined: with _FILE_OFFSET_BITS=64 the headers call sendfile64,
 * programs built without it call sendfile (the same call on 64-bit). */
static ssize_t do_sendfile(int out, int in, off_t *off, size_t n)
{
	struct pfd *p = ilf_p(out);

	if (!p)
		return REAL(sendfile)(out, in, off, n);
	size_t skip = commit(p, n, &(struct src){.fd = in,
						 .off = off ? *off : lseek(in, 0, SEEK_CUR)});
	if (skip) {
		if (off)
			*off += (off_t)skip;
		else if (lseek(in, (off_t)skip, SEEK_CUR) < 0)
			ilf_die("sendfile: skipping what the client has");
	}
	if (skip == n)
		return (ssize_t)n;
	return with_skip(sent(p, REAL(sendfile)(out, in, off, n - skip)), skip);
}

ssize_t ilf_sendfile(int out, int in, off_t *off, size_t n) __asm__("sendfile");
ssize_t ilf_sendfile64(int out, int in, off_t *off, size_t n) __asm__("sendfile64");

ssize_t ilf_sendfile(int out, int in, off_t *off, size_t n)
{
	return do_sendfile(out, in, off, n);
}

ssize_t ilf_sendfile64(int out, int in, off_t *off, size_t n)
{
	return do_sendfile(out, in, off, n);
}

/* splice: to a protected socket (from a pipe: the discarded prefix is
 * read out of the pipe and dropped), or from one (to a pipe: the replay
 * is written into the pipe, then consumed by what the pipe took). */
ssize_t splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t n, unsigned flags)
{
	struct pfd *po = ilf_p(out), *pi = ilf_p(in);
	uint8_t tmp[65536];
	ssize_t r;

	if (po) {
		pthread_mutex_lock(&ilf_mu);
		ilf_before_write(po, 0); /* output commit only */
		/* diverged: whatever it writes now is dropped (commit) */
		uint64_t left = po->diverged ? UINT64_MAX : po->out_skip;
		pthread_mutex_unlock(&ilf_mu);
		if (left) {
			size_t k = n < sizeof(tmp) ? n : sizeof(tmp);
			if (k > left)
				k = (size_t)left;
			r = REAL(read)(in, tmp, k);
			if (r > 0)
				commit(po, (size_t)r, &(struct src){.buf = tmp, .fd = -1});
			return r;
		}
		/* The pipe's bytes go on unseen: not compared with the tail
		 * (docs/ft-tcp.md), but counted. */
		return sent(po, REAL(splice)(in, off_in, out, off_out, n, flags));
	}
	if (pi) {
		size_t k = n < sizeof(tmp) ? n : sizeof(tmp);
		if ((r = from_replay(pi, tmp, k, MSG_PEEK)) >= 0) {
			ssize_t w = REAL(write)(out, tmp, (size_t)r);
			if (w > 0)
				from_replay(pi, tmp, (size_t)w, 0);
			return w;
		}
		if (ilf_hold_input(pi, in, (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0))
			return -1;
		return after_read(pi, REAL(splice)(in, off_in, out, off_out, n, flags), 0);
	}
	return REAL(splice)(in, off_in, out, off_out, n, flags);
}

/* ---- calls the shim does not cover ------------------------------------- */

int recvmmsg(int fd, struct mmsghdr *v, unsigned n, int flags, struct timespec *t)
{
	if (ilf_p(fd))
		ilf_refuse("recvmmsg");
	int (*real)(int, struct mmsghdr *, unsigned, int, struct timespec *) =
		(__typeof__(real))dlsym(RTLD_NEXT, "recvmmsg");
	return real(fd, v, n, flags, t);
}

int sendmmsg(int fd, struct mmsghdr *v, unsigned n, int flags)
{
	if (ilf_p(fd))
		ilf_refuse("sendmmsg");
	int (*real)(int, struct mmsghdr *, unsigned, int) =
		(__typeof__(real))dlsym(RTLD_NEXT, "sendmmsg");
	return real(fd, v, n, flags);
}

/* A second descriptor for a protected connection would read and write
 * behind the shim; one dup2'd over it would close it unannounced. */
int dup(int fd)
{
	if (ilf_p(fd))
		ilf_refuse("dup");
	int (*real)(int) = (__typeof__(real))dlsym(RTLD_NEXT, "dup");
	return real(fd);
}

int dup2(int fd, int to)
{
	if (ilf_p(fd) || (fd != to && ilf_p(to)))
		ilf_refuse("dup2");
	int (*real)(int, int) = (__typeof__(real))dlsym(RTLD_NEXT, "dup2");
	return real(fd, to);
}

int dup3(int fd, int to, int flags)
{
	if (ilf_p(fd) || ilf_p(to))
		ilf_refuse("dup3");
	int (*real)(int, int, int) = (__typeof__(real))dlsym(RTLD_NEXT, "dup3");
	return real(fd, to, flags);
}
