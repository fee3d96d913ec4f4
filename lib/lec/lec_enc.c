/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Repair bins (Ricochet sections 4.2.1, 4.2.2 and 4.2.5).
 *
 * A message of group G enters every bin whose group set contains G; a
 * logical bin is `stagger` positions filled round-robin, so consecutive
 * messages of a burst land in different repairs, and each position has
 * `layers` instances (usually one) that all take its messages, their
 * rounds out of phase. An instance fires after r messages: its XOR goes
 * to the targets it draws, region by region (floor of the mean, plus one
 * with the fractional part's probability), distinct members picked at
 * random within each region.
 *
 * The draw for a round is made when the round starts, and only an
 * instance with at least one target XORs its messages: on average a
 * message costs at most c two-input XORs per group, whatever the number
 * of bins. The draw is kept as a seed and replayed when the instance
 * fires, so the counts that decided to build the XOR are the ones used.
 *
 * An encode-only node by default XORs a message into each accumulator as
 * it arrives (the caller's buffer is free again at once). With defer_xor,
 * and always on a decoding node (whose store holds every message anyway),
 * an instance only keeps the index of the message in a frame table, and
 * the caller XORs the r messages in one pass when the instance fires,
 * straight into the buffer it sends (il_lec_repair_xor): each byte of the
 * repair is written once, and a message kept by several instances costs
 * one reference.
 */
#include <string.h>

#include "lec_internal.h"

/* The round's target counts from seed; with pick, the members chosen are
 * appended to l->targets. Returns the total. */
static uint32_t draw(struct il_lec *l, const struct lec_bin *b, uint64_t seed, bool pick)
{
	const struct lec_regions *rg = &l->reg[l->cur];
	uint64_t s = seed;
	uint32_t total = 0;

	for (uint32_t t = 0; t < b->tgt_n; t++) {
		const struct lec_target *tg = &rg->tgt[b->tgt_first + t];
		uint32_t size = rg->size[tg->region];
		uint32_t k = tg->whole;

		/* a whole count needs no draw (no random state consumed:
		 * the same seed replays the same counts either way) */
		if (tg->frac)
			k += (uint32_t)(lec_rand(&s) >> 32) < tg->frac;
		if (k > size)
			k = size;
		if (pick) {
			/* a partial Fisher-Yates shuffle of the region's list */
			uint32_t *m = rg->members + rg->start[tg->region];

			if (k == size) {
				memcpy(&l->targets[total], m, 4 * (size_t)k);
			} else {
				for (uint32_t j = 0; j < k; j++) {
					uint32_t x = j + lec_below(&l->rng, size - j);
					uint32_t v = m[x];

					m[x] = m[j];
					m[j] = v;
					l->targets[total + j] = v;
				}
			}
		}
		total += k;
	}
	return total;
}

/* Empties an instance: its accumulator back to zero, no messages. */
static void inst_clear(struct lec_inst *in)
{
	if (in->ext)
		memset(in->acc, 0, in->ext);
	in->ext = 0;
	in->n = 0;
	in->nx = 0;
	in->len_max = 0;
	in->len_xor = 0;
}

void lec_inst_reset(struct il_lec *l, struct lec_bin *b, struct lec_inst *in)
{
	inst_clear(in);
	in->seed = lec_rand(&l->rng);
	/* a bin whose whole counts alone give a target needs no draw to know */
	in->xor_on = b->always || draw(l, b, in->seed, false) > 0;
}

/* The instance lets go of its frames; those no other instance holds are
 * free again (defer_xor: given back to the caller, in one call). */
static void release(struct il_lec *l, struct lec_inst *in)
{
	uint32_t k = 0;

	if (!l->by_ref)
		return;
	for (uint32_t j = 0; j < in->nx; j++) {
		uint32_t f = in->fr[j];
		struct lec_frame *fr = &l->frames[f];

		if (--fr->refs == 0) {
			l->rel[k++] = fr->cookie;
			l->frame_free[l->nframe_free++] = f;
		}
	}
	if (k && l->cfg.defer_xor)
		l->ops.release(l->ops.arg, l->rel, k);
}

/* The round's messages as a repair's ids and sources; a decoding node
 * leaves out those its store has evicted since (their bytes are gone). */
static uint32_t gather_refs(struct il_lec *l, const struct lec_inst *in, uint16_t *len_max,
			    uint16_t *len_xor)
{
	uint32_t k = 0;

	*len_max = 0;
	*len_xor = 0;
	for (uint32_t j = 0; j < in->nx; j++) {
		const struct lec_frame *fr = &l->frames[in->fr[j]];

		if (l->cfg.decode) {
			const struct lec_rec *r = &l->rec[(uintptr_t)fr->cookie];

			if (r->gen != fr->gen || r->state != LEC_R_HELD) {
				l->st.drop_bin_evicted++;
				continue;
			}
		}
		l->rep_ids[k] = fr->id;
		l->rep_src[k] = fr->src;
		l->rep_len[k] = fr->len;
		if (fr->len > *len_max)
			*len_max = fr->len;
		*len_xor ^= fr->len;
		k++;
	}
	return k;
}

uint32_t lec_bin_drop(struct il_lec *l, struct lec_bin *b)
{
	uint32_t msgs = 0;

	const uint32_t per = lec_pos_insts(l->cfg.layer_stride, b->layers);

	for (uint32_t s = 0; s < (uint32_t)l->cfg.stagger * per; s++) {
		struct lec_inst *in = &b->inst[s];

		/* every layer holds the same messages (layer 0 in one
		 * instance per position): count them once */
		if (s % per == 0)
			msgs += in->n;
		release(l, in);
		inst_clear(in);
	}
	b->live = false;
	return msgs;
}

static void fire(struct il_lec *l, struct lec_bin *b, struct lec_inst *in, bool flush)
{
	if (!in->xor_on) {
		l->st.repairs_skipped++;
	} else if (in->nx > 0) {
		uint32_t n = draw(l, b, in->seed, true);

		if (n == 0) {
			l->st.drop_repair_view++;
		} else {
			struct il_lec_repair rep = {
				.count = (uint16_t)in->nx,
				.len = in->len_max,
				.len_xor = in->len_xor,
				.from = l,
			};

			if (l->by_ref) {
				rep.count = (uint16_t)gather_refs(l, in, &rep.len, &rep.len_xor);
				rep.ids = l->rep_ids;
				rep.src = l->rep_src;
				rep.src_len = l->rep_len;
				if (rep.count) {
					l->st.copy_ops++;
					l->st.xor_ops += rep.count - 1u;
				}
			} else {
				rep.ids = in->ids;
				rep.payload = in->acc;
			}
			if (rep.count) {
				l->ops.send(l->ops.arg, &rep, l->targets, n);
				l->st.repairs_sent++;
				l->st.repair_targets += n;
				l->st.flushed += flush;
			}
		}
	}
	release(l, in);
	lec_inst_reset(l, b, in);
}

/* The instance of layer j that takes bin b's next message: the one of the
 * current stagger position, or with layer_stride the (k mod (j + 1))-th of
 * its j + 1, k counting the position's messages: layer j's rounds then
 * hold every (j + 1)-th message of the position, so two messages share a
 * repair in few layers (docs/lec.md, "Layers in order"). */
static inline struct lec_inst *layer_inst(const struct il_lec *l, struct lec_bin *b, uint32_t j)
{
	if (!l->cfg.layer_stride)
		return &b->inst[b->rr * b->layers + j];
	return &b->inst[b->rr * lec_pos_insts(true, b->layers) + lec_layer_first(j) +
			(b->nin / l->cfg.stagger) % (j + 1)];
}

/* After a message: the next stagger position and message count. */
static inline void bin_next(const struct il_lec *l, struct lec_bin *b)
{
	if (++b->rr == l->cfg.stagger)
		b->rr = 0;
	b->nin++;
}

/* A message's frame, taken when the first instance keeps it. The add
 * loop holds one count of its own until it is done, so an instance that
 * fires meanwhile cannot give the frame back early. */
static uint32_t frame_take(struct il_lec *l, const struct il_lec_id *id, const uint8_t *src,
			   uint32_t len, void *cookie)
{
	uint32_t f = l->frame_free[--l->nframe_free];
	struct lec_frame *fr = &l->frames[f];

	fr->src = src;
	fr->cookie = cookie;
	fr->id = *id;
	fr->len = (uint16_t)len;
	fr->refs = 1;
	if (l->cfg.defer_xor) {
		l->ops.hold(l->ops.arg, cookie, 1);
		l->st.holds++;
	} else {
		fr->gen = l->rec[(uintptr_t)cookie].gen;
	}
	return f;
}

static void bins_add_deferred(struct il_lec *l, const struct lec_group *g,
			      const struct il_lec_id *id, const uint8_t *src, uint32_t len,
			      void *cookie, uint64_t now)
{
	const uint32_t *lk = l->links + g->link_first;
	uint32_t f = LEC_NONE;

	for (uint32_t k = 0; k < g->link_n; k++) {
		struct lec_bin *b = &l->bin[lk[k]];

		for (uint32_t j = 0; j < b->layers; j++) {
			struct lec_inst *in = layer_inst(l, b, j);

			if (in->xor_on) {
				if (f == LEC_NONE)
					f = frame_take(l, id, src, len, cookie);
				l->frames[f].refs++;
				if (in->nx == 0)
					in->t_first = now;
				in->fr[in->nx++] = f;
				if (len > in->len_max)
					in->len_max = (uint16_t)len;
				in->len_xor ^= (uint16_t)len;
			}
			if (++in->n == l->cfg.r)
				fire(l, b, in, false);
		}
		l->st.bin_adds += b->layers;
		bin_next(l, b);
	}
	if (f != LEC_NONE && --l->frames[f].refs == 0) {
		/* every instance that kept it has fired already */
		l->frame_free[l->nframe_free++] = f;
		if (l->cfg.defer_xor)
			l->ops.release(l->ops.arg, &cookie, 1);
	}
}

void lec_bins_add(struct il_lec *l, const struct lec_group *g, const struct il_lec_id *id,
		  const uint8_t *src, uint32_t len, void *cookie, uint64_t now)
{
	const uint32_t *lk = l->links + g->link_first;

	if (l->by_ref) {
		bins_add_deferred(l, g, id, src, len, cookie, now);
		return;
	}
	for (uint32_t k = 0; k < g->link_n; k++) {
		struct lec_bin *b = &l->bin[lk[k]];

		for (uint32_t j = 0; j < b->layers; j++) {
			struct lec_inst *in = layer_inst(l, b, j);

			l->st.bin_adds++;
			if (in->xor_on) {
				if (in->nx == 0) {
					/* an empty accumulator is all zero: copy */
					memcpy(in->acc, src, len);
					in->ext = len;
					in->t_first = now;
					l->st.copy_ops++;
				} else {
					lec_xor(l, in->acc, &in->ext, &src, 1, len);
					l->st.xor_ops++;
				}
				in->ids[in->nx++] = *id;
				if (len > in->len_max)
					in->len_max = (uint16_t)len;
				in->len_xor ^= (uint16_t)len;
			}
			if (++in->n == l->cfg.r)
				fire(l, b, in, false);
		}
		bin_next(l, b);
	}
}

/* aged: an instance fires once its oldest message is older than age_ns;
 * layer j's (of a bin with L layers) once older than age_ns (1 + j / L).
 * The layers of a position take the same messages, so when their rounds
 * end by age rather than by count (a bin that fills slower than the age),
 * they start on the same message; fired at the same age they would stay
 * together for good, sending one XOR where they should send L different
 * ones (a member that lost two of its messages could use none of them).
 * Later ages end them on other messages, and their next rounds start
 * apart (as the count does for full rounds, lec_regions.c). */
static uint32_t flush_if(struct il_lec *l, unsigned min_fill, bool aged, uint64_t now_ns,
			 uint64_t age_ns)
{
	uint64_t sent = l->st.repairs_sent;
	uint64_t due_min = UINT64_MAX;

	for (uint32_t d = 0; d < l->nbins; d++) {
		struct lec_bin *b = &l->bin[l->bin_order[d]];

		const uint32_t per = lec_pos_insts(l->cfg.layer_stride, b->layers);

		for (uint32_t s = 0; s < (uint32_t)l->cfg.stagger * per; s++) {
			struct lec_inst *in = &b->inst[s];

			if (!in->xor_on || in->nx < min_fill)
				continue;
			if (aged) {
				uint64_t age = age_ns + age_ns *
					lec_inst_layer(l->cfg.layer_stride, s % per) /
					b->layers;
				if (now_ns < age || in->t_first > now_ns - age) {
					/* not yet: when it will be */
					uint64_t due = in->t_first + age;
					if (due < due_min)
						due_min = due;
					continue;
				}
			}
			fire(l, b, in, true);
		}
	}
	if (aged)
		l->next_due = due_min;
	return (uint32_t)(l->st.repairs_sent - sent);
}

uint32_t il_lec_flush(struct il_lec *l, unsigned min_fill)
{
	return flush_if(l, min_fill < 1 ? 1 : min_fill, false, 0, 0);
}

uint32_t il_lec_flush_aged(struct il_lec *l, uint64_t now_ns, uint64_t age_ns)
{
	if (now_ns < age_ns) {
		l->next_due = age_ns; /* an early clock: nothing can be due before */
		return 0;
	}
	return flush_if(l, 1, true, now_ns, age_ns);
}

uint64_t il_lec_next_due(const struct il_lec *l)
{
	return l->next_due;
}

void il_lec_repair_xor(const struct il_lec_repair *rep, uint8_t *dst, uint32_t dst_slack)
{
	lec_gather(rep->from, dst, dst_slack, rep->src, rep->src_len, rep->count);
}
