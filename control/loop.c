/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The control process's event loop: one io_uring, no busy polling.
 *
 * Always in flight, one each:
 *   READ    on the eventfd the data plane writes when we sleep
 *   TIMEOUT housekeeping tick (resend what a full ring refused, notice a
 *           peer restart, later: heartbeats and failure detection)
 *   READ    on a signalfd (SIGINT, SIGTERM, SIGHUP: clean shutdown)
 *   RECVMSG on the management datagram socket
 *   ACCEPT  on the wake socket (hands the eventfd to the data plane)
 *
 * One iteration: drain the up ring, apply, publish watermarks down,
 * announce sleep (il_chan_sleep_prepare) and block in
 * io_uring_submit_and_wait() only if the ring is still empty.
 *
 * A sharded data plane (--shards N, docs/scaling.md 1.5) has one channel
 * per shard, "<chan>.<k>", each with one producer and one consumer; every
 * shard's control stage fetches the same eventfd from the one wake socket.
 * Membership and stability stay per group in this one process; a group's
 * WATERMARK, VIEW and CREDIT go down the channel its up messages come
 * from (its owner shard's: the data plane hands every group's control
 * frames to the owner).
 */
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <interlink/chan.h>
#include <interlink/wire.h>

#include "control.h"
#include "ha.h"
#include "membership.h"

#define RX_BURST 64
#define DRAIN_BURSTS 256 /* then look at the uring, so signals get through */
#define MGMT_BUF 256
#define REPLY_BUF 65536 /* a datagram: members of many groups fit */

enum ev {
	EV_WAKE = 1,
	EV_TICK,
	EV_SIGNAL,
	EV_MGMT,
	EV_ACCEPT,
	/* An active/standby pair (ha.c): */
	EV_HA_RESULT, /* READ on the etcd thread's eventfd */
	EV_HA_WATCH,  /* POLL_ADD on the etcd watch's eventfd */
	EV_HA_HB,     /* RECVMSG on the pair heartbeat socket */
	EV_HA_TICK,   /* TIMEOUT: heartbeat, detection, authority */
};

/* One channel: the whole data plane's, or one shard's. */
struct cchan {
	struct il_chan *ch;
	char path[272];
	bool dp_known;    /* a data-plane HELLO has been seen on it */
	uint64_t dp_inc;
	uint32_t dp_epoch;
	uint16_t shard, n_shards; /* as its HELLO said */
	bool hello_due;   /* our HELLO still has to go down it */
	uint64_t msgs;
};

struct ctl {
	const struct ctl_opts *o;
	struct il_chan *ch; /* chans[0].ch */
	struct cchan chans[CTL_MAX_CHANNELS];
	unsigned n_ch;
	uint8_t chan_of[65536]; /* group id -> the channel its up messages came from */
	uint32_t hello_mask;    /* channels that said HELLO in the data plane's incarnation */
	struct io_uring ring;
	bool ring_ok;
	int efd, sfd, mgmt_fd, lfd;

	uint64_t efd_val;
	struct signalfd_siginfo si;
	struct __kernel_timespec tick;
	char mbuf[MGMT_BUF];
	struct sockaddr_un maddr;
	struct iovec miov;
	struct msghdr mmsg;

	struct il_mship ms;
	struct ha *ha;      /* a pair; NULL otherwise */
	uint64_t ha_val;
	struct __kernel_timespec ha_tick;
	uint8_t hb_buf[128];
	struct iovec hb_iov;
	struct msghdr hb_msg;
	bool watch_armed;
	bool dp_known;    /* a data-plane HELLO has been seen */
	uint64_t dp_last_ns; /* last message from the data plane */
	bool dp_silent;   /* failure detection paused: the data plane is quiet */
	uint64_t dp_silent_since;
	uint32_t dp_epoch;
	uint64_t dp_inc;
	bool stop;

	struct {
		uint64_t msgs, batches, wakes, ticks, sleeps_skipped;
		uint64_t hellos, dp_restarts, before_hello, unknown_type;
		uint64_t mgmt_cmds, wake_served, detector_paused;
		uint64_t shard_mismatch;
	} st;
};

static void logmsg(const struct ctl *c, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void logmsg(const struct ctl *c, int level, const char *fmt, ...)
{
	va_list ap;

	if (level > c->o->verbose)
		return;
	fprintf(stderr, "interlink-control: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct io_uring_sqe *sqe_get(struct ctl *c)
{
	struct io_uring_sqe *s = io_uring_get_sqe(&c->ring);

	if (s == NULL) {
		/* Five operations in a ring of 16 never fill it; if it ever
		 * does, make room rather than lose an arming. */
		io_uring_submit(&c->ring);
		s = io_uring_get_sqe(&c->ring);
	}
	return s;
}

static void arm(struct ctl *c, enum ev ev)
{
	struct io_uring_sqe *s = sqe_get(c);

	if (s == NULL) {
		logmsg(c, 0, "io_uring submission queue full; stopping");
		c->stop = true;
		return;
	}
	switch (ev) {
	case EV_WAKE:
		io_uring_prep_read(s, c->efd, &c->efd_val, sizeof(c->efd_val), 0);
		break;
	case EV_TICK:
		io_uring_prep_timeout(s, &c->tick, 0, 0);
		break;
	case EV_SIGNAL:
		io_uring_prep_read(s, c->sfd, &c->si, sizeof(c->si), 0);
		break;
	case EV_MGMT:
		c->miov.iov_base = c->mbuf;
		c->miov.iov_len = sizeof(c->mbuf) - 1;
		memset(&c->mmsg, 0, sizeof(c->mmsg));
		c->mmsg.msg_name = &c->maddr;
		c->mmsg.msg_namelen = sizeof(c->maddr);
		c->mmsg.msg_iov = &c->miov;
		c->mmsg.msg_iovlen = 1;
		io_uring_prep_recvmsg(s, c->mgmt_fd, &c->mmsg, 0);
		break;
	case EV_ACCEPT:
		io_uring_prep_accept(s, c->lfd, NULL, NULL, SOCK_CLOEXEC);
		break;
	case EV_HA_RESULT:
		io_uring_prep_read(s, ha_result_fd(c->ha), &c->ha_val, sizeof(c->ha_val), 0);
		break;
	case EV_HA_WATCH:
		io_uring_prep_poll_add(s, ha_watch_fd(c->ha), POLLIN);
		c->watch_armed = true;
		break;
	case EV_HA_HB:
		c->hb_iov.iov_base = c->hb_buf;
		c->hb_iov.iov_len = sizeof(c->hb_buf);
		memset(&c->hb_msg, 0, sizeof(c->hb_msg));
		c->hb_msg.msg_iov = &c->hb_iov;
		c->hb_msg.msg_iovlen = 1;
		io_uring_prep_recvmsg(s, ha_hb_fd(c->ha), &c->hb_msg, 0);
		break;
	case EV_HA_TICK:
		io_uring_prep_timeout(s, &c->ha_tick, 0, 0);
		break;
	}
	io_uring_sqe_set_data64(s, ev);
}

/* Returns true while some channel still owes its HELLO. */
static bool send_hellos(struct ctl *c)
{
	bool due = false;

	for (unsigned k = 0; k < c->n_ch; k++) {
		struct cchan *x = &c->chans[k];

		if (x->hello_due && il_chan_send_hello(x->ch, 0) == 1) {
			x->hello_due = false;
			c->st.hellos++;
		}
		due |= x->hello_due;
	}
	return due;
}

/* A data-plane HELLO is in-band: everything before it in the ring came
 * from the previous incarnation, everything after it describes the new
 * one. So state is reset here and not when the header counter moves. With
 * shards, every shard says HELLO on its own channel: the first of an
 * incarnation restarts the membership, the others join it. */
static void on_dp_hello(struct ctl *c, unsigned k, const struct il_cm_hello *h)
{
	struct cchan *x = &c->chans[k];

	if (x->dp_known && h->incarnation == x->dp_inc && h->epoch == x->dp_epoch) {
		/* A repeat (e.g. answering our HELLO): nothing lost. */
		return;
	}
	unsigned want = c->o->shards; /* 0: not sharded */
	if (h->n_shards != want || (want && h->shard != k)) {
		c->st.shard_mismatch++;
		if (h->n_shards == 0)
			logmsg(c, 0, "channel %s: the data plane runs no shards, but this process "
			       "was started with --shards %u; start it without --shards", x->path,
			       c->n_ch);
		else
			logmsg(c, 0, "channel %s: the data plane says it is shard %u of %u; this "
			       "process serves %u channel%s: start it with --shards %u", x->path,
			       h->shard, h->n_shards, c->n_ch, c->n_ch == 1 ? "" : "s",
			       h->n_shards);
	}
	x->shard = h->shard;
	x->n_shards = h->n_shards;
	/* Our answer names the incarnation we now talk to. */
	il_chan_peer_restarted(x->ch, NULL);
	x->dp_known = true;
	x->dp_inc = h->incarnation;
	x->dp_epoch = h->epoch;
	/* Tell it we heard: it may be waiting for our incarnation to resend
	 * its state (JOINs, latest ACKs). */
	x->hello_due = true;
	uint32_t bit = 1u << k;
	bool restart = c->dp_known && ((c->hello_mask & bit) || h->epoch != c->dp_epoch);
	if (c->dp_known && !restart) {
		/* Another shard of the incarnation we already talk to. */
		c->hello_mask |= bit;
		logmsg(c, 1, "data plane shard %u incarnation %llu epoch %u on %s", h->shard,
		       (unsigned long long)h->incarnation, h->epoch, x->path);
		return;
	}
	if (restart)
		c->st.dp_restarts++;
	logmsg(c, 1, "data plane incarnation %llu epoch %u: resynchronising%s%s",
	       (unsigned long long)h->incarnation, h->epoch, c->n_ch > 1 ? " (from " : "",
	       c->n_ch > 1 ? x->path : "");
	if (c->n_ch > 1)
		logmsg(c, 1, "  (the other shards' HELLOs follow on their channels)");
	c->hello_mask = bit;
	c->dp_inc = h->incarnation;
	c->dp_epoch = h->epoch;
	if (c->ha != NULL) {
		/* A pair: the membership belongs to the epoch this process owns,
		 * which a new data-plane incarnation never inherits. */
		ha_dp_hello(c->ha, h->incarnation);
		c->dp_known = true;
		return;
	}
	if (c->dp_known) {
		/* The members outlive the data plane: only the sequence space
		 * (epoch) restarts, after the old one's final watermark. */
		il_mship_new_epoch(&c->ms, h->epoch, mono_ns());
	} else {
		/* A data plane we have not talked to re-sends its state
		 * (RESYNC) if it has any. */
		il_mship_reset(&c->ms, h->epoch);
	}
	c->dp_known = true;
}

_Static_assert(__builtin_offsetof(struct il_cm_ack, rx_ns) ==
		       __builtin_offsetof(struct il_cm_member, rx_ns),
	       "rx_ns offset");

static void dispatch(struct ctl *c, unsigned k, const struct il_cmsg *m, uint64_t now)
{
	if (c->ha != NULL && ha_dispatch(c->ha, m, now))
		return;
	switch (m->type) {
	case IL_CM_HELLO:
		if (m->u.hello.side == IL_CHAN_DATAPLANE)
			on_dp_hello(c, k, &m->u.hello);
		break;
	case IL_CM_ACK:
	case IL_CM_JOIN:
	case IL_CM_LEAVE:
	case IL_CM_HEARTBEAT:
	case IL_CM_RESYNC:
		if (!c->chans[k].dp_known) {
			/* Without a HELLO we do not know the epoch these belong to. */
			c->st.before_hello++;
			break;
		}
		if (c->ha != NULL && !ha_serving(c->ha))
			break; /* a standby has no membership to keep */
		/* The data plane stamps arrival (same CLOCK_MONOTONIC): a
		 * member is not suspected because we were slow to look. */
		if (m->u.ack.rx_ns != 0 && m->u.ack.rx_ns <= now)
			now = m->u.ack.rx_ns;
		/* The group's owner shard talks for it: its views and
		 * watermarks go back the same way. */
		c->chan_of[m->group] = (uint8_t)k;
		il_mship_apply(&c->ms, m, now);
		break;
	case IL_CM_ALIVE:
		break;
	default:
		c->st.unknown_type++;
		break;
	}
}

/* Returns true if a ring may still hold messages. */
static bool drain(struct ctl *c)
{
	struct il_cmsg msgs[RX_BURST];
	uint64_t now = mono_ns();
	bool more = false;

	for (unsigned k = 0; k < c->n_ch; k++) {
		unsigned b;

		for (b = 0; b < DRAIN_BURSTS; b++) {
			unsigned n = il_chan_recv_burst(c->chans[k].ch, msgs, RX_BURST);

			if (n == 0)
				break;
			c->st.batches++;
			c->st.msgs += n;
			c->chans[k].msgs += n;
			c->dp_last_ns = now;
			for (unsigned i = 0; i < n; i++)
				dispatch(c, k, &msgs[i], now);
		}
		more |= b == DRAIN_BURSTS;
	}
	return more;
}

/* Send out[0..n) down the channels of their groups, each channel's in
 * order; sent[] gets the messages accepted (in order), returns how many. */
static unsigned send_routed(struct ctl *c, const struct il_cmsg *out, unsigned n,
			    struct il_cmsg *sent)
{
	if (c->n_ch == 1) {
		unsigned k = il_chan_send_burst(c->ch, out, n);

		memcpy(sent, out, sizeof(*out) * k);
		return k;
	}
	struct il_cmsg part[RX_BURST];
	unsigned total = 0;

	for (unsigned ch = 0; ch < c->n_ch; ch++) {
		unsigned np = 0;

		for (unsigned i = 0; i < n; i++)
			if (c->chan_of[out[i].group] == ch)
				part[np++] = out[i];
		if (np == 0)
			continue;
		unsigned k = il_chan_send_burst(c->chans[ch].ch, part, np);

		memcpy(sent + total, part, sizeof(*part) * k);
		total += k;
	}
	return total;
}

static void publish(struct ctl *c)
{
	struct il_cmsg out[RX_BURST], sent[RX_BURST];
	unsigned n, k;

	if (send_hellos(c))
		return; /* nothing may overtake our HELLO */
	if (c->ha != NULL) {
		ha_publish(c->ha); /* every view committed to etcd first */
		return;
	}
	/* Views first: a joiner is in the view before the watermark counts it.
	 * They count as handed out once collected: collect no more than the
	 * fullest channel has room for, so each fits wherever it goes. */
	do {
		unsigned room = RX_BURST;

		for (unsigned ch = 0; ch < c->n_ch; ch++) {
			unsigned f = il_chan_tx_free(c->chans[ch].ch);

			if (f < room)
				room = f;
		}
		n = il_mship_collect_views(&c->ms, out, room, mono_ns());
		k = send_routed(c, out, n, sent);
	} while (n > 0 && k == n);
	do {
		n = il_mship_collect(&c->ms, out, RX_BURST);
		k = send_routed(c, out, n, sent);
		il_mship_published(&c->ms, sent, k);
		/* A full ring: what did not fit stays pending for the tick. */
	} while (n == RX_BURST && k == n);
}

static size_t reply_status(struct ctl *c, char *r, size_t len)
{
	struct il_chan_ring_stats up = {0}, down = {0}, u, d;
	size_t o = 0;

#define OUT(...) \
	(o += o < len ? (size_t)snprintf(r + o, len - o, __VA_ARGS__) : 0)
	for (unsigned k = 0; k < c->n_ch; k++) {
		il_chan_stats(c->chans[k].ch, true, &u);
		il_chan_stats(c->chans[k].ch, false, &d);
		up.enqueued += u.enqueued;
		up.dequeued += u.dequeued;
		up.drops += u.drops;
		up.wakeups += u.wakeups;
		up.sleeps += u.sleeps;
		down.enqueued += d.enqueued;
		down.drops += d.drops;
		if (c->n_ch > 1)
			OUT("chan%u_up_enqueued %llu\nchan%u_down_enqueued %llu\nchan%u_down_drops "
			    "%llu\nchan%u_dp_incarnation %llu\nchan%u_msgs %llu\n", k,
			    (unsigned long long)u.enqueued, k, (unsigned long long)d.enqueued, k,
			    (unsigned long long)d.drops, k,
			    (unsigned long long)(c->chans[k].dp_known ? c->chans[k].dp_inc : 0), k,
			    (unsigned long long)c->chans[k].msgs);
	}
	OUT("channels %u\nshard_mismatch %llu\n", c->n_ch, (unsigned long long)c->st.shard_mismatch);
	OUT("incarnation %llu\n", (unsigned long long)il_chan_incarnation(c->ch));
	OUT("dp_incarnation %llu\n", (unsigned long long)(c->dp_known ? c->dp_inc : 0));
	OUT("dp_epoch %u\n", c->dp_epoch);
	OUT("up_enqueued %llu\nup_dequeued %llu\nup_drops %llu\nup_wakeups %llu\nup_sleeps %llu\n",
	    (unsigned long long)up.enqueued, (unsigned long long)up.dequeued,
	    (unsigned long long)up.drops, (unsigned long long)up.wakeups,
	    (unsigned long long)up.sleeps);
	OUT("down_enqueued %llu\ndown_drops %llu\n", (unsigned long long)down.enqueued,
	    (unsigned long long)down.drops);
	OUT("msgs %llu\nbatches %llu\nwakes %llu\nticks %llu\n", (unsigned long long)c->st.msgs,
	    (unsigned long long)c->st.batches, (unsigned long long)c->st.wakes,
	    (unsigned long long)c->st.ticks);
	OUT("dp_restarts %llu\nbefore_hello %llu\nunknown_type %llu\n",
	    (unsigned long long)c->st.dp_restarts, (unsigned long long)c->st.before_hello,
	    (unsigned long long)c->st.unknown_type);
	OUT("joins %llu\nleaves %llu\nacks %llu\nacks_stale %llu\nacks_unknown %llu\n",
	    (unsigned long long)c->ms.st.joins, (unsigned long long)c->ms.st.leaves,
	    (unsigned long long)c->ms.st.acks, (unsigned long long)c->ms.st.acks_stale,
	    (unsigned long long)c->ms.st.acks_unknown);
	OUT("wrong_epoch %llu\nwatermarks_published %llu\ngroups %u\n",
	    (unsigned long long)c->ms.st.wrong_epoch, (unsigned long long)c->ms.st.published,
	    c->ms.n_groups);
	OUT("heartbeats %llu\nunknown_member %llu\nsuspicions %llu\nfalse_suspicions %llu\n"
	    "exclusions %llu\nrejoins %llu\nviews %llu\ncredits %llu\nresyncs %llu\nepochs %llu\n",
	    (unsigned long long)c->ms.st.heartbeats, (unsigned long long)c->ms.st.unknown_member,
	    (unsigned long long)c->ms.st.suspicions,
	    (unsigned long long)c->ms.st.false_suspicions,
	    (unsigned long long)c->ms.st.exclusions, (unsigned long long)c->ms.st.rejoins,
	    (unsigned long long)c->ms.st.views, (unsigned long long)c->ms.st.credits,
	    (unsigned long long)c->ms.st.resyncs, (unsigned long long)c->ms.st.epochs);
	OUT("view_repeats %llu\n", (unsigned long long)c->ms.st.view_repeats);
	OUT("detector_paused %llu\n", (unsigned long long)c->st.detector_paused);
	OUT("last_excluded %u\nlast_excluded_quiet_ms %llu\n", c->ms.st.last_excluded,
	    (unsigned long long)(c->ms.st.last_excluded_quiet / 1000000));
	if (c->ha != NULL && o < len)
		o += ha_status(c->ha, r + o, len - o);
#undef OUT
	return o < len ? o : len - 1;
}

static size_t reply_groups(struct ctl *c, char *r, size_t len)
{
	size_t o = 0;

	for (unsigned i = 0; i < c->ms.n_groups && o < len; i++) {
		const struct il_mgroup *g = il_mship_group(&c->ms, c->ms.groups[i]);

		unsigned sus = 0;

		for (unsigned k = 0; k < g->n; k++)
			sus += g->m[k].suspected;
		o += (size_t)snprintf(r + o, len - o,
				      "group %u receivers %u watermark %llu published %llu view %llu "
				      "members %u suspected %u window %u\n",
				      g->id, g->stab.n, (unsigned long long)g->stab.watermark,
				      (unsigned long long)g->published,
				      (unsigned long long)g->view_id, g->n, sus, g->window);
	}
	if (o == 0)
		o = (size_t)snprintf(r, len, "no groups\n");
	return o < len ? o : len - 1;
}

/* WAN groups: what eq. 4.1 is computed from, per receiver. */
static size_t reply_wan(struct ctl *c, char *r, size_t len)
{
	size_t o = 0;

	for (unsigned i = 0; i < c->ms.n_groups && o < len; i++) {
		const struct il_mgroup *g = il_mship_group(&c->ms, c->ms.groups[i]);

		if (g->s_bytes == 0)
			continue;
		o += (size_t)snprintf(r + o, len - o,
				      "group %u s_bytes %u rate_kbps %u slow_start %u\n", g->id,
				      g->s_bytes, g->rate_kbps, g->slow_start ? 1u : 0u);
		for (unsigned k = 0; k < g->n && o < len; k++) {
			const struct il_member *mb = &g->m[k];

			if (!(mb->roles & IL_ROLE_RECEIVER))
				continue;
			o += (size_t)snprintf(r + o, len - o,
					      "member %u group %u srtt_us %llu last_rtt_us %llu "
					      "samples %llu loss_ppm %u\n", mb->id, g->id,
					      (unsigned long long)(mb->rtt.srtt_ns / 1000),
					      (unsigned long long)(mb->rtt.last_ns / 1000),
					      (unsigned long long)mb->rtt.samples, mb->loss_ppm);
		}
	}
	if (o == 0)
		o = (size_t)snprintf(r, len, "no wan groups\n");
	return o < len ? o : len - 1;
}

/* Every member of every group, one line each: what a live view shows and
 * an exporter labels per member. A receiver's lag is how many messages
 * its cumulative ACK is behind the group's most advanced receiver: the one
 * with the largest lag holds the watermark back. */
static size_t reply_members(struct ctl *c, char *r, size_t len)
{
	const size_t tail = 48; /* room for the "truncated" line */
	uint64_t now = mono_ns();
	size_t o = 0;
	unsigned left = 0;

	for (unsigned i = 0; i < c->ms.n_groups; i++) {
		const struct il_mgroup *g = il_mship_group(&c->ms, c->ms.groups[i]);
		uint64_t lead = 0, cum;

		for (unsigned k = 0; k < g->stab.n; k++)
			if (g->stab.rcv[k].cum > lead)
				lead = g->stab.rcv[k].cum;
		for (unsigned k = 0; k < g->n; k++) {
			const struct il_member *mb = &g->m[k];
			char line[256];
			int n;

			n = snprintf(line, sizeof(line),
				     "member %u group %u roles %u incarnation %u suspected %u "
				     "quiet_ms %llu buffer_free %u",
				     mb->id, g->id, mb->roles, mb->incarnation, mb->suspected ? 1u : 0u,
				     (unsigned long long)(now > mb->last_heard_ns
								  ? (now - mb->last_heard_ns) / 1000000
								  : 0),
				     mb->buffer_free);
			if ((mb->roles & IL_ROLE_RECEIVER) && il_stab_get(&g->stab, mb->id, &cum))
				n += snprintf(line + n, sizeof(line) - (size_t)n,
					      " acked %llu lag %llu", (unsigned long long)cum,
					      (unsigned long long)(lead - cum));
			if (left > 0 || o + (size_t)n + 1 + tail > len) {
				left++;
				continue;
			}
			o += (size_t)snprintf(r + o, len - o, "%s\n", line);
		}
	}
	if (left > 0)
		o += (size_t)snprintf(r + o, len - o, "truncated %u\n", left);
	if (o == 0)
		o = (size_t)snprintf(r, len, "no members\n");
	return o < len ? o : len - 1;
}

static void on_mgmt(struct ctl *c, int res)
{
	static char reply[REPLY_BUF];
	size_t n;
	char *cmd;

	if (res < 0) {
		logmsg(c, 0, "management socket: %s", strerror(-res));
		return;
	}
	c->st.mgmt_cmds++;
	c->mbuf[res] = '\0';
	cmd = c->mbuf;
	cmd[strcspn(cmd, "\r\n")] = '\0';
	if (strcmp(cmd, "ping") == 0)
		n = (size_t)snprintf(reply, sizeof(reply), "pong\n");
	else if (strcmp(cmd, "status") == 0)
		n = reply_status(c, reply, sizeof(reply));
	else if (strcmp(cmd, "groups") == 0)
		n = reply_groups(c, reply, sizeof(reply));
	else if (strcmp(cmd, "wan") == 0)
		n = reply_wan(c, reply, sizeof(reply));
	else if (strcmp(cmd, "members") == 0)
		n = reply_members(c, reply, sizeof(reply));
	else if (c->ha != NULL && (n = ha_mgmt(c->ha, cmd, reply, sizeof(reply))) != 0)
		;
	else if (c->ha == NULL && (strcmp(cmd, "ha") == 0 || strcmp(cmd, "handover") == 0))
		n = (size_t)snprintf(reply, sizeof(reply),
				     "error: not one of a pair (start with --ha-etcd)\n");
	else
		n = (size_t)snprintf(reply, sizeof(reply),
				     "error: unknown command '%.64s' (commands: ping, status, groups, wan, members, ha, handover)\n",
				     cmd);
	if (c->mmsg.msg_namelen > sizeof(sa_family_t))
		sendto(c->mgmt_fd, reply, n, MSG_DONTWAIT | MSG_NOSIGNAL,
		       (struct sockaddr *)&c->maddr, c->mmsg.msg_namelen);
}

static void on_tick(struct ctl *c)
{
	uint64_t inc;

	c->st.ticks++;
	/* What waits in the ring may be the heartbeat that keeps a member
	 * in: apply it before judging. */
	while (drain(c))
		;
	uint64_t ex = c->ms.st.exclusions, now = mono_ns();
	/* The data plane says ALIVE every 10 ms: 100 ms without a word and
	 * it is down or stalled, and the members' silence is its own. */
	if (now - c->dp_last_ns > 100000000ull) {
		if (!c->dp_silent) {
			logmsg(c, 1, "data plane silent: failure detection paused");
			c->dp_silent_since = c->dp_last_ns;
		}
		c->dp_silent = true;
		c->st.detector_paused++;
	} else {
		if (c->dp_silent)
			il_mship_grace(&c->ms, now - c->dp_silent_since, now);
		c->dp_silent = false;
		if (c->ha == NULL || ha_serving(c->ha))
			il_mship_tick(&c->ms, now);
	}
	if (c->ms.st.exclusions != ex)
		logmsg(c, 1, "excluded member %u (silent for %llu ms)", c->ms.st.last_excluded,
		       (unsigned long long)(c->ms.st.last_excluded_quiet / 1000000));
	/* The in-band HELLO resets state; the header only tells us early. */
	for (unsigned k = 0; k < c->n_ch; k++)
		if (il_chan_peer_restarted(c->chans[k].ch, &inc))
			logmsg(c, 1, "data plane attached to %s (incarnation %llu)",
			       c->chans[k].path, (unsigned long long)inc);
	/* A HELLO or watermark a full ring refused goes out now. */
	publish(c);
}

static void on_cqe(struct ctl *c, struct io_uring_cqe *cqe)
{
	enum ev ev = (enum ev)io_uring_cqe_get_data64(cqe);
	int res = cqe->res;

	switch (ev) {
	case EV_WAKE:
		c->st.wakes++;
		if (res < 0 && res != -EINTR && res != -EAGAIN) {
			logmsg(c, 0, "eventfd read: %s", strerror(-res));
			c->stop = true;
			return;
		}
		arm(c, EV_WAKE);
		break;
	case EV_TICK:
		on_tick(c);
		arm(c, EV_TICK);
		break;
	case EV_SIGNAL:
		if (res == (int)sizeof(c->si)) {
			logmsg(c, 1, "signal %u: shutting down", c->si.ssi_signo);
			c->stop = true;
		} else {
			arm(c, EV_SIGNAL);
		}
		break;
	case EV_MGMT:
		on_mgmt(c, res);
		arm(c, EV_MGMT);
		break;
	case EV_HA_RESULT:
		ha_on_results(c->ha);
		arm(c, EV_HA_RESULT);
		if (!c->watch_armed && ha_watch_fd(c->ha) >= 0)
			arm(c, EV_HA_WATCH);
		break;
	case EV_HA_WATCH:
		c->watch_armed = false;
		ha_on_watch(c->ha);
		if (ha_watch_fd(c->ha) >= 0)
			arm(c, EV_HA_WATCH);
		break;
	case EV_HA_HB:
		if (res > 0)
			ha_on_heartbeat(c->ha, c->hb_buf, (size_t)res);
		arm(c, EV_HA_HB);
		break;
	case EV_HA_TICK:
		/* Judge the data plane and the peer by what they said, not by
		 * what still waits in the ring. */
		while (drain(c))
			;
		ha_tick(c->ha);
		arm(c, EV_HA_TICK);
		break;
	case EV_ACCEPT:
		if (res >= 0) {
			if (il_chan_wake_serve(res, c->efd, il_chan_incarnation(c->ch)) == 0)
				c->st.wake_served++;
			close(res);
		} else {
			logmsg(c, 0, "wake socket accept: %s", strerror(-res));
		}
		arm(c, EV_ACCEPT);
		break;
	}
}

static int reap(struct ctl *c)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	io_uring_for_each_cqe(&c->ring, head, cqe)
	{
		on_cqe(c, cqe);
		n++;
	}
	io_uring_cq_advance(&c->ring, n);
	return (int)n;
}

static int mgmt_open(struct ctl *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;

	if (c->o->mgmt_path[0] == '\0')
		return 0;
	strcpy(sa.sun_path, c->o->mgmt_path); /* length checked by main.c */
	if (lstat(sa.sun_path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			logmsg(c, 0, "--mgmt %s: exists and is not a socket", sa.sun_path);
			return -1;
		}
		unlink(sa.sun_path);
	}
	c->mgmt_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (c->mgmt_fd < 0 || bind(c->mgmt_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		logmsg(c, 0, "--mgmt %s: cannot bind: %s", sa.sun_path, strerror(errno));
		return -1;
	}
	return 0;
}

static int setup(struct ctl *c)
{
	struct il_chan_params p = { .up_slots = c->o->up_slots, .down_slots = c->o->down_slots };
	char err[512];
	sigset_t mask;
	int rc;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) != 0 ||
	    (c->sfd = signalfd(-1, &mask, SFD_CLOEXEC)) < 0) {
		logmsg(c, 0, "signalfd: %s", strerror(errno));
		return -1;
	}
	/* Blocking eventfd: io_uring waits on it by polling internally; the
	 * data plane's writes cannot block short of 2^64-2 pending. */
	c->efd = eventfd(0, EFD_CLOEXEC);
	if (c->efd < 0) {
		logmsg(c, 0, "eventfd: %s", strerror(errno));
		return -1;
	}
	c->n_ch = c->o->shards ? c->o->shards : 1;
	for (unsigned k = 0; k < c->n_ch; k++) {
		struct cchan *x = &c->chans[k];

		if (c->o->shards == 0)
			snprintf(x->path, sizeof(x->path), "%s", c->o->chan_path);
		else if (il_chan_shard_path(c->o->chan_path, k, x->path, sizeof(x->path)) != 0) {
			logmsg(c, 0, "--chan %s: too long for its shards' channels", c->o->chan_path);
			return -1;
		}
		if (c->o->recreate && access(x->path, F_OK) == 0) {
			struct il_chan *probe;

			/* Only a file of another shape is replaced: one that
			 * fits is kept, the data plane may be attached to it. */
			if (il_chan_open(x->path, IL_CHAN_CONTROL, &p, &probe, err, sizeof(err)) == 0) {
				x->ch = probe;
			} else if (strstr(err, "already attached") == NULL) {
				logmsg(c, 1, "%s; --recreate: replacing it", err);
				il_chan_unlink(x->path);
			}
		}
		if (x->ch == NULL &&
		    il_chan_open(x->path, IL_CHAN_CONTROL, &p, &x->ch, err, sizeof(err)) != 0) {
			logmsg(c, 0, "--chan %s", err);
			return -1;
		}
		x->hello_due = true;
	}
	c->ch = c->chans[0].ch;
	c->lfd = il_chan_wake_listen(c->o->sock_path, err, sizeof(err));
	if (c->lfd < 0) {
		logmsg(c, 0, "--wake-sock %s", err);
		return -1;
	}
	if (mgmt_open(c) != 0)
		return -1;
	if (il_mship_init(&c->ms, 0) != 0) {
		logmsg(c, 0, "out of memory");
		return -1;
	}
	c->ms.cfg = (struct il_mship_cfg){ .suspect_ns = c->o->suspect_ms * 1000000ull,
					   .exclude_ns = c->o->exclude_ms * 1000000ull,
					   .window = c->o->window };
	if (c->o->ha_etcd[0]) {
		c->ha = ha_open(c->o, c->ch, &c->ms, err, sizeof(err));
		if (c->ha == NULL) {
			logmsg(c, 0, "--ha-etcd: %s", err);
			return -1;
		}
	}
	rc = io_uring_queue_init(16, &c->ring, 0);
	if (rc != 0) {
		logmsg(c, 0, "io_uring_queue_init: %s", strerror(-rc));
		return -1;
	}
	c->ring_ok = true;
	/* The detectors are only as precise as the tick: a quarter of the
	 * shorter timeout. */
	unsigned tick = c->o->tick_ms;
	if (c->o->suspect_ms && c->o->suspect_ms / 4 < tick)
		tick = c->o->suspect_ms / 4;
	if (c->o->exclude_ms && c->o->exclude_ms / 4 < tick)
		tick = c->o->exclude_ms / 4;
	if (tick == 0)
		tick = 1;
	c->tick.tv_sec = tick / 1000;
	c->tick.tv_nsec = (long long)(tick % 1000) * 1000000;
	arm(c, EV_WAKE);
	arm(c, EV_TICK);
	arm(c, EV_SIGNAL);
	arm(c, EV_ACCEPT);
	if (c->mgmt_fd >= 0)
		arm(c, EV_MGMT);
	if (c->ha != NULL) {
		unsigned ms = ha_tick_ms(c->ha);

		c->ha_tick.tv_sec = 0;
		c->ha_tick.tv_nsec = (long long)ms * 1000000;
		arm(c, EV_HA_RESULT);
		arm(c, EV_HA_HB);
		arm(c, EV_HA_TICK);
	}
	for (unsigned k = 0; k < c->n_ch; k++)
		logmsg(c, 1, "channel %s incarnation %llu (up %u, down %u slots), wake socket %s%s%s",
		       c->chans[k].path, (unsigned long long)il_chan_incarnation(c->chans[k].ch),
		       c->o->up_slots, c->o->down_slots, c->o->sock_path,
		       c->mgmt_fd >= 0 ? ", management " : "", c->mgmt_fd >= 0 ? c->o->mgmt_path : "");
	return 0;
}

static void teardown(struct ctl *c)
{
	if (c->ring_ok)
		io_uring_queue_exit(&c->ring);
	if (c->lfd >= 0) {
		close(c->lfd);
		unlink(c->o->sock_path);
	}
	if (c->mgmt_fd >= 0) {
		close(c->mgmt_fd);
		unlink(c->o->mgmt_path);
	}
	if (c->efd >= 0)
		close(c->efd);
	if (c->sfd >= 0)
		close(c->sfd);
	ha_close(c->ha);
	/* The channel files stay: the data plane may still be attached. */
	for (unsigned k = 0; k < c->n_ch; k++)
		il_chan_close(c->chans[k].ch);
	il_mship_free(&c->ms);
}

int ctl_run(const struct ctl_opts *o)
{
	struct ctl *c = calloc(1, sizeof(*c));
	int code = 0;

	if (c == NULL)
		return 1;
	c->o = o;
	c->efd = c->sfd = c->mgmt_fd = c->lfd = -1;
	if (setup(c) != 0) {
		teardown(c);
		free(c);
		return 1;
	}
	while (!c->stop) {
		bool more = drain(c);
		int rc;

		publish(c);
		/* Sleep only if every channel is empty once each has been told
		 * we are about to (its producer then writes the eventfd). */
		unsigned prepared = 0;
		while (!more && prepared < c->n_ch && il_chan_sleep_prepare(c->chans[prepared].ch))
			prepared++;
		if (prepared == c->n_ch) {
			rc = io_uring_submit_and_wait(&c->ring, 1);
			for (unsigned k = 0; k < c->n_ch; k++)
				il_chan_sleep_end(c->chans[k].ch);
		} else {
			for (unsigned k = 0; k < prepared; k++)
				il_chan_sleep_end(c->chans[k].ch);
			/* Work left: collect completions without waiting. */
			c->st.sleeps_skipped++;
			rc = io_uring_submit(&c->ring);
		}
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
			logmsg(c, 0, "io_uring_submit: %s", strerror(-rc));
			code = 1;
			break;
		}
		reap(c);
	}
	logmsg(c, 1, "stopped: %llu messages in %llu batches, %llu wake-ups",
	       (unsigned long long)c->st.msgs, (unsigned long long)c->st.batches,
	       (unsigned long long)c->st.wakes);
	teardown(c);
	free(c);
	return code;
}
