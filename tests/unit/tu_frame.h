/* SPDX-License-Identifier: BSD-3-Clause
 * Test frames: Ethernet + IPv4 + UDP around a payload the caller fills
 * (shared by the stage tests).
 */
#ifndef INTERLINK_TU_FRAME_H
#define INTERLINK_TU_FRAME_H

#include <string.h>

#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

/* A zeroed frame of plen payload bytes from src to dst (host order), UDP
 * 5000 -> dport, IP checksum set (the UDP one left 0). Returns the mbuf;
 * *payload points at the UDP payload. NULL if the pool is empty. */
static inline struct rte_mbuf *tu_udp_frame(struct rte_mempool *pool, uint32_t src,
					    uint32_t dst, uint16_t dport, unsigned plen,
					    uint8_t **payload)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(pool);

	*payload = NULL;
	if (m == NULL)
		return NULL;
	uint8_t *f = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(42 + plen));
	memset(f, 0, 42 + plen);
	f[12] = 0x08;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);
	ip->version_ihl = 0x45;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(28 + plen));
	ip->time_to_live = 9;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = rte_cpu_to_be_32(src);
	ip->dst_addr = rte_cpu_to_be_32(dst);
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(f + 34);
	udp->src_port = rte_cpu_to_be_16(5000);
	udp->dst_port = rte_cpu_to_be_16(dport);
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(8 + plen));
	*payload = f + 42;
	return m;
}

/* Every mbuf in the pool gets `hash` (where the stages' il_meta lives) set
 * to junk, as a PMD's RSS hash or an earlier user of the mbuf leaves it. */
static inline unsigned tu_pool_dirty(struct rte_mempool *pool)
{
	static struct rte_mbuf *all[1 << 16];
	unsigned n = 0;

	while (n < sizeof(all) / sizeof(all[0]) && (all[n] = rte_pktmbuf_alloc(pool)) != NULL)
		memset(&all[n++]->hash, 0xa5, sizeof(all[0]->hash));
	rte_pktmbuf_free_bulk(all, n);
	return n;
}

#endif
