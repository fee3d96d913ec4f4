/* SPDX-License-Identifier: BSD-3-Clause
 * nak: serves receivers' NAKs from the sequencer's history. Held frames
 * are retransmitted as they were stamped (same mbuf, one more reference),
 * within a packets-per-second budget; sequences older than the history get
 * an explicit UNAVAIL so no receiver waits forever. Every answer is also
 * paid from the requester's own budget and not repeated to it within the
 * repair interval (nak_budget.h).
 */
#include <stdio.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_malloc.h>
#include <rte_memcpy.h>
#include <rte_random.h>

#include <interlink/app.h>
#include <interlink/err.h>
#include <interlink/tbucket.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "ha.h"
#include "nak_budget.h"
#include "seq.h"
#include "stage_auth.h"

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
	NAK_C_SUPPRESSED_FRAMES,
	NAK_C_SUPPRESSED_UNAVAIL,
	NAK_C_REQUESTER_LIMITED,
	NAK_C_UNAVAIL_LIMITED,
	NAK_C_REQUESTER_OVERFLOW,
	NAK_C_REPEAT_REQUESTERS,
	NAK_C_DROP_BAD_MAC,
	NAK_C_DROP_REPLAY,
	NAK_C_DROP_RETX_NO_MBUF,
	NAK_C_STALE_EPOCH,
	NAK_C_SHADOW_NAKS,
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
	[NAK_C_SUPPRESSED_FRAMES] = "suppressed_frames",
	[NAK_C_SUPPRESSED_UNAVAIL] = "suppressed_unavail",
	[NAK_C_REQUESTER_LIMITED] = "requester_limited",
	[NAK_C_UNAVAIL_LIMITED] = "unavail_limited",
	[NAK_C_REQUESTER_OVERFLOW] = "requester_overflow",
	[NAK_C_REPEAT_REQUESTERS] = "repeat_requesters",
	[NAK_C_DROP_BAD_MAC] = "drop_bad_mac",
	[NAK_C_DROP_REPLAY] = "drop_replay",
	[NAK_C_DROP_RETX_NO_MBUF] = "drop_retx_no_mbuf",
	[NAK_C_STALE_EPOCH] = "nak_stale_epoch",
	[NAK_C_SHADOW_NAKS] = "shadow_naks",
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
	/* UNAVAIL answers: their own stage-wide bucket, in frames. */
	uint64_t unavail_rate_pps, unavail_burst;
	struct il_tbucket unavail_budget;
	/* Per requester: buckets, answered ranges, the repeat finder. */
	struct nak_budget req;
	/* auth.keys set: NAKs must be signed and fresh; UNAVAIL goes out signed. */
	struct il_stage_auth auth;
	/* One appliance of a pair (docs/ha.md): NAKs name their epoch; the
	 * previous one's are served from the shadow. NULL: not a pair. */
	struct il_ha *ha;
};

/* Build an UNAVAIL frame for [first, last] of group gi, to the group's
 * multicast address (or back to the requester if the group has none). */
static void send_unavail(struct il_stage *st, struct nak *k, unsigned gi, const uint8_t *nak_frame,
			 const struct il_meta *nm, uint64_t first, uint64_t last, uint32_t epoch,
			 uint64_t low)
{
	const struct il_app *app = k->app;
	const uint16_t len = IL_UDP_HDRS_LEN + IL_HDR_LEN + IL_RANGE_LEN +
			     il_stage_auth_room(&k->auth);
	struct il_path path;
	uint8_t *f;
	struct rte_mbuf *m = il_stage_frame_alloc(st, len, &f);

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
				   .epoch = epoch,
				   .global_seq = low };
	uint8_t *b = il_frame_put(f, &path, 0, &h, IL_RANGE_LEN);
	il_range_put(b, first, last);
	il_stage_auth_sign(&k->auth, m);
	il_udp_csum_set(f + IL_ETH_HLEN); /* 0 goes out as 0xffff */
	st->ctr[NAK_C_UNAVAIL_SENT]++;
	st->ctr[NAK_C_UNAVAIL_SEQS] += last - first + 1;
	il_emit(st, k->tx, m);
}

/* The part of a NAK older than the history: one UNAVAIL, unless this
 * requester had the same answer within its hold or a budget is spent. */
static void answer_unavail(struct il_stage *st, struct nak *k, struct nak_requester *r,
			   unsigned gi, const uint8_t *f, const struct il_meta *mt, uint64_t first,
			   uint64_t last, uint64_t now, uint32_t epoch, uint64_t low)
{
	if (nak_budget_held(r, gi, true, first, last, now)) {
		st->ctr[NAK_C_SUPPRESSED_UNAVAIL]++;
		return;
	}
	int lim = nak_budget_take(r, &k->unavail_budget, now);
	if (lim) {
		st->ctr[lim == 1 ? NAK_C_REQUESTER_LIMITED : NAK_C_UNAVAIL_LIMITED]++;
		return;
	}
	send_unavail(st, k, gi, f, mt, first, last, epoch, low);
	nak_budget_answered(&k->req, r, gi, true, first, last, now);
}

/* A held frame goes out as it was stamped: the same mbuf with one more
 * reference, or a copy of the bytes the sequencer kept in its arena. */
static bool retransmit(struct il_stage *st, struct nak *k, unsigned gi,
		       const struct il_hist_ent *e)
{
	if (e->m != NULL) {
		rte_mbuf_refcnt_update(e->m, 1);
		il_emit(st, k->tx, e->m);
		return true;
	}
	uint8_t *f;
	struct rte_mbuf *m = il_stage_frame_alloc(st, e->len, &f);

	if (unlikely(m == NULL)) {
		st->ctr[NAK_C_DROP_RETX_NO_MBUF]++;
		return false;
	}
	rte_memcpy(f, il_seq_hist_bytes(k->seq, gi, e), e->len);
	il_emit(st, k->tx, m);
	return true;
}

/* A NAK of the previous epoch (docs/ha.md, "Repair below the cut"): the
 * other appliance's frames as it stamped them, from the shadow, within the
 * same budgets; below the shadow, UNAVAIL naming that epoch. */
static void serve_shadow(struct il_stage *st, struct nak *k, struct rte_mbuf *m, uint64_t first,
			 uint64_t last)
{
	const struct il_meta *mt = il_meta(m);
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	const uint8_t *h = f + mt->il_off;
	unsigned gi = mt->group_idx;
	const struct il_ha_shadow *sh = il_ha_shadow_of(k->ha, gi);
	uint64_t low = il_ha_shadow_low(k->ha, gi), now = rte_rdtsc();
	uint32_t src = il_get32(f + mt->l3_off + 12), member = il_get32(h + IL_OFF_SENDER_ID);
	bool overflow;
	struct nak_requester *r = nak_budget_find(&k->req, src, member, now, &overflow);

	st->ctr[NAK_C_SHADOW_NAKS]++;
	if (overflow)
		st->ctr[NAK_C_REQUESTER_OVERFLOW]++;
	if (first >= sh->end) {
		st->ctr[NAK_C_FUTURE]++;
		return;
	}
	if (last >= sh->end)
		last = sh->end - 1;
	if (first < low) {
		answer_unavail(st, k, r, gi, f, mt, first, last < low ? last : low - 1, now,
			       k->ha->prev, low);
		if (last < low)
			return;
		first = low;
	}
	uint32_t sent = 0;
	for (uint32_t idx = il_ha_shadow_find(k->ha, gi, first); idx < sh->n; idx++) {
		const struct il_ha_ent *e = il_ha_shadow_at(k->ha, gi, idx);

		if (e->first > last)
			break;
		if (sent == k->max_frames) {
			st->ctr[NAK_C_CAPPED]++;
			break;
		}
		int lim = il_emit_room(st) == 0 ? 2 : nak_budget_take(r, &k->budget, now);
		if (lim) {
			st->ctr[lim == 1 ? NAK_C_REQUESTER_LIMITED : NAK_C_RATE_LIMITED]++;
			break;
		}
		rte_mbuf_refcnt_update(e->m, 1);
		il_emit(st, k->tx, e->m);
		sent++;
		st->ctr[NAK_C_RETX_FRAMES]++;
		st->ctr[NAK_C_RETX_MSGS] += e->count;
	}
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
	if (k->ha != NULL && il_get32(h + IL_OFF_EPOCH) != k->seq->epoch) {
		/* A pair: the epoch the NAK asks about. The previous one is the
		 * other appliance's, held in the shadow while its cut is made. */
		if (il_ha_shadow_serves(k->ha, il_get32(h + IL_OFF_EPOCH)))
			serve_shadow(st, k, m, first, last);
		else
			st->ctr[NAK_C_STALE_EPOCH]++;
		return;
	}
	if (first >= g->next) {
		st->ctr[NAK_C_FUTURE]++;
		return;
	}
	if (last >= g->next)
		last = g->next - 1;

	/* The requester: its address and the member id its NAK names. */
	uint32_t src = il_get32(f + mt->l3_off + 12), member = il_get32(h + IL_OFF_SENDER_ID);
	uint64_t now = rte_rdtsc();
	bool overflow;
	struct nak_requester *r = nak_budget_find(&k->req, src, member, now, &overflow);
	if (overflow)
		st->ctr[NAK_C_REQUESTER_OVERFLOW]++;
	if (nak_budget_ask(&k->req, r, src, member, gi, k->app->groups[gi].id, first, last, now))
		st->ctr[NAK_C_REPEAT_REQUESTERS]++;

	if (first < low) {
		uint64_t gone_last = last < low ? last : low - 1;
		answer_unavail(st, k, r, gi, f, mt, first, gone_last, now, k->seq->epoch, low);
		if (last < low)
			return;
		first = low;
	}
	uint32_t idx = il_seq_hist_find(k->seq, gi, first);
	uint32_t sent = 0;
	uint64_t sent_first = 0, sent_last = 0;
	for (; idx < g->n; idx++) {
		const struct il_hist_ent *e = il_seq_hist_at(k->seq, gi, idx);
		if (e->first > last)
			break;
		uint64_t held_to = nak_budget_held_to(r, gi, e->first, now);
		if (held_to) {
			/* Skip the whole held range at once: a NAK for a huge
			 * range costs a lookup, not a walk. */
			uint64_t upto = held_to < last ? held_to : last;
			uint32_t next = il_seq_hist_find(k->seq, gi, upto + 1);
			if (next <= idx)
				next = idx + 1;
			st->ctr[NAK_C_SUPPRESSED_FRAMES] += next - idx;
			idx = next - 1;
			continue;
		}
		if (sent == k->max_frames) {
			st->ctr[NAK_C_CAPPED]++;
			break;
		}
		/* No more than fit behind this burst (counted as the global
		 * limit): the receiver asks again for the rest. */
		int lim = il_emit_room(st) == 0 ? 2 : nak_budget_take(r, &k->budget, now);
		if (lim) {
			st->ctr[lim == 1 ? NAK_C_REQUESTER_LIMITED : NAK_C_RATE_LIMITED]++;
			break;
		}
		if (!retransmit(st, k, gi, e))
			break;
		if (!sent)
			sent_first = e->first;
		sent_last = e->first + e->count - 1;
		sent++;
		st->ctr[NAK_C_RETX_FRAMES]++;
		st->ctr[NAK_C_RETX_MSGS] += e->count;
	}
	if (sent)
		nak_budget_answered(&k->req, r, gi, false, sent_first, sent_last, now);
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
		if (k->auth.keys != NULL) {
			enum il_auth_verdict v = il_stage_auth_check(&k->auth, m);
			if (v != IL_AUTH_OK) {
				il_drop(st, v == IL_AUTH_BAD_MAC ? NAK_C_DROP_BAD_MAC :
								   NAK_C_DROP_REPLAY, m);
				continue;
			}
		}
		serve(st, k, m);
		rte_pktmbuf_free(m);
	}
	return out;
}

/* The budget keys, at create with the documented defaults and at run time
 * (nak_set) with the current values as defaults. */
static int nak_read_budget(struct nak *k, const struct il_cfg *p, uint64_t rate, uint64_t burst,
			   uint64_t max_frames, char *err, size_t errlen)
{
	uint64_t r, b, m;

	if (il_cfg_u64(p, "rate_pps", rate, 1, 1000000000, &r, err, errlen) ||
	    il_cfg_u64(p, "burst", burst, 1, 1u << 24, &b, err, errlen) ||
	    il_cfg_u64(p, "max_frames_per_nak", max_frames, 1, IL_NAK_MAX_SPAN, &m, err, errlen))
		return -1;
	k->rate_pps = r;
	k->burst = b;
	k->max_frames = (uint32_t)m;
	return 0;
}

static int nak_create(struct il_stage *st, const struct il_cfg *p, struct il_app *app, char *err,
		      size_t errlen)
{
	static const char *const keys[] = {"type", "sequencer", "tx", "rate_pps", "burst",
					   "max_frames_per_nak", "repair_interval_us", "requesters",
					   "requester_rate_pps", "requester_burst", "unavail_rate_pps",
					   "unavail_burst", "repeat_log_after", "auth", NULL};
	struct nak_budget_conf bc;
	const char *seq, *tx;

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
	if (il_stage_auth_create(p, &k->auth, err, errlen))
		return -1;
	int ti = il_app_port_index(app, tx);
	if (ti < 0)
		return ERR("config: key '%s.tx': '%s' is not a configured port", il_cfg_path(p), tx);
	k->tx = (uint16_t)ti;
	if (nak_read_budget(k, p, 1000000, 4096, 4096, err, errlen))
		return -1;
	if (il_cfg_u64(p, "unavail_rate_pps", 1000, 1, 1000000000, &k->unavail_rate_pps, err,
		       errlen) ||
	    il_cfg_u64(p, "unavail_burst", 64, 1, 1u << 24, &k->unavail_burst, err, errlen) ||
	    il_cfg_u64(p, "repair_interval_us", 2000, 1, 10000000, &bc.interval_us, err, errlen) ||
	    il_cfg_u64(p, "requesters", 1024, NAK_WAYS, 1u << 20, &bc.slots, err, errlen) ||
	    il_cfg_u64(p, "requester_rate_pps", 100000, 1, 1000000000, &bc.rate_pps, err,
		       errlen) ||
	    il_cfg_u64(p, "requester_burst", 1024, 1, 1u << 24, &bc.burst, err, errlen) ||
	    il_cfg_u64(p, "repeat_log_after", 16, 1, 1000000, &bc.log_after, err, errlen))
		return -1;
	if (bc.slots & (bc.slots - 1))
		return ERR("config: key '%s.requesters': %lu is not a power of two (slots of the "
			   "per-requester NAK table, %u to 1048576, e.g. 1024)", il_cfg_path(p),
			   (unsigned long)bc.slots, NAK_WAYS);
	uint64_t hz = rte_get_tsc_hz(), now = rte_rdtsc();
	il_tbucket_init(&k->budget, (double)k->rate_pps, (double)k->burst, hz, now);
	il_tbucket_init(&k->unavail_budget, (double)k->unavail_rate_pps, (double)k->unavail_burst,
			hz, now);
	if (nak_budget_init(&k->req, &bc, hz, rte_rand(), err, errlen))
		return -1;
	return 0;
}

/* interlink-ctl set NAK rate_pps=... burst=... max_frames_per_nak=...: on
 * the stage's lcore; tokens earned so far are kept, capped at the new burst. */
static int nak_set(struct il_stage *st, const struct il_cfg *p, char *err, size_t errlen)
{
	static const char *const keys[] = {"rate_pps", "burst", "max_frames_per_nak", NULL};
	struct nak *k = st->ctx;

	if (il_cfg_check_keys(p, keys, err, errlen) ||
	    nak_read_budget(k, p, k->rate_pps, k->burst, k->max_frames, err, errlen))
		return -1;
	il_tbucket_set_rate(&k->budget, (double)k->rate_pps, (double)k->burst, rte_get_tsc_hz(),
			    rte_rdtsc());
	return 0;
}

/* The budget in force (it changes at run time). */
static void nak_state(const struct il_stage *st, struct il_state_sink *out)
{
	const struct nak *k = st->ctx;

	il_state_put(out, -1, "rate_pps", k->rate_pps);
	il_state_put(out, -1, "burst", k->burst);
	il_state_put(out, -1, "max_frames_per_nak", k->max_frames);
}

static int nak_bind(struct il_stage *st, char *err, size_t errlen)
{
	struct nak *k = st->ctx;
	extern const struct il_stage_type il_stage_sequencer;
	struct il_stage *seq = il_app_stage_peer(k->app, st, k->seq_name);

	if (!seq || seq->type != &il_stage_sequencer)
		return ERR("config: key 'stages.%s.sequencer': '%s' is not a sequencer stage",
			   st->name, k->seq_name);
	if (seq->lcore != st->lcore)
		return ERR("config: stage '%s' (lcore %d) must run on the lcore of its sequencer "
			   "'%s' (lcore %d): the history is single-threaded", st->name, st->lcore,
			   seq->name, seq->lcore);
	k->seq = seq->ctx;
	k->ha = il_ha_find(k->app);
	return 0;
}

static void nak_log(struct il_stage *st, FILE *out)
{
	struct nak *k = st->ctx;

	nak_budget_log(&k->req, st->name, out);
}

static void nak_destroy(struct il_stage *st)
{
	struct nak *k = st->ctx;

	if (k) {
		nak_budget_free(&k->req);
		il_stage_auth_free(&k->auth);
	}
	rte_free(st->ctx);
	st->ctx = NULL;
}

const struct il_stage_type il_stage_nak = {
	.name = "nak",
	.help = "serve NAKs from a sequencer's history, budgeted per requester; UNAVAIL beyond it",
	.counter_names = nak_counter_names,
	.n_counters = NAK_C_COUNT,
	.create = nak_create,
	.bind = nak_bind,
	.set = nak_set,
	.state = nak_state,
	.process = nak_process,
	.destroy = nak_destroy,
	.log = nak_log,
	.meta_needs = IL_META_TAGS,
	.kinds = IL_KIND_BIT(IL_K_NAK),
	.kinds_kept = true,
};
