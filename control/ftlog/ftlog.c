/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The FT-TCP logger, a thread of interlink-control (control/main.c starts
 * it with --ftcp-dir). One io_uring loop, no busy polling:
 *
 *   1. drain the shim sessions (read lengths, accepts, closes) and the up
 *      ring (client segments, ISNs, crash markers) into the shared log's
 *      write buffer (seglog.c: one log for every connection);
 *   2. write the buffer at the log's end (one io_uring WRITE), then, by
 *      durability mode, fdatasync it (sync: every round; group: when
 *      something waits, else every group_ms; none: never): one fdatasync
 *      per round whatever the number of connections;
 *   3. publish what is durable: cumulative FD_STABLE to the data plane,
 *      cumulative FS_READ_ACK to each shim;
 *   4. sleep on the uring (wake datagram from the data plane, shim
 *      sockets, replay workers, the stop eventfd, a timer) only if the
 *      ring is still empty.
 *
 * Its own thread and uring rather than more events on the membership loop:
 * an fsync per batch (durability sync) must not delay heartbeats, failure
 * detection or watermarks. Replay files are built by short-lived worker
 * threads, so a recovery neither delays the SYN (its ISN and server_seq are
 * known at once) nor stops the logging of other connections.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <interlink/ftcp_ring.h>
#include <interlink/json.h>

#include "ftlog.h"

enum { EV_WAKE = 1, EV_LISTEN, EV_STOP, EV_TIMER, EV_SESS, EV_REPLAY };
#define EV(t, i) ((uint64_t)(t) << 32 | (uint32_t)(i))

#define SESS_PORTS 8

struct sess {
	int fd;
	int pid;
	uint8_t n_ports;
	uint16_t port[SESS_PORTS];    /* listening, host order */
	uint16_t backlog[SESS_PORTS]; /* their listen backlogs */
	uint8_t buf[4096];
	uint32_t have;
	/* Read acknowledgements of one pass, sent together: one send (and
	 * one wake-up of the shim) per pass instead of one per connection. */
	struct ftc_shim_msg *ackq;
	uint32_t n_ack, cap_ack;
};

/* A fabricated connection not accepted this long after FD_RECOVER is
 * given up (the client is reset rather than left waiting for ever). */
#define RECOVER_TIMEOUT_NS (60ull * 1000000000ull)

/* A replay file being built by a worker thread. */
struct rjob {
	struct ftl_replay j;
	struct ftlog *L;
	struct rjob *next; /* on L->done once built */
};

struct ftlog {
	struct ftl l;
	struct io_uring ring;
	bool ring_ok;
	struct ftc_ring *rh;
	int wake_fd, listen_fd, stop_fd;
	int done_fd;               /* eventfd: a replay worker finished */
	pthread_mutex_t done_mu;
	struct rjob *done;         /* finished jobs, under done_mu */
	unsigned jobs_running;
	struct sess sess[FTL_MAX_SESS];
	bool quit;
	bool recover_again; /* a crashed connection waits for its bytes to be durable */
	bool round_failed;  /* the last round's fdatasync failed: nothing acknowledged */
	uint64_t next_group_ns;
	struct __kernel_timespec ts;
	char wake_path[300], sock_path[300];
	uint64_t next_stats;
	const char *stats_path;
	uint64_t catchup_ns; /* --ftcp-catchup-ms */
	FILE *trace; /* --trace: every FD_STABLE published (tests check acks against it) */
};

static struct io_uring_sqe *sqe(struct ftlog *L)
{
	struct io_uring_sqe *s = io_uring_get_sqe(&L->ring);
	if (!s) {
		io_uring_submit(&L->ring);
		s = io_uring_get_sqe(&L->ring);
	}
	return s;
}

static void arm_poll(struct ftlog *L, int fd, uint64_t ev)
{
	struct io_uring_sqe *s = sqe(L);
	io_uring_prep_poll_add(s, fd, POLLIN);
	io_uring_sqe_set_data64(s, ev);
}

static void sess_send(struct ftlog *L, int i, const void *m, size_t len)
{
	/* Small messages on a local socket; a shim that stops reading is
	 * a dead shim, so a full buffer ends the session (MSG_DONTWAIT). */
	if (L->sess[i].fd >= 0 &&
	    send(L->sess[i].fd, m, len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)len) {
		shutdown(L->sess[i].fd, SHUT_RDWR);
	}
}

static void down_send(struct ftlog *L, uint16_t type, const struct ftc_key *k, uint32_t a,
		      uint32_t b)
{
	struct ftc_down d = {.type = type, .key = *k, .a = a, .b = b};
	/* Crash and recover orders must not be lost: wait for room (the data
	 * plane drains this ring on every poll). */
	for (int i = 0; il_shm_free(&L->rh->tx) == 0; i++) {
		L->l.st.down_full++;
		if (i > 100000)
			return;
		usleep(10);
	}
	il_shm_send(&L->rh->tx, &d, 1);
}

static void *replay_worker(void *arg)
{
	struct rjob *jb = arg;
	struct ftlog *L = jb->L;
	uint64_t one = 1;

	ftl_replay_build(&jb->j);
	pthread_mutex_lock(&L->done_mu);
	jb->next = L->done;
	L->done = jb;
	pthread_mutex_unlock(&L->done_mu);
	if (write(L->done_fd, &one, sizeof(one)) != sizeof(one))
		perror("ftlog: replay wake-up");
	return NULL;
}

static void abandon(struct ftlog *L, struct ftl_conn *c, uint32_t why)
{
	char p[512];

	static const char *const text[] = {
		[FTC_AB_TIMEOUT] = "the restarted server did not accept it in time",
		[FTC_AB_REPLAY] = "no replay file",
		[FTC_AB_DIVERGED] = "the restarted server did not write again what the client "
				    "had (its re-execution differs from the crashed one's: state the "
				    "replayed connections do not rebuild, or a server not ready yet?); "
				    "the client is reset",
	};

	down_send(L, FD_ABANDON, &c->key, why, 0);
	if (why == FTC_AB_TIMEOUT)
		L->l.st.recover_abandoned_timeout++;
	else if (why == FTC_AB_DIVERGED)
		L->l.st.recover_abandoned_diverged++;
	else
		L->l.st.recover_abandoned_replay++;
	if (why == FTC_AB_DIVERGED && c->differs_at)
		fprintf(stderr, "ftlog: connection to port %u from port %u: the restarted server "
			"wrote other bytes than the client had, from output byte %llu on\n",
			ntohs(c->key.sport), ntohs(c->key.cport),
			(unsigned long long)(c->differs_at - 1));
	else if (why == FTC_AB_DIVERGED)
		fprintf(stderr, "ftlog: connection to port %u from port %u: %llu bytes still owed "
			"%llu ms after its replay\n", ntohs(c->key.sport), ntohs(c->key.cport),
			(unsigned long long)c->owed,
			(unsigned long long)(L->catchup_ns / 1000000u));
	fprintf(stderr, "ftlog: connection to port %u from port %u not recovered: %s\n",
		ntohs(c->key.sport), ntohs(c->key.cport), text[why]);
	ftl_path(&L->l, &c->key, "replay", p, sizeof(p));
	unlink(p);
	ftl_conn_end(&L->l, c, FTC_END_ABANDONED);
}

/* The replay goes to the shim as descriptors: the replay file (then
 * unlinked: nothing is left behind), twice, as the replay and as the file
 * its extent points into (ftcp_proto.h): a server that dropped its
 * privileges (nginx's workers) reads it without any right to the log
 * directory, and never sees the shared log's other connections. */
static void send_replay(struct ftlog *L, int i, struct ftl_conn *c)
{
	char rp[512];
	struct ftc_shim_msg p = {.type = FS_REPLAY, .key = c->key, .a = 1,
				 .flags = c->replay_fin ? FTC_REPLAY_PEER_FIN : 0};
	int fds[2];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(fds))];
	} cb;
	struct iovec v = {.iov_base = &p, .iov_len = sizeof(p)};
	struct msghdr mh = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = cb.b,
			    .msg_controllen = sizeof(cb.b)};

	ftl_path(&L->l, &c->key, "replay", rp, sizeof(rp));
	fds[0] = fds[1] = open(rp, O_RDONLY | O_CLOEXEC);
	unlink(rp);
	if (fds[0] < 0) {
		fprintf(stderr, "ftlog: %s: %s\n", rp, strerror(errno));
		p.a = 0;
		sess_send(L, i, &p, sizeof(p));
		abandon(L, c, FTC_AB_REPLAY);
		return;
	}
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	if (sendmsg(L->sess[i].fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(p))
		shutdown(L->sess[i].fd, SHUT_RDWR); /* a dead shim: see sess_send */
	close(fds[0]);
	c->state = FC_LIVE;
	c->replay = FTL_RP_NONE;
	c->replay_waiter = -1;
}

/* The SYN goes down at once: its ISN and server_seq are in memory. The
 * replay file is built meanwhile by a worker; an accept that comes first
 * waits for it (replay_done). */
static void recover(struct ftlog *L, struct ftl_conn *c)
{
	uint32_t isn, sseq;
	struct rjob *jb = calloc(1, sizeof(*jb));
	pthread_t t;
	pthread_attr_t at;

	if (!jb) {
		fprintf(stderr, "ftlog: out of memory for a replay\n");
		return;
	}
	jb->L = L;
	if (ftl_replay_prepare(&L->l, c, &jb->j)) {
		free(jb);
		fprintf(stderr, "ftlog: out of memory for a replay\n");
		return;
	}
	ftl_replay_params(c, &isn, &sseq);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	/* The normal policy, whatever the logger's (--ftcp-rt-priority): a
	 * replay copies up to the whole log and must not hold a core the
	 * servers share at real-time priority. */
	struct sched_param sp = {.sched_priority = 0};
	pthread_attr_setinheritsched(&at, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&at, SCHED_OTHER);
	pthread_attr_setschedparam(&at, &sp);
	if (pthread_create(&t, &at, replay_worker, jb)) {
		pthread_attr_destroy(&at);
		/* No thread to be had: build it here, late but correct. */
		jb->next = NULL;
		ftl_replay_build(&jb->j);
		pthread_mutex_lock(&L->done_mu);
		jb->next = L->done;
		L->done = jb;
		pthread_mutex_unlock(&L->done_mu);
		uint64_t one = 1;
		if (write(L->done_fd, &one, sizeof(one)) != sizeof(one))
			perror("ftlog: replay wake-up");
	} else {
		pthread_attr_destroy(&at);
	}
	L->jobs_running++;
	c->state = FC_RECOVERING;
	c->claimed = false;
	c->replay = FTL_RP_BUILDING;
	c->replay_waiter = -1;
	c->recover_ns = ftl_now_ns();
	down_send(L, FD_RECOVER, &c->key, isn, sseq);
	if (L->l.verbose)
		fprintf(stderr, "ftlog: recovering %s (fab ISN %u, server_seq %u)\n",
			jb->j.replay_path, isn, sseq);
}

static void crash_conn(struct ftlog *L, struct ftl_conn *c);

/* Finished replay builds: the connection's read state follows the file,
 * and a shim already waiting in accept() gets it. */
static void replay_done(struct ftlog *L)
{
	struct rjob *jb;

	pthread_mutex_lock(&L->done_mu);
	jb = L->done;
	L->done = NULL;
	pthread_mutex_unlock(&L->done_mu);
	while (jb) {
		struct rjob *next = jb->next;
		struct ftl_conn *c = ftl_conn_find(&L->l, &jb->j.key);

		L->jobs_running--;
		if (c && c->state == FC_RECOVERING && c->replay == FTL_RP_BUILDING) {
			ftl_replay_done(&L->l, c, &jb->j);
			if (jb->j.rc) {
				fprintf(stderr, "ftlog: cannot build the replay file %s\n",
					jb->j.replay_path);
				L->l.st.replay_failures++;
				c->replay = FTL_RP_FAILED;
			} else {
				c->replay = FTL_RP_READY;
			}
			if (L->l.verbose)
				fprintf(stderr, "ftlog: replay %s: %u bytes, %u reads in %lu us\n",
					jb->j.replay_path, jb->j.data_len, jb->j.n_reads,
					(unsigned long)jb->j.build_us);
			int w = c->replay_waiter;
			if (w >= 0 && L->sess[w].fd >= 0 && c->owner == w) {
				if (c->replay == FTL_RP_READY) {
					send_replay(L, w, c);
				} else {
					/* No replay: the shim cannot rebuild the server's state. */
					struct ftc_shim_msg p = {.type = FS_REPLAY, .key = c->key};
					sess_send(L, w, &p, sizeof(p));
					abandon(L, c, FTC_AB_REPLAY);
				}
			} else if (c->replay == FTL_RP_FAILED && w < 0) {
				abandon(L, c, FTC_AB_REPLAY);
			} else if (w >= 0) {
				/* The restarted server died while it waited. */
				c->state = FC_LIVE;
				c->replay = FTL_RP_NONE;
				c->replay_waiter = -1;
				crash_conn(L, c);
			}
		} else {
			ftl_replay_done(&L->l, NULL, &jb->j);
			unlink(jb->j.replay_path);
		}
		free(jb);
		jb = next;
	}
}

/* How many fabricated connections may wait in the port's accept queue at
 * once: half the largest backlog a listener reported (Linux queues
 * backlog + 1; the other half is left to new clients), 1 to 64. 0: nobody
 * listens on it (a session other than `except`). */
static uint32_t port_window(struct ftlog *L, uint16_t port_n, int except)
{
	uint32_t bl = 0;

	for (int i = 0; i < FTL_MAX_SESS; i++) {
		const struct sess *s = &L->sess[i];
		if (s->fd < 0 || i == except)
			continue;
		for (unsigned k = 0; k < s->n_ports; k++)
			if (htons(s->port[k]) == port_n && s->backlog[k] + 1u > bl)
				bl = s->backlog[k] + 1u;
	}
	if (!bl)
		return 0;
	bl /= 2;
	return bl < 1 ? 1 : bl > 64 ? 64 : bl;
}

/* Recover the port's crashed connections, a window at a time: each
 * accept of a fabricated connection lets the next one go (the accept
 * queue never overflows, which would drop the handshake's last ACK). */
static void try_recover_port(struct ftlog *L, uint16_t port_n)
{
	struct ftl_conn *c;
	uint32_t win = port_window(L, port_n, -1), inflight = 0;

	if (!win)
		return;
	FTL_FOR_EACH_LIVE(&L->l, c)
		if (c->state == FC_RECOVERING && !c->claimed && c->key.sport == port_n)
			inflight++;
	FTL_FOR_EACH_LIVE(&L->l, c) {
		if (c->state != FC_FROZEN || c->key.sport != port_n)
			continue;
		if (c->log_end > L->l.written || c->contig_durable != c->contig) {
			/* Bytes the dead server got are logged but not yet
			 * durable: the fabricated SYN's ISN must come after them
			 * (they are replayed), or the client would have to
			 * resend them, at its next RTO. Next loop pass. */
			L->recover_again = true;
			continue;
		}
		if (inflight >= win) {
			L->l.st.recover_paced++;
			break;
		}
		recover(L, c);
		inflight++;
	}
}

static void crash_conn(struct ftlog *L, struct ftl_conn *c)
{
	c->owner = -1;
	if (c->closed || c->state != FC_LIVE)
		return;
	c->state = FC_CRASHED;
	L->l.st.crashes++;
	down_send(L, FD_CRASH, &c->key, 0, 0);
}

/* ---- the up ring ------------------------------------------------------ */

static unsigned drain_ring(struct ftlog *L)
{
	const struct ftc_rec *r;
	uint32_t len;
	unsigned n = 0;
	int got;

	while ((got = il_shm_rec_next(&L->rh->rx, (const void **)&r, &len)) != 0) {
		struct ftl_conn *c;

		if (got < 0) {
			fprintf(stderr, "ftlog: corrupt ring record (len %u): resynchronising\n",
				len);
			break;
		}
		n++;
		if (len < sizeof(*r))
			continue; /* not a record of ours */
		c = ftl_conn_find(&L->l, &r->key);
		if (r->type == FR_SYN) {
			if (c && c->have_syn && c->client_isn == r->seq)
				continue; /* retransmitted SYN */
			if (c)
				ftl_conn_free(&L->l, c); /* its SYN in the log supersedes it */
			c = ftl_conn_new(&L->l, &r->key);
			if (!c)
				continue;
		}
		if (!c)
			continue;
		if (r->type == FR_CLOSED) {
			/* A client that gave up during the outage ends it too. */
			if (c->state != FC_LIVE && !c->closed)
				L->l.st.recover_client_closed++;
			if (!c->closed) {
				/* Its tombstone; it is freed once that is written. */
				struct ftc_rec t = *r;
				t.len = sizeof(t);
				t.plen = 0;
				t.flags = FTC_END_CLOSED;
				ftl_apply(&L->l, c, &t, true);
			}
			c->closed = true;
			continue;
		}
		if (r->type == FR_DATA)
			L->l.st.bytes_logged += r->plen;
		ftl_apply(&L->l, c, r, true);
		if (r->type == FR_CRASHED && c->state == FC_FROZEN)
			try_recover_port(L, c->key.sport);
	}
	il_shm_release(&L->rh->rx);
	return n;
}

/* ---- writing and publishing ------------------------------------------- */

/* One round: the buffer written at the head's end and, when the round
 * syncs, an fdatasync of each segment written since the last synced round
 * (the head; after a roll also the sealed one): one fdatasync per round,
 * not one per connection, so a round's cost no longer grows with the
 * connections in it. Both calls are plain system calls, not io_uring
 * operations: the loop waits for them anyway, and io_uring hands a
 * buffered write to an ext4 file to a worker thread (20-36 us a round
 * here against 5-11 us for pwrite, docs/ft-tcp.md), a context switch on
 * the core the servers share. A segment whose fdatasync fails leaves the
 * round unacknowledged; it is tried again next round. */
static void commit(struct ftlog *L, bool sync)
{
	struct ftl *l = &L->l;

	if (!l->n_segs)
		return;
	L->round_failed = false;
	if (l->wlen) {
		struct ftl_seg *h = &l->segs[l->n_segs - 1];
		for (uint32_t done = 0; done < l->wlen;) {
			ssize_t w = pwrite(h->fd, l->wbuf + done, l->wlen - done,
					   (off_t)(h->len + done));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				/* Nothing written may be acknowledged, nor can the
				 * log go on past a hole: stop (a restart rebuilds
				 * from what is there). */
				perror("ftlog: write");
				exit(1);
			}
			done += (uint32_t)w;
		}
		h->len += l->wlen;
		if (h->file_len < h->len)
			h->file_len = h->len;
		l->written += l->wlen;
		l->st.writes++;
		l->wlen = 0;
		h->dirty = true;
	}
	if (!sync)
		return;
	bool counted = false;
	uint64_t t0 = ftl_now_ns();
	for (uint32_t i = 0; i < l->n_segs; i++) {
		struct ftl_seg *g = &l->segs[i];
		if (!g->dirty)
			continue;
		if (!counted) {
			l->st.sync_rounds++; /* a round with something to sync */
			counted = true;
		}
		if (fdatasync(g->fd)) {
			perror("ftlog: fdatasync");
			L->round_failed = true;
			continue;
		}
		g->dirty = false;
		l->st.fsyncs++;
	}
	if (counted)
		l->st.sync_us += (ftl_now_ns() - t0) / 1000;
}

static bool any_unsynced(struct ftlog *L)
{
	if (L->l.wlen)
		return true;
	for (uint32_t i = 0; i < L->l.n_segs; i++)
		if (L->l.segs[i].dirty)
			return true;
	return false;
}

/* Does anything wait for bytes not yet durable? Then `group` syncs at
 * once instead of at the end of its interval: a shim's read lengths
 * arrive only when an output commit (a write, a close) needs them, the
 * stage holds a SYN-ACK until both ISNs are durable, and a crashed
 * connection is recovered only once its logged bytes are. */
static bool someone_waits(struct ftlog *L)
{
	struct ftl_conn *c;

	FTL_FOR_EACH_LIVE(&L->l, c) {
		if (c->reads != c->reads_durable || (c->have_synack && !c->isns_durable) ||
		    (c->state == FC_FROZEN && c->contig != c->contig_durable))
			return true;
	}
	return false;
}

/* What is on disk (and synced, by mode) becomes what we acknowledge. */
static void mark_durable(struct ftlog *L, bool synced)
{
	struct ftl_conn *c;

	if ((!synced && L->l.durability != FTL_NONE) || L->round_failed || L->l.wlen)
		return;
	L->l.durable = L->l.written;
	FTL_FOR_EACH_LIVE(&L->l, c)
		ftl_conn_durable(c);
}

static bool ack_queue(struct ftlog *L, int i, const struct ftc_shim_msg *m)
{
	struct sess *se = &L->sess[i];

	if (se->n_ack == se->cap_ack) {
		uint32_t cap = se->cap_ack ? 2 * se->cap_ack : 64;
		struct ftc_shim_msg *q = realloc(se->ackq, cap * sizeof(*q));
		if (!q)
			return false;
		se->ackq = q;
		se->cap_ack = cap;
	}
	se->ackq[se->n_ack++] = *m;
	return true;
}

static void ack_flush(struct ftlog *L)
{
	for (int i = 0; i < FTL_MAX_SESS; i++) {
		struct sess *se = &L->sess[i];
		if (!se->n_ack)
			continue;
		sess_send(L, i, se->ackq, se->n_ack * sizeof(*se->ackq));
		se->n_ack = 0;
	}
}

static void publish(struct ftlog *L)
{
	if (L->l.delay_us)
		usleep(L->l.delay_us); /* injected logger slowness (tests, benchmarks) */
	struct ftl_conn *c;

	FTL_FOR_EACH_LIVE(&L->l, c) {
		if (c->have_syn && (c->contig_durable != c->contig_sent ||
				    c->isns_durable != c->isns_sent)) {
			struct ftc_down d = {.type = FD_STABLE, .key = c->key,
					     .flags = c->isns_durable ? FD_F_ISNS : 0,
					     .a = c->contig_durable};
			/* The trace's time is taken before the data plane can
			 * see the value: it may act on it microseconds after
			 * the send, before a time taken after it (the capture
			 * check compares the two). */
			struct timespec ts = {0, 0};
			if (L->trace)
				clock_gettime(CLOCK_REALTIME, &ts);
			if (il_shm_send(&L->rh->tx, &d, 1) == 1) {
				c->contig_sent = c->contig_durable;
				c->isns_sent = c->isns_durable;
				L->l.st.acks_down++;
				if (L->trace) {
					fprintf(L->trace, "%u %u %lld.%09ld\n", ntohs(c->key.cport),
						c->contig_durable, (long long)ts.tv_sec, ts.tv_nsec);
					fflush(L->trace);
				}
			} else {
				L->l.st.down_full++;
			}
		}
		/* G3: a read length is acknowledged only once the bytes it
		 * covers are logged too. */
		if (c->owner >= 0 && c->reads_acked < c->reads_durable &&
		    c->read_total_durable <= (uint32_t)(c->contig_durable - c->client_isn - 1)) {
			struct ftc_shim_msg m = {.type = FS_READ_ACK, .key = c->key,
						 .a = c->reads_durable};
			if (ack_queue(L, c->owner, &m)) /* else next pass */
				c->reads_acked = c->reads_durable;
		}
		if (c->closed && c->log_end <= L->l.written) {
			/* Normal end: its tombstone is written; its segments go
			 * once nobody else has records in them (compaction). */
			char p[512];
			if (c->replay != FTL_RP_NONE) {
				ftl_path(&L->l, &c->key, "replay", p, sizeof(p));
				unlink(p);
			}
			L->l.st.compactions++;
			ftl_conn_free(&L->l, c);
		}
	}
	ack_flush(L);
}

/* ---- shim sessions ------------------------------------------------------ */

static void sess_close(struct ftlog *L, int i)
{
	struct sess *s = &L->sess[i];

	if (s->fd < 0)
		return;
	close(s->fd);
	s->fd = -1;
	s->n_ack = 0;
	/* The server process is gone (SIGKILL included: the kernel closed
	 * this socket): every connection it owned is a crashed one; so is a
	 * fabricated one it was listening for and had not accepted (if no
	 * other process listens there), to be recovered afresh. */
	struct ftl_conn *c;

	FTL_FOR_EACH_LIVE(&L->l, c) {
		if (c->owner == i) {
			crash_conn(L, c);
		} else if (c->state == FC_RECOVERING && !c->claimed && c->replay_waiter < 0 &&
			   !port_window(L, c->key.sport, i)) {
			c->state = FC_LIVE;
			c->replay = FTL_RP_NONE;
			crash_conn(L, c);
		}
	}
	s->n_ports = 0;
	if (L->l.verbose)
		fprintf(stderr, "ftlog: shim session %d (pid %d) ended\n", i, s->pid);
}

static void sess_msg(struct ftlog *L, int i, const struct ftc_shim_msg *m)
{
	struct ftl_conn *c = ftl_conn_find(&L->l, &m->key);
	struct ftc_shim_msg r = {.key = m->key};

	switch (m->type) {
	case FS_HELLO:
		L->sess[i].pid = (int)m->a;
		break;
	case FS_LISTEN: {
		struct sess *s = &L->sess[i];
		unsigned k;
		for (k = 0; k < s->n_ports && s->port[k] != (uint16_t)m->a; k++)
			;
		if (k < SESS_PORTS) {
			s->port[k] = (uint16_t)m->a;
			s->backlog[k] = m->b ? (uint16_t)m->b : 1;
			if (k == s->n_ports)
				s->n_ports++;
		}
		try_recover_port(L, htons((uint16_t)m->a));
		break;
	}
	case FS_ACCEPTED:
		r.type = FS_CONN;
		if (c && !c->closed) {
			r.a = 1;
			r.b = c->state == FC_RECOVERING;
			c->owner = i;
			if (r.b && !m->a)
				c->claimed = true;
			c->claim_deadline_ns = 0;
			if (m->a && c->state == FC_LIVE) /* re-claim after a logger restart */
				r.b = 0;
			sess_send(L, i, &r, sizeof(r));
			if (r.b) {
				if (c->replay == FTL_RP_READY)
					send_replay(L, i, c);
				else if (c->replay == FTL_RP_BUILDING)
					c->replay_waiter = i; /* answered by replay_done */
				else {
					struct ftc_shim_msg p = {.type = FS_REPLAY, .key = m->key};
					sess_send(L, i, &p, sizeof(p));
					abandon(L, c, FTC_AB_REPLAY);
				}
			}
			/* Acks for a re-claim start over: the shim says how many
			 * it has seen (b). */
			if (m->a)
				c->reads_acked = m->b;
			/* Its slot in the accept queue is free: the next one. */
			if (r.b && !m->a)
				try_recover_port(L, m->key.sport);
		} else {
			sess_send(L, i, &r, sizeof(r));
		}
		break;
	case FS_READ:
		if (!c || c->closed)
			break;
		/* b = index of this read: a shim re-sending after a logger
		 * restart must not log a read twice. */
		if (m->b < c->reads)
			break;
		{
			struct ftc_rec rec = {.len = sizeof(rec), .type = FR_READ, .key = m->key,
					      .aux = m->a};
			ftl_apply(&L->l, c, &rec, true);
			L->l.st.reads_logged++;
		}
		break;
	case FS_OWED:
		if (!c || c->closed)
			break;
		if (m->flags & FTC_OWED_DIVERGED) {
			c->differs_at = ((uint64_t)m->a | (uint64_t)m->b << 32) + 1;
			abandon(L, c, FTC_AB_DIVERGED);
			break;
		}
		c->owed = (uint64_t)m->a | (uint64_t)m->b << 32;
		c->owed_deadline_ns = c->owed ? ftl_now_ns() + L->catchup_ns : 0;
		break;
	case FS_CLOSE:
		if (c) {
			down_send(L, FD_CLOSE_OK, &c->key, 0, 0);
			c->owner = -1;
		}
		r.type = FS_CLOSE_OK;
		sess_send(L, i, &r, sizeof(r));
		break;
	default:
		break;
	}
}

static void sess_read(struct ftlog *L, int i)
{
	struct sess *s = &L->sess[i];
	ssize_t n = recv(s->fd, s->buf + s->have, sizeof(s->buf) - s->have, MSG_DONTWAIT);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		sess_close(L, i);
		return;
	}
	if (n > 0)
		s->have += (uint32_t)n;
	uint32_t o = 0;
	for (; o + sizeof(struct ftc_shim_msg) <= s->have; o += sizeof(struct ftc_shim_msg)) {
		struct ftc_shim_msg m;
		memcpy(&m, s->buf + o, sizeof(m));
		sess_msg(L, i, &m);
	}
	memmove(s->buf, s->buf + o, s->have - o);
	s->have -= o;
	arm_poll(L, s->fd, EV(EV_SESS, i));
}

/* ---- completions -------------------------------------------------------- */

static void on_cqe(struct ftlog *L, struct io_uring_cqe *cqe)
{
	uint64_t ud = io_uring_cqe_get_data64(cqe);
	unsigned ev = (unsigned)(ud >> 32), idx = (uint32_t)ud;

	switch (ev) {
	case EV_WAKE: {
		char b[64];
		while (recv(L->wake_fd, b, sizeof(b), MSG_DONTWAIT) > 0)
			L->l.st.ring_wakeups++;
		arm_poll(L, L->wake_fd, EV(EV_WAKE, 0));
		break;
	}
	case EV_LISTEN: {
		int fd = accept4(L->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0) {
			int i;
			for (i = 0; i < FTL_MAX_SESS && L->sess[i].fd >= 0; i++)
				;
			if (i == FTL_MAX_SESS) {
				close(fd);
			} else {
				struct ftc_shim_msg *q = L->sess[i].ackq;
				uint32_t cap = L->sess[i].cap_ack;
				memset(&L->sess[i], 0, sizeof(L->sess[i]));
				L->sess[i].ackq = q;
				L->sess[i].cap_ack = cap;
				L->sess[i].fd = fd;
				arm_poll(L, fd, EV(EV_SESS, i));
			}
		}
		arm_poll(L, L->listen_fd, EV(EV_LISTEN, 0));
		break;
	}
	case EV_STOP:
		L->quit = true;
		break;
	case EV_REPLAY: {
		uint64_t v;
		if (read(L->done_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			perror("ftlog: replay eventfd");
		replay_done(L);
		arm_poll(L, L->done_fd, EV(EV_REPLAY, 0));
		break;
	}
	case EV_TIMER:
		break;
	case EV_SESS:
		if (idx < FTL_MAX_SESS && L->sess[idx].fd >= 0)
			sess_read(L, (int)idx);
		break;
	}
}

static void reap(struct ftlog *L)
{
	struct io_uring_cqe *cqe;
	while (io_uring_peek_cqe(&L->ring, &cqe) == 0) {
		on_cqe(L, cqe);
		io_uring_cqe_seen(&L->ring, cqe);
	}
}

/* ---- set-up and the loop ------------------------------------------------ */

/* Crashed connections not yet handed back to a server (gauge). */
static uint32_t recovering_now(struct ftlog *L)
{
	struct ftl_conn *c;
	uint32_t n = 0;

	FTL_FOR_EACH_LIVE(&L->l, c)
		n += c->state != FC_LIVE && !c->closed;
	return n;
}

/* Replay files a previous run left (its recoveries died with it; the
 * connections are rebuilt from their logs and recovered afresh). */
static void remove_stale_replays(struct ftlog *L)
{
	DIR *d = opendir(L->l.dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		char p[600];
		if ((n > 7 && !strcmp(e->d_name + n - 7, ".replay")) ||
		    (n > 11 && !strcmp(e->d_name + n - 11, ".replay.tmp"))) {
			snprintf(p, sizeof(p), "%s/%s", L->l.dir, e->d_name);
			if (!unlink(p))
				L->l.st.replay_files_removed++;
		}
	}
	closedir(d);
}

static void write_stats(struct ftlog *L)
{
	FILE *f;
	char tmp[512];

	if (!L->stats_path)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", L->stats_path);
	f = fopen(tmp, "w");
	if (!f)
		return;
	const struct ftl_stats *s = &L->l.st;
	struct il_json j;
	il_json_begin(&j, f, 0);
	il_json_obj(&j, NULL);
	il_json_u64(&j, "records", s->records);
	il_json_u64(&j, "bytes_logged", s->bytes_logged);
	il_json_u64(&j, "writes", s->writes);
	il_json_u64(&j, "fsyncs", s->fsyncs);
	il_json_u64(&j, "acks_down", s->acks_down);
	il_json_u64(&j, "reads_logged", s->reads_logged);
	il_json_u64(&j, "crashes", s->crashes);
	il_json_u64(&j, "recoveries", s->recoveries);
	il_json_u64(&j, "compactions", s->compactions);
	il_json_u64(&j, "ring_wakeups", s->ring_wakeups);
	il_json_u64(&j, "down_full", s->down_full);
	il_json_u64(&j, "replay_bytes", s->replay_bytes);
	il_json_u64(&j, "replay_build_us_last", s->replay_us_last);
	il_json_u64(&j, "replay_failures", s->replay_failures);
	il_json_u64(&j, "recover_paced", s->recover_paced);
	il_json_u64(&j, "recover_abandoned_timeout", s->recover_abandoned_timeout);
	il_json_u64(&j, "recover_abandoned_replay", s->recover_abandoned_replay);
	il_json_u64(&j, "recover_abandoned_diverged", s->recover_abandoned_diverged);
	il_json_u64(&j, "recover_client_closed", s->recover_client_closed);
	il_json_u64(&j, "replay_files_removed", s->replay_files_removed);
	il_json_u64(&j, "sync_rounds", s->sync_rounds);
	il_json_u64(&j, "sync_early", s->sync_early);
	il_json_u64(&j, "sync_us", s->sync_us);
	il_json_u64(&j, "recovering", recovering_now(L));
	uint64_t disk = 0;
	for (uint32_t i = 0; i < L->l.n_segs; i++)
		disk += L->l.segs[i].len;
	il_json_u64(&j, "segments", L->l.n_segs);
	il_json_u64(&j, "log_bytes", disk);
	il_json_u64(&j, "segments_created", s->segments_created);
	il_json_u64(&j, "segments_removed", s->segments_removed);
	il_json_u64(&j, "relocations", s->relocations);
	il_json_u64(&j, "relocated_bytes", s->relocated_bytes);
	il_json_u64(&j, "legacy_imported", s->legacy_imported);
	il_json_u64(&j, "zero_ahead_bytes", s->zero_ahead_bytes);
	il_json_u64(&j, "crc_mismatches", s->crc_mismatches);
	il_json_end(&j);
	bool ok = il_json_finish(&j) == 0;
	/* A partial file never replaces a whole one. */
	if (fclose(f) != 0 || !ok) {
		unlink(tmp);
		return;
	}
	rename(tmp, L->stats_path);
}

static int unix_sock(int type, const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	unlink(path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    (type == SOCK_STREAM && listen(fd, 64))) {
		fprintf(stderr, "ftlog: socket %s: %s\n", path, strerror(errno));
		return -1;
	}
	chmod(path, 0666);
	return fd;
}

static void set_err(char *err, size_t len, const char *fmt, const char *a, const char *b)
{
	snprintf(err, len, fmt, a, b);
}

struct ftlog *ftlog_open(const struct ftlog_opts *o, int stop_fd, char *err, size_t errlen)
{
	struct ftlog *L = calloc(1, sizeof(*L));
	char e[256];

	if (!L) {
		set_err(err, errlen, "out of memory%s%s", "", "");
		return NULL;
	}
	L->wake_fd = L->listen_fd = L->done_fd = -1;
	L->stop_fd = stop_fd;
	pthread_mutex_init(&L->done_mu, NULL);
	for (int i = 0; i < FTL_MAX_SESS; i++)
		L->sess[i].fd = -1;
	L->l.dir = o->dir;
	L->l.durability = o->durability;
	L->l.group_ms = o->group_ms;
	L->l.delay_us = o->delay_us;
	L->catchup_ns = (uint64_t)(o->catchup_ms ? o->catchup_ms : 5000) * 1000000u;
	L->l.seg_bytes = o->seg_bytes ? o->seg_bytes : FTL_SEG_BYTES_DEF;
	L->l.reloc_max = L->l.seg_bytes / 4;
	L->l.verbose = o->verbose;
	L->stats_path = o->stats;
	if (o->trace) {
		L->trace = fopen(o->trace, "a");
		if (!L->trace) {
			set_err(err, errlen, "--ftcp-trace %s: %s", o->trace, strerror(errno));
			goto fail;
		}
	}
	if (mkdir(o->dir, 0755) && errno != EEXIST) {
		set_err(err, errlen, "--ftcp-dir %s: %s", o->dir, strerror(errno));
		goto fail;
	}
	L->rh = ftc_ring_open(o->ring, 0, FTC_LOGGER, e, sizeof(e));
	if (!L->rh) {
		set_err(err, errlen, "--ftcp-ring: %s%s", e, "");
		goto fail;
	}
	/* A restart: rebuild every connection from the log. Shims have 3 s to
	 * re-claim theirs; an unclaimed one lost its server meanwhile. */
	int loaded = ftl_load_dir(&L->l, ftl_now_ns() + 3000000000ull);
	if (loaded < 0) {
		set_err(err, errlen, "--ftcp-dir %s: %s", o->dir, strerror(errno));
		goto fail;
	}
	remove_stale_replays(L);
	snprintf(L->wake_path, sizeof(L->wake_path), "%s.wake", o->ring);
	snprintf(L->sock_path, sizeof(L->sock_path), "%s", o->sock);
	L->wake_fd = unix_sock(SOCK_DGRAM, L->wake_path);
	L->listen_fd = unix_sock(SOCK_STREAM, L->sock_path);
	L->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (L->wake_fd < 0 || L->listen_fd < 0 || L->done_fd < 0) {
		set_err(err, errlen, "sockets %s, %s: see the message above", L->wake_path,
			L->sock_path);
		goto fail;
	}
	int rc = io_uring_queue_init(256, &L->ring, 0);
	if (rc) {
		set_err(err, errlen, "io_uring_queue_init: %s%s", strerror(-rc), "");
		goto fail;
	}
	L->ring_ok = true;
	arm_poll(L, L->wake_fd, EV(EV_WAKE, 0));
	arm_poll(L, L->listen_fd, EV(EV_LISTEN, 0));
	arm_poll(L, L->stop_fd, EV(EV_STOP, 0));
	arm_poll(L, L->done_fd, EV(EV_REPLAY, 0));
	fprintf(stderr, "ftlog: ready (ring %s, sock %s, dir %s, durability %s, %d connections "
		"loaded from %u log segments)\n",
		o->ring, o->sock, o->dir, (const char *[]){"none", "group", "sync"}[o->durability],
		loaded, L->l.n_segs);
	return L;
fail:
	ftlog_close(L);
	return NULL;
}

int ftlog_run(struct ftlog *L)
{
	while (!L->quit) {
		/* The shim sessions first, then the ring: the records of the
		 * bytes a shim's read lengths cover were queued before the
		 * server could read them, so the round that syncs those
		 * lengths covers their bytes too. */
		reap(L);
		drain_ring(L);
		uint64_t now = ftl_now_ns();
		bool synced = L->l.durability == FTL_SYNC;
		if (L->l.durability == FTL_GROUP) {
			if (now >= L->next_group_ns) {
				synced = true;
			} else if (someone_waits(L)) {
				synced = true;
				L->l.st.sync_early++;
			}
		}
		commit(L, synced);
		if (synced)
			L->next_group_ns = now + (uint64_t)L->l.group_ms * 1000000u;
		mark_durable(L, synced);
		publish(L);
		ftl_log_after_commit(&L->l);
		/* after publishing: the round's waiters are not kept for it */
		ftl_log_zero_ahead(&L->l);
		if (L->recover_again) {
			struct ftl_conn *f;
			L->recover_again = false;
			FTL_FOR_EACH_LIVE(&L->l, f)
				if (f->state == FC_FROZEN)
					try_recover_port(L, f->key.sport);
		}
		struct ftl_conn *c;
		FTL_FOR_EACH_LIVE(&L->l, c) {
			if (c->owed_deadline_ns && now > c->owed_deadline_ns) {
				abandon(L, c, FTC_AB_DIVERGED);
				continue;
			}
			if (c->claim_deadline_ns && now > c->claim_deadline_ns && c->owner < 0) {
				c->claim_deadline_ns = 0;
				crash_conn(L, c);
			}
			/* now was read before this pass: a connection put into
			 * recovery during it has a later recover_ns. */
			if (c->state == FC_RECOVERING && !c->claimed && c->replay_waiter < 0 &&
			    c->replay != FTL_RP_BUILDING && now > c->recover_ns &&
			    now - c->recover_ns > RECOVER_TIMEOUT_NS) {
				uint16_t port = c->key.sport;
				abandon(L, c, FTC_AB_TIMEOUT);
				try_recover_port(L, port);
			}
		}
		if (now >= L->next_stats) {
			write_stats(L);
			L->next_stats = now + 200000000u;
		}
		/* A crashed connection whose bytes were not yet durable is
		 * recovered by the next pass (which syncs them): no sleep, since
		 * nothing would wake us for it. */
		if (L->recover_again)
			continue;
		/* Announce the sleep, then look once more, so a record queued
		 * in between (or during the pass) is never left waiting for the
		 * timer: a pass that drained records goes round again only if
		 * more came. */
		if (!il_shm_sleep_prepare(&L->rh->rx))
			continue;
		/* A safety net only: the data plane wakes us (one datagram per
		 * announced sleep). */
		uint64_t wait_ns = 20000000u;
		if (L->l.durability == FTL_GROUP && any_unsynced(L)) {
			/* Bulk traffic nobody waits on: synced at the interval's end. */
			uint64_t t = ftl_now_ns();
			if (t >= L->next_group_ns) {
				il_shm_sleep_end(&L->rh->rx);
				continue;
			}
			wait_ns = L->next_group_ns - t;
		}
		/* The counters file is rewritten every 200 ms, asleep or not. */
		uint64_t t = ftl_now_ns();
		if (L->next_stats > t && L->next_stats - t < wait_ns)
			wait_ns = L->next_stats - t;
		L->ts.tv_sec = (long long)(wait_ns / 1000000000u);
		L->ts.tv_nsec = (long long)(wait_ns % 1000000000u);
		struct io_uring_cqe *cqe;
		/* The polls re-armed in this pass and the wait: one system call. */
		io_uring_submit_and_wait_timeout(&L->ring, &cqe, 1, &L->ts, NULL);
		reap(L);
		il_shm_sleep_end(&L->rh->rx);
	}
	write_stats(L);
	/* Flush what is buffered so a clean stop loses nothing. */
	commit(L, true);
	fprintf(stderr, "ftlog: stopped: %lu records, %lu bytes logged, %lu crashes, "
		"%lu recoveries, %lu compactions\n", L->l.st.records, L->l.st.bytes_logged,
		L->l.st.crashes, L->l.st.recoveries, L->l.st.compactions);
	return 0;
}

void ftlog_close(struct ftlog *L)
{
	if (!L)
		return;
	/* Replay workers still running own their job and the eventfd: wait
	 * for them (bounded by their file sizes). */
	while (L->jobs_running && L->done_fd >= 0) {
		struct pollfd p = {.fd = L->done_fd, .events = POLLIN};
		if (poll(&p, 1, 1000) > 0) {
			uint64_t v;
			if (read(L->done_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				break;
		}
		replay_done(L);
	}
	if (L->ring_ok)
		io_uring_queue_exit(&L->ring);
	if (L->wake_fd >= 0) {
		close(L->wake_fd);
		unlink(L->wake_path);
	}
	if (L->listen_fd >= 0) {
		close(L->listen_fd);
		unlink(L->sock_path);
	}
	for (int i = 0; i < FTL_MAX_SESS; i++) {
		if (L->sess[i].fd >= 0)
			close(L->sess[i].fd);
		free(L->sess[i].ackq);
	}
	if (L->done_fd >= 0)
		close(L->done_fd);
	ftl_free_all(&L->l);
	if (L->trace)
		fclose(L->trace);
	ftc_ring_close(L->rh);
	free(L);
}
