/* SPDX-License-Identifier: BSD-3-Clause
 * Shards (docs/scaling.md section 1): groups spread over worker lcores,
 * one owner per group. A shard runs the chains of the pipeline over its own
 * queues with stage instances of its own; a frame of a group another shard
 * owns (a stray) is handed to the owner through a single-producer
 * single-consumer rte_ring and counted, never dropped silently.
 *
 * il_shard_of_addr() is the assignment `assign: hash` uses: the Toeplitz
 * hash of the IPv4 destination with DPDK's default RSS key, looked up in a
 * 128-entry redirection table filled round-robin, which is the queue a NIC
 * programmed that way picks. Senders that choose their queue themselves
 * (interlink-pktgen --queues) call the same function.
 */
#ifndef INTERLINK_SHARD_H
#define INTERLINK_SHARD_H

#include <stdint.h>

#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_thash.h>

#include <interlink/stage.h>

#define IL_MAX_SHARDS 8
#define IL_SHARD_RETA_SIZE 128
/* Groups a shard's owner table covers (app.h's IL_MAX_GROUPS). */
#define IL_SHARD_MAX_GROUPS 256

/* DPDK's default RSS key (the one testpmd and most PMDs start with). */
static const uint8_t il_shard_rss_key[40] = {
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67,
	0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb,
	0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
	0xf2, 0x0c, 0x6a, 0x42, 0xb3, 0xbb, 0xbe, 0xac, 0x01, 0xfa,
};

/* The shard (= queue) that owns the group whose frames go to dst (host
 * order), out of n: RSS over the IPv4 destination only. */
static inline uint16_t il_shard_of_addr(uint32_t dst, uint16_t n)
{
	uint32_t tuple = dst;
	uint32_t h = rte_softrss(&tuple, 1, il_shard_rss_key);
	uint32_t reta = h % IL_SHARD_RETA_SIZE;

	return n ? (uint16_t)(reta % n) : 0;
}

/* One shard's hand-over state: written by its own lcore only (the rings
 * are single producer, single consumer: out[j] is shard j's in[me]). */
struct il_shard {
	uint16_t index;   /* 0..n-1 */
	uint16_t n;       /* shards in the appliance */
	unsigned lcore;
	/* Owner of every configured group (by group index): this shard's own
	 * copy, read-only on the fast path. */
	uint8_t owner[IL_SHARD_MAX_GROUPS];
	struct rte_ring *out[IL_MAX_SHARDS]; /* to shard j (NULL for me) */
	struct rte_ring *in[IL_MAX_SHARDS];  /* from shard j */
	/* Its own mbufs: receive queue `index` of every multi-queue port, the
	 * frames its stages make, and every stray it is handed (copied in, so
	 * a shard's history never holds another shard's mbufs). */
	struct rte_mempool *pool;
	uint64_t handoff_out;       /* strays moved to their owner's ring */
	uint64_t handoff_in;        /* strays taken from the other shards' rings */
	uint64_t drop_handoff_full; /* the owner's ring was full: freed, counted */
	uint64_t drop_handoff_nombuf; /* a stray handed to this shard found its
				       * pool empty (no copy): freed, counted */
};

/* Kinds that belong to one group (classify sets group_idx on them).
 * CONTROL frames go to their group's owner too (its control stage keeps the
 * group's members and talks for it on its own channel), except those of a
 * group that is not configured (IL_GROUP_IDX_NONE); frames that are not
 * Interlink traffic stay on the shard that received them (docs/scaling.md
 * 1.4, 1.5). */
#define IL_SHARD_KINDS (IL_KIND_BIT(IL_K_DATA) | IL_KIND_BIT(IL_K_RAW) | \
			IL_KIND_BIT(IL_K_NAK) | IL_KIND_BIT(IL_K_CONTROL))

/* After classify: move every frame of another shard's group onto that
 * shard's ring, tagged with the chain it arrived on (il_meta.spare), and
 * keep the rest compacted in pkts, in order. Returns how many stay. */
static inline uint16_t il_shard_handoff(struct il_shard *sh, uint16_t chain,
					struct rte_mbuf **pkts, uint16_t n)
{
	struct rte_mbuf *to[IL_MAX_SHARDS][IL_BURST_CAP];
	uint16_t cnt[IL_MAX_SHARDS] = {0};
	uint16_t keep = 0;
	bool any = false;

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct il_meta *mt = il_meta(m);

		if ((IL_KIND_BIT(mt->kind) & IL_SHARD_KINDS) != 0 &&
		    mt->group_idx != IL_GROUP_IDX_NONE) {
			uint8_t o = sh->owner[mt->group_idx];
			if (unlikely(o != sh->index)) {
				mt->spare = chain;
				to[o][cnt[o]++] = m;
				any = true;
				continue;
			}
		}
		pkts[keep++] = m;
	}
	if (likely(!any))
		return keep;
	for (uint16_t o = 0; o < sh->n; o++) {
		if (cnt[o] == 0)
			continue;
		unsigned k = rte_ring_enqueue_burst(sh->out[o], (void **)to[o], cnt[o], NULL);
		sh->handoff_out += k;
		if (unlikely(k < cnt[o])) {
			sh->drop_handoff_full += cnt[o] - k;
			rte_pktmbuf_free_bulk(to[o] + k, cnt[o] - k);
		}
	}
	return keep;
}

#endif
