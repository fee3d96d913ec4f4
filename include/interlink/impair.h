/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Impairment models (the kernel here has no netem): loss, delay line and
 * rate limit. Pure C, no DPDK, deterministic for a given seed, no heap use
 * after init. Time is in TSC ticks supplied by the caller, so tests can
 * drive a virtual clock. The data-plane stage `impair` and interlink-pktgen
 * wrap these.
 */
#ifndef INTERLINK_IMPAIR_H
#define INTERLINK_IMPAIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The rate limit is the project's token bucket, in bytes on the TSC. */
#include <interlink/tbucket.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- deterministic PRNG ---------------------------------------------- */
struct il_rng {
	uint64_t s[2];
};
void il_rng_seed(struct il_rng *r, uint64_t seed);
uint64_t il_rng_next(struct il_rng *r);
double il_rng_unit(struct il_rng *r); /* uniform in [0, 1) */

/* ---- loss ------------------------------------------------------------- */
enum il_loss_model {
	IL_LOSS_NONE = 0,
	IL_LOSS_BERNOULLI,       /* independent loss with probability p */
	IL_LOSS_GILBERT_ELLIOTT, /* two-state Markov chain */
	IL_LOSS_BURST,           /* fixed-length bursts; long-run loss fraction p */
};

struct il_loss_cfg {
	enum il_loss_model model;
	double p;            /* BERNOULLI: loss probability; BURST: long-run loss fraction */
	uint32_t burst_len;  /* BURST: packets lost per burst (>= 1) */
	double ge_p_gb;      /* GE: P(good -> bad) per packet */
	double ge_p_bg;      /* GE: P(bad -> good) per packet */
	double ge_loss_good; /* GE: loss probability in the good state */
	double ge_loss_bad;  /* GE: loss probability in the bad state */
	uint64_t seed;
};

struct il_loss {
	struct il_loss_cfg cfg;
	struct il_rng rng;
	double burst_start_p; /* BURST: derived start probability */
	uint32_t burst_left;  /* BURST: packets still to drop in this burst */
	bool ge_bad;          /* GE: current state */
	uint64_t seen, lost;
};

/* 0, or -1 with err naming the bad parameter and what is allowed. */
int il_loss_init(struct il_loss *l, const struct il_loss_cfg *cfg, char *err, size_t errlen);
bool il_loss_drop(struct il_loss *l); /* one decision per packet */

/* ---- delay line ------------------------------------------------------- */
/* A bounded FIFO of opaque items, each released at or after its due time.
 * FIFO order is kept: an item's due time is never earlier than that of the
 * item before it (jitter cannot reorder). */
struct il_delay_slot {
	void *item;
	uint64_t due;
};

struct il_delay {
	struct il_delay_slot *ring; /* capacity entries, caller-provided */
	uint32_t cap, mask, head, tail;
	uint64_t delay_tsc;  /* constant part */
	uint64_t jitter_tsc; /* uniform extra in [0, jitter] */
	uint64_t last_due;
	struct il_rng rng;
	uint64_t overflow;   /* pushes refused because the line was full */
};

/* cap must be a power of two; ring must hold cap slots. */
int il_delay_init(struct il_delay *d, struct il_delay_slot *ring, uint32_t cap,
		  uint64_t delay_tsc, uint64_t jitter_tsc, uint64_t seed, char *err, size_t errlen);
bool il_delay_push(struct il_delay *d, void *item, uint64_t now); /* false: full */
void *il_delay_pop(struct il_delay *d, uint64_t now);          /* NULL: none due */
uint32_t il_delay_count(const struct il_delay *d);
/* The head item if it is due at now (not removed), else NULL: lets a
 * caller gate the release on something else, e.g. a token bucket. */
void *il_delay_peek(const struct il_delay *d, uint64_t now);
/* Due time of the head item; UINT64_MAX when the line is empty. */
uint64_t il_delay_next_due(const struct il_delay *d);

#ifdef __cplusplus
}
#endif

#endif
