/* SPDX-License-Identifier: BSD-3-Clause
 * Emulated senders: native DATA frames, round-robin over senders and
 * groups, per-(sender, group) FIFO sequence, a TX timestamp and the
 * sender's sequence in the first 16 bytes of every message.
 */
#include <string.h>

#include <rte_cycles.h>
#include <rte_ip.h>
#include <rte_udp.h>

#include <interlink/wire.h>

#include "pktgen.h"

static inline void mcast_mac(uint8_t *mac, uint32_t addr)
{
	mac[0] = 0x01;
	mac[1] = 0x00;
	mac[2] = 0x5e;
	mac[3] = (uint8_t)((addr >> 16) & 0x7f);
	mac[4] = (uint8_t)(addr >> 8);
	mac[5] = (uint8_t)addr;
}

static struct rte_mbuf *build_frame(struct pg_state *s, struct pg_sender *snd, unsigned gi,
				    unsigned msgs)
{
	const struct pg_conf *c = &s->c;
	struct rte_mbuf *m = rte_pktmbuf_alloc(s->pool);
	if (!m)
		return NULL;
	const uint16_t rec = (uint16_t)(IL_MSG_HDR_LEN + c->msg_size);
	const uint16_t udp_len = (uint16_t)(8 + IL_HDR_LEN + msgs * rec);
	const uint16_t len = (uint16_t)(14 + 20 + udp_len);
	uint8_t *f = (uint8_t *)rte_pktmbuf_append(m, len);
	if (!f) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	uint32_t gaddr = c->group_addr_base + gi;
	mcast_mac(f, gaddr);
	memcpy(f + 6, s->tx_mac, 6);
	f[12] = 0x08;
	f[13] = 0x00;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);
	ip->version_ihl = 0x45;
	ip->type_of_service = 0;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(len - 14));
	ip->packet_id = 0;
	ip->fragment_offset = rte_cpu_to_be_16(0x4000); /* DF */
	ip->time_to_live = 16;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = rte_cpu_to_be_32(0x0a000000u | snd->id);
	ip->dst_addr = rte_cpu_to_be_32(gaddr);
	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(f + 34);
	udp->src_port = rte_cpu_to_be_16((uint16_t)(5000 + snd->id));
	udp->dst_port = rte_cpu_to_be_16(c->il_port);
	udp->dgram_len = rte_cpu_to_be_16(udp_len);
	udp->dgram_cksum = 0;

	uint8_t *h = f + 42;
	uint64_t sseq = snd->seq[gi];
	h[IL_OFF_VERSION] = IL_VERSION;
	h[IL_OFF_TYPE] = IL_T_DATA;
	h[IL_OFF_HDR_LEN] = IL_HDR_LEN;
	h[IL_OFF_FLAGS] = 0;
	il_put16(h + IL_OFF_GROUP_ID, (uint16_t)(c->group_base + gi));
	il_put16(h + IL_OFF_MSG_COUNT, (uint16_t)msgs);
	il_put32(h + IL_OFF_SENDER_ID, snd->id);
	il_put32(h + IL_OFF_EPOCH, 0);
	il_put64(h + IL_OFF_SENDER_SEQ, sseq);
	il_put64(h + IL_OFF_GLOBAL_SEQ, 0);
	il_put64(h + IL_OFF_STABLE_SEQ, 0);
	uint8_t *r = h + IL_HDR_LEN;
	uint64_t now = rte_rdtsc();
	for (unsigned i = 0; i < msgs; i++, r += rec) {
		il_put16(r, (uint16_t)c->msg_size);
		il_put16(r + 2, 0);
		if (c->msg_size >= 8)
			memcpy(r + 4, &now, 8);
		if (c->msg_size >= 16) {
			uint64_t tag = sseq + i;
			memcpy(r + 12, &tag, 8);
		}
	}
	if (c->udp_csum)
		udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
	snd->seq[gi] = sseq + msgs;
	snd->sent_msgs += msgs;
	snd->sent_frames++;
	s->group_sent[gi] += msgs;
	return m;
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

uint16_t pg_build_burst(struct pg_state *s, struct rte_mbuf **pkts, uint16_t n)
{
	const struct pg_conf *c = &s->c;
	uint16_t k = 0;
	unsigned blocked = 0;

	while (k < n) {
		uint64_t left = c->count ? c->count - s->tx_msgs : UINT64_MAX;
		if (!left)
			break;
		unsigned msgs = left < c->pack ? (unsigned)left : c->pack;
		struct pg_sender *snd = &s->senders[s->next_sender];
		if (c->window && !s->window_off && outstanding(s, snd) + msgs > c->window) {
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
		struct rte_mbuf *m = build_frame(s, snd, s->next_group, msgs);
		if (!m)
			break;
		pkts[k++] = m;
		s->tx_msgs += msgs;
		if (++s->next_sender == c->senders) {
			s->next_sender = 0;
			if (++s->next_group == c->groups)
				s->next_group = 0;
		}
	}
	return k;
}
