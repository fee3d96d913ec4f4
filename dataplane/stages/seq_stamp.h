/* SPDX-License-Identifier: BSD-3-Clause
 * The sequencer's stamping of one frame into its group's order and
 * history, inline: seq.c's stage loop uses it, and so does classify's
 * fused raw path (classify.c), which stamps a raw-mode frame right where
 * it recognised it. One copy of the code, two callers.
 */
#ifndef IL_STAGE_SEQ_STAMP_H
#define IL_STAGE_SEQ_STAMP_H

#include <string.h>

#include <rte_ip.h>
#include <rte_memcpy.h>
#include <rte_udp.h>
#if defined(RTE_ARCH_X86)
#include <emmintrin.h>
#endif

#include <interlink/csum.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "seq.h"

#define RAW_INSERT (IL_HDR_LEN + IL_MSG_HDR_LEN)

/*
 * The history. A frame of at most copy_max bytes is copied into its
 * group's arena (the slot of the same index as its ring entry) and its
 * mbuf is left to the sender's transmit, which frees it at once: the
 * history never makes the pool recycle cold mbufs, and evicting costs
 * nothing. Longer frames, or every frame with copy_max 0, are held by
 * reference, and evicting one frees an mbuf stamped `depth` frames ago
 * whose lines are long cold (prefetched a burst ahead). The alternatives
 * measured side by side (bulk release, references for the newest frames
 * only, plain stores) are in docs/benchmarks.md.
 */

/* Copy a stamped frame into its arena slot with streaming stores: the
 * slot's cold lines are not fetched first, and the arena, read again only
 * for a retransmission, does not push the working set out of the cache.
 * Whole 64-byte lines: the slot is a multiple of 64, and hist_copies()
 * checked that the mbuf's data room goes on that far past the frame. */
#if defined(RTE_ARCH_X86)
static inline void arena_line(uint8_t *dst, const uint8_t *src)
{
	__m128i a = _mm_loadu_si128((const __m128i *)(const void *)src);
	__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + 16));
	__m128i c = _mm_loadu_si128((const __m128i *)(const void *)(src + 32));
	__m128i d = _mm_loadu_si128((const __m128i *)(const void *)(src + 48));
	_mm_stream_si128((__m128i *)(void *)dst, a);
	_mm_stream_si128((__m128i *)(void *)(dst + 16), b);
	_mm_stream_si128((__m128i *)(void *)(dst + 32), c);
	_mm_stream_si128((__m128i *)(void *)(dst + 48), d);
}
#endif

static inline void arena_copy(uint8_t *dst, const uint8_t *src, uint32_t len)
{
#if defined(RTE_ARCH_X86)
	/* The first two lines unrolled: no stamped frame is empty, and most
	 * of those copied take one or two. */
	arena_line(dst, src);
	if (len > 64) {
		arena_line(dst + 64, src + 64);
		for (uint32_t o = 128; o < len; o += 64)
			arena_line(dst + o, src + o);
	}
#else
	rte_memcpy(dst, src, len);
#endif
}

static inline bool hist_copies(const struct il_seq *s, const struct rte_mbuf *m)
{
	return m->data_len <= s->copy_max && m->nb_segs == 1 &&
	       m->data_off + RTE_ALIGN_CEIL((uint32_t)m->data_len, 64) <= m->buf_len;
}

/* What one burst adds to the stage's per-frame counters, added to them
 * once at its end (a reader on another thread, telemetry, sees a burst's
 * counts together, as it sees pkts_in, added before the stage runs), and
 * the arena copy of the frame stamped last, made after the next one
 * is stamped: the frame's header was just written with stores of 2 to 16
 * bytes, and the copy's 16-byte loads, which each span several of them,
 * could not take their bytes from stores still in flight (a store-
 * forwarding stall, about a tenth of a raw frame's cost). One frame later
 * they have reached the cache, and the frame is still in it. */
struct seq_tally {
	uint64_t frames, msgs, evicted, raw;
	uint8_t *copy_dst;
	const uint8_t *copy_src;
	uint32_t copy_len;
};

static inline void tally_copy_flush(struct seq_tally *t)
{
	if (t->copy_dst != NULL) {
		arena_copy(t->copy_dst, t->copy_src, t->copy_len);
		t->copy_dst = NULL;
	}
}

static inline void hist_push(struct il_seq *s, struct seq_tally *t, struct il_seq_group *g,
			     struct rte_mbuf *m, uint64_t first, uint32_t count, uint32_t sender,
			     uint64_t sseq)
{
	uint32_t idx = g->head & s->mask;
	struct il_hist_ent *e = &g->ring[idx];

	if (g->n == s->depth) {
		if (e->m != NULL)
			s->victims[s->n_victims++] = e->m;
		t->evicted++;
	} else {
		g->n++;
	}
	if (s->copy_max) {
		/* The entry a burst from now evicts, if it holds a reference
		 * (a frame longer than copy_max): its mbuf is cold. */
		const struct rte_mbuf *ahead = g->ring[(idx + IL_BURST) & s->mask].m;
		if (unlikely(ahead != NULL)) {
			rte_prefetch0(ahead);
			rte_prefetch0(&ahead->next);
		}
	}
	tally_copy_flush(t);
	if (s->copy_max && hist_copies(s, m)) {
		t->copy_dst = g->arena + (size_t)idx * s->slot;
		t->copy_src = rte_pktmbuf_mtod(m, const uint8_t *);
		t->copy_len = m->data_len;
		e->m = NULL;
	} else {
		rte_mbuf_refcnt_update(m, 1);
		e->m = m;
	}
	e->first = first;
	e->count = (uint16_t)count;
	e->len = (uint16_t)m->pkt_len;
	e->sender = sender;
	e->sender_seq = sseq;
	g->head++;
	g->stamped_frames++;
	g->pf = 0;
	t->frames++;
	t->msgs += count;
}

/* Fold a 64-bit one's-complement sum to 16 bits. Adding a word rotated by
 * half its width puts the sum of both halves, end-around carry included,
 * in the upper half (Linux's csum_fold): two rotates instead of four
 * mask-shift-add rounds. */
static inline uint16_t fold64(uint64_t acc)
{
	uint32_t s = (uint32_t)((acc + (acc >> 32 | acc << 32)) >> 32);

	return (uint16_t)((s + (s >> 16 | s << 16)) >> 16);
}

/* Raw-mode senders: the per-source FIFO sequence of every (source
 * address, source port, group) seen, in an open-addressing table at most
 * half full (linear probing, never deleted from: a source keeps its
 * numbering for the appliance's lifetime). Read for every raw frame, so it
 * is a multiply and a probe or two, not a general hash table's lookup. A
 * slot with seq 0 is empty: a used slot has numbered one frame at least. */
static inline uint64_t raw_sender_next(struct il_seq *s, struct il_stage *st, uint32_t ip_be,
				       uint16_t port_be, uint16_t gi)
{
	uint64_t key = (uint64_t)ip_be << 32 | (uint32_t)port_be << 16 | gi;
	uint32_t i = (uint32_t)((key * UINT64_C(0x9e3779b97f4a7c15)) >> 32) & s->raw_mask;

	for (;; i = (i + 1) & s->raw_mask) {
		struct il_raw_sender *r = &s->raw_senders[i];

		if (likely(r->key == key && r->seq != 0))
			return ++r->seq;
		if (r->seq == 0) {
			if (unlikely(s->raw_sender_n == s->raw_sender_cap)) {
				st->ctr[SEQ_C_RAW_SENDER_TABLE_FULL]++;
				return 0;
			}
			s->raw_sender_n++;
			r->key = key;
			return r->seq = 1;
		}
	}
}

/* What a group's raw plan is made for: the epoch and uto it stamps, and
 * a bit no made plan lacks (a zeroed plan is not made). */
static inline uint64_t raw_plan_key(const struct il_seq *s)
{
	return (uint64_t)s->epoch | (uint64_t)s->uto << 32 | UINT64_C(1) << 33;
}

/* Made for the group's first raw frame and again whenever the epoch or
 * uto changed since (seq.c). */
void il_seq_raw_plan_make(struct il_seq *s, unsigned gi);

static inline const struct il_raw_plan *raw_plan(struct il_seq *s, unsigned gi)
{
	struct il_raw_plan *p = &s->groups[gi].raw;

	if (unlikely(p->made_for != raw_plan_key(s)))
		il_seq_raw_plan_make(s, gi);
	return p;
}

/* Raw mode: plain UDP matched by a group's filter. The 42 bytes of
 * headers move into the headroom (the payload stays where it is), the
 * header and one message record go in the gap, lengths, destination and
 * both checksums are updated, not recomputed. Returns 0, or the counter to
 * drop under; the caller tags the frame (stamp_raw, classify's fused raw
 * path). */
static __rte_always_inline int stamp_raw_at(struct il_seq *s, struct il_stage *st,
					    struct seq_tally *t, struct rte_mbuf *m,
					    const unsigned gi, const unsigned l3_off,
					    const unsigned l4_off, const unsigned il_off,
					    const bool uto)
{
	struct il_seq_group *g = &s->groups[gi];
	uint8_t *old = rte_pktmbuf_mtod(m, uint8_t *);
	const struct rte_ipv4_hdr *oip = (const struct rte_ipv4_hdr *)(old + l3_off);
	const struct rte_udp_hdr *oudp = (const struct rte_udp_hdr *)(old + l4_off);
	uint32_t ip_end = l3_off + ntohs(oip->total_length);

	if (m->pkt_len > ip_end)
		rte_pktmbuf_trim(m, (uint16_t)(m->pkt_len - ip_end)); /* Ethernet padding */
	if (m->pkt_len + RAW_INSERT > (uint32_t)s->app->frame_max + (l3_off - 14u))
		return SEQ_C_DROP_RAW_TOO_BIG;
	if (m->nb_segs != 1 || m->data_off < RAW_INSERT)
		return SEQ_C_DROP_NO_HEADROOM;

	/* The fields read where they are before the headers move: these loads
	 * need not wait for the move's stores. */
	const uint32_t src = oip->src_addr, old_dst = oip->dst_addr;
	const uint16_t old_tot = oip->total_length, icsum = oip->hdr_checksum;
	const uint16_t sport = oudp->src_port, dport = oudp->dst_port;
	const uint16_t ulen = oudp->dgram_len, ucs = oudp->dgram_cksum;
	const struct il_raw_plan *p = raw_plan(s, gi);
	/* Both checksums in 64-bit one's-complement sums of memory-order
	 * words (16 and 32 bits fold alike; RFC 1624: new = ~(~old + ~m + m')),
	 * what comes from the old headers summed at once, so that few of
	 * their fields stay live (values the compiler would spill).
	 * UDP: out go the old destination and port, in come the 44 inserted
	 * bytes (added once they are written) and what the plan sums (new
	 * destination, port and lengths). */
	const uint64_t uacc = (uint16_t)~ucs + p->udp_sum + (uint32_t)~old_dst +
			      (uint64_t)(uint16_t)~dport;
	/* IPv4: the total length (its delta is RAW_INSERT, as for UDP), and
	 * the destination when it changes (a header that came in damaged
	 * stays so). */
	uint64_t iacc = (uint16_t)~icsum + (uint64_t)rte_cpu_to_be_16(RAW_INSERT);
	const bool steer = old_dst != p->dst;
	if (steer)
		iacc += (uint32_t)~old_dst + (uint64_t)p->dst;
	uint8_t *base = old - RAW_INSERT;

	m->data_off -= RAW_INSERT;
	m->data_len += RAW_INSERT;
	m->pkt_len += RAW_INSERT;
	if (likely(il_off == IL_UDP_HDRS_LEN))
		memcpy(base, old, IL_UDP_HDRS_LEN); /* 42 < 44: they do not overlap */
	else
		memmove(base, old, il_off);

	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(base + l3_off);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(base + l4_off);

	if (steer) {
		/* Steer to the group's multicast address (and its MAC). */
		ip->dst_addr = p->dst;
		memcpy(base, p->mac, 6);
	}
	ip->total_length = htons((uint16_t)(ntohs(old_tot) + RAW_INSERT));
	ip->hdr_checksum = (uint16_t)~fold64(iacc);
	udp->dgram_len = htons((uint16_t)(ntohs(ulen) + RAW_INSERT));
	udp->dst_port = p->dport;

	const uint64_t gs = g->next++;
	const uint64_t sseq = raw_sender_next(s, st, src, sport, (uint16_t)gi);
	const uint64_t ins = il_hdr1_put(base + il_off, &p->tmpl, src, sseq, gs,
					 uto ? g->stable : 0,
					 (uint16_t)(ntohs(ulen) - sizeof(*udp)));

	g->carried = g->stable;
	if (ucs)
		udp->dgram_cksum = il_udp_csum_fix((uint16_t)~fold64(uacc + ins));
	t->raw++;
	hist_push(s, t, g, m, gs, 1, rte_be_to_cpu_32(src), sseq);
	return 0;
}

/* The sequencer's stage loop: where the frame is and its group, from
 * classify's tags. */
static __rte_always_inline int stamp_raw(struct il_seq *s, struct il_stage *st,
					 struct seq_tally *t, struct rte_mbuf *m, const bool uto)
{
	struct il_meta *mt = il_meta(m);
	int r = stamp_raw_at(s, st, t, m, mt->group_idx, mt->l3_off, mt->l4_off, mt->il_off, uto);

	if (likely(r == 0)) {
		mt->kind = IL_K_DATA;
		mt->spare = 0; /* not IL_SEQ_FUSED */
	}
	return r;
}

/* The end of a burst that stamped frames: the last frame's arena copy
 * (whatever runs after sees every byte), the burst's counts added to the
 * sequencer stage's counters, the history's victims freed. */
static inline void seq_tally_end(struct il_seq *s, struct il_stage *st, struct seq_tally *t)
{
	tally_copy_flush(t);
	st->ctr[SEQ_C_STAMPED_FRAMES] += t->frames;
	st->ctr[SEQ_C_STAMPED_MSGS] += t->msgs;
	st->ctr[SEQ_C_HIST_EVICTED] += t->evicted;
	st->ctr[SEQ_C_RAW_INSERTED] += t->raw;
	if (s->n_victims) {
		rte_pktmbuf_free_bulk(s->victims, s->n_victims);
		s->n_victims = 0;
	}
}

#endif
