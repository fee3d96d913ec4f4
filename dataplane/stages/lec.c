/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Stage `lec`: appliance-side Ricochet lateral error correction (docs/lec.md,
 * "Appliance-side LEC"). The appliance sees every group's stamped stream
 * and every view, so it computes the regions and composite repair bins of
 * Ricochet (lib/lec, an encode-only instance that is a member of no view)
 * exactly, and no host spends CPU on XOR.
 *
 * Placed after the sequencer on the chain towards the receivers (the
 * frames as stamped, which is what receivers get and what a NAK
 * retransmits) and before the control stage, which consumes the members'
 * JOIN, HEARTBEAT and ACK frames: this stage learns from them where each
 * member is (its Ethernet and IPv4 source: the host's TX interface). Its
 * repairs go there, unicast, out of port `tx` (by default "in", the
 * switch the hosts' TX interfaces hang on). Views come from the control
 * stage named by `control` (same lcore), or from VIEW frames that pass.
 *
 * Fast path: every stamped DATA frame of a protected group goes into the
 * bins by reference: the core's frame table keeps one mbuf reference
 * however many bins keep the frame. When a bin fires, its frames' XOR is
 * written straight into the repair's first frame (AVX2, or ISA-L from the
 * frames' common 32-byte offset), the other targets get their own headers
 * chained to a clone of it, or a copy. Bins are one per group by default
 * (plan groups: one XOR pass per frame and layer), at the peers' rate
 * (rate peers: each member as many repairs of a frame as its peers would
 * send it); bins older than flush_us fire short. Fixed memory: the LEC
 * core's one allocation and the address table, both sized from the config.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_hash.h>
#include <rte_jhash.h>
#include <rte_malloc.h>
#include <rte_ring.h>
#include <rte_errno.h>

#include <interlink/app.h>
#include <interlink/err.h>
#include <interlink/frame.h>
#include <interlink/lec.h>
#include <interlink/lec_wire.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "ctrl.h"
#include "stage_auth.h"

enum {
	LEC_C_DATA,          /* stamped DATA frames seen */
	LEC_C_PROTECTED,     /* of them, into the bins */
	LEC_C_UNPROTECTED,   /* in a group this stage does not protect, or no view yet */
	LEC_C_TOO_LONG,      /* longer than a repair of r of them may carry */
	LEC_C_REPAIRS,       /* repairs built */
	LEC_C_REPAIR_COPIES, /* frames sent: one per target */
	LEC_C_REPAIR_BYTES,  /* their Interlink messages */
	LEC_C_ADDR_LEARNT,   /* members whose address was learnt */
	LEC_C_ADDR_MOVED,    /* a member seen at another address */
	LEC_C_VIEWS,         /* view changes applied */
	LEC_C_DROP_NO_ADDR,  /* a target whose address is not known yet */
	LEC_C_DROP_NOMBUF,   /* pool empty */
	LEC_C_TX_DIRECT,     /* repairs straight to the tx buffer: the emit queue was full */
	LEC_C_DROP_ADDR_FULL, /* address table full */
	LEC_C_DROP_VIEW,     /* a view LEC's limits refused (the previous one stays) */
	LEC_C_DROP_UNAUTH,   /* with auth: a member's frame or a VIEW whose MAC or
			      * counter did not verify: nothing learnt from it */
	LEC_C_REPAIR_GROUP,  /* repairs_to: group: frames sent once to a group's
			      * address instead of a copy per receiver */
	/* repair_lcore (the chain lcore's counters; every other one is the
	 * repair lcore's then) */
	LEC_C_HANDED,        /* frames handed to the repair lcore */
	LEC_C_DROP_BUSY,     /* frames not handed over: its ring was full (they
			      * go out unprotected; NAKs repair them) */
	LEC_C_DROP_BACK,     /* repairs the repair lcore could not hand back (ring full) */
	LEC_C_COUNT
};

static const char *const lec_counter_names[LEC_C_COUNT] = {
	[LEC_C_DATA] = "data_frames",
	[LEC_C_PROTECTED] = "protected",
	[LEC_C_UNPROTECTED] = "unprotected",
	[LEC_C_TOO_LONG] = "too_long",
	[LEC_C_REPAIRS] = "repairs",
	[LEC_C_REPAIR_COPIES] = "repair_copies",
	[LEC_C_REPAIR_BYTES] = "repair_bytes",
	[LEC_C_ADDR_LEARNT] = "addr_learnt",
	[LEC_C_ADDR_MOVED] = "addr_moved",
	[LEC_C_VIEWS] = "views",
	[LEC_C_DROP_NO_ADDR] = "drop_no_addr",
	[LEC_C_DROP_NOMBUF] = "drop_nombuf",
	[LEC_C_TX_DIRECT] = "tx_direct",
	[LEC_C_DROP_ADDR_FULL] = "drop_addr_full",
	[LEC_C_DROP_VIEW] = "drop_view",
	[LEC_C_DROP_UNAUTH] = "drop_unauth",
	[LEC_C_REPAIR_GROUP] = "repairs_to_group",
	[LEC_C_HANDED] = "handed_over",
	[LEC_C_DROP_BUSY] = "drop_repair_lcore_busy",
	[LEC_C_DROP_BACK] = "drop_repair_back_full",
};

#define LEC_REGION_KEYS 64 /* regions reported one by one; the rest summed */
#define LEC_NO_REGION UINT32_MAX

#define IL_LEC_MAX_TARGETS 256 /* copies of one repair */
#define LEC_DEFAULT_PLAN 1      /* groups */
#define LEC_DEFAULT_LAYERS 8
#define LEC_DEFAULT_RATE 1 /* peers */
#define LEC_DEFAULT_TO 1   /* repairs_to: group */
#define LEC_DEFAULT_FLUSH_US 15000 /* docs/lec.md, "The flush with strided layers" */
#define LEC_DEFAULT_RING 4096
#define LEC_NOTE_PORT 0xfffe /* m->port of a view note (an rx mbuf names an ethdev) */
#define LEC_SVC_OUT 64       /* repairs the repair lcore gathers before handing back */
/* A repair handed back carries its port in the low bits of its pointer (an
 * mbuf is cache-line aligned): the chain lcore queues it for tx without
 * reading its header, a line the repair lcore wrote. */
#define LEC_PORT_MASK ((uintptr_t)RTE_CACHE_LINE_SIZE - 1)
static_assert(IL_MAX_PORTS <= RTE_CACHE_LINE_SIZE, "a port index in an mbuf pointer's low bits");

static inline void *port_tag(struct rte_mbuf *m, uint16_t port)
{
	return (void *)((uintptr_t)m | port);
}

static inline struct rte_mbuf *port_untag(void *v, uint16_t *port)
{
	*port = (uint16_t)((uintptr_t)v & LEC_PORT_MASK);
	return (struct rte_mbuf *)((uintptr_t)v & ~LEC_PORT_MASK);
}

/* A view in force, handed from the chain lcore to the repair lcore in an
 * mbuf of its own, in order with the frames (repair_lcore). */
struct lec_note {
	uint16_t gi, n;
	uint32_t view_id;
	uint32_t ids[CTL_MAX_MEMBERS];
	uint32_t roles[CTL_MAX_MEMBERS];
};

struct lec_acache {
	uint32_t id;
	int32_t slot; /* -1: empty */
};

struct lec_addr {
	uint8_t mac[6];
	uint32_t ip;      /* host order */
	uint32_t region;  /* in the plan in force; LEC_NO_REGION */
	uint64_t copies;  /* repairs sent to it */
};

struct lec_ctx {
	struct il_lec *l;
	struct il_app *app;
	struct il_stage *st;
	struct il_stage *ctl; /* views from it, when named */
	struct rte_mempool *pool; /* repairs from it: the stage's shard's (bind) */
	char ctl_name[IL_NAME_LEN];
	uint16_t tx;
	uint16_t group_tx; /* repairs_to: group: the port towards the receivers */
	bool to_group;     /* repairs_to: group */
	uint16_t udp_port;
	uint8_t r;
	uint32_t max_len;
	bool want[IL_MAX_GROUPS];     /* by group index */
	double c;                     /* targets per message (config) */
	double c_group[IL_MAX_GROUPS]; /* c_groups: > 0 for a group's own c */
	bool rate_peers;              /* rate: peers */
	uint32_t view_id[IL_MAX_GROUPS];
	uint16_t receivers[IL_MAX_GROUPS];
	uint64_t frames[IL_MAX_GROUPS], too_long[IL_MAX_GROUPS];
	uint64_t view_tsc, next_view;
	uint64_t flush_tsc, next_flush; /* bins older than flush_us fire short */
	uint64_t tx_seq;
	uint16_t ip_id;
	bool by_ref; /* copies reference one message (the tx port takes chained mbufs) */
	int fanout;  /* config: auto, copy, reference */
	/* member addresses: id -> slot */
	struct rte_hash *h;
	struct lec_addr *addr;
	uint32_t n_addr;
	/* per region of the plan in force (members and groups: a copy made on
	 * the lcore, for the state report on the main lcore) */
	uint64_t *region_copies;
	uint32_t *region_members;
	uint16_t *region_groups;
	uint32_t n_regions;
	uint32_t *vin, *roles, *rcv; /* scratch: a view, its receivers */
	struct lec_acache *acache;    /* id -> address slot, in front of h */
	uint32_t acache_shift;
	/* With auth (the stage's own `auth` map, or its control stage's keys):
	 * addresses and views are learnt only from frames whose MAC and
	 * counter verify (our own replay windows: the control stage checks the
	 * same frames against its own). */
	struct il_stage_auth auth;
	const struct il_auth_keyring *keys;
	struct il_auth_replay *replay;
	/* repair_lcore (docs/lec.md, "A repair lcore"): everything above but
	 * the chain lcore's counters is the repair lcore's; the chain lcore
	 * hands it every DATA, control and NAK frame (a reference each) and
	 * the views in force (notes), in order, and sends the repairs it hands
	 * back. */
	int svc;                     /* the repair lcore; -1: all on the chain lcore */
	unsigned instance;           /* its number in the process (object names) */
	uint32_t ring_slots;
	struct rte_ring *to_svc;     /* frames and notes: chain -> repair lcore (SP/SC) */
	struct rte_ring *from_svc;   /* repairs: repair lcore -> chain (SP/SC) */
	/* the chain lcore's */
	uint32_t fview_id[IL_MAX_GROUPS]; /* views handed over */
	uint64_t fnext_view;
	uint32_t fvin[CTL_MAX_MEMBERS], froles[CTL_MAX_MEMBERS];
	/* the repair lcore's */
	void *out[LEC_SVC_OUT];      /* repairs to hand back (port_tag) */
	uint16_t n_out;
	bool plan_due;               /* notes applied to the groups, not to the plan yet */
	struct rte_mbuf *cur;        /* the frame being handled: its reference... */
	bool adopted;                /* ...taken over by the bins (lec_hold) */
	uint32_t cmd_seen;           /* the appliance's runtime command last seen */
	uint64_t svc_frames, svc_busy_tsc, svc_bursts; /* its work: frames, TSC busy */
};

/* ---- the LEC core's callbacks ------------------------------------------ */

static void lec_hold(void *arg, void *cookie, uint32_t n)
{
	struct lec_ctx *x = arg;

	/* On a repair lcore, the reference the chain lcore handed over with
	 * the frame becomes the bins' (one atomic operation on a line the
	 * chain lcore also writes fewer, each way). */
	if (x->cur == cookie && !x->adopted) {
		x->adopted = true;
		n--;
	}
	if (n)
		rte_mbuf_refcnt_update(cookie, (int16_t)n);
}

static void lec_release(void *arg, void *const *cookies, uint32_t n)
{
	(void)arg;
	rte_pktmbuf_free_bulk((struct rte_mbuf **)(uintptr_t)cookies, n);
}

/* The repair's Interlink header, LEC body and ids at b (its XOR follows). */
static void put_msg_head(uint8_t *b, const struct lec_ctx *x, const struct il_lec_repair *rep,
			 uint64_t seq)
{
	const struct il_hdr_fields h = { .type = IL_T_LEC_REPAIR, .group_id = rep->ids[0].group,
					 .sender_seq = seq };
	const struct il_lec_fields lf = { .count = (uint8_t)rep->count, .rate_r = x->r,
					  .origin = IL_LEC_ORIGIN_APPLIANCE, .len = rep->len,
					  .len_xor = rep->len_xor };

	b = il_lec_body_put(il_hdr_put(b, &h), &lf);
	for (unsigned j = 0; j < rep->count; j++)
		b = il_lec_id_put(b, rep->ids[j].group, rep->ids[j].epoch, rep->ids[j].seq);
}

/* Member id -> slot in the address table: a direct-mapped cache in front
 * of the rte_hash (slots never move: members are never deleted), so a
 * repair's targets cost a multiply and a compare each. -1: not learnt. */
static inline int32_t addr_find(struct lec_ctx *x, uint32_t id)
{
	struct lec_acache *c = &x->acache[(uint32_t)(id * 0x9e3779b1u) >> x->acache_shift];
	int32_t k;

	if (likely(c->slot >= 0 && c->id == id))
		return c->slot;
	k = rte_hash_lookup(x->h, &id);
	if (k >= 0) {
		c->id = id;
		c->slot = k;
	}
	return k;
}

/* Repairs need no order with the burst (they go to the hosts' TX side, and
 * a receiver keeps a repair that comes before its data): after the burst
 * while there is room, else straight into the port's tx buffer. */
static inline void lec_emit(struct lec_ctx *x, uint16_t port, struct rte_mbuf *m)
{
	if (likely(il_emit_room(x->st) > 0)) {
		il_emit(x->st, port, m);
	} else {
		x->st->ctr[LEC_C_TX_DIRECT]++;
		il_tx(x->st->io, port, m);
	}
}

/* The repair lcore's repairs, handed back to the chain lcore in bursts. */
static void svc_hand_back(struct lec_ctx *x)
{
	unsigned k = x->n_out ? rte_ring_enqueue_burst(x->from_svc, x->out, x->n_out, NULL) : 0;
	uint16_t port;

	if (unlikely(k < x->n_out)) {
		x->st->ctr[LEC_C_DROP_BACK] += x->n_out - k;
		for (unsigned i = k; i < x->n_out; i++)
			rte_pktmbuf_free(port_untag(x->out[i], &port));
	}
	x->n_out = 0;
}

static inline void lec_out(struct lec_ctx *x, uint16_t port, struct rte_mbuf *m)
{
	if (x->svc < 0) {
		lec_emit(x, port, m);
		return;
	}
	RTE_ASSERT(((uintptr_t)m & LEC_PORT_MASK) == 0);
	x->out[x->n_out++] = port_tag(m, port);
	if (unlikely(x->n_out == LEC_SVC_OUT))
		svc_hand_back(x);
}

/* repairs_to: group: the group whose every receiver is a target of this
 * repair, when the repair names frames of that group only and the group
 * has a multicast address (one bin per group at the peers' rate: each
 * layer's repair goes to the whole group); -1 otherwise. The targets are
 * distinct receivers of the plan in force, so n equal to the view's
 * receivers means all of them (a view not applied yet: unequal, unicast). */
static int whole_group(const struct lec_ctx *x, const struct il_lec_repair *rep, uint32_t n)
{
	const struct il_group *g = il_app_group_by_id(x->app, rep->ids[0].group);
	unsigned gi;

	if (g == NULL || g->address == 0)
		return -1;
	gi = (unsigned)(g - x->app->groups);
	if (n != x->receivers[gi] || n == 0)
		return -1;
	for (unsigned j = 1; j < rep->count; j++)
		if (rep->ids[j].group != rep->ids[0].group)
			return -1;
	return (int)gi;
}

static inline void count_copy(struct lec_ctx *x, struct lec_addr *a, uint16_t mlen)
{
	a->copies++;
	if (a->region < x->n_regions)
		x->region_copies[a->region]++;
	x->st->ctr[LEC_C_REPAIR_COPIES]++;
	x->st->ctr[LEC_C_REPAIR_BYTES] += mlen;
}

/* One repair to its targets. The first target's frame is built in one
 * mbuf: the XOR of the frames (the core's sources, still referenced)
 * written straight into it, at the sources' offset from a 32-byte
 * boundary so that ISA-L runs (the headers, written after, cover the
 * junk before it). Every other target gets its own headers chained to a
 * clone of that message (fanout reference) or a whole copy. */
static void lec_send(void *arg, const struct il_lec_repair *rep, const uint32_t *targets,
		     uint32_t n)
{
	struct lec_ctx *x = arg;
	struct il_stage *st = x->st;
	const struct il_app *app = x->app;
	const uint16_t mlen = (uint16_t)IL_LEC_REPAIR_LEN(rep->count, rep->len);
	const uint32_t poff = IL_UDP_HDRS_LEN + (uint32_t)IL_LEC_REPAIR_LEN(rep->count, 0);
	const uint64_t seq = ++x->tx_seq;
	struct il_path path = { .src_ip = app->appliance_ip, .src_port = x->udp_port,
				.dst_port = x->udp_port, .ttl = 16, .df = true };
	int32_t slot[IL_LEC_MAX_TARGETS];
	uint32_t go = 0;
	struct rte_mbuf *m0;
	uint8_t *f0;
	int gi = x->to_group ? whole_group(x, rep, n) : -1;

	st->ctr[LEC_C_REPAIRS]++;
	if (gi >= 0) {
		go = 1; /* one frame, to the group's address: no member's address needed */
	} else if (unlikely(n > IL_LEC_MAX_TARGETS)) {
		st->ctr[LEC_C_DROP_NO_ADDR] += n - IL_LEC_MAX_TARGETS;
		n = IL_LEC_MAX_TARGETS;
	}
	for (uint32_t i = 0; gi < 0 && i < n; i++) {
		int32_t k = addr_find(x, targets[i]);

		if (unlikely(k < 0))
			st->ctr[LEC_C_DROP_NO_ADDR]++;
		else
			slot[go++] = k;
	}
	if (unlikely(go == 0))
		return;
	m0 = il_pktmbuf_alloc(x->pool);
	if (unlikely(m0 == NULL)) {
		st->ctr[LEC_C_DROP_NOMBUF] += go;
		return;
	}
	if (rep->payload == NULL) {
		/* the XOR lands where the sources sit relative to 32 bytes */
		uintptr_t want = (uintptr_t)rep->src[0] & 31;
		uintptr_t at = (uintptr_t)m0->buf_addr + RTE_PKTMBUF_HEADROOM + poff;

		m0->data_off = (uint16_t)(RTE_PKTMBUF_HEADROOM - ((at - want) & 31));
	}
	f0 = (uint8_t *)rte_pktmbuf_append(m0, (uint16_t)(IL_UDP_HDRS_LEN + mlen));
	if (unlikely(f0 == NULL)) {
		st->ctr[LEC_C_DROP_NOMBUF] += go;
		rte_pktmbuf_free(m0);
		return;
	}
	m0->l2_len = IL_ETH_HLEN;
	m0->l3_len = IL_IPV4_HLEN;
	if (rep->payload == NULL)
		il_lec_repair_xor(rep, f0 + poff, 31);
	else
		rte_memcpy(f0 + poff, rep->payload, rep->len);
	put_msg_head(f0 + IL_UDP_HDRS_LEN, x, rep, seq);
	if (gi >= 0) {
		/* where the group's data goes: its address and port */
		il_app_group_path(app, x->group_tx, (unsigned)gi, &path);
		path.df = true;
		il_udp_frame_put(f0, &path, x->ip_id++, mlen);
		lec_out(x, x->group_tx, m0);
		st->ctr[LEC_C_REPAIR_GROUP]++;
		st->ctr[LEC_C_REPAIR_BYTES] += mlen;
		return;
	}
	memcpy(path.src_mac, app->ports[x->tx].mac, 6);

	for (uint32_t i = 1; i < go; i++) {
		struct lec_addr *a = &x->addr[slot[i]];
		struct rte_mbuf *m;
		uint8_t *f;

		memcpy(path.dst_mac, a->mac, 6);
		path.dst_ip = a->ip;
		if (x->by_ref) {
			/* its own headers, chained to the message (which the
			 * clone references without the first frame's headers) */
			struct rte_mbuf *ind;

			m = il_stage_frame_alloc(st, IL_UDP_HDRS_LEN, &f);
			ind = m ? rte_pktmbuf_clone(m0, x->pool) : NULL;
			if (unlikely(ind == NULL)) {
				st->ctr[LEC_C_DROP_NOMBUF]++;
				rte_pktmbuf_free(m);
				continue;
			}
			rte_pktmbuf_adj(ind, IL_UDP_HDRS_LEN);
			il_udp_frame_put(f, &path, x->ip_id++, mlen);
			rte_pktmbuf_chain(m, ind);
		} else {
			m = il_stage_frame_alloc(st, (uint16_t)(IL_UDP_HDRS_LEN + mlen), &f);
			if (unlikely(m == NULL)) {
				st->ctr[LEC_C_DROP_NOMBUF]++;
				continue;
			}
			rte_memcpy(il_udp_frame_put(f, &path, x->ip_id++, mlen),
				   f0 + IL_UDP_HDRS_LEN, mlen);
		}
		/* no UDP checksum (allowed over IPv4): the receiver checks every
		 * frame it rebuilds against the id that names it */
		lec_out(x, x->tx, m);
		count_copy(x, a, mlen);
	}
	struct lec_addr *a0 = &x->addr[slot[0]];

	memcpy(path.dst_mac, a0->mac, 6);
	path.dst_ip = a0->ip;
	il_udp_frame_put(f0, &path, x->ip_id++, mlen);
	lec_out(x, x->tx, m0);
	count_copy(x, a0, mlen);
}

/* ---- member addresses and regions --------------------------------------- */

/* Which region of the plan in force member id is in. */
static uint32_t region_of(const struct lec_ctx *x, uint32_t id)
{
	uint16_t g[IL_MAX_GROUPS];
	struct il_lec_region_info ri;

	for (uint32_t i = 0; i < x->n_regions; i++) {
		if (il_lec_region_get(x->l, i, g, IL_MAX_GROUPS, &ri) != 0)
			continue;
		for (uint32_t k = 0; k < ri.nmembers; k++)
			if (ri.members[k] == id)
				return i;
	}
	return LEC_NO_REGION;
}

/* With auth: the frame's Interlink message is signed by a key we hold,
 * with a counter its sender has not used before. */
static bool frame_verified(struct lec_ctx *x, const uint8_t *f, const struct il_meta *mt)
{
	if (x->keys == NULL)
		return true;
	if (il_auth_verify(x->keys, x->replay, f + mt->il_off,
			   il_get16(f + mt->l4_off + 4) - IL_UDP_HLEN) == IL_AUTH_OK)
		return true;
	x->st->ctr[LEC_C_DROP_UNAUTH]++;
	return false;
}

/* A member's frame: where its host is. The address is the frame's source,
 * outside what a MAC covers: with auth, a frame whose MAC and counter
 * verify (a replayed frame does not) binds its sender to where it came
 * from; without auth, any frame does (docs/lec.md, "Addresses"). */
static void learn(struct lec_ctx *x, const struct rte_mbuf *m, const uint8_t *f,
		  const struct il_meta *mt)
{
	uint32_t id = il_get32(f + mt->il_off + IL_OFF_SENDER_ID);
	uint32_t ip = il_get32(f + mt->l3_off + 12);
	int32_t k;

	(void)m;
	if (!frame_verified(x, f, mt))
		return;
	k = rte_hash_lookup(x->h, &id);
	if (likely(k >= 0)) {
		struct lec_addr *a = &x->addr[k];

		if (likely(a->ip == ip && !memcmp(a->mac, f + 6, 6)))
			return;
		x->st->ctr[LEC_C_ADDR_MOVED]++;
		a->ip = ip;
		memcpy(a->mac, f + 6, 6);
		return;
	}
	k = rte_hash_add_key(x->h, &id);
	if (k < 0) {
		x->st->ctr[LEC_C_DROP_ADDR_FULL]++;
		return;
	}
	struct lec_addr *a = &x->addr[k];

	a->ip = ip;
	memcpy(a->mac, f + 6, 6);
	a->copies = 0;
	a->region = region_of(x, id);
	x->n_addr++;
	x->st->ctr[LEC_C_ADDR_LEARNT]++;
}

/* After a new plan: regions are renumbered, their counters restart. */
static void regions_renumber(struct lec_ctx *x)
{
	uint16_t g[IL_MAX_GROUPS];
	struct il_lec_region_info ri;
	const void *key;
	void *data;
	uint32_t it = 0;
	int32_t k;

	while ((k = rte_hash_iterate(x->h, &key, &data, &it)) >= 0)
		x->addr[k].region = LEC_NO_REGION;
	x->n_regions = il_lec_region_count(x->l);
	memset(x->region_copies, 0, sizeof(uint64_t) * x->n_regions);
	for (uint32_t i = 0; i < x->n_regions; i++) {
		x->region_members[i] = 0;
		x->region_groups[i] = 0;
		if (il_lec_region_get(x->l, i, g, IL_MAX_GROUPS, &ri) != 0)
			continue;
		x->region_members[i] = ri.nmembers;
		x->region_groups[i] = (uint16_t)ri.ngroups;
		for (uint32_t j = 0; j < ri.nmembers; j++) {
			k = rte_hash_lookup(x->h, &ri.members[j]);
			if (k >= 0)
				x->addr[k].region = i;
		}
	}
}

/* ---- views --------------------------------------------------------------- */

/* Targets per message for group gi of k receivers. rate: peers gives each
 * member as many repairs of a message as its peers would have sent it
 * with receiver-side LEC at (r, c): each of the k - 1 others sends
 * min(c, k - 1) copies, one of which is this member's with probability
 * 1 / (k - 1), so min(c, k - 1) per member, k min(c, k - 1) in all
 * (the core gives a bin layers when that exceeds a member per repair). */
static double group_c(const struct lec_ctx *x, unsigned gi, uint32_t k)
{
	if (x->c_group[gi] > 0)
		return x->c_group[gi];
	if (x->rate_peers && k >= 2)
		return (double)k * (x->c < k - 1 ? x->c : (double)(k - 1));
	/* one node's rate: at most every member once (Ricochet's cap) */
	return k > 0 && x->c > k ? (double)k : x->c;
}

/* Group gi's view: its receivers into LEC (applied by the caller). */
static bool view_set(struct lec_ctx *x, unsigned gi, uint32_t view_id, const uint32_t *ids,
		     const uint32_t *roles, uint16_t n)
{
	char err[256];
	uint32_t k = 0;

	if (view_id == x->view_id[gi])
		return false;
	x->view_id[gi] = view_id;
	for (uint16_t i = 0; i < n; i++)
		if (roles[i] & IL_ROLE_RECEIVER)
			x->rcv[k++] = ids[i];
	x->receivers[gi] = (uint16_t)k;
	if (il_lec_group_set(x->l, x->app->groups[gi].id, group_c(x, gi, k), x->rcv, k, err,
			     sizeof(err)) != 0) {
		x->st->ctr[LEC_C_DROP_VIEW]++;
		return false;
	}
	return true;
}

static void views_apply(struct lec_ctx *x)
{
	char err[256];

	if (il_lec_apply(x->l, err, sizeof(err)) != 0) {
		x->st->ctr[LEC_C_DROP_VIEW]++;
		return;
	}
	x->st->ctr[LEC_C_VIEWS]++;
	regions_renumber(x);
}

/* The control stage's views (same lcore), at most every view_poll_us. */
static void views_from_ctl(struct lec_ctx *x, uint64_t now)
{
	bool changed = false;

	x->next_view = now + x->view_tsc;
	for (unsigned gi = 0; gi < x->app->n_groups; gi++) {
		uint32_t vid;
		uint16_t n;

		if (!x->want[gi])
			continue;
		n = ctrl_view_get(x->ctl, gi, &vid, x->vin, x->roles, CTL_MAX_MEMBERS);
		if (vid != 0)
			changed |= view_set(x, gi, vid, x->vin, x->roles, n);
	}
	if (changed)
		views_apply(x);
}

/* A VIEW frame passing (deployments without a control stage here). */
static void view_from_frame(struct lec_ctx *x, const uint8_t *h, uint32_t len,
			    const struct il_meta *mt)
{
	struct il_view_body v;
	const struct il_group *g = il_app_group_by_id(x->app, il_get16(h + IL_OFF_GROUP_ID));
	uint32_t hl = h[IL_OFF_HDR_LEN];

	if (g == NULL || len < hl || il_view_get(h + hl, len - hl, &v) != 0 ||
	    !frame_verified(x, h - mt->il_off, mt))
		return;
	unsigned gi = (unsigned)(g - x->app->groups);

	if (!x->want[gi])
		return;
	for (uint16_t i = 0; i < v.n_members; i++) {
		x->vin[i] = il_view_member_id(&v, i);
		x->roles[i] = il_view_member_roles(&v, i);
	}
	if (view_set(x, gi, v.view_id, x->vin, x->roles, v.n_members))
		views_apply(x);
}

/* ---- the stage ------------------------------------------------------------ */

/* The flush timer: bins older than flush_us fire short, each within
 * flush_us / LEC_FLUSH_SLICES of its age: the timer runs again when the
 * earliest bin it left comes due (at most that often), and at least every
 * flush_us / 4 for bins started in between. */
#define LEC_FLUSH_SLICES 16
static inline void lec_timers(struct lec_ctx *x, uint64_t now)
{
	if (unlikely(now >= x->next_flush)) {
		if (!x->flush_tsc) {
			x->next_flush = UINT64_MAX;
			return;
		}
		il_lec_flush_aged(x->l, now, x->flush_tsc);
		uint64_t next = now + x->flush_tsc / 4;
		uint64_t due = il_lec_next_due(x->l);
		uint64_t soonest = now + x->flush_tsc / LEC_FLUSH_SLICES;

		if (due < next)
			next = due > soonest ? due : soonest;
		x->next_flush = next;
	}
}

/* One frame: a stamped DATA frame into the bins, a member's frame to learn
 * its address, a VIEW frame (no control stage named). */
static inline void lec_frame(struct lec_ctx *x, struct rte_mbuf *m, uint64_t now)
{
	struct il_stage *st = x->st;
	const struct il_meta *mt = il_meta(m);
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);

	if (likely(mt->kind == IL_K_DATA)) {
		const uint8_t *h = f + mt->il_off;
		uint32_t len = il_get16(f + mt->l4_off + 4) - IL_UDP_HLEN;
		unsigned gi = mt->group_idx;

		st->ctr[LEC_C_DATA]++;
		if (unlikely(!(h[IL_OFF_FLAGS] & IL_F_STAMPED) || !x->want[gi] ||
			     x->view_id[gi] == 0 || m->nb_segs != 1)) {
			st->ctr[LEC_C_UNPROTECTED]++;
			return;
		}
		if (unlikely(len > x->max_len)) {
			st->ctr[LEC_C_TOO_LONG]++;
			x->too_long[gi]++;
			return;
		}
		const struct il_lec_id id = { .seq = il_get64(h + IL_OFF_GLOBAL_SEQ),
					      .epoch = il_get32(h + IL_OFF_EPOCH),
					      .group = x->app->groups[gi].id };

		il_lec_data(x->l, &id, h, len, m, now);
		st->ctr[LEC_C_PROTECTED]++;
		x->frames[gi]++;
	} else if (mt->kind == IL_K_CONTROL || mt->kind == IL_K_NAK) {
		const uint8_t *h = f + mt->il_off;
		uint8_t t = h[IL_OFF_TYPE];

		if (t == IL_T_JOIN || t == IL_T_HEARTBEAT || t == IL_T_ACK || t == IL_T_NAK)
			learn(x, m, f, mt);
		else if (t == IL_T_VIEW && x->ctl == NULL)
			view_from_frame(x, h, il_get16(f + mt->l4_off + 4) - IL_UDP_HLEN, mt);
	}
}

/* Everything on the chain lcore (no repair_lcore). */
static uint16_t lec_process(struct il_stage *st, struct rte_mbuf **pkts, uint16_t n)
{
	struct lec_ctx *x = st->ctx;
	/* the core's clock is the TSC (it only compares times: flush by age) */
	const uint64_t now = rte_rdtsc();

	if (x->ctl != NULL && unlikely(now >= x->next_view))
		views_from_ctl(x, now);
	lec_timers(x, now);
	for (uint16_t i = 0; i < n; i++) {
		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
		lec_frame(x, pkts[i], now);
	}
	return n; /* everything passes, unchanged */
}

/* ---- a repair lcore (repair_lcore) --------------------------------------- */

/* Chain lcore: the control stage's views that changed since the last poll,
 * each a note in the ring ahead of the burst's frames. A note that finds
 * no mbuf or no room is made again at the next poll. */
static void front_views(struct lec_ctx *x, uint64_t now)
{
	x->fnext_view = now + x->view_tsc;
	for (unsigned gi = 0; gi < x->app->n_groups; gi++) {
		uint32_t vid;
		uint16_t n;
		struct rte_mbuf *m;
		struct lec_note *nt;

		if (!x->want[gi])
			continue;
		n = ctrl_view_get(x->ctl, gi, &vid, x->fvin, x->froles, CTL_MAX_MEMBERS);
		if (vid == 0 || vid == x->fview_id[gi])
			continue;
		m = rte_pktmbuf_alloc(x->st->pool);
		nt = m ? (struct lec_note *)rte_pktmbuf_append(m, sizeof(*nt)) : NULL;
		if (nt == NULL) {
			rte_pktmbuf_free(m);
			return;
		}
		m->port = LEC_NOTE_PORT;
		nt->gi = (uint16_t)gi;
		nt->n = n;
		nt->view_id = vid;
		memcpy(nt->ids, x->fvin, n * sizeof(uint32_t));
		memcpy(nt->roles, x->froles, n * sizeof(uint32_t));
		if (rte_ring_enqueue(x->to_svc, m) != 0) {
			rte_pktmbuf_free(m);
			return;
		}
		x->fview_id[gi] = vid;
	}
}

/* Chain lcore, with a repair lcore: send the repairs it handed back, hand
 * it the burst's DATA, control and NAK frames (a reference each: the frame
 * goes on down the chain as well) and the views that changed. Its own
 * work per frame is a reference count and a ring slot. */
static uint16_t lec_front(struct il_stage *st, struct rte_mbuf **pkts, uint16_t n)
{
	struct lec_ctx *x = st->ctx;
	struct rte_mbuf *hand[IL_BURST_CAP];
	void *back[IL_BURST];
	unsigned k, j = 0;

	/* as many as this poll may emit (a data frame may bring several) */
	for (uint16_t room = il_emit_room(st); room > 0; room = (uint16_t)(room - k)) {
		k = rte_ring_dequeue_burst(x->from_svc, back, RTE_MIN(room, IL_BURST), NULL);
		for (unsigned i = 0; i < k; i++) {
			uint16_t port;
			struct rte_mbuf *m = port_untag(back[i], &port);

			lec_emit(x, port, m);
		}
		if (k < IL_BURST)
			break;
	}
	if (x->ctl != NULL) {
		const uint64_t now = rte_rdtsc();

		if (unlikely(now >= x->fnext_view))
			front_views(x, now);
	}
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		uint8_t kind = il_meta(m)->kind;

		if (likely(kind == IL_K_DATA || kind == IL_K_CONTROL || kind == IL_K_NAK)) {
			/* a free puts back a reference of every segment */
			for (struct rte_mbuf *seg = m; seg != NULL; seg = seg->next)
				rte_mbuf_refcnt_update(seg, 1);
			hand[j++] = m;
		}
	}
	if (j == 0)
		return n;
	k = rte_ring_enqueue_burst(x->to_svc, (void **)hand, j, NULL);
	st->ctr[LEC_C_HANDED] += k;
	if (unlikely(k < j)) {
		/* the repair lcore is behind: these go out unprotected */
		st->ctr[LEC_C_DROP_BUSY] += j - k;
		for (unsigned i = k; i < j; i++)
			rte_pktmbuf_free(hand[i]); /* our reference only */
	}
	return n; /* everything passes, unchanged */
}

/* Repair lcore: a note's view into LEC (the plan is made again before the
 * next frame, once for a run of notes). */
static void svc_note(struct lec_ctx *x, const struct lec_note *nt)
{
	if (nt->gi < x->app->n_groups && x->want[nt->gi] &&
	    view_set(x, nt->gi, nt->view_id, nt->ids, nt->roles, nt->n))
		x->plan_due = true;
}

/* The repair lcore's loop body: the frames and notes handed over, the
 * flush timer, the repairs handed back. */
static int lec_service(struct il_stage *st)
{
	struct lec_ctx *x = st->ctx;
	struct rte_mbuf *got[IL_BURST];
	const uint64_t now = rte_rdtsc();
	unsigned n;
	uint32_t cmd = __atomic_load_n(&x->app->rt.seq, __ATOMIC_RELAXED);

	if (unlikely(cmd != x->cmd_seen)) {
		/* a counter reset: the chain lcore's loop zeroes the stage's
		 * counters, this one those it writes itself (a reset racing an
		 * increment here would otherwise be lost) */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (x->app->rt.kind == IL_RT_RESET) {
			for (unsigned i = 0; i < LEC_C_COUNT; i++)
				if (i != LEC_C_HANDED && i != LEC_C_DROP_BUSY && i != LEC_C_TX_DIRECT)
					st->ctr[i] = 0;
			x->svc_frames = x->svc_busy_tsc = x->svc_bursts = 0;
		}
		x->cmd_seen = cmd;
	}
	lec_timers(x, now);
	n = rte_ring_dequeue_burst(x->to_svc, (void **)got, IL_BURST, NULL);
	/* the mbufs come from the chain lcore's cache: their headers first */
	for (unsigned i = 0; i < n; i++) {
		rte_prefetch0(got[i]);
		rte_prefetch0(il_meta(got[i]));
	}
	unsigned kept = 0;

	for (unsigned i = 0; i < n; i++) {
		struct rte_mbuf *m = got[i];

		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(got[i + 1], void *));
		if (unlikely(m->port == LEC_NOTE_PORT)) {
			svc_note(x, rte_pktmbuf_mtod(m, const struct lec_note *));
			got[kept++] = m;
			continue;
		}
		if (unlikely(x->plan_due)) {
			x->plan_due = false;
			views_apply(x);
		}
		x->cur = m;
		x->adopted = false;
		lec_frame(x, m, now);
		if (!x->adopted)
			got[kept++] = m;
	}
	x->cur = NULL;
	if (unlikely(x->plan_due)) {
		x->plan_due = false;
		views_apply(x);
	}
	if (n) {
		/* the chain lcore's references the bins did not take over */
		rte_pktmbuf_free_bulk(got, kept);
		x->svc_frames += n;
		x->svc_bursts++;
		x->svc_busy_tsc += rte_rdtsc() - now;
	}
	if (x->n_out)
		svc_hand_back(x);
	return n != 0;
}

/* Stopped (the repair lcore too): repairs it handed back that the chain
 * lcore did not send yet go out now. */
static void lec_stop(struct il_stage *st)
{
	struct lec_ctx *x = st->ctx;
	void *v;
	uint16_t port;

	if (x == NULL || x->from_svc == NULL)
		return;
	svc_hand_back(x);
	while (rte_ring_dequeue(x->from_svc, &v) == 0) {
		struct rte_mbuf *m = port_untag(v, &port);

		il_app_send_now(x->app, port, m);
	}
}

static uint16_t lec_process_any(struct il_stage *st, struct rte_mbuf **pkts, uint16_t n)
{
	const struct lec_ctx *x = st->ctx;

	return x->svc >= 0 ? lec_front(st, pkts, n) : lec_process(st, pkts, n);
}

static const char *const lec_keys[] = {
	"type", "control", "tx", "r", "c", "stagger", "groups", "xor_impl", "max_members",
	"max_bins", "max_links", "max_group_size", "view_poll_us", "fanout", "plan",
	"max_layers", "flush_us", "auth", "rate", "c_groups", "repairs_to", "group_tx",
	"layer_stride", "repair_lcore", "repair_ring", NULL,
};

static void *lec_stage_alloc(size_t size, size_t align, void *arg)
{
	(void)arg;
	return rte_zmalloc_socket("il_lec", size, (unsigned)align, (int)rte_socket_id());
}

static void lec_stage_free(void *p, void *arg)
{
	(void)arg;
	rte_free(p);
}

static void lec_destroy(struct il_stage *st)
{
	struct lec_ctx *x = st->ctx;

	if (x == NULL)
		return;
	struct rte_ring *rings[2] = { x->to_svc, x->from_svc };
	uint16_t port;
	void *v;

	/* frames and notes in the first ring, tagged repairs in the second */
	for (unsigned i = 0; i < 2; i++) {
		while (rings[i] && rte_ring_dequeue(rings[i], &v) == 0)
			rte_pktmbuf_free(i ? port_untag(v, &port) : v);
		rte_ring_free(rings[i]);
	}
	for (unsigned i = 0; i < x->n_out; i++)
		rte_pktmbuf_free(port_untag(x->out[i], &port));
	il_lec_free(x->l); /* gives back the references the bins hold */
	il_stage_auth_free(&x->auth);
	if (x->replay != x->auth.replay)
		rte_free(x->replay);
	rte_hash_free(x->h);
	rte_free(x->addr);
	rte_free(x->region_copies);
	rte_free(x->region_members);
	rte_free(x->region_groups);
	rte_free(x->vin);
	rte_free(x->roles);
	rte_free(x->rcv);
	rte_free(x->acache);
	rte_free(x);
	st->ctx = NULL;
}

/* c_groups: { <group id>: <targets per message> } */
static int parse_c_groups(struct lec_ctx *x, const struct il_cfg *p, char *err, size_t errlen)
{
	const struct il_cfg *m = il_cfg_get(p, "c_groups");

	if (m == NULL)
		return 0;
	if (il_cfg_kind(m) != IL_CFG_MAP)
		return ERR("config: key '%s.c_groups' must map group ids to targets per message",
			   il_cfg_path(p));
	for (unsigned i = 0; i < il_cfg_len(m); i++) {
		const char *k = il_cfg_key_at(m, i), *v = il_cfg_scalar(il_cfg_at(m, i));
		char *end = NULL, *vend = NULL;
		unsigned long id = k ? strtoul(k, &end, 10) : 0;
		const struct il_group *g = (k && *k && !*end && id <= 65535) ?
						   il_app_group_by_id(x->app, (uint16_t)id) : NULL;
		double c = v ? strtod(v, &vend) : 0;

		if (g == NULL)
			return ERR("config: key '%s.c_groups.%s': not a configured group id",
				   il_cfg_path(p), k ? k : "?");
		if (!v || !*v || *vend || !(c >= 0.01 && c <= IL_LEC_MAX_C))
			return ERR("config: key '%s.c_groups.%s' = '%s'; allowed: 0.01..%g",
				   il_cfg_path(p), k, v ? v : "?", IL_LEC_MAX_C);
		x->c_group[g - x->app->groups] = c;
	}
	return 0;
}

static int parse_groups(struct lec_ctx *x, const struct il_cfg *p, char *err, size_t errlen)
{
	const struct il_cfg *seq = il_cfg_get(p, "groups");
	const struct il_app *app = x->app;

	if (seq == NULL) {
		for (unsigned gi = 0; gi < app->n_groups; gi++)
			x->want[gi] = true;
		return 0;
	}
	if (il_cfg_kind(seq) != IL_CFG_SEQ)
		return ERR("config: key '%s.groups' must list group ids (default: every group)",
			   il_cfg_path(p));
	for (unsigned i = 0; i < il_cfg_len(seq); i++) {
		const char *s = il_cfg_scalar(il_cfg_at(seq, i));
		char *end = NULL;
		unsigned long v = s ? strtoul(s, &end, 10) : 0;
		const struct il_group *g = (s && *s && !*end && v <= 65535) ?
						   il_app_group_by_id(app, (uint16_t)v) : NULL;

		if (g == NULL)
			return ERR("config: key '%s.groups[%u]': '%s' is not a configured group id",
				   il_cfg_path(p), i, s ? s : "?");
		x->want[g - app->groups] = true;
	}
	return 0;
}

/* repair_lcore: an lcore; in shards, a list of one per shard (this copy's
 * is its shard's entry). Absent: *lc untouched. */
static int parse_repair_lcore(const struct il_stage *st, const struct il_cfg *p,
			      const struct il_app *app, uint64_t *lc, char *err, size_t errlen)
{
	const struct il_cfg *v = il_cfg_get(p, "repair_lcore");

	if (v == NULL)
		return 0;
	if (!app->n_shards) {
		if (il_cfg_kind(v) == IL_CFG_SEQ)
			return ERR("config: key '%s.repair_lcore': one lcore without shards (a "
				   "list names one per shard)", il_cfg_path(p));
		return il_cfg_u64(p, "repair_lcore", 0, 0, RTE_MAX_LCORE - 1, lc, err, errlen);
	}
	if (il_cfg_kind(v) != IL_CFG_SEQ || il_cfg_len(v) != app->n_shards)
		return ERR("config: key '%s.repair_lcore': in shards, a list of %u lcores, one per "
			   "shard (shards.lcores)", il_cfg_path(p), app->n_shards);
	const char *sv = il_cfg_scalar(il_cfg_at(v, (unsigned)(st->shard > 0 ? st->shard : 0)));
	char *end = NULL;
	unsigned long l = sv ? strtoul(sv, &end, 10) : 0;

	if (sv == NULL || *sv == '\0' || *end != '\0' || l >= RTE_MAX_LCORE)
		return ERR("config: key '%s.repair_lcore[%d]': '%s' is not an lcore id",
			   il_cfg_path(p), st->shard > 0 ? st->shard : 0, sv ? sv : "?");
	*lc = l;
	return 0;
}

static int lec_create(struct il_stage *st, const struct il_cfg *p, struct il_app *app, char *err,
		      size_t errlen)
{
	static const char *const impls[] = { "isal", "ref", "avx2", NULL };
	static const char *const fanouts[] = { "auto", "copy", "reference", NULL };
	static const char *const plans[] = { "regions", "groups", NULL };
	static const char *const rates[] = { "node", "peers", NULL };
	static const char *const tos[] = { "members", "group", NULL };
	uint64_t layers, flush_us;
	int plan, rate, to;
	bool stride;
	struct lec_ctx *x = rte_zmalloc("il_lec_stage", sizeof(*x), RTE_CACHE_LINE_SIZE);
	struct il_lec_cfg lc;
	const char *ctl, *tx, *gtx;
	uint64_t r, stagger, members, bins, links, gsize, poll_us, svc = 0, ring;
	double c;
	int impl;
	char msg[512];

	if (x == NULL)
		return ERR("stage '%s': out of memory", st->name);
	st->ctx = x;
	x->st = st;
	x->app = app;
	il_lec_cfg_defaults(&lc);
	if (il_cfg_check_keys(p, lec_keys, err, errlen) ||
	    il_cfg_str(p, "control", NULL, &ctl, err, errlen) ||
	    il_cfg_str(p, "tx", "in", &tx, err, errlen) ||
	    il_cfg_u64(p, "r", 8, 2, IL_LEC_MAX_R, &r, err, errlen) ||
	    il_cfg_double(p, "c", 5.0, 0.01, IL_LEC_MAX_C, &c, err, errlen) ||
	    il_cfg_u64(p, "stagger", 1, 1, IL_LEC_MAX_STAGGER, &stagger, err, errlen) ||
	    il_cfg_enum(p, "xor_impl", impls, IL_LEC_XOR_AVX2, &impl, err, errlen) ||
	    il_cfg_u64(p, "max_members", 1024, 1, 1u << 20, &members, err, errlen) ||
	    il_cfg_u64(p, "max_bins", 512, 1, 1u << 16, &bins, err, errlen) ||
	    il_cfg_u64(p, "max_links", 4096, 1, 1u << 22, &links, err, errlen) ||
	    il_cfg_u64(p, "max_group_size", 256, 1, 1u << 16, &gsize, err, errlen) ||
	    il_cfg_u64(p, "view_poll_us", 1000, 1, 1000000, &poll_us, err, errlen) ||
	    il_cfg_enum(p, "fanout", fanouts, 0, &x->fanout, err, errlen) ||
	    il_cfg_enum(p, "plan", plans, LEC_DEFAULT_PLAN, &plan, err, errlen) ||
	    il_cfg_u64(p, "max_layers", LEC_DEFAULT_LAYERS, 1, IL_LEC_MAX_LAYERS, &layers, err,
		       errlen) ||
	    il_cfg_u64(p, "flush_us", LEC_DEFAULT_FLUSH_US, 0, 1000000, &flush_us, err, errlen) ||
	    il_stage_auth_create(p, &x->auth, err, errlen) ||
	    il_cfg_enum(p, "rate", rates, LEC_DEFAULT_RATE, &rate, err, errlen) ||
	    il_cfg_enum(p, "repairs_to", tos, LEC_DEFAULT_TO, &to, err, errlen) ||
	    il_cfg_str(p, "group_tx", "out", &gtx, err, errlen) ||
	    il_cfg_bool(p, "layer_stride", true, &stride, err, errlen) ||
	    parse_repair_lcore(st, p, app, &svc, err, errlen) ||
	    il_cfg_u64(p, "repair_ring", LEC_DEFAULT_RING, 64, 1u << 20, &ring, err, errlen) ||
	    parse_c_groups(x, p, err, errlen) ||
	    parse_groups(x, p, err, errlen))
		goto fail;
	int ti = il_app_port_index(app, tx);
	if (ti < 0) {
		il_err(err, errlen, "config: key '%s.tx': '%s' is not a configured port",
		       il_cfg_path(p), tx);
		goto fail;
	}
	x->tx = (uint16_t)ti;
	x->svc = il_cfg_get(p, "repair_lcore") != NULL ? (int)svc : -1;
	/* In shards (docs/scaling.md) each shard's copy protects the groups
	 * its shard owns: their frames, views and members' frames all reach
	 * that shard, and a bin per group needs no other group. */
	if (app->n_shards && st->shard >= 0)
		for (unsigned gi = 0; gi < app->n_groups; gi++)
			x->want[gi] = x->want[gi] && app->groups[gi].shard == st->shard;
	st->has_service = x->svc >= 0;
	st->service_lcore = x->svc >= 0 ? (unsigned)x->svc : 0;
	x->ring_slots = (uint32_t)ring;
	x->to_group = to == 1;
	if (x->to_group) {
		int gt = il_app_port_index(app, gtx);

		if (gt < 0) {
			il_err(err, errlen,
			       "config: key '%s.group_tx': '%s' is not a configured port (repairs_to: "
			       "group, the default, sends a repair meant for a whole group to the "
			       "group's address: name the port of the groups' data, or set "
			       "repairs_to: members)",
			       il_cfg_path(p), gtx);
			goto fail;
		}
		x->group_tx = (uint16_t)gt;
	}
	if (ctl)
		snprintf(x->ctl_name, sizeof(x->ctl_name), "%s", ctl);
	x->udp_port = app->il_udp_port;
	x->r = (uint8_t)r;
	/* the longest frame whose repairs of r frames fit the LAN's datagrams */
	uint32_t udp_max = app->frame_max - IL_UDP_HDRS_LEN;
	if (udp_max <= IL_HDR_LEN + IL_LEC_BODY_LEN + r * IL_LEC_ID_LEN + IL_HDR_LEN) {
		il_err(err, errlen, "config: stage '%s': r = %llu leaves no room for a frame in a repair of the "
		    "appliance's mtu", st->name, (unsigned long long)r);
		goto fail;
	}
	x->max_len = (uint32_t)IL_LEC_MAX_FRAME(udp_max, r);
	lc.r = (uint8_t)r;
	lc.c = c;
	lc.stagger = (uint8_t)stagger;
	lc.plan = (uint8_t)plan;
	x->c = c;
	x->rate_peers = rate == 1;
	lc.max_layers = (uint8_t)layers;
	lc.layer_stride = stride;
	lc.xor_impl = (uint8_t)impl;
	lc.decode = false;
	lc.defer_xor = true;
	lc.self_id = IL_LEC_OBSERVER;
	lc.max_len = x->max_len;
	/* frames sit in mbufs behind their headers and the headroom: LEC may
	 * read up to 31 bytes before the Interlink header, so ISA-L XORs
	 * them from a 32-byte boundary */
	lc.src_slack = 31;
	lc.max_groups = app->n_groups ? app->n_groups : 1;
	lc.max_group_size = (uint32_t)gsize;
	lc.max_members = (uint32_t)members;
	lc.max_bins = (uint32_t)bins;
	lc.max_links = (uint32_t)links;
	lc.seed = rte_rdtsc();
	lc.alloc = lec_stage_alloc;
	lc.free = lec_stage_free;
	const struct il_lec_ops ops = { .send = lec_send, .hold = lec_hold,
					.release = lec_release, .arg = x };
	x->l = il_lec_create(&lc, &ops, msg, sizeof(msg));
	if (x->l == NULL) {
		/* the core names its keys lec.KEY, which are this stage's keys */
		il_err(err, errlen, "config: stage '%s': %s", st->name, msg);
		goto fail;
	}
	char hname[RTE_HASH_NAMESIZE];
	/* names are per process, which may hold several appliances (benchmarks) */
	static unsigned instances;

	x->instance = __atomic_fetch_add(&instances, 1, __ATOMIC_RELAXED);
	snprintf(hname, sizeof(hname), "il_lec_%u", x->instance);
	struct rte_hash_parameters hp = {
		.name = hname,
		.entries = (uint32_t)members < 16 ? 16 : (uint32_t)members,
		.key_len = sizeof(uint32_t),
		.hash_func = rte_jhash,
		.socket_id = (int)rte_socket_id(),
	};
	x->h = rte_hash_create(&hp);
	x->addr = x->h ? rte_zmalloc("il_lec_addr", sizeof(*x->addr) *
						   (rte_hash_max_key_id(x->h) + 1), 0) : NULL;
	x->region_copies = rte_zmalloc("il_lec_regions", sizeof(uint64_t) * members, 0);
	x->region_members = rte_zmalloc("il_lec_rmembers", sizeof(uint32_t) * members, 0);
	x->region_groups = rte_zmalloc("il_lec_rgroups", sizeof(uint16_t) * members, 0);
	x->vin = rte_zmalloc("il_lec_view", sizeof(uint32_t) * 65536, 0);
	x->roles = rte_zmalloc("il_lec_roles", sizeof(uint32_t) * 65536, 0);
	x->rcv = rte_zmalloc("il_lec_rcv", sizeof(uint32_t) * 65536, 0);
	uint32_t ac = 16;
	while (ac < 2 * members)
		ac <<= 1;
	x->acache_shift = 32u - (uint32_t)__builtin_ctz(ac);
	x->acache = rte_malloc("il_lec_acache", sizeof(*x->acache) * ac, 0);
	if (x->acache)
		for (uint32_t i = 0; i < ac; i++)
			x->acache[i] = (struct lec_acache){ 0, -1 };
	if (!x->h || !x->addr || !x->region_copies || !x->region_members || !x->region_groups ||
	    !x->vin || !x->roles || !x->rcv || !x->acache) {
		il_err(err, errlen, "stage '%s': out of memory for %llu members", st->name,
		    (unsigned long long)members);
		goto fail;
	}
	x->keys = x->auth.keys;
	x->replay = x->auth.replay;
	x->view_tsc = poll_us * rte_get_tsc_hz() / 1000000u;
	x->flush_tsc = flush_us * rte_get_tsc_hz() / 1000000u;
	return 0;
fail:
	lec_destroy(st);
	return -1;
}

static int lec_bind(struct il_stage *st, char *err, size_t errlen)
{
	struct lec_ctx *x = st->ctx;
	extern const struct il_stage_type il_stage_control;

	x->pool = st->pool ? st->pool : x->app->pool;
	if (x->ctl_name[0]) {
		/* in shards, the control stage of its own shard */
		struct il_stage *c = il_app_stage_peer(x->app, st, x->ctl_name);

		if (c == NULL || c->type != &il_stage_control)
			return ERR("config: key 'stages.%s.control': '%s' is not a control stage",
				   st->name, x->ctl_name);
		if (c->lcore != st->lcore)
			return ERR("config: stage '%s' (lcore %d) must run on the lcore of its control "
				   "stage '%s' (lcore %d): it reads the views in force", st->name,
				   st->lcore, c->name, c->lcore);
		x->ctl = c;
		/* without keys of its own, the stage checks members' frames with
		 * its control stage's keys (its own replay windows) */
		const struct ctrl *cc = c->ctx;

		if (x->keys == NULL && cc->auth.keys != NULL) {
			x->keys = cc->auth.keys;
			x->replay = rte_zmalloc("il_lec_replay", il_auth_replay_bytes(1024), 0);
			if (x->replay == NULL)
				return ERR("stage '%s': out of memory for replay windows", st->name);
			il_auth_replay_init(x->replay, 1024);
		}
	}
	/* Copies of a repair reference one message when the port sends
	 * chained mbufs (memif, af_packet and most NICs do); else each copy
	 * is a whole frame. */
	struct rte_eth_dev_info info;
	bool chains = rte_eth_dev_info_get(x->app->ports[x->tx].port_id, &info) == 0 &&
		      (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS);

	if (x->fanout == 2 && !chains)
		return ERR("config: key 'stages.%s.fanout': reference needs a tx port that sends "
			   "chained mbufs, and '%s' does not (auto or copy)", st->name,
			   x->app->ports[x->tx].name);
	x->by_ref = x->fanout == 2 || (x->fanout == 0 && chains);
	uint32_t room = rte_pktmbuf_data_room_size(x->app->pool) - RTE_PKTMBUF_HEADROOM;
	uint32_t need = IL_UDP_HDRS_LEN + IL_LEC_REPAIR_LEN(x->r, x->max_len);

	if (need > room)
		return ERR("stage '%s': repair frames of %u bytes do not fit the pool's %u-byte "
			   "mbufs", st->name, need, room);
	if (x->svc >= 0) {
		char name[RTE_RING_NAMESIZE];
		const unsigned flags = RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ;
		const int sock = (int)rte_lcore_to_socket_id((unsigned)x->svc);

		snprintf(name, sizeof(name), "il_lec_to_%u", x->instance);
		x->to_svc = rte_ring_create(name, x->ring_slots, sock, flags);
		snprintf(name, sizeof(name), "il_lec_back_%u", x->instance);
		x->from_svc = x->to_svc ? rte_ring_create(name, x->ring_slots, sock, flags) : NULL;
		if (x->from_svc == NULL)
			return ERR("stage '%s': cannot create the repair lcore's rings of %u slots "
				   "(%s)", st->name, x->ring_slots, rte_strerror(rte_errno));
		x->cmd_seen = __atomic_load_n(&x->app->rt.seq, __ATOMIC_ACQUIRE);
	}
	return 0;
}

/* With a repair lcore: the frames its two rings may hold. */
static uint32_t lec_mbufs_held(const struct il_stage *st)
{
	const struct lec_ctx *x = st->ctx;

	return x != NULL && x->svc >= 0 ? 2 * x->ring_slots : 0;
}

/* Per group and per region, beyond the counters. */
static void lec_state(const struct il_stage *st, struct il_state_sink *out)
{
	static char keys[LEC_REGION_KEYS][3][24];
	static bool keys_made;
	const struct lec_ctx *x = st->ctx;
	const struct il_lec_stats *s = il_lec_stats(x->l);
	uint64_t rest = 0;
	uint32_t nr = x->n_regions;

	if (!keys_made) {
		for (unsigned i = 0; i < LEC_REGION_KEYS; i++) {
			snprintf(keys[i][0], sizeof(keys[i][0]), "region%u_members", i);
			snprintf(keys[i][1], sizeof(keys[i][1]), "region%u_groups", i);
			snprintf(keys[i][2], sizeof(keys[i][2]), "region%u_repairs", i);
		}
		keys_made = true;
	}
	il_state_put(out, -1, "regions", nr);
	il_state_put(out, -1, "bins", il_lec_bin_count(x->l));
	il_state_put(out, -1, "members_known", x->n_addr);
	il_state_put(out, -1, "fanout_by_reference", x->by_ref);
	il_state_put(out, -1, "bin_adds", s->bin_adds);
	il_state_put(out, -1, "xor_ops", s->xor_ops);
	il_state_put(out, -1, "copy_ops", s->copy_ops);
	il_state_put(out, -1, "holds", s->holds);
	il_state_put(out, -1, "repairs_skipped", s->repairs_skipped);
	il_state_put(out, -1, "drop_bin_view", s->drop_bin_view);
	il_state_put(out, -1, "drop_repair_view", s->drop_repair_view);
	il_state_put(out, -1, "c_capped", s->c_capped);
	if (x->svc >= 0) {
		il_state_put(out, -1, "repair_lcore", (uint64_t)x->svc);
		il_state_put(out, -1, "repair_lcore_frames", x->svc_frames);
		il_state_put(out, -1, "repair_lcore_busy_cycles", x->svc_busy_tsc);
		il_state_put(out, -1, "repair_lcore_bursts", x->svc_bursts);
		il_state_put(out, -1, "repair_ring_used", rte_ring_count(x->to_svc));
		il_state_put(out, -1, "repair_back_used", rte_ring_count(x->from_svc));
	}
	for (unsigned gi = 0; gi < x->app->n_groups; gi++) {
		if (!x->want[gi])
			continue;
		il_state_put(out, (int)gi, "lec_frames", x->frames[gi]);
		il_state_put(out, (int)gi, "lec_too_long", x->too_long[gi]);
		il_state_put(out, (int)gi, "lec_receivers", x->receivers[gi]);
		il_state_put(out, (int)gi, "lec_view_id", x->view_id[gi]);
	}
	/* Read from another thread while the lcore may apply a new plan (it
	 * touches only the stage's own copies): the figures of one report may
	 * straddle the change. */
	for (uint32_t i = 0; i < nr; i++) {
		if (i >= LEC_REGION_KEYS) {
			rest += x->region_copies[i];
			continue;
		}
		il_state_put(out, -1, keys[i][0], x->region_members[i]);
		il_state_put(out, -1, keys[i][1], x->region_groups[i]);
		il_state_put(out, -1, keys[i][2], x->region_copies[i]);
	}
	if (nr > LEC_REGION_KEYS)
		il_state_put(out, -1, "regions_more_repairs", rest);
}

const struct il_stage_type il_stage_lec = {
	.name = "lec",
	.help = "appliance-side Ricochet LEC: region-based composite XOR repairs of the stamped "
		"stream, unicast to the members drawn",
	.counter_names = lec_counter_names,
	.n_counters = LEC_C_COUNT,
	.create = lec_create,
	.bind = lec_bind,
	.process = lec_process_any,
	.destroy = lec_destroy,
	.stop = lec_stop,
	.state = lec_state,
	.service = lec_service,
	.service_key = "repair_lcore",
	.mbufs_held = lec_mbufs_held,
	.poll = true, /* views and the flush timer when no traffic comes */
	.meta_needs = IL_META_TAGS,
};
