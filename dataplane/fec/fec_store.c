/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The decoder's bounded stores: packet records with their hash index,
 * stored repairs, and their eviction by count and by age. Layout and
 * invariants: fec_dec_internal.h.
 */
#include <string.h>

#include "fec_dec_internal.h"

uint32_t fec_id_hash(const struct il_fec_id *id)
{
	uint64_t a, b, h;

	memcpy(&a, id, 8);
	memcpy(&b, (const uint8_t *)id + 8, 4); /* IP id and length, not the check */
	b &= 0xffffffffull;
	h = a * 0x9e3779b97f4a7c15ull ^ b * 0xc2b2ae3d27d4eb4full;
	h ^= h >> 32;
	h *= 0xd6e8feb86659fd93ull;
	return (uint32_t)(h >> 32);
}

uint32_t dec_next_tuple(const struct il_fec_dec *d, const struct il_fec_id *id, uint32_t hash,
			uint32_t *pos)
{
	for (uint32_t i = *pos;; i = (i + 1) & d->ht_mask) {
		uint32_t ri = d->ht[i];

		if (ri == REC_NONE) {
			*pos = i;
			return REC_NONE;
		}
		if (d->rec[ri].hash == hash && fec_tuple_eq(&d->rec[ri].id, id)) {
			*pos = (i + 1) & d->ht_mask;
			return ri;
		}
	}
}

bool dec_rec_check(struct il_fec_dec *d, uint32_t ri)
{
	struct dec_rec *r = &d->rec[ri];
	struct il_fec_id full;
	uint32_t off = d->cfg.verify_l3_off >= 0 ? (uint32_t)d->cfg.verify_l3_off : 0;

	if (r->csum_known)
		return true;
	if (r->len <= off || il_fec_id_ipv4(rec_data(d, ri) + off, r->len - off, &full) != 0)
		return false;
	r->id.csum = full.csum;
	r->csum_known = 1;
	d->st.checks_computed++;
	return true;
}

/*
 * A recipe entry names a packet by its whole id and its packet number.
 * A kept record matches when the rest of the id agrees and either its
 * check is known and equal, or it is not known (nobody needed it) and
 * the packet numbers do not disagree. A record matched that way with a
 * different payload (two packets sharing addresses, IP id and length,
 * one of them lost) makes a recovery fail its verification, never a
 * wrong delivery. Records whose check is known always compare it.
 */
uint32_t dec_lookup(struct il_fec_dec *d, const struct il_fec_id *id, uint32_t hash, uint64_t x)
{
	uint32_t pos = hash & d->ht_mask, ri, loose = REC_NONE;

	while ((ri = dec_next_tuple(d, id, hash, &pos)) != REC_NONE) {
		const struct dec_rec *r = &d->rec[ri];

		if (r->csum_known) {
			if (r->id.csum == id->csum)
				return ri;
		} else if (loose == REC_NONE && (r->x == X_UNKNOWN || x == X_UNKNOWN || r->x == x)) {
			loose = ri;
		}
	}
	return loose;
}

static void ht_insert(struct il_fec_dec *d, uint32_t ri)
{
	uint32_t i = d->rec[ri].hash & d->ht_mask;

	while (d->ht[i] != REC_NONE)
		i = (i + 1) & d->ht_mask;
	d->ht[i] = ri;
}

/* Backward-shift deletion keeps every probe chain unbroken without
 * tombstones, so lookups stay short however long the decoder runs. */
static void ht_delete(struct il_fec_dec *d, uint32_t ri)
{
	uint32_t mask = d->ht_mask;
	uint32_t i = d->rec[ri].hash & mask;

	while (d->ht[i] != ri)
		i = (i + 1) & mask;
	for (;;) {
		uint32_t j = i, k;

		for (;;) {
			j = (j + 1) & mask;
			if (d->ht[j] == REC_NONE) {
				d->ht[i] = REC_NONE;
				return;
			}
			k = d->rec[d->ht[j]].hash & mask;
			/* The entry at j may fill the hole at i unless its home
			 * k lies cyclically in (i, j]. */
			if (i <= j ? (k <= i || k > j) : (k <= i && k > j))
				break;
		}
		d->ht[i] = d->ht[j];
		i = j;
	}
}

void dec_pend_free(struct il_fec_dec *d, uint32_t pi)
{
	struct dec_pend *p = &d->pend[pi];

	if (!p->live)
		return;
	p->live = 0;
	p->gen++;
	d->st.repairs_live--;
}

uint32_t dec_pend_alloc(struct il_fec_dec *d, uint64_t now)
{
	struct dec_pend *p;
	uint32_t pi;

	if (d->pend_used == d->npend) {
		/* The slot about to be reused is the oldest one; a repair
		 * still waiting there is evicted. */
		if (d->pend[d->pend_tail].live) {
			dec_pend_free(d, d->pend_tail);
			d->st.repair_evict_count++;
		}
		d->pend_tail = d->pend_tail + 1 == d->npend ? 0 : d->pend_tail + 1;
		d->pend_used--;
	}
	pi = d->pend_next;
	d->pend_next = pi + 1 == d->npend ? 0 : pi + 1;
	d->pend_used++;
	p = &d->pend[pi];
	p->live = 1;
	p->t_ns = now;
	p->nmiss = 0;
	if (++d->st.repairs_live > d->st.repairs_hwm)
		d->st.repairs_hwm = d->st.repairs_live;
	return pi;
}

bool dec_ref_add(struct il_fec_dec *d, struct dec_rec *r, uint32_t pi)
{
	if (r->nref == REC_MAXREF) {
		unsigned n = 0;

		for (unsigned k = 0; k < r->nref; k++)
			if (ref_valid(d, r->ref[k]))
				r->ref[n++] = r->ref[k];
		r->nref = (uint8_t)n;
	}
	if (r->nref == REC_MAXREF) {
		d->st.ref_overflow++;
		return false;
	}
	r->ref[r->nref++] = (struct rec_ref){ .idx = pi, .gen = d->pend[pi].gen };
	return true;
}

static void rec_evict_oldest(struct il_fec_dec *d, bool by_age)
{
	uint32_t ri = d->rec_old;
	struct dec_rec *r = &d->rec[ri];

	d->rec_old = ri + 1 == d->nrec ? 0 : ri + 1;
	d->rec_live--;
	d->st.pkts_live = d->rec_live;
	if (by_age)
		d->st.pkt_evict_age++;
	else
		d->st.pkt_evict_count++;
	if (r->state == REC_MISSING) {
		/* Given up on: the repairs that wait for it can never be
		 * completed through it either. */
		d->st.unrecoverable++;
		for (unsigned k = 0; k < r->nref; k++) {
			if (ref_valid(d, r->ref[k])) {
				dec_pend_free(d, r->ref[k].idx);
				d->st.repair_evict_orphan++;
			}
		}
	}
	/* Repairs naming a packet at or behind the horizon may include one
	 * we no longer hold, which would look missing: they are ignored. */
	if (r->x != X_UNKNOWN && (!d->have_horizon || r->x > d->horizon)) {
		d->horizon = r->x;
		d->have_horizon = true;
	}
	ht_delete(d, ri);
	if (r->handle != NULL)
		d->cfg.release(r->handle, d->cfg.release_arg);
	r->ext = NULL;
	r->handle = NULL;
	r->state = REC_FREE;
	r->nref = 0;
}

uint32_t dec_rec_alloc(struct il_fec_dec *d, const struct il_fec_id *id, uint32_t hash,
		       uint64_t now, uint8_t state)
{
	struct dec_rec *r;
	uint32_t ri;

	if (d->rec_live == d->nrec)
		rec_evict_oldest(d, false);
	ri = d->rec_next;
	d->rec_next = ri + 1 == d->nrec ? 0 : ri + 1;
	d->rec_live++;
	if (d->rec_live > d->st.pkts_hwm)
		d->st.pkts_hwm = d->rec_live;
	d->st.pkts_live = d->rec_live;
	r = &d->rec[ri];
	r->id = *id;
	r->hash = hash;
	r->x = X_UNKNOWN;
	r->t_ns = now;
	r->len = 0;
	r->state = state;
	r->nref = 0;
	r->ext = NULL;
	r->handle = NULL;
	r->csum_known = 1;
	ht_insert(d, ri);
	return ri;
}

/*
 * A record may leave by age once every repair that can hold it has been
 * sent (the newest packet number seen is a settle span past it): evicting
 * it earlier could make a late repair take it for lost and deliver it a
 * second time. A record whose number no repair has told us (all its
 * repairs lost so far) borrows the number of a record that arrived just
 * after it, with a margin for reordering; failing that it leaves at four
 * times the age limit, so it cannot hold up the records behind it long.
 */
#define SETTLE_PEEK 8
#define SETTLE_REORDER 64

static bool rec_settled(const struct il_fec_dec *d, uint32_t ri, uint64_t now)
{
	const struct dec_rec *r = &d->rec[ri];

	if (r->x != X_UNKNOWN)
		return d->have_x && d->x_high >= r->x + d->settle;
	for (uint32_t k = 1; k <= SETTLE_PEEK && k < d->rec_live; k++) {
		uint32_t j = ri + k < d->nrec ? ri + k : ri + k - d->nrec;

		if (d->rec[j].x != X_UNKNOWN)
			return d->have_x &&
			       d->x_high >= d->rec[j].x + d->settle + SETTLE_REORDER;
	}
	return now - r->t_ns > 4 * d->cfg.dec_max_age_ns;
}

void dec_expire(struct il_fec_dec *d, uint64_t now)
{
	uint64_t age = d->cfg.dec_max_age_ns;

	if (age == 0)
		return;
	while (d->rec_live > 0) {
		struct dec_rec *r = &d->rec[d->rec_old];

		if (now < r->t_ns || now - r->t_ns <= age || !rec_settled(d, d->rec_old, now))
			break;
		rec_evict_oldest(d, true);
	}
	while (d->pend_used > 0) {
		struct dec_pend *p = &d->pend[d->pend_tail];

		if (p->live) {
			if (now < p->t_ns || now - p->t_ns <= age)
				break;
			dec_pend_free(d, d->pend_tail);
			d->st.repair_evict_age++;
		}
		d->pend_tail = d->pend_tail + 1 == d->npend ? 0 : d->pend_tail + 1;
		d->pend_used--;
	}
}

void dec_epoch_reset(struct il_fec_dec *d)
{
	/* Packet numbers restart with the encoder: the ones we hold mean
	 * nothing now, and neither do stored repairs' numbers. The packets
	 * themselves stay (ids do not depend on the encoder). */
	for (uint32_t i = 0; i < d->nrec; i++)
		d->rec[i].x = X_UNKNOWN;
	for (uint32_t i = 0; i < d->npend; i++) {
		if (d->pend[i].live) {
			dec_pend_free(d, i);
			d->st.repair_evict_orphan++;
		}
	}
	d->have_horizon = false;
	d->have_x = false;
	d->have_seq = false;
	d->x_high = 0;
}
