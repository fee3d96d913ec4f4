/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Stage `fec_dec`: the receiving end of a Maelstrom link pair
 * (docs/fec.md, "The stages"). Repairs addressed to this appliance
 * (UDP to local_ip:port) are consumed by the codec; IPv4 frames are
 * shown to it and forwarded, except an original that arrives after its
 * recovery, which is dropped (counted) so no host gets a packet twice.
 * Recovered packets, copied into fresh mbufs, join the burst's tail.
 * Everything else passes through untouched.
 */
#include <stdio.h>
#include <string.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_malloc.h>
#include <rte_udp.h>

#include <interlink/app.h>

#include "fec_stage.h"

enum {
	CTR_DATA_IN,        /* IPv4 frames shown to the codec */
	CTR_UNPROTECTED,    /* not IPv4 (ARP, IPv6, VLAN) or segmented: passed as is */
	CTR_REPAIRS_IN,     /* repairs received */
	CTR_RECOVERED,      /* packets rebuilt and sent on */
	CTR_REC_L0,         /* ... by the layer (RS: parity row) of the repair */
	CTR_REC_L1,
	CTR_REC_L2,
	CTR_REC_L3UP,
	CTR_REC_IMMEDIATE,  /* ... by how: a repair missing only it */
	CTR_REC_CASCADE,    /* a stored repair, after a later arrival or recovery */
	CTR_REC_TWO_REPAIR, /* two stored repairs differing by one packet */
	CTR_REC_RS,         /* Reed-Solomon decode */
	CTR_UNRECOVERABLE,  /* awaited packets given up (evicted) */
	CTR_DROP_LATE,      /* originals that arrived after their recovery */
	CTR_DUP,            /* the same packet twice from the link: forwarded */
	CTR_R_USELESS,      /* repairs missing nothing */
	CTR_R_STORED,       /* repairs missing several: kept */
	CTR_R_EXPIRED,      /* repairs reaching behind the store */
	CTR_R_INCONSISTENT, /* repairs that disagree with kept packets */
	CTR_R_LOST,         /* gaps in the repair sequence */
	CTR_DROP_BAD,       /* malformed or foreign repairs (reasons in telemetry) */
	CTR_VERIFY_FAIL,    /* rebuilt bytes did not match their id: not sent */
	CTR_EV_PKT_COUNT,   /* evictions, by cause */
	CTR_EV_PKT_AGE,
	CTR_EV_REP_COUNT,
	CTR_EV_REP_AGE,
	CTR_EV_REP_ORPHAN,
	CTR_DROP_NOMBUF,    /* recovered packets lost: pool empty */
	CTR_DROP_PENDING,   /* recovered packets lost: pending FIFO full */
	CTR_COUNT
};

static const char *const dec_counter_names[CTR_COUNT] = {
	[CTR_DATA_IN] = "data_in",
	[CTR_UNPROTECTED] = "unprotected",
	[CTR_REPAIRS_IN] = "repairs_in",
	[CTR_RECOVERED] = "recovered",
	[CTR_REC_L0] = "recovered_l0",
	[CTR_REC_L1] = "recovered_l1",
	[CTR_REC_L2] = "recovered_l2",
	[CTR_REC_L3UP] = "recovered_l3up",
	[CTR_REC_IMMEDIATE] = "recovered_immediate",
	[CTR_REC_CASCADE] = "recovered_cascade",
	[CTR_REC_TWO_REPAIR] = "recovered_two_repair",
	[CTR_REC_RS] = "recovered_rs",
	[CTR_UNRECOVERABLE] = "unrecoverable",
	[CTR_DROP_LATE] = "drop_late_original",
	[CTR_DUP] = "dup_originals",
	[CTR_R_USELESS] = "repairs_useless",
	[CTR_R_STORED] = "repairs_stored",
	[CTR_R_EXPIRED] = "repairs_expired",
	[CTR_R_INCONSISTENT] = "repairs_inconsistent",
	[CTR_R_LOST] = "repairs_lost",
	[CTR_DROP_BAD] = "drop_bad_repair",
	[CTR_VERIFY_FAIL] = "verify_fail",
	[CTR_EV_PKT_COUNT] = "evict_pkt_count",
	[CTR_EV_PKT_AGE] = "evict_pkt_age",
	[CTR_EV_REP_COUNT] = "evict_repair_count",
	[CTR_EV_REP_AGE] = "evict_repair_age",
	[CTR_EV_REP_ORPHAN] = "evict_repair_orphan",
	[CTR_DROP_NOMBUF] = "drop_recovered_nombuf",
	[CTR_DROP_PENDING] = "drop_recovered_pending_full",
};

/* Age evictions need a tick while the link is idle; once a millisecond
 * is plenty against limits of a second. */
#define DEC_TICK_NS 1000000u

struct fec_dec_ctx {
	struct il_fec_dec *dec;
	const struct il_fec_dec_stats *s;
	struct fec_stage_cfg sc;
	struct rte_mempool *pool;
	struct il_stage *st;
	struct fec_fifo out;
	uint32_t local_be, peer_be;
	uint16_t port_be;
	bool check_peer;
	bool by_ref;      /* received packets held by reference (hold: ref, and no
			   * stage after this one writes into frames) */
	double ns_per_tsc;
	uint64_t tsc0, last_tick_ns;
};

/* Histogram keys for the state hook: bucket 0 holds 0, bucket k >= 1
 * holds [2^(k-1), 2^k), so "lat_pkts_lt8" counts latencies 4..7. */
static char hist_keys[2][IL_FEC_LAT_BUCKETS][24];
static char bad_keys[IL_FEC_BAD_COUNT_][40];

static void hist_keys_init(void)
{
	for (unsigned b = 0; b < IL_FEC_BAD_COUNT_; b++)
		snprintf(bad_keys[b], sizeof(bad_keys[b]), "bad_repair_%s", il_fec_bad_name(b));
	for (unsigned k = 0; k < IL_FEC_LAT_BUCKETS; k++) {
		if (k == 0) {
			snprintf(hist_keys[0][k], sizeof(hist_keys[0][k]), "lat_pkts_0");
			snprintf(hist_keys[1][k], sizeof(hist_keys[1][k]), "lat_us_0");
			continue;
		}
		snprintf(hist_keys[0][k], sizeof(hist_keys[0][k]), "lat_pkts_lt%lu", 1ul << k);
		snprintf(hist_keys[1][k], sizeof(hist_keys[1][k]), "lat_us_lt%lu", 1ul << k);
	}
}

static inline uint64_t dec_now_ns(const struct fec_dec_ctx *c)
{
	return (uint64_t)((double)(rte_rdtsc() - c->tsc0) * c->ns_per_tsc);
}

static void dec_deliver(void *arg, const uint8_t *span, uint32_t len,
			const struct il_fec_recovery *rec)
{
	struct fec_dec_ctx *c = arg;
	struct il_stage *st = c->st;
	struct rte_mbuf *m;
	void *p;

	RTE_SET_USED(rec);
	m = il_pktmbuf_alloc(c->pool);
	if (unlikely(m == NULL)) {
		st->ctr[CTR_DROP_NOMBUF]++;
		return;
	}
	/* Spans are at most lan_mtu + 14 bytes, checked against the pool at bind. */
	p = rte_pktmbuf_append(m, (uint16_t)len);
	rte_memcpy(p, span, len);
	if (unlikely(!fec_fifo_push(&c->out, m))) {
		st->ctr[CTR_DROP_PENDING]++;
		rte_pktmbuf_free(m);
	}
}

static void dec_release(void *handle, void *arg)
{
	(void)arg;
	rte_pktmbuf_free(handle);
}

static void dec_free(struct fec_dec_ctx *c)
{
	if (c == NULL)
		return;
	if (c->out.slot) {
		fec_fifo_free_all(&c->out);
		rte_free(c->out.slot);
	}
	il_fec_dec_free(c->dec);
	rte_free(c);
}

static int dec_create(struct il_stage *st, const struct il_cfg *params, struct il_app *app,
		      char *err, size_t errlen)
{
	struct fec_dec_ctx *c;
	char msg[512];

	c = rte_zmalloc("il_fec_dec", sizeof(*c), RTE_CACHE_LINE_SIZE);
	if (c == NULL) {
		snprintf(err, errlen, "stage '%s': out of memory", st->name);
		return -1;
	}
	c->st = st;
	if (fec_stage_parse(st, params, app, false, &c->sc, err, errlen))
		goto fail;
	c->out.mask = c->sc.pending - 1;
	c->out.slot = rte_zmalloc("il_fec_fifo", sizeof(*c->out.slot) * c->sc.pending, 0);
	if (c->out.slot == NULL) {
		snprintf(err, errlen, "stage '%s': out of memory for %u pending packets", st->name,
			 c->sc.pending);
		goto fail;
	}
	/* Received packets held by reference give their mbuf back here. */
	c->sc.fec.release = dec_release;
	c->sc.fec.release_arg = c;
	c->dec = il_fec_dec_create(&c->sc.fec, dec_deliver, c, msg, sizeof(msg));
	if (c->dec == NULL) {
		snprintf(err, errlen, "stage '%s': %s", st->name, msg);
		goto fail;
	}
	c->s = il_fec_dec_stats(c->dec);
	c->local_be = rte_cpu_to_be_32(c->sc.local_ip);
	c->peer_be = rte_cpu_to_be_32(c->sc.peer_ip);
	/* peer_ip defaults to our own address, which means "any sender". */
	c->check_peer = c->sc.peer_ip != c->sc.local_ip;
	c->port_be = rte_cpu_to_be_16(c->sc.port);
	c->ns_per_tsc = 1e9 / (double)rte_get_tsc_hz();
	c->tsc0 = rte_rdtsc();
	if (hist_keys[0][0][0] == '\0')
		hist_keys_init();
	st->ctx = c;
	return 0;
fail:
	dec_free(c);
	return -1;
}

/* A frame held by reference must keep its bytes: not when a stage after
 * this one in its chain writes into frames (a sequencer stamping, ftcp
 * rewriting). Then every packet is copied. */
static bool dec_holds_refs(const struct il_stage *st)
{
	const struct fec_dec_ctx *c = st->ctx;
	bool ref = c->sc.enabled && c->sc.hold_ref;

	for (unsigned w = 0; w < st->app->n_workers; w++)
		for (unsigned k = 0; k < st->app->workers[w].n_chains; k++) {
			const struct il_chain *ch = &st->app->workers[w].chains[k];
			bool after = false;

			for (unsigned i = 0; i < ch->n_stages; i++) {
				if (after && ch->stages[i]->type->writes_frames)
					ref = false;
				after |= ch->stages[i] == st;
			}
		}
	return ref;
}

static uint32_t dec_mbufs_held(const struct il_stage *st)
{
	const struct fec_dec_ctx *c = st->ctx;

	return dec_holds_refs(st) ? c->sc.fec.dec_max_pkts : 0;
}

static int dec_bind(struct il_stage *st, char *err, size_t errlen)
{
	struct fec_dec_ctx *c = st->ctx;
	uint32_t room;

	c->pool = st->app->pool;
	room = rte_pktmbuf_data_room_size(c->pool) - RTE_PKTMBUF_HEADROOM;
	if ((uint32_t)c->sc.fec.lan_mtu + FEC_ETH_LEN > room) {
		snprintf(err, errlen,
			 "stage '%s': recovered frames of up to %u bytes (lan_mtu + 14) do not "
			 "fit the pool's %u-byte mbufs; lower lan_mtu or raise the appliance's mtu",
			 st->name, c->sc.fec.lan_mtu + FEC_ETH_LEN, room);
		return -1;
	}
	c->by_ref = dec_holds_refs(st);
	return 0;
}

/* The repair message inside m when m is a repair for us, else NULL. */
static inline const uint8_t *dec_repair_msg(const struct fec_dec_ctx *c,
					    const struct rte_ipv4_hdr *ip, uint32_t span,
					    uint32_t *len)
{
	const struct rte_udp_hdr *udp;
	uint32_t ihl = (uint32_t)(ip->version_ihl & 0x0f) * 4, ulen;

	if (ip->next_proto_id != IPPROTO_UDP || ip->dst_addr != c->local_be ||
	    (c->check_peer && ip->src_addr != c->peer_be) || ihl < 20 ||
	    FEC_ETH_LEN + ihl + sizeof(*udp) > span)
		return NULL;
	udp = (const struct rte_udp_hdr *)((const uint8_t *)ip + ihl);
	if (udp->dst_port != c->port_be)
		return NULL;
	ulen = rte_be_to_cpu_16(udp->dgram_len);
	/* A bad UDP length still makes it ours (counted as a bad repair). */
	if (ulen < sizeof(*udp) || FEC_ETH_LEN + ihl + ulen > span)
		ulen = sizeof(*udp);
	*len = ulen - (uint32_t)sizeof(*udp);
	return (const uint8_t *)(udp + 1);
}

/* Mirror the codec's statistics into the stage counters. */
static void dec_sync(struct il_stage *st, const struct il_fec_dec_stats *s)
{
	uint64_t *v = st->ctr, bad = 0, rec = 0;

	for (unsigned l = 0; l < IL_FEC_MAX_C; l++)
		rec += s->recovered[l];
	for (unsigned b = 1; b < IL_FEC_BAD_COUNT_; b++)
		bad += s->repair_bad[b];
	v[CTR_DATA_IN] = s->data_in;
	v[CTR_REPAIRS_IN] = s->repairs_in;
	v[CTR_RECOVERED] = rec - st->ctr[CTR_DROP_NOMBUF] - st->ctr[CTR_DROP_PENDING];
	v[CTR_REC_L0] = s->recovered[0];
	v[CTR_REC_L1] = s->recovered[1];
	v[CTR_REC_L2] = s->recovered[2];
	v[CTR_REC_L3UP] = rec - s->recovered[0] - s->recovered[1] - s->recovered[2];
	v[CTR_REC_IMMEDIATE] = s->recovered_how[IL_FEC_HOW_IMMEDIATE];
	v[CTR_REC_CASCADE] = s->recovered_how[IL_FEC_HOW_CASCADE];
	v[CTR_REC_TWO_REPAIR] = s->recovered_how[IL_FEC_HOW_TWO_REPAIR];
	v[CTR_REC_RS] = s->recovered_how[IL_FEC_HOW_RS];
	v[CTR_UNRECOVERABLE] = s->unrecoverable;
	v[CTR_DROP_LATE] = s->late_originals;
	v[CTR_DUP] = s->dup_originals;
	v[CTR_R_USELESS] = s->repairs_useless;
	v[CTR_R_STORED] = s->repairs_stored;
	v[CTR_R_EXPIRED] = s->repairs_expired;
	v[CTR_R_INCONSISTENT] = s->repairs_inconsistent;
	v[CTR_R_LOST] = s->repairs_lost;
	v[CTR_DROP_BAD] = bad;
	v[CTR_VERIFY_FAIL] = s->verify_fail;
	v[CTR_EV_PKT_COUNT] = s->pkt_evict_count;
	v[CTR_EV_PKT_AGE] = s->pkt_evict_age;
	v[CTR_EV_REP_COUNT] = s->repair_evict_count;
	v[CTR_EV_REP_AGE] = s->repair_evict_age;
	v[CTR_EV_REP_ORPHAN] = s->repair_evict_orphan;
}

static uint16_t dec_process(struct il_stage *st, struct rte_mbuf **pkts, uint16_t n)
{
	struct fec_dec_ctx *c = st->ctx;
	uint16_t i, k = 0;
	uint64_t now;

	if (unlikely(!c->sc.enabled))
		return n;
	if (n == 0) {
		if (fec_fifo_count(&c->out) == 0) {
			/* Idle: only the age evictions need us, now and then. */
			now = dec_now_ns(c);
			if (now - c->last_tick_ns < DEC_TICK_NS)
				return 0;
			c->last_tick_ns = now;
			il_fec_dec_tick(c->dec, now);
			dec_sync(st, c->s);
			return 0;
		}
		return fec_fifo_drain(&c->out, pkts, 0);
	}
	now = dec_now_ns(c);
	for (i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		const struct rte_ipv4_hdr *ip;
		const uint8_t *msg;
		struct il_fec_id id;
		uint32_t span, len;

		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
		ip = fec_frame_ipv4(m, &span);
		if (ip == NULL) {
			st->ctr[CTR_UNPROTECTED]++;
			pkts[k++] = m;
			continue;
		}
		msg = dec_repair_msg(c, ip, span, &len);
		if (msg != NULL) {
			/* Consumed either way; a refusal is counted by reason. */
			il_fec_dec_repair(c->dec, msg, len, now);
			rte_pktmbuf_free(m);
			continue;
		}
		/* The payload check comes with the repairs (their recipes):
		 * the codec computes it here only when it must tell two
		 * packets apart. */
		if (il_fec_id_ipv4_tuple(ip, span - FEC_ETH_LEN, &id) != 0) {
			st->ctr[CTR_UNPROTECTED]++;
			pkts[k++] = m;
			continue;
		}
		bool kept = false;
		if (il_fec_dec_data_ref(c->dec, &id, false, rte_pktmbuf_mtod(m, const void *), span,
					c->by_ref ? m : NULL, &kept, now) == IL_FEC_DROP_LATE) {
			rte_pktmbuf_free(m); /* counted by the codec: drop_late_original */
			continue;
		}
		if (kept)
			rte_mbuf_refcnt_update(m, 1); /* the store's reference */
		pkts[k++] = m;
	}
	c->last_tick_ns = now;
	dec_sync(st, c->s);
	return fec_fifo_drain(&c->out, pkts, k);
}

static void dec_destroy(struct il_stage *st)
{
	dec_free(st->ctx);
	st->ctx = NULL;
}

static void dec_state(const struct il_stage *st, struct il_state_sink *out)
{
	const struct fec_dec_ctx *c = st->ctx;
	const struct il_fec_dec_stats *s = c->s;
	const struct {
		const char *k;
		uint64_t v;
	} kv[] = {
		{ "enabled", c->sc.enabled },
		{ "pending", fec_fifo_count(&c->out) },
		{ "store_pkts_live", s->pkts_live },
		{ "store_pkts_hwm", s->pkts_hwm },
		{ "store_repairs_live", s->repairs_live },
		{ "store_repairs_hwm", s->repairs_hwm },
		{ "ref_overflow", s->ref_overflow },
		{ "epoch_changes", s->epoch_changes },
		{ "by_reference", c->by_ref },
		{ "checks_computed", s->checks_computed },
		{ "lat_pkts_sum", s->lat_pkts_sum },
		{ "lat_us_sum", s->lat_ns_sum / 1000u },
	};

	for (unsigned i = 0; i < RTE_DIM(kv); i++)
		il_state_put(out, -1, kv[i].k, kv[i].v);
	for (unsigned h = 0; h < 2; h++)
		for (unsigned k = 0; k < IL_FEC_LAT_BUCKETS; k++)
			il_state_put(out, -1, hist_keys[h][k],
				     h ? s->lat_us_hist[k] : s->lat_pkts_hist[k]);
	/* Refused repairs by reason, only those that happened. */
	for (unsigned b = 1; b < IL_FEC_BAD_COUNT_; b++)
		if (s->repair_bad[b])
			il_state_put(out, -1, bad_keys[b], s->repair_bad[b]);
}

const struct il_stage_type il_stage_fec_dec = {
	.name = "fec_dec",
	.help = "Maelstrom decoder: consumes repairs from the peer appliance, rebuilds lost "
		"packets at once and sends them on, drops originals that come after their "
		"recovery",
	.counter_names = dec_counter_names,
	.n_counters = CTR_COUNT,
	.create = dec_create,
	.bind = dec_bind,
	.process = dec_process,
	.poll = true,
	.destroy = dec_destroy,
	.state = dec_state,
	.mbufs_held = dec_mbufs_held,
	/* Recovered packets join the burst untagged, and may be Interlink
	 * frames: a classify goes after this stage, not before. */
	.meta_loses = IL_META_TAGS,
};
