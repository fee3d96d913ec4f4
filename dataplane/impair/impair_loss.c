/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Deterministic PRNG and the packet loss models behind the impairment
 * stage: independent (Bernoulli), Gilbert-Elliott and fixed-length bursts.
 * No DPDK here so tests, pktgen and benchmarks can use the models alone.
 */
#include <stdio.h>

#include <interlink/impair.h>

/* ---- PRNG: xoroshiro128++ seeded through splitmix64 ------------------ */

static inline uint64_t rotl64(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* splitmix64 spreads a small or structured seed (0, 1, 2...) over the
 * whole state, so neighbouring seeds give unrelated streams. */
static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void il_rng_seed(struct il_rng *r, uint64_t seed)
{
	uint64_t x = seed;

	r->s[0] = splitmix64(&x);
	r->s[1] = splitmix64(&x);
	/* The all-zero state is a fixed point of xoroshiro. */
	if (r->s[0] == 0 && r->s[1] == 0)
		r->s[0] = 1;
}

uint64_t il_rng_next(struct il_rng *r)
{
	uint64_t s0 = r->s[0];
	uint64_t s1 = r->s[1];
	uint64_t res = rotl64(s0 + s1, 17) + s0;

	s1 ^= s0;
	r->s[0] = rotl64(s0, 49) ^ s1 ^ (s1 << 21);
	r->s[1] = rotl64(s1, 28);
	return res;
}

double il_rng_unit(struct il_rng *r)
{
	/* The top 53 bits fill a double's mantissa exactly: [0, 1) with no
	 * rounding up to 1.0. */
	return (double)(il_rng_next(r) >> 11) * 0x1.0p-53;
}

/* ---- loss ------------------------------------------------------------- */

static bool prob_ok(double v)
{
	/* Written so that NaN fails too. */
	return v >= 0.0 && v <= 1.0;
}

#define CHECK_PROB(field)                                                               \
	do {                                                                            \
		if (!prob_ok(cfg->field)) {                                             \
			snprintf(err, errlen,                                           \
				 "impair: loss parameter '" #field "' = %g is out of range; " \
				 "allowed: a probability in [0, 1]",                    \
				 cfg->field);                                           \
			return -1;                                                      \
		}                                                                       \
	} while (0)

/*
 * Burst model: while no burst is running, each packet starts one with
 * probability q and a burst drops exactly burst_len packets (the starter
 * included). One cycle is a geometric run of delivered packets, mean
 * (1 - q) / q, followed by L losses, so the long-run loss fraction is
 *     p = L / ((1 - q) / q + L)   =>   q = p / (L - (L - 1) p).
 * Starts are memoryless, so a burst may begin right after the previous
 * one ends: the two then form one run of 2L (probability q per burst).
 */
static double burst_start_prob(double p, uint32_t len)
{
	double l = (double)len;

	if (p <= 0.0)
		return 0.0;
	return p / (l - (l - 1.0) * p);
}

int il_loss_init(struct il_loss *l, const struct il_loss_cfg *cfg, char *err, size_t errlen)
{
	if (errlen)
		err[0] = '\0';
	switch (cfg->model) {
	case IL_LOSS_NONE:
		break;
	case IL_LOSS_BERNOULLI:
		CHECK_PROB(p);
		break;
	case IL_LOSS_GILBERT_ELLIOTT:
		CHECK_PROB(ge_p_gb);
		CHECK_PROB(ge_p_bg);
		CHECK_PROB(ge_loss_good);
		CHECK_PROB(ge_loss_bad);
		break;
	case IL_LOSS_BURST:
		CHECK_PROB(p);
		if (cfg->burst_len < 1) {
			snprintf(err, errlen,
				 "impair: loss parameter 'burst_len' = %u is out of range; "
				 "allowed: an integer >= 1",
				 cfg->burst_len);
			return -1;
		}
		break;
	default:
		snprintf(err, errlen,
			 "impair: loss parameter 'model' = %d is unknown; allowed: none, "
			 "bernoulli, gilbert-elliott, burst",
			 (int)cfg->model);
		return -1;
	}

	*l = (struct il_loss){ .cfg = *cfg };
	il_rng_seed(&l->rng, cfg->seed);
	if (cfg->model == IL_LOSS_BURST)
		l->burst_start_p = burst_start_prob(cfg->p, cfg->burst_len);
	/* GE starts in the good state, like a link that has been quiet. */
	l->ge_bad = false;
	return 0;
}

static inline bool ge_step(struct il_loss *l)
{
	const struct il_loss_cfg *c = &l->cfg;
	bool drop;

	/* Loss is drawn in the state the packet finds, then the chain moves
	 * on: a bad-state sojourn is geometric with mean 1 / ge_p_bg packets
	 * and the stationary loss rate is
	 *   (p_bg * loss_good + p_gb * loss_bad) / (p_gb + p_bg). */
	if (l->ge_bad) {
		drop = il_rng_unit(&l->rng) < c->ge_loss_bad;
		if (il_rng_unit(&l->rng) < c->ge_p_bg)
			l->ge_bad = false;
	} else {
		drop = il_rng_unit(&l->rng) < c->ge_loss_good;
		if (il_rng_unit(&l->rng) < c->ge_p_gb)
			l->ge_bad = true;
	}
	return drop;
}

bool il_loss_drop(struct il_loss *l)
{
	bool drop;

	l->seen++;
	switch (l->cfg.model) {
	case IL_LOSS_BERNOULLI:
		drop = il_rng_unit(&l->rng) < l->cfg.p;
		break;
	case IL_LOSS_GILBERT_ELLIOTT:
		drop = ge_step(l);
		break;
	case IL_LOSS_BURST:
		if (l->burst_left) {
			l->burst_left--;
			drop = true;
		} else if (il_rng_unit(&l->rng) < l->burst_start_p) {
			l->burst_left = l->cfg.burst_len - 1;
			drop = true;
		} else {
			drop = false;
		}
		break;
	default:
		drop = false;
		break;
	}
	l->lost += drop;
	return drop;
}
