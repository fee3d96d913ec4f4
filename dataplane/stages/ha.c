/* SPDX-License-Identifier: BSD-3-Clause
 * ha: one appliance of an active/standby pair (docs/ha.md). First after
 * classify on both chains. Its role comes from interlink-control (IL_CM_ROLE,
 * through the control stage), never from itself:
 *
 *  - STANDBY: consumes every frame on both ports, forwards and sends
 *    nothing (the pipeline is muted). From "out" it keeps a shadow history
 *    of the other appliance's stamped DATA (references to the frames, from
 *    the last watermark it saw on), and notes when it last saw a frame
 *    stamped by another appliance, and in which epoch; from "in" when it
 *    last heard a host. The control process reads both in IL_CM_ALIVE.
 *  - ACTIVE: passes everything while its authority lasts (renewed by the
 *    control process every few ms; a data plane whose control process
 *    stalls or dies falls silent on its own), answers ARP for its
 *    addresses and claims them with gratuitous ARP at takeover, and stops
 *    at once when a frame of a newer epoch shows on "out" (superseded).
 *    Frames other appliances made (DATA, STABLE, VIEW, CREDIT, UNAVAIL)
 *    seen on "out" are never forwarded to "in": two bumps in the wire
 *    would loop them.
 */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>

#include <interlink/err.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "ctrl.h"
#include "ha.h"

static const char *const ha_counter_names[HA_C_COUNT] = {
	[HA_C_STANDBY_IN] = "standby_in",
	[HA_C_STANDBY_OUT] = "standby_out",
	[HA_C_SHADOW_FRAMES] = "shadow_frames",
	[HA_C_SHADOW_EVICTED] = "shadow_evicted",
	[HA_C_SHADOW_DUP] = "shadow_dup",
	[HA_C_SHADOW_GAPS] = "shadow_gaps",
	[HA_C_DROP_NO_AUTHORITY] = "drop_no_authority",
	[HA_C_DROP_SUPERSEDED] = "drop_superseded",
	[HA_C_DROP_QUIESCE] = "drop_quiesce",
	[HA_C_OUT_FOREIGN] = "out_foreign",
	[HA_C_OUT_STALE] = "out_stale",
	[HA_C_SUPERSEDED] = "superseded",
	[HA_C_ROLES] = "roles",
	[HA_C_ROLE_REFUSED] = "role_refused",
	[HA_C_ARP_REPLIES] = "arp_replies",
	[HA_C_GARPS] = "garps",
	[HA_C_TX_MUTED] = "tx_muted",
};

extern const struct il_stage_type il_stage_ha;

static inline uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A CLOCK_MONOTONIC deadline as a TSC one (the fast path compares TSCs). */
static uint64_t tsc_of(const struct il_ha *ha, uint64_t until_ns)
{
	uint64_t now_ns = mono_ns(), now = rte_rdtsc();

	if (until_ns <= now_ns)
		return now;
	return now + (uint64_t)((double)(until_ns - now_ns) * (double)ha->hz / 1e9);
}

/* A TSC instant as CLOCK_MONOTONIC (0 stays 0: never). */
static uint64_t ns_of(const struct il_ha *ha, uint64_t tsc, uint64_t now_tsc, uint64_t now_ns)
{
	if (tsc == 0)
		return 0;
	uint64_t ago = now_tsc > tsc ? (uint64_t)((double)(now_tsc - tsc) * 1e9 / (double)ha->hz)
				     : 0;
	return now_ns > ago ? now_ns - ago : 1;
}

struct il_ha *il_ha_find(struct il_app *app)
{
	for (unsigned i = 0; i < app->n_stages; i++)
		if (app->stages[i]->type == &il_stage_ha)
			return app->stages[i]->ctx;
	return NULL;
}

static void up(struct il_ha *ha, struct il_cmsg *m)
{
	if (ha->ctrl != NULL && il_chan_send_burst(ha->ctrl->ch, m, 1) != 1)
		ha->ctrl_st->ctr[CT_C_DROP_CHAN_FULL]++;
}

/* ---- the shadow ------------------------------------------------------ */

static void shadow_clear(struct il_ha *ha)
{
	for (unsigned gi = 0; gi < ha->app->n_groups; gi++) {
		struct il_ha_shadow *s = &ha->sh[gi];

		for (uint32_t i = 0; i < s->n; i++)
			rte_pktmbuf_free(s->ring[(s->head - s->n + i) & ha->mask].m);
		s->n = s->head = 0;
		s->end = s->stable = 0;
	}
	ha->shadow_epoch = 0;
}

/* Frames wholly below the watermark are held by every receiver: let go. */
static void shadow_stable(struct il_ha *ha, unsigned gi, uint64_t w)
{
	struct il_ha_shadow *s = &ha->sh[gi];

	if (w <= s->stable)
		return;
	s->stable = w;
	while (s->n > 0) {
		struct il_ha_ent *e = &s->ring[(s->head - s->n) & ha->mask];

		if (e->first + e->count > w)
			break;
		if (ha->n_victims == IL_BURST_CAP) {
			rte_pktmbuf_free_bulk(ha->victims, ha->n_victims);
			ha->n_victims = 0;
		}
		ha->victims[ha->n_victims++] = e->m;
		s->n--;
	}
}

/* A stamped DATA frame of epoch e seen on "out". The shadow holds one
 * epoch: a newer one starts it afresh, an older one is not kept. */
static void shadow_add(struct il_ha *ha, unsigned gi, struct rte_mbuf *m, uint32_t e,
		       uint64_t first, uint32_t count)
{
	struct il_stage *st = ha->st;
	struct il_ha_shadow *s;

	if (e != ha->shadow_epoch) {
		if (ha->shadow_epoch != 0 && !il_epoch_after(e, ha->shadow_epoch))
			return;
		shadow_clear(ha);
		ha->shadow_epoch = e;
	}
	s = &ha->sh[gi];
	if (first + count <= s->stable)
		return; /* stable already */
	if (first < s->end) {
		st->ctr[HA_C_SHADOW_DUP]++;
		return;
	}
	if (s->end != 0 && first > s->end)
		st->ctr[HA_C_SHADOW_GAPS]++;
	struct il_ha_ent *slot = &s->ring[s->head & ha->mask];
	if (s->n == ha->depth) {
		if (ha->n_victims == IL_BURST_CAP) {
			rte_pktmbuf_free_bulk(ha->victims, ha->n_victims);
			ha->n_victims = 0;
		}
		ha->victims[ha->n_victims++] = slot->m;
		st->ctr[HA_C_SHADOW_EVICTED]++;
	} else {
		s->n++;
	}
	rte_mbuf_refcnt_update(m, 1);
	slot->m = m;
	slot->first = first;
	slot->count = count;
	s->head++;
	s->end = first + count;
	st->ctr[HA_C_SHADOW_FRAMES]++;
}

/* What group gi's shadow holds without a gap, from its oldest frame. */
static void shadow_run(const struct il_ha *ha, unsigned gi, uint64_t *lo, uint64_t *hi)
{
	const struct il_ha_shadow *s = &ha->sh[gi];

	if (s->n == 0) {
		*lo = *hi = s->stable > s->end ? s->stable : s->end;
		return;
	}
	const struct il_ha_ent *e = il_ha_shadow_at(ha, gi, 0);
	*lo = e->first;
	*hi = e->first + e->count;
	for (uint32_t i = 1; i < s->n; i++) {
		e = il_ha_shadow_at(ha, gi, i);
		if (e->first != *hi)
			break;
		*hi = e->first + e->count;
	}
}

/* ---- ARP --------------------------------------------------------------- */

#define ARP_FRAME 60 /* the minimum Ethernet frame, padded */

static bool our_addr(const struct il_ha *ha, uint32_t a)
{
	for (unsigned i = 0; i < ha->n_addr; i++)
		if (ha->addr[i] == a)
			return true;
	return false;
}

/* An ARP request or reply for port p: oper 1 (request) or 2 (reply). */
static void arp_send(struct il_ha *ha, uint16_t p, uint16_t oper, uint32_t spa, const uint8_t *tha,
		     uint32_t tpa, const uint8_t *dst)
{
	uint8_t *f;
	struct rte_mbuf *m = il_app_frame_alloc(ha->app, ARP_FRAME, &f);

	if (m == NULL)
		return;
	memset(f, 0, ARP_FRAME);
	memcpy(f, dst, 6);
	memcpy(f + 6, ha->app->ports[p].mac, 6);
	il_put16(f + 12, 0x0806);
	il_put16(f + 14, 1);      /* Ethernet */
	il_put16(f + 16, 0x0800); /* IPv4 */
	f[18] = 6;
	f[19] = 4;
	il_put16(f + 20, oper);
	memcpy(f + 22, ha->app->ports[p].mac, 6);
	il_put32(f + 28, spa);
	memcpy(f + 32, tha, 6);
	il_put32(f + 38, tpa);
	il_emit(ha->st, p, m);
}

/* Gratuitous ARP: a request whose sender and target are the address, from
 * the port's MAC, on both ports, so switches and hosts move it to us. */
static void garp(struct il_ha *ha)
{
	static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff }, zero[6] = { 0 };

	for (unsigned i = 0; i < ha->n_addr; i++) {
		arp_send(ha, ha->in, 1, ha->addr[i], zero, ha->addr[i], bcast);
		arp_send(ha, ha->out, 1, ha->addr[i], zero, ha->addr[i], bcast);
		ha->st->ctr[HA_C_GARPS] += 2;
	}
}

/* An ARP request for one of our addresses: answered, and consumed. */
static bool arp_answer(struct il_ha *ha, struct rte_mbuf *m, uint16_t p)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);

	if (ha->n_addr == 0 || m->data_len < 42 || il_get16(f + 12) != 0x0806 ||
	    il_get16(f + 20) != 1 || f[18] != 6 || f[19] != 4)
		return false;
	uint32_t tpa = il_get32(f + 38), spa = il_get32(f + 28);
	if (!our_addr(ha, tpa) || spa == tpa)
		return false; /* not ours, or someone's gratuitous one */
	arp_send(ha, p, 2, tpa, f + 22, spa, f + 22);
	ha->st->ctr[HA_C_ARP_REPLIES]++;
	return true;
}

/* ---- the stage --------------------------------------------------------- */

/* A frame only an appliance makes, seen on "out": its epoch (true), or
 * false for anything else. */
static bool appliance_frame(struct rte_mbuf *m, uint32_t *epoch, const uint8_t **hp)
{
	const struct il_meta *mt = il_meta(m);

	if (mt->kind != IL_K_DATA && mt->kind != IL_K_CONTROL)
		return false;
	const uint8_t *h = rte_pktmbuf_mtod(m, const uint8_t *) + mt->il_off;
	uint8_t t = h[IL_OFF_TYPE];
	if (mt->kind == IL_K_CONTROL && t != IL_T_STABLE && t != IL_T_VIEW && t != IL_T_CREDIT &&
	    t != IL_T_UNAVAIL)
		return false;
	if (mt->kind == IL_K_DATA && !(h[IL_OFF_FLAGS] & IL_F_STAMPED))
		return false;
	*epoch = il_get32(h + IL_OFF_EPOCH);
	*hp = h;
	return true;
}

static void sighting(struct il_ha *ha, uint32_t e, uint64_t now)
{
	if (ha->peer_epoch == 0 || !il_epoch_after(ha->peer_epoch, e)) {
		ha->peer_epoch = e;
		ha->last_peer_tsc = now;
	}
}

static uint16_t standby(struct il_ha *ha, struct rte_mbuf **pkts, uint16_t n, bool from_out,
			uint64_t now)
{
	struct il_stage *st = ha->st;

	if (!from_out) {
		for (uint16_t i = 0; i < n; i++)
			if (il_meta(pkts[i])->kind != IL_K_NONE) {
				ha->last_host_tsc = now;
				break;
			}
		st->ctr[HA_C_STANDBY_IN] += n;
		rte_pktmbuf_free_bulk(pkts, n);
		return 0;
	}
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		const uint8_t *h;
		uint32_t e;

		if (!appliance_frame(m, &e, &h))
			continue;
		uint16_t gix = ha->app->group_idx_by_id[il_get16(h + IL_OFF_GROUP_ID)];
		if (gix == 0)
			continue;
		sighting(ha, e, now);
		uint8_t t = h[IL_OFF_TYPE], fl = h[IL_OFF_FLAGS];
		if (t == IL_T_DATA) {
			shadow_add(ha, gix - 1u, m, e, il_get64(h + IL_OFF_GLOBAL_SEQ),
				   il_get16(h + IL_OFF_MSG_COUNT));
		}
		/* The watermark, on DATA or STABLE of the shadow's epoch (a final
		 * watermark, global_seq 0, names an older one). */
		if ((t == IL_T_DATA || (t == IL_T_STABLE && il_get64(h + IL_OFF_GLOBAL_SEQ) != 0)) &&
		    (fl & IL_F_STABLE_VALID) && e == ha->shadow_epoch)
			shadow_stable(ha, gix - 1u, il_get64(h + IL_OFF_STABLE_SEQ));
	}
	st->ctr[HA_C_STANDBY_OUT] += n;
	rte_pktmbuf_free_bulk(pkts, n);
	if (ha->n_victims) {
		rte_pktmbuf_free_bulk(ha->victims, ha->n_victims);
		ha->n_victims = 0;
	}
	return 0;
}

static void superseded(struct il_ha *ha, uint32_t e)
{
	struct il_cmsg m = { .type = IL_CM_SUPERSEDED, .len = sizeof(m.u.superseded) };

	ha->superseded = true;
	ha->seen_epoch = e;
	ha->st->ctr[HA_C_SUPERSEDED]++;
	if (ha->told_superseded)
		return;
	ha->told_superseded = true;
	m.u.superseded = (struct il_cm_superseded){ .own_epoch = ha->epoch, .epoch_seen = e };
	up(ha, &m);
}

static uint16_t ha_process(struct il_stage *st, struct rte_mbuf **pkts, uint16_t n)
{
	struct il_ha *ha = st->ctx;
	uint64_t now = rte_rdtsc();
	bool live = ha->role == IL_HA_ACTIVE && !ha->superseded && now < ha->auth_tsc;
	uint16_t out = 0;

	/* The pipeline sends nothing (not even what later stages emit) unless
	 * this appliance is the active one with authority. */
	ha->app->tx_mute = !live;
	st->ctr[HA_C_TX_MUTED] = st->io->tx_muted;
	if (n == 0) {
		if (live && ha->garp_next < ha->garps && now >= ha->garp_at[ha->garp_next]) {
			ha->garp_next++;
			garp(ha);
		} else if (!live && ha->idle_us) {
			/* Nothing to forward, no deadline: the frames wait in the
			 * port's ring meanwhile (it holds far more than a sleep's). */
			usleep(ha->idle_us);
		}
		return 0;
	}
	ha->last_pkt_tsc = now;
	bool from_out = pkts[0]->port == ha->out_pid;
	if (ha->role != IL_HA_ACTIVE)
		return standby(ha, pkts, n, from_out, now);
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		const uint8_t *h;
		uint32_t e;

		if (from_out && appliance_frame(m, &e, &h)) {
			/* Another appliance's frame: never forwarded. A newer
			 * epoch means someone took over: stop now. */
			if (il_epoch_after(e, ha->epoch)) {
				if (!ha->superseded)
					superseded(ha, e);
				live = false;
				ha->app->tx_mute = true;
			}
			il_drop(st, e == ha->epoch ? HA_C_OUT_FOREIGN : HA_C_OUT_STALE, m);
			continue;
		}
		uint8_t k = il_meta(m)->kind;
		if (!live) {
			/* Nothing is stamped, and nothing leaves (the pipeline is
			 * muted); members' control frames still go up, so that
			 * reports and ACKs are not lost to a lapse of a few ms. */
			if (k == IL_K_DATA || k == IL_K_RAW || k == IL_K_NONE) {
				il_drop(st, ha->superseded ? HA_C_DROP_SUPERSEDED
							   : HA_C_DROP_NO_AUTHORITY, m);
				continue;
			}
			pkts[out++] = m;
			continue;
		}
		if (!from_out && ha->quiescing && (k == IL_K_DATA || k == IL_K_RAW)) {
			il_drop(st, HA_C_DROP_QUIESCE, m);
			continue;
		}
		if (k == IL_K_NONE && arp_answer(ha, m, from_out ? ha->out : ha->in)) {
			rte_pktmbuf_free(m);
			continue;
		}
		pkts[out++] = m;
	}
	return out;
}

/* ---- from the control process ------------------------------------------ */

void ctrl_epoch_restart(struct il_stage *st, struct ctrl *c);
void ctrl_epoch_idle(struct ctrl *c);

static void role_active(struct il_ha *ha, const struct il_cm_role *r)
{
	struct il_stage *st = ha->st;

	if (ha->role == IL_HA_ACTIVE && r->epoch == ha->epoch) {
		ha->auth_tsc = tsc_of(ha, r->authority_until_ns);
		return; /* a repeat */
	}
	if (ha->max_owned != 0 && !il_epoch_after(r->epoch, ha->max_owned)) {
		/* It stamped that epoch (or a later one) already: stamping it
		 * again from 1 would give two messages one position (I3). */
		st->ctr[HA_C_ROLE_REFUSED]++;
		return;
	}
	ha->max_owned = r->epoch;
	if (ha->shadow_epoch != r->prev_epoch)
		shadow_clear(ha);
	ha->role = IL_HA_ACTIVE;
	ha->epoch = r->epoch;
	ha->prev = r->prev_epoch;
	ha->superseded = ha->told_superseded = false;
	ha->seen_epoch = 0;
	ha->quiescing = false;
	ha->auth_tsc = tsc_of(ha, r->authority_until_ns);
	il_seq_restart(ha->seq, r->epoch);
	/* Live from now on: the announcement below goes out with this very
	 * iteration, not with the next stable tick. */
	ha->app->tx_mute = !(rte_rdtsc() < ha->auth_tsc);
	ctrl_epoch_restart(ha->ctrl_st, ha->ctrl);
	ha->app->epoch = r->epoch;
	ha->app->ha_role = IL_HA_ACTIVE;
	/* What the shadow holds of the epoch being cut, per group. */
	for (unsigned gi = 0; gi < ha->app->n_groups; gi++) {
		struct il_cmsg m = { .type = IL_CM_SHADOW, .len = sizeof(m.u.shadow),
				     .group = ha->app->groups[gi].id };
		uint64_t lo, hi;

		shadow_run(ha, gi, &lo, &hi);
		m.u.shadow = (struct il_cm_shadow){ .epoch = ha->shadow_epoch, .lo = lo, .hi = hi,
						    .frames = ha->sh[gi].n,
						    .stable = ha->sh[gi].stable };
		up(ha, &m);
	}
	uint64_t now = rte_rdtsc();
	static const unsigned after_ms[IL_HA_GARPS] = { 0, 20, 200 };
	for (unsigned i = 0; i < IL_HA_GARPS; i++)
		ha->garp_at[i] = now + ha->hz / 1000 * after_ms[i];
	ha->garp_next = 0;
}

void il_ha_down(struct il_ha *ha, const struct il_cmsg *m)
{
	switch (m->type) {
	case IL_CM_ROLE:
		ha->st->ctr[HA_C_ROLES]++;
		if (m->u.role.role == IL_HA_ACTIVE) {
			role_active(ha, &m->u.role);
			break;
		}
		if (ha->role == IL_HA_STANDBY)
			break;
		ha->role = IL_HA_STANDBY;
		ha->superseded = ha->quiescing = false;
		ha->auth_tsc = 0;
		ha->garp_next = IL_HA_GARPS;
		ha->last_peer_tsc = 0;
		ha->peer_epoch = 0;
		shadow_clear(ha);
		ctrl_epoch_idle(ha->ctrl);
		ha->app->epoch = 0;
		ha->app->ha_role = IL_HA_STANDBY;
		break;
	case IL_CM_AUTHORITY:
		if (ha->role == IL_HA_ACTIVE && m->u.auth.epoch == ha->epoch)
			ha->auth_tsc = tsc_of(ha, m->u.auth.until_ns);
		break;
	case IL_CM_QUIESCE:
		if (ha->role != IL_HA_ACTIVE || m->u.quiesce.epoch != ha->epoch)
			break;
		ha->quiescing = m->u.quiesce.on != 0;
		if (!ha->quiescing)
			break;
		/* Nothing at or above `next` will be stamped in this epoch. */
		for (unsigned gi = 0; gi < ha->app->n_groups; gi++) {
			struct il_cmsg q = { .type = IL_CM_QUIESCED, .len = sizeof(q.u.quiesced),
					     .group = ha->app->groups[gi].id };

			q.u.quiesced = (struct il_cm_quiesced){ .epoch = ha->epoch,
							       .next = ha->seq->groups[gi].next };
			up(ha, &q);
		}
		break;
	}
}

void il_ha_alive(const struct il_ha *ha, struct il_cm_alive *a)
{
	uint64_t now = rte_rdtsc(), now_ns = mono_ns();

	*a = (struct il_cm_alive){
		.last_peer_frame_ns = ns_of(ha, ha->last_peer_tsc, now, now_ns),
		.last_host_in_ns = ns_of(ha, ha->last_host_tsc, now, now_ns),
		.tx_out = ha->st->io ? ha->st->io->tx_queued[ha->out] : 0,
		.peer_epoch = ha->peer_epoch,
		.epoch = ha->role == IL_HA_ACTIVE ? ha->epoch : 0,
		.ha = 1,
		.role = (uint8_t)ha->role,
		.ports_up = atomic_load(&ha->ports_up),
		.authority_ok = ha->role == IL_HA_ACTIVE && now < ha->auth_tsc,
		.superseded = ha->superseded,
		.quiescing = ha->quiescing,
		.sent_ns = now_ns,
	};
}

/* ---- link state (a helper thread: ioctl is a syscall) ------------------ */

/* The kernel interface under a net_af_packet port ("iface=NAME"), or NULL. */
static bool afp_iface(const char *dev, char *name, size_t len)
{
	const char *p = strstr(dev, "iface=");

	if (strncmp(dev, "net_af_packet", 13) != 0 || p == NULL)
		return false;
	p += 6;
	size_t n = strcspn(p, ",");
	if (n == 0 || n >= len)
		return false;
	memcpy(name, p, n);
	name[n] = '\0';
	return true;
}

static bool port_up(const struct il_port *p, int sfd)
{
	char ifn[IFNAMSIZ];

	if (afp_iface(p->device, ifn, sizeof(ifn))) {
		/* af_packet reports its link up whatever the interface says:
		 * ask the kernel (carrier, i.e. the cable or the veth's peer). */
		struct ifreq ifr;

		memset(&ifr, 0, sizeof(ifr));
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifn);
		if (sfd < 0 || ioctl(sfd, SIOCGIFFLAGS, &ifr) != 0)
			return true; /* cannot tell: do not resign over it */
		return (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
	}
	struct rte_eth_link link;
	if (rte_eth_link_get_nowait(p->port_id, &link) != 0)
		return true;
	return link.link_status == RTE_ETH_LINK_UP;
}

static void *helper_main(void *arg)
{
	struct il_ha *ha = arg;
	int sfd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	while (!atomic_load(&ha->stop)) {
		bool up = true;

		for (unsigned p = 0; p < ha->app->n_ports; p++)
			up = up && port_up(&ha->app->ports[p], sfd);
		atomic_store(&ha->ports_up, up);
		usleep(10000);
	}
	if (sfd >= 0)
		close(sfd);
	return NULL;
}

static int ha_create(struct il_stage *st, const struct il_cfg *p, struct il_app *app, char *err,
		     size_t errlen)
{
	static const char *const keys[] = {"type", "control", "in", "out", "shadow_history",
					   "addresses", "garps", "standby_idle_us", NULL};
	const char *ctl, *in, *out, *addrs[IL_HA_MAX_ADDRS];
	uint64_t depth, garps, idle;
	int n;

	if (il_cfg_check_keys(p, keys, err, errlen))
		return -1;
	struct il_ha *ha = rte_zmalloc("il_ha", sizeof(*ha), RTE_CACHE_LINE_SIZE);
	if (ha == NULL)
		return ERR("out of memory for stage '%s'", st->name);
	st->ctx = ha;
	ha->app = app;
	ha->st = st;
	ha->hz = rte_get_tsc_hz();
	ha->role = IL_HA_STANDBY;
	ha->garp_next = IL_HA_GARPS;
	atomic_init(&ha->stop, false);
	atomic_init(&ha->ports_up, true);
	if (il_cfg_str(p, "control", NULL, &ctl, err, errlen) ||
	    il_cfg_str(p, "in", "in", &in, err, errlen) ||
	    il_cfg_str(p, "out", "out", &out, err, errlen))
		return -1;
	if (ctl == NULL)
		return ERR("config: key '%s.control' is missing: name the control stage whose "
			   "channel brings this appliance its role", il_cfg_path(p));
	snprintf(ha->ctrl_name, sizeof(ha->ctrl_name), "%s", ctl);
	int pi = il_app_port_index(app, in), po = il_app_port_index(app, out);
	if (pi < 0)
		return ERR("config: key '%s.in': '%s' is not a configured port", il_cfg_path(p), in);
	if (po < 0 || po == pi)
		return ERR("config: key '%s.out': '%s' is not a configured port other than '%s'",
			   il_cfg_path(p), out, in);
	ha->in = (uint16_t)pi;
	ha->out = (uint16_t)po;
	if (il_cfg_u64(p, "shadow_history", 16384, 2, 1u << 24, &depth, err, errlen) ||
	    il_cfg_u64(p, "garps", IL_HA_GARPS, 0, IL_HA_GARPS, &garps, err, errlen) ||
	    il_cfg_u64(p, "standby_idle_us", 0, 0, 10000, &idle, err, errlen))
		return -1;
	if (depth & (depth - 1))
		return ERR("config: key '%s.shadow_history': %lu is not a power of two (frames "
			   "kept per group of the other appliance's epoch, e.g. 16384)",
			   il_cfg_path(p), depth);
	n = il_cfg_str_list(p, "addresses", addrs, IL_HA_MAX_ADDRS, err, errlen);
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		struct in_addr a;

		if (inet_pton(AF_INET, addrs[i], &a) != 1)
			return ERR("config: key '%s.addresses': '%s' is not an IPv4 address",
				   il_cfg_path(p), addrs[i]);
		ha->addr[ha->n_addr++] = ntohl(a.s_addr);
	}
	ha->garps = (unsigned)garps;
	ha->idle_us = (uint32_t)idle;
	ha->depth = (uint32_t)depth;
	ha->mask = (uint32_t)depth - 1;
	ha->sh = rte_zmalloc("il_ha_shadow", sizeof(*ha->sh) * app->n_groups, RTE_CACHE_LINE_SIZE);
	if (ha->sh == NULL)
		return ERR("out of memory for stage '%s'", st->name);
	for (unsigned gi = 0; gi < app->n_groups; gi++) {
		ha->sh[gi].ring = rte_zmalloc("il_ha_ring", sizeof(struct il_ha_ent) * depth,
					      RTE_CACHE_LINE_SIZE);
		if (ha->sh[gi].ring == NULL)
			return ERR("out of memory for %lu shadow slots of stage '%s'", depth,
				   st->name);
	}
	return 0;
}

static int ha_bind(struct il_stage *st, char *err, size_t errlen)
{
	struct il_ha *ha = st->ctx;
	extern const struct il_stage_type il_stage_control;
	struct il_stage *c = il_app_stage(ha->app, ha->ctrl_name);

	if (c == NULL || c->type != &il_stage_control)
		return ERR("config: key 'stages.%s.control': '%s' is not a control stage", st->name,
			   ha->ctrl_name);
	if (c->lcore != st->lcore)
		return ERR("config: stage '%s' (lcore %d) must run on the lcore of its control "
			   "stage '%s' (lcore %d)", st->name, st->lcore, c->name, c->lcore);
	ha->ctrl_st = c;
	ha->ctrl = c->ctx;
	ha->ctrl->ha = ha;
	struct il_stage *sq = il_app_stage(ha->app, ha->ctrl->seq_name);
	if (sq == NULL || sq->ctx == NULL)
		return ERR("stage '%s': the sequencer of control stage '%s' is missing", st->name,
			   c->name);
	ha->seq = sq->ctx;
	/* Epochs come from etcd through the control process (docs/ha.md): a
	 * standby stamps nothing, so it has none. */
	ha->seq->epoch = 0;
	ha->app->epoch = 0;
	ha->app->ha_role = IL_HA_STANDBY;
	ha->in_pid = ha->app->ports[ha->in].port_id;
	ha->out_pid = ha->app->ports[ha->out].port_id;
	ha->app->tx_mute = true;
	if (pthread_create(&ha->helper, NULL, helper_main, ha) != 0)
		return ERR("stage '%s': cannot start its link-state thread", st->name);
	ha->helper_ok = true;
	return 0;
}

static void ha_destroy(struct il_stage *st)
{
	struct il_ha *ha = st->ctx;

	if (ha == NULL)
		return;
	atomic_store(&ha->stop, true);
	if (ha->helper_ok)
		pthread_join(ha->helper, NULL);
	if (ha->sh != NULL) {
		shadow_clear(ha);
		for (unsigned gi = 0; gi < ha->app->n_groups; gi++)
			rte_free(ha->sh[gi].ring);
	}
	if (ha->n_victims)
		rte_pktmbuf_free_bulk(ha->victims, ha->n_victims);
	rte_free(ha->sh);
	rte_free(ha);
	st->ctx = NULL;
}

static void ha_state(const struct il_stage *st, struct il_state_sink *out)
{
	const struct il_ha *ha = st->ctx;
	uint64_t now = rte_rdtsc();

	il_state_put(out, -1, "role", ha->role);
	il_state_put(out, -1, "epoch", ha->role == IL_HA_ACTIVE ? ha->epoch : 0);
	il_state_put(out, -1, "prev_epoch", ha->role == IL_HA_ACTIVE ? ha->prev : 0);
	il_state_put(out, -1, "authority_left_us",
		     ha->role == IL_HA_ACTIVE && ha->auth_tsc > now
			     ? (ha->auth_tsc - now) * 1000000 / ha->hz : 0);
	il_state_put(out, -1, "superseded", ha->superseded);
	il_state_put(out, -1, "quiescing", ha->quiescing);
	il_state_put(out, -1, "peer_epoch", ha->peer_epoch);
	il_state_put(out, -1, "peer_frame_age_ms",
		     ha->last_peer_tsc ? (now - ha->last_peer_tsc) * 1000 / ha->hz : UINT64_MAX);
	il_state_put(out, -1, "ports_up", atomic_load(&ha->ports_up));
	il_state_put(out, -1, "shadow_epoch", ha->shadow_epoch);
	for (unsigned gi = 0; gi < ha->app->n_groups; gi++) {
		uint64_t lo, hi;

		shadow_run(ha, gi, &lo, &hi);
		il_state_put(out, (int)gi, "shadow_frames", ha->sh[gi].n);
		il_state_put(out, (int)gi, "shadow_lo", lo);
		il_state_put(out, (int)gi, "shadow_hi", hi);
	}
}

const struct il_stage_type il_stage_ha = {
	.name = "ha",
	.help = "one appliance of an active/standby pair: its role from interlink-control; "
		"standby: consume both ports, keep a shadow history; active: stamp while the "
		"authority lasts, ARP, yield to a newer epoch",
	.counter_names = ha_counter_names,
	.n_counters = HA_C_COUNT,
	.create = ha_create,
	.bind = ha_bind,
	.process = ha_process,
	.poll = true,
	.destroy = ha_destroy,
	.state = ha_state,
	.meta_needs = IL_META_TAGS,
};
