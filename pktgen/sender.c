/* SPDX-License-Identifier: BSD-3-Clause
 * Emulated senders. Every frame starts as a copy of a pre-built header
 * template of its (sender, group); only lengths, sequence numbers and the
 * TX timestamp are written per frame, which is what lets one core send at
 * 10 GbE line rate. Native mode: Interlink DATA frames, round-robin over
 * senders and groups, per-(sender, group) FIFO sequence, a TX timestamp and
 * the sender's sequence in the first 16 bytes of every message. Raw mode:
 * plain UDP to the appliance's raw filter, the same 16 bytes first in the
 * payload. pcap mode: a capture replayed on its own timestamps.
 */
#include <string.h>

#include <rte_cycles.h>
#include <rte_malloc.h>

#include <interlink/frame.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "pktgen.h"

#define HDRS IL_UDP_HDRS_LEN /* Ethernet + IPv4 + UDP */

unsigned pg_frame_len(const struct pg_conf *c, unsigned msgs, unsigned size)
{
	if (c->mode == PG_RAW)
		return HDRS + size;
	return HDRS + IL_HDR_LEN + msgs * (IL_MSG_HDR_LEN + size);
}

/* --frame sizes are whole frames: turn one into a message payload. */
static unsigned payload_of(const struct pg_conf *c, unsigned frame)
{
	int p;
	if (!c->frame_sizes)
		return frame;
	if (c->mode == PG_RAW)
		p = (int)frame - (int)PG_FCS - (int)HDRS;
	else
		p = ((int)frame - (int)PG_FCS - (int)(HDRS + IL_HDR_LEN)) / (int)c->pack -
		    (int)IL_MSG_HDR_LEN;
	return p < 16 ? 16 : (unsigned)p; /* room for the timestamp and the tag */
}

/* The headers of every frame of sender si in group gi: Ethernet, IPv4
 * (DF, TTL 16) and UDP, then (native mode) the Interlink header with its
 * group and sender; fill_frame writes lengths, checksums and sequences. */
static void build_template(struct pg_state *s, uint8_t *f, unsigned si, unsigned gi)
{
	const struct pg_conf *c = &s->c;
	uint32_t id = si + 1;
	uint32_t dst = c->mode == PG_RAW ? c->raw_dst : c->group_addr_base + gi;
	struct il_path p = { .src_ip = 0x0a000000u | id, .src_port = (uint16_t)(5000 + id),
			     .dst_port = c->mode == PG_RAW ? c->raw_port : c->il_port,
			     .ttl = 16, .df = true };

	memset(f, 0, s->tpl_stride);
	memcpy(p.src_mac, s->tx_mac, 6);
	il_path_mcast(&p, dst);
	uint8_t *h = il_udp_frame_put(f, &p, 0, 0);
	if (c->mode == PG_RAW)
		return;
	il_hdr_put(h, &(struct il_hdr_fields){ .type = IL_T_DATA,
					       .group_id = (uint16_t)(c->group_base + gi),
					       .sender_id = id });
}

int pg_senders_init(struct pg_state *s)
{
	const struct pg_conf *c = &s->c;
	s->tpl_len = c->mode == PG_RAW ? HDRS : HDRS + IL_HDR_LEN;
	s->tpl_stride = 128;
	s->tpl = rte_zmalloc("pg_tpl", (size_t)s->tpl_stride * c->senders * c->groups, 64);
	if (!s->tpl)
		return -1;
	for (unsigned i = 0; i < c->senders; i++) {
		s->senders[i].id = i + 1;
		for (unsigned g = 0; g < PG_MAX_GROUPS; g++)
			s->senders[i].seq[g] = 1;
		for (unsigned g = 0; g < c->groups; g++)
			build_template(s, s->tpl + (size_t)s->tpl_stride * (i * c->groups + g), i, g);
	}
	return 0;
}

/* Messages of a sender that some receiver has not delivered yet. */
static uint64_t outstanding(const struct pg_state *s, const struct pg_sender *snd)
{
	uint64_t min = UINT64_MAX;
	for (unsigned r = 0; r < s->c.receivers; r++)
		if (s->rx[r].from_sender[snd->id] < min)
			min = s->rx[r].from_sender[snd->id];
	return snd->sent_msgs - min;
}

static inline unsigned peek_size(struct pg_state *s)
{
	if (!s->next_size)
		s->next_size = payload_of(&s->c, pg_sizes_next(&s->c.msg_sizes));
	return s->next_size;
}

/* How many messages go in the next frame, all of size bytes (a frame
 * carries one size: a different draw starts the next frame). */
static unsigned msgs_in_frame(struct pg_state *s, unsigned size, uint64_t left)
{
	const struct pg_conf *c = &s->c;
	unsigned k = c->pack;
	if (c->pack_bytes) {
		unsigned room = c->pack_bytes - 28 - IL_HDR_LEN;
		k = room / (IL_MSG_HDR_LEN + size);
		if (k < 1)
			k = 1;
		if (k > IL_MAX_MSGS_PER_FRAME)
			k = IL_MAX_MSGS_PER_FRAME;
	}
	return left < k ? (unsigned)left : k;
}

static void fill_frame(struct pg_state *s, struct rte_mbuf *m, struct pg_sender *snd,
		       unsigned gi, unsigned msgs, unsigned size, uint64_t now)
{
	const struct pg_conf *c = &s->c;
	const unsigned si = snd->id - 1;
	const uint8_t *tpl = s->tpl + (size_t)s->tpl_stride * (si * c->groups + gi);
	const uint16_t len = (uint16_t)pg_frame_len(c, msgs, size);
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	uint64_t sseq = snd->seq[gi];

	memcpy(f, tpl, s->tpl_len);
	m->data_len = len;
	m->pkt_len = len;
	il_udp_frame_set_len(f, (uint16_t)(len - HDRS));
	if (c->mode == PG_RAW) {
		uint8_t *p = f + HDRS;
		if (size >= 8)
			memcpy(p, &now, 8);
		if (size >= 16)
			memcpy(p + 8, &sseq, 8);
	} else {
		uint8_t *h = f + HDRS;
		il_hdr_set_data(h, (uint16_t)msgs, sseq);
		uint8_t *r = h + IL_HDR_LEN;
		for (unsigned i = 0; i < msgs; i++) {
			uint64_t tag = sseq + i;
			r = il_rec_put(r, (uint16_t)size);
			if (size >= 8)
				memcpy(r, &now, 8);
			if (size >= 16)
				memcpy(r + 8, &tag, 8);
			r += size;
		}
	}
	if (c->udp_csum)
		il_udp_csum_set(f + IL_ETH_HLEN);
	snd->seq[gi] = sseq + msgs;
	snd->sent_msgs += msgs;
	snd->sent_frames++;
	s->group_sent[gi] += msgs;
	s->tx_msgs += msgs;
}

static uint16_t replay_burst(struct pg_state *s, struct rte_mbuf **pkts, uint16_t n,
			     uint64_t now)
{
	const struct pg_pcap *pc = &s->pc;
	uint16_t k = 0;

	if (!s->pc_base)
		s->pc_base = now;
	while (k < n && s->pc_loop < s->c.pcap_loops) {
		const struct pg_pcap_rec *r = &pc->rec[s->pc_next];
		if (s->pc_base + pg_pcap_due(pc, s->pc_next, s->c.speed, s->hz) > now)
			break;
		struct rte_mbuf *m = rte_pktmbuf_alloc(s->pool);
		if (!m)
			break;
		uint8_t *f = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)r->len);
		if (!f) {
			rte_pktmbuf_free(m);
			break;
		}
		memcpy(f, pc->data + r->off, r->len);
		pkts[k++] = m;
		s->tx_msgs++;
		if (++s->pc_next == pc->n) {
			/* The next loop starts one mean gap after this one ended. */
			uint64_t span = pg_pcap_due(pc, pc->n - 1, s->c.speed, s->hz);
			s->pc_next = 0;
			s->pc_loop++;
			s->pc_base += span + (pc->n > 1 ? span / (pc->n - 1) : 0);
		}
	}
	return k;
}

bool pg_sending_over(const struct pg_state *s)
{
	if (s->c.mode == PG_PCAP)
		return s->pc_loop >= s->c.pcap_loops;
	return s->c.count && s->tx_msgs >= s->c.count;
}

uint16_t pg_build_burst(struct pg_state *s, struct rte_mbuf **pkts, uint16_t n, uint64_t now)
{
	const struct pg_conf *c = &s->c;
	uint16_t k = 0, want;
	unsigned blocked = 0;

	if (c->mode == PG_PCAP)
		return replay_burst(s, pkts, n, now);
	unsigned size = peek_size(s);
	uint64_t left = c->count ? c->count - s->tx_msgs : UINT64_MAX;
	unsigned msgs = msgs_in_frame(s, size, left);
	want = (uint16_t)pg_pace_due(&s->pace, now, pg_frame_len(c, msgs, size), n);
	if (!want || !left)
		return 0;
	if (rte_pktmbuf_alloc_bulk(s->pool, pkts, want))
		return 0;
	while (k < want) {
		left = c->count ? c->count - s->tx_msgs : UINT64_MAX;
		if (!left)
			break;
		size = peek_size(s);
		msgs = msgs_in_frame(s, size, left);
		struct pg_sender *snd = &s->senders[s->next_sender];
		if (c->uto) {
			/* The appliance's CREDIT, not our own window, per group. */
			unsigned ok = pg_uto_allow(s, snd, s->next_group, msgs, now);
			if (!ok) {
				if (++blocked == c->senders * c->groups) {
					s->uto.blocked_stalls++;
					break;
				}
				if (++s->next_sender == c->senders) {
					s->next_sender = 0;
					if (++s->next_group == c->groups)
						s->next_group = 0;
				}
				continue;
			}
			msgs = ok;
		} else if (c->window && !s->window_off && outstanding(s, snd) + msgs > c->window) {
			/* This sender waits; try the next one, give up when all wait. */
			if (++blocked == c->senders) {
				s->window_stalls++;
				break;
			}
			if (++s->next_sender == c->senders)
				s->next_sender = 0;
			continue;
		}
		blocked = 0;
		fill_frame(s, pkts[k], snd, s->next_group, msgs, size, now);
		if (c->uto)
			pg_uto_sent(s, snd, s->next_group, pkts[k]->data_len, now);
		pg_pace_charge(&s->pace, pkts[k]->data_len);
		s->next_size = 0;
		k++;
		if (++s->next_sender == c->senders) {
			s->next_sender = 0;
			if (++s->next_group == c->groups)
				s->next_group = 0;
		}
	}
	if (k < want)
		rte_pktmbuf_free_bulk(pkts + k, want - k);
	return k;
}
