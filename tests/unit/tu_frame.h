/* SPDX-License-Identifier: BSD-3-Clause
 * Test frames: Ethernet + IPv4 + UDP around a payload the caller fills
 * (shared by the stage tests), built with the wire library.
 */
#ifndef INTERLINK_TU_FRAME_H
#define INTERLINK_TU_FRAME_H

#include <string.h>

#include <rte_mbuf.h>

#include <interlink/frame.h>

/* A zeroed frame of plen payload bytes from src to dst (host order), UDP
 * 5000 -> dport, IP checksum set (the UDP one left 0). Returns the mbuf;
 * *payload points at the UDP payload. NULL if the pool is empty (or the
 * frame too long for an mbuf). */
static inline struct rte_mbuf *tu_udp_frame(struct rte_mempool *pool, uint32_t src,
					    uint32_t dst, uint16_t dport, unsigned plen,
					    uint8_t **payload)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
	struct il_path p = { .src_ip = src, .dst_ip = dst, .src_port = 5000, .dst_port = dport,
			     .ttl = 9 };

	*payload = NULL;
	if (m == NULL)
		return NULL;
	uint8_t *f = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(IL_UDP_HDRS_LEN + plen));
	if (f == NULL) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	memset(f, 0, IL_UDP_HDRS_LEN + plen);
	*payload = il_udp_frame_put(f, &p, 0, (uint16_t)plen);
	return m;
}

/* Every mbuf in the pool gets `hash` (where the stages' il_meta lives) set
 * to junk (every byte `junk`), as a PMD's RSS hash or an earlier user of
 * the mbuf leaves it. */
static inline unsigned tu_pool_dirty_with(struct rte_mempool *pool, uint8_t junk)
{
	static struct rte_mbuf *all[1 << 16];
	unsigned n = 0;

	while (n < sizeof(all) / sizeof(all[0]) && (all[n] = rte_pktmbuf_alloc(pool)) != NULL)
		memset(&all[n++]->hash, junk, sizeof(all[0]->hash));
	rte_pktmbuf_free_bulk(all, n);
	return n;
}

static inline unsigned tu_pool_dirty(struct rte_mempool *pool)
{
	return tu_pool_dirty_with(pool, 0xa5);
}

#endif
