/* SPDX-License-Identifier: BSD-3-Clause
 * control: the data plane's end of the channel to interlink-control
 * (docs/control.md). Up: receivers' ACK, JOIN, LEAVE and HEARTBEAT frames
 * become channel messages (a full ring is a counted drop, never a wait).
 * Down: watermarks go to the sequencer (stamped on DATA as stable_seq,
 * and the history then frees only stable frames), views and credit
 * windows become VIEW and CREDIT frames multicast to the group. An idle
 * group gets a STABLE frame every stable_interval_us. After a control
 * restart this stage re-sends its state (HELLO, then per group RESYNC, a
 * JOIN and the last ACK of every member).
 *
 * Runs on the lcore of its sequencer (it reads the history, like nak).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_udp.h>

#include <interlink/chan.h>
#include <interlink/wire.h>

#include "seq.h"

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)
#define CTL_MAX_MEMBERS 64
#define CTL_MAX_SENDERS 64
#define DOWN_BURST 64

enum {
	CT_C_UP_ACK,
	CT_C_UP_JOIN,
	CT_C_UP_LEAVE,
	CT_C_UP_HEARTBEAT,
	CT_C_DROP_CHAN_FULL,
	CT_C_DROP_UNKNOWN_GROUP,
	CT_C_DROP_BAD_BODY,
	CT_C_DROP_STALE_EPOCH,
	CT_C_DOWN_MSGS,
	CT_C_WATERMARKS,
	CT_C_VIEWS,
	CT_C_CREDIT_WINDOWS,
	CT_C_TX_STABLE,
	CT_C_TX_VIEW,
	CT_C_TX_CREDIT,
	CT_C_DROP_TX_NO_MBUF,
	CT_C_MEMBER_TABLE_FULL,
	CT_C_SENDER_TABLE_FULL,
	CT_C_CONTROL_RESTARTS,
	CT_C_RESYNC_MSGS,
	CT_C_DOWN_BAD,
	CT_C_COUNT
};

static const char *const ct_counter_names[CT_C_COUNT] = {
	[CT_C_UP_ACK] = "up_ack",
	[CT_C_UP_JOIN] = "up_join",
	[CT_C_UP_LEAVE] = "up_leave",
	[CT_C_UP_HEARTBEAT] = "up_heartbeat",
	[CT_C_DROP_CHAN_FULL] = "drop_chan_full",
	[CT_C_DROP_UNKNOWN_GROUP] = "drop_unknown_group",
	[CT_C_DROP_BAD_BODY] = "drop_bad_body",
	[CT_C_DROP_STALE_EPOCH] = "drop_stale_epoch",
	[CT_C_DOWN_MSGS] = "down_msgs",
	[CT_C_WATERMARKS] = "watermarks",
	[CT_C_VIEWS] = "views",
	[CT_C_CREDIT_WINDOWS] = "credit_windows",
	[CT_C_TX_STABLE] = "tx_stable",
	[CT_C_TX_VIEW] = "tx_view",
	[CT_C_TX_CREDIT] = "tx_credit",
	[CT_C_DROP_TX_NO_MBUF] = "drop_tx_no_mbuf",
	[CT_C_MEMBER_TABLE_FULL] = "member_table_full",
	[CT_C_SENDER_TABLE_FULL] = "sender_table_full",
	[CT_C_CONTROL_RESTARTS] = "control_restarts",
	[CT_C_RESYNC_MSGS] = "resync_msgs",
	[CT_C_DOWN_BAD] = "down_bad",
};

struct cmember {
	uint32_t id, roles, incarnation, buffer_free;
	uint64_t cum; /* last cumulative ACK seen (exclusive) */
};

struct csender {
	uint32_t id;
	uint64_t stable_next; /* its sender_seq after its last stable message */
	uint64_t limit_sent;  /* limit of the last CREDIT frame */
};

struct cgroup {
	bool active;        /* has a view or a watermark: send STABLE */
	uint32_t view_id;
	uint64_t view_start;
	uint32_t window;    /* 0: no flow control */
	uint64_t wm;
	uint64_t walked;    /* credits: history walked up to this seq */
	uint64_t last_frames; /* seq group's stamped_frames at the last tick */
	uint16_t n_members, n_senders;
	struct cmember m[CTL_MAX_MEMBERS];
	struct csender s[CTL_MAX_SENDERS];
	/* The view being received (IL_CM_VIEW, then IL_CM_VIEW_MEMBERS). */
	bool pend;
	struct il_cm_view pv;
	uint16_t pend_got;
	struct { uint32_t id, roles; } pm[CTL_MAX_MEMBERS];
	/* Final watermark of a dead data-plane incarnation, repeated. */
	uint32_t final_epoch;
	uint64_t final_wm;
	unsigned final_left;
};

struct ctrl {
	char seq_name[IL_NAME_LEN];
	char chan_path[256];
	char sock_path[108];
	struct il_app *app;
	struct il_seq *seq;
	struct il_chan *ch;
	uint16_t tx;
	struct cgroup *g;
	uint64_t stable_tsc, drain_tsc, house_tsc;
	uint64_t next_stable, next_drain, next_house;
	uint64_t last_call, max_gap; /* longest pause between two calls (tsc) */
	bool hello_due, snapshot_due;
	/* Wake-fd fetching is a blocking syscall: a helper thread does it. */
	pthread_t helper;
	bool helper_ok;
	atomic_bool stop, need_fetch;
	atomic_int new_fd;
};

static void *helper_main(void *arg)
{
	struct ctrl *c = arg;
	char err[256];

	while (!atomic_load(&c->stop)) {
		if (atomic_load(&c->need_fetch)) {
			int fd = il_chan_wake_fetch(c->sock_path, NULL, err, sizeof(err));

			if (fd >= 0) {
				int old = atomic_exchange(&c->new_fd, fd);

				if (old >= 0)
					close(old);
				atomic_store(&c->need_fetch, false);
			}
		}
		usleep(20000);
	}
	return NULL;
}

static inline void mcast_mac(uint8_t *mac, uint32_t addr)
{
	mac[0] = 0x01;
	mac[1] = 0x00;
	mac[2] = 0x5e;
	mac[3] = (uint8_t)((addr >> 16) & 0x7f);
	mac[4] = (uint8_t)(addr >> 8);
	mac[5] = (uint8_t)addr;
}

/* A frame of the appliance's own to group gi's multicast address; returns
 * the Interlink header (body right after it) or NULL (counted). */
static uint8_t *frame_new(struct il_stage *st, struct ctrl *c, unsigned gi, uint8_t type,
			  uint16_t body, struct rte_mbuf **mp)
{
	const struct il_app *app = c->app;
	const struct il_group *grp = &app->groups[gi];
	const uint16_t len = 42 + IL_HDR_LEN + body;
	struct rte_mbuf *m = rte_pktmbuf_alloc(app->pool);
	uint8_t *f;

	if (unlikely(m == NULL || (f = (uint8_t *)rte_pktmbuf_append(m, len)) == NULL)) {
		rte_pktmbuf_free(m);
		st->ctr[CT_C_DROP_TX_NO_MBUF]++;
		return NULL;
	}
	memset(f, 0, len);
	mcast_mac(f, grp->address);
	memcpy(f + 6, app->ports[c->tx].mac, 6);
	f[12] = 0x08;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);
	ip->version_ihl = 0x45;
	ip->total_length = rte_cpu_to_be_16(len - 14);
	ip->time_to_live = 16;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = rte_cpu_to_be_32(app->appliance_ip);
	ip->dst_addr = rte_cpu_to_be_32(grp->address);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(f + 34);
	udp->src_port = rte_cpu_to_be_16(app->il_udp_port);
	udp->dst_port = rte_cpu_to_be_16(grp->out_port);
	udp->dgram_len = rte_cpu_to_be_16(len - 34);
	uint8_t *h = f + 42;
	h[IL_OFF_VERSION] = IL_VERSION;
	h[IL_OFF_TYPE] = type;
	h[IL_OFF_HDR_LEN] = IL_HDR_LEN;
	h[IL_OFF_FLAGS] = IL_F_STAMPED;
	il_put16(h + IL_OFF_GROUP_ID, grp->id);
	il_put32(h + IL_OFF_EPOCH, c->seq->epoch);
	il_put64(h + IL_OFF_GLOBAL_SEQ, c->seq->groups[gi].next);
	il_put64(h + IL_OFF_STABLE_SEQ, c->g[gi].wm);
	h[IL_OFF_FLAGS] |= IL_F_STABLE_VALID;
	m->l2_len = 14;
	m->l3_len = 20;
	*mp = m;
	return h;
}

static void frame_send(struct il_stage *st, struct ctrl *c, struct rte_mbuf *m)
{
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);

	ip->hdr_checksum = rte_ipv4_cksum(ip);
	((struct rte_udp_hdr *)(f + 34))->dgram_cksum =
		rte_ipv4_udptcp_cksum(ip, (struct rte_udp_hdr *)(f + 34));
	il_emit(st, c->tx, m);
}

static void send_stable(struct il_stage *st, struct ctrl *c, unsigned gi, uint32_t epoch,
			uint64_t wm)
{
	struct rte_mbuf *m;
	uint8_t *h = frame_new(st, c, gi, IL_T_STABLE, IL_STABLE_LEN, &m);

	if (h == NULL)
		return;
	il_put32(h + IL_OFF_EPOCH, epoch);
	il_put64(h + IL_OFF_STABLE_SEQ, wm);
	il_put32(h + IL_HDR_LEN, c->g[gi].view_id);
	if (epoch != c->seq->epoch)
		il_put64(h + IL_OFF_GLOBAL_SEQ, 0); /* that sequence space is gone */
	frame_send(st, c, m);
	st->ctr[CT_C_TX_STABLE]++;
}

static struct csender *sender_get(struct il_stage *st, struct cgroup *g, uint32_t id)
{
	for (unsigned i = 0; i < g->n_senders; i++)
		if (g->s[i].id == id)
			return &g->s[i];
	if (g->n_senders == CTL_MAX_SENDERS) {
		st->ctr[CT_C_SENDER_TABLE_FULL]++;
		return NULL;
	}
	struct csender *s = &g->s[g->n_senders++];
	*s = (struct csender){ .id = id, .stable_next = 1 };
	return s;
}

static void send_credit(struct il_stage *st, struct ctrl *c, unsigned gi, struct csender *s)
{
	struct cgroup *g = &c->g[gi];
	struct rte_mbuf *m;
	uint64_t limit = s->stable_next + g->window;
	uint8_t *h = frame_new(st, c, gi, IL_T_CREDIT, IL_CREDIT_LEN, &m);

	if (h == NULL)
		return;
	il_put32(h + IL_OFF_SENDER_ID, s->id);
	il_put64(h + IL_HDR_LEN, limit);
	il_put32(h + IL_HDR_LEN + 8, g->window);
	frame_send(st, c, m);
	s->limit_sent = limit;
	st->ctr[CT_C_TX_CREDIT]++;
}

/* The watermark moved: every frame newly below it is stable, so its
 * sender's window slides. Each history frame is walked once. */
static void credits_advance(struct il_stage *st, struct ctrl *c, unsigned gi)
{
	struct cgroup *g = &c->g[gi];
	const struct il_seq *s = c->seq;
	const struct il_seq_group *sg = &s->groups[gi];
	uint32_t idx = il_seq_hist_find(s, gi, g->walked);

	for (; idx < sg->n; idx++) {
		const struct il_hist_ent *e = il_seq_hist_at(s, gi, idx);

		if (e->first + e->count > g->wm)
			break;
		g->walked = e->first + e->count;
		struct csender *cs = sender_get(st, g, e->sender);
		if (cs != NULL && e->sender_seq + e->count > cs->stable_next)
			cs->stable_next = e->sender_seq + e->count;
	}
	if (g->window == 0)
		return;
	/* A grant every window/8 messages, not every message: the sender
	 * blocked at its limit always gets one, since then all its window
	 * has become stable. */
	uint64_t step = g->window >= 8 ? g->window / 8 : 1;
	bool first = true;
	for (unsigned i = 0; i < g->n_senders; i++)
		if (g->s[i].stable_next + g->window >= g->s[i].limit_sent + step) {
			/* The watermark behind a grant goes first, so a sender
			 * never holds a grant for messages it cannot yet know
			 * are stable (its own count of unstable ones stays
			 * within the window). */
			if (first && c->seq->groups[gi].carried < g->wm)
				send_stable(st, c, gi, c->seq->epoch, g->wm);
			first = false;
			send_credit(st, c, gi, &g->s[i]);
		}
}

/* Each sender's next sender_seq at global sequence `start`: the first of
 * its frames at or after start, else one past its last frame before it.
 * The history holds every frame above the watermark (UTO), and start is
 * at or above it. */
static uint64_t sender_next_at(const struct ctrl *c, unsigned gi, uint32_t sender,
			       uint64_t start, uint64_t fallback)
{
	const struct il_seq *s = c->seq;
	const struct il_seq_group *sg = &s->groups[gi];
	uint64_t next = fallback;

	for (uint32_t idx = il_seq_hist_find(s, gi, c->g[gi].wm); idx < sg->n; idx++) {
		const struct il_hist_ent *e = il_seq_hist_at(s, gi, idx);

		if (e->sender != sender)
			continue;
		if (e->first >= start)
			return e->sender_seq;
		next = e->sender_seq + e->count;
	}
	return next;
}

static void view_install(struct il_stage *st, struct ctrl *c, unsigned gi)
{
	struct cgroup *g = &c->g[gi];
	struct cmember old[CTL_MAX_MEMBERS];
	uint16_t n_old = g->n_members, n = g->pv.n_members;

	memcpy(old, g->m, sizeof(old[0]) * n_old);
	g->n_members = 0;
	for (uint16_t i = 0; i < n && i < CTL_MAX_MEMBERS; i++) {
		struct cmember *m = &g->m[g->n_members++];

		*m = (struct cmember){ .id = g->pm[i].id, .roles = g->pm[i].roles,
				       .buffer_free = UINT32_MAX };
		for (uint16_t k = 0; k < n_old; k++)
			if (old[k].id == m->id) {
				m->cum = old[k].cum;
				m->incarnation = old[k].incarnation;
				m->buffer_free = old[k].buffer_free;
			}
		if (m->roles & IL_ROLE_SENDER)
			sender_get(st, g, m->id);
	}
	g->active = true;
	g->view_id = g->pv.view_id;
	g->window = g->pv.window;
	g->view_start = g->pv.start_seq ? g->pv.start_seq : c->seq->groups[gi].next;
	if (g->pv.epoch == c->seq->epoch && g->view_start < g->wm)
		g->view_start = g->wm;
	st->ctr[CT_C_VIEWS]++;

	/* The VIEW frame: members, then each sender's next sender_seq at the
	 * view's start, as far as one frame holds them. */
	uint16_t room = (uint16_t)((c->app->frame_max - 42 - IL_HDR_LEN - IL_VIEW_LEN));
	uint16_t nm = g->n_members, ns = g->n_senders;
	if ((uint32_t)nm * IL_VIEW_MEMBER_LEN > room)
		nm = room / IL_VIEW_MEMBER_LEN;
	if ((uint32_t)nm * IL_VIEW_MEMBER_LEN + (uint32_t)ns * IL_VIEW_SENDER_LEN > room)
		ns = (uint16_t)((room - nm * IL_VIEW_MEMBER_LEN) / IL_VIEW_SENDER_LEN);
	struct rte_mbuf *mb;
	uint16_t body = (uint16_t)(IL_VIEW_LEN + nm * IL_VIEW_MEMBER_LEN + ns * IL_VIEW_SENDER_LEN);
	uint8_t *h = frame_new(st, c, gi, IL_T_VIEW, body, &mb);
	if (h == NULL)
		return;
	il_put64(h + IL_OFF_GLOBAL_SEQ, g->view_start);
	uint8_t *b = h + IL_HDR_LEN;
	il_put32(b, g->view_id);
	il_put16(b + 4, nm);
	il_put16(b + 6, ns);
	b += IL_VIEW_LEN;
	for (uint16_t i = 0; i < nm; i++, b += IL_VIEW_MEMBER_LEN) {
		il_put32(b, g->m[i].id);
		il_put32(b + 4, g->m[i].roles);
	}
	for (uint16_t i = 0; i < ns; i++, b += IL_VIEW_SENDER_LEN) {
		il_put32(b, g->s[i].id);
		il_put64(b + 8, sender_next_at(c, gi, g->s[i].id, g->view_start,
					       g->s[i].stable_next));
	}
	frame_send(st, c, mb);
	st->ctr[CT_C_TX_VIEW]++;
	if (g->window)
		for (unsigned i = 0; i < g->n_senders; i++)
			send_credit(st, c, gi, &g->s[i]);
}

static void apply_down(struct il_stage *st, struct ctrl *c, const struct il_cmsg *m)
{
	uint16_t gix = c->app->group_idx_by_id[m->group];
	struct cgroup *g;
	unsigned gi;

	st->ctr[CT_C_DOWN_MSGS]++;
	if (m->type == IL_CM_HELLO)
		return; /* the control process is there; restarts are seen in the header */
	if (gix == 0) {
		st->ctr[CT_C_DOWN_BAD]++;
		return;
	}
	gi = gix - 1u;
	g = &c->g[gi];
	switch (m->type) {
	case IL_CM_WATERMARK:
		if (m->u.wm.epoch != c->seq->epoch) {
			/* The final watermark of a data-plane incarnation that
			 * died: its receivers U-deliver up to it and drop the
			 * rest, which senders re-send in this epoch. */
			g->final_epoch = m->u.wm.epoch;
			g->final_wm = m->u.wm.stable_seq;
			g->final_left = 3;
			send_stable(st, c, gi, g->final_epoch, g->final_wm);
			return;
		}
		st->ctr[CT_C_WATERMARKS]++;
		g->active = true;
		if (m->u.wm.stable_seq <= g->wm)
			return; /* max(current, received) within an epoch */
		g->wm = m->u.wm.stable_seq;
		c->seq->groups[gi].stable = g->wm;
		uint64_t before = st->ctr[CT_C_TX_STABLE];
		credits_advance(st, c, gi);
		/* Idle: no DATA will carry it soon, so a STABLE does now. */
		if (c->seq->groups[gi].stamped_frames == g->last_frames &&
		    st->ctr[CT_C_TX_STABLE] == before)
			send_stable(st, c, gi, c->seq->epoch, g->wm);
		break;
	case IL_CM_VIEW:
		g->pv = m->u.view;
		g->pend = true;
		g->pend_got = 0;
		if (g->pv.n_members > CTL_MAX_MEMBERS) {
			st->ctr[CT_C_MEMBER_TABLE_FULL]++;
			g->pv.n_members = CTL_MAX_MEMBERS;
		}
		if (g->pv.n_members == 0) {
			g->pend = false;
			view_install(st, c, gi);
		}
		break;
	case IL_CM_VIEW_MEMBERS:
		if (!g->pend || m->u.vm.view_id != g->pv.view_id ||
		    m->u.vm.index != g->pend_got || m->u.vm.count > IL_CM_VIEW_CHUNK) {
			st->ctr[CT_C_DOWN_BAD]++;
			return;
		}
		for (uint16_t i = 0; i < m->u.vm.count && g->pend_got < g->pv.n_members; i++) {
			g->pm[g->pend_got].id = m->u.vm.m[i].id;
			g->pm[g->pend_got++].roles = m->u.vm.m[i].roles;
		}
		if (g->pend_got == g->pv.n_members) {
			g->pend = false;
			view_install(st, c, gi);
		}
		break;
	case IL_CM_CREDIT:
		st->ctr[CT_C_CREDIT_WINDOWS]++;
		if (m->u.credit.window == g->window)
			return;
		g->window = m->u.credit.window;
		if (g->window)
			for (unsigned i = 0; i < g->n_senders; i++)
				send_credit(st, c, gi, &g->s[i]);
		break;
	default:
		st->ctr[CT_C_DOWN_BAD]++;
		break;
	}
}

/* After a control restart: our state, so the new process rebuilds it. */
static bool send_snapshot(struct il_stage *st, struct ctrl *c)
{
	unsigned need = 0;

	for (unsigned gi = 0; gi < c->app->n_groups; gi++)
		if (c->g[gi].active)
			need += 1 + 2u * c->g[gi].n_members;
	if (il_chan_tx_free(c->ch) < need)
		return false; /* try again on the next housekeeping tick */
	for (unsigned gi = 0; gi < c->app->n_groups; gi++) {
		struct cgroup *g = &c->g[gi];
		struct il_cmsg msg;

		if (!g->active)
			continue;
		memset(&msg, 0, sizeof(msg));
		msg.type = IL_CM_RESYNC;
		msg.len = sizeof(msg.u.resync);
		msg.group = c->app->groups[gi].id;
		msg.u.resync = (struct il_cm_resync){ .epoch = c->seq->epoch, .view_id = g->view_id,
						      .stable_seq = g->wm, .window = g->window,
						      .n_members = g->n_members };
		il_chan_send_burst(c->ch, &msg, 1);
		for (unsigned i = 0; i < g->n_members; i++) {
			const struct cmember *mb = &g->m[i];
			uint64_t cum = mb->cum > g->view_start ? mb->cum : g->view_start;

			memset(&msg.u, 0, sizeof(msg.u));
			msg.type = IL_CM_JOIN;
			msg.flags = IL_CMF_RESYNC;
			msg.len = sizeof(msg.u.member);
			msg.u.member = (struct il_cm_member){ .receiver = mb->id,
							      .epoch = c->seq->epoch,
							      .seq = cum,
							      .roles = mb->roles,
							      .incarnation = mb->incarnation };
			il_chan_send_burst(c->ch, &msg, 1);
			if (!(mb->roles & IL_ROLE_RECEIVER))
				continue;
			memset(&msg.u, 0, sizeof(msg.u));
			msg.type = IL_CM_ACK;
			msg.flags = 0;
			msg.len = sizeof(msg.u.ack);
			msg.u.ack = (struct il_cm_ack){ .receiver = mb->id, .epoch = c->seq->epoch,
							.cum_seq = cum, .view_id = g->view_id,
							.buffer_free = mb->buffer_free };
			il_chan_send_burst(c->ch, &msg, 1);
		}
	}
	st->ctr[CT_C_RESYNC_MSGS] += need;
	return true;
}

static void housekeeping(struct il_stage *st, struct ctrl *c)
{
	uint64_t inc;
	int fd = atomic_exchange(&c->new_fd, -1);

	if (fd >= 0)
		il_chan_set_wake_fd(c->ch, fd);
	if (il_chan_peer_restarted(c->ch, &inc)) {
		st->ctr[CT_C_CONTROL_RESTARTS]++;
		atomic_store(&c->need_fetch, true);
		c->hello_due = true;
		c->snapshot_due = true;
	}
	if (c->hello_due && il_chan_send_hello(c->ch, c->seq->epoch) == 1)
		c->hello_due = false;
	if (!c->hello_due && c->snapshot_due && send_snapshot(st, c))
		c->snapshot_due = false;
	if (!c->hello_due) {
		/* While we are silent the control process must not take the
		 * members' silence for their failure. */
		struct il_cmsg a = { .type = IL_CM_ALIVE };

		il_chan_send_burst(c->ch, &a, 1);
	}
}

/* Every stable_interval_us: a STABLE for each group that DATA did not
 * keep informed (idle, or stamped before the watermark last moved), the
 * final watermark of a dead incarnation again, credits not yet granted. */
static void stable_tick(struct il_stage *st, struct ctrl *c)
{
	for (unsigned gi = 0; gi < c->app->n_groups; gi++) {
		struct cgroup *g = &c->g[gi];
		const struct il_seq_group *sg = &c->seq->groups[gi];

		if (!g->active)
			continue;
		if (sg->stamped_frames == g->last_frames || sg->carried < g->wm)
			send_stable(st, c, gi, c->seq->epoch, g->wm);
		if (sg->stamped_frames == g->last_frames && g->window)
			for (unsigned i = 0; i < g->n_senders; i++)
				if (g->s[i].stable_next + g->window > g->s[i].limit_sent)
					send_credit(st, c, gi, &g->s[i]);
		g->last_frames = sg->stamped_frames;
		if (g->final_left) {
			g->final_left--;
			send_stable(st, c, gi, g->final_epoch, g->final_wm);
		}
	}
}

static inline bool up_msg(struct il_stage *st, struct ctrl *c, struct rte_mbuf *mb,
			  struct il_cmsg *o, uint64_t rx_ns)
{
	const struct il_meta *mt = il_meta(mb);
	const uint8_t *f = rte_pktmbuf_mtod(mb, const uint8_t *);
	const uint8_t *h = f + mt->il_off;
	uint8_t type = h[IL_OFF_TYPE], hl = h[IL_OFF_HDR_LEN];
	uint32_t body = il_get16(f + mt->l4_off + 4) - 8u - hl;
	uint16_t gid = il_get16(h + IL_OFF_GROUP_ID);
	uint16_t gix = c->app->group_idx_by_id[gid];
	const uint8_t *b = h + hl;

	if (gix == 0) {
		il_drop(st, CT_C_DROP_UNKNOWN_GROUP, mb);
		return false;
	}
	memset(o, 0, sizeof(*o));
	o->group = gid;
	if (type == IL_T_ACK) {
		struct cgroup *g = &c->g[gix - 1];
		uint32_t rcv = il_get32(h + IL_OFF_SENDER_ID);

		if (body < IL_ACK_LEN) {
			il_drop(st, CT_C_DROP_BAD_BODY, mb);
			return false;
		}
		if (il_get32(h + IL_OFF_EPOCH) != c->seq->epoch) {
			il_drop(st, CT_C_DROP_STALE_EPOCH, mb);
			return false;
		}
		o->type = IL_CM_ACK;
		o->len = sizeof(o->u.ack);
		o->u.ack = (struct il_cm_ack){ .receiver = rcv, .epoch = c->seq->epoch,
					       .cum_seq = il_get64(h + IL_OFF_GLOBAL_SEQ),
					       .rx_ns = rx_ns, .view_id = il_get32(b),
					       .buffer_free = il_get32(b + 4) };
		for (unsigned i = 0; i < g->n_members; i++)
			if (g->m[i].id == rcv) {
				if (o->u.ack.cum_seq > g->m[i].cum)
					g->m[i].cum = o->u.ack.cum_seq;
				g->m[i].buffer_free = o->u.ack.buffer_free;
				break;
			}
		st->ctr[CT_C_UP_ACK]++;
	} else {
		if (body < IL_MEMBER_MSG_LEN) {
			il_drop(st, CT_C_DROP_BAD_BODY, mb);
			return false;
		}
		o->type = type == IL_T_JOIN ? IL_CM_JOIN :
			  type == IL_T_LEAVE ? IL_CM_LEAVE : IL_CM_HEARTBEAT;
		o->len = sizeof(o->u.member);
		/* A joiner is responsible from here on: everything stamped
		 * before its JOIN passed the sequencer is not its concern. */
		o->u.member = (struct il_cm_member){ .receiver = il_get32(h + IL_OFF_SENDER_ID),
						     .epoch = c->seq->epoch,
						     .seq = c->seq->groups[gix - 1].next,
						     .rx_ns = rx_ns,
						     .roles = il_get32(b),
						     .incarnation = il_get32(b + 4) };
		if (type == IL_T_JOIN) {
			struct cgroup *g = &c->g[gix - 1];
			for (unsigned i = 0; i < g->n_members; i++)
				if (g->m[i].id == o->u.member.receiver)
					g->m[i].incarnation = o->u.member.incarnation;
		}
		st->ctr[type == IL_T_JOIN ? CT_C_UP_JOIN :
			type == IL_T_LEAVE ? CT_C_UP_LEAVE : CT_C_UP_HEARTBEAT]++;
	}
	rte_pktmbuf_free(mb);
	return true;
}

static uint16_t ctrl_process(struct il_stage *st, struct rte_mbuf **pkts, uint16_t n)
{
	struct ctrl *c = st->ctx;
	struct il_cmsg up[IL_BURST_CAP];
	unsigned n_up = 0;
	uint16_t out = 0;
	uint64_t rx_ns = 0;

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];

		if (likely(il_meta(m)->kind != IL_K_CONTROL)) {
			pkts[out++] = m;
			continue;
		}
		const uint8_t *h = rte_pktmbuf_mtod(m, const uint8_t *) + il_meta(m)->il_off;
		uint8_t type = h[IL_OFF_TYPE];
		if (type != IL_T_ACK && type != IL_T_JOIN && type != IL_T_LEAVE &&
		    type != IL_T_HEARTBEAT) {
			pkts[out++] = m; /* VIEW, STABLE, CREDIT, ...: not for us */
			continue;
		}
		if (rx_ns == 0) {
			/* Liveness is judged by arrival here, not by when the
			 * control process gets to it (it may be descheduled).
			 * The vDSO clock: no syscall, once per burst. */
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			rx_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		}
		if (up_msg(st, c, m, &up[n_up], rx_ns))
			n_up++;
	}
	if (n_up) {
		unsigned k = il_chan_send_burst(c->ch, up, n_up);
		st->ctr[CT_C_DROP_CHAN_FULL] += n_up - k;
	}

	uint64_t now = rte_rdtsc();
	if (c->last_call && now - c->last_call > c->max_gap)
		c->max_gap = now - c->last_call;
	c->last_call = now;
	if (now >= c->next_drain) {
		struct il_cmsg down[DOWN_BURST];
		unsigned k;

		c->next_drain = now + c->drain_tsc;
		for (int b = 0; b < 4 && (k = il_chan_recv_burst(c->ch, down, DOWN_BURST)); b++)
			for (unsigned i = 0; i < k; i++)
				apply_down(st, c, &down[i]);
	}
	if (now >= c->next_stable) {
		c->next_stable = now + c->stable_tsc;
		stable_tick(st, c);
	}
	if (now >= c->next_house) {
		c->next_house = now + c->house_tsc;
		housekeeping(st, c);
	}
	return out;
}

static int ctrl_create(struct il_stage *st, const struct il_cfg *p, struct il_app *app,
		       char *err, size_t errlen)
{
	static const char *const keys[] = {"type", "sequencer", "tx", "chan", "wake_sock",
					   "stable_interval_us", "up_slots", "down_slots", NULL};
	const char *seq, *tx, *chan, *sock;
	uint64_t ival, up, down;
	char cerr[512];

	if (il_cfg_check_keys(p, keys, err, errlen))
		return -1;
	struct ctrl *c = rte_zmalloc("il_ctrl", sizeof(*c), RTE_CACHE_LINE_SIZE);
	if (c == NULL)
		return ERR("out of memory for stage '%s'", st->name);
	st->ctx = c;
	c->app = app;
	atomic_init(&c->new_fd, -1);
	atomic_init(&c->need_fetch, true);
	atomic_init(&c->stop, false);
	if (il_cfg_str(p, "sequencer", NULL, &seq, err, errlen) ||
	    il_cfg_str(p, "tx", "out", &tx, err, errlen) ||
	    il_cfg_str(p, "chan", IL_CHAN_PATH_DEFAULT, &chan, err, errlen) ||
	    il_cfg_str(p, "wake_sock", NULL, &sock, err, errlen))
		return -1;
	if (seq == NULL)
		return ERR("config: key '%s.sequencer' is missing: name the sequencer stage whose "
			   "watermark and history this stage manages", il_cfg_path(p));
	snprintf(c->seq_name, sizeof(c->seq_name), "%s", seq);
	int ti = il_app_port_index(app, tx);
	if (ti < 0)
		return ERR("config: key '%s.tx': '%s' is not a configured port", il_cfg_path(p), tx);
	c->tx = (uint16_t)ti;
	if (chan[0] == '\0' || strlen(chan) >= sizeof(c->chan_path))
		return ERR("config: key '%s.chan': '%s' must be a path of 1 to %zu bytes",
			   il_cfg_path(p), chan, sizeof(c->chan_path) - 1);
	snprintf(c->chan_path, sizeof(c->chan_path), "%s", chan);
	if (sock != NULL) {
		if (sock[0] == '\0' || strlen(sock) >= sizeof(c->sock_path))
			return ERR("config: key '%s.wake_sock': '%s' must be a path of 1 to %zu "
				   "bytes", il_cfg_path(p), sock, sizeof(c->sock_path) - 1);
		snprintf(c->sock_path, sizeof(c->sock_path), "%s", sock);
	} else if (il_chan_default_sock_path(chan, c->sock_path, sizeof(c->sock_path))) {
		return ERR("config: key '%s.chan': '%s' is too long to derive the wake socket "
			   "from; set '%s.wake_sock'", il_cfg_path(p), chan, il_cfg_path(p));
	}
	if (il_cfg_u64(p, "stable_interval_us", 1000, 50, 1000000, &ival, err, errlen) ||
	    il_cfg_u64(p, "up_slots", IL_CHAN_UP_SLOTS_DEFAULT, IL_CHAN_MIN_SLOTS,
		       IL_CHAN_MAX_SLOTS, &up, err, errlen) ||
	    il_cfg_u64(p, "down_slots", IL_CHAN_DOWN_SLOTS_DEFAULT, IL_CHAN_MIN_SLOTS,
		       IL_CHAN_MAX_SLOTS, &down, err, errlen))
		return -1;
	if (up & (up - 1))
		return ERR("config: key '%s.up_slots': %lu is not a power of two", il_cfg_path(p),
			   up);
	if (down & (down - 1))
		return ERR("config: key '%s.down_slots': %lu is not a power of two",
			   il_cfg_path(p), down);
	c->g = rte_zmalloc("il_ctrl_groups", sizeof(*c->g) * app->n_groups, RTE_CACHE_LINE_SIZE);
	if (c->g == NULL)
		return ERR("out of memory for stage '%s'", st->name);
	for (unsigned gi = 0; gi < app->n_groups; gi++)
		c->g[gi].walked = 1;
	struct il_chan_params cp = { .up_slots = (uint32_t)up, .down_slots = (uint32_t)down };
	if (il_chan_open(c->chan_path, IL_CHAN_DATAPLANE, &cp, &c->ch, cerr, sizeof(cerr)))
		return ERR("config: key '%s.chan': %s", il_cfg_path(p), cerr);
	uint64_t hz = rte_get_tsc_hz();
	c->stable_tsc = hz / 1000000 * ival;
	c->drain_tsc = hz / 50000; /* 20 us: the down ring is looked at often enough */
	c->house_tsc = hz / 100;   /* 10 ms */
	c->hello_due = true;
	return 0;
}

static int ctrl_bind(struct il_stage *st, char *err, size_t errlen)
{
	struct ctrl *c = st->ctx;
	extern const struct il_stage_type il_stage_sequencer;
	struct il_stage *seq = il_app_stage(c->app, c->seq_name);

	if (seq == NULL || seq->type != &il_stage_sequencer)
		return ERR("config: key 'stages.%s.sequencer': '%s' is not a sequencer stage",
			   st->name, c->seq_name);
	if (seq->lcore != st->lcore)
		return ERR("config: stage '%s' (lcore %d) must run on the lcore of its sequencer "
			   "'%s' (lcore %d): it reads the history", st->name, st->lcore,
			   seq->name, seq->lcore);
	c->seq = seq->ctx;
	c->seq->uto = true;
	if (pthread_create(&c->helper, NULL, helper_main, c) != 0)
		return ERR("stage '%s': cannot start its wake-fd helper thread", st->name);
	c->helper_ok = true;
	return 0;
}

static void ctrl_destroy(struct il_stage *st)
{
	struct ctrl *c = st->ctx;

	if (c == NULL)
		return;
	atomic_store(&c->stop, true);
	if (c->helper_ok)
		pthread_join(c->helper, NULL);
	int fd = atomic_exchange(&c->new_fd, -1);
	if (fd >= 0)
		close(fd);
	if (c->ch != NULL)
		il_chan_close(c->ch);
	rte_free(c->g);
	rte_free(c);
	st->ctx = NULL;
}

static unsigned ctrl_state(const struct il_stage *st, const char **keys, uint64_t *vals,
			   unsigned max)
{
	static char names[IL_MAX_GROUPS][4][32];
	const struct ctrl *c = st->ctx;
	unsigned n = 0;

	if (n < max) {
		/* The lcore was away this long at most (descheduled, or a
		 * stage ran long): what the failure detectors must tolerate. */
		keys[n] = "max_poll_gap_us";
		vals[n++] = c->max_gap * 1000000 / rte_get_tsc_hz();
	}
	for (unsigned gi = 0; gi < c->app->n_groups && n + 4 <= max; gi++) {
		const struct cgroup *g = &c->g[gi];
		uint16_t id = c->app->groups[gi].id;

		snprintf(names[gi][0], 32, "group%u_watermark", id);
		snprintf(names[gi][1], 32, "group%u_view", id);
		snprintf(names[gi][2], 32, "group%u_members", id);
		snprintf(names[gi][3], 32, "group%u_window", id);
		keys[n] = names[gi][0];
		vals[n++] = g->wm;
		keys[n] = names[gi][1];
		vals[n++] = g->view_id;
		keys[n] = names[gi][2];
		vals[n++] = g->n_members;
		keys[n] = names[gi][3];
		vals[n++] = g->window;
	}
	return n;
}

const struct il_stage_type il_stage_control = {
	.name = "control",
	.help = "channel to interlink-control: ACK/JOIN/LEAVE/HEARTBEAT up; watermark, VIEW, "
		"CREDIT down; STABLE when idle",
	.counter_names = ct_counter_names,
	.n_counters = CT_C_COUNT,
	.create = ctrl_create,
	.bind = ctrl_bind,
	.process = ctrl_process,
	.poll = true,
	.destroy = ctrl_destroy,
	.state = ctrl_state,
};
