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
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_udp.h>

#include <interlink/wire.h>

#include "pktgen.h"

#define HDRS 42u /* Ethernet + IPv4 + UDP */

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

static void build_template(struct pg_state *s, uint8_t *f, unsigned si, unsigned gi)
{
	const struct pg_conf *c = &s->c;
	uint32_t id = si + 1;
	uint32_t dst = c->mode == PG_RAW ? c->raw_dst : c->group_addr_base + gi;

	memset(f, 0, s->tpl_stride);
	il_mcast_mac(f, dst);
	memcpy(f + 6, s->tx_mac, 6);
	f[12] = 0x08;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);
	ip->version_ihl = 0x45;
	ip->fragment_offset = rte_cpu_to_be_16(0x4000); /* DF */
	ip->time_to_live = 16;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = rte_cpu_to_be_32(0x0a000000u | id);
	ip->dst_addr = rte_cpu_to_be_32(dst);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(f + 34);
	udp->src_port = rte_cpu_to_be_16((uint16_t)(5000 + id));
	udp->dst_port = rte_cpu_to_be_16(c->mode == PG_RAW ? c->raw_port : c->il_port);
	if (c->mode == PG_RAW)
		return;
	uint8_t *h = f + HDRS;
	h[IL_OFF_VERSION] = IL_VERSION;
	h[IL_OFF_TYPE] = IL_T_DATA;
	h[IL_OFF_HDR_LEN] = IL_HDR_LEN;
	il_put16(h + IL_OFF_GROUP_ID, (uint16_t)(c->group_base + gi));
	il_put32(h + IL_OFF_SENDER_ID, id);
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
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(f + 34);
	ip->total_length = rte_cpu_to_be_16((uint16_t)(len - 14));
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(len - 34));
	if (c->mode == PG_RAW) {
		uint8_t *p = f + HDRS;
		if (size >= 8)
			memcpy(p, &now, 8);
		if (size >= 16)
			memcpy(p + 8, &sseq, 8);
	} else {
		uint8_t *h = f + HDRS;
		il_put16(h + IL_OFF_MSG_COUNT, (uint16_t)msgs);
		il_put64(h + IL_OFF_SENDER_SEQ, sseq);
		uint8_t *r = h + IL_HDR_LEN;
		const unsigned rec = IL_MSG_HDR_LEN + size;
		for (unsigned i = 0; i < msgs; i++, r += rec) {
			uint64_t tag = sseq + i;
			il_put16(r, (uint16_t)size);
			il_put16(r + 2, 0);
			if (size >= 8)
				memcpy(r + 4, &now, 8);
			if (size >= 16)
				memcpy(r + 12, &tag, 8);
		}
	}
	if (c->udp_csum)
		udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
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
