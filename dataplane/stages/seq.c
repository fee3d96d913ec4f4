/* SPDX-License-Identifier: BSD-3-Clause
 * sequencer: stamps epoch and the next global sequence of its group on
 * every DATA frame (native: in place; raw: header inserted), keeps a
 * reference in the group's history ring for NAK service.
 */
#include <stdio.h>
#include <string.h>

#include <rte_malloc.h>

#include <interlink/err.h>

#include "seq_stamp.h"

static const char *const seq_counter_names[SEQ_C_COUNT] = {
	[SEQ_C_STAMPED_FRAMES] = "stamped_frames",
	[SEQ_C_STAMPED_MSGS] = "stamped_msgs",
	[SEQ_C_RAW_INSERTED] = "raw_inserted",
	[SEQ_C_HIST_EVICTED] = "history_evicted",
	[SEQ_C_DROP_RAW_TOO_BIG] = "drop_raw_too_big",
	[SEQ_C_DROP_NO_HEADROOM] = "drop_no_headroom",
	[SEQ_C_RAW_SENDER_TABLE_FULL] = "raw_sender_table_full",
	[SEQ_C_DROP_HIST_FULL_UNSTABLE] = "drop_history_full_unstable",
	[SEQ_C_DROP_FIFO_DUP] = "drop_fifo_dup",
	[SEQ_C_DROP_FIFO_GAP] = "drop_fifo_gap",
	[SEQ_C_FIFO_TABLE_FULL] = "fifo_table_full",
	[SEQ_C_FIFO_RESETS] = "fifo_resets",
	[SEQ_C_RESTAMPED] = "restamped_frames",
};


/* One's-complement sum of the four 16-bit words of 8 bytes in memory,
 * unfolded: the two 32-bit halves added in 64 bits. */
static inline uint64_t sum8(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return (v & 0xffffffffu) + (v >> 32);
}

/* Native DATA: epoch, global_seq, stable_seq and every flag are the
 * appliance's to say, whatever the sender put there (a receiver trusts a
 * watermark only the appliance may give): all are overwritten, and a frame
 * that came in with flags, epoch or global_seq set is counted. The
 * sender's own stable_seq (its oldest unstable message) was read by the
 * FIFO check before this. `fifo_start`: the first frame of a sender's new
 * incarnation (IL_F_FIFO_START). */
static __rte_always_inline void stamp_native(struct il_seq *s, struct il_stage *st,
					      struct seq_tally *t, struct rte_mbuf *m,
					      uint8_t fifo_start, const bool uto)
{
	const struct il_meta *mt = il_meta(m);
	uint8_t *base = rte_pktmbuf_mtod(m, uint8_t *);
	uint8_t *h = base + mt->il_off;
	uint8_t *udp = base + mt->l4_off;
	struct il_seq_group *g = &s->groups[mt->group_idx];
	uint16_t cnt = il_get16(h + IL_OFF_MSG_COUNT);
	uint64_t gs = g->next, stable = 0, was_seq;
	uint32_t was_epoch;
	uint8_t fl = IL_F_STAMPED | fifo_start;
	uint16_t ucs;

	g->next += cnt;
	if (uto) {
		fl |= IL_F_STABLE_VALID;
		stable = g->stable;
		g->carried = g->stable;
	}
	memcpy(&was_epoch, h + IL_OFF_EPOCH, 4);
	memcpy(&was_seq, h + IL_OFF_GLOBAL_SEQ, 8);
	if (unlikely((h[IL_OFF_FLAGS] & IL_F_APPLIANCE_OWNED) | was_epoch | was_seq))
		st->ctr[SEQ_C_RESTAMPED]++;
	memcpy(&ucs, udp + 6, 2);
	if (ucs) {
		/* RFC 1624 over the words that change: bytes 0..15 of the header
		 * (flags, epoch) and 24..39 (global_seq, stable_seq), summed 32
		 * bits at a time: new - old = new + ~old in one's complement. */
		uint64_t old = sum8(h) + sum8(h + 8) + sum8(h + 24) + sum8(h + 32);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		/* The new words made in registers and stored whole: storing the
		 * fields and reading the words back made the loads wait for
		 * stores they only partly overlap (a store-forwarding stall,
		 * about a fifth of the stage: docs/benchmarks.md). In memory
		 * order: flags is byte 3 of word 0, epoch bytes 4..7 of word 1
		 * (big-endian), global_seq and stable_seq words 3 and 4. */
		uint64_t w0, w1;
		memcpy(&w0, h, 8);
		memcpy(&w1, h + 8, 8);
		w0 = (w0 & ~(0xffull << 24)) | (uint64_t)fl << 24; /* reserved bits refused */
		w1 = (w1 & 0xffffffffull) | (uint64_t)__builtin_bswap32(s->epoch) << 32;
		const uint64_t w3 = __builtin_bswap64(gs), w4 = __builtin_bswap64(stable);
		memcpy(h, &w0, 8);
		memcpy(h + 8, &w1, 8);
		memcpy(h + 24, &w3, 8);
		memcpy(h + 32, &w4, 8);
		uint64_t neu = (w0 & 0xffffffffu) + (w0 >> 32) + (w1 & 0xffffffffu) + (w1 >> 32) +
			       (w3 & 0xffffffffu) + (w3 >> 32) + (w4 & 0xffffffffu) + (w4 >> 32);
#else
		h[IL_OFF_FLAGS] = fl; /* the parser refused reserved bits */
		il_put32(h + IL_OFF_EPOCH, s->epoch);
		il_put64(h + IL_OFF_GLOBAL_SEQ, gs);
		il_put64(h + IL_OFF_STABLE_SEQ, stable);
		uint64_t neu = sum8(h) + sum8(h + 8) + sum8(h + 24) + sum8(h + 32);
#endif
		/* ~old as 16-bit words: fold old to 16 bits, then complement. */
		uint64_t acc = (uint16_t)~ucs + (uint64_t)(uint16_t)~fold64(old) + neu;
		ucs = il_udp_csum_fix((uint16_t)~fold64(acc));
		memcpy(udp + 6, &ucs, 2);
	} else {
		h[IL_OFF_FLAGS] = fl; /* the parser refused reserved bits */
		il_put32(h + IL_OFF_EPOCH, s->epoch);
		il_put64(h + IL_OFF_GLOBAL_SEQ, gs);
		il_put64(h + IL_OFF_STABLE_SEQ, stable);
	}
	hist_push(s, t, g, m, gs, cnt, il_get32(h + IL_OFF_SENDER_ID),
		  il_get64(h + IL_OFF_SENDER_SEQ));
}


/* Made for the group's first raw frame and again whenever the epoch or
 * uto changed since (an epoch change at run time costs one rebuild per
 * group). */
void __rte_noinline il_seq_raw_plan_make(struct il_seq *s, unsigned gi)
{
	const struct il_group *grp = &s->app->groups[gi];
	struct il_raw_plan *p = &s->groups[gi].raw;

	il_hdr1_tmpl_init(&p->tmpl, &(struct il_hdr_fields){
		.type = IL_T_DATA,
		.flags = IL_F_STAMPED | IL_F_RAW | (s->uto ? IL_F_STABLE_VALID : 0),
		.group_id = grp->id,
		.msg_count = 1,
		.epoch = s->epoch,
	});
	p->dst = rte_cpu_to_be_32(grp->address);
	p->dport = rte_cpu_to_be_16(grp->out_port);
	il_mcast_mac(p->mac, grp->address);
	/* The UDP checksum's delta, the part every frame shares: the new
	 * destination and port come in, and both copies of the length (the
	 * pseudo-header's and the header's) grow by RAW_INSERT, which in one's
	 * complement adds RAW_INSERT twice whatever the old length was (the
	 * too-big check keeps the sum below 64 KB). In memory order, like
	 * every word summed here. */
	p->udp_sum = (uint64_t)p->dst + p->dport + 2u * rte_cpu_to_be_16(RAW_INSERT);
	p->made_for = raw_plan_key(s);
}

/* The history evicts its oldest frame for every frame it takes in, and
 * that mbuf went cold long ago: fetch the burst's victims before the
 * stamping loop needs them. */
static inline void prefetch_victims(struct il_seq *s, struct rte_mbuf **pkts, uint16_t n)
{
	for (uint16_t i = 0; i < n; i++) {
		const struct il_meta *mt = il_meta(pkts[i]);
		if ((mt->kind != IL_K_DATA && mt->kind != IL_K_RAW) ||
		    (mt->kind == IL_K_DATA && mt->spare == IL_SEQ_FUSED))
			continue;
		struct il_seq_group *g = &s->groups[mt->group_idx];
		if (g->n == s->depth) {
			/* Freeing reads both of the mbuf's lines (refcnt, pool;
			 * next). A NULL entry (copied) is not prefetched. */
			const struct rte_mbuf *v = g->ring[(g->head + g->pf) & s->mask].m;
			if (v != NULL) {
				rte_prefetch0(v);
				rte_prefetch0(&v->next);
			}
		}
		g->pf++;
	}
}

/* Under UTO the oldest frame may go only once it is stable. */
static inline bool hist_full_unstable(const struct il_seq *s, unsigned gi)
{
	const struct il_seq_group *g = &s->groups[gi];

	if (g->n < s->depth)
		return false;
	const struct il_hist_ent *e = &g->ring[(g->head - g->n) & s->mask];
	return e->first + e->count > g->stable;
}

/* Under uto, a native DATA frame is stamped only if it is its sender's
 * next: returns 0 (go on, the sender's next has moved past it) or the
 * counter to drop under. Frames lost before us show as a gap: the frame
 * is refused and the control stage tells the sender where to resume;
 * one below the next was stamped already (a re-send). sender_seq 0 means
 * the sender does not number its frames: not checked. *fifo_start: the
 * frame starts a new incarnation's FIFO (the first stamped since its JOIN). */
static inline int fifo_check(struct il_seq *s, struct il_stage *st, struct rte_mbuf *m,
			     uint8_t *fifo_start)
{
	const struct il_meta *mt = il_meta(m);
	const uint8_t *h = rte_pktmbuf_mtod(m, const uint8_t *) + mt->il_off;
	uint64_t sseq = il_get64(h + IL_OFF_SENDER_SEQ);

	if (unlikely(sseq == 0))
		return 0;
	struct il_seq_fifo *f = il_seq_fifo_get(s, mt->group_idx, il_get32(h + IL_OFF_SENDER_ID),
						true);
	if (unlikely(f == NULL)) {
		st->ctr[SEQ_C_FIFO_TABLE_FULL]++;
		return 0;
	}
	if (unlikely(f->next == 0)) {
		/* Learn: a sender's stable_seq on its way in is the oldest
		 * of its messages it does not know stable (libinterlink
		 * sends it), so a lost first frame is noticed too; without
		 * it the frame itself starts the stream. */
		uint64_t base = il_get64(h + IL_OFF_STABLE_SEQ);

		f->next = base != 0 && base <= sseq ? base : sseq;
	}
	if (likely(sseq == f->next)) {
		f->next += il_get16(h + IL_OFF_MSG_COUNT);
		if (unlikely(f->mark)) {
			f->mark = false;
			*fifo_start = IL_F_FIFO_START;
		}
		return 0;
	}
	if (sseq < f->next && sseq + il_get16(h + IL_OFF_MSG_COUNT) <= f->next) {
		/* Sent again by a sender that does not know it stable (its
		 * grant, which says so, was lost): the control stage sends
		 * the grant again (at most every resume_interval_us). */
		f->dup = true;
		s->resume_due = true;
		return SEQ_C_DROP_FIFO_DUP;
	}
	/* A gap, or a re-sent frame packed across our next: either way the
	 * sender must go on from exactly `next`. */
	f->notify = true;
	s->resume_due = true;
	return sseq < f->next ? SEQ_C_DROP_FIFO_DUP : SEQ_C_DROP_FIFO_GAP;
}

/* A sender's JOIN or HEARTBEAT, seen here in order with its DATA (the
 * control stage consumes it after us). A JOIN of an incarnation we do not
 * know (the process restarted, or the first we hear of it) starts a new
 * FIFO: its sender_seq is learnt again from its next frame, which is
 * stamped FIFO_START so that every receiver restarts the sender's FIFO at
 * exactly that point of the group's order, and the control stage forgets
 * the old incarnation's credits. A repeated JOIN changes nothing (a sender
 * that was excluded while alive rejoins with the same incarnation and
 * goes on with its numbering). A HEARTBEAT only names the incarnation of
 * a sender whose frames we stamped without knowing it (after a restart of
 * this appliance, senders go on without joining again). */
static void fifo_member(struct il_seq *s, struct il_stage *st, struct rte_mbuf *m)
{
	const struct il_meta *mt = il_meta(m);
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	const uint8_t *h = f + mt->il_off;
	uint8_t type = h[IL_OFF_TYPE];

	if ((type != IL_T_JOIN && type != IL_T_HEARTBEAT) ||
	    il_get16(f + mt->l4_off + 4) < 8u + h[IL_OFF_HDR_LEN] + IL_MEMBER_MSG_LEN)
		return;
	const uint8_t *b = h + h[IL_OFF_HDR_LEN];
	if (!(il_get32(b) & IL_ROLE_SENDER))
		return;
	uint32_t inc = il_get32(b + 4);
	/* classify names the group of every CONTROL frame (NONE: not
	 * configured; the control stage drops it). */
	if (unlikely(mt->group_idx == IL_GROUP_IDX_NONE ||
		     s->groups[mt->group_idx].fifo == NULL))
		return; /* not configured, or another shard's group */
	struct il_seq_fifo *e = il_seq_fifo_get(s, mt->group_idx, il_get32(h + IL_OFF_SENDER_ID),
						type == IL_T_JOIN);
	if (e == NULL || e->incarnation == inc)
		return;
	if (type == IL_T_HEARTBEAT) {
		if (e->incarnation == 0)
			e->incarnation = inc;
		return;
	}
	if (e->next != 0)
		st->ctr[SEQ_C_FIFO_RESETS]++;
	e->incarnation = inc;
	e->next = 0;
	e->notify = false;
	e->told_next = 0;
	e->mark = true;
	e->ctl_reset = true;
	e->join_seq = s->groups[mt->group_idx].next;
	s->inc_due = true;
}

/* The burst's frames in order, made three times by the compiler: with uto
 * (the history's and the senders' FIFO checks) and without, where the loop
 * holds nothing but the stamping; without uto, with frames classify
 * stamped already in the burst (`fused`) or none. */
static __rte_always_inline uint16_t seq_frames(struct il_seq *s, struct il_stage *st,
					       struct seq_tally *t, struct rte_mbuf **pkts,
					       uint16_t n, const bool uto, const bool fused)
{
	uint16_t out = 0;

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		uint8_t kind = il_meta(m)->kind, fifo_start = 0;

		if (fused && kind == IL_K_DATA && il_meta(m)->spare == IL_SEQ_FUSED) {
			/* Stamped by classify's fused raw path: on as the DATA
			 * frame this stage would have made of it. */
			il_meta(m)->spare = 0;
			pkts[out++] = m;
			continue;
		}
		if (uto && (kind == IL_K_DATA || kind == IL_K_RAW)) {
			if (hist_full_unstable(s, il_meta(m)->group_idx)) {
				/* Evicting would lose a frame some receiver may
				 * still NAK; refusing the new one costs its
				 * sender a retransmission (the FIFO check below
				 * then asks for it). Credits keep this rare. */
				il_drop(st, SEQ_C_DROP_HIST_FULL_UNSTABLE, m);
				continue;
			}
			int c = kind == IL_K_DATA ? fifo_check(s, st, m, &fifo_start) : 0;
			if (c) {
				il_drop(st, (unsigned)c, m);
				continue;
			}
		} else if (uto && kind == IL_K_CONTROL) {
			fifo_member(s, st, m);
		}
		if (likely(kind == IL_K_DATA)) {
			stamp_native(s, st, t, m, fifo_start, uto);
		} else if (kind == IL_K_RAW) {
			int c = stamp_raw(s, st, t, m, uto);
			if (c) {
				il_drop(st, (unsigned)c, m);
				continue;
			}
		}
		pkts[out++] = m;
	}
	return out;
}

static uint16_t seq_process(struct il_stage *st, struct rte_mbuf **pkts, uint16_t n)
{
	struct il_seq *s = st->ctx;
	struct seq_tally t = {0};
	uint16_t out;

	if (s->copy_max == 0)
		prefetch_victims(s, pkts, n);
	if (unlikely(s->uto))
		out = seq_frames(s, st, &t, pkts, n, true, true);
	else if (st->io == NULL || (st->io->kinds & IL_SEQ_KIND_FUSED))
		out = seq_frames(s, st, &t, pkts, n, false, true);
	else
		out = seq_frames(s, st, &t, pkts, n, false, false);
	seq_tally_end(s, st, &t);
	if (st->io != NULL)
		st->io->kinds |= IL_KIND_BIT(IL_K_DATA);
	return out;
}

static int seq_create(struct il_stage *st, const struct il_cfg *p, struct il_app *app, char *err,
		      size_t errlen)
{
	static const char *const keys[] = {"type", "history", "raw_senders", "copy_max", NULL};
	uint64_t depth, raw_cap, copy_max;

	if (il_cfg_check_keys(p, keys, err, errlen))
		return -1;
	if (il_cfg_u64(p, "history", 16384, 2, 1u << 24, &depth, err, errlen))
		return -1;
	if (depth & (depth - 1))
		return ERR("config: key '%s.history': %lu is not a power of two (frames kept per "
			   "group for retransmission, e.g. 16384)", il_cfg_path(p), depth);
	if (il_cfg_u64(p, "raw_senders", 4096, 8, 1u << 20, &raw_cap, err, errlen))
		return -1;
	if (il_cfg_u64(p, "copy_max", 256, 0, 1024, &copy_max, err, errlen))
		return -1;
	struct il_seq *s = rte_zmalloc("il_seq", sizeof(*s), RTE_CACHE_LINE_SIZE);
	if (!s)
		return ERR("out of memory for stage '%s'", st->name);
	st->ctx = s;
	s->app = app;
	s->depth = (uint32_t)depth;
	s->mask = (uint32_t)depth - 1;
	s->copy_max = (uint32_t)copy_max;
	s->slot = (uint32_t)RTE_ALIGN_CEIL(s->copy_max, 64);
	s->epoch = app->epoch;
	s->groups = rte_zmalloc("il_seq_groups", sizeof(*s->groups) * app->n_groups,
				RTE_CACHE_LINE_SIZE);
	if (!s->groups)
		return ERR("out of memory for stage '%s'", st->name);
	for (unsigned g = 0; g < app->n_groups; g++) {
		s->groups[g].next = 1;
		/* A shard keeps the state of its own groups only: classify's
		 * stray split never lets another group's frame reach it. */
		if (!il_stage_owns_group(app, st, g))
			continue;
		s->n_owned++;
		s->groups[g].ring = rte_zmalloc("il_hist", sizeof(struct il_hist_ent) * depth,
						RTE_CACHE_LINE_SIZE);
		s->groups[g].fifo = rte_zmalloc("il_fifo", sizeof(struct il_seq_fifo) *
						IL_SEQ_FIFO_SLOTS, RTE_CACHE_LINE_SIZE);
		if (!s->groups[g].ring || !s->groups[g].fifo)
			return ERR("out of memory for %lu history slots of stage '%s'", depth,
				   st->name);
		if (s->slot) {
			/* Not zeroed: written before it is read. */
			s->groups[g].arena = rte_malloc("il_hist_arena", (size_t)s->slot * depth,
							RTE_CACHE_LINE_SIZE);
			if (!s->groups[g].arena)
				return ERR("out of memory for the %lu x %u-byte history arena of "
					   "stage '%s' (lower '%s.copy_max' or raise the EAL memory)",
					   depth, s->slot, st->name, il_cfg_path(p));
		}
	}
	uint32_t slots = 16;
	while (slots < 2 * raw_cap)
		slots *= 2;
	s->raw_senders = rte_zmalloc("il_raw_senders", sizeof(s->raw_senders[0]) * slots,
				     RTE_CACHE_LINE_SIZE);
	s->raw_sender_cap = (uint32_t)raw_cap;
	s->raw_mask = slots - 1;
	if (!s->raw_senders)
		return ERR("cannot create the raw-sender table of stage '%s'", st->name);
	return 0;
}

static void seq_destroy(struct il_stage *st)
{
	struct il_seq *s = st->ctx;
	if (!s)
		return;
	for (unsigned g = 0; s->groups && g < s->app->n_groups; g++) {
		struct il_seq_group *grp = &s->groups[g];
		for (uint32_t i = 0; i < grp->n; i++) {
			struct rte_mbuf *m = grp->ring[(grp->head - grp->n + i) & s->mask].m;
			if (m != NULL)
				rte_pktmbuf_free(m);
		}
		rte_free(grp->ring);
		rte_free(grp->arena);
		rte_free(grp->fifo);
	}
	rte_free(s->groups);
	if (s->n_victims)
		rte_pktmbuf_free_bulk(s->victims, s->n_victims);
	rte_free(s->raw_senders);
	rte_free(s);
	st->ctx = NULL;
}

static void seq_state(const struct il_stage *st, struct il_state_sink *out)
{
	const struct il_seq *s = st->ctx;

	for (unsigned g = 0; g < s->app->n_groups; g++) {
		if (s->groups[g].ring == NULL)
			continue; /* another shard's group */
		il_state_put(out, (int)g, "next", s->groups[g].next);
		il_state_put(out, (int)g, "history_low", il_seq_hist_low(s, g));
		il_state_put(out, (int)g, "history_frames", s->groups[g].n);
	}
}

/* Any frame may be longer than copy_max: every slot may hold an mbuf. */
static uint32_t seq_mbufs_held(const struct il_stage *st)
{
	const struct il_seq *s = st->ctx;

	return s->depth * s->n_owned;
}

/* A new epoch at run time (the ha stage, docs/ha.md): the sequence space
 * starts again at 1, the history of the old one is let go (a standby's
 * shadow serves it, not this), and every sender's FIFO is learnt again
 * from its next frame, as after a restart. */
void il_seq_restart(struct il_seq *s, uint32_t epoch)
{
	for (unsigned gi = 0; gi < s->app->n_groups; gi++) {
		struct il_seq_group *g = &s->groups[gi];

		if (g->ring == NULL)
			continue; /* another shard's group */
		for (uint32_t i = 0; i < g->n; i++) {
			struct rte_mbuf *m = g->ring[(g->head - g->n + i) & s->mask].m;
			if (m != NULL)
				rte_pktmbuf_free(m);
		}
		g->n = g->head = g->pf = 0;
		g->next = 1;
		g->stable = g->carried = 0;
		g->stamped_frames = 0;
		memset(g->fifo, 0, sizeof(*g->fifo) * IL_SEQ_FIFO_SLOTS);
		g->n_fifo = 0;
	}
	memset(s->raw_senders, 0, sizeof(s->raw_senders[0]) * (s->raw_mask + 1));
	s->raw_sender_n = 0;
	s->resume_due = s->inc_due = false;
	s->epoch = epoch;
}

const struct il_stage_type il_stage_sequencer = {
	.name = "sequencer",
	.help = "stamp epoch + per-group global sequence on DATA (native and raw), keep history",
	.counter_names = seq_counter_names,
	.n_counters = SEQ_C_COUNT,
	.create = seq_create,
	.process = seq_process,
	.destroy = seq_destroy,
	.state = seq_state,
	.mbufs_held = seq_mbufs_held,
	.meta_needs = IL_META_TAGS,
	/* CONTROL: a sender's JOIN or HEARTBEAT under uto (fifo_member). */
	.kinds = IL_KIND_BIT(IL_K_DATA) | IL_KIND_BIT(IL_K_RAW) | IL_KIND_BIT(IL_K_CONTROL),
	.kinds_kept = true, /* raw frames leave as DATA: seq_process says so */
	.writes_frames = true,
};
