/* SPDX-License-Identifier: BSD-3-Clause
 * Count mode (--check count): what a line-rate trial needs and no more.
 * Every frame is classified with a few loads (no full parse), frames that
 * carry our payload are counted, their TX timestamp goes into one latency
 * histogram, and each emulated receiver checks that the appliance's global
 * sequence of each group is continuous. No buffering, no NAKs, no hashing:
 * a trial measures the appliance, not pktgen's bookkeeping.
 */
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_prefetch.h>

#include <interlink/frame.h>
#include <interlink/wire.h>

#include "pktgen.h"

#define HDRS IL_UDP_HDRS_LEN

/* Frames sent before this run started (a previous trial's backlog in a
 * kernel socket buffer, say) are stale: counted apart, not as this run's. */
static inline bool stale(const struct pg_state *s, const uint8_t *ts)
{
	uint64_t t;
	memcpy(&t, ts, 8);
	/* zero: a frame that carries no timestamp (another generator's) */
	return t && t < s->t0 && s->t0 - t < 60 * s->hz;
}

static inline void latency(struct pg_state *s, const uint8_t *ts, uint64_t now)
{
	uint64_t t;
	memcpy(&t, ts, 8);
	/* Frames from another generator (testpmd) carry no timestamp: only a
	 * value from the last minute counts. */
	if (now > t && now - t < 60 * s->hz)
		pg_hist_add(&s->lat_count, now - t);
}

static inline void one(struct pg_state *s, const uint8_t *f, uint32_t len, uint64_t now)
{
	const struct pg_conf *c = &s->c;

	/* untagged IPv4 without options, UDP */
	if (len < HDRS + 16 || f[12] != 0x08 || f[13] != 0x00 || f[14] != 0x45 || f[23] != 17) {
		s->rx_other++;
		return;
	}
	uint16_t dport = (uint16_t)(f[36] << 8 | f[37]);
	const uint8_t *p = f + HDRS;
	if (dport == c->raw_port && c->mode != PG_NATIVE) {
		/* raw UDP passed through unchanged (testpmd io, the kernel's input) */
		if (stale(s, p)) {
			s->rx_stale++;
			return;
		}
		s->rx_data++;
		latency(s, p, now);
		return;
	}
	if (dport != c->il_port || len < HDRS + IL_HDR_LEN || p[IL_OFF_TYPE] != IL_T_DATA ||
	    p[IL_OFF_VERSION] != IL_VERSION) {
		s->rx_other++;
		return;
	}
	const uint8_t *rec = p + p[IL_OFF_HDR_LEN];
	if (rec + IL_MSG_HDR_LEN + 8 <= f + len) {
		if (stale(s, rec + IL_MSG_HDR_LEN)) {
			s->rx_stale++;
			return;
		}
		latency(s, rec + IL_MSG_HDR_LEN, now);
	}
	s->rx_data++;
	if (!(p[IL_OFF_FLAGS] & IL_F_STAMPED))
		return;
	unsigned gi = (unsigned)(il_get16(p + IL_OFF_GROUP_ID) - c->group_base);
	if (gi >= c->groups)
		return;
	uint64_t gseq = il_get64(p + IL_OFF_GLOBAL_SEQ);
	uint64_t cnt = il_get16(p + IL_OFF_MSG_COUNT);
	for (unsigned r = 0; r < c->receivers; r++) {
		struct pg_receiver *rx = &s->rx[r];
		uint64_t want = rx->cnt_next[gi];
		if (want && gseq != want) {
			if (gseq > want)
				rx->cnt_missing += gseq - want;
			else
				rx->cnt_reordered++;
		}
		rx->cnt_next[gi] = gseq + cnt;
		rx->g[gi].delivered += cnt;
	}
}

void pg_count_burst(struct pg_state *s, struct rte_mbuf **pkts, uint16_t n)
{
	uint64_t now = rte_rdtsc();
	for (uint16_t i = 0; i < n; i++) {
		if (i + 4 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 4], void *));
		const uint8_t *f = rte_pktmbuf_mtod(pkts[i], const uint8_t *);
		one(s, f, pkts[i]->data_len, now);
		if (s->cap.n < s->cap.cap)
			pg_capture_add(&s->cap, f, pkts[i]->data_len,
				       (uint64_t)((double)(now - s->t0) * 1e9 / (double)s->hz));
	}
	s->rx_frames += n;
	rte_pktmbuf_free_bulk(pkts, n);
}
