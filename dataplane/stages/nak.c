/* SPDX-License-Identifier: BSD-3-Clause
 * nak: serves receivers' NAKs from the sequencer's history. Held frames
 * are retransmitted as they were stamped (same mbuf, one more reference),
 * within a packets-per-second budget; sequences older than the history get
 * an explicit UNAVAIL so no receiver waits forever.
 */
#include <stdio.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_malloc.h>

#include <interlink/app.h>
#include <interlink/err.h>
#include <interlink/tbucket.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "seq.h"

enum {
	NAK_C_NAKS,
	NAK_C_RETX_FRAMES,
	NAK_C_RETX_MSGS,
	NAK_C_UNAVAIL_SENT,
	NAK_C_UNAVAIL_SEQS,
	NAK_C_RATE_LIMITED,
	NAK_C_FUTURE,
	NAK_C_CAPPED,
	NAK_C_DROP_UNAVAIL_NO_MBUF,
	NAK_C_COUNT
};

static const char *const nak_counter_names[NAK_C_COUNT] = {
	[NAK_C_NAKS] = "naks",
	[NAK_C_RETX_FRAMES] = "retransmitted_frames",
	[NAK_C_RETX_MSGS] = "retransmitted_msgs",
	[NAK_C_UNAVAIL_SENT] = "unavail_sent",
	[NAK_C_UNAVAIL_SEQS] = "unavail_seqs",
	[NAK_C_RATE_LIMITED] = "rate_limited_frames",
	[NAK_C_FUTURE] = "nak_future",
	[NAK_C_CAPPED] = "nak_capped",
	[NAK_C_DROP_UNAVAIL_NO_MBUF] = "drop_unavail_no_mbuf",
};

struct nak {
	char seq_name[IL_NAME_LEN];
	char tx_name[IL_NAME_LEN];
	struct il_seq *seq;
	struct il_app *app;
	uint16_t tx;
	uint32_t max_frames;
	/* Retransmission budget: a token bucket in frames, on the TSC. */
	uint64_t rate_pps, burst;
	struct il_tbucket budget;
};

/* Build an UNAVAIL frame for [first, last] of group gi, to the group's
 * multicast address (or back to the requester if the group has none). */
static void send_unavail(struct il_stage *st, struct nak *k, unsigned gi, const uint8_t *nak_frame,
			 const struct il_meta *nm, uint64_t first, uint64_t last)
{
	const struct il_app *app = k->app;
	const uint16_t len = IL_UDP_HDRS_LEN + IL_HDR_LEN + IL_RANGE_LEN;
	struct il_path path;
	uint8_t *f;
	struct rte_mbuf *m = il_app_frame_alloc(app, len, &f);

	if (unlikely(!m)) {
		st->ctr[NAK_C_DROP_UNAVAIL_NO_MBUF]++;
		return;
	}
	il_app_group_path(app, k->tx, gi, &path);
	if (!app->groups[gi].address) {
		memcpy(path.dst_mac, nak_frame + 6, 6);
		path.dst_ip = il_get32(nak_frame + nm->l3_off + 12); /* the NAK's source */
	}
	/* sender_id echoes the requester */
	struct il_hdr_fields h = { .type = IL_T_UNAVAIL,
				   .group_id = app->groups[gi].id,
				   .sender_id = il_get32(nak_frame + nm->il_off + IL_OFF_SENDER_ID),
				   .epoch = k->seq->epoch,
				   .global_seq = il_seq_hist_low(k->seq, gi) };
	uint8_t *b = il_frame_put(f, &path, 0, &h, IL_RANGE_LEN);
	il_range_put(b, first, last);
	il_udp_csum_set(f + IL_ETH_HLEN); /* 0 goes out as 0xffff */
	st->ctr[NAK_C_UNAVAIL_SENT]++;
	st->ctr[NAK_C_UNAVAIL_SEQS] += last - first + 1;
	il_emit(st, k->tx, m);
}

static void serve(struct il_stage *st, struct nak *k, struct rte_mbuf *m)
{
	const struct il_meta *mt = il_meta(m);
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	const uint8_t *h = f + mt->il_off;
	uint8_t hl = h[IL_OFF_HDR_LEN];
	uint64_t first = il_get64(h + hl), last = il_get64(h + hl + 8);
	unsigned gi = mt->group_idx;
	const struct il_seq_group *g = &k->seq->groups[gi];
	uint64_t low = il_seq_hist_low(k->seq, gi);

	st->ctr[NAK_C_NAKS]++;
	if (first >= g->next) {
		st->ctr[NAK_C_FUTURE]++;
		return;
	}
	if (last >= g->next)
		last = g->next - 1;
	if (first < low) {
		uint64_t gone_last = last < low ? last : low - 1;
		send_unavail(st, k, gi, f, mt, first, gone_last);
		if (last < low)
			return;
		first = low;
	}
	uint64_t now = rte_rdtsc();
	uint32_t idx = il_seq_hist_find(k->seq, gi, first);
	uint32_t sent = 0;
	for (; idx < g->n; idx++) {
		const struct il_hist_ent *e = il_seq_hist_at(k->seq, gi, idx);
		if (e->first > last)
			break;
		if (sent == k->max_frames) {
			st->ctr[NAK_C_CAPPED]++;
			break;
		}
		if (!il_tbucket_take(&k->budget, 1.0, now)) {
			st->ctr[NAK_C_RATE_LIMITED]++;
			break;
		}
		rte_mbuf_refcnt_update(e->m, 1);
		il_emit(st, k->tx, e->m);
		sent++;
		st->ctr[NAK_C_RETX_FRAMES]++;
		st->ctr[NAK_C_RETX_MSGS] += e->count;
	}
}

static uint16_t nak_process(struct il_stage *st, struct rte_mbuf **pkts, uint16_t n)
{
	struct nak *k = st->ctx;
	uint16_t out = 0;

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		if (likely(il_meta(m)->kind != IL_K_NAK)) {
			pkts[out++] = m;
			continue;
		}
		serve(st, k, m);
		rte_pktmbuf_free(m);
	}
	return out;
}

static int nak_create(struct il_stage *st, const struct il_cfg *p, struct il_app *app, char *err,
		      size_t errlen)
{
	static const char *const keys[] = {"type", "sequencer", "tx", "rate_pps", "burst",
					   "max_frames_per_nak", NULL};
	const char *seq, *tx;
	uint64_t v;

	if (il_cfg_check_keys(p, keys, err, errlen))
		return -1;
	struct nak *k = rte_zmalloc("il_nak", sizeof(*k), RTE_CACHE_LINE_SIZE);
	if (!k)
		return ERR("out of memory for stage '%s'", st->name);
	st->ctx = k;
	k->app = app;
	if (il_cfg_str(p, "sequencer", NULL, &seq, err, errlen) ||
	    il_cfg_str(p, "tx", "out", &tx, err, errlen))
		return -1;
	if (!seq)
		return ERR("config: key '%s.sequencer' is missing: name the sequencer stage whose "
			   "history this stage serves", il_cfg_path(p));
	snprintf(k->seq_name, sizeof(k->seq_name), "%s", seq);
	int ti = il_app_port_index(app, tx);
	if (ti < 0)
		return ERR("config: key '%s.tx': '%s' is not a configured port", il_cfg_path(p), tx);
	k->tx = (uint16_t)ti;
	if (il_cfg_u64(p, "rate_pps", 1000000, 1, 1000000000, &k->rate_pps, err, errlen) ||
	    il_cfg_u64(p, "burst", 4096, 1, 1u << 24, &k->burst, err, errlen) ||
	    il_cfg_u64(p, "max_frames_per_nak", 4096, 1, IL_NAK_MAX_SPAN, &v, err, errlen))
		return -1;
	k->max_frames = (uint32_t)v;
	il_tbucket_init(&k->budget, (double)k->rate_pps, (double)k->burst, rte_get_tsc_hz(),
			rte_rdtsc());
	return 0;
}

static int nak_bind(struct il_stage *st, char *err, size_t errlen)
{
	struct nak *k = st->ctx;
	extern const struct il_stage_type il_stage_sequencer;
	struct il_stage *seq = il_app_stage(k->app, k->seq_name);

	if (!seq || seq->type != &il_stage_sequencer)
		return ERR("config: key 'stages.%s.sequencer': '%s' is not a sequencer stage",
			   st->name, k->seq_name);
	if (seq->lcore != st->lcore)
		return ERR("config: stage '%s' (lcore %d) must run on the lcore of its sequencer "
			   "'%s' (lcore %d): the history is single-threaded", st->name, st->lcore,
			   seq->name, seq->lcore);
	k->seq = seq->ctx;
	return 0;
}

static void nak_destroy(struct il_stage *st)
{
	rte_free(st->ctx);
	st->ctx = NULL;
}

const struct il_stage_type il_stage_nak = {
	.name = "nak",
	.help = "serve NAKs from a sequencer's history (rate-limited); UNAVAIL beyond it",
	.counter_names = nak_counter_names,
	.n_counters = NAK_C_COUNT,
	.create = nak_create,
	.bind = nak_bind,
	.process = nak_process,
	.destroy = nak_destroy,
};
