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
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_malloc.h>

#include <interlink/app.h>
#include <interlink/err.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "ctrl.h"
#include "ha.h"

static const char *const ct_counter_names[CT_C_COUNT] = {
	[CT_C_UP_ACK] = "up_ack",
	[CT_C_UP_JOIN] = "up_join",
	[CT_C_UP_LEAVE] = "up_leave",
	[CT_C_UP_HEARTBEAT] = "up_heartbeat",
	[CT_C_DROP_CHAN_FULL] = "drop_chan_full",
	[CT_C_DROP_UNKNOWN_GROUP] = "drop_unknown_group",
	[CT_C_DROP_BAD_BODY] = "drop_bad_body",
	[CT_C_DROP_STALE_EPOCH] = "drop_stale_epoch",
	[CT_C_DROP_ACK_FUTURE] = "drop_ack_future",
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
	[CT_C_RTT_SAMPLES] = "rtt_samples",
	[CT_C_RTT_NO_SAMPLE] = "rtt_no_sample",
	[CT_C_TX_RESUME] = "tx_resume",
	[CT_C_TX_RATE] = "tx_rate",
	[CT_C_RATE_SPLITS] = "rate_splits",
	[CT_C_DROP_BAD_MAC] = "drop_bad_mac",
	[CT_C_DROP_REPLAY] = "drop_replay",
	[CT_C_UP_EPOCH_REPORT] = "up_epoch_report",
	[CT_C_DROP_NOT_OWNER] = "drop_not_owner",
	[CT_C_TX_VIEW_REPEAT] = "tx_view_repeat",
	[CT_C_VIEW_REPEAT_STALE] = "view_repeat_stale",
	[CT_C_TX_CREDIT_REPEAT] = "tx_credit_repeat",
	[CT_C_TX_CREDIT_DUP] = "tx_credit_dup",
	[CT_C_EMIT_DEFERRED] = "emit_deferred",
};

/* A sharded appliance: each shard's control stage keeps its own groups
 * (docs/scaling.md 1.5). */
static inline bool owns(const struct ctrl *c, unsigned gi)
{
	return c->shard < 0 || c->app->groups[gi].shard == (unsigned)c->shard;
}

/* First warning after this long without interlink-control (it may be
 * starting alongside), then one per CTRL_WARN_EVERY_S while still absent. */
#define CTRL_WARN_GRACE_S 2
#define CTRL_WARN_EVERY_S 30

/* Once per helper tick: is interlink-control there? Receivers of a group
 * with a control stage wait for views, watermarks and credits that only
 * it sends, so its absence is said loudly, not discovered by hung hosts. */
static void watch_control(struct il_stage *st, struct ctrl *c, struct timespec *absent_since,
			  struct timespec *next_warn)
{
	struct timespec now;
	bool alive = il_chan_peer_alive(c->ch);

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (alive) {
		if (!atomic_exchange(&c->control_attached, true) &&
		    atomic_load(&c->control_absent_warnings))
			fprintf(stderr, "interlink: stage '%s': interlink-control attached to %s\n",
				st->name, c->chan_path);
		absent_since->tv_sec = 0;
		return;
	}
	if (atomic_exchange(&c->control_attached, false) || absent_since->tv_sec == 0) {
		*absent_since = now;
		next_warn->tv_sec = now.tv_sec + CTRL_WARN_GRACE_S;
		next_warn->tv_nsec = now.tv_nsec;
	}
	if (now.tv_sec < next_warn->tv_sec ||
	    (now.tv_sec == next_warn->tv_sec && now.tv_nsec < next_warn->tv_nsec))
		return;
	atomic_fetch_add(&c->control_absent_warnings, 1);
	char shards[32] = "";

	if (c->shard >= 0)
		snprintf(shards, sizeof(shards), " --shards %u", c->app->n_shards);
	fprintf(stderr, "interlink: warning: stage '%s': no interlink-control attached to %s for "
		"%ld s; receivers of its groups get no views, watermarks or credits and wait. Start "
		"it: interlink-control --chan %s%s\n", st->name, c->chan_path,
		(long)(now.tv_sec - absent_since->tv_sec), c->chan_base, shards);
	next_warn->tv_sec = now.tv_sec + CTRL_WARN_EVERY_S;
	next_warn->tv_nsec = now.tv_nsec;
}

static void *helper_main(void *arg)
{
	struct il_stage *st = arg;
	struct ctrl *c = st->ctx;
	struct timespec absent_since = {0}, next_warn = {0};
	char err[256];

	while (!atomic_load(&c->stop)) {
		watch_control(st, c, &absent_since, &next_warn);
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

static void apply_down(struct il_stage *st, struct ctrl *c, const struct il_cmsg *m)
{
	uint16_t gix = c->app->group_idx_by_id[m->group];
	struct cgroup *g;
	unsigned gi;

	st->ctr[CT_C_DOWN_MSGS]++;
	if (m->type == IL_CM_HELLO)
		return; /* the control process is there; restarts are seen in the header */
	if (m->type == IL_CM_ROLE || m->type == IL_CM_AUTHORITY || m->type == IL_CM_QUIESCE) {
		if (c->ha != NULL)
			il_ha_down(c->ha, m);
		else
			st->ctr[CT_C_DOWN_BAD]++;
		return;
	}
	if (gix == 0 || !owns(c, gix - 1u)) {
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
			ctrl_send_stable(st, c, gi, g->final_epoch, g->final_wm);
			return;
		}
		st->ctr[CT_C_WATERMARKS]++;
		g->active = true;
		if (m->u.wm.stable_seq <= g->wm)
			return; /* max(current, received) within an epoch */
		g->wm = m->u.wm.stable_seq;
		c->seq->groups[gi].stable = g->wm;
		uint64_t before = st->ctr[CT_C_TX_STABLE];
		ctrl_credits_advance(st, c, gi);
		/* Idle: no DATA will carry it soon, so a STABLE does now. */
		if (c->seq->groups[gi].stamped_frames == g->last_frames &&
		    st->ctr[CT_C_TX_STABLE] == before)
			ctrl_send_stable(st, c, gi, c->seq->epoch, g->wm);
		break;
	case IL_CM_VIEW:
		if (m->flags & IL_CMF_REPEAT) {
			/* A member retried its JOIN although the view naming it
			 * was sent: it was lost on the way. The installed view
			 * again, unchanged (same id, same start); none if
			 * another is on its way down or in force already. */
			if (!g->pend && g->view_id != 0 && g->view_id == m->u.view.view_id) {
				ctrl_view_send(st, c, gi);
				st->ctr[CT_C_TX_VIEW_REPEAT]++;
			} else {
				st->ctr[CT_C_VIEW_REPEAT_STALE]++;
			}
			break;
		}
		g->pv = m->u.view;
		g->pend = true;
		g->pend_got = 0;
		if (g->pv.n_members > CTL_MAX_MEMBERS) {
			st->ctr[CT_C_MEMBER_TABLE_FULL]++;
			g->pv.n_members = CTL_MAX_MEMBERS;
		}
		if (g->pv.n_members == 0) {
			g->pend = false;
			ctrl_view_install(st, c, gi);
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
			ctrl_view_install(st, c, gi);
		}
		break;
	case IL_CM_CREDIT:
		st->ctr[CT_C_CREDIT_WINDOWS]++;
		if (m->u.credit.window == g->window && m->u.credit.rate_kbps == g->rate_kbps)
			return;
		g->window = m->u.credit.window;
		if (m->u.credit.rate_kbps != g->rate_kbps) {
			uint32_t old = g->rate_kbps;

			g->rate_kbps = m->u.credit.rate_kbps;
			ctrl_rate_rescale(g, old);
		}
		ctrl_credits_all(st, c, gi, false);
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

		if (c->ha != NULL) {
			il_ha_alive(c->ha, &a.u.alive);
			a.len = sizeof(a.u.alive);
		}
		il_chan_send_burst(c->ch, &a, 1);
	}
}

/* Every stable_interval_us: a STABLE for each group that DATA did not
 * keep informed (idle, or stamped before the watermark last moved), the
 * final watermark of a dead incarnation again, credits not yet granted. */
static void stable_tick(struct il_stage *st, struct ctrl *c)
{
	for (; c->tick_gi < c->app->n_groups; c->tick_gi++) {
		unsigned gi = c->tick_gi;
		struct cgroup *g = &c->g[gi];
		const struct il_seq_group *sg = &c->seq->groups[gi];

		if (!g->active)
			continue;
		/* A STABLE and a grant per sender for a view without
		 * receivers, the same again for an idle group, a final STABLE. */
		if (!ctrl_room(st, 3u + 2u * g->n_senders)) {
			/* The rest of the tick in the next poll. */
			st->ctr[CT_C_EMIT_DEFERRED]++;
			return;
		}
		if (g->view_id && g->n_receivers == 0 && sg->next > g->wm) {
			/* A view without receivers waits for nobody: all that is
			 * stamped is stable (the control process cannot know how
			 * far that is, this stage can). */
			g->wm = sg->next;
			c->seq->groups[gi].stable = g->wm;
			ctrl_credits_advance(st, c, gi);
		}
		if (sg->stamped_frames == g->last_frames || sg->carried < g->wm)
			ctrl_send_stable(st, c, gi, c->seq->epoch, g->wm);
		if (sg->stamped_frames == g->last_frames)
			ctrl_credits_all(st, c, gi, true);
		g->last_frames = sg->stamped_frames;
		if (g->final_left) {
			g->final_left--;
			ctrl_send_stable(st, c, gi, g->final_epoch, g->final_wm);
		}
	}
	c->tick_gi = 0;
	c->tick_busy = false;
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
	if (unlikely(!owns(c, gix - 1u))) {
		/* Another shard's group: the hand-over after classify takes
		 * these to their owner, so this is not expected. */
		il_drop(st, CT_C_DROP_NOT_OWNER, mb);
		return false;
	}
	memset(o, 0, sizeof(*o));
	o->group = gid;
	if (type == IL_T_ACK) {
		struct cgroup *g = &c->g[gix - 1];
		uint32_t rcv = il_get32(h + IL_OFF_SENDER_ID);
		struct il_ack_body a;

		if (il_ack_get(b, body, &a) != 0) {
			il_drop(st, CT_C_DROP_BAD_BODY, mb);
			return false;
		}
		if (il_get32(h + IL_OFF_EPOCH) != c->seq->epoch) {
			il_drop(st, CT_C_DROP_STALE_EPOCH, mb);
			return false;
		}
		if (il_get64(h + IL_OFF_GLOBAL_SEQ) > c->seq->groups[gix - 1].next) {
			/* Holding what was never stamped: a confused receiver
			 * must not make it "stable". */
			il_drop(st, CT_C_DROP_ACK_FUTURE, mb);
			return false;
		}
		o->type = IL_CM_ACK;
		o->len = sizeof(o->u.ack);
		o->u.ack = (struct il_cm_ack){ .receiver = rcv, .epoch = c->seq->epoch,
					       .cum_seq = il_get64(h + IL_OFF_GLOBAL_SEQ),
					       .rx_ns = rx_ns, .view_id = a.view_id,
					       .buffer_free = a.buffer_free };
		if (g->log_slots != NULL) {
			/* A WAN group: RTT = (now - T_out) - delta (Fig. 4.3), and
			 * the receiver's p, for the control process's eq. 4.1. */
			o->u.ack.s_bytes = c->app->groups[gix - 1].wan_packet_bytes;
			if (a.tfrc) {
				o->u.ack.loss_ppm = a.loss_ppm;
				int64_t rtt = a.echo_seq ?
					il_tfrc_rtt_from_ack(&g->log, a.echo_seq, rx_ns,
							     (uint64_t)a.delta_us * 1000u) : -1;
				if (rtt >= 0) {
					o->u.ack.rtt_ns = rtt > 0 ? (uint64_t)rtt : 1u;
					st->ctr[CT_C_RTT_SAMPLES]++;
				} else {
					st->ctr[CT_C_RTT_NO_SAMPLE]++;
				}
			}
		}
		for (unsigned i = 0; i < g->n_members; i++)
			if (g->m[i].id == rcv) {
				if (o->u.ack.cum_seq > g->m[i].cum)
					g->m[i].cum = o->u.ack.cum_seq;
				g->m[i].buffer_free = o->u.ack.buffer_free;
				break;
			}
		st->ctr[CT_C_UP_ACK]++;
	} else if (type == IL_T_EPOCH_REPORT) {
		struct il_epoch_report_body r;

		if (il_epoch_report_get(b, body, &r) != 0) {
			il_drop(st, CT_C_DROP_BAD_BODY, mb);
			return false;
		}
		/* Where a receiver stands in an epoch a newer one replaces: the
		 * control process takes the cut from these (docs/ha.md). */
		o->type = IL_CM_EPOCH_REPORT;
		o->len = sizeof(o->u.report);
		o->u.report = (struct il_cm_epoch_report){
			.receiver = il_get32(h + IL_OFF_SENDER_ID), .epoch = il_get32(h + IL_OFF_EPOCH),
			.new_epoch = r.new_epoch, .view_id = r.view_id,
			.cum = il_get64(h + IL_OFF_GLOBAL_SEQ), .stable_seen = r.stable_seen,
			.high = r.high, .rx_ns = rx_ns };
		st->ctr[CT_C_UP_EPOCH_REPORT]++;
	} else {
		struct il_member_body mm;

		if (il_member_get(b, body, &mm) != 0) {
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
						     .roles = mm.roles,
						     .incarnation = mm.incarnation };
		if (type == IL_T_HEARTBEAT && (mm.roles & IL_ROLE_SENDER))
			ctrl_credit_heartbeat(st, c, gix - 1u, o->u.member.receiver, rte_rdtsc());
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

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A WAN group's DATA frame leaves (stamped by the sequencer just before
 * this stage): remember when, by its global sequence. One clock read per
 * burst, as for arrivals; the same clock as rx_ns. */
static void log_sent(struct ctrl *c, struct rte_mbuf *m, uint64_t *out_ns)
{
	const struct il_meta *mt = il_meta(m);
	const uint8_t *h = rte_pktmbuf_mtod(m, const uint8_t *) + mt->il_off;

	if (!(h[IL_OFF_FLAGS] & IL_F_STAMPED))
		return;
	if (*out_ns == 0)
		*out_ns = now_ns();
	il_tfrc_sent(&c->g[mt->group_idx].log, il_get64(h + IL_OFF_GLOBAL_SEQ), *out_ns);
}

/* With auth.keys: a message without a valid MAC, or with a counter its
 * sender used before, never reaches the membership or the watermark. */
static inline bool auth_ok(struct il_stage *st, struct ctrl *c, struct rte_mbuf *m)
{
	switch (il_stage_auth_check(&c->auth, m)) {
	case IL_AUTH_OK:
		return true;
	case IL_AUTH_BAD_MAC:
		il_drop(st, CT_C_DROP_BAD_MAC, m);
		return false;
	default:
		il_drop(st, CT_C_DROP_REPLAY, m);
		return false;
	}
}

static uint16_t ctrl_process(struct il_stage *st, struct rte_mbuf **pkts, uint16_t n)
{
	struct ctrl *c = st->ctx;
	struct il_cmsg up[IL_BURST_CAP];
	unsigned n_up = 0;
	uint16_t out = 0;
	uint64_t rx_ns = 0, out_ns = 0;

	/* A poll stage: called for every burst, scans only those with
	 * packets for it; the housekeeping below runs either way. */
	if (!il_burst_has(st, st->kinds))
		out = n;
	for (uint16_t i = out; i < n; i++) {
		struct rte_mbuf *m = pkts[i];

		if (likely(il_meta(m)->kind != IL_K_CONTROL)) {
			if (il_meta(m)->kind == IL_K_DATA &&
			    unlikely(c->g[il_meta(m)->group_idx].log_slots != NULL))
				log_sent(c, m, &out_ns);
			pkts[out++] = m;
			continue;
		}
		const uint8_t *h = rte_pktmbuf_mtod(m, const uint8_t *) + il_meta(m)->il_off;
		uint8_t type = h[IL_OFF_TYPE];
		if (type != IL_T_ACK && type != IL_T_JOIN && type != IL_T_LEAVE &&
		    type != IL_T_HEARTBEAT && type != IL_T_EPOCH_REPORT) {
			pkts[out++] = m; /* VIEW, STABLE, CREDIT, ...: not for us */
			continue;
		}
		if (c->auth.keys != NULL && !auth_ok(st, c, m))
			continue;
		if (rx_ns == 0) {
			/* Liveness is judged by arrival here, not by when the
			 * control process gets to it (it may be descheduled).
			 * The vDSO clock: no syscall, once per burst. */
			rx_ns = now_ns();
		}
		if (up_msg(st, c, m, &up[n_up], rx_ns))
			n_up++;
	}
	if (n_up) {
		unsigned k = il_chan_send_burst(c->ch, up, n_up);
		st->ctr[CT_C_DROP_CHAN_FULL] += n_up - k;
	}
	il_chan_wake_flush(c->ch);

	uint64_t now = rte_rdtsc();
	if (unlikely(c->seq->inc_due))
		ctrl_new_incarnations(st, c);
	if (unlikely(c->seq->resume_due))
		ctrl_send_resumes(st, c, now);
	if (c->last_call && now - c->last_call > c->max_gap)
		c->max_gap = now - c->last_call;
	c->last_call = now;
	if (now >= c->next_drain || c->i_held < c->n_held) {
		/* At most 4 bursts a poll; a message is applied only with room
		 * for all it may send, else it waits for the next poll. */
		c->next_drain = now + c->drain_tsc;
		for (int b = 0;;) {
			if (c->i_held == c->n_held) {
				if (b == 4)
					break;
				c->i_held = 0;
				c->n_held = il_chan_recv_burst(c->ch, c->held, DOWN_BURST);
				if (c->n_held == 0)
					break;
				b++;
			}
			if (!ctrl_room(st, CTRL_EMIT_RESERVE)) {
				st->ctr[CT_C_EMIT_DEFERRED]++;
				break;
			}
			apply_down(st, c, &c->held[c->i_held++]);
		}
	}
	if (now >= c->next_stable && !c->tick_busy) {
		c->next_stable = now + c->stable_tsc;
		c->tick_busy = true;
	}
	if (c->tick_busy)
		stable_tick(st, c);
	if (now >= c->next_house) {
		c->next_house = now + c->house_tsc;
		housekeeping(st, c);
		for (unsigned gi = 0; gi < c->app->n_groups; gi++)
			if (c->g[gi].rate_kbps && now - c->g[gi].split_at >= c->split_tsc)
				ctrl_rate_split(st, c, gi, now);
	}
	return out;
}

/* The ha stage made this appliance the owner of a new epoch (docs/ha.md):
 * the sequencer restarted at 1 already; every group here starts afresh
 * (no view, watermark 0: the control process sends the first views once
 * the cut of the previous epoch is committed) and is told of the epoch at
 * once (a stable tick, over as many polls as its groups need), and every
 * stable interval while idle: the announcement. */
void ctrl_epoch_restart(struct il_stage *st, struct ctrl *c)
{
	for (unsigned gi = 0; gi < c->app->n_groups; gi++) {
		struct cgroup *g = &c->g[gi];
		struct il_tfrc_sendlog_slot *slots = g->log_slots;

		if (!owns(c, gi))
			continue;
		memset(g, 0, sizeof(*g));
		g->walked = 1;
		g->active = true;
		g->log_slots = slots;
		if (slots != NULL) {
			memset(slots, 0, sizeof(*slots) * CTL_SENDLOG_SLOTS);
			il_tfrc_sendlog_init(&g->log, slots, CTL_SENDLOG_SLOTS - 1);
		}
	}
	/* The announcement: a STABLE of the new epoch (watermark 0) for each
	 * group, sent by a stable tick started now, which spreads hundreds of
	 * groups over polls rather than dropping what one poll cannot send. */
	c->tick_gi = 0;
	c->tick_busy = true;
	(void)st;
}

/* Standby: nothing of ours is sent (the pipeline is muted anyway). */
void ctrl_epoch_idle(struct ctrl *c)
{
	for (unsigned gi = 0; gi < c->app->n_groups; gi++) {
		c->g[gi].active = false;
		c->g[gi].final_left = 0;
	}
}

static int ctrl_create(struct il_stage *st, const struct il_cfg *p, struct il_app *app,
		       char *err, size_t errlen)
{
	static const char *const keys[] = {"type", "sequencer", "tx", "chan", "wake_sock",
					   "stable_interval_us", "up_slots", "down_slots",
					   "resume_interval_us", "wake_interval_us", "rate_split_ms",
					   "auth", NULL};
	const char *seq, *tx, *chan, *sock;
	uint64_t ival, up, down, rival, wdelay, split_ms;
	char cerr[512];

	if (il_cfg_check_keys(p, keys, err, errlen))
		return -1;
	struct ctrl *c = rte_zmalloc("il_ctrl", sizeof(*c), RTE_CACHE_LINE_SIZE);
	if (c == NULL)
		return ERR("out of memory for stage '%s'", st->name);
	st->ctx = c;
	c->app = app;
	c->shard = app->n_shards && st->shard >= 0 ? st->shard : -1;
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
	snprintf(c->chan_base, sizeof(c->chan_base), "%s", chan);
	if (c->shard < 0)
		snprintf(c->chan_path, sizeof(c->chan_path), "%s", chan);
	else if (il_chan_shard_path(chan, (unsigned)c->shard, c->chan_path, sizeof(c->chan_path)))
		return ERR("config: key '%s.chan': '%s' is too long for its shards' channels "
			   "('%s.%u')", il_cfg_path(p), chan, chan, (unsigned)c->shard);
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
	    il_cfg_u64(p, "resume_interval_us", 2000, 100, 1000000, &rival, err, errlen) ||
	    il_cfg_u64(p, "wake_interval_us", 200, 0, 10000, &wdelay, err, errlen) ||
	    il_cfg_u64(p, "rate_split_ms", 100, 10, 10000, &split_ms, err, errlen) ||
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
	if (il_stage_auth_create(p, &c->auth, err, errlen))
		return -1;
	c->g = rte_zmalloc("il_ctrl_groups", sizeof(*c->g) * app->n_groups, RTE_CACHE_LINE_SIZE);
	if (c->g == NULL)
		return ERR("out of memory for stage '%s'", st->name);
	for (unsigned gi = 0; gi < app->n_groups; gi++) {
		c->g[gi].walked = 1;
		if (!app->groups[gi].wan || !owns(c, gi))
			continue;
		c->g[gi].log_slots = rte_zmalloc("il_ctrl_sendlog",
						 sizeof(*c->g[gi].log_slots) * CTL_SENDLOG_SLOTS,
						 RTE_CACHE_LINE_SIZE);
		if (c->g[gi].log_slots == NULL)
			return ERR("out of memory for stage '%s'", st->name);
		il_tfrc_sendlog_init(&c->g[gi].log, c->g[gi].log_slots, CTL_SENDLOG_SLOTS - 1);
		st->kinds |= IL_KIND_BIT(IL_K_DATA); /* WAN groups log what is sent */
	}
	struct il_chan_params cp = { .up_slots = (uint32_t)up, .down_slots = (uint32_t)down };
	if (il_chan_open(c->chan_path, IL_CHAN_DATAPLANE, &cp, &c->ch, cerr, sizeof(cerr)))
		return ERR("config: key '%s.chan': %s", il_cfg_path(p), cerr);
	if (c->shard >= 0)
		il_chan_set_shard(c->ch, (uint16_t)c->shard, (uint16_t)app->n_shards);
	/* One wake-up of a sleeping control process per wake_interval_us at
	 * most (0: no limit): fewer context switches under load, at most that
	 * much more latency for the watermark, none when wake-ups are rare. */
	il_chan_set_wake_interval(c->ch, wdelay * 1000);
	uint64_t hz = rte_get_tsc_hz();
	c->stable_tsc = hz / 1000000 * ival;
	c->resume_tsc = hz / 1000000 * rival;
	c->split_tsc = hz / 1000 * split_ms;
	c->drain_tsc = hz / 50000; /* 20 us: the down ring is looked at often enough */
	c->house_tsc = hz / 100;   /* 10 ms */
	c->hello_due = true;
	return 0;
}

static int ctrl_bind(struct il_stage *st, char *err, size_t errlen)
{
	struct ctrl *c = st->ctx;
	extern const struct il_stage_type il_stage_sequencer;
	/* A shard's copy manages its own shard's copy of the sequencer. */
	struct il_stage *seq = il_app_stage_peer(c->app, st, c->seq_name);

	if (seq == NULL || seq->type != &il_stage_sequencer)
		return ERR("config: key 'stages.%s.sequencer': '%s' is not a sequencer stage",
			   st->name, c->seq_name);
	if (seq->lcore != st->lcore)
		return ERR("config: stage '%s' (lcore %d) must run on the lcore of its sequencer "
			   "'%s' (lcore %d): it reads the history", st->name, st->lcore,
			   seq->name, seq->lcore);
	c->seq = seq->ctx;
	c->seq->uto = true;
	if (pthread_create(&c->helper, NULL, helper_main, st) != 0)
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
	for (unsigned gi = 0; c->g != NULL && gi < c->app->n_groups; gi++)
		rte_free(c->g[gi].log_slots);
	rte_free(c->g);
	il_stage_auth_free(&c->auth);
	rte_free(c);
	st->ctx = NULL;
}

static void ctrl_state(const struct il_stage *st, struct il_state_sink *out)
{
	const struct ctrl *c = st->ctx;

	/* The lcore was away this long at most (descheduled, or a stage ran
	 * long): what the failure detectors must tolerate. */
	il_state_put(out, -1, "max_poll_gap_us", c->max_gap * 1000000 / rte_get_tsc_hz());
	/* 0 while no interlink-control holds the channel (warnings on stderr). */
	il_state_put(out, -1, "control_attached", atomic_load(&c->control_attached));
	il_state_put(out, -1, "control_absent_warnings", atomic_load(&c->control_absent_warnings));
	if (c->shard >= 0)
		il_state_put(out, -1, "shard", (uint64_t)c->shard);
	for (unsigned gi = 0; gi < c->app->n_groups; gi++) {
		const struct cgroup *g = &c->g[gi];

		if (!owns(c, gi))
			continue; /* another shard's copy reports it */
		il_state_put(out, (int)gi, "watermark", g->wm);
		il_state_put(out, (int)gi, "view", g->view_id);
		il_state_put(out, (int)gi, "members", g->n_members);
		il_state_put(out, (int)gi, "window", g->window);
		il_state_put(out, (int)gi, "rate_kbps", g->rate_kbps);
	}
}

uint16_t ctrl_view_get(const struct il_stage *st, unsigned gi, uint32_t *view_id, uint32_t *ids,
		       uint32_t *roles, uint16_t max)
{
	const struct ctrl *c = st->ctx;
	const struct cgroup *g = &c->g[gi];
	uint16_t n = g->n_members < max ? g->n_members : max;

	*view_id = g->view_id;
	for (uint16_t i = 0; i < n; i++) {
		ids[i] = g->m[i].id;
		roles[i] = g->m[i].roles;
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
	.meta_needs = IL_META_TAGS,
	.kinds = IL_KIND_BIT(IL_K_CONTROL),
	.kinds_kept = true,
};
