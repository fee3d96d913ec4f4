/* SPDX-License-Identifier: BSD-3-Clause
 * classify: parse every frame once, tag it in the mbuf metadata (DATA,
 * NAK, RAW, CONTROL or nothing) for the stages after it, and drop what is
 * malformed, counted by reason. Untagged frames pass through untouched,
 * or, with `other: drop` (one of several appliances side by side, not the
 * one that forwards the rest: docs/scaling.md 2.1), are dropped and
 * counted (drop_other). Interlink frames of a group not configured here
 * are dropped (drop_unknown_group), except control frames, which pass
 * unless `unknown_control: drop` (appliances side by side must: each
 * forwarding the others' STABLE, VIEW... between the switches would loop
 * them).
 */
#include <stdio.h>
#include <string.h>

#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include <interlink/app.h>
#include <interlink/err.h>
#include <interlink/parse.h>
#include <interlink/wire.h>

#include "seq_stamp.h"

enum {
	CL_C_UNKNOWN_GROUP = IL_V_COUNT,
	CL_C_RAW_MATCHED,
	CL_C_DROP_MULTISEG,
	CL_C_DROP_OTHER,
	CL_C_COUNT
};

static const char *cl_counter_names[CL_C_COUNT];

/*
 * Raw-mode filters, looked up for every UDP frame that is not Interlink:
 * an open-addressing table with linear probing, at most half full, so a
 * lookup (a miss, for most other traffic) ends within a probe or two
 * whatever the number of filters. A slot holds the key (destination
 * address << 16 | destination port: 48 bits) and the group index + 1 in
 * the top 16 bits; 0 is an empty slot (no filter has port 0).
 */
#define RAW_KEY_MASK ((UINT64_C(1) << 48) - 1)
#define RAW_MIN_SLOTS 8u

struct classify {
	struct il_app *app;
	uint16_t il_port;
	uint16_t n_raw;
	bool drop_other;   /* other: drop */
	bool drop_unknown_control; /* unknown_control: drop */
	bool fused_raw;    /* fused_raw: true (the default) */
	/* The sequencer stage right after this one in the chains whose rx
	 * ports are in fuse_ports: there, raw-mode frames of its groups are
	 * stamped here, by its own code (seq_stamp.h), in the pass that
	 * recognised them (classify_bind). NULL: every frame is left to the
	 * stage. */
	struct il_stage *seq_st;
	struct il_seq *seq;
	uint32_t fuse_ports; /* bit p: the chain that receives app port p */
	uint8_t *fuse_group; /* per group: 1 when the sequencer keeps its state (its shard's) */
	uint32_t raw_mask; /* slots - 1 */
	uint64_t raw[];
};

static inline uint64_t raw_key(uint32_t dst_ip, uint16_t dst_port)
{
	return (uint64_t)dst_ip << 16 | dst_port;
}

static inline uint32_t raw_slot(uint64_t key, uint32_t mask)
{
	return (uint32_t)((key * UINT64_C(0x9e3779b97f4a7c15)) >> 32) & mask;
}

/* The group index of the filter for key, or -1. */
static inline int raw_find(const struct classify *c, uint64_t key)
{
	for (uint32_t i = raw_slot(key, c->raw_mask);; i = (i + 1) & c->raw_mask) {
		uint64_t e = c->raw[i];
		if (e == 0)
			return -1;
		if ((e & RAW_KEY_MASK) == key)
			return (int)(e >> 48) - 1;
	}
}

static void raw_add(struct classify *c, uint64_t key, uint16_t group_idx)
{
	uint32_t i = raw_slot(key, c->raw_mask);

	while (c->raw[i] != 0)
		i = (i + 1) & c->raw_mask;
	c->raw[i] = key | (uint64_t)(group_idx + 1) << 48;
	c->n_raw++;
}

static inline bool is_drop(enum il_verdict v)
{
	return v >= IL_V_DROP_FIRST;
}

/*
 * A frame in several segments: the parser saw the first one only, which
 * may end before the datagram does, so its verdict is not the frame's.
 * The headers decide (read across segments, into a stack copy): IPv4/UDP
 * to another port than Interlink's and matching no raw-mode filter is not
 * ours and passes untouched. Anything else that did not parse as a whole
 * from its first segment is dropped: the stages after classify read
 * Interlink frames in place, in one segment.
 */
static bool multiseg_passes(const struct classify *c, const struct rte_mbuf *m)
{
	uint8_t buf[14 + 4 + 60 + 8];
	uint32_t len = RTE_MIN(m->pkt_len, (uint32_t)sizeof(buf)), off = 14;
	const uint8_t *f = rte_pktmbuf_read(m, 0, len, buf);

	if (f == NULL || len < 14 + 4)
		return false;
	if (f[12] == 0x81 && f[13] == 0x00)
		off += 4;
	if (len < off + 20 + 8)
		return false;
	const uint8_t *ip = f + off;
	uint32_t ihl = (ip[0] & 0x0fu) * 4u;
	if (f[off - 2] != 0x08 || f[off - 1] != 0x00 || (ip[0] >> 4) != 4 || ihl < 20 ||
	    len < off + ihl + 8 || ip[9] != IPPROTO_UDP || (il_get16(ip + 6) & 0x1fffu))
		return false;
	uint16_t dport = il_get16(ip + ihl + 2);
	return dport != c->il_port &&
	       (c->n_raw == 0 || raw_find(c, raw_key(il_get32(ip + 16), dport)) < 0);
}

/* The fused raw path: a raw-mode frame of group gi stamped by the
 * sequencer's own code and tagged as the DATA frame the sequencer stage
 * would have made of it. false: dropped (counted by the sequencer). */
static __rte_always_inline bool fused_stamp(struct classify *c, struct seq_tally *t,
					    struct rte_mbuf *m, unsigned gi, unsigned l3_off,
					    unsigned l4_off, unsigned il_off)
{
	int r = stamp_raw_at(c->seq, c->seq_st, t, m, gi, l3_off, l4_off, il_off, false);

	if (unlikely(r)) {
		il_drop(c->seq_st, (unsigned)r, m);
		return false;
	}
	*il_meta(m) = (struct il_meta){.kind = IL_K_DATA, .l3_off = (uint8_t)l3_off,
				       .l4_off = (uint8_t)l4_off, .il_off = (uint8_t)il_off,
				       .group_idx = (uint16_t)gi, .spare = IL_SEQ_FUSED};
	return true;
}

static uint16_t classify_process(struct il_stage *st, struct rte_mbuf **pkts, uint16_t n)
{
	struct classify *c = st->ctx;
	const struct il_app *app = c->app;
	uint16_t out = 0;
	uint8_t kinds = 0; /* of the survivors, for dispatch */
	/* The fused raw path: not under uto (the sequencer's history and FIFO
	 * checks), and, to give every frame the sequence it would get from
	 * the stage, only until the first frame left for the stage to stamp. */
	struct il_seq *fz = c->seq;
	const uint8_t *fuse = fz != NULL && !fz->uto && st->io != NULL &&
			      (c->fuse_ports >> st->io->rx_port & 1u) ? c->fuse_group : NULL;
	struct seq_tally t = {0};
	uint64_t n_fused = 0;

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct il_meta *mt = il_meta(m);
		struct il_parsed p;
		enum il_verdict v;

		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
		v = il_parse_frame(rte_pktmbuf_mtod(m, const uint8_t *), m->data_len, c->il_port, &p);
		mt->kind = IL_K_NONE;
		if (unlikely(m->nb_segs > 1) && v != IL_V_PASS && v != IL_V_UDP) {
			if (!multiseg_passes(c, m)) {
				il_drop(st, CL_C_DROP_MULTISEG, m);
				continue;
			}
			v = IL_V_PASS;
		}
		if (unlikely(is_drop(v))) {
			il_drop(st, v, m);
			continue;
		}
		if (v == IL_V_PASS) {
			if (unlikely(c->drop_other)) {
				il_drop(st, CL_C_DROP_OTHER, m); /* counted once, as a drop */
				continue;
			}
			st->ctr[v]++;
			kinds |= IL_KIND_BIT(IL_K_NONE);
			pkts[out++] = m;
			continue;
		}
		int g = -1;
		if (v == IL_V_UDP) {
			g = c->n_raw ? raw_find(c, raw_key(p.dst_ip, p.dst_port)) : -1;
			if (g >= 0 && fuse != NULL && fuse[g]) {
				/* Stamped here, by the sequencer's code, counted
				 * as classify and the sequencer would count it (at
				 * the burst's end). Not a stray: a group of
				 * another shard is not fused. */
				n_fused++;
				/* Without a VLAN tag, the offsets as constants. */
				if (likely(p.il_off == IL_UDP_HDRS_LEN)) {
					if (unlikely(!fused_stamp(c, &t, m, (unsigned)g, 14, 34,
								  IL_UDP_HDRS_LEN)))
						continue;
				} else if (!fused_stamp(c, &t, m, (unsigned)g, p.l3_off, p.l4_off,
							p.il_off)) {
					continue;
				}
				kinds |= IL_SEQ_KIND_FUSED;
				pkts[out++] = m;
				continue;
			}
		}
		mt->l3_off = p.l3_off;
		mt->l4_off = p.l4_off;
		mt->il_off = p.il_off;
		if (v == IL_V_UDP) {
			if (g >= 0) {
				mt->kind = IL_K_RAW;
				mt->group_idx = (uint16_t)g;
				st->ctr[CL_C_RAW_MATCHED]++;
				/* Left to the sequencer stage: another shard's
				 * group (a stray, handed over), or no fused path. */
			} else if (unlikely(c->drop_other)) {
				il_drop(st, CL_C_DROP_OTHER, m);
				continue;
			}
			st->ctr[v]++;
			kinds |= IL_KIND_BIT(mt->kind);
			pkts[out++] = m;
			continue;
		}
		if (v == IL_V_CONTROL) {
			/* Its group, when configured: a sharded appliance hands
			 * a group's control frames to the group's owner. */
			uint16_t cgi = app->group_idx_by_id[p.group_id];
			if (unlikely(!cgi && c->drop_unknown_control)) {
				il_drop(st, CL_C_UNKNOWN_GROUP, m);
				continue;
			}
			st->ctr[v]++;
			mt->group_idx = cgi ? (uint16_t)(cgi - 1) : IL_GROUP_IDX_NONE;
			mt->kind = IL_K_CONTROL;
			kinds |= IL_KIND_BIT(IL_K_CONTROL);
			pkts[out++] = m;
			continue;
		}
		/* Counted as a kind or as a drop, never both: the kinds and
		 * the drops add up to pkts_in. */
		uint16_t gi = app->group_idx_by_id[p.group_id];
		if (unlikely(!gi)) {
			il_drop(st, CL_C_UNKNOWN_GROUP, m);
			continue;
		}
		st->ctr[v]++;
		mt->group_idx = (uint16_t)(gi - 1);
		mt->spare = 0; /* not IL_SEQ_FUSED */
		mt->kind = v == IL_V_DATA ? IL_K_DATA : IL_K_NAK;
		if (v == IL_V_DATA)
			fuse = NULL; /* the stage stamps it: no raw frame before it */
		kinds |= IL_KIND_BIT(mt->kind);
		pkts[out++] = m;
	}
	if (n_fused != 0) {
		st->ctr[IL_V_UDP] += n_fused;
		st->ctr[CL_C_RAW_MATCHED] += n_fused;
		/* The sequencer's counters count them (stamped_frames,
		 * raw_inserted, its drops); its pkts_in and cycles do not:
		 * they were not handed to it, and the work is this stage's. */
		seq_tally_end(fz, c->seq_st, &t);
	}
	if (st->io != NULL)
		st->io->kinds = kinds;
	return out;
}

/* The fused raw path, in each chain where a sequencer is the stage right
 * after this one and no stage after that dispatches on DATA (it would not
 * be called for a burst of frames stamped here: another sequencer, a
 * control stage logging what is sent). One sequencer (the first such):
 * its state is single-threaded, and on this lcore by construction. The
 * chain is told by its rx port (each port is received by one chain). */
static int classify_bind(struct il_stage *st, char *err, size_t errlen)
{
	extern const struct il_stage_type il_stage_sequencer;
	struct classify *c = st->ctx;
	const struct il_app *app = c->app;
	struct il_stage *seq = NULL;
	uint32_t ports = 0;

	if (!c->fused_raw || c->n_raw == 0)
		return 0;
	for (unsigned w = 0; w < app->n_workers; w++)
		for (unsigned k = 0; k < app->workers[w].n_chains; k++) {
			const struct il_chain *ch = &app->workers[w].chains[k];
			for (unsigned s = 0; s + 1 < ch->n_stages; s++) {
				struct il_stage *nx = ch->stages[s + 1];
				bool ok = ch->stages[s] == st && nx->type == &il_stage_sequencer &&
					  (seq == NULL || nx == seq);
				for (unsigned r = s + 2; ok && r < ch->n_stages; r++)
					ok = !(ch->stages[r]->kinds & IL_KIND_BIT(IL_K_DATA));
				if (ok) {
					seq = nx;
					ports |= 1u << ch->rx_port;
				}
			}
		}
	if (seq == NULL)
		return 0;
	c->fuse_group = rte_zmalloc("il_classify_fuse", app->n_groups, 0);
	if (c->fuse_group == NULL)
		return ERR("out of memory for stage '%s'", st->name);
	c->seq_st = seq;
	c->seq = seq->ctx;
	c->fuse_ports = ports;
	for (unsigned g = 0; g < app->n_groups; g++)
		c->fuse_group[g] = c->seq->groups[g].ring != NULL;
	return 0;
}

static int classify_create(struct il_stage *st, const struct il_cfg *p, struct il_app *app,
			   char *err, size_t errlen)
{
	static const char *const keys[] = {"type", "other", "unknown_control", "fused_raw", NULL};
	const char *other, *unk;
	bool fused_raw;

	if (il_cfg_check_keys(p, keys, err, errlen) ||
	    il_cfg_bool(p, "fused_raw", true, &fused_raw, err, errlen) ||
	    il_cfg_str(p, "other", "forward", &other, err, errlen) ||
	    il_cfg_str(p, "unknown_control", "pass", &unk, err, errlen))
		return -1;
	if (strcmp(unk, "pass") != 0 && strcmp(unk, "drop") != 0)
		return ERR("config: key '%s.unknown_control': '%s' is not pass or drop (drop: "
			   "appliances side by side, docs/scaling.md 2.1)", il_cfg_path(p), unk);
	if (strcmp(other, "forward") != 0 && strcmp(other, "drop") != 0)
		return ERR("config: key '%s.other': '%s' is not forward or drop (drop: an appliance "
			   "beside another that forwards what is not Interlink traffic, "
			   "docs/scaling.md 2.1)", il_cfg_path(p), other);
	unsigned n_raw = 0, slots = RAW_MIN_SLOTS;
	for (unsigned g = 0; g < app->n_groups; g++)
		n_raw += app->groups[g].raw;
	while (slots < 2 * n_raw)
		slots *= 2;
	struct classify *c = rte_zmalloc("il_classify", sizeof(*c) + slots * sizeof(c->raw[0]),
					 RTE_CACHE_LINE_SIZE);
	if (!c)
		return ERR("out of memory for stage '%s'", st->name);
	c->app = app;
	c->drop_other = strcmp(other, "drop") == 0;
	c->drop_unknown_control = strcmp(unk, "drop") == 0;
	c->fused_raw = fused_raw;
	c->il_port = app->il_udp_port;
	c->raw_mask = slots - 1;
	/* The configuration rejects two groups with one filter. */
	for (unsigned g = 0; g < app->n_groups; g++) {
		const struct il_group *grp = &app->groups[g];
		if (grp->raw)
			raw_add(c, raw_key(grp->raw_dst_ip, grp->raw_dst_port), (uint16_t)g);
	}
	st->ctx = c;
	return 0;
}

static void classify_destroy(struct il_stage *st)
{
	struct classify *c = st->ctx;

	if (c != NULL)
		rte_free(c->fuse_group);
	rte_free(st->ctx);
	st->ctx = NULL;
}

static void __attribute__((constructor)) classify_names(void)
{
	for (unsigned v = 0; v < IL_V_COUNT; v++)
		cl_counter_names[v] = il_verdict_names[v];
	cl_counter_names[CL_C_UNKNOWN_GROUP] = "drop_unknown_group";
	cl_counter_names[CL_C_RAW_MATCHED] = "raw_matched";
	cl_counter_names[CL_C_DROP_MULTISEG] = "drop_multiseg";
	cl_counter_names[CL_C_DROP_OTHER] = "drop_other";
}

const struct il_stage_type il_stage_classify = {
	.name = "classify",
	.help = "parse and tag frames; drop malformed ones by reason; pass the rest",
	.counter_names = cl_counter_names,
	.n_counters = CL_C_COUNT,
	.create = classify_create,
	.bind = classify_bind,
	.process = classify_process,
	.destroy = classify_destroy,
	.meta_sets = IL_META_TAGS,
	.kinds_kept = true, /* it sets io->kinds */
};
