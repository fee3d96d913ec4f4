/* SPDX-License-Identifier: BSD-3-Clause
 * FT-TCP stage: TCP segment access and in-place rewriting (header only,
 * used by ftcp.c). Checksums are updated incrementally (RFC 1624) for the
 * seq/ack/window rewrites; a segment whose options change is rechecksummed
 * (the wire library's checksums, as for the segments the stage makes).
 */
#ifndef INTERLINK_STAGE_FTCP_PKT_H
#define INTERLINK_STAGE_FTCP_PKT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>

#include <interlink/csum.h>
#include <interlink/frame.h>

#include "ftcp.h"

/* ---- packet access --------------------------------------------------- */

struct seg {
	struct rte_ether_hdr *eth;
	struct rte_ipv4_hdr *ip;
	struct rte_tcp_hdr *tcp;
	uint8_t *payload;
	uint32_t plen;
	uint32_t thl;
	uint32_t seq, ack;
	uint8_t flags;
};

static inline bool seg_parse(struct rte_mbuf *m, struct seg *s)
{
	uint32_t len = rte_pktmbuf_data_len(m), ihl, tot;

	if (len < sizeof(*s->eth) + 20 + 20 || m->nb_segs != 1)
		return false;
	s->eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	if (s->eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
		return false;
	s->ip = (struct rte_ipv4_hdr *)(s->eth + 1);
	ihl = (s->ip->version_ihl & 0xf) * 4u;
	tot = rte_be_to_cpu_16(s->ip->total_length);
	if ((s->ip->version_ihl >> 4) != 4 || ihl < 20 || s->ip->next_proto_id != IPPROTO_TCP ||
	    (s->ip->fragment_offset & rte_cpu_to_be_16(0x3fff)) || tot < ihl + 20 ||
	    sizeof(*s->eth) + tot > len)
		return false;
	s->tcp = (struct rte_tcp_hdr *)((uint8_t *)s->ip + ihl);
	s->thl = (s->tcp->data_off >> 4) * 4u;
	if (s->thl < 20 || ihl + s->thl > tot)
		return false;
	s->payload = (uint8_t *)s->tcp + s->thl;
	s->plen = tot - ihl - s->thl;
	s->seq = rte_be_to_cpu_32(s->tcp->sent_seq);
	s->ack = rte_be_to_cpu_32(s->tcp->recv_ack);
	s->flags = s->tcp->tcp_flags;
	/* Trim Ethernet padding so what we log is the segment only. */
	if (len > sizeof(*s->eth) + tot)
		rte_pktmbuf_trim(m, (uint16_t)(len - sizeof(*s->eth) - tot));
	return true;
}

/* Incremental checksum update of one 32-bit field (RFC 1624). */
#define OFF_SEQ 4
#define OFF_ACK 8
static inline void set32(struct rte_tcp_hdr *t, unsigned off, uint32_t host)
{
	struct il_csum_delta d;
	rte_be32_t nv = rte_cpu_to_be_32(host);
	void *field = (uint8_t *)t + off;

	il_csum_begin(&d, t->cksum);
	il_csum_sub(&d, field, 4);
	il_csum_add(&d, &nv, 4);
	memcpy(field, &nv, 4);
	t->cksum = il_csum_end(&d);
}

static inline void set_win(struct rte_tcp_hdr *t, uint16_t host)
{
	struct il_csum_delta d;
	rte_be16_t nv = rte_cpu_to_be_16(host);

	il_csum_begin(&d, t->cksum);
	il_csum_sub(&d, (uint8_t *)t + 14, 2);
	il_csum_add(&d, &nv, 2);
	t->rx_win = nv;
	t->cksum = il_csum_end(&d);
}

/* Read MSS and window scale; turn SACK-permitted, SACK and timestamps into
 * NOPs. Returns true when it changed the options. */
static inline bool opts_scan(struct seg *s, uint16_t *mss, uint8_t *ws, bool *has_ws)
{
	uint8_t *o = (uint8_t *)(s->tcp + 1), *end = s->payload;
	bool changed = false;

	while (o < end) {
		uint8_t kind = o[0], l;
		if (kind == 0)
			break;
		if (kind == 1) {
			o++;
			continue;
		}
		if (o + 1 >= end || (l = o[1]) < 2 || o + l > end)
			break;
		if (kind == 2 && l == 4 && mss)
			*mss = (uint16_t)(o[2] << 8 | o[3]);
		else if (kind == 3 && l == 3 && ws) {
			*ws = o[2] > 14 ? 14 : o[2];
			*has_ws = true;
		} else if (kind == 4 || kind == 5 || kind == 8) {
			memset(o, 1, l);
			changed = true;
		}
		o += l;
	}
	return changed;
}

static inline bool csum_ok(const struct seg *s)
{
	return il_ipv4_l4_csum_ok((const uint8_t *)s->ip);
}

static inline void full_csum(struct seg *s)
{
	il_tcp_csum_set((uint8_t *)s->ip);
}

static inline uint16_t win_encode(uint64_t bytes, uint8_t ws)
{
	/* Round up: rescaling must never move the right edge left (G8). */
	uint64_t f = (bytes + (1u << ws) - 1) >> ws;
	return f > 0xffff ? 0xffff : (uint16_t)f;
}

/* The window to advertise with `ack`: wb bytes, widened if needed so the
 * right edge never moves left of what the client was already offered (a
 * restarted server starts with a smaller buffer than its predecessor had
 * grown; G8). Segments beyond the new server's window are dropped by it
 * and retransmitted by the client: harmless. */
static inline uint16_t edge_window(struct ftcp_flow *fl, uint32_t ack, uint64_t wb)
{
	uint32_t edge = ack + (uint32_t)(wb > 0x3fffffff ? 0x3fffffff : wb);
	uint16_t field;

	if (fl->have_edge && ftc_seq_lt(edge, fl->max_edge))
		wb = fl->max_edge - ack;
	field = win_encode(wb, fl->sws_orig);
	edge = ack + ((uint32_t)field << fl->sws_orig);
	if (!fl->have_edge || ftc_seq_lt(fl->max_edge, edge)) {
		fl->max_edge = edge;
		fl->have_edge = true;
	}
	return field;
}

#endif
