/* SPDX-License-Identifier: BSD-3-Clause
 * Group membership (JOIN/LEAVE/HEARTBEAT) feeding the stability watermark.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <interlink/wire.h>

#include "membership.h"

int il_mship_init(struct il_mship *m, uint32_t epoch)
{
	memset(m, 0, sizeof(*m));
	m->epoch = epoch;
	m->by_id = calloc(IL_MSHIP_GROUPS, sizeof(*m->by_id));
	m->groups = calloc(IL_MSHIP_GROUPS, sizeof(*m->groups));
	m->pending = calloc(IL_MSHIP_GROUPS, sizeof(*m->pending));
	if (m->by_id == NULL || m->groups == NULL || m->pending == NULL) {
		il_mship_free(m);
		return -1;
	}
	return 0;
}

static void groups_free(struct il_mship *m)
{
	for (unsigned i = 0; i < m->n_groups; i++) {
		struct il_mgroup *g = m->by_id[m->groups[i]];

		il_stab_free(&g->stab);
		free(g->m);
		free(g);
		m->by_id[m->groups[i]] = NULL;
	}
	m->n_groups = 0;
	m->n_pending = 0;
}

void il_mship_free(struct il_mship *m)
{
	if (m->by_id != NULL)
		groups_free(m);
	free(m->by_id);
	free(m->groups);
	free(m->pending);
	m->by_id = NULL;
	m->groups = m->pending = NULL;
}

void il_mship_reset(struct il_mship *m, uint32_t epoch)
{
	groups_free(m);
	m->epoch = epoch;
}

static struct il_mgroup *group_get(struct il_mship *m, uint16_t id, bool create)
{
	struct il_mgroup *g = m->by_id[id];

	if (g != NULL || !create)
		return g;
	g = calloc(1, sizeof(*g));
	if (g == NULL)
		return NULL;
	g->id = id;
	il_stab_init(&g->stab, id, m->epoch);
	m->by_id[id] = g;
	m->groups[m->n_groups++] = id;
	return g;
}

const struct il_mgroup *il_mship_group(const struct il_mship *m, uint16_t id)
{
	return m->by_id[id];
}

static int member_find(const struct il_mgroup *g, uint32_t id)
{
	for (unsigned i = 0; i < g->n; i++)
		if (g->m[i].id == id)
			return (int)i;
	return -1;
}

static void mark_pending(struct il_mship *m, struct il_mgroup *g)
{
	if (!g->pending) {
		g->pending = true;
		m->pending[m->n_pending++] = g->id;
	}
}

static uint32_t roles_of(const struct il_cm_member *p)
{
	return p->roles ? p->roles : IL_ROLE_RECEIVER;
}

static void view_change(struct il_mship *m, struct il_mgroup *g, uint16_t reason,
			uint64_t start)
{
	g->view_id++;
	g->view_due = true;
	g->view_reason = reason;
	if (start && (g->view_start == 0 || start < g->view_start))
		g->view_start = start;
	m->views_due = true;
	mark_pending(m, g);
}

/* A member's message says it lacks the view in force: a JOIN retried
 * after the view naming it went down, or a HEARTBEAT of one the view in
 * force excluded (alive after all, it would go on believing itself a
 * member). The VIEW was lost on its way: it goes again, unchanged, unless
 * a change is due (the new view goes instead), and not within
 * IL_MSHIP_REPEAT_NS of the last copy (a retry sent before that copy
 * arrived crossed it on the way). */
static void repeat_view(struct il_mship *m, struct il_mgroup *g, uint64_t now)
{
	if (g->view_sent && !g->view_due && now - g->sent_ns >= IL_MSHIP_REPEAT_NS) {
		g->repeat_due = true;
		m->views_due = true;
	}
}

static int do_join(struct il_mship *m, struct il_mgroup *g, const struct il_cm_member *p,
		   uint16_t flags, uint64_t now)
{
	int i = member_find(g, p->receiver);

	if (i >= 0) {
		struct il_member *mb = &g->m[i];

		mb->last_heard_ns = now;
		if (flags & IL_CMF_RESYNC || p->incarnation == mb->incarnation) {
			/* A repeated JOIN (a retry, or the data plane's state
			 * after a control restart) refreshes liveness and
			 * changes no view. A retry means the VIEW that named it
			 * was lost. */
			if (!(flags & IL_CMF_RESYNC))
				repeat_view(m, g, now);
			return 1;
		}
		/* A new incarnation: it restarted, or it was excluded wrongly
		 * and rejoins. Its old state is gone: it starts at its join
		 * point like any joiner. */
		mb->incarnation = p->incarnation;
		mb->roles = roles_of(p);
		mb->suspected = false;
		mb->fresh = true;
		il_tfrc_rtt_init(&mb->rtt, IL_MSHIP_RTT_WEIGHT);
		mb->loss_ppm = 0;
		il_stab_remove(&g->stab, p->receiver);
		if ((mb->roles & IL_ROLE_RECEIVER) && il_stab_add(&g->stab, p->receiver, p->seq) < 0)
			goto nomem;
		m->st.rejoins++;
		view_change(m, g, IL_VR_JOIN, p->seq);
		return 0;
	}
	if (g->n == g->cap) {
		unsigned cap = g->cap ? 2 * g->cap : 8;
		struct il_member *nm = realloc(g->m, cap * sizeof(*nm));

		if (nm == NULL)
			goto nomem;
		g->m = nm;
		g->cap = cap;
	}
	if ((roles_of(p) & IL_ROLE_RECEIVER) && il_stab_add(&g->stab, p->receiver, p->seq) < 0)
		goto nomem;
	g->m[g->n++] = (struct il_member){ .id = p->receiver, .roles = roles_of(p),
					   .incarnation = p->incarnation,
					   .fresh = !(flags & IL_CMF_RESYNC),
					   .buffer_free = UINT32_MAX, .joined_ns = now,
					   .last_heard_ns = now };
	il_tfrc_rtt_init(&g->m[g->n - 1].rtt, IL_MSHIP_RTT_WEIGHT);
	if (flags & IL_CMF_RESYNC) {
		/* A member of the view the data plane already has. */
		mark_pending(m, g);
		return 0;
	}
	m->st.joins++;
	view_change(m, g, IL_VR_JOIN, p->seq);
	return 0;
nomem:
	m->st.nomem++;
	return 1;
}

static void member_remove(struct il_mship *m, struct il_mgroup *g, unsigned i, uint16_t reason)
{
	uint32_t id = g->m[i].id;

	if (g->m[i].roles & IL_ROLE_RECEIVER)
		g->removal_due = true;
	g->m[i] = g->m[--g->n];
	il_stab_remove(&g->stab, id);
	/* The minimum may now be held by someone further ahead. */
	view_change(m, g, reason, 0);
}

static int do_leave(struct il_mship *m, struct il_mgroup *g, const struct il_cm_member *p)
{
	int i = g != NULL ? member_find(g, p->receiver) : -1;

	if (i < 0) {
		m->st.unknown_member++;
		return 1;
	}
	member_remove(m, g, (unsigned)i, IL_VR_LEAVE);
	m->st.leaves++;
	return 0;
}

static void heard(struct il_mship *m, struct il_member *mb, uint64_t now)
{
	mb->last_heard_ns = now;
	if (mb->suspected) {
		/* The fast detector was wrong: that is what it is for. */
		mb->suspected = false;
		m->st.false_suspicions++;
	}
}

void il_mship_grace(struct il_mship *m, uint64_t pause, uint64_t now)
{
	for (unsigned k = 0; k < m->n_groups; k++) {
		struct il_mgroup *g = m->by_id[m->groups[k]];

		for (unsigned i = 0; i < g->n; i++) {
			uint64_t *t = &g->m[i].last_heard_ns;

			*t = *t + pause < now ? *t + pause : now;
		}
	}
}

void il_mship_tick(struct il_mship *m, uint64_t now)
{
	for (unsigned k = 0; k < m->n_groups; k++) {
		struct il_mgroup *g = m->by_id[m->groups[k]];

		for (unsigned i = 0; i < g->n;) {
			struct il_member *mb = &g->m[i];
			uint64_t quiet = now > mb->last_heard_ns ? now - mb->last_heard_ns : 0;

			if (m->cfg.exclude_ns && quiet >= m->cfg.exclude_ns) {
				m->st.exclusions++;
				m->st.last_excluded = mb->id;
				m->st.last_excluded_quiet = quiet;
				member_remove(m, g, i, IL_VR_EXCLUDE);
				continue; /* the last member moved into slot i */
			}
			if (m->cfg.suspect_ns && quiet >= m->cfg.suspect_ns && !mb->suspected) {
				mb->suspected = true;
				m->st.suspicions++;
			}
			i++;
		}
	}
}

/* The window every sender gets: W, shrunk so that all senders' unstable
 * messages fit in the fullest receiver's free buffer, in steps of W/8 so
 * that small changes in buffer_free do not each cost a CREDIT. */
static uint32_t window_of(const struct il_mship *m, const struct il_mgroup *g)
{
	uint64_t free = UINT32_MAX, w = m->cfg.window, step;
	unsigned senders = 0;

	if (w == 0)
		return 0;
	bool unknown = false;
	for (unsigned i = 0; i < g->n; i++) {
		if (g->m[i].roles & IL_ROLE_SENDER)
			senders++;
		if (!(g->m[i].roles & IL_ROLE_RECEIVER))
			continue;
		unknown |= !g->m[i].reported;
		if (g->m[i].buffer_free < free)
			free = g->m[i].buffer_free;
	}
	step = w >= 8 ? w / 8 : 1;
	/* Until every receiver has said how much room it has, a small step:
	 * a full window now could overflow a receiver that turns out small. */
	if (unknown)
		return (uint32_t)step;
	if (free == UINT32_MAX)
		return (uint32_t)w;
	free /= senders ? senders : 1;
	if (free >= w)
		return (uint32_t)w;
	free = free / step * step;
	return (uint32_t)(free ? free : 1);
}

int il_mship_apply(struct il_mship *m, const struct il_cmsg *msg, uint64_t now)
{
	const struct il_cm_member *p = &msg->u.member;
	struct il_mgroup *g;
	int i, rc;

	switch (msg->type) {
	case IL_CM_JOIN:
	case IL_CM_LEAVE:
	case IL_CM_HEARTBEAT:
	case IL_CM_ACK:
	case IL_CM_RESYNC:
		break;
	default:
		return -1;
	}
	/* member and ack share receiver and epoch offsets. */
	_Static_assert(__builtin_offsetof(struct il_cm_ack, epoch) ==
			       __builtin_offsetof(struct il_cm_member, epoch),
		       "epoch offset");
	_Static_assert(__builtin_offsetof(struct il_cm_ack, receiver) ==
			       __builtin_offsetof(struct il_cm_member, receiver),
		       "receiver offset");
	if ((msg->type == IL_CM_RESYNC ? msg->u.resync.epoch : p->epoch) != m->epoch) {
		m->st.wrong_epoch++;
		return 1;
	}
	g = group_get(m, msg->group, msg->type == IL_CM_JOIN || msg->type == IL_CM_RESYNC);
	switch (msg->type) {
	case IL_CM_RESYNC:
		if (g == NULL) {
			m->st.nomem++;
			return 1;
		}
		/* A control restart: adopt the data plane's view id and
		 * watermark (what was published before must stay published). */
		g->view_id = msg->u.resync.view_id;
		g->view_sent = g->view_id != 0; /* the data plane has it */
		if (msg->u.resync.stable_seq > g->stab.watermark)
			g->stab.watermark = msg->u.resync.stable_seq;
		if (msg->u.resync.stable_seq > g->published)
			g->published = msg->u.resync.stable_seq;
		g->window = g->window_sent = msg->u.resync.window;
		m->st.resyncs++;
		return 0;
	case IL_CM_JOIN:
		if (g == NULL) {
			m->st.nomem++;
			return 1;
		}
		return do_join(m, g, p, msg->flags, now);
	case IL_CM_LEAVE:
		return do_leave(m, g, p);
	case IL_CM_HEARTBEAT:
		i = g != NULL ? member_find(g, p->receiver) : -1;
		if (i < 0) {
			m->st.unknown_member++;
			/* Excluded while alive, or joining (its JOIN brings a
			 * change, or was lost and is retried): a copy of the
			 * view in force tells the first one it is out. */
			if (g != NULL)
				repeat_view(m, g, now);
			return 1;
		}
		heard(m, &g->m[i], now);
		m->st.heartbeats++;
		return 0;
	default: /* IL_CM_ACK */
		if (g == NULL) {
			m->st.acks_unknown++;
			return 1;
		}
		rc = il_stab_ack(&g->stab, msg->u.ack.receiver, msg->u.ack.cum_seq);
		if (rc != 0) {
			if (rc > 0)
				m->st.acks_stale++;
			else
				m->st.acks_unknown++;
			return 1;
		}
		i = member_find(g, p->receiver);
		if (i >= 0) {
			heard(m, &g->m[i], now);
			g->m[i].buffer_free = msg->u.ack.buffer_free;
			g->m[i].reported = true;
			if (msg->u.ack.s_bytes) {
				/* A WAN group: fold the RTT sample, keep p; the
				 * rate is recomputed when views are collected. */
				g->s_bytes = msg->u.ack.s_bytes;
				if (msg->u.ack.rtt_ns)
					il_tfrc_rtt_update(&g->m[i].rtt,
							   (int64_t)msg->u.ack.rtt_ns);
				g->m[i].loss_ppm = msg->u.ack.loss_ppm;
				m->views_due = true;
			}
		}
		m->st.acks++;
		mark_pending(m, g);
		return 0;
	}
}

unsigned il_mship_collect(struct il_mship *m, struct il_cmsg *out, unsigned max)
{
	unsigned keep = 0, n = 0;

	for (unsigned i = 0; i < m->n_pending; i++) {
		struct il_mgroup *g = m->by_id[m->pending[i]];

		if (m->cfg.commit_views && (g->removal_due || g->commit_wait)) {
			/* A receiver's removal is not committed yet: a watermark
			 * computed without it must wait. */
			m->pending[keep++] = g->id;
			continue;
		}
		il_stab_update(&g->stab);
		if (g->stab.watermark <= g->published) {
			g->pending = false;
			continue;
		}
		/* Stays pending until il_mship_published() confirms it. */
		m->pending[keep++] = g->id;
		if (n < max) {
			struct il_cmsg *o = &out[n++];

			memset(o, 0, sizeof(*o));
			o->type = IL_CM_WATERMARK;
			o->len = sizeof(o->u.wm);
			o->group = g->id;
			o->u.wm.epoch = m->epoch;
			o->u.wm.receivers = g->stab.n;
			o->u.wm.stable_seq = g->stab.watermark;
			o->u.wm.view_id = (uint32_t)g->view_id;
		}
	}
	m->n_pending = keep;
	return n;
}

void il_mship_published(struct il_mship *m, const struct il_cmsg *msgs, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct il_mgroup *g = m->by_id[msgs[i].group];

		if (g != NULL && msgs[i].u.wm.stable_seq > g->published) {
			g->published = msgs[i].u.wm.stable_seq;
			m->st.published++;
		}
	}
}

void il_mship_new_epoch(struct il_mship *m, uint32_t epoch, uint64_t now)
{
	uint32_t old = m->epoch;

	m->epoch = epoch;
	m->st.epochs++;
	for (unsigned k = 0; k < m->n_groups; k++) {
		struct il_mgroup *g = m->by_id[m->groups[k]];

		/* Every live receiver acked at least the minimum: below it
		 * nothing of the old epoch can be missing anywhere. */
		il_stab_update(&g->stab);
		g->final_epoch = old;
		g->final_wm = g->stab.watermark;
		/* A restart within the same epoch (clock) cannot be told from
		 * a live watermark: say nothing rather than something wrong. */
		g->final_due = old != epoch;
		il_stab_reset(&g->stab, epoch);
		for (unsigned i = 0; i < g->n; i++)
			if (g->m[i].roles & IL_ROLE_RECEIVER)
				il_stab_add(&g->stab, g->m[i].id, 0);
		/* Nobody could be heard while the data plane was down. */
		for (unsigned i = 0; i < g->n; i++) {
			g->m[i].last_heard_ns = now;
			g->m[i].suspected = false;
		}
		g->published = 0;
		g->view_start = 0;
		g->window_sent = UINT32_MAX;
		g->rate_sent = 0; /* the new data plane has no rate yet */
		g->slow_start = false;
		view_change(m, g, IL_VR_EPOCH, 1);
	}
}

void il_mship_views_committed(struct il_mship *m)
{
	for (unsigned k = 0; k < m->n_groups; k++) {
		struct il_mgroup *g = m->by_id[m->groups[k]];

		if (g->commit_wait) {
			g->commit_wait = false;
			mark_pending(m, g);
		}
	}
}

void il_mship_takeover(struct il_mship *m, uint32_t epoch, uint32_t prev,
		       const struct il_mship_seed *seeds, unsigned n_seeds, uint64_t now)
{
	groups_free(m);
	m->epoch = epoch;
	m->st.epochs++;
	m->views_due = false;
	for (unsigned s = 0; s < n_seeds; s++) {
		const struct il_mship_seed *sd = &seeds[s];
		struct il_mgroup *g = group_get(m, sd->group, true);

		if (g == NULL) {
			m->st.nomem++;
			continue;
		}
		g->view_id = sd->view_id;
		for (unsigned i = 0; i < sd->n; i++) {
			if (g->n == g->cap) {
				unsigned cap = g->cap ? 2 * g->cap : 8;
				struct il_member *nm = realloc(g->m, cap * sizeof(*nm));

				if (nm == NULL) {
					m->st.nomem++;
					break;
				}
				g->m = nm;
				g->cap = cap;
			}
			struct il_member *mb = &g->m[g->n++];

			*mb = (struct il_member){ .id = sd->m[i].id,
						  .roles = sd->m[i].roles ? sd->m[i].roles
									  : IL_ROLE_RECEIVER,
						  .incarnation = sd->m[i].incarnation,
						  .buffer_free = UINT32_MAX, .joined_ns = now,
						  .last_heard_ns = now };
			il_tfrc_rtt_init(&mb->rtt, IL_MSHIP_RTT_WEIGHT);
			if (mb->roles & IL_ROLE_RECEIVER)
				il_stab_add(&g->stab, mb->id, 0);
		}
		g->final_epoch = prev;
		g->final_wm = sd->cut;
		g->final_due = prev != 0 && sd->has_cut;
		g->window_sent = UINT32_MAX;
		view_change(m, g, IL_VR_EPOCH, 1);
	}
}

uint32_t il_mship_wan_rate(const struct il_mgroup *g)
{
	double best = INFINITY;

	if (g->s_bytes == 0)
		return 0;
	for (unsigned i = 0; i < g->n; i++) {
		const struct il_member *mb = &g->m[i];

		if (!(mb->roles & IL_ROLE_RECEIVER) || mb->rtt.samples == 0 || mb->loss_ppm == 0)
			continue;
		double p = mb->loss_ppm >= IL_ACK_PPM_MAX ? 1.0 : mb->loss_ppm / 1e6;
		double t = il_tfrc_rate(8.0 * g->s_bytes, mb->rtt.srtt_ns > 0 ? mb->rtt.srtt_ns / 1e9
									 : 1e-9, p);
		if (t < best)
			best = t;
	}
	if (!isfinite(best))
		return 0;
	best /= 1000.0;
	if (best < 1)
		return 1;
	return best >= (double)(UINT32_MAX - 1) ? UINT32_MAX - 1 : (uint32_t)best;
}

static uint32_t clamp_kbps(double x)
{
	if (!(x >= 1))
		return 1;
	return x >= (double)(UINT32_MAX - 1) ? UINT32_MAX - 1 : (uint32_t)x;
}

uint32_t il_mship_wan_update(struct il_mgroup *g, uint64_t now)
{
	uint32_t eq = il_mship_wan_rate(g);
	double rtt_ns = 0;

	if (eq != 0 || g->s_bytes == 0) {
		g->slow_start = false;
		return eq;
	}
	for (unsigned i = 0; i < g->n; i++)
		if ((g->m[i].roles & IL_ROLE_RECEIVER) && g->m[i].rtt.samples > 0 &&
		    g->m[i].rtt.srtt_ns > rtt_ns)
			rtt_ns = g->m[i].rtt.srtt_ns;
	if (!(rtt_ns >= 1000)) { /* no sample yet (or a meaningless one) */
		g->slow_start = false;
		return 0;
	}
	double pkt_kbit = 8.0 * g->s_bytes / 1000, rtt_s = rtt_ns / 1e9;

	il_stab_update(&g->stab); /* monotone: il_mship_collect publishes it */
	uint64_t wm = g->stab.watermark;

	if (!g->slow_start) {
		g->slow_start = true;
		g->ss_kbps = clamp_kbps(fmax(4 * pkt_kbit / rtt_s, (double)g->rate_kbps));
		g->ss_at_ns = now;
		g->ss_wm = wm;
	} else if (wm < g->ss_wm) { /* a new epoch: the sequence space restarted */
		g->ss_at_ns = now;
		g->ss_wm = wm;
	} else if ((double)(now - g->ss_at_ns) >= rtt_ns) {
		double got = (double)(wm - g->ss_wm) * pkt_kbit / ((double)(now - g->ss_at_ns) / 1e9);

		g->ss_kbps = clamp_kbps(fmax(fmin(2.0 * g->ss_kbps, 2 * got), pkt_kbit / rtt_s));
		g->ss_at_ns = now;
		g->ss_wm = wm;
	}
	return g->ss_kbps;
}

bool il_mship_rate_moved(uint32_t sent, uint32_t now)
{
	if (sent == now)
		return false;
	if (sent == 0 || now == 0)
		return true;
	uint32_t d = sent > now ? sent - now : now - sent;
	return d > sent / 16;
}

static unsigned view_msgs(struct il_mship *m, struct il_mgroup *g, struct il_cmsg *out)
{
	unsigned n = 0;
	struct il_cmsg *o = &out[n++];

	memset(o, 0, sizeof(*o));
	o->type = IL_CM_VIEW;
	o->len = sizeof(o->u.view);
	o->group = g->id;
	o->u.view = (struct il_cm_view){ .epoch = m->epoch, .view_id = (uint32_t)g->view_id,
					 .start_seq = g->view_start,
					 .n_members = (uint16_t)g->n,
					 .reason = g->view_reason, .window = g->window };
	for (unsigned i = 0; i < g->n; i += IL_CM_VIEW_CHUNK) {
		o = &out[n++];
		memset(o, 0, sizeof(*o));
		o->type = IL_CM_VIEW_MEMBERS;
		o->len = sizeof(o->u.vm);
		o->group = g->id;
		o->u.vm.view_id = (uint32_t)g->view_id;
		o->u.vm.index = (uint16_t)i;
		for (unsigned k = i; k < g->n && k < i + IL_CM_VIEW_CHUNK; k++) {
			o->u.vm.m[k - i].id = g->m[k].id;
			o->u.vm.m[k - i].roles = g->m[k].roles;
			o->u.vm.count++;
		}
	}
	return n;
}

unsigned il_mship_collect_views(struct il_mship *m, struct il_cmsg *out, unsigned max,
				uint64_t now)
{
	unsigned n = 0;
	bool left = false;

	if (!m->views_due && m->cfg.window == 0)
		return 0;
	for (unsigned k = 0; k < m->n_groups; k++) {
		struct il_mgroup *g = m->by_id[m->groups[k]];
		unsigned need = 0;
		uint32_t w = window_of(m, g);

		if (w != g->window) {
			g->window = w;
		}
		g->rate_kbps = il_mship_wan_update(g, now);
		bool rate_due = il_mship_rate_moved(g->rate_sent, g->rate_kbps);
		if (g->view_due)
			g->repeat_due = false; /* the new view goes instead */
		need += g->final_due + g->repeat_due;
		need += g->view_due ? 1 + (g->n + IL_CM_VIEW_CHUNK - 1) / IL_CM_VIEW_CHUNK : 0;
		/* The VIEW carries the window, not the rate: a CREDIT follows
		 * it in the same batch when the rate moved. */
		need += g->view_due ? rate_due : (g->window != g->window_sent || rate_due);
		if (need == 0)
			continue;
		if (n + need > max) {
			left = true;
			continue;
		}
		if (g->final_due) {
			struct il_cmsg *o = &out[n++];

			memset(o, 0, sizeof(*o));
			o->type = IL_CM_WATERMARK;
			o->len = sizeof(o->u.wm);
			o->group = g->id;
			o->u.wm.epoch = g->final_epoch;
			o->u.wm.stable_seq = g->final_wm;
			o->u.wm.view_id = (uint32_t)g->view_id;
			g->final_due = false;
		}
		if (g->repeat_due) {
			struct il_cmsg *o = &out[n++];

			memset(o, 0, sizeof(*o));
			o->type = IL_CM_VIEW;
			o->flags = IL_CMF_REPEAT;
			o->len = sizeof(o->u.view);
			o->group = g->id;
			o->u.view = (struct il_cm_view){ .epoch = m->epoch,
							 .view_id = (uint32_t)g->view_id,
							 .n_members = (uint16_t)g->n,
							 .window = g->window };
			g->repeat_due = false;
			g->sent_ns = now;
			m->st.view_repeats++;
		}
		if (g->view_due) {
			/* Every joiner of this view is told the same start: count
			 * each from there (the watermark is at or below the
			 * earliest join point, so this never pulls it back). */
			for (unsigned i = 0; i < g->n; i++) {
				if (g->m[i].fresh && g->view_start &&
				    (g->m[i].roles & IL_ROLE_RECEIVER)) {
					il_stab_remove(&g->stab, g->m[i].id);
					il_stab_add(&g->stab, g->m[i].id, g->view_start);
				}
				g->m[i].fresh = false;
			}
			n += view_msgs(m, g, &out[n]);
			g->view_due = false;
			g->view_sent = true;
			g->sent_ns = now;
			g->commit_wait = m->cfg.commit_views && g->removal_due;
			g->removal_due = false;
			g->view_start = 0;
			g->window_sent = g->window; /* the VIEW carries it */
			m->st.views++;
		}
		if (!g->view_due && (g->window != g->window_sent || rate_due)) {
			struct il_cmsg *o = &out[n++];

			memset(o, 0, sizeof(*o));
			o->type = IL_CM_CREDIT;
			o->len = sizeof(o->u.credit);
			o->group = g->id;
			o->u.credit.epoch = m->epoch;
			o->u.credit.window = g->window;
			o->u.credit.rate_kbps = g->rate_kbps;
			g->window_sent = g->window;
			g->rate_sent = g->rate_kbps;
			m->st.credits++;
		}
	}
	m->views_due = left;
	return n;
}
