/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Delay line: a bounded FIFO of opaque items, each released at or after
 * its due time (constant delay plus uniform jitter), in arrival order.
 */
#include <stdio.h>

#include <interlink/impair.h>

/* Keeps now + delay + jitter far from wrapping even for a TSC that has
 * run for decades; anything larger is a configuration mistake. */
#define DELAY_MAX_TSC (UINT64_C(1) << 62)

int il_delay_init(struct il_delay *d, struct il_delay_slot *ring, uint32_t cap,
		  uint64_t delay_tsc, uint64_t jitter_tsc, uint64_t seed, char *err, size_t errlen)
{
	if (errlen)
		err[0] = '\0';
	if (ring == NULL) {
		snprintf(err, errlen, "impair: delay line 'ring' is NULL; allowed: cap slots");
		return -1;
	}
	if (cap == 0 || (cap & (cap - 1)) != 0) {
		snprintf(err, errlen,
			 "impair: delay line 'cap' = %u is invalid; allowed: a power of two >= 1",
			 cap);
		return -1;
	}
	if (delay_tsc >= DELAY_MAX_TSC || jitter_tsc >= DELAY_MAX_TSC - delay_tsc) {
		snprintf(err, errlen,
			 "impair: delay line 'delay_tsc' + 'jitter_tsc' = %llu + %llu is too "
			 "large; allowed: a sum below 2^62 ticks",
			 (unsigned long long)delay_tsc, (unsigned long long)jitter_tsc);
		return -1;
	}
	*d = (struct il_delay){
		.ring = ring,
		.cap = cap,
		.mask = cap - 1,
		.delay_tsc = delay_tsc,
		.jitter_tsc = jitter_tsc,
	};
	il_rng_seed(&d->rng, seed);
	return 0;
}

uint32_t il_delay_count(const struct il_delay *d)
{
	/* head and tail run freely; unsigned wrap keeps the difference right. */
	return d->tail - d->head;
}

bool il_delay_push(struct il_delay *d, void *item, uint64_t now)
{
	struct il_delay_slot *s;
	uint64_t due;

	if (d->tail - d->head == d->cap) {
		d->overflow++;
		return false;
	}
	due = now + d->delay_tsc;
	if (d->jitter_tsc) {
		/* Multiply-shift maps 64 random bits onto [0, jitter] without
		 * the bias or the cost of a modulo. */
		unsigned __int128 x = (unsigned __int128)il_rng_next(&d->rng) * (d->jitter_tsc + 1);

		due += (uint64_t)(x >> 64);
	}
	/* A packet may not overtake the one before it: jitter only ever
	 * holds it longer, as on a real FIFO link. */
	if (due < d->last_due)
		due = d->last_due;
	d->last_due = due;
	s = &d->ring[d->tail & d->mask];
	s->item = item;
	s->due = due;
	d->tail++;
	return true;
}

void *il_delay_peek(const struct il_delay *d, uint64_t now)
{
	const struct il_delay_slot *s;

	if (d->head == d->tail)
		return NULL;
	s = &d->ring[d->head & d->mask];
	return s->due <= now ? s->item : NULL;
}

void *il_delay_pop(struct il_delay *d, uint64_t now)
{
	void *item = il_delay_peek(d, now);

	if (item != NULL)
		d->head++;
	return item;
}

uint64_t il_delay_next_due(const struct il_delay *d)
{
	if (d->head == d->tail)
		return UINT64_MAX;
	return d->ring[d->head & d->mask].due;
}
