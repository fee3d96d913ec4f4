/* SPDX-License-Identifier: BSD-3-Clause
 * libinterlink's lateral error correction (Ricochet; docs/libinterlink.md,
 * "LEC", and docs/lec.md): one instance of the LEC core (lib/lec) per
 * endpoint, over every group that turned it on.
 *
 *   views      each VIEW's receivers become the group's LEC view; regions
 *              and bins are recomputed on every view change
 *   data       every stamped DATA frame we hold (as received, or a NAK
 *              retransmission) goes into the bins; full bins become
 *              repairs, unicast to the members drawn (their addresses:
 *              il_ep_lec_peer, or the member id read as an IPv4 address)
 *   repairs    from other members or the appliance go to the decoder; a
 *              frame it rebuilds is handled as if it had arrived, once
 *              the LEC call has returned (callbacks must not call back)
 *
 * The unit LEC protects is the DATA frame as stamped (lec_wire.h), so a
 * rebuilt frame goes through the same checks and window as any other,
 * and a message is never delivered twice: the receive window holds one
 * copy per global sequence whatever brought it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <interlink/lec.h>
#include <interlink/lec_wire.h>
#include <interlink/wire_msg.h>

#include "ep_priv.h"

#define EP_LEC_PEERS 4096u /* explicit addresses (a power of two, half used at most) */
#define EP_LEC_TICK_NS 10000000ull

/* A frame the decoder rebuilt, waiting for the LEC call to return. */
struct ep_rebuilt {
	struct ep_rebuilt *next;
	uint32_t len;
	uint8_t data[];
};

struct ep_peer {
	uint32_t id;
	uint32_t addr; /* network order; 0: free slot */
};

struct ep_lec {
	struct il_lec *l;      /* NULL while only peers are known */
	uint64_t tx_seq;       /* repairs we made */
	uint64_t tick_ns;
	uint64_t flush_due;    /* when the earliest short bin comes due */
	uint64_t view_fail;    /* views LEC refused (too big for its limits) */
	struct ep_rebuilt *head, **tail;
	bool draining;
	uint32_t npeer;
	struct ep_peer peer[EP_LEC_PEERS];
	uint8_t frame[EP_FRAME_MAX];
};

static struct ep_lec *lec_state(struct il_ep *ep)
{
	if (ep->lec == NULL) {
		ep->lec = calloc(1, sizeof(*ep->lec));
		if (ep->lec != NULL)
			ep->lec->tail = &ep->lec->head;
	}
	return ep->lec;
}

static uint32_t peer_slot(uint32_t id)
{
	return (uint32_t)((id * 0x9e3779b97f4a7c15ull) >> 40) & (EP_LEC_PEERS - 1);
}

/* The address repairs to member id go to (network order), 0 for none. */
static uint32_t peer_addr(const struct ep_lec *x, uint32_t id)
{
	for (uint32_t i = peer_slot(id);; i = (i + 1) & (EP_LEC_PEERS - 1)) {
		if (x->peer[i].addr == 0)
			break;
		if (x->peer[i].id == id)
			return x->peer[i].addr;
	}
	/* The library's default member id is the host's TX address. */
	if (id == 0 || id == UINT32_MAX || IN_MULTICAST(id) || (id >> 24) == 127)
		return 0;
	return htonl(id);
}

int il_ep_lec_peer(struct il_ep *ep, uint32_t member_id, const char *ipv4)
{
	struct in_addr a;
	struct ep_lec *x;

	if (ipv4 == NULL || inet_pton(AF_INET, ipv4, &a) != 1 || a.s_addr == 0 ||
	    IN_MULTICAST(ntohl(a.s_addr)))
		return -EINVAL;
	x = lec_state(ep);
	if (x == NULL)
		return -ENOMEM;
	for (uint32_t i = peer_slot(member_id);; i = (i + 1) & (EP_LEC_PEERS - 1)) {
		if (x->peer[i].addr != 0 && x->peer[i].id != member_id)
			continue;
		if (x->peer[i].addr == 0) {
			if (x->npeer == EP_LEC_PEERS / 2)
				return -ENOSPC;
			x->npeer++;
		}
		x->peer[i] = (struct ep_peer){ .id = member_id, .addr = a.s_addr };
		return 0;
	}
}

/* When the config asks for LEC's cost (measurements): the monotonic clock
 * (the vDSO, tens of nanoseconds; the thread CPU clock is a system call of
 * about a microsecond here, which costs more than much of what it times
 * and cools the caches). A LEC call never blocks, so its wall time is its
 * CPU time unless the thread was descheduled in it: a call longer than
 * EP_LEC_SLOW_NS is counted in lec_slow and left out of lec_ns. */
#define EP_LEC_SLOW_NS 200000ull

static uint64_t lec_clock(const struct il_ep *ep)
{
	struct timespec ts;

	if (!ep->cfg.lec_cpu_stats)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void lec_clock_add(struct il_ep *ep, uint64_t t0)
{
	uint64_t d;

	if (!ep->cfg.lec_cpu_stats)
		return;
	d = lec_clock(ep) - t0;
	if (d > EP_LEC_SLOW_NS)
		ep->st.lec_slow++;
	else
		ep->st.lec_ns += d;
}

/* ---- callbacks of the LEC core ----------------------------------------- */

static void lec_send(void *arg, const struct il_lec_repair *rep, const uint32_t *targets,
		     uint32_t n)
{
	struct il_ep *ep = arg;
	struct ep_lec *x = ep->lec;
	struct il_hdr_fields h = { .type = IL_T_LEC_REPAIR, .group_id = rep->ids[0].group,
				   .sender_id = ep->member_id, .sender_seq = ++x->tx_seq };
	const struct il_lec_fields f = { .count = (uint8_t)rep->count,
					 .rate_r = (uint8_t)ep->cfg.lec_r,
					 .origin = IL_LEC_ORIGIN_MEMBER, .len = rep->len,
					 .len_xor = rep->len_xor };
	uint8_t *b = il_lec_body_put(il_hdr_put(x->frame, &h), &f);
	size_t len = IL_LEC_REPAIR_LEN((size_t)rep->count, (size_t)rep->len);

	for (unsigned k = 0; k < rep->count; k++)
		b = il_lec_id_put(b, rep->ids[k].group, rep->ids[k].epoch, rep->ids[k].seq);
	/* the core keeps references to its store: the XOR of the frames in
	 * one pass, straight into the datagram */
	if (rep->payload != NULL)
		memcpy(b, rep->payload, rep->len);
	else
		il_lec_repair_xor(rep, b, 0);
	for (uint32_t i = 0; i < n; i++) {
		struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(ep->cfg.port),
					  .sin_addr.s_addr = peer_addr(x, targets[i]) };

		if (to.sin_addr.s_addr == 0) {
			ep->st.lec_tx_noaddr++;
			continue;
		}
		ep_send_to(ep, x->frame, len, &to);
		ep->st.lec_tx++;
	}
}

static void lec_recovered(void *arg, const struct il_lec_id *id, const uint8_t *payload,
			  uint32_t len, const struct il_lec_recovery *info)
{
	struct il_ep *ep = arg;
	struct ep_lec *x = ep->lec;
	struct ep_rebuilt *r;

	(void)info;
	/* What the ids promised: a stamped DATA frame of that group, epoch
	 * and sequence (a peer's repair is trusted no further than this). */
	if (len < IL_HDR_LEN || payload[IL_OFF_TYPE] != IL_T_DATA ||
	    !(payload[IL_OFF_FLAGS] & IL_F_STAMPED) ||
	    il_get16(payload + IL_OFF_GROUP_ID) != id->group ||
	    il_get32(payload + IL_OFF_EPOCH) != id->epoch ||
	    il_get64(payload + IL_OFF_GLOBAL_SEQ) != id->seq) {
		ep->st.lec_rebuilt_bad++;
		return;
	}
	r = malloc(sizeof(*r) + len);
	if (r == NULL)
		return; /* the NAK timer still covers it */
	r->next = NULL;
	r->len = len;
	memcpy(r->data, payload, len);
	*x->tail = r;
	x->tail = &r->next;
}

void ep_lec_rebuilt(struct il_ep *ep, uint64_t now)
{
	struct ep_lec *x = ep->lec;

	if (x == NULL || x->draining)
		return;
	x->draining = true;
	while (x->head != NULL) {
		struct ep_rebuilt *r = x->head;

		x->head = r->next;
		if (x->head == NULL)
			x->tail = &x->head;
		ep->rx_via = IL_EP_VIA_LEC;
		ep_rx_datagram(ep, r->data, r->len, now);
		ep->rx_via = 0;
		free(r);
	}
	x->draining = false;
}

/* ---- the instance ------------------------------------------------------- */

/* The longest DATA frame whose repairs of r ids fit a datagram of
 * max_frame bytes; 0 when not even a one-message frame would. */
static size_t lec_room(size_t max_frame, unsigned r)
{
	size_t over = IL_HDR_LEN + IL_LEC_BODY_LEN + (size_t)r * IL_LEC_ID_LEN;

	if (r > IL_LEC_MAX_R || max_frame < over + IL_HDR_LEN + IL_MSG_HDR_LEN + 1)
		return 0;
	return max_frame - over;
}

static int lec_create(struct il_ep *ep)
{
	const struct il_ep_config *c = &ep->cfg;
	struct ep_lec *x = lec_state(ep);
	struct il_lec_cfg lc;
	struct il_lec_ops ops = { .send = lec_send, .recovered = lec_recovered, .arg = ep };
	char err[256];

	if (x == NULL)
		return -ENOMEM;
	if (x->l != NULL)
		return 0;
	il_lec_cfg_defaults(&lc);
	lc.r = (uint8_t)(c->lec_r > 255 ? 0 : c->lec_r);
	lc.c = c->lec_c;
	lc.stagger = (uint8_t)(c->lec_stagger > 255 ? 0 : c->lec_stagger);
	lc.self_id = ep->member_id;
	if (c->lec_r < 2 || c->lec_r > IL_LEC_MAX_R || lec_room(ep->max_frame, c->lec_r) == 0)
		return -EINVAL;
	/* the longest frame whose repairs fit our datagrams */
	lc.max_len = (uint32_t)lec_room(ep->max_frame, c->lec_r);
	lc.max_groups = IL_EP_MAX_GROUPS;
	lc.max_group_size = EP_LEC_MAX_VIEW;
	lc.max_bins = 256; /* at most 2^8 - 1 sets of our 8 groups */
	lc.store_msgs = c->lec_store_msgs;
	lc.store_repairs = c->lec_store_repairs;
	lc.seed = (uint64_t)ep->member_id << 32 | ep->incarnation;
	x->l = il_lec_create(&lc, &ops, err, sizeof(err));
	return x->l ? 0 : -EINVAL;
}

void ep_lec_free(struct il_ep *ep)
{
	struct ep_lec *x = ep->lec;

	if (x == NULL)
		return;
	while (x->head != NULL) {
		struct ep_rebuilt *r = x->head;

		x->head = r->next;
		free(r);
	}
	il_lec_free(x->l);
	free(x);
	ep->lec = NULL;
}

/* The group's view, mode and c into the core; regions recomputed. */
static void lec_apply_group(struct il_ep *ep, struct ep_group *g)
{
	struct ep_lec *x = ep->lec;
	char err[256];

	if (x == NULL || x->l == NULL || !(g->roles & IL_EP_RECEIVER))
		return;
	if (g->lec_mode == IL_EP_LEC_OFF || !g->lec_view) {
		if (il_lec_group_remove(x->l, g->id) == 0)
			il_lec_apply(x->l, err, sizeof(err));
		return;
	}
	double c = (g->lec_mode & IL_EP_LEC_PEERS) ? g->lec_c : IL_LEC_DECODE_ONLY;

	if (il_lec_group_set(x->l, g->id, c, g->lec_members, g->lec_n, err, sizeof(err)) != 0 ||
	    il_lec_apply(x->l, err, sizeof(err)) != 0)
		x->view_fail++; /* LEC goes on with the regions it had */
}

void ep_lec_view(struct il_ep *ep, struct ep_group *g, const void *vb)
{
	const struct il_view_body *v = vb;

	/* Repairs go to the members that receive: a sender-only member
	 * holds none of the group's frames. */
	g->lec_n = 0;
	for (unsigned i = 0; i < v->n_members && g->lec_n < EP_LEC_MAX_VIEW; i++)
		if (il_view_member_roles(v, i) & IL_ROLE_RECEIVER)
			g->lec_members[g->lec_n++] = il_view_member_id(v, i);
	g->lec_view = true;
	lec_apply_group(ep, g);
}

void ep_lec_gone(struct il_ep *ep, struct ep_group *g)
{
	g->lec_view = false;
	lec_apply_group(ep, g);
}

int il_ep_lec(struct il_ep *ep, uint16_t group, unsigned mode, double c)
{
	struct ep_group *g = ep_group(ep, group);

	if (g == NULL)
		return -ENOENT;
	if (mode > IL_EP_LEC_BOTH || !(c <= IL_LEC_MAX_C))
		return -EINVAL;
	/* A sender-only member keeps its frames short enough for the
	 * receivers' repairs; only a receiver runs LEC. */
	if (mode != IL_EP_LEC_OFF && (g->roles & IL_EP_RECEIVER)) {
		int rc = lec_create(ep);

		if (rc)
			return rc;
	}
	g->lec_mode = (uint8_t)mode;
	g->lec_c = c > 0 ? c : ep->cfg.lec_c;
	lec_apply_group(ep, g);
	return 0;
}

/* ---- data and repairs --------------------------------------------------- */

void ep_lec_data(struct il_ep *ep, struct ep_group *g, const uint8_t *d, size_t len,
		 uint64_t now)
{
	struct ep_lec *x = ep->lec;

	if (x == NULL || x->l == NULL || len > UINT32_MAX)
		return;
	const struct il_lec_id id = { .seq = il_get64(d + IL_OFF_GLOBAL_SEQ),
				      .epoch = il_get32(d + IL_OFF_EPOCH), .group = g->id };
	uint64_t t0 = lec_clock(ep);

	il_lec_data(x->l, &id, d, (uint32_t)len, NULL, now);
	lec_clock_add(ep, t0);
}

void ep_lec_repair_rx(struct il_ep *ep, const uint8_t *d, const struct il_parsed *p,
		      uint64_t now)
{
	struct ep_lec *x = ep->lec;
	struct il_lec_body_view v;
	struct il_lec_id ids[IL_LEC_WIRE_MAX_IDS];

	ep->st.lec_rx++;
	if (il_lec_body_get(d + p->hdr_len, (uint32_t)(p->payload_len - p->hdr_len), &v) != 0) {
		ep->st.lec_rx_bad++;
		return;
	}
	if (x == NULL || x->l == NULL)
		return; /* no group of ours uses LEC */
	for (unsigned k = 0; k < v.f.count; k++)
		il_lec_id_at(&v, k, &ids[k].group, &ids[k].zero, &ids[k].epoch, &ids[k].seq);

	const struct il_lec_repair rep = { .ids = ids, .payload = v.payload, .count = v.f.count,
					   .len = v.f.len, .len_xor = v.f.len_xor };
	uint64_t t0 = lec_clock(ep);

	il_lec_repair(x->l, &rep, now);
	lec_clock_add(ep, t0);
	ep_lec_rebuilt(ep, now);
}

void ep_lec_tick(struct il_ep *ep, uint64_t now)
{
	struct ep_lec *x = ep->lec;

	if (x == NULL || x->l == NULL)
		return;
	bool tick = now - x->tick_ns >= EP_LEC_TICK_NS;
	if (!tick && now < x->flush_due)
		return;
	/* Bins still short of r frames after a quarter of the NAK delay
	 * fire short: the last frames of a stream (or of a quiet spell)
	 * get their repairs before the NAK timer would ask for them. Each
	 * within a sixteenth of that age of it: the next flush is when the
	 * earliest bin left comes due (a bin started later is seen at a tick,
	 * before its age). */
	const uint64_t age = (uint64_t)ep->cfg.lec_nak_delay_us * 1000u / 4;
	if (tick) {
		il_lec_tick(x->l, now);
		x->tick_ns = now;
	}
	il_lec_flush_aged(x->l, now, age);
	uint64_t due = il_lec_next_due(x->l);
	uint64_t soonest = now + (age >= 16 ? age / 16 : EP_LEC_TICK_NS);
	x->flush_due = due > soonest ? due : soonest;
}

size_t ep_frame_room(const struct il_ep *ep, const struct ep_group *g)
{
	size_t room = lec_room(ep->max_frame, ep->cfg.lec_r);

	return g->lec_mode == IL_EP_LEC_OFF || room == 0 ? ep->max_frame : room;
}

uint64_t ep_nak_delay_ns(const struct il_ep *ep, const struct ep_group *g)
{
	return (uint64_t)(g->lec_mode != IL_EP_LEC_OFF ? ep->cfg.lec_nak_delay_us
						       : ep->cfg.nak_delay_us) * 1000u;
}

uint64_t ep_nak_retry_ns(const struct il_ep *ep, const struct ep_group *g)
{
	return (uint64_t)(g->lec_mode != IL_EP_LEC_OFF ? ep->cfg.lec_nak_retry_us
						       : ep->cfg.nak_retry_us) * 1000u;
}

int il_ep_lec_stats(const struct il_ep *ep, struct il_ep_lec *o)
{
	const struct ep_lec *x = ep->lec;

	memset(o, 0, sizeof(*o));
	if (x == NULL || x->l == NULL)
		return 0;
	const struct il_lec_stats *s = il_lec_stats(x->l);

	o->data_new = s->data_new;
	o->data_dup = s->data_dup;
	o->data_unprotected = s->drop_data_foreign + s->drop_data_too_long +
			      s->drop_data_bad_id + s->data_stale;
	o->bin_adds = s->bin_adds;
	o->xor_ops = s->xor_ops;
	o->copy_ops = s->copy_ops;
	o->repairs_sent = s->repairs_sent;
	o->repair_targets = s->repair_targets;
	o->repairs_skipped = s->repairs_skipped;
	o->repairs_in = s->repairs_in;
	o->rep_recovered = s->repair_result[IL_LEC_REP_RECOVERED];
	o->rep_stored = s->repair_result[IL_LEC_REP_STORED];
	o->rep_useless = s->repair_result[IL_LEC_REP_USELESS];
	o->rep_stale = s->repair_result[IL_LEC_REP_STALE];
	o->rep_foreign = s->repair_result[IL_LEC_REP_FOREIGN];
	o->rep_bad = s->repair_result[IL_LEC_REP_BAD_COUNT] + s->repair_result[IL_LEC_REP_BAD_LEN] +
		     s->repair_result[IL_LEC_REP_BAD_ID];
	o->rep_inconsistent = s->repair_result[IL_LEC_REP_INCONSISTENT] + s->drop_inconsistent;
	o->recovered = s->recovered;
	o->recovered_immediate = s->recovered_how[IL_LEC_HOW_IMMEDIATE];
	o->recovered_cascade = s->recovered_how[IL_LEC_HOW_CASCADE];
	o->recovered_pair = s->recovered_how[IL_LEC_HOW_PAIR];
	o->recover_xor_ops = s->recover_xor_ops;
	o->evict_msgs = s->drop_msg_evict_count + s->drop_msg_evict_age;
	o->evict_repairs = s->drop_repair_evict_count + s->drop_repair_evict_age +
			   s->drop_repair_orphan + s->drop_repair_refs;
	o->unrecoverable = s->drop_unrecoverable;
	o->msgs_live = s->msgs_live;
	o->msgs_hwm = s->msgs_hwm;
	o->repairs_live = s->repairs_live;
	o->repairs_hwm = s->repairs_hwm;
	o->applies = s->applies;
	o->apply_fail = s->apply_fail + x->view_fail;
	o->regions = il_lec_region_count(x->l);
	o->bins = il_lec_bin_count(x->l);
	return 0;
}
