/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Maelstrom decoder (NSDI 2008, §4.3 and §4.6-4.7, with Ricochet's
 * two-repair XOR, NSDI 2007 §4.2.8).
 *
 * A repair whose recipe misses nothing is dropped; one that misses one
 * packet recovers it at once; one that misses several is stored, reduced
 * to its missing packets (fec_dec_internal.h). Every packet that arrives
 * or is recovered later is XORed out of the stored repairs that await
 * it; a repair left with one missing packet yields it, and so recoveries
 * cascade across layers. A stored repair whose missing set is another
 * stored repair's plus one packet yields that packet by XORing the two.
 * RS parities of one block are stored the same way and decoded as soon
 * as as many parities as missing packets are held.
 */
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include "fec_dec_internal.h"

/* Where each part of the decoder's block lies, and its size. */
struct dec_layout {
	uint32_t slot, nrec, npend, htsize;
	size_t off_rec, off_ht, off_pend, off_work, off_rbuf, off_pbuf, off_scr, size;
};

static void dec_layout(const struct il_fec_cfg *cfg, struct dec_layout *y)
{
	y->slot = fec_slot_size(cfg);
	y->nrec = cfg->dec_max_pkts;
	y->npend = cfg->dec_max_repairs;
	/* Load factor at most 1/2 keeps linear probing short. */
	y->htsize = 1;
	while (y->htsize < 2 * y->nrec)
		y->htsize <<= 1;
#define AL(x) (((x) + FEC_ALIGN - 1) / FEC_ALIGN * FEC_ALIGN)
	y->off_rec = AL(sizeof(struct il_fec_dec));
	y->off_ht = y->off_rec + AL(sizeof(struct dec_rec) * (size_t)y->nrec);
	y->off_pend = y->off_ht + AL(sizeof(uint32_t) * (size_t)y->htsize);
	y->off_work = y->off_pend + AL(sizeof(struct dec_pend) * (size_t)y->npend);
	y->off_rbuf = y->off_work + AL(sizeof(uint32_t) * ((size_t)y->nrec + 1));
	y->off_pbuf = y->off_rbuf + (size_t)y->slot * y->nrec;
	y->off_scr = y->off_pbuf + (size_t)y->slot * y->npend;
	y->size = y->off_scr + (size_t)y->slot * IL_FEC_MAX_C;
#undef AL
}

/* The decoder as create() makes it: nothing held, counters zero (also
 * what il_fec_dec_reset() puts back). */
static void dec_init(struct il_fec_dec *d, const struct il_fec_cfg *cfg,
		     il_fec_deliver_fn deliver, void *arg)
{
	struct dec_layout y;

	dec_layout(cfg, &y);
	memset(d, 0, y.size);
	d->cfg = *cfg;
	d->deliver = deliver;
	d->arg = arg;
	d->slot = y.slot;
	d->max_span = fec_max_span(cfg);
	d->settle = fec_settle_span(cfg);
	d->rs = cfg->code == IL_FEC_CODE_RS;
	d->ref_impl = cfg->xor_impl == IL_FEC_XOR_REF;
	d->rec = (struct dec_rec *)((uint8_t *)d + y.off_rec);
	d->nrec = y.nrec;
	d->ht = (uint32_t *)((uint8_t *)d + y.off_ht);
	d->ht_mask = y.htsize - 1;
	memset(d->ht, 0xff, sizeof(uint32_t) * y.htsize);
	d->pend = (struct dec_pend *)((uint8_t *)d + y.off_pend);
	d->npend = y.npend;
	d->work = (uint32_t *)((uint8_t *)d + y.off_work);
	d->work_cap = y.nrec + 1;
	d->rec_buf = (uint8_t *)d + y.off_rbuf;
	d->pend_buf = (uint8_t *)d + y.off_pbuf;
	d->scratch = (uint8_t *)d + y.off_scr;
	d->footprint = y.size;
	if (d->rs)
		fec_gf_init(&d->gf, cfg->r, cfg->c);
}

struct il_fec_dec *il_fec_dec_create(const struct il_fec_cfg *cfg, il_fec_deliver_fn deliver,
				     void *arg, char *err, size_t errlen)
{
	struct il_fec_dec *d;
	struct dec_layout y;

	if (il_fec_cfg_check(cfg, err, errlen, NULL, 0) != 0)
		return NULL;
	if (!deliver) {
		snprintf(err, errlen, "fec: decoder needs a deliver callback");
		return NULL;
	}
	dec_layout(cfg, &y);
	d = fec_alloc(cfg, y.size);
	if (!d) {
		snprintf(err, errlen, "fec: cannot allocate %zu bytes for the decoder", y.size);
		return NULL;
	}
	dec_init(d, cfg, deliver, arg);
	return d;
}

void il_fec_dec_reset(struct il_fec_dec *d)
{
	struct il_fec_cfg cfg = d->cfg;

	dec_init(d, &cfg, d->deliver, d->arg);
}

void il_fec_dec_free(struct il_fec_dec *d)
{
	if (d) {
		struct il_fec_cfg cfg = d->cfg;

		for (uint32_t i = 0; i < d->nrec; i++)
			if (d->rec[i].state != REC_FREE && d->rec[i].handle != NULL)
				cfg.release(d->rec[i].handle, cfg.release_arg);

		fec_free(&cfg, d);
	}
}

const struct il_fec_dec_stats *il_fec_dec_stats(const struct il_fec_dec *d)
{
	return &d->st;
}

size_t il_fec_dec_footprint(const struct il_fec_dec *d)
{
	return d->footprint;
}

void il_fec_dec_tick(struct il_fec_dec *d, uint64_t now_ns)
{
	dec_expire(d, now_ns);
}

static unsigned log2_bucket(uint64_t v)
{
	unsigned b = v ? 64 - (unsigned)__builtin_clzll(v) : 0;

	return b < IL_FEC_LAT_BUCKETS ? b : IL_FEC_LAT_BUCKETS - 1;
}

/* Record ri now holds its packet, rebuilt by a repair: check it, deliver
 * it, and queue it so the repairs awaiting it are updated. */
static void recovered(struct il_fec_dec *d, uint32_t ri, unsigned layer, unsigned how,
		      uint64_t now)
{
	struct dec_rec *r = &d->rec[ri];
	const uint8_t *span = rec_data(d, ri);
	struct il_fec_recovery info;

	if (r->state != REC_MISSING)
		return;
	if (d->cfg.verify_l3_off >= 0) {
		uint32_t off = (uint32_t)d->cfg.verify_l3_off;
		struct il_fec_id chk;

		/* A wrong packet here means two packets shared an id (or a
		 * peer lied); it must not reach a host or other repairs. */
		if (r->len <= off || il_fec_id_ipv4(span + off, r->len - off, &chk) != 0 ||
		    !il_fec_id_eq(&chk, &r->id)) {
			d->st.verify_fail++;
			return;
		}
	}
	r->state = REC_RECOVERED;
	info.id = &r->id;
	info.layer = (uint8_t)layer;
	info.how = (uint8_t)how;
	info.x = r->x;
	info.lat_pkts = d->have_x && r->x != X_UNKNOWN && d->x_high > r->x ? d->x_high - r->x : 0;
	info.lat_ns = now > r->t_ns ? now - r->t_ns : 0;
	d->st.recovered[layer]++;
	d->st.recovered_how[how]++;
	d->st.lat_pkts_hist[log2_bucket(info.lat_pkts)]++;
	d->st.lat_us_hist[log2_bucket(info.lat_ns / 1000)]++;
	d->st.lat_pkts_sum += info.lat_pkts;
	d->st.lat_ns_sum += info.lat_ns;
	d->deliver(d->arg, span, r->len, &info);
	dec_push(d, ri);
}

/* Subtract record ri's packet from stored repair p (slot pi). */
static void pend_reduce(struct il_fec_dec *d, uint32_t pi, unsigned q, uint32_t ri)
{
	struct dec_pend *p = &d->pend[pi];
	const struct dec_rec *r = &d->rec[ri];
	uint8_t *buf = pend_data(d, pi);

	if (d->rs) {
		uint8_t row = p->layer;
		uint8_t co = d->gf.coef[row][p->miss_pos[q]];

		fec_gf_mad(&d->gf, p->miss_pos[q], rec_data(d, ri), r->len, &buf, &row, 1,
			   d->ref_impl);
		p->len_code ^= (uint16_t)(fec_gf_mul(co, (uint8_t)(r->len >> 8)) << 8 |
					  fec_gf_mul(co, (uint8_t)r->len));
	} else {
		fec_xor1(d->cfg.xor_impl, buf, rec_data(d, ri), r->len);
		p->len_code ^= r->len;
	}
	p->nmiss--;
	p->miss[q] = p->miss[p->nmiss];
	p->miss_pos[q] = p->miss_pos[p->nmiss];
}

/* Is every missing packet of a also missing in b? */
static bool miss_subset(const struct dec_pend *a, const struct dec_pend *b)
{
	for (unsigned i = 0; i < a->nmiss; i++) {
		bool found = false;

		for (unsigned j = 0; j < b->nmiss && !found; j++)
			found = a->miss[i] == b->miss[j];
		if (!found)
			return false;
	}
	return true;
}

static uint32_t miss_extra(const struct dec_pend *big, const struct dec_pend *small)
{
	for (unsigned j = 0; j < big->nmiss; j++) {
		bool found = false;

		for (unsigned i = 0; i < small->nmiss && !found; i++)
			found = small->miss[i] == big->miss[j];
		if (!found)
			return big->miss[j];
	}
	return REC_NONE;
}

/*
 * Ricochet's trick: stored repairs s and b with missing(b) = missing(s)
 * plus one packet z give z = s XOR b. Any such partner awaits one of the
 * first two missing packets of p (it shares all of the smaller set), so
 * only their waiting lists are searched.
 */
static void two_repair(struct il_fec_dec *d, uint32_t pi, uint64_t now)
{
	const struct dec_pend *p = &d->pend[pi];

	for (unsigned a = 0; a < 2 && a < p->nmiss; a++) {
		const struct dec_rec *m = &d->rec[p->miss[a]];

		for (unsigned k = 0; k < m->nref; k++) {
			uint32_t qi = m->ref[k].idx, bi, si, z, len, n;
			const struct dec_pend *q = &d->pend[qi], *big, *small;
			uint8_t *zb;

			if (qi == pi || !ref_valid(d, m->ref[k]))
				continue;
			if (q->nmiss == p->nmiss + 1) {
				bi = qi;
				si = pi;
			} else if (q->nmiss + 1 == p->nmiss) {
				bi = pi;
				si = qi;
			} else {
				continue;
			}
			big = &d->pend[bi];
			small = &d->pend[si];
			if (!miss_subset(small, big))
				continue;
			z = miss_extra(big, small);
			if (z == REC_NONE || d->rec[z].state != REC_MISSING)
				continue;
			len = (uint32_t)(big->len_code ^ small->len_code);
			if (len == 0 || len > (big->xor_len > small->xor_len ? big->xor_len
									     : small->xor_len)) {
				d->st.repairs_inconsistent++;
				continue;
			}
			zb = rec_slot(d, z);
			n = len < big->xor_len ? len : big->xor_len;
			memcpy(zb, pend_data(d, bi), n);
			if (n < len)
				memset(zb + n, 0, len - n);
			fec_xor1(d->cfg.xor_impl, zb, pend_data(d, si),
				 len < small->xor_len ? len : small->xor_len);
			d->rec[z].len = (uint16_t)len;
			recovered(d, z, big->layer, IL_FEC_HOW_TWO_REPAIR, now);
			return;
		}
	}
}

/* RS: decode the block of stored parity pi if enough parities agree. */
static void rs_try(struct il_fec_dec *d, uint32_t pi, uint64_t now)
{
	const struct dec_pend *p = &d->pend[pi];
	uint32_t sib[IL_FEC_MAX_C], miss[IL_FEC_MAX_C];
	uint8_t rows[IL_FEC_MAX_C], cols[IL_FEC_MAX_C];
	uint8_t *in[IL_FEC_MAX_C], *out[IL_FEC_MAX_C];
	uint16_t lc[IL_FEC_MAX_C], lens[IL_FEC_MAX_C];
	unsigned m = p->nmiss, ns = 1;
	const struct dec_rec *first;
	uint32_t len = p->xor_len;

	if (m == 0) {
		dec_pend_free(d, pi);
		return;
	}
	if (m > d->cfg.c)
		return;
	sib[0] = pi;
	rows[0] = p->layer;
	/* Parities of one block share the recipe; stored reduced, they also
	 * share the missing set, so every one of them awaits miss[0]. */
	first = &d->rec[p->miss[0]];
	for (unsigned k = 0; k < first->nref && ns < m; k++) {
		uint32_t qi = first->ref[k].idx;
		const struct dec_pend *q = &d->pend[qi];
		bool dup = false;

		if (qi == pi || !ref_valid(d, first->ref[k]) || q->x_first != p->x_first ||
		    q->interleave != p->interleave || q->nmiss != m)
			continue;
		for (unsigned s = 0; s < ns; s++)
			dup |= rows[s] == q->layer;
		if (dup)
			continue;
		rows[ns] = q->layer;
		sib[ns++] = qi;
	}
	if (ns < m)
		return;
	for (unsigned s = 0; s < m; s++) {
		in[s] = pend_data(d, sib[s]);
		lc[s] = d->pend[sib[s]].len_code;
		miss[s] = p->miss[s];
		cols[s] = p->miss_pos[s];
		/* A packet recovered meanwhile (queued, not yet subtracted)
		 * must keep its bytes: decode it into scratch. */
		out[s] = d->rec[miss[s]].state == REC_MISSING ? rec_slot(d, miss[s])
							       : d->scratch + (size_t)s * d->slot;
	}
	if (fec_gf_solve(&d->gf, m, rows, cols, in, lc, len, out, lens, d->ref_impl) != 0)
		return;
	for (unsigned s = 0; s < m; s++)
		dec_pend_free(d, sib[s]);
	for (unsigned s = 0; s < m; s++) {
		if (d->rec[miss[s]].state != REC_MISSING)
			continue;
		if (lens[s] == 0 || lens[s] > len) {
			d->st.repairs_inconsistent++;
			continue;
		}
		d->rec[miss[s]].len = lens[s];
		/* recovered[] by RS counts decodes that needed m parities. */
		recovered(d, miss[s], m - 1, IL_FEC_HOW_RS, now);
	}
}

/* Update the stored repairs awaiting the queued records, recovering what
 * they yield, until nothing more follows. */
static void cascade(struct il_fec_dec *d, uint64_t now)
{
	while (d->nwork > 0) {
		uint32_t ri = d->work[--d->nwork];
		struct dec_rec *r = &d->rec[ri];
		struct rec_ref refs[REC_MAXREF];
		unsigned n = r->nref;

		if (r->state != REC_HAVE && r->state != REC_RECOVERED)
			continue;
		memcpy(refs, r->ref, n * sizeof(refs[0]));
		r->nref = 0;
		for (unsigned k = 0; k < n; k++) {
			uint32_t pi = refs[k].idx;
			struct dec_pend *p = &d->pend[pi];
			unsigned q = 0;

			if (!ref_valid(d, refs[k]))
				continue;
			while (q < p->nmiss && p->miss[q] != ri)
				q++;
			if (q == p->nmiss)
				continue;
			if (r->len > p->xor_len) {
				d->st.repairs_inconsistent++;
				dec_pend_free(d, pi);
				continue;
			}
			pend_reduce(d, pi, q, ri);
			if (d->rs) {
				rs_try(d, pi, now);
			} else if (p->nmiss == 1) {
				uint32_t t = p->miss[0];
				uint32_t len = p->len_code;

				if (d->rec[t].state == REC_MISSING) {
					if (len == 0 || len > p->xor_len) {
						d->st.repairs_inconsistent++;
					} else {
						memcpy(rec_slot(d, t), pend_data(d, pi), len);
						d->rec[t].len = (uint16_t)len;
						recovered(d, t, p->layer, IL_FEC_HOW_CASCADE, now);
					}
				}
				dec_pend_free(d, pi);
			} else if (p->nmiss == 0) {
				dec_pend_free(d, pi);
			} else {
				two_repair(d, pi, now);
			}
		}
	}
}

/* Keep the bytes of record ri: by reference when a handle comes with
 * them, else copied into the record's slot. */
static void rec_take(struct il_fec_dec *d, uint32_t ri, const void *span, uint32_t len,
		     void *handle, bool *kept)
{
	struct dec_rec *r = &d->rec[ri];

	if (handle != NULL) {
		r->ext = span;
		r->handle = handle;
		*kept = true;
	} else {
		memcpy(rec_slot(d, ri), span, len);
	}
	r->len = (uint16_t)len;
}

static enum il_fec_verdict dec_data(struct il_fec_dec *d, const struct il_fec_id *id_in,
				    bool check_known, const void *span, uint32_t len, void *handle,
				    bool *kept, uint64_t now_ns)
{
	struct il_fec_id id = *id_in;
	uint32_t hash = fec_id_hash(&id);
	uint32_t pos = hash & d->ht_mask, ri;

	*kept = false;
	d->st.data_in++;
	dec_expire(d, now_ns);
	if (len == 0 || len > d->max_span) {
		d->st.data_unstored++;
		return IL_FEC_FORWARD;
	}
	ri = dec_next_tuple(d, &id, hash, &pos);
	if (ri != REC_NONE && !check_known) {
		/* Another packet with these addresses, IP id and length: the
		 * payload checks tell them apart (this one's, and the kept
		 * ones' as they are met). */
		struct il_fec_id full;
		uint32_t off = d->cfg.verify_l3_off >= 0 ? (uint32_t)d->cfg.verify_l3_off : 0;

		if (len <= off ||
		    il_fec_id_ipv4((const uint8_t *)span + off, len - off, &full) != 0) {
			d->st.data_unstored++;
			return IL_FEC_FORWARD;
		}
		id.csum = full.csum;
		check_known = true;
		d->st.checks_computed++;
	}
	for (; ri != REC_NONE; ri = dec_next_tuple(d, &id, hash, &pos)) {
		struct dec_rec *r = &d->rec[ri];

		if (!dec_rec_check(d, ri) || r->id.csum != id.csum)
			continue;
		if (r->state == REC_RECOVERED) {
			d->st.late_originals++;
			return IL_FEC_DROP_LATE;
		}
		if (r->state == REC_HAVE) {
			d->st.dup_originals++;
			return IL_FEC_FORWARD;
		}
		/* Awaited by stored repairs: it arrived late or out of order. */
		rec_take(d, ri, span, len, handle, kept);
		r->state = REC_HAVE;
		dec_push(d, ri);
		cascade(d, now_ns);
		return IL_FEC_FORWARD;
	}
	ri = dec_rec_alloc(d, &id, hash, now_ns, REC_HAVE);
	d->rec[ri].csum_known = check_known;
	rec_take(d, ri, span, len, handle, kept);
	return IL_FEC_FORWARD;
}

enum il_fec_verdict il_fec_dec_data(struct il_fec_dec *d, const struct il_fec_id *id,
				    const void *span, uint32_t len, uint64_t now_ns)
{
	bool kept;

	return dec_data(d, id, true, span, len, NULL, &kept, now_ns);
}

enum il_fec_verdict il_fec_dec_data_ref(struct il_fec_dec *d, const struct il_fec_id *id,
					bool check_known, const void *span, uint32_t len,
					void *handle, bool *kept, uint64_t now_ns)
{
	if (d->cfg.release == NULL)
		handle = NULL; /* nobody to give it back to: copy */
	if (d->cfg.verify_l3_off < 0)
		check_known = true; /* the caller could not have left it out */
	return dec_data(d, id, check_known, span, len, handle, kept, now_ns);
}

/* ---- repairs ---------------------------------------------------------- */

struct repair {
	uint32_t epoch;
	uint64_t seq;
	uint8_t layer, count;
	uint16_t interleave, xor_len, len_code;
	uint64_t x_first;
	const uint8_t *ids;
	const uint8_t *payload;
};

static enum il_fec_bad parse_repair(const struct il_fec_dec *d, const uint8_t *m, uint32_t len,
				    struct repair *rp)
{
	struct il_hdr_fields h;
	struct il_fec_fields b;
	uint32_t hl;

	if (len < IL_HDR_LEN)
		return IL_FEC_BAD_SHORT;
	if (m[IL_OFF_VERSION] != IL_VERSION)
		return IL_FEC_BAD_VERSION;
	if (m[IL_OFF_TYPE] != IL_T_FEC_REPAIR)
		return IL_FEC_BAD_TYPE;
	hl = m[IL_OFF_HDR_LEN];
	if (hl < IL_HDR_LEN || hl % 4)
		return IL_FEC_BAD_HDR_LEN;
	if (len < hl || il_fec_body_get(m + hl, len - hl, &b) != 0)
		return IL_FEC_BAD_SHORT;
	il_hdr_get(m, &h);
	if (h.group_id != d->cfg.link_id)
		return IL_FEC_BAD_LINK;
	if (b.code != d->cfg.code)
		return IL_FEC_BAD_CODE;
	/* RS coefficients depend on (r, c): they must be ours. */
	if (b.rate_r < 2 || b.rate_r > IL_FEC_MAX_R || b.rate_c < 1 || b.rate_c > IL_FEC_MAX_C ||
	    (d->rs && (b.rate_r != d->cfg.r || b.rate_c != d->cfg.c)))
		return IL_FEC_BAD_RATE;
	rp->layer = b.layer;
	if (rp->layer >= b.rate_c)
		return IL_FEC_BAD_LAYER;
	rp->count = b.count;
	if (rp->count < 1 || rp->count > b.rate_r)
		return IL_FEC_BAD_COUNT;
	if (b.id_len != IL_FEC_ID_LEN)
		return IL_FEC_BAD_ID_LEN;
	rp->interleave = b.interleave;
	if (rp->interleave == 0)
		return IL_FEC_BAD_INTERLEAVE;
	rp->xor_len = b.xor_len;
	if (rp->xor_len == 0 || rp->xor_len > d->max_span)
		return IL_FEC_BAD_XOR_LEN;
	if (len != hl + IL_FEC_BODY_LEN + rp->count * IL_FEC_ID_LEN + rp->xor_len)
		return IL_FEC_BAD_LENGTH;
	rp->len_code = b.len_code;
	rp->x_first = b.x_first;
	rp->epoch = h.epoch;
	rp->seq = h.sender_seq;
	rp->ids = m + hl + IL_FEC_BODY_LEN;
	rp->payload = rp->ids + rp->count * IL_FEC_ID_LEN;
	return IL_FEC_OK;
}

static void track_stream(struct il_fec_dec *d, const struct repair *rp, uint64_t now)
{
	uint64_t x_last = rp->x_first + (uint64_t)(rp->count - 1) * rp->interleave;

	if (!d->have_epoch || rp->epoch != d->epoch) {
		if (d->have_epoch) {
			d->st.epoch_changes++;
			dec_epoch_reset(d);
		}
		d->have_epoch = true;
		d->epoch = rp->epoch;
	}
	if (d->have_seq && rp->seq > d->next_seq)
		d->st.repairs_lost += rp->seq - d->next_seq;
	if (!d->have_seq || rp->seq >= d->next_seq) {
		d->next_seq = rp->seq + 1;
		d->have_seq = true;
	}
	if (!d->have_x || x_last > d->x_high) {
		/* The encoder's packet rate, seen through the repairs, turns
		 * a distance in packets into a time (recovery latency). */
		if (d->have_x && now > d->t_high) {
			uint64_t sample = ((now - d->t_high) << 8) / (x_last - d->x_high);

			d->ns_pp_q8 = d->ns_pp_q8 ? d->ns_pp_q8 - (d->ns_pp_q8 >> 4) + (sample >> 4)
						  : sample;
		}
		d->x_high = x_last;
		d->t_high = now;
		d->have_x = true;
	}
}

/*
 * When the missing recipe packet k would have arrived: the arrival of
 * its nearest present neighbour in the recipe, moved by their distance
 * in packets at the encoder's packet rate; with no neighbour, back from
 * now by its distance to the newest packet.
 */
static uint64_t expected_at(const struct il_fec_dec *d, const struct repair *rp, unsigned k,
			    const uint32_t *have, const uint8_t *have_pos, unsigned nhave,
			    uint64_t now)
{
	uint64_t x = rp->x_first + (uint64_t)k * rp->interleave, back;
	unsigned best = 0, bj = 0;

	for (unsigned j = 0; j < nhave; j++) {
		unsigned dk = have_pos[j] > k ? have_pos[j] - k : k - have_pos[j];

		if (!best || dk < best) {
			best = dk;
			bj = j;
		}
	}
	if (best) {
		uint64_t t = d->rec[have[bj]].t_ns;
		uint64_t dt = ((uint64_t)best * rp->interleave * d->ns_pp_q8) >> 8;

		if (have_pos[bj] < k)
			return t + dt < now ? t + dt : now;
		return t > dt ? t - dt : 0;
	}
	back = d->x_high > x ? ((d->x_high - x) * d->ns_pp_q8) >> 8 : 0;
	return now > back ? now - back : 0;
}

enum il_fec_bad il_fec_dec_repair(struct il_fec_dec *d, const void *msg, uint32_t len,
				  uint64_t now_ns)
{
	uint32_t have[IL_FEC_MAX_R], miss[IL_FEC_MAX_R];
	uint8_t have_pos[IL_FEC_MAX_R], miss_pos[IL_FEC_MAX_R], new_k[IL_FEC_MAX_R];
	uint32_t new_hash[IL_FEC_MAX_R];
	struct il_fec_id ids[IL_FEC_MAX_R];
	unsigned nhave = 0, nold = 0, nnew = 0, nmiss;
	struct repair rp;
	enum il_fec_bad bad = parse_repair(d, msg, len, &rp);
	uint16_t len_code;
	uint32_t pi;
	uint8_t *buf;

	if (bad != IL_FEC_OK) {
		d->st.repair_bad[bad]++;
		return bad;
	}
	d->st.repairs_in++;
	dec_expire(d, now_ns);
	track_stream(d, &rp, now_ns);

	/* Pass 1: which recipe packets do we hold? */
	len_code = rp.len_code;
	for (unsigned k = 0; k < rp.count; k++) {
		uint64_t xk = rp.x_first + (uint64_t)k * rp.interleave;
		uint32_t h, ri;

		memcpy(&ids[k], rp.ids + k * IL_FEC_ID_LEN, IL_FEC_ID_LEN);
		h = fec_id_hash(&ids[k]);
		ri = dec_lookup(d, &ids[k], h, xk);
		if (ri == REC_NONE) {
			if (d->have_horizon && xk <= d->horizon) {
				d->st.repairs_expired++;
				return IL_FEC_OK;
			}
			new_k[nnew] = (uint8_t)k;
			new_hash[nnew++] = h;
			continue;
		}
		if (d->rec[ri].state == REC_MISSING) {
			miss[nold] = ri;
			miss_pos[nold++] = (uint8_t)k;
			continue;
		}
		if (d->rec[ri].len > rp.xor_len) {
			d->st.repairs_inconsistent++;
			return IL_FEC_OK;
		}
		if (d->rec[ri].x == X_UNKNOWN)
			d->rec[ri].x = xk;
		have[nhave] = ri;
		have_pos[nhave++] = (uint8_t)k;
	}
	nmiss = nold + nnew;
	if (nmiss == 0) {
		d->st.repairs_useless++;
		return IL_FEC_OK;
	}

	/* Pass 2: a payload buffer holding the code of the missing packets
	 * alone. The present packets are subtracted before any record is
	 * allocated, since an allocation may evict one of them. */
	if (nmiss == 1 && !d->rs) {
		uint32_t t;

		for (unsigned i = 0; i < nhave; i++)
			len_code ^= d->rec[have[i]].len;
		if (len_code == 0 || len_code > rp.xor_len) {
			d->st.repairs_inconsistent++;
			return IL_FEC_OK;
		}
		buf = d->scratch;
		memcpy(buf, rp.payload, len_code);
		for (unsigned i = 0; i < nhave; i++) {
			const struct dec_rec *h = &d->rec[have[i]];

			fec_xor1(d->cfg.xor_impl, buf, rec_data(d, have[i]),
				 h->len < len_code ? h->len : len_code);
		}
		if (nold) {
			t = miss[0];
		} else {
			unsigned k = new_k[0];

			t = dec_rec_alloc(d, &ids[k], new_hash[0],
					  expected_at(d, &rp, k, have, have_pos, nhave, now_ns),
					  REC_MISSING);
			d->rec[t].x = rp.x_first + (uint64_t)k * rp.interleave;
		}
		memcpy(rec_slot(d, t), buf, len_code);
		d->rec[t].len = len_code;
		recovered(d, t, rp.layer, IL_FEC_HOW_IMMEDIATE, now_ns);
		cascade(d, now_ns);
		return IL_FEC_OK;
	}

	pi = dec_pend_alloc(d, now_ns);
	buf = pend_data(d, pi);
	memcpy(buf, rp.payload, rp.xor_len);
	{
		struct dec_pend *p = &d->pend[pi];

		p->layer = rp.layer;
		p->count = rp.count;
		p->interleave = rp.interleave;
		p->x_first = rp.x_first;
		p->xor_len = rp.xor_len;
		p->len_code = len_code;
		p->nmiss = (uint8_t)nhave;
		/* Reduce by every present packet: list them, then take them
		 * off the list from the end (pend_reduce keeps it packed). */
		for (unsigned i = 0; i < nhave; i++) {
			p->miss[i] = have[i];
			p->miss_pos[i] = have_pos[i];
		}
		for (unsigned i = nhave; i-- > 0;)
			pend_reduce(d, pi, i, have[i]);
	}
	for (unsigned i = 0; i < nnew; i++) {
		unsigned k = new_k[i];
		uint32_t t;

		t = dec_rec_alloc(d, &ids[k], new_hash[i],
				  expected_at(d, &rp, k, have, have_pos, nhave, now_ns),
				  REC_MISSING);
		d->rec[t].x = rp.x_first + (uint64_t)k * rp.interleave;
		miss[nold + i] = t;
		miss_pos[nold + i] = (uint8_t)k;
	}
	{
		struct dec_pend *p = &d->pend[pi];

		/* An allocation above may have evicted a record we listed:
		 * then this repair cannot be trusted. */
		for (unsigned i = 0; i < nmiss; i++) {
			const struct dec_rec *m = &d->rec[miss[i]];

			if (m->state != REC_MISSING ||
			    !il_fec_id_eq(&m->id, &ids[miss_pos[i]]) || !p->live) {
				d->st.repairs_expired++;
				dec_pend_free(d, pi);
				return IL_FEC_OK;
			}
		}
		for (unsigned i = 0; i < nmiss; i++) {
			p->miss[i] = miss[i];
			p->miss_pos[i] = miss_pos[i];
			if (!dec_ref_add(d, &d->rec[miss[i]], pi)) {
				dec_pend_free(d, pi);
				return IL_FEC_OK;
			}
		}
		p->nmiss = (uint8_t)nmiss;
	}
	d->st.repairs_stored++;
	if (d->rs)
		rs_try(d, pi, now_ns);
	else
		two_repair(d, pi, now_ns);
	cascade(d, now_ns);
	return IL_FEC_OK;
}
