/* SPDX-License-Identifier: BSD-3-Clause
 * Emulated receivers. Every frame from the appliance is offered to each
 * receiver, which may lose it (its own seeded loss model, standing for
 * drops at switch B or the host's RX NIC). Each receiver delivers in
 * global-sequence order, buffers what arrives early, NAKs gaps, and folds
 * everything it delivers into a running hash: equal hashes mean the same
 * order.
 */
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>

#include <interlink/frame.h>
#include <interlink/parse.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "pktgen.h"

#define NAK_SCAN_MAX 4096u

static inline uint64_t mix(uint64_t h, uint64_t x)
{
	h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h *= 0xff51afd7ed558ccdull;
	return h ^ (h >> 33);
}

int pg_receivers_init(struct pg_state *s)
{
	char err[256];
	for (unsigned r = 0; r < s->c.receivers; r++) {
		struct pg_receiver *rx = &s->rx[r];
		struct il_loss_cfg lc = s->c.loss;
		rx->id = r;
		lc.seed = s->c.seed * 1000003u + r + 1;
		if (il_loss_init(&rx->loss, &lc, err, sizeof(err))) {
			fprintf(stderr, "interlink-pktgen: --loss: %s\n", err);
			return -1;
		}
		for (unsigned g = 0; g < s->c.groups; g++) {
			struct pg_rgroup *rg = &rx->g[g];
			rg->next = 1;
			rg->sender_next = calloc(s->c.senders + 1, sizeof(uint64_t));
			rg->slot = rte_zmalloc("pg_slots", sizeof(struct rte_mbuf *) * s->c.reorder_slots,
					       0);
			if (!rg->sender_next || !rg->slot)
				return -1;
			for (unsigned i = 0; i <= s->c.senders; i++)
				rg->sender_next[i] = 1;
		}
	}
	return 0;
}

uint8_t *pg_ctl_frame(struct pg_state *s, struct rte_mbuf **mp, unsigned gi,
		      struct il_hdr_fields h, uint32_t src_ip, uint16_t src_port, unsigned body)
{
	const struct pg_conf *c = &s->c;
	const uint16_t len = (uint16_t)(IL_UDP_HDRS_LEN + IL_HDR_LEN + body);
	struct rte_mbuf *m = rte_pktmbuf_alloc(s->pool);
	uint8_t *f = m ? (uint8_t *)rte_pktmbuf_append(m, len) : NULL;
	struct il_path p = { .src_ip = src_ip, .src_port = src_port, .dst_port = c->il_port,
			     .ttl = 16 };

	if (!f) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	memcpy(p.src_mac, s->tx_mac, 6);
	il_path_mcast(&p, c->group_addr_base + gi);
	h.group_id = (uint16_t)(c->group_base + gi);
	*mp = m;
	return il_frame_put(f, &p, 0, &h, (uint16_t)body);
}

static void send_nak(struct pg_state *s, unsigned r, unsigned gi, uint64_t first, uint64_t last)
{
	struct rte_mbuf *m;

	if (last - first >= IL_NAK_MAX_SPAN)
		last = first + IL_NAK_MAX_SPAN - 1;
	struct il_hdr_fields h = { .type = IL_T_NAK, .sender_id = 0x10000u + r };
	uint8_t *b = pg_ctl_frame(s, &m, gi, h, 0x0a010000u | (r + 1), (uint16_t)(6000 + r),
				  IL_RANGE_LEN);
	if (!b) {
		s->naks_tx_fail++;
		return;
	}
	il_range_put(b, first, last);
	pg_auth_seal(s, m);
	for (int tries = 0; tries < 64; tries++)
		if (rte_eth_tx_burst(s->tx_port, 0, &m, 1) == 1) {
			s->naks_tx++;
			s->rx[r].g[gi].naks_sent++;
			return;
		}
	rte_pktmbuf_free(m);
	s->naks_tx_fail++;
}

static void deliver(struct pg_state *s, struct pg_receiver *rx, struct pg_rgroup *g,
		    struct rte_mbuf *m, uint64_t now)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	const uint8_t *h = f + 42;
	uint16_t cnt = il_get16(h + IL_OFF_MSG_COUNT);
	uint32_t sender = il_get32(h + IL_OFF_SENDER_ID);
	uint64_t sseq = il_get64(h + IL_OFF_SENDER_SEQ);
	uint64_t gseq = il_get64(h + IL_OFF_GLOBAL_SEQ);
	const uint8_t *r = h + h[IL_OFF_HDR_LEN];

	for (uint16_t i = 0; i < cnt; i++) {
		uint16_t len = il_get16(r);
		uint64_t x = 0;
		if (len >= 8) {
			uint64_t ts;
			memcpy(&ts, r + 4, 8);
			if (now > ts)
				pg_hist_add(&rx->lat, now - ts);
		}
		if (len >= 16)
			memcpy(&x, r + 12, 8);
		g->hash = mix(mix(mix(mix(g->hash, gseq + i), sender), sseq + i), x ^ len);
		if (s->c.uto && rx->id == 0 && sender >= 1 && sender <= s->c.senders)
			pg_uto_delivered(s, (unsigned)(g - rx->g), sender, sseq + i, gseq + i);
		if (sender <= s->c.senders) {
			rx->from_sender[sender]++;
			/* 0: resynchronise (after messages were declared lost). */
			if (g->sender_next[sender] && g->sender_next[sender] != sseq + i)
				g->fifo_violations++;
			g->sender_next[sender] = sseq + i + 1;
		}
		r += 4 + len;
	}
	g->delivered += cnt;
	g->next = gseq + cnt;
}

static inline uint64_t frame_first(struct rte_mbuf *m)
{
	return il_get64(rte_pktmbuf_mtod(m, const uint8_t *) + 42 + IL_OFF_GLOBAL_SEQ);
}

/* Deliver whatever buffered frames are now in order. */
static void drain(struct pg_state *s, struct pg_receiver *rx, struct pg_rgroup *g, uint64_t now)
{
	const uint64_t mask = s->c.reorder_slots - 1;
	while (g->buffered) {
		struct rte_mbuf **sl = &g->slot[g->next & mask];
		if (!*sl || frame_first(*sl) != g->next)
			break;
		struct rte_mbuf *m = *sl;
		*sl = NULL;
		g->buffered--;
		deliver(s, rx, g, m, now);
		rte_pktmbuf_free(m);
	}
	if (!g->buffered && g->gap_open_tsc) {
		g->gap_open_tsc = 0;
		g->gaps_repaired++;
	}
}

static void on_data(struct pg_state *s, struct pg_receiver *rx, unsigned gi, struct rte_mbuf *m,
		    uint64_t now)
{
	struct pg_rgroup *g = &rx->g[gi];
	const uint8_t *h = rte_pktmbuf_mtod(m, const uint8_t *) + 42;
	uint64_t first = il_get64(h + IL_OFF_GLOBAL_SEQ);
	uint16_t cnt = il_get16(h + IL_OFF_MSG_COUNT);
	const uint64_t mask = s->c.reorder_slots - 1;

	if (first + cnt <= g->next) {
		g->dups++;
		return;
	}
	uint64_t hi = g->hi;
	if (first + cnt > g->hi)
		g->hi = first + cnt;
	if (first == g->next) {
		deliver(s, rx, g, m, now);
		drain(s, rx, g, now);
		return;
	}
	/* Early: a gap before it. */
	if (first - g->next >= s->c.reorder_slots) {
		g->overrun++;
	} else {
		struct rte_mbuf **sl = &g->slot[first & mask];
		if (*sl) {
			g->dups++;
		} else {
			rte_mbuf_refcnt_update(m, 1);
			*sl = m;
			g->buffered++;
		}
	}
	if (!g->gap_open_tsc) {
		g->gap_open_tsc = now;
		g->gaps++;
		g->last_nak_tsc = now;
		send_nak(s, rx->id, gi, g->next, first - 1);
	} else if (first > hi && hi > g->next) {
		/* A further hole, beyond the ones already asked for. */
		send_nak(s, rx->id, gi, hi, first - 1);
	}
}

static void on_unavail(struct pg_state *s, struct pg_receiver *rx, unsigned gi, uint64_t first,
		       uint64_t last, uint64_t now)
{
	struct pg_rgroup *g = &rx->g[gi];
	if (last < g->next || first > g->next)
		return;
	g->unrecoverable += last + 1 - g->next;
	/* Whose messages they were is unknown, so no sender's window can be
	 * settled any more: the window is off from here on. */
	s->window_off = true;
	g->next = last + 1;
	/* Whose messages were lost is unknown: each sender's FIFO check
	 * restarts from its next delivered message. */
	memset(g->sender_next, 0, sizeof(uint64_t) * (s->c.senders + 1));
	/* The skipped range is not repaired: the gap closes unrepaired. */
	const uint64_t mask = s->c.reorder_slots - 1;
	for (uint64_t q = first; q <= last && q - first < s->c.reorder_slots; q++) {
		struct rte_mbuf **sl = &g->slot[q & mask];
		if (*sl && frame_first(*sl) == q) {
			rte_pktmbuf_free(*sl);
			*sl = NULL;
			g->buffered--;
		}
	}
	g->gap_open_tsc = 0; /* closed, but not repaired */
	drain(s, rx, g, now);
}

void pg_receive_burst(struct pg_state *s, struct rte_mbuf **pkts, uint16_t n)
{
	uint64_t now = rte_rdtsc();
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct il_parsed p;
		enum il_verdict v = il_parse_frame(rte_pktmbuf_mtod(m, const uint8_t *), m->data_len,
						   s->c.il_port, &p);
		unsigned gi = (unsigned)(p.group_id - s->c.group_base);

		s->rx_frames++;
		if (s->cap.n < s->cap.cap)
			pg_capture_add(&s->cap, rte_pktmbuf_mtod(m, const uint8_t *), m->data_len,
				       (uint64_t)((double)(now - s->t0) * 1e9 / (double)s->hz));
		if ((v == IL_V_DATA || v == IL_V_CONTROL) &&
		    (p.il_off != 42 || gi >= s->c.groups)) {
			s->rx_other++;
		} else if (v == IL_V_CONTROL &&
			   (p.type == IL_T_STABLE || p.type == IL_T_VIEW || p.type == IL_T_CREDIT ||
			    p.type == IL_T_UNAVAIL) &&
			   !pg_auth_ok(s, rte_pktmbuf_mtod(m, const uint8_t *) + p.il_off,
				       p.payload_len)) {
			/* --auth-keys: unsigned, forged or replayed: counted, dropped */
		} else if (v == IL_V_DATA) {
			const uint8_t *h = rte_pktmbuf_mtod(m, const uint8_t *) + 42;
			if (!(h[IL_OFF_FLAGS] & IL_F_STAMPED) || il_get64(h + IL_OFF_GLOBAL_SEQ) == 0) {
				s->rx_bad++;
			} else {
				if (s->c.uto)
					pg_uto_on_data(s, gi, h);
				for (unsigned r = 0; r < s->c.receivers; r++) {
					if (il_loss_drop(&s->rx[r].loss)) {
						s->rx[r].injected_drops++;
						continue;
					}
					on_data(s, &s->rx[r], gi, m, now);
				}
			}
		} else if (v == IL_V_CONTROL && s->c.uto &&
			   pg_uto_on_control(s, gi, rte_pktmbuf_mtod(m, const uint8_t *) + 42, p.type,
					     p.hdr_len, p.payload_len - p.hdr_len, now)) {
			/* VIEW, CREDIT, STABLE: membership and flow control */
		} else if (v == IL_V_CONTROL && p.type == IL_T_UNAVAIL) {
			const uint8_t *h = rte_pktmbuf_mtod(m, const uint8_t *) + p.il_off;
			uint32_t who = il_get32(h + IL_OFF_SENDER_ID);
			struct il_range_body rg;
			s->rx_unavail++;
			if (il_range_get(h + p.hdr_len, p.payload_len - p.hdr_len, &rg) != 0)
				s->rx_other++; /* no range to read */
			else
				for (unsigned r = 0; r < s->c.receivers; r++)
					if (who == 0x10000u + r)
						on_unavail(s, &s->rx[r], gi, rg.first_seq,
							   rg.last_seq, now);
		} else {
			s->rx_other++;
		}
		rte_pktmbuf_free(m);
	}
}

/* First buffered seq after next (bounded scan), or 0 if none found. */
static uint64_t first_buffered(const struct pg_state *s, const struct pg_rgroup *g)
{
	const uint64_t mask = s->c.reorder_slots - 1;
	uint64_t lim = s->c.reorder_slots < NAK_SCAN_MAX ? s->c.reorder_slots : NAK_SCAN_MAX;
	for (uint64_t q = g->next + 1; q < g->next + lim; q++) {
		struct rte_mbuf *m = g->slot[q & mask];
		if (m && frame_first(m) == q)
			return q;
	}
	return 0;
}

void pg_receivers_tick(struct pg_state *s, bool sending_done)
{
	uint64_t now = rte_rdtsc();
	uint64_t tmo = (uint64_t)(s->c.nak_timeout_us * (double)s->hz / 1e6);

	for (unsigned r = 0; r < s->c.receivers; r++)
		for (unsigned gi = 0; gi < s->c.groups; gi++) {
			struct pg_rgroup *g = &s->rx[r].g[gi];
			if (now - g->last_nak_tsc < tmo)
				continue;
			if (g->buffered) {
				uint64_t fb = first_buffered(s, g);
				uint64_t last = fb ? fb - 1 : g->next + NAK_SCAN_MAX - 1;
				g->last_nak_tsc = now;
				send_nak(s, r, gi, g->next, last);
			} else if (sending_done && g->next <= s->group_sent[gi]) {
				/* Tail loss: nothing later arrived to reveal the gap. */
				if (!g->gap_open_tsc) {
					g->gap_open_tsc = now;
					g->gaps++;
				}
				g->last_nak_tsc = now;
				send_nak(s, r, gi, g->next, s->group_sent[gi]);
			}
		}
}

bool pg_receivers_complete(const struct pg_state *s)
{
	for (unsigned r = 0; r < s->c.receivers; r++)
		for (unsigned gi = 0; gi < s->c.groups; gi++)
			if (s->rx[r].g[gi].next <= s->group_sent[gi] || s->rx[r].g[gi].buffered)
				return false;
	return true;
}
