/* SPDX-License-Identifier: BSD-3-Clause
 *
 * libilftcp.so internals, shared by its three files:
 *   ilftcp.c       the logger session (fork-aware), accept/listen/close, replay source;
 *   ilftcp_io.c    the data calls: reads log their lengths and serve the replay,
 *                  writes wait for the output commit and discard what the client has;
 *   ilftcp_poll.c  readiness: a connection with replay pending is readable to
 *                  epoll, poll and select, as a socket with data queued would be.
 */
#ifndef INTERLINK_ILFTCP_H
#define INTERLINK_ILFTCP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <interlink/ftcp_proto.h>

#include "ilftcp_replay.h"

/* Nothing but the wrapped calls leaves the library. */
#pragma GCC visibility push(hidden)

#define ILF_MAX_FD 65536
#define ILF_UNACKED 4096 /* read lengths kept for re-sending after a logger restart */
#define ILF_OWED_STEP (16u << 20)

struct pfd {
	bool prot, announced;
	struct ftc_key key;
	uint32_t reads_sent, reads_acked;
	uint32_t lens[ILF_UNACKED]; /* by read index % ILF_UNACKED */
	/* replay: the replay file's lists, and the file its extents point
	 * into (a descriptor handed over by the logger: the replay file
	 * itself, which holds a copy of the logged bytes; ilftcp_replay.c) */
	struct ilf_replay rp;
	uint64_t out_skip; /* outstream bytes to discard */
	/* The replay was read with out_skip > 0 and the logger was told
	 * (FS_OWED, owed_told the amount): it is told again at every
	 * ILF_OWED_STEP of progress (the logger's deadline runs from the
	 * last word: a long catch-up is not a stuck one) and at 0. */
	bool owed_told;
	uint64_t owed_last;
	/* While output is owed the client's new bytes wait in the socket
	 * (ilf_hold_input): held, a read was refused meanwhile; rearm, the
	 * connection reads as ready once more when the hold ends (an
	 * edge-triggered server would not hear of those bytes again). */
	bool held, rearm;
	/* What the restarted server writes is compared with the crashed
	 * server's last output (tail_*, from the replay) where they overlap,
	 * whether discarded or sent (the client's TCP drops bytes it already
	 * has, and takes what follows them: a longer, different reply would
	 * reach it cut); out_pos counts the bytes written so far while it is
	 * below tail_end. */
	uint64_t out_pos, tail_end;
	uint32_t tail_len;
	uint32_t replay_calls; /* reads served from the replay (ILFTCP_TIMING) */
	uint8_t tail[FTC_OUT_TAIL];
	bool diverged;
	/* The client closed its side before the crash (FTC_REPLAY_PEER_FIN):
	 * once the replay is read every read returns 0 and the descriptor
	 * stays readable, as a socket that got a FIN does. */
	bool peer_fin;
};

extern struct pfd *ilf_fds[ILF_MAX_FD];
extern pthread_mutex_t ilf_mu;
/* Connections whose replay is not over: the readiness calls look only
 * while it is not zero. */
extern _Atomic int ilf_replaying;
/* Whether the server is ready for recovered connections: at once with
 * ILFTCP_READY=listen (the default), at its first blocking wait with
 * ILFTCP_READY=wait. Until then the listens are not announced. */
extern _Atomic bool ilf_ready;
/* ilftcp.c: the server is about to block waiting for events (a wait
 * call with a timeout other than zero, or accept on a blocking listener):
 * announce the listens. Cheap to call; only the first call does anything. */
void ilf_ready_now(void);
static inline void ilf_waits(bool blocks)
{
	if (__builtin_expect(!atomic_load_explicit(&ilf_ready, memory_order_relaxed), 0) && blocks)
		ilf_ready_now();
}

/* The real libc calls (resolved at load, or at first use by a library
 * constructor that runs before ours). */
struct ilf_real {
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
	ssize_t (*splice)(int, loff_t *, int, loff_t *, size_t, unsigned);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*close)(int);
	int (*listen)(int, int);
	int (*shutdown)(int, int);
	int (*epoll_ctl)(int, int, int, void *);
	int (*epoll_wait)(int, void *, int, int);
	int (*epoll_pwait)(int, void *, int, int, const void *);
	int (*epoll_pwait2)(int, void *, int, const void *, const void *);
	int (*poll)(void *, unsigned long, int);
	int (*ppoll)(void *, unsigned long, const void *, const void *);
	int (*select)(int, void *, void *, void *, void *);
	int (*pselect)(int, void *, void *, void *, const void *, const void *);
};
extern struct ilf_real ilf_r;
void ilf_resolve(void);
#define REAL(fn) (ilf_r.fn ? ilf_r.fn : (ilf_resolve(), ilf_r.fn))

static inline struct pfd *ilf_p(int fd)
{
	return fd >= 0 && fd < ILF_MAX_FD && ilf_fds[fd] && ilf_fds[fd]->prot ? ilf_fds[fd] : NULL;
}

/* Replay bytes, or the end of the client's stream, are waiting on this
 * descriptor (it must look readable). */
static inline bool ilf_replay_ready(int fd)
{
	struct pfd *p = ilf_p(fd);
	return p && ((p->rp.log_fd >= 0 && p->rp.log_left) || p->peer_fin || p->rearm);
}

/* Protection cannot be kept: better to stop than to let the client see
 * output the log cannot rebuild. */
_Noreturn void ilf_die(const char *what);
/* A call the shim does not cover, on a protected connection: stop with a
 * message naming it (docs/ft-tcp.md lists what is covered). */
_Noreturn void ilf_refuse(const char *call);

/* ilftcp.c, under ilf_mu */
void ilf_log_read(struct pfd *p, size_t n);
size_t ilf_before_write(struct pfd *p, size_t n);
/* Of n bytes written from outstream position pos on, those the crashed
 * server's tail covers: [*at, *at + the count returned). */
size_t ilf_tail_overlap(const struct pfd *p, uint64_t pos, size_t n, size_t *at);
/* Those bytes (b, n at position pos) against the tail: false, the logger
 * told and the connection marked diverged, when they differ. */
bool ilf_tail_match(struct pfd *p, uint64_t pos, const uint8_t *b, size_t n);
ssize_t ilf_replay_read(struct pfd *p, void *buf, size_t n, bool peek);
void ilf_announce_close(struct pfd *p);
void ilf_replay_end(struct pfd *p);
/* ilftcp.c, without ilf_mu: 0, read the socket; -1 with errno EAGAIN. */
int ilf_hold_input(struct pfd *p, int fd, int flags);

/* ilftcp_poll.c */
void ilf_poll_forget(int fd);

#pragma GCC visibility pop

#endif
