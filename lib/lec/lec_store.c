/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The decoder's bounded stores.
 *
 * Messages: a FIFO ring of records, one per id the decoder knows, held
 * (received or recovered, payload in the record's slot) or awaited (named
 * missing by a stored repair); an open-addressing hash table (linear
 * probing, backward-shift deletion, so no tombstones) finds them by id.
 * When the ring is full the oldest record is evicted. Evicting a record
 * moves its group's horizon up to its id: an id at or below the horizon
 * that is not in the store may have been held and forgotten, so it is
 * never recovered (that is what makes "never delivered twice" hold with
 * bounded memory), and a message arriving there is reported as unknown.
 *
 * Repairs missing several messages: a ring with holes (a repair leaves as
 * soon as it is used). A stored repair is kept reduced, its held messages
 * XORed out, so its payload is the XOR of the messages it still misses.
 * Each awaited record lists the stored repairs waiting for it (with their
 * generation, so a reused slot is not mistaken for the repair).
 */
#include <string.h>

#include "lec_internal.h"

uint32_t lec_id_hash(const struct il_lec_id *id)
{
	uint64_t a = id->seq, b = (uint64_t)id->epoch << 16 | id->group;
	uint64_t h = a * 0x9e3779b97f4a7c15ull ^ b * 0xc2b2ae3d27d4eb4full;

	h ^= h >> 32;
	h *= 0xd6e8feb86659fd93ull;
	return (uint32_t)(h >> 32);
}

uint32_t lec_lookup(const struct il_lec *l, const struct il_lec_id *id, uint32_t hash)
{
	for (uint32_t i = hash & l->ht_mask;; i = (i + 1) & l->ht_mask) {
		uint32_t ri = l->ht[i];

		if (ri == LEC_NONE)
			return LEC_NONE;
		if (l->rec[ri].hash == hash && il_lec_id_eq(&l->rec[ri].id, id))
			return ri;
	}
}

static void ht_insert(struct il_lec *l, uint32_t ri)
{
	uint32_t i = l->rec[ri].hash & l->ht_mask;

	while (l->ht[i] != LEC_NONE)
		i = (i + 1) & l->ht_mask;
	l->ht[i] = ri;
}

static void ht_delete(struct il_lec *l, uint32_t ri)
{
	uint32_t mask = l->ht_mask, hole = l->rec[ri].hash & mask;

	while (l->ht[hole] != ri)
		hole = (hole + 1) & mask;
	/* Pull later entries of the cluster back into the hole unless their
	 * home slot lies cyclically after the hole (they would become
	 * unreachable). */
	for (uint32_t j = (hole + 1) & mask; l->ht[j] != LEC_NONE; j = (j + 1) & mask) {
		uint32_t home = l->rec[l->ht[j]].hash & mask;
		bool movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);

		if (movable) {
			l->ht[hole] = l->ht[j];
			hole = j;
		}
	}
	l->ht[hole] = LEC_NONE;
}

static inline uint32_t ring_next(const struct lec_ring *q, uint32_t i)
{
	return i + 1 == q->n ? 0 : i + 1;
}

/* The next position of q. A full ring gives back its oldest position,
 * which is also the one returned: the caller evicts what is still there. */
static uint32_t ring_take(struct lec_ring *q, bool *full)
{
	uint32_t i;

	*full = q->used == q->n;
	if (*full) {
		q->tail = ring_next(q, q->tail);
		q->used--;
	}
	i = q->head;
	q->head = ring_next(q, i);
	q->used++;
	return i;
}

bool lec_stale(const struct lec_group *g, const struct il_lec_id *id)
{
	return g->h_valid &&
	       (id->epoch < g->h_epoch || (id->epoch == g->h_epoch && id->seq <= g->h_seq));
}

void lec_rec_free(struct il_lec *l, uint32_t ri, bool evicted)
{
	struct lec_rec *r = &l->rec[ri];

	if (r->state == LEC_R_AWAITED) {
		/* the repairs waiting for it can never complete */
		if (evicted)
			l->st.drop_unrecoverable++;
		for (unsigned k = 0; k < r->nref; k++) {
			if (lec_ref_valid(l, r->ref[k])) {
				lec_pend_free(l, r->ref[k].idx);
				l->st.drop_repair_orphan++;
			}
		}
	}
	if (evicted) {
		struct lec_group *g = &l->grp[r->gslot];

		if (!g->h_valid || r->id.epoch > g->h_epoch ||
		    (r->id.epoch == g->h_epoch && r->id.seq > g->h_seq)) {
			g->h_valid = true;
			g->h_epoch = r->id.epoch;
			g->h_seq = r->id.seq;
		}
	}
	ht_delete(l, ri);
	r->state = LEC_R_FREE;
	r->nref = 0;
	r->gen++;
	l->rec_live--;
	l->st.msgs_live = l->rec_live;
}

uint32_t lec_rec_alloc(struct il_lec *l, const struct il_lec_id *id, uint32_t hash,
		       uint16_t gslot, uint64_t now, uint8_t state)
{
	struct lec_rec *r;
	bool full;
	uint32_t ri = ring_take(&l->rring, &full);

	if (full && l->rec[ri].state != LEC_R_FREE) {
		lec_rec_free(l, ri, true);
		l->st.drop_msg_evict_count++;
	}
	r = &l->rec[ri];
	r->id = *id;
	r->hash = hash;
	r->gslot = gslot;
	r->state = state;
	r->len = 0;
	r->nref = 0;
	r->t_ns = now;
	r->disc_new = l->st.data_new;
	ht_insert(l, ri);
	if (++l->rec_live > l->st.msgs_hwm)
		l->st.msgs_hwm = l->rec_live;
	l->st.msgs_live = l->rec_live;
	return ri;
}

void lec_pend_free(struct il_lec *l, uint32_t pi)
{
	struct lec_pend *p = &l->pend[pi];

	if (!p->live)
		return;
	p->live = 0;
	p->gen++;
	l->st.repairs_live--;
}

uint32_t lec_pend_alloc(struct il_lec *l, uint64_t now)
{
	struct lec_pend *p;
	bool full;
	uint32_t pi = ring_take(&l->pring, &full);

	if (full && l->pend[pi].live) {
		lec_pend_free(l, pi);
		l->st.drop_repair_evict_count++;
	}
	p = &l->pend[pi];
	p->live = 1;
	p->nmiss = 0;
	p->t_ns = now;
	if (++l->st.repairs_live > l->st.repairs_hwm)
		l->st.repairs_hwm = l->st.repairs_live;
	return pi;
}

bool lec_ref_add(struct il_lec *l, struct lec_rec *r, uint32_t pi)
{
	if (r->nref == LEC_REF_MAX) {
		unsigned n = 0;

		for (unsigned k = 0; k < r->nref; k++)
			if (lec_ref_valid(l, r->ref[k]))
				r->ref[n++] = r->ref[k];
		r->nref = (uint8_t)n;
	}
	if (r->nref == LEC_REF_MAX) {
		l->st.drop_repair_refs++;
		return false;
	}
	r->ref[r->nref++] = (struct lec_ref){ .idx = pi, .gen = l->pend[pi].gen };
	return true;
}

void lec_expire(struct il_lec *l, uint64_t now)
{
	uint64_t age = l->cfg.max_age_ns;
	struct lec_ring *q;

	if (age == 0 || !l->cfg.decode)
		return;
	/* repairs first: one that outlived its age is counted as aged, not as
	 * orphaned by the messages it awaits */
	for (q = &l->pring; q->used > 0; q->tail = ring_next(q, q->tail), q->used--) {
		struct lec_pend *p = &l->pend[q->tail];

		if (p->live) {
			if (now < p->t_ns || now - p->t_ns <= age)
				break;
			lec_pend_free(l, q->tail);
			l->st.drop_repair_evict_age++;
		}
	}
	for (q = &l->rring; q->used > 0; q->tail = ring_next(q, q->tail), q->used--) {
		struct lec_rec *r = &l->rec[q->tail];

		if (r->state != LEC_R_FREE) {
			if (now < r->t_ns || now - r->t_ns <= age)
				break;
			lec_rec_free(l, q->tail, true);
			l->st.drop_msg_evict_age++;
		}
	}
}

void lec_group_purge(struct il_lec *l, uint32_t gslot)
{
	struct lec_group *g = &l->grp[gslot];

	if (l->cfg.decode) {
		for (uint32_t i = 0; i < l->cfg.store_msgs; i++)
			if (l->rec[i].state != LEC_R_FREE && l->rec[i].gslot == gslot)
				lec_rec_free(l, i, false);
	}
	g->h_valid = false;
	g->link_first = 0;
	g->link_n = 0;
}

void il_lec_tick(struct il_lec *l, uint64_t now_ns)
{
	lec_expire(l, now_ns);
}
