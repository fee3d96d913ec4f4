/* SPDX-License-Identifier: BSD-3-Clause
 *
 * What the `fec_enc` and `fec_dec` stages share: their configuration
 * (both ends of a link must agree on the code, so they read the same
 * keys), the frame layout they protect and a small FIFO of mbufs the
 * codec's callbacks fill while a burst is being walked.
 *
 * Spans are whole frames (span_extra = 14): an mbuf's data starts
 * cache-line aligned, so spans do too, and a recovered packet comes back
 * with the Ethernet header it had at the encoder, ready to send.
 */
#ifndef IL_FEC_STAGE_H
#define IL_FEC_STAGE_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include <interlink/config.h>
#include <interlink/fec.h>
#include <interlink/stage.h>

#define FEC_ETH_LEN 14u
#define FEC_REPAIR_FRAME_HDR (FEC_ETH_LEN + IL_FEC_IP_UDP_LEN)
#define FEC_DEF_PORT 7401u   /* UDP port of repairs, beside the native 7400 */
#define FEC_DEF_PENDING 1024u
#define FEC_MAX_PENDING 65536u

struct fec_stage_cfg {
	struct il_fec_cfg fec;
	bool enabled;           /* false: pass everything through (FEC off) */
	uint32_t local_ip;      /* host order: encoder's source, decoder's address */
	uint32_t peer_ip;       /* host order: encoder's destination, decoder's source */
	uint16_t port;          /* UDP port of repairs (both ends) */
	bool have_peer_mac, have_local_mac;
	struct rte_ether_addr peer_mac, local_mac;
	uint32_t pending;       /* FIFO of packets made while a burst is walked */
	uint64_t idle_flush_us; /* encoder: flush open bins after this idle time */
	bool hold_ref;          /* decoder: keep received packets by mbuf reference */
};

/* Read a fec_enc (enc = true) or fec_dec stage's keys into sc, run the
 * codec's check and print its warnings; errors name the key. Defined in
 * fec_enc.c. */
int fec_stage_parse(const struct il_stage *st, const struct il_cfg *params,
		    const struct il_app *app, bool enc, struct fec_stage_cfg *sc, char *err,
		    size_t errlen);

/* Memory hooks for the codec: its buffers come from DPDK's heap. */
void *fec_stage_alloc(size_t size, size_t align, void *arg);
void fec_stage_free(void *p, void *arg);

/* The IPv4 header of a frame the codec can protect (untagged Ethernet,
 * one segment, the whole IPv4 packet present), or NULL: such frames pass
 * through unprotected. *span_len is the frame up to the end of the IPv4
 * packet (Ethernet padding excluded). */
static inline const struct rte_ipv4_hdr *fec_frame_ipv4(const struct rte_mbuf *m,
							 uint32_t *span_len)
{
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
	const struct rte_ipv4_hdr *ip;
	uint32_t tot;

	if (m->nb_segs != 1 || m->data_len < FEC_ETH_LEN + 20 ||
	    eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
		return NULL;
	ip = (const struct rte_ipv4_hdr *)(eth + 1);
	tot = rte_be_to_cpu_16(ip->total_length);
	if ((ip->version_ihl >> 4) != 4 || tot < 20 || FEC_ETH_LEN + tot > m->data_len)
		return NULL;
	*span_len = FEC_ETH_LEN + tot;
	return ip;
}

/* FIFO of mbufs (power-of-two ring). The codec calls back inside a
 * burst's walk, when pkts still holds unread input, so what it makes
 * waits here and joins the burst's tail afterwards; what does not fit
 * this burst leaves with the next call. */
struct fec_fifo {
	uint32_t mask, head, tail;
	struct rte_mbuf **slot;
};

static inline uint32_t fec_fifo_count(const struct fec_fifo *f)
{
	return f->tail - f->head;
}

static inline bool fec_fifo_push(struct fec_fifo *f, struct rte_mbuf *m)
{
	if (f->tail - f->head > f->mask)
		return false;
	f->slot[f->tail++ & f->mask] = m;
	return true;
}

/* Move queued mbufs to pkts[out..IL_BURST_CAP); returns the new count. */
static inline uint16_t fec_fifo_drain(struct fec_fifo *f, struct rte_mbuf **pkts, uint16_t out)
{
	while (out < IL_BURST_CAP && f->head != f->tail)
		pkts[out++] = f->slot[f->head++ & f->mask];
	return out;
}

static inline void fec_fifo_free_all(struct fec_fifo *f)
{
	while (f->head != f->tail)
		rte_pktmbuf_free(f->slot[f->head++ & f->mask]);
}

#endif /* IL_FEC_STAGE_H */
