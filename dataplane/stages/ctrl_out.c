/* SPDX-License-Identifier: BSD-3-Clause
 * What the control stage sends to a group: STABLE when idle, VIEW with
 * each sender's Fast-Join start point, CREDIT as the watermark frees each
 * sender's window (docs/control.md, sections 9, 11 and 12).
 */
#include <string.h>

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <interlink/app.h>
#include <interlink/tfrc.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "ctrl.h"

/* The header of every frame this stage sends: stamped, with the group's
 * next sequence and its watermark; callers change what differs. */
static struct il_hdr_fields ctrl_hdr(const struct ctrl *c, unsigned gi, uint8_t type)
{
	return (struct il_hdr_fields){ .type = type, .flags = IL_F_STAMPED | IL_F_STABLE_VALID,
				       .group_id = c->app->groups[gi].id, .epoch = c->seq->epoch,
				       .global_seq = c->seq->groups[gi].next,
				       .stable_seq = c->g[gi].wm };
}

/* A frame of the appliance's own to group gi's multicast address with
 * header h; returns the body (body_len bytes, for the caller to fill) or
 * NULL (counted). */
static uint8_t *frame_new(struct il_stage *st, struct ctrl *c, unsigned gi,
			  const struct il_hdr_fields *h, uint16_t body_len, struct rte_mbuf **mp)
{
	struct il_path path;
	uint8_t *f;
	/* Signed frames get the AUTH option's room now; frame_send moves the
	 * body behind it once it is written. */
	struct rte_mbuf *m = il_app_frame_alloc(c->app, IL_UDP_HDRS_LEN + IL_HDR_LEN + body_len +
						il_stage_auth_room(&c->auth), &f);

	if (unlikely(m == NULL)) {
		st->ctr[CT_C_DROP_TX_NO_MBUF]++;
		return NULL;
	}
	il_app_group_path(c->app, c->tx, gi, &path);
	*mp = m;
	return il_frame_put(f, &path, 0, h, body_len);
}

/* The body is in place: the UDP checksum, and out. */
static void frame_send(struct il_stage *st, struct ctrl *c, struct rte_mbuf *m)
{
	il_stage_auth_sign(&c->auth, m);
	il_udp_csum_set(rte_pktmbuf_mtod(m, uint8_t *) + IL_ETH_HLEN);
	il_emit(st, c->tx, m);
}

void ctrl_send_stable(struct il_stage *st, struct ctrl *c, unsigned gi, uint32_t epoch,
		      uint64_t wm)
{
	struct il_hdr_fields h = ctrl_hdr(c, gi, IL_T_STABLE);
	struct rte_mbuf *m;

	h.epoch = epoch;
	h.stable_seq = wm;
	if (epoch != c->seq->epoch)
		h.global_seq = 0; /* that sequence space is gone */
	uint8_t *b = frame_new(st, c, gi, &h, IL_STABLE_LEN, &m);
	if (b == NULL)
		return;
	il_stable_put(b, c->g[gi].view_id);
	frame_send(st, c, m);
	st->ctr[CT_C_TX_STABLE]++;
}

static struct csender *sender_find(struct cgroup *g, uint32_t id)
{
	for (unsigned i = 0; i < g->n_senders; i++)
		if (g->s[i].id == id)
			return &g->s[i];
	return NULL;
}

static struct csender *sender_get(struct il_stage *st, struct cgroup *g, uint32_t id)
{
	struct csender *found = sender_find(g, id);

	if (found != NULL)
		return found;
	if (g->n_senders == CTL_MAX_SENDERS) {
		st->ctr[CT_C_SENDER_TABLE_FULL]++;
		return NULL;
	}
	struct csender *s = &g->s[g->n_senders++];
	*s = (struct csender){ .id = id, .stable_next = 1 };
	return s;
}

/* The rate a sender is told: in a WAN group its share of the group's rate
 * (docs/control.md 12, "max-min split"), an equal part until a split has
 * counted it; elsewhere 0 (no limit). */
static uint32_t sender_rate(const struct cgroup *g, const struct csender *s)
{
	if (g->rate_kbps == 0)
		return 0;
	if (s->share_kbps)
		return s->share_kbps;
	uint32_t part = g->rate_kbps / (g->n_split + 1u);
	return part ? part : 1;
}

static void credit_frame(struct il_stage *st, struct ctrl *c, unsigned gi, struct csender *s,
			 uint64_t limit, uint64_t resume)
{
	struct cgroup *g = &c->g[gi];
	struct il_hdr_fields h = ctrl_hdr(c, gi, IL_T_CREDIT);
	struct rte_mbuf *m;

	h.sender_id = s->id;
	h.sender_seq = resume;
	uint8_t *b = frame_new(st, c, gi, &h, IL_CREDIT_LEN, &m);
	if (b == NULL)
		return;
	s->share_sent = sender_rate(g, s);
	il_credit_put(b, limit, g->window, s->share_sent);
	frame_send(st, c, m);
	st->ctr[CT_C_TX_CREDIT]++;
}

/* resume != 0: the header's sender_seq tells the sender to go on from
 * there (frames from it on were not stamped). Such a notice repeats the
 * last grant (limit_seq 0 if there was none, or without a window): a new
 * grant goes only after the STABLE behind it (ctrl_credits_advance). */
static void send_credit_resume(struct il_stage *st, struct ctrl *c, unsigned gi,
			       struct csender *s, uint64_t resume)
{
	struct cgroup *g = &c->g[gi];
	uint64_t limit = resume ? (g->window ? s->limit_sent : 0) : s->stable_next + g->window;

	credit_frame(st, c, gi, s, limit, resume);
	if (!resume) {
		s->limit_sent = limit;
		s->granted[s->granted_i++ & 3] = limit;
	}
}

static void send_credit(struct il_stage *st, struct ctrl *c, unsigned gi, struct csender *s)
{
	send_credit_resume(st, c, gi, s, 0);
}

/* The sequencer refused frames of some senders because earlier ones never
 * reached it (docs/control.md, "Sender FIFO"): each such sender gets a
 * CREDIT naming the sender_seq to go on from, the same point at most once
 * per resume_interval_us (the frames it still has in flight are refused
 * too, and must not each cost a notice). */
void ctrl_send_resumes(struct il_stage *st, struct ctrl *c, uint64_t now_tsc)
{
	c->seq->resume_due = false;
	for (unsigned gi = 0; gi < c->app->n_groups; gi++) {
		struct il_seq_group *sg = &c->seq->groups[gi];

		for (unsigned i = 0; sg->n_fifo && i < IL_SEQ_FIFO_SLOTS; i++) {
			struct il_seq_fifo *f = &sg->fifo[i];

			if (!f->used)
				continue;
			if (f->dup) {
				/* A frame stamped already came again: its sender
				 * does not know it stable, so the grant that says
				 * so was lost. It goes again (with a window). */
				struct csender *cs;

				f->dup = false;
				if (c->g[gi].window != 0 && now_tsc - f->dup_tsc >= c->resume_tsc &&
				    (cs = sender_get(st, &c->g[gi], f->id)) != NULL) {
					send_credit(st, c, gi, cs);
					f->dup_tsc = now_tsc;
					st->ctr[CT_C_TX_CREDIT_DUP]++;
				}
			}
			if (!f->notify)
				continue;
			f->notify = false;
			if (f->told_next == f->next && now_tsc - f->told_tsc < c->resume_tsc)
				continue;
			struct csender *cs = sender_get(st, &c->g[gi], f->id);
			if (cs == NULL)
				continue;
			send_credit_resume(st, c, gi, cs, f->next);
			f->told_next = f->next;
			f->told_tsc = now_tsc;
			st->ctr[CT_C_TX_RESUME]++;
		}
	}
}

/* The sequencer saw senders join as new incarnations (restarted, with
 * their sender_seq from 1 again): their credits start afresh, and frames
 * of their previous incarnation, which may still become stable, no longer
 * move their window. Otherwise the new incarnation would be granted (and
 * told stable) what its predecessor sent. */
void ctrl_new_incarnations(struct il_stage *st, struct ctrl *c)
{
	c->seq->inc_due = false;
	for (unsigned gi = 0; gi < c->app->n_groups; gi++) {
		struct il_seq_group *sg = &c->seq->groups[gi];

		for (unsigned i = 0; sg->n_fifo && i < IL_SEQ_FIFO_SLOTS; i++) {
			struct il_seq_fifo *f = &sg->fifo[i];

			if (!f->used || !f->ctl_reset)
				continue;
			f->ctl_reset = false;
			struct csender *cs = sender_get(st, &c->g[gi], f->id);
			if (cs == NULL)
				continue;
			*cs = (struct csender){ .id = cs->id, .from_seq = f->join_seq,
						.stable_next = 1 };
		}
	}
}

/* The watermark moved: every frame newly below it is stable, so its
 * sender's window slides. Each history frame is walked once. */
void ctrl_credits_advance(struct il_stage *st, struct ctrl *c, unsigned gi)
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
		if (cs == NULL || e->first < cs->from_seq)
			continue; /* a previous incarnation's */
		if (e->sender_seq + e->count > cs->stable_next)
			cs->stable_next = e->sender_seq + e->count;
		/* WAN groups: what each sender got through, for the split. */
		if (g->rate_kbps && e->len > IL_UDP_HDRS_LEN)
			cs->bytes += e->len - IL_UDP_HDRS_LEN;
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
				ctrl_send_stable(st, c, gi, c->seq->epoch, g->wm);
			first = false;
			send_credit(st, c, gi, &g->s[i]);
		}
}

/* A grant to every sender of the group (only_grown: those whose limit
 * grew since their last one). */
void ctrl_credits_all(struct il_stage *st, struct ctrl *c, unsigned gi, bool only_grown)
{
	struct cgroup *g = &c->g[gi];

	if (g->window == 0)
		return;
	for (unsigned i = 0; i < g->n_senders; i++)
		if (!only_grown || g->s[i].stable_next + g->window > g->s[i].limit_sent)
			send_credit(st, c, gi, &g->s[i]);
}

/* Each sender's next sender_seq at global sequence `start`: the first of
 * its frames at or after start, else one past its last frame before it,
 * within its current incarnation. The history holds every frame above the
 * watermark (UTO), and start is at or above it. */
static uint64_t sender_next_at(const struct ctrl *c, unsigned gi, const struct csender *cs,
			       uint64_t start)
{
	const struct il_seq *s = c->seq;
	const struct il_seq_group *sg = &s->groups[gi];
	uint64_t next = cs->stable_next;

	for (uint32_t idx = il_seq_hist_find(s, gi, c->g[gi].wm); idx < sg->n; idx++) {
		const struct il_hist_ent *e = il_seq_hist_at(s, gi, idx);

		if (e->sender != cs->id || e->first < cs->from_seq)
			continue;
		if (e->first >= start)
			return e->sender_seq;
		next = e->sender_seq + e->count;
	}
	return next;
}

void ctrl_view_install(struct il_stage *st, struct ctrl *c, unsigned gi)
{
	struct cgroup *g = &c->g[gi];
	struct cmember old[CTL_MAX_MEMBERS];
	uint16_t n_old = g->n_members, n = g->pv.n_members;

	memcpy(old, g->m, sizeof(old[0]) * n_old);
	g->n_members = 0;
	g->n_receivers = 0;
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
		if (m->roles & IL_ROLE_RECEIVER)
			g->n_receivers++;
	}
	g->active = true;
	g->view_id = g->pv.view_id;
	g->window = g->pv.window;
	g->view_start = g->pv.start_seq ? g->pv.start_seq : c->seq->groups[gi].next;
	if (g->pv.epoch == c->seq->epoch && g->view_start < g->wm)
		g->view_start = g->wm;
	st->ctr[CT_C_VIEWS]++;
	ctrl_view_send(st, c, gi);
	ctrl_credits_all(st, c, gi, false);
}

/* The VIEW frame of the installed view: members, then each sender's next
 * sender_seq at the view's start, as far as one frame holds them. */
void ctrl_view_send(struct il_stage *st, struct ctrl *c, unsigned gi)
{
	struct cgroup *g = &c->g[gi];
	uint16_t room = (uint16_t)(c->app->frame_max - IL_UDP_HDRS_LEN - IL_HDR_LEN - IL_VIEW_LEN -
				   il_stage_auth_room(&c->auth));
	uint16_t nm = g->n_members, ns = g->n_senders;
	if ((uint32_t)nm * IL_VIEW_MEMBER_LEN > room)
		nm = room / IL_VIEW_MEMBER_LEN;
	if ((uint32_t)nm * IL_VIEW_MEMBER_LEN + (uint32_t)ns * IL_VIEW_SENDER_LEN > room)
		ns = (uint16_t)((room - nm * IL_VIEW_MEMBER_LEN) / IL_VIEW_SENDER_LEN);
	struct il_hdr_fields h = ctrl_hdr(c, gi, IL_T_VIEW);
	struct rte_mbuf *mb;

	h.global_seq = g->view_start;
	uint8_t *b = frame_new(st, c, gi, &h, (uint16_t)il_view_len(nm, ns), &mb);
	if (b == NULL)
		return;
	b = il_view_put(b, g->view_id, nm, ns);
	for (uint16_t i = 0; i < nm; i++)
		b = il_view_member_put(b, g->m[i].id, g->m[i].roles);
	for (uint16_t i = 0; i < ns; i++) {
		const struct il_seq_fifo *f = il_seq_fifo_get(c->seq, gi, g->s[i].id, false);

		b = il_view_sender_put(b, g->s[i].id, f != NULL ? f->incarnation : 0,
				       sender_next_at(c, gi, &g->s[i], g->view_start));
	}
	frame_send(st, c, mb);
	st->ctr[CT_C_TX_VIEW]++;
}

/* A sender's HEARTBEAT. A grant is sent once, and a sender that used its
 * whole window waits for the next: if that one is lost while nothing of
 * the sender's is in flight (all it sent is stable, so no watermark will
 * move for it and bring another grant), it would wait for ever, sending
 * only HEARTBEATs. Such a sender stands exactly at a limit it was granted
 * earlier (or has sent nothing yet, waiting for its first). So while a
 * sender has nothing in flight, stands at one of its last four limits or
 * has not sent, and a higher limit was granted, that grant goes again on
 * its HEARTBEATs, at most CTRL_CREDIT_REPEATS times, 20 ms after the grant
 * and then at doubling intervals. A sender idle anywhere else needs none. */
#define CTRL_CREDIT_REPEATS 3
#define CTRL_CREDIT_REPEAT_MS 20

void ctrl_credit_heartbeat(struct il_stage *st, struct ctrl *c, unsigned gi, uint32_t sender,
			   uint64_t now_tsc)
{
	struct cgroup *g = &c->g[gi];
	struct csender *cs = sender_find(g, sender);

	if (g->window == 0 || !g->active)
		return;
	if (cs == NULL || cs->limit_sent == 0)
		return; /* not a sender of the view, or never granted anything */
	const struct il_seq_fifo *f = il_seq_fifo_get(c->seq, gi, sender, false);
	uint64_t next = f != NULL && f->next != 0 ? f->next : cs->stable_next;

	if (next != cs->stable_next || cs->limit_sent <= next)
		return; /* frames in flight (their stability brings a grant), or no room granted */
	bool waiting = f == NULL || f->next == 0;
	for (unsigned k = 0; k < 4 && !waiting; k++)
		waiting = cs->granted[k] == next;
	if (!waiting)
		return; /* room under a grant it has: idle by choice */
	if (cs->rep_limit != cs->limit_sent) {
		/* A new grant: its repeats start 20 ms after it. */
		cs->rep_limit = cs->limit_sent;
		cs->repeats = 0;
		cs->rep_tsc = now_tsc + rte_get_tsc_hz() / 1000 * CTRL_CREDIT_REPEAT_MS;
		return;
	}
	if (cs->repeats >= CTRL_CREDIT_REPEATS || now_tsc < cs->rep_tsc)
		return;
	credit_frame(st, c, gi, cs, cs->limit_sent, 0);
	cs->repeats++;
	cs->rep_tsc = now_tsc + (rte_get_tsc_hz() / 1000 * CTRL_CREDIT_REPEAT_MS << cs->repeats);
	st->ctr[CT_C_TX_CREDIT_REPEAT]++;
}

/* A share moved enough to be worth a CREDIT (1/16, as the control process
 * does for the group's rate), or into or out of 0. */
static bool share_moved(uint32_t sent, uint32_t now)
{
	if (sent == 0 || now == 0)
		return sent != now;
	return (uint64_t)(sent > now ? sent - now : now - sent) * 16 > sent;
}

/* Thesis 4.3.3: the group's senders together get the group's rate, not
 * each of them all of it. Every split interval, each sender of the view
 * asks for a rate (il_tfrc_demand: twice its share if it used nearly all
 * of it, else what it used and a quarter, at least 1/8 of an equal part),
 * measured here from the bytes of its frames that became stable, and gets
 * its max-min fair part (il_tfrc_split). A share that moved goes out in a
 * CREDIT that repeats the sender's last grant. */
void ctrl_rate_split(struct il_stage *st, struct ctrl *c, unsigned gi, uint64_t now)
{
	struct cgroup *g = &c->g[gi];
	struct csender *who[CTL_MAX_SENDERS];
	uint32_t demand[CTL_MAX_SENDERS], share[CTL_MAX_SENDERS];
	double dt_s = (double)(now - g->split_at) / (double)rte_get_tsc_hz();
	unsigned n = 0;

	g->split_at = now;
	for (unsigned i = 0; i < g->n_senders; i++) {
		struct csender *s = &g->s[i];
		bool in = false;

		for (unsigned k = 0; k < g->n_members && !in; k++)
			in = g->m[k].id == s->id && (g->m[k].roles & IL_ROLE_SENDER);
		if (in) {
			who[n++] = s;
		} else {
			s->share_kbps = 0; /* gone: an equal part if it comes back */
			s->bytes = 0;
		}
	}
	g->n_split = (uint16_t)n;
	if (n == 0 || g->rate_kbps == 0)
		return;
	uint32_t floor = g->rate_kbps / (8 * n);

	for (unsigned k = 0; k < n; k++) {
		double used = dt_s > 0 ? (double)who[k]->bytes * 8 / 1000 / dt_s : 0;

		demand[k] = il_tfrc_demand(who[k]->share_kbps,
					   used >= (double)UINT32_MAX ? UINT32_MAX : (uint32_t)used,
					   floor ? floor : 1);
		who[k]->bytes = 0;
	}
	il_tfrc_split(g->rate_kbps, n, demand, share);
	st->ctr[CT_C_RATE_SPLITS]++;
	for (unsigned k = 0; k < n; k++) {
		who[k]->share_kbps = share[k];
		if (g->window && share_moved(who[k]->share_sent, share[k])) {
			credit_frame(st, c, gi, who[k], who[k]->limit_sent, 0);
			st->ctr[CT_C_TX_RATE]++;
		}
	}
}

/* The group's rate changed: the shares keep their proportions (the next
 * split adjusts them); from or to no rate, they start again. */
void ctrl_rate_rescale(struct cgroup *g, uint32_t old_kbps)
{
	for (unsigned i = 0; i < g->n_senders; i++) {
		struct csender *s = &g->s[i];

		if (old_kbps == 0 || g->rate_kbps == 0 || s->share_kbps == 0) {
			s->share_kbps = 0;
			continue;
		}
		uint64_t x = (uint64_t)s->share_kbps * g->rate_kbps / old_kbps;
		s->share_kbps = x == 0 ? 1 : x > UINT32_MAX ? UINT32_MAX : (uint32_t)x;
	}
}
