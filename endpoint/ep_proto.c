/* SPDX-License-Identifier: BSD-3-Clause
 * libinterlink's protocol (docs/libinterlink.md, docs/wire-format.md):
 * frames out (DATA packed from the deferred queue within the credit
 * window, ACK, NAK, JOIN, LEAVE, HEARTBEAT), frames in (stamped DATA,
 * STABLE, VIEW, CREDIT, UNAVAIL), the timers, and the two deliveries.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <interlink/parse.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "ep_priv.h"

static uint8_t ep_stack_frame[EP_FRAME_MAX];

/* A frame buffer: from the ring's pool, or (pool exhausted) a scratch one
 * sent synchronously by tx_commit. *slot is -1 for the scratch buffer. */
static uint8_t *tx_begin(struct il_ep *ep, int *slot)
{
	if (ep->n_tx_free == 0) {
		/* Every buffer is in flight. The sends queued before this one
		 * must leave first: submitting issues them (a UDP send
		 * completes inline), then tx_commit sends this one itself. */
		if (ep->ring_ok)
			io_uring_submit(&ep->ring);
		*slot = -1;
		return ep_stack_frame;
	}
	*slot = (int)ep->tx_free[--ep->n_tx_free];
	return ep->tx[*slot].data;
}

static void tx_commit_to(struct il_ep *ep, const struct sockaddr_in *to, int slot, size_t len)
{
	if (ep->tx_tap != NULL) {
		/* Detached: the frame is handed over, its buffer free again. */
		ep->tx_tap(ep->tx_tap_arg, slot >= 0 ? ep->tx[slot].data : ep_stack_frame, len);
		if (slot >= 0)
			ep->tx_free[ep->n_tx_free++] = (unsigned)slot;
		return;
	}
	struct io_uring_sqe *sqe = slot >= 0 ? ep_sqe(ep) : NULL;

	if (sqe == NULL) {
		/* Every frame buffer is in flight (or the ring is full): the
		 * plain system call keeps the order and costs no buffer. */
		const uint8_t *d = slot >= 0 ? ep->tx[slot].data : ep_stack_frame;

		ep->st.tx_sync++;
		if (sendto(ep->txfd, d, len, 0, (const struct sockaddr *)to, sizeof(*to)) !=
		    (ssize_t)len)
			ep->st.tx_fail++;
		if (slot >= 0)
			ep->tx_free[ep->n_tx_free++] = (unsigned)slot;
		return;
	}
	struct ep_txbuf *b = &ep->tx[slot];
	b->to = *to;
	b->iov = (struct iovec){ b->data, len };
	b->mh = (struct msghdr){ .msg_name = &b->to, .msg_namelen = sizeof(b->to),
				 .msg_iov = &b->iov, .msg_iovlen = 1 };
	io_uring_prep_sendmsg(sqe, ep->txfd, &b->mh, 0);
	io_uring_sqe_set_data64(sqe, EP_UD_TX | (unsigned)slot);
}

static void tx_commit(struct il_ep *ep, struct ep_group *g, int slot, size_t len)
{
	tx_commit_to(ep, &g->dst, slot, len);
}

void ep_send_to(struct il_ep *ep, const uint8_t *d, size_t len, const struct sockaddr_in *to)
{
	int slot;
	uint8_t *f = tx_begin(ep, &slot);

	memcpy(f, d, len);
	tx_commit_to(ep, to, slot, len);
}

/* The header of what we send to group g: from us (member_id), in our
 * epoch except DATA (the appliance drops an ACK of another epoch; DATA
 * leaves it 0 for the appliance to stamp). Callers add what differs. */
static struct il_hdr_fields hdr(const struct il_ep *ep, const struct ep_group *g, uint8_t type)
{
	return (struct il_hdr_fields){ .type = type, .group_id = g->id,
				       .sender_id = ep->member_id,
				       .epoch = type != IL_T_DATA ? ep->epoch : 0 };
}

void ep_send_member(struct il_ep *ep, struct ep_group *g, uint8_t type)
{
	int slot;
	uint8_t *h = tx_begin(ep, &slot);
	struct il_hdr_fields f = hdr(ep, g, type);

	il_member_put(il_hdr_put(h, &f), g->roles, ep->incarnation);
	tx_commit(ep, g, slot, ep_auth_seal(ep, h, IL_HDR_LEN + IL_MEMBER_MSG_LEN));
	if (type == IL_T_JOIN)
		ep->st.join_tx++;
	else if (type == IL_T_HEARTBEAT)
		ep->st.hb_tx++;
}

static void send_ack(struct il_ep *ep, struct ep_group *g, uint64_t now)
{
	int slot;
	uint8_t *h = tx_begin(ep, &slot);
	uint64_t fr = ep_rxw_free_msgs(&g->w);
	struct il_hdr_fields f = hdr(ep, g, IL_T_ACK);

	f.global_seq = g->w.po;
	/* The long form (wire.h): the latest new frame and how long we held
	 * it before this ACK (the appliance's RTT sample), and our loss-event
	 * rate. An appliance ignores them in groups that are not WAN. */
	uint64_t held_us = g->echo_seq && now > g->echo_ns ? (now - g->echo_ns) / 1000u : 0;
	double p = il_tfrc_loss_p(&g->loss);
	uint32_t ppm = p >= 1.0 ? IL_ACK_PPM_MAX : (uint32_t)(p * 1e6 + 0.5);
	if (p > 0 && ppm == 0)
		ppm = 1; /* a loss event was seen: never report "none" */
	il_ack_tfrc_put(il_hdr_put(h, &f), g->view_id,
			fr >= UINT32_MAX ? UINT32_MAX - 1 : (uint32_t)fr,
			held_us <= UINT32_MAX ? g->echo_seq : 0,
			held_us <= UINT32_MAX ? (uint32_t)held_us : 0, ppm);
	tx_commit(ep, g, slot, ep_auth_seal(ep, h, IL_HDR_LEN + IL_ACK_TFRC_LEN));
	ep_ack_sent(&g->ack, g->w.po, now);
	ep->st.ack_tx++;
}

static void send_nak(struct il_ep *ep, struct ep_group *g, uint64_t first, uint64_t last)
{
	int slot;
	uint8_t *h = tx_begin(ep, &slot);
	struct il_hdr_fields f = hdr(ep, g, IL_T_NAK);

	il_range_put(il_hdr_put(h, &f), first, last);
	tx_commit(ep, g, slot, ep_auth_seal(ep, h, IL_HDR_LEN + IL_RANGE_LEN));
	ep->st.nak_tx++;
}

/* Where we stand in our epoch, which a newer one replaces (docs/ha.md,
 * "The cut of the old epoch"): the new active takes the cut from these. */
static void send_report(struct il_ep *ep, struct ep_group *g)
{
	int slot;
	uint8_t *h = tx_begin(ep, &slot);
	struct il_hdr_fields f = hdr(ep, g, IL_T_EPOCH_REPORT);

	f.global_seq = g->w.po;
	il_epoch_report_put(il_hdr_put(h, &f), ep->new_epoch, g->view_id, g->w.stable, g->w.hi);
	tx_commit(ep, g, slot, ep_auth_seal(ep, h, IL_HDR_LEN + IL_EPOCH_REPORT_LEN));
	ep->st.epoch_reports++;
}

static void send_reports(struct il_ep *ep, uint64_t now)
{
	for (unsigned i = 0; i < ep->n_slots; i++) {
		struct ep_group *g = &ep->g[i];

		if (g->used && g->st == EP_G_MEMBER && (g->roles & IL_EP_RECEIVER))
			send_report(ep, g);
	}
	ep->report_ns = now;
}

/* What we sent stays until a grant says it is stable: a new sequencer
 * epoch needs it again (docs/control.md section 4 rule 6), and so does a
 * frame lost before the sequencer. Every DATA frame tells the appliance
 * the oldest of it (in stable_seq, which the appliance overwrites), so it
 * notices a lost frame even when it was our first. */
static void remember(struct ep_group *g, const uint8_t *recs, size_t bytes, uint16_t n)
{
	if (g->sent.n == 0)
		g->sent_base = g->cr.next;
	ep_q_append(&g->sent, recs, bytes, n);
}

static void sent_trim(struct ep_group *g)
{
	uint64_t stable_next = g->cr.limit > g->cr.window ? g->cr.limit - g->cr.window : 1;

	while (g->sent.n > 0 && g->sent_base < stable_next) {
		uint16_t n;
		size_t b = ep_q_span(&g->sent, SIZE_MAX, 1, &n);

		ep_q_pop(&g->sent, b, n);
		g->sent_base++;
	}
}

/* The header of a DATA frame of n messages from sender_seq g->cr.next;
 * its records are remembered first, so stable_seq (our oldest message
 * not known stable) counts them. */
static void data_hdr(const struct il_ep *ep, const struct ep_group *g, uint8_t *h, uint16_t n)
{
	struct il_hdr_fields f = hdr(ep, g, IL_T_DATA);

	f.msg_count = n;
	f.sender_seq = g->cr.next;
	f.stable_seq = g->sent_base;
	il_hdr_put(h, &f);
}

/* One DATA frame of n records (already in wire form) starting at sender_seq. */
static void send_data(struct il_ep *ep, struct ep_group *g, const uint8_t *recs, size_t bytes,
		      uint16_t n)
{
	int slot;
	uint8_t *h = tx_begin(ep, &slot);

	memcpy(h + IL_HDR_LEN, recs, bytes);
	remember(g, recs, bytes, n);
	data_hdr(ep, g, h, n);
	tx_commit(ep, g, slot, IL_HDR_LEN + bytes);
	g->tx_bytes += IL_HDR_LEN + bytes;
	g->cr.next += n;
	ep->st.data_tx++;
	ep->st.msgs_tx += n;
	if (n > 1)
		ep->st.msgs_packed += n;
}

/* Go-back-N from sender_seq `from` (the appliance's resume notice, or our
 * own timeout): what we sent from there goes again, first. */
static int64_t go_back(struct ep_group *g, uint64_t from)
{
	sent_trim(g);
	int64_t k = ep_go_back(&g->q, &g->sent, g->sent_base, &g->cr.next, from);

	if (k > 0)
		g->watch_ns = 0; /* the timeout starts again */
	return k;
}

/* Our oldest message not known stable has stayed so for resend_ms: the
 * appliance may never have seen it, and its notice may have been lost. */
static void resend_timer(struct il_ep *ep, struct ep_group *g, uint64_t now)
{
	if (ep->cfg.resend_ms == 0 || ep->awaiting || g->sent.n == 0) {
		g->watch_ns = 0;
		return;
	}
	if (g->watch_ns == 0 || g->watch_base != g->sent_base) {
		g->watch_base = g->sent_base;
		g->watch_ns = now;
		return;
	}
	if (now - g->watch_ns < (uint64_t)ep->cfg.resend_ms * 1000000u)
		return;
	int64_t k = go_back(g, g->sent_base);
	g->watch_base = g->sent_base;
	g->watch_ns = now;
	if (k > 0) {
		ep->st.resend_timeouts++;
		ep->st.resent_timeout += (uint64_t)k;
	}
}

/* Deferred messages go as the window opens, packed into MTU-sized frames:
 * a grant of k messages sends them in as few frames as fit. */
static void drain(struct il_ep *ep, struct ep_group *g, uint64_t now)
{
	size_t room = ep_frame_room(ep, g) - IL_HDR_LEN;

	if (g->st != EP_G_MEMBER)
		return;
	while (g->q.n > 0) {
		uint64_t credit = ep_credit_room(&g->cr);
		uint16_t n;

		if (credit == 0)
			return;
		size_t bytes = ep_q_span(&g->q, room, credit, &n);
		if (n == 0 && room < ep->max_frame - IL_HDR_LEN)
			/* a message longer than a LEC group's frames: alone,
			 * in a frame LEC cannot protect (NAK still does) */
			bytes = ep_q_span(&g->q, ep->max_frame - IL_HDR_LEN, 1, &n);
		if (n == 0)
			return;
		/* WAN groups: the rate too (the frame waits whole). */
		if (!ep_pace_take(&g->pace, IL_HDR_LEN + bytes, now))
			return;
		send_data(ep, g, ep_q_head(&g->q), bytes, n);
		ep_q_pop(&g->q, bytes, n);
	}
}

int il_ep_send(struct il_ep *ep, uint16_t group, const void *msg, size_t len)
{
	struct ep_group *g = ep_group(ep, group);

	if (g == NULL)
		return -ENOENT;
	if (!(g->roles & IL_EP_SENDER))
		return -EPERM;
	if (len == 0 || len > ep->max_frame - IL_HDR_LEN - IL_MSG_HDR_LEN)
		return -EMSGSIZE;
	/* Undeferred: straight out, alone, with no added latency (thesis
	 * 3.4.2: only what flow control holds back is packed). */
	if (g->q.n == 0 && g->st == EP_G_MEMBER && ep_credit_room(&g->cr) > 0 &&
	    (g->pace.rate_kbps == 0 ||
	     ep_pace_take(&g->pace, IL_HDR_LEN + IL_MSG_HDR_LEN + len, ep_now_ns()))) {
		int slot;
		uint8_t *h = tx_begin(ep, &slot);

		memcpy(il_rec_put(h + IL_HDR_LEN, (uint16_t)len), msg, len);
		remember(g, h + IL_HDR_LEN, IL_MSG_HDR_LEN + len, 1);
		data_hdr(ep, g, h, 1);
		tx_commit(ep, g, slot, IL_HDR_LEN + IL_MSG_HDR_LEN + len);
		g->tx_bytes += IL_HDR_LEN + IL_MSG_HDR_LEN + len;
		g->cr.next++;
		ep->st.data_tx++;
		ep->st.msgs_tx++;
		return 0;
	}
	int rc = ep_q_push(&g->q, msg, (uint16_t)len);
	if (rc == 0)
		ep->st.msgs_deferred++;
	return rc;
}

void ep_timers(struct il_ep *ep, uint64_t now)
{
	const struct il_ep_config *c = &ep->cfg;

	ep_epoch_timer(ep, now);

	for (unsigned i = 0; i < ep->n_slots; i++) {
		struct ep_group *g = &ep->g[i];
		uint64_t first, last;

		if (!g->used)
			continue;
		if (g->st == EP_G_JOINING &&
		    (g->join_ns == 0 || now - g->join_ns >= (uint64_t)c->join_retry_ms * 1000000u)) {
			ep_send_member(ep, g, IL_T_JOIN);
			g->join_ns = g->hb_ns = now;
		}
		if (now - g->hb_ns >= (uint64_t)c->hb_ms * 1000000u) {
			ep_send_member(ep, g, IL_T_HEARTBEAT);
			g->hb_ns = now;
		}
		if (g->st != EP_G_MEMBER)
			continue;
		if (g->roles & IL_EP_SENDER) {
			resend_timer(ep, g, now);
			drain(ep, g, now);
		}
		if (!(g->roles & IL_EP_RECEIVER))
			continue;
		if (ep_ack_due(&g->ack, g->w.po, now, c->ack_every, (uint64_t)c->ack_us * 1000u,
			       50000000u))
			send_ack(ep, g, now);
		/* Awaiting a cut, old frames are not taken: no NAKs for them
		 * until the cut says which (and then only below it). */
		if (ep->awaiting && !ep->cutting)
			continue;
		if (ep->awaiting && g->w.po >= ep->cut)
			continue;
		/* every gap whose timer is due, each with its own (at most
		 * a table's worth per step) */
		for (unsigned k = 0; k < EP_GAPS &&
				     ep_rxw_nak_due(&g->w, now, ep_nak_delay_ns(ep, g),
						    ep_nak_retry_ns(ep, g), IL_NAK_MAX_SPAN, &first,
						    &last);
		     k++) {
			if (ep->awaiting && first >= ep->cut)
				continue;
			if (ep->awaiting && last >= ep->cut)
				last = ep->cut - 1;
			send_nak(ep, g, first, last);
		}
	}
	ep_lec_tick(ep, now);
}

/* A message its sender re-sent into a new epoch may be stamped twice:
 * every receiver sees both copies in the same order and skips the later.
 * A message marked FIFO_START begins a new incarnation of its sender,
 * whose numbering starts again: the appliance marked the first frame it
 * stamped of it, so every receiver restarts the sender's FIFO at the same
 * point of the group's order. */
static bool fifo_new(struct ep_fifo *f, uint32_t sender, uint64_t sseq, bool start)
{
	for (unsigned i = 0; i < f->n; i++)
		if (f->s[i].id == sender) {
			if (sseq < f->s[i].next && !start)
				return false;
			f->s[i].next = sseq + 1;
			return true;
		}
	if (f->n < EP_MAX_FIFO) {
		f->s[f->n].id = sender;
		f->s[f->n++].next = sseq + 1;
	}
	return true;
}

void ep_deliver(struct il_ep *ep, struct ep_group *g)
{
	struct ep_rxw *w = &g->w;
	struct il_ep_msg m = { .group = g->id, .epoch = ep->epoch };

	if (g->st != EP_G_MEMBER || !(g->roles & IL_EP_RECEIVER))
		return;
	/* Never past the window: the slot after its last is the slot of the
	 * oldest message not yet U-delivered, which would be P-delivered
	 * again under a sequence that is not its own. */
	while (w->po < w->hi && w->po - w->uto <= w->mask) {
		struct ep_slot *s = ep_rxw_slot(w, w->po);

		if (s->state == EP_S_EMPTY)
			break;
		if (s->state == EP_S_MSG &&
		    fifo_new(&g->po_fifo, s->sender, s->sender_seq, s->fifo_start) && g->cb.po) {
			m.sender = s->sender;
			m.sender_seq = s->sender_seq;
			m.global_seq = w->po;
			m.data = s->data;
			m.len = s->len;
			m.via = s->via;
			m.rx_ns = s->rx_ns;
			g->cb.po(g->user, &m);
		}
		ep->st.msgs_po++;
		w->po++;
	}
	/* Without a UTO callback nothing waits for stability. */
	while (w->uto < w->po && (w->uto < w->stable || g->cb.uto == NULL)) {
		struct ep_slot *s = ep_rxw_slot(w, w->uto);

		if (s->state == EP_S_MSG &&
		    !fifo_new(&g->uto_fifo, s->sender, s->sender_seq, s->fifo_start)) {
			ep->st.fifo_dup++;
			ep_frame_put(s->fr);
		} else if (s->state == EP_S_MSG) {
			if (g->cb.uto) {
				m.sender = s->sender;
				m.sender_seq = s->sender_seq;
				m.global_seq = w->uto;
				m.data = s->data;
				m.len = s->len;
				m.via = s->via;
				m.rx_ns = s->rx_ns;
				g->cb.uto(g->user, &m);
			}
			ep->st.msgs_uto++;
			ep_frame_put(s->fr);
		}
		s->state = EP_S_EMPTY;
		w->uto++;
	}
}

/* The loss-event estimator (thesis 4.3.2) over the group's global
 * sequence: every message counts as a packet, a gap as losses; and the
 * echo for the appliance's RTT sample: only a frame beyond everything we
 * knew of is an original, never a repair (a repair fills a known gap or
 * a tail a STABLE told us of). */
static void tfrc_rx(struct ep_group *g, uint64_t g0, uint16_t cnt, uint64_t now)
{
	if (g0 >= g->w.hi && g0 >= g->flow.next_seq) {
		g->echo_seq = g0;
		g->echo_ns = now;
	}
	for (uint16_t i = 0; i < cnt; i++)
		il_tfrc_loss_rx(&g->loss, &g->flow, g0 + i, now);
}

static void on_data(struct il_ep *ep, struct ep_group *g, const uint8_t *d, size_t len,
		    uint64_t now)
{
	const uint8_t *h = d;
	uint16_t cnt = il_get16(h + IL_OFF_MSG_COUNT);
	uint64_t g0 = il_get64(h + IL_OFF_GLOBAL_SEQ), sseq = il_get64(h + IL_OFF_SENDER_SEQ);
	uint32_t sender = il_get32(h + IL_OFF_SENDER_ID);
	size_t off = h[IL_OFF_HDR_LEN];
	struct ep_frame *fr = NULL;
	bool dup, over;

	/* Global sequences start at 1 and never reach 2^64: a frame whose
	 * messages would wrap past it was not stamped by an appliance (its
	 * last slot would lie beyond the window's end, where no release
	 * reaches it). */
	if (!(h[IL_OFF_FLAGS] & IL_F_STAMPED) || g0 == 0 || cnt == 0 || g0 > UINT64_MAX - cnt) {
		ep->st.rx_bad++;
		return;
	}
	ep->st.data_rx++;
	/* What LEC protects is the frame as stamped; a frame it rebuilt is
	 * in its store already. One below the highest sequence we knew of
	 * fills a gap: a retransmission. */
	uint8_t via = ep->rx_via ? ep->rx_via : g0 < g->w.hi ? IL_EP_VIA_NAK : IL_EP_VIA_DATA;
	uint16_t placed = 0;

	if (g->lec_mode != IL_EP_LEC_OFF && !ep->rx_via)
		ep_lec_data(ep, g, d, len, now);
	tfrc_rx(g, g0, cnt, now);
	if (h[IL_OFF_FLAGS] & IL_F_STABLE_VALID && il_get64(h + IL_OFF_STABLE_SEQ) > g->w.stable)
		g->w.stable = il_get64(h + IL_OFF_STABLE_SEQ);
	for (uint16_t i = 0; i < cnt; i++) {
		if (off + IL_MSG_HDR_LEN > len)
			break;
		uint16_t ml = il_get16(d + off);
		if (off + IL_MSG_HDR_LEN + ml > len)
			break;
		struct ep_slot *s = ep_rxw_place(&g->w, g0 + i, &dup, &over);
		if (s == NULL) {
			if (over)
				ep->st.rx_overflow++;
			else if (i == 0)
				ep->st.data_dup++;
			off += IL_MSG_HDR_LEN + ml;
			continue;
		}
		if (fr == NULL) {
			/* One copy per datagram, shared by its messages: the
			 * receive buffer goes straight back to the ring. */
			fr = malloc(sizeof(*fr) + len);
			if (fr == NULL)
				return;
			fr->refs = 0;
			fr->len = (uint32_t)len;
			memcpy(fr->data, d, len);
		}
		fr->refs++;
		*s = (struct ep_slot){ .fr = fr, .data = fr->data + off + IL_MSG_HDR_LEN,
				       .sender_seq = sseq + i, .sender = sender, .len = ml,
				       .state = EP_S_MSG,
				       .fifo_start = i == 0 && (h[IL_OFF_FLAGS] & IL_F_FIFO_START),
				       .via = via, .rx_ns = now };
		off += IL_MSG_HDR_LEN + ml;
		placed++;
	}
	if (placed && via == IL_EP_VIA_NAK) {
		ep->st.nak_filled++;
		ep->st.nak_filled_msgs += placed;
	} else if (placed && via == IL_EP_VIA_LEC) {
		ep->st.lec_recovered++;
		ep->st.lec_recovered_msgs += placed;
	}
}

static void on_view(struct il_ep *ep, struct ep_group *g, const uint8_t *h,
		    const struct il_parsed *p)
{
	uint32_t members[256], sids[256], sinc[256];
	uint64_t snext[256];
	struct il_ep_view v = { .group = g->id, .epoch = ep->epoch,
				.start_seq = il_get64(h + IL_OFF_GLOBAL_SEQ) };
	struct il_view_body vb;
	bool in = false, stale = false;

	if (il_view_get(h + p->hdr_len, p->payload_len - p->hdr_len, &vb) != 0 ||
	    vb.n_members > 256 || vb.n_senders > 256) {
		ep->st.rx_bad++;
		return;
	}
	ep->st.view_rx++;
	v.view_id = vb.view_id;
	v.n_members = vb.n_members;
	v.n_senders = vb.n_senders;
	for (unsigned i = 0; i < v.n_members; i++) {
		members[i] = il_view_member_id(&vb, i);
		in = in || members[i] == ep->member_id;
	}
	for (unsigned i = 0; i < v.n_senders; i++) {
		sids[i] = il_view_sender_id(&vb, i);
		sinc[i] = il_view_sender_inc(&vb, i);
		snext[i] = il_view_sender_next(&vb, i);
		/* A view made before the appliance saw our JOIN names a
		 * previous incarnation of our id: not ours (its credits are
		 * not either). */
		stale = stale || ((g->roles & IL_EP_SENDER) && sids[i] == ep->member_id &&
				  sinc[i] != 0 && sinc[i] != ep->incarnation);
	}
	v.members = members;
	v.sender_ids = sids;
	v.sender_next = snext;
	v.sender_inc = sinc;
	if (g->st == EP_G_JOINING && in && stale) {
		ep->st.view_stale++;
		return;
	}
	if (g->st == EP_G_JOINING && in) {
		/* Fast-Join: our stream starts at the view's start; anything
		 * held from before is not ours to deliver. */
		g->st = EP_G_MEMBER;
		g->view_id = v.view_id;
		if (g->roles & IL_EP_RECEIVER) {
			ep_release_held(g);
			ep_rxw_reset(&g->w, v.start_seq ? v.start_seq : 1);
			g->ack = (struct ep_ack){ 0 };
			/* The sequence space restarts for the loss estimator
			 * too (its history of loss events stays). */
			il_tfrc_flow_init(&g->flow);
			g->echo_seq = 0;
			/* Each sender's stream starts here for us. */
			g->uto_fifo.n = 0;
			for (unsigned i = 0; i < v.n_senders && i < EP_MAX_FIFO; i++) {
				g->uto_fifo.s[g->uto_fifo.n].id = sids[i];
				g->uto_fifo.s[g->uto_fifo.n++].next = snext[i];
			}
			g->po_fifo = g->uto_fifo;
		}
		v.event = IL_EP_VIEW_JOINED;
		ep_lec_view(ep, g, &vb);
	} else if (g->st == EP_G_MEMBER && in) {
		if (v.view_id == g->view_id)
			return; /* a repeat */
		g->view_id = v.view_id;
		v.event = IL_EP_VIEW_CHANGED;
		ep_lec_view(ep, g, &vb);
	} else if (g->st == EP_G_MEMBER && !in) {
		/* Excluded (we were silent too long): rejoin. The control
		 * process starts us afresh at our new join point; we keep our
		 * incarnation, so the sequencer goes on with our numbering
		 * (a new one would restart it, and the messages we sent but
		 * do not know stable would be stamped twice). */
		g->st = EP_G_JOINING;
		g->join_ns = 0;
		if (g->roles & IL_EP_RECEIVER)
			ep_release_held(g);
		ep_lec_gone(ep, g);
		v.event = IL_EP_VIEW_EXCLUDED;
	} else {
		return;
	}
	if (g->cb.view)
		g->cb.view(g->user, &v);
}

/* A sender's messages that were not known stable go again, in order and
 * with their sender_seq, before what was still deferred. The new data
 * plane knows nothing of our window yet: we grant ourselves the last one
 * (its grants take over once our first re-sent frames are stable). */
static void rewind_sender(struct il_ep *ep, struct ep_group *g)
{
	sent_trim(g);
	if (g->sent.n > 0) {
		struct ep_q nq;
		size_t sb = g->sent.tail - g->sent.head, qb = g->q.tail - g->q.head;

		ep_q_init(&nq, g->q.max + sb);
		if (ep_q_append(&nq, ep_q_head(&g->sent), sb, g->sent.n) == 0 &&
		    ep_q_append(&nq, ep_q_head(&g->q), qb, g->q.n) == 0) {
			ep_q_free(&g->q);
			g->q = nq;
			g->cr.next = g->sent_base;
			ep->st.resent += g->sent.n;
		} else {
			ep_q_free(&nq);
		}
		ep_q_free(&g->sent);
		ep_q_init(&g->sent, SIZE_MAX);
	}
	if (g->cr.seen)
		g->cr.limit = g->cr.next + g->cr.window;
}

/* A newer epoch began (its first frame, the announcement): our messages
 * not known stable go again at once, into it. Its data plane stamps them
 * while the cut of the old epoch is still being established; receivers
 * hold them until the final watermark and then skip, as FIFO duplicates,
 * those the cut delivered (docs/ha.md, 6.4). Waiting for the final
 * watermark instead put one more round trip of every sender after the
 * cut, on the takeover's critical path. Once per newer epoch.
 *
 * Only in groups where we do not receive too: a member that receives may
 * find the cut incomplete and rejoin as a new incarnation (finalize()),
 * and what it sent must then not already be stamped under the old one.
 * It rewinds at the final watermark, as before. */
static void rewind_senders(struct il_ep *ep)
{
	for (unsigned i = 0; i < ep->n_slots; i++) {
		struct ep_group *g = &ep->g[i];

		if (g->used && g->st == EP_G_MEMBER && (g->roles & IL_EP_SENDER) &&
		    !(g->roles & IL_EP_RECEIVER) && g->rewound_epoch != ep->new_epoch) {
			rewind_sender(ep, g);
			g->rewound_epoch = ep->new_epoch;
		}
	}
}

static void rx_frame(struct il_ep *ep, const uint8_t *d, size_t len, uint64_t now, bool checked);

/* The old epoch ends at watermark w: U-deliver what is below it (every
 * live receiver holds it), forget the rest (its senders send it again),
 * restart the sequence space at 1, then handle what the new epoch sent
 * meanwhile. */
static void finalize(struct il_ep *ep, uint64_t w, uint64_t now)
{
	ep->st.finals++;
	for (unsigned i = 0; i < ep->n_slots; i++) {
		struct ep_group *g = &ep->g[i];

		if (!g->used || g->st != EP_G_MEMBER)
			continue;
		bool incomplete = false;
		if (g->roles & IL_EP_RECEIVER) {
			/* At a pair's cut (ep->cutting) a receiver that could not get
			 * everything below it delivers what it holds, a prefix of the
			 * one order, and rejoins as a new incarnation rather than go
			 * on with a hole the others do not have. */
			incomplete = ep->cutting && g->w.po < w;
			if (w > g->w.stable)
				g->w.stable = w;
			ep_deliver(ep, g);
			if (g->w.uto < g->w.stable && !incomplete)
				ep->st.lost_stable += g->w.stable - g->w.uto;
			g->cut_fail = false;
			ep_release_held(g);
			ep_rxw_reset(&g->w, 1);
			g->ack = (struct ep_ack){ 0 };
			il_tfrc_flow_init(&g->flow);
			g->echo_seq = 0;
			g->po_fifo = g->uto_fifo;
		}
		if ((g->roles & IL_EP_SENDER) && g->rewound_epoch != ep->new_epoch)
			rewind_sender(ep, g);
		if (incomplete) {
			ep->st.cut_incomplete++;
			ep->incarnation++;
			g->st = EP_G_JOINING;
			g->join_ns = 0;
			if (g->cb.view) {
				struct il_ep_view v = { .group = g->id, .epoch = ep->new_epoch,
							.event = IL_EP_VIEW_EXCLUDED,
							.view_id = g->view_id };
				g->cb.view(g->user, &v);
			}
			continue;
		}
		if (g->cb.view) {
			struct il_ep_view v = { .group = g->id, .epoch = ep->new_epoch,
						.event = IL_EP_VIEW_NEW_EPOCH,
						.view_id = g->view_id, .start_seq = 1 };
			g->cb.view(g->user, &v);
		}
	}
	ep->epoch = ep->new_epoch;
	ep->awaiting = false;
	ep->cutting = false;
	ep->cut = 0;
	ep->final_epoch = 0;
	ep->final_wm = 0;
	unsigned n = ep->n_held;
	struct ep_held **held = ep->held;

	ep->held = NULL;
	ep->n_held = ep->cap_held = 0;
	for (unsigned i = 0; i < n; i++) {
		rx_frame(ep, held[i]->data, held[i]->len, now, true);
		free(held[i]);
	}
	free(held);
}

/* The cut C of our epoch is known: done once every receiving group holds
 * everything below it (or cannot: UNAVAIL, or T_fin elapsed). */
static void cut_try(struct il_ep *ep, uint64_t now)
{
	for (unsigned i = 0; i < ep->n_slots; i++) {
		const struct ep_group *g = &ep->g[i];

		if (g->used && g->st == EP_G_MEMBER && (g->roles & IL_EP_RECEIVER) &&
		    g->w.po < ep->cut && !g->cut_fail && now < ep->cut_until)
			return;
	}
	finalize(ep, ep->cut, now);
}

static void cut_start(struct il_ep *ep, uint64_t w, uint64_t now)
{
	ep->cutting = true;
	ep->cut = w;
	ep->cut_until = now + EP_CUT_WAIT_NS;
	for (unsigned i = 0; i < ep->n_slots; i++) {
		struct ep_group *g = &ep->g[i];

		/* What lies below the cut exists: NAK it (naming our epoch). */
		if (g->used && g->st == EP_G_MEMBER && (g->roles & IL_EP_RECEIVER)) {
			ep_rxw_seen(&g->w, w);
			g->cut_fail = false;
		}
	}
	cut_try(ep, now);
}

void ep_epoch_timer(struct il_ep *ep, uint64_t now)
{
	if (!ep->awaiting)
		return;
	if (ep->cutting) {
		cut_try(ep, now);
		return;
	}
	/* The final watermark never came (the new data plane reused the
	 * epoch's second, or it was lost): only what we know is safe. */
	if (now > ep->await_until) {
		finalize(ep, 0, now);
		return;
	}
	if (now - ep->report_ns >= EP_REPORT_NS)
		send_reports(ep, now);
}

static void hold(struct il_ep *ep, const uint8_t *d, size_t len)
{
	if (ep->n_held == ep->cap_held) {
		/* Grown as frames come: most epoch changes hold a few. */
		unsigned cap = ep->cap_held ? 2 * ep->cap_held : 64;
		struct ep_held **nh;

		if (ep->cap_held >= EP_MAX_HELD)
			return; /* DATA comes again on NAK; the rest is repeated */
		nh = realloc(ep->held, (cap < EP_MAX_HELD ? cap : EP_MAX_HELD) * sizeof(*nh));
		if (nh == NULL)
			return;
		ep->held = nh;
		ep->cap_held = cap < EP_MAX_HELD ? cap : EP_MAX_HELD;
	}
	struct ep_held *h = malloc(sizeof(*h) + len);
	if (h == NULL)
		return;
	h->len = (uint32_t)len;
	memcpy(h->data, d, len);
	ep->held[ep->n_held++] = h;
}

static void held_drop(struct il_ep *ep)
{
	for (unsigned i = 0; i < ep->n_held; i++)
		free(ep->held[i]);
	ep->n_held = 0;
}

/* Epoch bookkeeping of a frame from the appliance: true when the caller
 * should go on handling it. Epochs compare in serial-number arithmetic
 * (il_epoch_after); frames of an epoch older than the newest seen are
 * ignored and counted. */
static bool epoch_check(struct il_ep *ep, const uint8_t *d, size_t len, uint64_t now)
{
	uint32_t e = il_get32(d + IL_OFF_EPOCH);
	uint8_t type = d[IL_OFF_TYPE];

	if (type == IL_T_STABLE && il_get64(d + IL_OFF_GLOBAL_SEQ) == 0 &&
	    (d[IL_OFF_FLAGS] & IL_F_STABLE_VALID)) {
		/* The final watermark of epoch e (its cut), from its successor. */
		uint64_t w = il_get64(d + IL_OFF_STABLE_SEQ);

		if (ep->awaiting && e == ep->epoch && !ep->cutting)
			cut_start(ep, w, now);
		else if (!ep->awaiting && e == ep->epoch && ep->epoch != 0 &&
			 (ep->final_epoch != e || w > ep->final_wm)) {
			ep->final_epoch = e; /* before the new epoch's first frame */
			ep->final_wm = w;
		}
		return false;
	}
	if (ep->awaiting) {
		/* Repairs of our epoch below its cut (the new active re-sends
		 * the old one's frames from its shadow), and UNAVAIL for them. */
		if (ep->cutting && e == ep->epoch &&
		    ((type == IL_T_DATA && il_get64(d + IL_OFF_GLOBAL_SEQ) < ep->cut) ||
		     type == IL_T_UNAVAIL)) {
			if (type == IL_T_DATA)
				ep->st.cut_repairs++;
			return true;
		}
		if (il_epoch_after(e, ep->new_epoch)) {
			/* An even newer epoch: the one we waited for delivered
			 * nothing uniformly; report against the newest. */
			held_drop(ep);
			ep->new_epoch = e;
			if (!ep->cutting)
				send_reports(ep, now);
			rewind_senders(ep); /* what went into the dropped one too */
		}
		if (e == ep->new_epoch)
			hold(ep, d, len);
		else
			ep->st.stale_epoch_frames++; /* older than the newest seen */
		return false;
	}
	if (e == ep->epoch)
		return true;
	if (ep->epoch == 0) {
		ep->epoch = e;
		return true;
	}
	if (!il_epoch_after(e, ep->epoch)) {
		ep->st.stale_epoch_frames++;
		return false; /* a late frame of an older epoch (a fenced appliance's) */
	}
	ep->st.epochs++;
	ep->new_epoch = e;
	ep->awaiting = true;
	ep->await_until = now + EP_FINAL_WAIT_NS;
	if (ep->final_epoch == ep->epoch) {
		/* Its final watermark came first. */
		cut_start(ep, ep->final_wm, now);
		if (!ep->awaiting)
			return true; /* finalized: this frame is the new epoch's */
	} else {
		send_reports(ep, now);
		rewind_senders(ep);
	}
	hold(ep, d, len);
	return false;
}

void ep_rx_datagram(struct il_ep *ep, const uint8_t *d, size_t len, uint64_t now)
{
	rx_frame(ep, d, len, now, false);
}

/* A datagram; checked: its MAC was checked when it first came (a frame
 * held across an epoch change: checked again, it would be a replay). */
static void rx_frame(struct il_ep *ep, const uint8_t *d, size_t len, uint64_t now, bool checked)
{
	struct il_parsed p;

	/* The data plane's own checks (wire library): what the appliance
	 * would drop, we drop too. */
	if (len > UINT32_MAX || il_parse_payload(d, (uint32_t)len, &p) >= IL_V_DROP_FIRST) {
		ep->st.rx_bad++;
		return;
	}
	if (p.type == IL_T_LEC_REPAIR) {
		/* from another member or the appliance, naming frames of any
		 * of our groups */
		ep_lec_repair_rx(ep, d, &p, now);
		return;
	}
	struct ep_group *g = ep_group(ep, p.group_id);
	uint8_t type = p.type;
	const uint8_t *b = d + p.hdr_len;
	uint32_t body = p.payload_len - p.hdr_len;

	if (g == NULL)
		return;
	if (type != IL_T_DATA && type != IL_T_STABLE && type != IL_T_VIEW &&
	    type != IL_T_CREDIT && type != IL_T_UNAVAIL)
		return; /* other members' control traffic, if it ever reaches us */
	/* With auth on, what only the appliance may say must carry its MAC
	 * (DATA is stamped in flight: not signed). */
	if (type != IL_T_DATA && !checked && !ep_auth_ok(ep, d, len))
		return;
	if (!epoch_check(ep, d, len, now))
		return;
	switch (type) {
	case IL_T_DATA:
		if (g->st == EP_G_MEMBER && (g->roles & IL_EP_RECEIVER)) {
			on_data(ep, g, d, len, now);
			/* frames LEC rebuilt meanwhile (the stored repairs this
			 * one completed) */
			if (!ep->rx_via)
				ep_lec_rebuilt(ep, now);
		}
		break;
	case IL_T_STABLE:
		ep->st.stable_rx++;
		if (g->st != EP_G_MEMBER || !(g->roles & IL_EP_RECEIVER) ||
		    !(d[IL_OFF_FLAGS] & IL_F_STABLE_VALID))
			break;
		if (il_get64(d + IL_OFF_STABLE_SEQ) > g->w.stable)
			g->w.stable = il_get64(d + IL_OFF_STABLE_SEQ);
		ep_rxw_seen(&g->w, il_get64(d + IL_OFF_GLOBAL_SEQ));
		break;
	case IL_T_VIEW:
		on_view(ep, g, d, &p);
		break;
	case IL_T_CREDIT: {
		struct il_credit_body cr;

		/* Only once a VIEW named us: before that, a CREDIT for our
		 * member id was meant for a previous incarnation of it. */
		if (il_credit_get(b, body, &cr) != 0 ||
		    il_get32(d + IL_OFF_SENDER_ID) != ep->member_id || !(g->roles & IL_EP_SENDER) ||
		    g->st != EP_G_MEMBER)
			break;
		ep->st.credit_rx++;
		/* limit_seq 0: no grant, only a resume notice (a group
		 * without a window) */
		if (cr.limit_seq != 0 && !ep_credit_grant(&g->cr, cr.limit_seq, cr.window))
			ep->st.credit_stale++;
		/* WAN groups: the TCP-friendly rate (0: none), paced with
		 * a token bucket on top of the window. */
		ep_pace_set(&g->pace, cr.rate_kbps, 2 * ep->max_frame, now);
		sent_trim(g);
		/* A resume notice: our frames from this sender_seq on never
		 * reached the sequencer (it refused the ones after a lost
		 * one). Go back and send them again. */
		if (il_get64(d + IL_OFF_SENDER_SEQ) != 0 && g->st == EP_G_MEMBER) {
			int64_t k = go_back(g, il_get64(d + IL_OFF_SENDER_SEQ));

			if (k > 0) {
				ep->st.resume_rx++;
				ep->st.resent_resume += (uint64_t)k;
				drain(ep, g, now);
			}
		}
		break;
	}
	case IL_T_UNAVAIL: {
		struct il_range_body r;

		ep->st.unavail_rx++;
		if (il_range_get(b, body, &r) != 0 || g->st != EP_G_MEMBER ||
		    !(g->roles & IL_EP_RECEIVER))
			break;
		if (ep->awaiting && ep->cutting && il_get32(d + IL_OFF_EPOCH) == ep->epoch &&
		    r.first_seq < ep->cut && r.last_seq >= g->w.po) {
			/* What we miss below the cut is gone (the shadow let it go):
			 * no hole may be delivered over; the cut ends incomplete. */
			g->cut_fail = true;
			cut_try(ep, now);
			break;
		}
		uint64_t n = ep_rxw_unavail(&g->w, r.first_seq, r.last_seq);
		ep->st.unavail_msgs += n;
		if (n && g->cb.lost)
			g->cb.lost(g->user, g->id, r.first_seq, r.last_seq);
		break;
	}
	}
}
