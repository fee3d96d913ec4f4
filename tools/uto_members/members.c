/* SPDX-License-Identifier: BSD-3-Clause
 * il-uto-members: emulated group members for the control-process tests
 * and benchmarks, speaking the wire protocol over two Linux interfaces
 * (AF_PACKET, no DPDK): senders and receivers of one group.
 *
 *   --tx IF   frames into the appliance's "in" port: DATA, ACK, JOIN,
 *             LEAVE, HEARTBEAT
 *   --rx IF   frames out of its "out" port: DATA, VIEW, STABLE, CREDIT,
 *             UNAVAIL; NAKs go back this way
 *
 * Receivers join (and wait for a VIEW naming them, whose global_seq is
 * their start), deliver in global order with no gap (PO), NAK gaps, ACK
 * cumulatively every K messages or T us with their free buffer, send
 * HEARTBEATs, and U-deliver what is below the stability watermark (UTO).
 * Senders join, wait for their VIEW and send within their CREDIT limit.
 * Scripted faults: kill a receiver, start one late, silence one for a
 * while (it is excluded, sees a VIEW without itself and rejoins).
 *
 * Checks, reported in JSON: every U-delivery is the next global sequence
 * of that receiver and every live member of the view holds it (uniform);
 * a frame seen twice at one sequence is the same message; no receiver
 * buffer overflows; each sender's unstable messages never exceed its
 * window. Exit status 0 when every check passed and all was delivered.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/if_packet.h>
#include <math.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <interlink/frame.h>
#include <interlink/auth.h>
#include <interlink/parse.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "members.h"

struct opts o = { .group = 1, .udp_port = IL_UDP_PORT_DEFAULT, .ns = 1, .nr = 1, .size = 64, .ack_every = 32, .ack_us = 500,
		  .hb_ms = 20, .nak_us = 3000, .resend_ms = 10000, .count = 10000, .buffer = 1u << 20, .max_s = 50,
		  .settle_s = 10 };
struct counters c;
struct rcv R[MAXR];
struct snd S[MAXS];
struct msgrec *msgs;
uint32_t epoch;
uint64_t stable;
uint64_t lat_po[HB], lat_uto[HB], lat_diff[HB];

static int txfd, rxfd, txidx, rxidx;
static uint8_t mac_src[6] = { 0x02, 0, 0, 0, 0x11, 0x01 };
static uint64_t t0;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool has(const struct rcv *r, uint64_t g)
{
	return r->have[(g & (RING - 1)) >> 3] & (1u << (g & 7));
}

static void set_has(struct rcv *r, uint64_t g)
{
	r->have[(g & (RING - 1)) >> 3] |= (uint8_t)(1u << (g & 7));
}

static int open_if(const char *name, int *idx, bool rx)
{
	int fd = socket(AF_PACKET, SOCK_RAW, rx ? htons(ETH_P_ALL) : 0);
	struct sockaddr_ll sa = { .sll_family = AF_PACKET };
	int one = 1, big = 64 << 20;

	if (fd < 0) {
		perror("socket(AF_PACKET)");
		exit(2);
	}
	*idx = (int)if_nametoindex(name);
	if (*idx == 0) {
		fprintf(stderr, "il-uto-members: interface '%s' not found\n", name);
		exit(2);
	}
	sa.sll_ifindex = *idx;
	sa.sll_protocol = rx ? htons(ETH_P_ALL) : 0;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		perror("bind");
		exit(2);
	}
	setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
	return fd;
}

/* Ethernet/IPv4/UDP to the group (from src_ip, TTL 16), then header h;
 * the body (body bytes) follows it, at *b. Returns the frame's length. */
static unsigned frame(uint8_t *f, struct il_hdr_fields h, unsigned body, uint32_t src_ip,
		      uint8_t **b)
{
	struct il_path p = { .src_ip = src_ip, .src_port = 5000, .dst_port = o.udp_port,
			     .ttl = 16 };

	memcpy(p.src_mac, mac_src, 6);
	il_path_mcast(&p, o.mcast);
	h.group_id = o.group;
	*b = il_frame_put(f, &p, 0, &h, (uint16_t)body);
	return H + IL_HDR_LEN + body;
}

/* Frames queued per socket and sent with one sendmmsg per loop iteration:
 * the ACKs of all emulated receivers (they reach their ACK points on the
 * same frames), heartbeats, JOINs and the senders' DATA. A sendto per
 * frame made the emulator's syscalls grow with the receiver count. */
#define TXQ 96
static struct txq {
	int *fd, *idx;
	unsigned n;
	unsigned len[TXQ];
	uint8_t f[TXQ][1600];
} q_in = { .fd = &txfd, .idx = &txidx }, q_out = { .fd = &rxfd, .idx = &rxidx };

static unsigned tx_flush(struct txq *q)
{
	struct sockaddr_ll sa = { .sll_family = AF_PACKET, .sll_ifindex = *q->idx, .sll_halen = 6 };
	struct mmsghdr mm[TXQ];
	struct iovec iov[TXQ];
	unsigned n = q->n, done = 0;

	if (n == 0)
		return 0;
	memcpy(sa.sll_addr, q->f[0], 6); /* all to the group's MAC */
	for (unsigned i = 0; i < n; i++) {
		iov[i] = (struct iovec){ q->f[i], q->len[i] };
		memset(&mm[i], 0, sizeof(mm[i]));
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
		mm[i].msg_hdr.msg_name = &sa;
		mm[i].msg_hdr.msg_namelen = sizeof(sa);
	}
	while (done < n) {
		int k = sendmmsg(*q->fd, mm + done, n - done, 0);

		c.tx_calls++;
		if (k <= 0)
			break;
		done += (unsigned)k;
	}
	for (unsigned i = 0; i < done; i++)
		if (q->f[i][H + IL_OFF_TYPE] == IL_T_DATA)
			c.data_frames_tx++;
	c.frames_tx += done;
	c.send_fail += n - done;
	q->n = 0;
	return done;
}

/* Room for the next frame of q (flushing it when full). */
static uint8_t *tx_slot(struct txq *q)
{
	if (q->n == TXQ)
		tx_flush(q);
	return q->f[q->n];
}

/* --auth-keys: the key control messages are signed with, and the one
 * counter all emulated members draw from (each member's counters then
 * still increase, which is all its replay window asks). */
static const struct il_auth_key *auth_key;
static struct il_auth_keyring auth_ring;
static uint64_t auth_ctr;

static void auth_setup(void)
{
	char err[512];

	if (o.auth_keys == NULL)
		return;
	if (il_auth_keys_load(o.auth_keys, &auth_ring, err, sizeof(err))) {
		fprintf(stderr, "il-uto-members: --auth-keys: %s\n", err);
		exit(2);
	}
	auth_key = o.auth_key_id ? il_auth_key_find(&auth_ring, o.auth_key_id) : &auth_ring.k[0];
	if (auth_key == NULL) {
		fprintf(stderr, "il-uto-members: --auth-key-id %u: no such key in '%s'\n",
			o.auth_key_id, o.auth_keys);
		exit(2);
	}
	auth_ctr = il_auth_counter_start();
}

/* With --auth-keys, the appliance's STABLE, VIEW, CREDIT and UNAVAIL frames must
 * be signed and fresh (one replay window per sender_id); others are
 * dropped and counted (auth_bad_mac, auth_replay). Checked once, as they
 * arrive: frames held back during a sequencer restart are not again. */
static bool auth_ok(const uint8_t *f, unsigned len)
{
	static uint8_t rbuf[sizeof(struct il_auth_replay) + 256 * sizeof(struct il_auth_win)];
	struct il_auth_replay *r = (struct il_auth_replay *)rbuf;
	static bool init;
	struct il_parsed p;

	if (auth_key == NULL || il_parse_frame(f, len, o.udp_port, &p) != IL_V_CONTROL ||
	    (p.type != IL_T_STABLE && p.type != IL_T_VIEW && p.type != IL_T_CREDIT &&
	     p.type != IL_T_UNAVAIL))
		return true;
	if (!init) {
		il_auth_replay_init(r, 256);
		init = true;
	}
	switch (il_auth_verify(&auth_ring, r, f + p.il_off, p.payload_len)) {
	case IL_AUTH_OK:
		return true;
	case IL_AUTH_BAD_MAC:
		c.auth_bad_mac++;
		return false;
	default:
		c.auth_replay++;
		return false;
	}
}

static void tx_commit(struct txq *q, unsigned len)
{
	if (auth_key != NULL && q->f[q->n][H + IL_OFF_TYPE] != IL_T_DATA)
		len = il_auth_seal_frame(auth_key, ++auth_ctr, q->f[q->n], len);
	q->len[q->n++] = len;
}

static void send_member(uint8_t type, uint32_t id, uint32_t roles, uint32_t inc)
{
	struct il_hdr_fields h = { .type = type, .sender_id = id, .epoch = epoch };
	uint8_t *b;
	unsigned len = frame(tx_slot(&q_in), h, IL_MEMBER_MSG_LEN, 0x0a000000u | id, &b);

	il_member_put(b, roles, inc);
	tx_commit(&q_in, len);
	if (type == IL_T_JOIN)
		c.join_tx++;
	else if (type == IL_T_HEARTBEAT)
		c.hb_tx++;
}

static uint64_t buffered(const struct rcv *r)
{
	return r->hi > r->uto ? r->hi - r->uto : 0;
}

static void send_ack(struct rcv *r, uint64_t now)
{
	uint64_t held = buffered(r);
	uint8_t *b;
	unsigned len = frame(tx_slot(&q_in),
			     (struct il_hdr_fields){ .type = IL_T_ACK, .sender_id = r->id,
						     .epoch = epoch, .global_seq = r->po },
			     IL_ACK_LEN, 0x0a000000u | r->id, &b);

	il_ack_put(b, r->view, (uint32_t)(held < o.buffer ? o.buffer - held : 0));
	tx_commit(&q_in, len);
	r->acked = r->po;
	r->last_ack_ns = now;
	c.ack_tx++;
}

static void send_nak(struct rcv *r, uint64_t first, uint64_t last, uint64_t now)
{
	uint8_t *b;
	unsigned len = frame(tx_slot(&q_out),
			     (struct il_hdr_fields){ .type = IL_T_NAK, .sender_id = r->id,
						     .epoch = epoch },
			     IL_RANGE_LEN, 0x0a000000u | r->id, &b);

	if (last - first >= IL_NAK_MAX_SPAN)
		last = first + IL_NAK_MAX_SPAN - 1;
	il_range_put(b, first, last);
	tx_commit(&q_out, len);
	r->last_nak_ns = now;
	c.nak_tx++;
}

static bool live_member(const struct rcv *r)
{
	return r->st == R_MEMBER || r->st == R_SILENT;
}

/* Deliver what can be: PO in order without gaps, UTO below the watermark. */
static void deliver(struct rcv *r, uint64_t now)
{
	if (r->st != R_MEMBER)
		return;
	while (r->po < r->hi && has(r, r->po)) {
		struct msgrec *m = &msgs[r->po & (RING - 1)];

		if (m->sent_ns)
			hist(lat_po, now - m->sent_ns);
		if (m->po_ns == 0)
			m->po_ns = now;
		r->po++;
		r->po_n++;
	}
	while (r->uto < r->po && r->uto < stable) {
		const struct msgrec *m = &msgs[r->uto & (RING - 1)];

		/* Uniform: every live member of the view that is responsible
		 * for this sequence holds it. */
		for (unsigned k = 0; k < o.nr && !o.no_check; k++)
			if (&R[k] != r && live_member(&R[k]) && R[k].start <= r->uto &&
			    !has(&R[k], r->uto))
				c.uniform_violations++;
		r->uto++;
		/* A message its sender re-sent is stamped twice: every
		 * receiver sees both copies in the same order, so all skip
		 * the same one (the second). */
		unsigned si = m->sender >= 1 && m->sender <= o.ns ? m->sender - 1 : MAXS;
		if (si < MAXS && m->sseq <= o.count) {
			uint8_t *e = &r->got[si][m->sseq];

			if (*e) {
				if (*e != (uint8_t)c.epochs)
					r->redelivered++;
				r->dup_skipped++;
				continue;
			}
			*e = (uint8_t)c.epochs;
		}
		if (m->sent_ns) {
			hist(lat_uto, now - m->sent_ns);
			hist(lat_diff, now - m->po_ns);
		}
		r->uto_n++;
	}
}

/* A DATA frame (the parser checked its records). */
static void on_data(const uint8_t *h, const uint8_t *b)
{
	uint64_t g = il_get64(h + IL_OFF_GLOBAL_SEQ);
	uint16_t cnt = il_get16(h + IL_OFF_MSG_COUNT);
	uint32_t sender = il_get32(h + IL_OFF_SENDER_ID);
	uint64_t sseq = il_get64(h + IL_OFF_SENDER_SEQ);

	if (h[IL_OFF_FLAGS] & IL_F_STABLE_VALID && il_get64(h + IL_OFF_STABLE_SEQ) > stable)
		stable = il_get64(h + IL_OFF_STABLE_SEQ);
	c.data_rx++;
	if (g + cnt > c.max_g)
		c.max_g = g + cnt;
	for (uint16_t i = 0; i < cnt; i++) {
		uint64_t gi = g + i;
		struct msgrec *m = &msgs[gi & (RING - 1)];
		uint16_t len = il_get16(b);
		uint64_t sent = len >= 8 ? il_get64(b + 4) : 0;

		if (m->g == gi) {
			c.data_dup++;
			if (m->sender != sender || m->sseq != sseq + i)
				c.disagreements++;
		} else {
			*m = (struct msgrec){ .g = gi, .sender = sender, .sseq = sseq + i,
					      .sent_ns = sent };
			for (unsigned s = 0; s < o.ns; s++)
				if (S[s].id == sender && sseq + i <= o.count) {
					if (S[s].gseq[sseq + i])
						c.restamped++; /* re-sent, stamped twice */
					else
						S[s].gseq[sseq + i] = gi;
				}
		}
		for (unsigned k = 0; k < o.nr; k++) {
			struct rcv *r = &R[k];

			if (r->st == R_IDLE || r->st == R_DEAD)
				continue;
			if (r->st == R_MEMBER && gi >= r->uto + o.buffer) {
				r->buffer_drops++; /* no room: as if lost */
				continue;
			}
			set_has(r, gi);
			if (gi + 1 > r->hi)
				r->hi = gi + 1;
		}
		b += 4 + len;
	}
}

static void on_view(const uint8_t *h, const uint8_t *body, unsigned body_len, uint64_t now)
{
	struct il_view_body v;
	uint64_t start = il_get64(h + IL_OFF_GLOBAL_SEQ);

	if (il_view_get(body, body_len, &v) != 0)
		return;
	c.view_rx++;
	for (unsigned k = 0; k < o.nr; k++) {
		struct rcv *r = &R[k];
		bool in = il_view_has(&v, r->id);

		if (r->st == R_DEAD && !in && r->excluded_after_s == 0)
			r->excluded_after_s = (double)(now - r->killed_ns) / 1e9;
		if (r->st == R_JOINING && in) {
			/* Fast-Join: the stream starts at the view's start, and
			 * each sender's next message there is in the list. */
			r->n_fj = v.n_senders < MAXS ? v.n_senders : MAXS;
			for (unsigned i = 0; i < r->n_fj; i++) {
				r->fj_sender[i] = il_view_sender_id(&v, i);
				r->fj_next[i] = il_view_sender_next(&v, i);
			}
			r->st = R_MEMBER;
			r->start = r->po = r->uto = start;
			if (r->hi < start)
				r->hi = start;
			r->view = v.view_id;
			r->joined_ns = now;
		} else if (r->st == R_MEMBER && in) {
			r->view = v.view_id;
		} else if ((r->st == R_MEMBER || r->st == R_SILENT) && !in) {
			/* Excluded (wrongly, since it is alive): rejoin afresh. */
			if (r->st == R_MEMBER) {
				r->st = R_JOINING;
				r->whole = false;
				r->inc++;
				r->rejoins++;
				r->last_join_ns = 0;
			}
			r->excluded_at_ns = now;
		}
	}
	for (unsigned s = 0; s < o.ns; s++)
		if (il_view_has(&v, S[s].id))
			S[s].member = true;
}

#define MAXPEND 65536
static struct pend {
	unsigned len;
	uint8_t f[1536];
} *pend;
static unsigned n_pend;
static uint32_t old_epoch;
static bool awaiting;
static uint64_t await_deadline;
static void on_frame(const uint8_t *f, unsigned len, uint64_t now);
static void sender_update(struct snd *s);

/* End of an epoch at watermark w: U-deliver what is below it (every live
 * receiver holds it), forget the rest (its senders send it again), and
 * start the new sequence space. */
static void finalize(uint64_t w, uint64_t now)
{
	if (w > stable)
		stable = w;
	for (unsigned k = 0; k < o.nr; k++) {
		struct rcv *r = &R[k];

		deliver(r, now);
		if (r->st == R_MEMBER && r->uto < stable)
			c.lost_stable += stable - r->uto;
		r->start = r->po = r->uto = r->hi = 1;
		r->acked = 0;
		r->gap_ns = 0;
		memset(r->have, 0, RING / 8);
	}
	for (unsigned i = 0; i < o.ns; i++) {
		struct snd *sd = &S[i];

		sender_update(sd);
		for (uint64_t q = sd->stable_next; q < sd->next && q <= o.count; q++)
			sd->gseq[q] = 0;
		if (sd->stable_next < sd->next)
			sd->rewound += sd->next - sd->stable_next;
		sd->next = sd->unseen = sd->stable_next;
		sd->unseen_ns = now;
	}
	memset(msgs, 0, RING * sizeof(*msgs));
	stable = 0;
	c.max_g = 0;
	c.finals++;
	awaiting = false;
	unsigned n = n_pend;
	n_pend = 0;
	for (unsigned i = 0; i < n; i++)
		on_frame(pend[i].f, pend[i].len, now);
}

static void on_frame(const uint8_t *f, unsigned len, uint64_t now)
{
	struct il_parsed p;
	enum il_verdict v = il_parse_frame(f, len, o.udp_port, &p);

	if ((v != IL_V_DATA && v != IL_V_CONTROL) || p.il_off != H || p.group_id != o.group)
		return;
	const uint8_t *h = f + H;
	uint32_t e = il_get32(h + IL_OFF_EPOCH);
	uint8_t type = h[IL_OFF_TYPE];
	if (type != IL_T_DATA && type != IL_T_STABLE && type != IL_T_VIEW &&
	    type != IL_T_CREDIT && type != IL_T_UNAVAIL)
		return;
	if (type == IL_T_STABLE && il_get64(h + IL_OFF_GLOBAL_SEQ) == 0) {
		/* The final watermark of a data plane that died. */
		if (e == old_epoch && awaiting)
			finalize(il_get64(h + IL_OFF_STABLE_SEQ), now);
		else if (e == epoch && il_get64(h + IL_OFF_STABLE_SEQ) > stable)
			stable = il_get64(h + IL_OFF_STABLE_SEQ);
		return;
	}
	if (e != epoch) {
		if (epoch != 0 && !il_epoch_after(e, epoch)) {
			/* A late frame of an older epoch (an appliance that was
			 * replaced, docs/ha.md): ignored, counted. */
			c.stale_epoch++;
			return;
		}
		if (epoch != 0) {
			/* The sequencer restarted: hold the new stream until the
			 * old one's final watermark says what was stable. */
			old_epoch = epoch;
			awaiting = true;
			await_deadline = now + 3000000000ull;
		}
		epoch = e;
		c.epochs++;
	}
	if (awaiting) {
		if (n_pend < MAXPEND) {
			pend[n_pend].len = len < sizeof(pend[0].f) ? len : sizeof(pend[0].f);
			memcpy(pend[n_pend].f, f, pend[n_pend].len);
			n_pend++;
		}
		return;
	}
	switch (type) {
	case IL_T_DATA:
		on_data(h, h + p.hdr_len);
		break;
	case IL_T_STABLE:
		c.stable_rx++;
		if (il_get64(h + IL_OFF_STABLE_SEQ) > stable)
			stable = il_get64(h + IL_OFF_STABLE_SEQ);
		/* A lost tail shows as next > what we hold: NAK it. */
		for (unsigned k = 0; k < o.nr; k++)
			if (R[k].st == R_MEMBER && il_get64(h + IL_OFF_GLOBAL_SEQ) > R[k].hi)
				R[k].hi = il_get64(h + IL_OFF_GLOBAL_SEQ);
		break;
	case IL_T_VIEW:
		on_view(h, h + p.hdr_len, p.payload_len - p.hdr_len, now);
		break;
	case IL_T_CREDIT: {
		struct il_credit_body cr;

		if (il_credit_get(h + p.hdr_len, p.payload_len - p.hdr_len, &cr) != 0)
			break;
		c.credit_rx++;
		for (unsigned s = 0; s < o.ns; s++) {
			uint64_t rs = il_get64(h + IL_OFF_SENDER_SEQ);

			if (S[s].id != il_get32(h + IL_OFF_SENDER_ID))
				continue;
			if (cr.limit_seq > S[s].limit)
				S[s].limit = cr.limit_seq;
			/* A resume notice: frames from rs on were refused (one
			 * before them never reached the sequencer): go back. */
			if (rs && rs >= S[s].stable_next && rs < S[s].next) {
				S[s].rewound += S[s].next - rs;
				S[s].next = rs;
			}
		}
		break;
	}
	case IL_T_UNAVAIL:
		c.unavail_rx++;
		break;
	}
}

static void receiver_timers(struct rcv *r, uint64_t now)
{
	if (r->st == R_JOINING && now - r->last_join_ns > 50000000ull) {
		send_member(IL_T_JOIN, r->id, IL_ROLE_RECEIVER, r->inc);
		r->last_join_ns = now;
	}
	if (r->st != R_MEMBER && r->st != R_JOINING)
		return;
	if (now - r->last_hb_ns > o.hb_ms * 1000000ull) {
		send_member(IL_T_HEARTBEAT, r->id, IL_ROLE_RECEIVER, r->inc);
		r->last_hb_ns = now;
	}
	if (r->st != R_MEMBER)
		return;
	if (awaiting)
		return; /* its sequence numbers belong to an epoch that ended */
	if (r->po >= r->acked + o.ack_every ||
	    (now - r->last_ack_ns > o.ack_us * 1000ull && (r->po != r->acked ||
							  now - r->last_ack_ns > 50000000ull)))
		send_ack(r, now);
	/* A gap that lasts: ask for it, and again every nak_us. Frames come
	 * in order through one socket, so 300 us is not reordering. */
	if (r->hi > r->po && !has(r, r->po)) {
		if (r->gap_ns == 0 || r->gap_po != r->po) {
			r->gap_ns = now;
			r->gap_po = r->po;
		} else if (now - r->gap_ns > 300000ull &&
			   now - r->last_nak_ns > o.nak_us * 1000ull) {
			uint64_t last = r->po;

			while (last + 1 < r->hi && !has(r, last + 1))
				last++;
			send_nak(r, r->po, last, now);
		}
	} else {
		r->gap_ns = 0;
	}
}

/* Senders are group members too: a frame this process never saw (its
 * socket or the veth backlog dropped it) is asked for again even when no
 * receiver would (all dead), or a sender would never learn its fate. */
static void stream_repair(uint64_t now)
{
	static uint64_t low = 1, since, last_nak;

	if (awaiting)
		return;
	/* A new epoch, or far behind. (max_g + 1 - RING / 2 would wrap below
	 * RING / 2 and send low back to 1 on every call: a rescan of the
	 * whole stream per loop, which was most of this process's time.) */
	if (low > c.max_g + 1 || low + RING / 2 < c.max_g + 1)
		low = 1;
	while (low < c.max_g && msgs[low & (RING - 1)].g == low)
		low++;
	if (low >= c.max_g || c.max_g == 0) {
		since = 0;
		return;
	}
	if (since == 0)
		since = now;
	if (now - since < 2000000ull || now - last_nak < 2000000ull)
		return;
	uint64_t last = low;
	while (last + 1 < c.max_g && msgs[(last + 1) & (RING - 1)].g != last + 1)
		last++;
	struct rcv fake = { .id = S[0].id };
	send_nak(&fake, low, last, now);
	last_nak = now;
}

/* Sender s's next message: 8-byte send time in the payload. */
static unsigned data_frame(uint8_t *f, struct snd *s, uint64_t now)
{
	unsigned payload = o.size < 12 ? 12 : o.size;
	uint8_t *b;
	/* stable_seq: our oldest not known stable, which the appliance's
	 * FIFO check learns from (epoch 0: the appliance stamps it). */
	unsigned len = frame(f,
			     (struct il_hdr_fields){ .type = IL_T_DATA, .msg_count = 1,
						     .sender_id = s->id, .sender_seq = s->next,
						     .stable_seq = s->stable_next },
			     IL_MSG_HDR_LEN + payload, 0x0a000000u | s->id, &b);

	b = il_rec_put(b, (uint16_t)payload);
	il_put64(b, now);
	il_put32(b + 8, s->id);
	memset(b + 12, 0, payload - 12);
	return len;
}

static void sender_update(struct snd *s)
{
	while (s->stable_next < s->next && s->gseq[s->stable_next] &&
	       s->gseq[s->stable_next] < stable)
		s->stable_next++;
	if (s->next - s->stable_next > s->max_unstable)
		s->max_unstable = s->next - s->stable_next;
}

static bool all_done(void)
{
	for (unsigned s = 0; s < o.ns; s++)
		if (S[s].next <= o.count)
			return false;
	return true;
}

/* Event times count from the first DATA sent, so that a slow start on a
 * loaded machine does not move them before the stream. */
static uint64_t t_data0;
static void run_events(uint64_t now)
{
	if (t_data0 == 0)
		return;
	double t = (double)(now - t_data0) / 1e9;

	for (unsigned i = 0; i < o.n_ev; i++) {
		struct ev *e = &o.ev[i];
		struct rcv *r = &R[e->r];

		if (e->done || t < e->at)
			continue;
		if (e->k == EV_KILL) {
			r->st = R_DEAD;
			r->killed_ns = now;
			e->done = true;
		} else if (e->k == EV_LATE) {
			r->st = R_JOINING;
			e->done = true;
		} else if (e->k == EV_SILENT) {
			/* until 0: silent until excluded, however long the
			 * detectors take on a loaded machine. */
			bool over = e->until > 0 ? t >= e->until : r->excluded_at_ns != 0;

			if (r->st == R_MEMBER && !over) {
				r->st = R_SILENT;
				r->whole = false;
				r->excluded_at_ns = 0;
			} else if (r->st == R_SILENT && over) {
				e->done = true;
				if (r->excluded_at_ns == 0) {
					/* Back before the slow detector fired: a
					 * false suspicion at most, still a member. */
					r->st = R_MEMBER;
					continue;
				}
				/* Back: it saw a VIEW without itself, so it
				 * rejoins with a new incarnation. */
				r->st = R_JOINING;
				r->inc++;
				r->rejoins++;
				r->last_join_ns = 0;
			}
		}
	}
}

static bool finished(void)
{
	if (awaiting || !all_done() || stable < c.max_g)
		return false;
	for (unsigned s = 0; s < o.ns; s++)
		if (S[s].unseen <= o.count)
			return false;
	for (unsigned k = 0; k < o.nr; k++)
		if (R[k].st == R_MEMBER && R[k].uto < c.max_g)
			return false;
		else if (R[k].st == R_JOINING || R[k].st == R_SILENT)
			return false;
	return true;
}

static void senders(uint64_t now, double *tokens)
{
	unsigned n = 0; /* DATA frames this call: 32 at most */
	static unsigned rr;

	for (unsigned i = 0; i < o.ns; i++) {
		struct snd *s = &S[i];

		if (!s->member && now - s->last_join_ns > 50000000ull) {
			send_member(IL_T_JOIN, s->id, IL_ROLE_SENDER, 1);
			s->last_join_ns = now;
		}
		if (s->member && now - s->last_join_ns > o.hb_ms * 1000000ull) {
			send_member(IL_T_HEARTBEAT, s->id, IL_ROLE_SENDER, 1);
			s->last_join_ns = now;
		}
		sender_update(s);
		while (s->unseen < s->next && s->gseq[s->unseen]) {
			s->unseen++;
			s->unseen_ns = now;
		}
		/* Lost before the appliance (never stamped): after resend_ms
		 * without progress, send again every message not yet seen
		 * stamped, a burst per loop (a restart can lose a window). */
		if (s->unseen < s->next && now - s->unseen_ns > o.resend_ms * 1000000ull) {
			if (s->resend_at < s->unseen || s->resend_at >= s->next)
				s->resend_at = s->unseen;
			while (n < 32 && s->resend_at < s->next) {
				uint64_t keep = s->next, q = s->resend_at++;

				if (s->gseq[q])
					continue;
				s->next = q;
				uint8_t *f = tx_slot(&q_in);
				tx_commit(&q_in, data_frame(f, s, now));
				s->next = keep;
				n++;
				s->resent++;
			}
			if (s->resend_at >= s->next)
				s->unseen_ns = now; /* a round done: wait again */
		}
	}
	while (n < 32 && (o.rate <= 0 || *tokens >= 1.0)) {
		struct snd *s = NULL;

		for (unsigned k = 0; k < o.ns && s == NULL; k++) {
			struct snd *q = &S[(rr + k) % o.ns];

			if (!q->member || q->next > o.count)
				continue;
			if ((o.need_credit || q->limit) && q->next >= q->limit)
				continue;
			s = q;
			rr = (rr + k + 1) % o.ns;
		}
		if (s == NULL)
			break;
		uint8_t *f = tx_slot(&q_in);
		tx_commit(&q_in, data_frame(f, s, now));
		n++;
		if (s->next == s->unseen)
			s->unseen_ns = now;
		s->next++;
		sender_update(s);
		c.data_tx++;
		if (o.rate > 0)
			*tokens -= 1.0;
	}
}

/* Nothing came in and nothing went out: wait for a frame (a CREDIT, the
 * next DATA) instead of spinning, up to the next token of a paced sender
 * and at most 100 us (the ACK and NAK timers). Spinning beside the control
 * process on one CPU took its time, and hid this process's own cost. */
static void idle_wait(double tokens)
{
	uint64_t ns = 100000;
	struct pollfd p = { .fd = rxfd, .events = POLLIN };

	if (o.rate > 0 && tokens < 1.0 && (1.0 - tokens) * 1e9 / o.rate < (double)ns)
		ns = (uint64_t)((1.0 - tokens) * 1e9 / o.rate);
	if (o.rate > 0 && tokens >= 1.0)
		return;
	if (ns < 5000)
		return;
	struct timespec ts = { 0, (long)ns };
	c.waits++;
	ppoll(&p, 1, &ts, NULL);
}

int main(int argc, char **argv)
{
	static uint8_t buf[64][2048];
	struct mmsghdr mm[64];
	struct iovec iov[64];
	double tokens = 0, t_first = 0, t_last = 0;
	uint64_t last_tok, done_ns = 0;
	bool ok;

	signal(SIGPIPE, SIG_IGN); /* a closed stdout must not end the run */
	parse(argc, argv);
	auth_setup();
	msgs = calloc(RING, sizeof(*msgs));
	pend = calloc(MAXPEND, sizeof(*pend));
	for (unsigned k = 0; k < o.nr; k++) {
		R[k].id = 1001 + k;
		R[k].inc = 1;
		R[k].st = R_JOINING;
		R[k].whole = true;
		R[k].have = calloc(RING / 8, 1);
		for (unsigned i = 0; i < o.ns; i++)
			R[k].got[i] = calloc(o.count + 2, 1);
		for (unsigned i = 0; i < o.n_ev; i++)
			if (o.ev[i].k == EV_LATE && o.ev[i].r == k) {
				R[k].st = R_IDLE;
				R[k].whole = false;
			}
	}
	for (unsigned i = 0; i < o.ns; i++) {
		S[i].id = 1 + i;
		S[i].next = S[i].stable_next = S[i].unseen = 1;
		S[i].gseq = calloc(o.count + 2, sizeof(uint64_t));
	}
	prctl(PR_SET_TIMERSLACK, 1000UL); /* idle_wait's 100 us, not 150 */
	txfd = open_if(o.tx_if, &txidx, false);
	rxfd = open_if(o.rx_if, &rxidx, true);
	t0 = last_tok = now_ns();
	for (unsigned i = 0; i < 64; i++) {
		iov[i] = (struct iovec){ buf[i], sizeof(buf[i]) };
		memset(&mm[i], 0, sizeof(mm[i]));
	}
	for (uint64_t prev = now_ns();;) {
		uint64_t now = now_ns();
		double t = (double)(now - t0) / 1e9;

		if (now - prev > c.max_gap_ns)
			c.max_gap_ns = now - prev;
		prev = now;
		run_events(now);
		if (awaiting && now > await_deadline)
			finalize(stable, now); /* never came: what we know is safe */
		for (unsigned i = 0; i < 64; i++) {
			mm[i].msg_hdr.msg_iov = &iov[i];
			mm[i].msg_hdr.msg_iovlen = 1;
		}
		int n = recvmmsg(rxfd, mm, 64, MSG_DONTWAIT, NULL);
		c.rx_calls++;
		c.loops++;
		now = now_ns();
		for (int i = 0; i < n; i++)
			if (auth_ok(buf[i], mm[i].msg_len))
				on_frame(buf[i], mm[i].msg_len, now);
		for (unsigned k = 0; k < o.nr; k++) {
			deliver(&R[k], now);
			receiver_timers(&R[k], now);
		}
		stream_repair(now);
		if (o.rate > 0) {
			tokens += (double)(now - last_tok) * o.rate / 1e9;
			if (tokens > 64)
				tokens = 64;
		}
		last_tok = now;
		bool was_done = all_done();
		senders(now, &tokens);
		unsigned sent = tx_flush(&q_out) + tx_flush(&q_in);
		if (c.data_tx && t_first == 0) {
			t_first = t;
			t_data0 = now;
		}
		if (!was_done && all_done())
			done_ns = now;
		if (finished()) {
			t_last = t;
			break;
		}
		if (t > o.max_s || (done_ns && now - done_ns > (uint64_t)(o.settle_s * 1e9))) {
			t_last = t;
			break;
		}
		if (n <= 0 && sent == 0)
			idle_wait(tokens);
	}
	report((double)(now_ns() - t0) / 1e9, t_first, t_last);
	ok = finished() && c.disagreements == 0 && c.uniform_violations == 0 &&
	     c.lost_stable == 0;
	for (unsigned k = 0; k < o.nr; k++)
		ok = ok && R[k].redelivered == 0;
	for (unsigned k = 0; k < o.nr; k++)
		ok = ok && R[k].buffer_drops == 0;
	for (unsigned i = 0; i < o.ns; i++)
		ok = ok && (o.window == 0 || S[i].max_unstable <= o.window);
	return ok ? 0 : 1;
}
