/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Data in and repairs in (Ricochet sections 4, 4.2.8).
 *
 * A repair yields its one missing message at once. One missing several is
 * stored, reduced (its held messages XORed out), and each later arrival
 * or recovery of a message it awaits reduces it further: at one left, the
 * message is recovered, which may complete other stored repairs in turn
 * (a cascade, run from a work list rather than by recursion). Two stored
 * repairs whose missing sets differ by exactly one message give that
 * message too (their XOR). Every recovered message enters the node's own
 * bins, like a received one.
 */
#include <string.h>

#include "lec_internal.h"

/* The recovered bytes are consistent: the length fits and the padding up
 * to the repair's length is zero. */
static bool plausible(const uint8_t *buf, uint32_t len, uint32_t plen)
{
	return len <= plen && lec_zero(buf, len, plen);
}

static void push_work(struct il_lec *l, uint32_t ri)
{
	/* each record enters at most once per generation (when it becomes
	 * held), so the list never holds more than the store */
	l->work[l->nwork++] = (struct lec_ref){ .idx = ri, .gen = l->rec[ri].gen };
}

/* Record ri (awaited) is recovered: buf holds its len bytes. */
static void recover(struct il_lec *l, uint32_t ri, const uint8_t *buf, uint32_t len,
		    unsigned how, uint64_t now)
{
	struct lec_rec *r = &l->rec[ri];
	struct lec_group *g = &l->grp[r->gslot];
	uint8_t *slot = rec_slot(l, ri);
	struct il_lec_recovery info = {
		.how = (uint8_t)how,
		.discovered_ns = r->t_ns <= now ? r->t_ns : now,
		.data_since = l->st.data_new - r->disc_new,
	};

	lec_fill(slot, &r->ext, buf, len);
	r->len = (uint16_t)len;
	r->state = LEC_R_HELD;
	l->st.recovered++;
	l->st.recovered_how[how]++;
	g->st.recovered++;
	l->ops.recovered(l->ops.arg, &r->id, slot, len, &info);
	lec_bins_add(l, g, &r->id, slot, len, (void *)(uintptr_t)ri, now);
	if (r->nref)
		push_work(l, ri);
}

/* The one message of big's missing set that small's lacks, when small's
 * set is big's minus exactly that one; LEC_NONE otherwise. */
static uint32_t odd_one(const struct lec_pend *big, const struct lec_pend *small)
{
	uint32_t extra = LEC_NONE;
	unsigned out = 0;

	if (big->nmiss != small->nmiss + 1)
		return LEC_NONE;
	for (unsigned i = 0; i < big->nmiss; i++) {
		unsigned j = 0;

		while (j < small->nmiss && small->miss[j] != big->miss[i])
			j++;
		if (j == small->nmiss) {
			extra = big->miss[i];
			out++;
		}
	}
	return out == 1 ? extra : LEC_NONE;
}

/* Section 4.2.8: look for a stored repair whose missing set is p's plus
 * or minus one message. Any such repair awaits p's first or second
 * missing message, so only their lists are searched. */
static void try_pair(struct il_lec *l, uint32_t pi, uint64_t now)
{
	const struct lec_pend *p = &l->pend[pi];

	for (unsigned a = 0; a < 2 && a < p->nmiss; a++) {
		const struct lec_rec *r = &l->rec[p->miss[a]];

		for (unsigned k = 0; k < r->nref; k++) {
			struct lec_ref q = r->ref[k];
			const struct lec_pend *o;
			const uint8_t *src;
			uint32_t extra, len, lx;

			if (q.idx == pi || !lec_ref_valid(l, q))
				continue;
			o = &l->pend[q.idx];
			extra = odd_one(p, o);
			if (extra == LEC_NONE)
				extra = odd_one(o, p);
			if (extra == LEC_NONE || l->rec[extra].state != LEC_R_AWAITED)
				continue;
			len = p->len > o->len ? p->len : o->len;
			lx = (uint32_t)(p->len_xor ^ o->len_xor);
			src = pend_slot(l, q.idx);
			lec_fill(l->scratch2, &l->scratch2_ext, pend_slot(l, pi), p->len);
			lec_xor(l, l->scratch2, &l->scratch2_ext, &src, 1, o->len);
			l->st.recover_xor_ops++;
			if (!plausible(l->scratch2, lx, len))
				continue;
			recover(l, extra, l->scratch2, lx, IL_LEC_HOW_PAIR, now);
			return;
		}
	}
}

/* Stored repair pi no longer misses record xi (held now). */
static void reduce(struct il_lec *l, uint32_t pi, uint32_t xi, uint64_t now)
{
	struct lec_pend *p = &l->pend[pi];
	const struct lec_rec *x = &l->rec[xi];
	const uint8_t *src = rec_slot(l, xi);
	unsigned pos = 0;

	while (pos < p->nmiss && p->miss[pos] != xi)
		pos++;
	if (pos == p->nmiss)
		return;
	if (x->len > p->len) {
		l->st.drop_inconsistent++;
		lec_pend_free(l, pi);
		return;
	}
	lec_xor(l, pend_slot(l, pi), &p->ext, &src, 1, x->len);
	l->st.recover_xor_ops++;
	p->len_xor ^= x->len;
	p->miss[pos] = p->miss[--p->nmiss];
	if (p->nmiss >= 2) {
		try_pair(l, pi, now);
		return;
	}
	if (p->nmiss == 1) {
		uint32_t yi = p->miss[0];

		/* a message held already but still queued for reduction makes
		 * this repair useless, not a second delivery */
		if (l->rec[yi].state == LEC_R_AWAITED) {
			if (!plausible(pend_slot(l, pi), p->len_xor, p->len)) {
				l->st.drop_inconsistent++;
				lec_pend_free(l, pi);
				return;
			}
			lec_pend_free(l, pi);
			l->st.repairs_spent++;
			recover(l, yi, pend_slot(l, pi), p->len_xor, IL_LEC_HOW_CASCADE, now);
			return;
		}
	}
	l->st.repairs_spent++;
	lec_pend_free(l, pi);
}

static void run_cascade(struct il_lec *l, uint64_t now)
{
	if (l->in_cascade)
		return;
	l->in_cascade = true;
	while (l->nwork) {
		struct lec_ref w = l->work[--l->nwork];
		struct lec_rec *x = &l->rec[w.idx];
		struct lec_ref refs[LEC_REF_MAX];
		unsigned nref;

		if (x->gen != w.gen || x->state != LEC_R_HELD)
			continue;
		nref = x->nref;
		memcpy(refs, x->ref, nref * sizeof(refs[0]));
		x->nref = 0;
		for (unsigned k = 0; k < nref; k++)
			if (lec_ref_valid(l, refs[k]))
				reduce(l, refs[k].idx, w.idx, now);
	}
	l->in_cascade = false;
}

/* ---- data --------------------------------------------------------------- */

enum il_lec_verdict il_lec_data(struct il_lec *l, const struct il_lec_id *id,
				const void *payload, uint32_t len, void *cookie, uint64_t now_ns)
{
	struct lec_group *g = lec_group_of(l, id->group);
	struct lec_rec *r;
	uint32_t h, ri;

	l->st.data_in++;
	if (!g || g->state != LEC_G_LIVE) {
		l->st.drop_data_foreign++;
		return IL_LEC_UNKNOWN;
	}
	if (id->zero) {
		l->st.drop_data_bad_id++;
		return IL_LEC_UNKNOWN;
	}
	if (len > l->cfg.max_len) {
		l->st.drop_data_too_long++;
		return IL_LEC_UNKNOWN;
	}
	if (!l->cfg.decode) {
		const uint8_t *src = payload;

		if (l->isal && !l->cfg.defer_xor) {
			lec_fill(l->staging, &l->staging_ext, payload, len);
			src = l->staging;
		}
		l->st.data_new++;
		g->st.data_new++;
		lec_bins_add(l, g, id, src, len, cookie, now_ns);
		return IL_LEC_NEW;
	}

	lec_expire(l, now_ns);
	h = lec_id_hash(id);
	ri = lec_lookup(l, id, h);
	if (ri != LEC_NONE && l->rec[ri].state == LEC_R_HELD) {
		l->st.data_dup++;
		g->st.data_dup++;
		return IL_LEC_DUP;
	}
	if (ri == LEC_NONE) {
		if (lec_stale(g, id)) {
			l->st.data_stale++;
			return IL_LEC_UNKNOWN;
		}
		ri = lec_rec_alloc(l, id, h, (uint16_t)(g - l->grp), now_ns, LEC_R_HELD);
	}
	r = &l->rec[ri];
	lec_fill(rec_slot(l, ri), &r->ext, payload, len);
	r->len = (uint16_t)len;
	r->state = LEC_R_HELD;
	l->st.data_new++;
	g->st.data_new++;
	lec_bins_add(l, g, id, rec_slot(l, ri), len, (void *)(uintptr_t)ri, now_ns);
	if (r->nref) {
		push_work(l, ri);
		run_cascade(l, now_ns);
	}
	return IL_LEC_NEW;
}

/* ---- repairs ------------------------------------------------------------ */

static enum il_lec_result repair_check(const struct il_lec *l, const struct il_lec_repair *rep)
{
	if (!l->cfg.decode)
		return IL_LEC_REP_NODECODE;
	if (rep->count == 0 || rep->count > IL_LEC_MAX_R)
		return IL_LEC_REP_BAD_COUNT;
	if (rep->len == 0 || rep->len > l->cfg.max_len)
		return IL_LEC_REP_BAD_LEN;
	for (unsigned k = 0; k < rep->count; k++) {
		const struct lec_group *g = lec_group_of(l, rep->ids[k].group);

		if (rep->ids[k].zero)
			return IL_LEC_REP_BAD_ID;
		for (unsigned j = 0; j < k; j++)
			if (il_lec_id_eq(&rep->ids[j], &rep->ids[k]))
				return IL_LEC_REP_BAD_ID;
		if (!g || g->state != LEC_G_LIVE)
			return IL_LEC_REP_FOREIGN;
	}
	return IL_LEC_REP_RECOVERED;
}

static enum il_lec_result store_repair(struct il_lec *l, const struct il_lec_repair *rep,
				       const unsigned *miss, unsigned nmiss, uint32_t lx,
				       uint64_t now)
{
	uint32_t pi = lec_pend_alloc(l, now), gen;
	struct lec_pend *p = &l->pend[pi];

	lec_fill(pend_slot(l, pi), &p->ext, l->scratch, rep->len);
	p->len = rep->len;
	p->len_xor = (uint16_t)lx;
	gen = p->gen;
	for (unsigned m = 0; m < nmiss; m++) {
		const struct il_lec_id *id = &rep->ids[miss[m]];
		uint32_t h = lec_id_hash(id), ri = lec_lookup(l, id, h);

		if (ri == LEC_NONE) {
			const struct lec_group *g = lec_group_of(l, id->group);

			ri = lec_rec_alloc(l, id, h, (uint16_t)(g - l->grp), now, LEC_R_AWAITED);
		}
		/* making that record may have evicted one this repair awaits */
		if (!p->live || p->gen != gen)
			return IL_LEC_REP_STORED;
		p->miss[p->nmiss++] = ri;
		if (!lec_ref_add(l, &l->rec[ri], pi)) {
			lec_pend_free(l, pi);
			return IL_LEC_REP_STORED;
		}
	}
	try_pair(l, pi, now);
	return IL_LEC_REP_STORED;
}

static enum il_lec_result repair_in(struct il_lec *l, const struct il_lec_repair *rep,
				    uint64_t now)
{
	const uint8_t *src[IL_LEC_MAX_R];
	unsigned miss[IL_LEC_MAX_R], nsrc = 0, nmiss = 0;
	uint32_t lx = rep->len_xor, ri;
	enum il_lec_result res = repair_check(l, rep);

	if (res != IL_LEC_REP_RECOVERED)
		return res;
	lec_expire(l, now);
	for (unsigned k = 0; k < rep->count; k++) {
		const struct il_lec_id *id = &rep->ids[k];

		ri = lec_lookup(l, id, lec_id_hash(id));
		if (ri != LEC_NONE && l->rec[ri].state == LEC_R_HELD) {
			if (l->rec[ri].len > rep->len)
				return IL_LEC_REP_INCONSISTENT;
			src[nsrc++] = rec_slot(l, ri);
			lx ^= l->rec[ri].len;
		} else {
			if (ri == LEC_NONE && lec_stale(lec_group_of(l, id->group), id))
				return IL_LEC_REP_STALE;
			miss[nmiss++] = k;
		}
	}
	if (nmiss == 0)
		return IL_LEC_REP_USELESS;
	if (nmiss > 1 && l->cfg.store_repairs == 0)
		return IL_LEC_REP_UNSTORED;
	lec_fill(l->scratch, &l->scratch_ext, rep->payload, rep->len);
	lec_xor(l, l->scratch, &l->scratch_ext, src, nsrc, rep->len);
	l->st.recover_xor_ops += nsrc;
	if (nmiss > 1)
		return store_repair(l, rep, miss, nmiss, lx, now);

	if (!plausible(l->scratch, lx, rep->len))
		return IL_LEC_REP_INCONSISTENT;
	{
		const struct il_lec_id *id = &rep->ids[miss[0]];
		uint32_t h = lec_id_hash(id);
		const struct lec_group *g = lec_group_of(l, id->group);

		ri = lec_lookup(l, id, h);
		if (ri == LEC_NONE)
			ri = lec_rec_alloc(l, id, h, (uint16_t)(g - l->grp), now, LEC_R_AWAITED);
	}
	recover(l, ri, l->scratch, lx, IL_LEC_HOW_IMMEDIATE, now);
	return IL_LEC_REP_RECOVERED;
}

enum il_lec_result il_lec_repair(struct il_lec *l, const struct il_lec_repair *rep,
				 uint64_t now_ns)
{
	enum il_lec_result res = repair_in(l, rep, now_ns);

	l->st.repairs_in++;
	l->st.repair_result[res]++;
	if (l->nwork)
		run_cascade(l, now_ns);
	return res;
}
