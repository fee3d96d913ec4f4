/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Stage `fec_enc`: the sending end of a Maelstrom link pair (docs/fec.md,
 * "The stages"). Every IPv4 frame leaves unmodified and is XORed into the
 * codec's bins; the repairs that fire become UDP datagrams to the peer
 * appliance and join the burst behind the frames that completed them, so
 * they cross the same link. Everything else (ARP, IPv6, VLAN-tagged, too
 * long) passes through unprotected and is counted.
 *
 * Also the configuration both FEC stages share (fec_stage_parse).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_malloc.h>

#include <interlink/app.h>
#include <interlink/err.h>
#include <interlink/frame.h>

#include "fec_stage.h"

/* ---- configuration shared with fec_dec -------------------------------- */

static const char *const enc_keys[] = {
	"type", "enabled", "mode", "r", "c", "interleaves", "stagger", "delay_xor", "xor_impl",
	"lan_mtu", "link_mtu", "link_id", "local_ip", "peer_ip", "port", "pending",
	"sender_id", "epoch", "peer_mac", "local_mac", "idle_flush_us", NULL,
};

static const char *const dec_keys[] = {
	"type", "enabled", "mode", "r", "c", "interleaves", "stagger", "delay_xor", "xor_impl",
	"lan_mtu", "link_mtu", "link_id", "local_ip", "peer_ip", "port", "pending",
	"store_pkts", "store_repairs", "store_age_ms", "hold", NULL,
};

static const char *const mode_names[] = { "xor", "rs", NULL };
static const char *const impl_names[] = {
	[IL_FEC_XOR_ISAL] = "isal", [IL_FEC_XOR_REF] = "ref",
	[IL_FEC_XOR_ISAL_XORGEN] = "isal-xorgen", [IL_FEC_XOR_AVX2] = "avx2", NULL,
};

static const char *keypath(const struct il_cfg *params, const char *key, char *buf, size_t len)
{
	const char *base = params ? il_cfg_path(params) : NULL;

	snprintf(buf, len, "%s%s%s", base && *base ? base : "", base && *base ? "." : "", key);
	return buf;
}

void *fec_stage_alloc(size_t size, size_t align, void *arg)
{
	RTE_SET_USED(arg);
	return rte_zmalloc_socket("il_fec", size, (unsigned)align, (int)rte_socket_id());
}

void fec_stage_free(void *p, void *arg)
{
	RTE_SET_USED(arg);
	rte_free(p);
}

/* The codec names its keys "fec.KEY"; say them as this stage's keys. */
static void rename_keys(const struct il_cfg *params, const char *in, char *out, size_t len)
{
	static const struct {
		const char *from, *to;
	} map[] = {
		{ "fec.code", "mode" },
		{ "fec.dec_max_pkts", "store_pkts" },
		{ "fec.dec_max_repairs", "store_repairs" },
		{ "fec.dec_max_age_ns", "store_age_ms (in ns)" },
		{ "fec.span_extra", "span_extra (the 14-byte Ethernet header, fixed)" },
		{ "fec.", "" },
	};
	const char *base = params ? il_cfg_path(params) : "";
	size_t o = 0;

	while (*in && o + 1 < len) {
		size_t i, n = 0;

		for (i = 0; i < RTE_DIM(map); i++)
			if (!strncmp(in, map[i].from, strlen(map[i].from)))
				break;
		if (i == RTE_DIM(map)) {
			out[o++] = *in++;
			continue;
		}
		in += strlen(map[i].from);
		n = (size_t)snprintf(out + o, len - o, "%s%s%s", base, *base ? "." : "",
				     map[i].to);
		o = RTE_MIN(o + n, len - 1);
	}
	out[o] = '\0';
}

static int parse_mac(const struct il_cfg *params, const char *key, bool *have,
		     struct rte_ether_addr *mac, char *err, size_t errlen)
{
	const char *s;
	char kp[256];

	if (il_cfg_str(params, key, NULL, &s, err, errlen))
		return -1;
	*have = s != NULL;
	if (s && rte_ether_unformat_addr(s, mac) != 0)
		return ERR("config: key '%s': expected a MAC address (aa:bb:cc:dd:ee:ff), got '%s'",
			   keypath(params, key, kp, sizeof(kp)), s);
	return 0;
}

static int parse_interleaves(const struct il_cfg *params, struct il_fec_cfg *fc, char *err,
			     size_t errlen)
{
	const struct il_cfg *seq = il_cfg_get(params, "interleaves");
	unsigned want = fc->code == IL_FEC_CODE_RS ? 1 : fc->c;
	char kp[256];

	keypath(params, "interleaves", kp, sizeof(kp));
	if (seq == NULL) {
		if (fc->code == IL_FEC_CODE_RS) {
			fc->interleave[0] = 1;
			return 0;
		}
		if (fc->c == 3)
			return 0; /* the codec's (1, 11, 19) */
		return ERR("config: key '%s' is missing: with c = %u give %u interleaves, e.g. "
			   "[1, 11, 19] for c = 3 or [1, 10] for c = 2", kp, fc->c, fc->c);
	}
	if (il_cfg_kind(seq) != IL_CFG_SEQ || il_cfg_len(seq) != want)
		return ERR("config: key '%s' must list %u interleave%s (%s), one per layer, each "
			   "in 1..%u", kp, want, want == 1 ? "" : "s",
			   fc->code == IL_FEC_CODE_RS ? "mode rs: the block interleave" : "mode xor",
			   IL_FEC_MAX_INTERLEAVE);
	for (unsigned i = 0; i < want; i++) {
		const char *s = il_cfg_scalar(il_cfg_at(seq, i));
		char *end = NULL;
		unsigned long v = s ? strtoul(s, &end, 10) : 0;

		if (s == NULL || *s == '\0' || *end != '\0' || v < 1 || v > IL_FEC_MAX_INTERLEAVE)
			return ERR("config: key '%s[%u]': expected an interleave in 1..%u, got '%s'",
				   kp, i, IL_FEC_MAX_INTERLEAVE, s ? s : "?");
		fc->interleave[i] = (uint16_t)v;
	}
	return 0;
}

int fec_stage_parse(const struct il_stage *st, const struct il_cfg *params,
		    const struct il_app *app, bool enc, struct fec_stage_cfg *sc, char *err,
		    size_t errlen)
{
	struct il_fec_cfg *fc = &sc->fec;
	uint64_t r, c, lan, link, id, port, pend, v;
	uint32_t dflt_ip = app ? app->appliance_ip : 0xc0000201u;
	uint64_t dflt_lan = app ? (uint64_t)app->frame_max - FEC_ETH_LEN : 1500;
	int mode, impl;
	char msg[1024], warn[1024];

	memset(sc, 0, sizeof(*sc));
	il_fec_cfg_defaults(fc);
	if (il_cfg_check_keys(params, enc ? enc_keys : dec_keys, err, errlen) ||
	    il_cfg_bool(params, "enabled", true, &sc->enabled, err, errlen) ||
	    il_cfg_enum(params, "mode", mode_names, 0, &mode, err, errlen) ||
	    il_cfg_u64(params, "r", 8, 2, IL_FEC_MAX_R, &r, err, errlen) ||
	    il_cfg_u64(params, "c", 3, 1, IL_FEC_MAX_C, &c, err, errlen) ||
	    il_cfg_bool(params, "stagger", true, &fc->stagger, err, errlen) ||
	    il_cfg_bool(params, "delay_xor", false, &fc->delay_xor, err, errlen) ||
	    il_cfg_enum(params, "xor_impl", impl_names, IL_FEC_XOR_AVX2, &impl, err, errlen) ||
	    il_cfg_u64(params, "lan_mtu", dflt_lan, 68, 9600, &lan, err, errlen) ||
	    il_cfg_u64(params, "link_mtu", 9000, 68, 65535, &link, err, errlen) ||
	    il_cfg_u64(params, "link_id", 0, 0, 65535, &id, err, errlen) ||
	    il_cfg_ipv4(params, "local_ip", dflt_ip, &sc->local_ip, err, errlen) ||
	    il_cfg_ipv4(params, "peer_ip", dflt_ip, &sc->peer_ip, err, errlen) ||
	    il_cfg_u64(params, "port", FEC_DEF_PORT, 1, 65535, &port, err, errlen) ||
	    il_cfg_u64(params, "pending", FEC_DEF_PENDING, 64, FEC_MAX_PENDING, &pend, err,
		       errlen))
		return -1;
	fc->code = mode ? IL_FEC_CODE_RS : IL_FEC_CODE_XOR;
	fc->r = (uint8_t)r;
	fc->c = (uint8_t)c;
	fc->xor_impl = (uint8_t)impl;
	fc->lan_mtu = (uint16_t)lan;
	fc->link_mtu = (uint16_t)link;
	fc->link_id = (uint16_t)id;
	fc->span_extra = FEC_ETH_LEN;
	fc->verify_l3_off = FEC_ETH_LEN;
	fc->alloc = fec_stage_alloc;
	fc->free = fec_stage_free;
	sc->port = (uint16_t)port;
	sc->pending = rte_align32pow2((uint32_t)pend);
	if (parse_interleaves(params, fc, err, errlen))
		return -1;
	if (enc) {
		if (il_cfg_u64(params, "sender_id", 0, 0, UINT32_MAX, &v, err, errlen))
			return -1;
		fc->sender_id = (uint32_t)v;
		if (il_cfg_u64(params, "epoch", app ? app->epoch : 0, 0, UINT32_MAX, &v, err,
			       errlen))
			return -1;
		fc->epoch = (uint32_t)v;
		if (parse_mac(params, "peer_mac", &sc->have_peer_mac, &sc->peer_mac, err, errlen) ||
		    parse_mac(params, "local_mac", &sc->have_local_mac, &sc->local_mac, err,
			      errlen) ||
		    il_cfg_u64(params, "idle_flush_us", 1000, 0, 60000000, &sc->idle_flush_us, err,
			       errlen))
			return -1;
	} else {
		if (il_cfg_u64(params, "store_pkts", 4096, 1, 1u << 22, &v, err, errlen))
			return -1;
		fc->dec_max_pkts = (uint32_t)v;
		if (il_cfg_u64(params, "store_repairs", 1024, 1, 1u << 20, &v, err, errlen))
			return -1;
		fc->dec_max_repairs = (uint32_t)v;
		if (il_cfg_u64(params, "store_age_ms", 1000, 0, 3600000, &v, err, errlen))
			return -1;
		fc->dec_max_age_ns = v * 1000000u;
		const char *hold;
		if (il_cfg_str(params, "hold", "ref", &hold, err, errlen))
			return -1;
		if (strcmp(hold, "ref") != 0 && strcmp(hold, "copy") != 0)
			return ERR("config: key '%s.hold': '%s' is not ref or copy (how the decoder "
				   "keeps received packets: a reference to the mbuf, or a copy)",
				   il_cfg_path(params), hold);
		sc->hold_ref = strcmp(hold, "ref") == 0;
	}
	warn[0] = '\0';
	if (il_fec_cfg_check(fc, msg, sizeof(msg), warn, sizeof(warn))) {
		char named[1024];

		rename_keys(params, msg, named, sizeof(named));
		return ERR("config: stage '%s': %s", st->name, named);
	}
	if (warn[0]) {
		char named[1024];

		rename_keys(params, warn, named, sizeof(named));
		fprintf(stderr, "interlink: warning: stage '%s': %s\n", st->name, named);
	}
	if (app && lan + FEC_ETH_LEN < app->frame_max)
		fprintf(stderr,
			"interlink: warning: stage '%s': lan_mtu %u is below the appliance's mtu "
			"%u: longer IPv4 packets cross the link unprotected\n",
			st->name, (unsigned)lan, app->frame_max - FEC_ETH_LEN);
	return 0;
}

/* Frames of up to `need` bytes must fit one mbuf of the app's pool. */
static int check_room(const struct il_stage *st, struct rte_mempool *pool, uint32_t need,
		      const char *what, char *err, size_t errlen)
{
	uint32_t room = rte_pktmbuf_data_room_size(pool) - RTE_PKTMBUF_HEADROOM;

	if (need > room)
		return ERR("stage '%s': %s of %u bytes do not fit the pool's %u-byte mbufs; "
			   "lower lan_mtu or r (or raise the appliance's mtu, which sizes the pool)",
			   st->name, what, need, room);
	return 0;
}

/* ---- the encoder stage ------------------------------------------------ */

enum {
	CTR_PROTECTED,     /* IPv4 frames XORed into the bins */
	CTR_UNPROTECTED,   /* not IPv4 (ARP, IPv6, VLAN) or segmented: passed as is */
	CTR_TOO_LONG,      /* IPv4 longer than lan_mtu: passed unprotected */
	CTR_REPAIRS,       /* repair datagrams made */
	CTR_REPAIRS_L0,    /* ... per layer (RS: parity row); l3 counts layers >= 3 */
	CTR_REPAIRS_L1,
	CTR_REPAIRS_L2,
	CTR_REPAIRS_L3UP,
	CTR_REPAIR_BYTES,  /* repair messages, Interlink header onwards */
	CTR_IDLE_FLUSHES,  /* open bins sent after idle_flush_us without traffic */
	CTR_FLUSHED,       /* repairs those flushes sent */
	CTR_DROP_NOMBUF,   /* repairs lost: pool empty */
	CTR_DROP_PENDING,  /* repairs lost: pending FIFO full */
	CTR_COUNT
};

static const char *const enc_counter_names[CTR_COUNT] = {
	[CTR_PROTECTED] = "protected",
	[CTR_UNPROTECTED] = "unprotected",
	[CTR_TOO_LONG] = "too_long",
	[CTR_REPAIRS] = "repairs_sent",
	[CTR_REPAIRS_L0] = "repairs_l0",
	[CTR_REPAIRS_L1] = "repairs_l1",
	[CTR_REPAIRS_L2] = "repairs_l2",
	[CTR_REPAIRS_L3UP] = "repairs_l3up",
	[CTR_REPAIR_BYTES] = "repair_bytes",
	[CTR_IDLE_FLUSHES] = "idle_flushes",
	[CTR_FLUSHED] = "flushed_repairs",
	[CTR_DROP_NOMBUF] = "drop_repair_nombuf",
	[CTR_DROP_PENDING] = "drop_repair_pending_full",
};

struct fec_enc_ctx {
	struct il_fec_enc *enc;
	struct fec_stage_cfg sc;
	struct rte_mempool *pool;
	struct il_stage *st;
	struct fec_fifo out;
	/* Where repairs go. Ethernet addresses: configured, else those of
	 * the last protected frame, so repairs follow the data's layer-2 path. */
	struct il_path path;
	uint16_t ip_id;
	uint64_t idle_tsc, last_tsc;
	bool open; /* packets added since the last flush */
};

static void enc_emit(void *arg, const uint8_t *msg, uint32_t len,
		     const struct il_fec_repair_info *info)
{
	struct fec_enc_ctx *c = arg;
	struct il_stage *st = c->st;
	struct rte_mbuf *m = il_pktmbuf_alloc(c->pool);
	uint8_t *f;

	st->ctr[CTR_REPAIRS]++;
	st->ctr[CTR_REPAIRS_L0 + RTE_MIN(info->layer, 3u)]++;
	st->ctr[CTR_REPAIR_BYTES] += len;
	if (unlikely(m == NULL)) {
		st->ctr[CTR_DROP_NOMBUF]++;
		return;
	}
	/* Room was checked at bind: a repair is at most il_fec_repair_max_len.
	 * Don't fragment (the link MTU was checked to carry every repair);
	 * no UDP checksum (allowed over IPv4): the decoder checks every
	 * recovered packet against the id its recipe names. */
	f = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(FEC_REPAIR_FRAME_HDR + len));
	if (unlikely(f == NULL)) {
		st->ctr[CTR_DROP_NOMBUF]++;
		rte_pktmbuf_free(m);
		return;
	}
	rte_memcpy(il_udp_frame_put(f, &c->path, c->ip_id++, (uint16_t)len), msg, len);
	if (unlikely(!fec_fifo_push(&c->out, m))) {
		st->ctr[CTR_DROP_PENDING]++;
		rte_pktmbuf_free(m);
	}
}

static void enc_free(struct fec_enc_ctx *c)
{
	if (c == NULL)
		return;
	if (c->out.slot) {
		fec_fifo_free_all(&c->out);
		rte_free(c->out.slot);
	}
	il_fec_enc_free(c->enc);
	rte_free(c);
}

static int enc_create(struct il_stage *st, const struct il_cfg *params, struct il_app *app,
		      char *err, size_t errlen)
{
	struct fec_enc_ctx *c;
	char msg[512];

	c = rte_zmalloc("il_fec_enc", sizeof(*c), RTE_CACHE_LINE_SIZE);
	if (c == NULL)
		return ERR("stage '%s': out of memory", st->name);
	c->st = st;
	if (fec_stage_parse(st, params, app, true, &c->sc, err, errlen))
		goto fail;
	c->out.mask = c->sc.pending - 1;
	c->out.slot = rte_zmalloc("il_fec_fifo", sizeof(*c->out.slot) * c->sc.pending, 0);
	if (c->out.slot == NULL) {
		snprintf(err, errlen, "stage '%s': out of memory for %u pending repairs", st->name,
			 c->sc.pending);
		goto fail;
	}
	c->enc = il_fec_enc_create(&c->sc.fec, enc_emit, c, msg, sizeof(msg));
	if (c->enc == NULL) {
		snprintf(err, errlen, "stage '%s': %s", st->name, msg);
		goto fail;
	}
	c->path = (struct il_path){ .src_ip = c->sc.local_ip, .dst_ip = c->sc.peer_ip,
				    .src_port = c->sc.port, .dst_port = c->sc.port,
				    .ttl = 64, .df = true };
	if (c->sc.have_peer_mac)
		memcpy(c->path.dst_mac, &c->sc.peer_mac, 6);
	if (c->sc.have_local_mac)
		memcpy(c->path.src_mac, &c->sc.local_mac, 6);
	c->idle_tsc = c->sc.idle_flush_us * rte_get_tsc_hz() / 1000000u;
	st->ctx = c;
	return 0;
fail:
	enc_free(c);
	return -1;
}

static int enc_bind(struct il_stage *st, char *err, size_t errlen)
{
	struct fec_enc_ctx *c = st->ctx;

	c->pool = st->app->pool;
	return check_room(st, c->pool, FEC_REPAIR_FRAME_HDR + il_fec_repair_max_len(&c->sc.fec),
			  "repair frames", err, errlen);
}

static uint16_t enc_process(struct il_stage *st, struct rte_mbuf **pkts, uint16_t n)
{
	struct fec_enc_ctx *c = st->ctx;
	uint16_t i;

	if (unlikely(!c->sc.enabled))
		return n;
	for (i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		const struct rte_ipv4_hdr *ip;
		struct il_fec_id id;
		uint32_t span;

		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
		ip = fec_frame_ipv4(m, &span);
		/* the id's payload check is computed by the encoder, in its
		 * pass over the packet */
		if (ip == NULL || il_fec_id_ipv4_tuple(ip, span - FEC_ETH_LEN, &id) != 0) {
			st->ctr[CTR_UNPROTECTED]++;
			continue;
		}
		if (!c->sc.have_peer_mac || !c->sc.have_local_mac) {
			const struct rte_ether_hdr *eth =
				rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);

			if (!c->sc.have_peer_mac)
				memcpy(c->path.dst_mac, &eth->dst_addr, 6);
			if (!c->sc.have_local_mac)
				memcpy(c->path.src_mac, &eth->src_addr, 6);
		}
		if (il_fec_enc_add_checked(c->enc, &id, rte_pktmbuf_mtod(m, const void *), span,
					   FEC_ETH_LEN + (uint32_t)(ip->version_ihl & 0x0f) * 4) != 0) {
			st->ctr[CTR_TOO_LONG]++;
			continue;
		}
		st->ctr[CTR_PROTECTED]++;
		c->open = true;
	}
	if (n) {
		if (c->idle_tsc)
			c->last_tsc = rte_rdtsc();
	} else if (c->open && c->idle_tsc && rte_rdtsc() - c->last_tsc > c->idle_tsc) {
		/* Traffic paused: send the open bins now, so that the last
		 * packets of a TCP window do not wait for the next window
		 * (a tail loss would otherwise cost the sender a timeout). */
		uint64_t before = il_fec_enc_stats(c->enc)->flushed;

		il_fec_enc_flush(c->enc, true);
		st->ctr[CTR_IDLE_FLUSHES]++;
		st->ctr[CTR_FLUSHED] += il_fec_enc_stats(c->enc)->flushed - before;
		c->open = false;
	}
	return fec_fifo_drain(&c->out, pkts, n);
}

static void enc_destroy(struct il_stage *st)
{
	enc_free(st->ctx);
	st->ctx = NULL;
}

static void enc_state(const struct il_stage *st, struct il_state_sink *out)
{
	const struct fec_enc_ctx *c = st->ctx;
	const struct il_fec_enc_stats *s = il_fec_enc_stats(c->enc);
	const struct {
		const char *k;
		uint64_t v;
	} kv[] = {
		{ "enabled", c->sc.enabled },
		{ "r", c->sc.fec.r },
		{ "c", c->sc.fec.c },
		{ "pending", fec_fifo_count(&c->out) },
		{ "protected_bytes", s->bytes },
		{ "memory_bytes", il_fec_enc_footprint(c->enc) },
	};

	for (unsigned i = 0; i < RTE_DIM(kv); i++)
		il_state_put(out, -1, kv[i].k, kv[i].v);
}

const struct il_stage_type il_stage_fec_enc = {
	.name = "fec_enc",
	.help = "Maelstrom encoder: IPv4 frames pass unmodified, layered-XOR (or RS) repairs "
		"follow them to the peer appliance as UDP",
	.counter_names = enc_counter_names,
	.n_counters = CTR_COUNT,
	.create = enc_create,
	.bind = enc_bind,
	.process = enc_process,
	.poll = true,
	.destroy = enc_destroy,
	.state = enc_state,
};
