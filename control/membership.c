/* SPDX-License-Identifier: BSD-3-Clause
 * Group membership (JOIN/LEAVE/HEARTBEAT) feeding the stability watermark.
 */
#include <stdlib.h>
#include <string.h>

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

static int do_join(struct il_mship *m, struct il_mgroup *g, const struct il_cm_member *p,
		   uint64_t now)
{
	int i = member_find(g, p->receiver);

	if (i >= 0) {
		/* A repeated JOIN (the data plane re-sending its state after a
		 * control restart, or a retry) only refreshes liveness. */
		g->m[i].last_heard_ns = now;
		return 1;
	}
	if (g->n == g->cap) {
		unsigned cap = g->cap ? 2 * g->cap : 8;
		struct il_member *nm = realloc(g->m, cap * sizeof(*nm));

		if (nm == NULL)
			goto nomem;
		g->m = nm;
		g->cap = cap;
	}
	if (il_stab_add(&g->stab, p->receiver, p->seq) < 0)
		goto nomem;
	g->m[g->n++] = (struct il_member){ .id = p->receiver, .joined_ns = now,
					   .last_heard_ns = now };
	g->view_id++;
	m->st.joins++;
	mark_pending(m, g);
	return 0;
nomem:
	m->st.nomem++;
	return 1;
}

static int do_leave(struct il_mship *m, struct il_mgroup *g, const struct il_cm_member *p)
{
	int i = g != NULL ? member_find(g, p->receiver) : -1;

	if (i < 0) {
		m->st.unknown_member++;
		return 1;
	}
	g->m[i] = g->m[--g->n];
	il_stab_remove(&g->stab, p->receiver);
	g->view_id++;
	m->st.leaves++;
	/* The minimum may now be held by someone further ahead. */
	mark_pending(m, g);
	return 0;
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
	if (p->epoch != m->epoch) {
		m->st.wrong_epoch++;
		return 1;
	}
	g = group_get(m, msg->group, msg->type == IL_CM_JOIN);
	switch (msg->type) {
	case IL_CM_JOIN:
		if (g == NULL) {
			m->st.nomem++;
			return 1;
		}
		return do_join(m, g, p, now);
	case IL_CM_LEAVE:
		return do_leave(m, g, p);
	case IL_CM_HEARTBEAT:
		i = g != NULL ? member_find(g, p->receiver) : -1;
		if (i < 0) {
			m->st.unknown_member++;
			return 1;
		}
		g->m[i].last_heard_ns = now;
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
		if (i >= 0)
			g->m[i].last_heard_ns = now;
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
