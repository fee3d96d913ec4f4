/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Repair bins (Ricochet sections 4.2.1, 4.2.2 and 4.2.5).
 *
 * A message of group G enters every bin whose group set contains G; a
 * logical bin is `stagger` instances filled round-robin, so consecutive
 * messages of a burst land in different repairs. An instance fires after
 * r messages: its XOR goes to the targets it draws, region by region
 * (floor of the mean, plus one with the fractional part's probability),
 * distinct members picked at random within each region.
 *
 * The draw for a round is made when the round starts, and only an
 * instance with at least one target XORs its messages: on average a
 * message costs at most c two-input XORs per group, whatever the number
 * of bins. The draw is kept as a seed and replayed when the instance
 * fires, so the counts that decided to build the XOR are the ones used.
 *
 * By default a message is XORed into each accumulator as it arrives (the
 * caller's buffer is free again at once). With defer_xor an instance only
 * keeps references and XORs its r messages in one pass when it fires:
 * each byte of the repair is written once instead of r times, which is
 * what a data-plane caller holding mbufs wants.
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
		uint32_t k = tg->whole + ((uint32_t)(lec_rand(&s) >> 32) < tg->frac);

		if (k > size)
			k = size;
		if (pick) {
			/* a partial Fisher-Yates shuffle of the region's list */
			uint32_t *m = rg->members + rg->start[tg->region];

			for (uint32_t j = 0; j < k; j++) {
				uint32_t x = j + lec_below(&l->rng, size - j);
				uint32_t v = m[x];

				m[x] = m[j];
				m[j] = v;
				l->targets[total + j] = v;
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
	in->xor_on = draw(l, b, in->seed, false) > 0;
}

static void release(struct il_lec *l, struct lec_inst *in)
{
	if (l->cfg.defer_xor && in->nx)
		l->ops.release(l->ops.arg, in->cookie, in->nx);
}

uint32_t lec_bin_drop(struct il_lec *l, struct lec_bin *b)
{
	uint32_t msgs = 0;

	for (uint32_t s = 0; s < l->cfg.stagger; s++) {
		struct lec_inst *in = &b->inst[s];

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
			uint32_t off = 0;

			if (l->cfg.defer_xor) {
				lec_gather(l, in->acc, &in->ext, in->src, in->lens, in->nx, &off);
				l->st.copy_ops++;
				l->st.xor_ops += in->nx - 1;
			}
			struct il_lec_repair rep = {
				.ids = in->ids,
				.payload = in->acc + off,
				.count = (uint16_t)in->nx,
				.len = in->len_max,
				.len_xor = in->len_xor,
			};

			l->ops.send(l->ops.arg, &rep, l->targets, n);
			l->st.repairs_sent++;
			l->st.repair_targets += n;
			l->st.flushed += flush;
		}
	}
	release(l, in);
	lec_inst_reset(l, b, in);
}

void lec_bins_add(struct il_lec *l, const struct lec_group *g, const struct il_lec_id *id,
		  const uint8_t *src, uint32_t len, void *cookie)
{
	const uint32_t *lk = l->links + g->link_first;

	if (l->cfg.defer_xor) {
		/* one hold for every instance about to keep it, taken before
		 * any of them can fire and release it */
		uint32_t n = 0;

		for (uint32_t k = 0; k < g->link_n; k++) {
			const struct lec_bin *b = &l->bin[lk[k]];

			n += b->inst[b->rr].xor_on;
		}
		if (n) {
			l->ops.hold(l->ops.arg, cookie, n);
			l->st.holds += n;
		}
	}
	for (uint32_t k = 0; k < g->link_n; k++) {
		struct lec_bin *b = &l->bin[lk[k]];
		struct lec_inst *in = &b->inst[b->rr];

		if (++b->rr == l->cfg.stagger)
			b->rr = 0;
		l->st.bin_adds++;
		if (in->xor_on && l->cfg.defer_xor) {
			in->src[in->nx] = src;
			in->lens[in->nx] = (uint16_t)len;
			in->cookie[in->nx] = cookie;
			in->ids[in->nx++] = *id;
			if (len > in->len_max)
				in->len_max = (uint16_t)len;
			in->len_xor ^= (uint16_t)len;
		} else if (in->xor_on) {
			if (in->nx == 0) {
				/* an empty accumulator is all zero: copy */
				memcpy(in->acc, src, len);
				in->ext = len;
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
}

uint32_t il_lec_flush(struct il_lec *l, unsigned min_fill)
{
	uint64_t before = l->st.repairs_sent;

	if (min_fill < 1)
		min_fill = 1;
	for (uint32_t d = 0; d < l->nbins; d++) {
		struct lec_bin *b = &l->bin[l->bin_order[d]];

		for (uint32_t s = 0; s < l->cfg.stagger; s++) {
			struct lec_inst *in = &b->inst[s];

			if (in->xor_on && in->n >= min_fill)
				fire(l, b, in, true);
		}
	}
	return (uint32_t)(l->st.repairs_sent - before);
}
