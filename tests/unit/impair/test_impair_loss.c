/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Loss models against their closed forms over 10^6 packets. Tolerances
 * are five standard errors of the estimate (computed from the model's own
 * variance, correlation included for Gilbert-Elliott and bursts), so a
 * correct model fails about once in 3.5 million runs and a model that is
 * off by more than a few percent fails every time. Seeds are fixed, so a
 * run is reproducible anyway.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <interlink/impair.h>

#include "impair_check.h"

#define N_PKTS 1000000u
#define SIGMAS 5.0

/* Loss runs (maximal stretches of consecutive losses) over a sequence. */
struct run_stats {
	uint64_t n, lost;
	uint64_t runs, run_sum, run_max;
	uint64_t run_not_multiple; /* burst model: runs that are not k * L */
	uint64_t run_exact;        /* burst model: runs of exactly L */
	uint32_t cur;
	/* Gilbert-Elliott: sojourns in the bad and the good state */
	uint64_t bad_pkts, bad_runs, good_runs, good_pkts;
	int prev_state; /* -1 before the first packet */
};

static void run_close(struct run_stats *s, uint32_t burst_len)
{
	if (s->cur == 0)
		return;
	s->runs++;
	s->run_sum += s->cur;
	if (s->cur > s->run_max)
		s->run_max = s->cur;
	if (burst_len) {
		s->run_not_multiple += s->cur % burst_len != 0;
		s->run_exact += s->cur == burst_len;
	}
	s->cur = 0;
}

static void run_add(struct run_stats *s, bool drop, uint32_t burst_len)
{
	s->n++;
	s->lost += drop;
	if (drop)
		s->cur++;
	else
		run_close(s, burst_len);
}

static void init_or_fail(struct il_loss *l, const struct il_loss_cfg *cfg)
{
	char err[256];

	if (il_loss_init(l, cfg, err, sizeof(err)) != 0)
		fail_msg("il_loss_init: %s", err);
}

/* ---- PRNG --------------------------------------------------------------- */

static void test_rng(void **state)
{
	struct il_rng a, b, c;
	double sum = 0;
	uint64_t bins[16] = { 0 };
	unsigned same = 0;

	(void)state;
	il_rng_seed(&a, 42);
	il_rng_seed(&b, 42);
	il_rng_seed(&c, 43);
	for (int i = 0; i < 1000; i++) {
		uint64_t x = il_rng_next(&a);

		assert_true(x == il_rng_next(&b));
		same += x == il_rng_next(&c);
	}
	assert_true(same == 0);

	/* Uniform on [0, 1): mean and 16 equal bins, each within 5 sigma. */
	for (unsigned i = 0; i < N_PKTS; i++) {
		double u = il_rng_unit(&a);

		assert_true(u >= 0.0 && u < 1.0);
		sum += u;
		bins[(int)(u * 16)]++;
	}
	CHECK_NEAR("rng unit mean", sum / N_PKTS, 0.5, SIGMAS * sqrt(1.0 / 12 / N_PKTS));
	for (int i = 0; i < 16; i++) {
		double p = 1.0 / 16;

		if (fabs((double)bins[i] - N_PKTS * p) > SIGMAS * sqrt(N_PKTS * p * (1 - p)))
			fail_msg("rng bin %d holds %" PRIu64 " of %u", i, bins[i], N_PKTS);
	}
}

/* ---- parameter validation ------------------------------------------------ */

static void test_loss_validation(void **state)
{
	static const struct {
		struct il_loss_cfg cfg;
		const char *names, *range;
	} bad[] = {
		{ { .model = IL_LOSS_BERNOULLI, .p = -0.01 }, "'p'", "[0, 1]" },
		{ { .model = IL_LOSS_BERNOULLI, .p = 1.5 }, "'p'", "[0, 1]" },
		{ { .model = IL_LOSS_BERNOULLI, .p = NAN }, "'p'", "[0, 1]" },
		{ { .model = IL_LOSS_BURST, .p = 0.1, .burst_len = 0 }, "'burst_len'", ">= 1" },
		{ { .model = IL_LOSS_BURST, .p = 2, .burst_len = 4 }, "'p'", "[0, 1]" },
		{ { .model = IL_LOSS_GILBERT_ELLIOTT, .ge_p_gb = 1.01, .ge_p_bg = 0.5 },
		  "'ge_p_gb'", "[0, 1]" },
		{ { .model = IL_LOSS_GILBERT_ELLIOTT, .ge_p_gb = 0.1, .ge_p_bg = -1 },
		  "'ge_p_bg'", "[0, 1]" },
		{ { .model = IL_LOSS_GILBERT_ELLIOTT, .ge_p_bg = 0.5, .ge_loss_good = 7 },
		  "'ge_loss_good'", "[0, 1]" },
		{ { .model = IL_LOSS_GILBERT_ELLIOTT, .ge_p_bg = 0.5, .ge_loss_bad = NAN },
		  "'ge_loss_bad'", "[0, 1]" },
		{ { .model = (enum il_loss_model)42 }, "'model'", "bernoulli" },
	};
	static const struct il_loss_cfg good[] = {
		{ .model = IL_LOSS_NONE },
		{ .model = IL_LOSS_BERNOULLI, .p = 0 },
		{ .model = IL_LOSS_BERNOULLI, .p = 1 },
		{ .model = IL_LOSS_BURST, .p = 1, .burst_len = 1 },
		{ .model = IL_LOSS_GILBERT_ELLIOTT, .ge_p_gb = 1, .ge_p_bg = 0, .ge_loss_bad = 1 },
	};
	struct il_loss l;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(il_loss_init(&l, &bad[i].cfg, err, sizeof(err)), -1);
		print_message("  error: %s\n", err);
		CHECK_ERR_NAMES(err, bad[i].names);
		CHECK_ERR_NAMES(err, bad[i].range);
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_int_equal(il_loss_init(&l, &good[i], err, sizeof(err)), 0);
}

/* ---- Bernoulli ------------------------------------------------------------ */

static void test_bernoulli(void **state)
{
	static const double ps[] = { 0.001, 0.01, 0.1, 0.5 };
	char what[64];

	(void)state;
	for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
		struct il_loss_cfg cfg = { .model = IL_LOSS_BERNOULLI, .p = ps[i], .seed = 7 + i };
		struct run_stats s = { 0 };
		struct il_loss l;
		double p = ps[i], mean_run, se_run;

		init_or_fail(&l, &cfg);
		for (unsigned k = 0; k < N_PKTS; k++)
			run_add(&s, il_loss_drop(&l), 0);
		run_close(&s, 0);
		assert_true(l.seen == N_PKTS && l.lost == s.lost);
		snprintf(what, sizeof(what), "bernoulli p=%g loss rate", p);
		CHECK_NEAR(what, (double)s.lost / N_PKTS, p, SIGMAS * sqrt(p * (1 - p) / N_PKTS));
		/* Independent losses: run lengths are geometric, mean 1/(1-p). */
		mean_run = (double)s.run_sum / s.runs;
		se_run = sqrt(p) / (1 - p) / sqrt((double)s.runs);
		snprintf(what, sizeof(what), "bernoulli p=%g mean loss run", p);
		CHECK_NEAR(what, mean_run, 1 / (1 - p), SIGMAS * se_run);
	}

	/* The ends of the range are exact. */
	for (int e = 0; e <= 1; e++) {
		struct il_loss_cfg cfg = { .model = IL_LOSS_BERNOULLI, .p = e, .seed = 1 };
		struct il_loss l;

		init_or_fail(&l, &cfg);
		for (unsigned k = 0; k < 100000; k++)
			assert_true(il_loss_drop(&l) == (bool)e);
	}
}

/* ---- Gilbert-Elliott ----------------------------------------------------- */

static void test_gilbert_elliott(void **state)
{
	static const struct il_loss_cfg cases[] = {
		/* Pure Gilbert: every bad-state packet lost, mean burst 5. */
		{ .model = IL_LOSS_GILBERT_ELLIOTT, .ge_p_gb = 0.01, .ge_p_bg = 0.2,
		  .ge_loss_good = 0, .ge_loss_bad = 1, .seed = 11 },
		/* Elliott: a little loss when good, half when bad. */
		{ .model = IL_LOSS_GILBERT_ELLIOTT, .ge_p_gb = 0.005, .ge_p_bg = 0.1,
		  .ge_loss_good = 0.001, .ge_loss_bad = 0.5, .seed = 12 },
		{ .model = IL_LOSS_GILBERT_ELLIOTT, .ge_p_gb = 0.05, .ge_p_bg = 0.5,
		  .ge_loss_good = 0.0, .ge_loss_bad = 0.8, .seed = 13 },
	};
	char what[96];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct il_loss_cfg *c = &cases[i];
		struct run_stats s = { .prev_state = -1 };
		struct il_loss l;
		double pb = c->ge_p_gb / (c->ge_p_gb + c->ge_p_bg), pg = 1 - pb;
		double lam = 1 - c->ge_p_gb - c->ge_p_bg;
		double want = pg * c->ge_loss_good + pb * c->ge_loss_bad;
		/* Variance of the loss fraction: Bernoulli noise around the
		 * state's loss probability, plus the state process, whose
		 * autocorrelation decays as lam^k. */
		double noise = pg * c->ge_loss_good * (1 - c->ge_loss_good) +
			       pb * c->ge_loss_bad * (1 - c->ge_loss_bad);
		double dh = c->ge_loss_bad - c->ge_loss_good;
		double var = noise + pg * pb * dh * dh * (1 + lam) / (1 - lam);
		double sojourn, se;

		init_or_fail(&l, c);
		for (unsigned k = 0; k < N_PKTS; k++) {
			int bad = l.ge_bad;

			if (bad != s.prev_state) {
				if (bad)
					s.bad_runs++;
				else
					s.good_runs++;
			}
			s.prev_state = bad;
			s.bad_pkts += bad;
			s.good_pkts += !bad;
			run_add(&s, il_loss_drop(&l), 0);
		}
		run_close(&s, 0);
		print_message(" GE p_gb=%g p_bg=%g loss_good=%g loss_bad=%g\n", c->ge_p_gb,
			      c->ge_p_bg, c->ge_loss_good, c->ge_loss_bad);
		CHECK_NEAR("GE loss rate vs stationary", (double)s.lost / N_PKTS, want,
			   SIGMAS * sqrt(var / N_PKTS));
		CHECK_NEAR("GE time in bad state", (double)s.bad_pkts / N_PKTS, pb,
			   SIGMAS * sqrt(pg * pb * (1 + lam) / (1 - lam) / N_PKTS));
		/* Sojourns are geometric: mean 1/p, sd sqrt(1-p)/p. */
		sojourn = (double)s.bad_pkts / s.bad_runs;
		se = sqrt(1 - c->ge_p_bg) / c->ge_p_bg / sqrt((double)s.bad_runs);
		snprintf(what, sizeof(what), "GE mean bad sojourn (%" PRIu64 " runs)", s.bad_runs);
		CHECK_NEAR(what, sojourn, 1 / c->ge_p_bg, SIGMAS * se);
		sojourn = (double)s.good_pkts / s.good_runs;
		se = sqrt(1 - c->ge_p_gb) / c->ge_p_gb / sqrt((double)s.good_runs);
		CHECK_NEAR("GE mean good sojourn", sojourn, 1 / c->ge_p_gb, SIGMAS * se);
		if (c->ge_loss_good == 0 && c->ge_loss_bad == 1) {
			/* Loss runs are then exactly the bad sojourns. */
			assert_true(s.runs == s.bad_runs);
			CHECK_NEAR("GE mean loss burst", (double)s.run_sum / s.runs,
				   1 / c->ge_p_bg,
				   SIGMAS * sqrt(1 - c->ge_p_bg) / c->ge_p_bg / sqrt((double)s.runs));
		}
	}
}

/* ---- fixed-length bursts --------------------------------------------------- */

static void test_fixed_bursts(void **state)
{
	static const struct {
		double p;
		uint32_t len;
	} cases[] = {
		{ 0.01, 5 }, { 0.1, 10 }, { 0.001, 50 }, { 0.3, 3 }, { 0.05, 1 }, { 0.02, 100 },
	};
	char what[96];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct il_loss_cfg cfg = { .model = IL_LOSS_BURST, .p = cases[i].p,
					   .burst_len = cases[i].len, .seed = 100 + i };
		struct run_stats s = { 0 };
		struct il_loss l;
		double p = cfg.p, L = cfg.burst_len, q, cycle, var_cycle, se;
		uint64_t n, starts = 0;
		bool in_burst = false;

		init_or_fail(&l, &cfg);
		/* A burst starts on a loss taken with no burst running. */
		for (unsigned k = 0; k < N_PKTS || l.burst_left; k++) {
			bool drop;

			in_burst = l.burst_left != 0;
			drop = il_loss_drop(&l);
			starts += drop && !in_burst;
			run_add(&s, drop, cfg.burst_len);
		}
		run_close(&s, cfg.burst_len);
		n = s.n;

		print_message(" burst p=%g burst_len=%u: %" PRIu64 " loss runs, longest %" PRIu64
			      "\n", p, cfg.burst_len, s.runs, s.run_max);
		/* Exactness: a burst is burst_len losses; back-to-back bursts
		 * make a run of k * burst_len, never anything else. */
		if (s.run_not_multiple)
			fail_msg("%" PRIu64 " loss runs are not a multiple of %u", s.run_not_multiple,
				 cfg.burst_len);
		assert_true(s.lost % cfg.burst_len == 0);

		/* Renewal cycle: geometric gap (mean (1-q)/q, var (1-q)/q^2)
		 * then L losses; the burst count's variance is n var/E^3. */
		q = l.burst_start_p;
		cycle = L / p;
		var_cycle = (1 - q) / (q * q);
		se = L * sqrt((double)n * var_cycle / (cycle * cycle * cycle)) / (double)n;
		CHECK_NEAR("burst long-run loss fraction", (double)s.lost / (double)n, p,
			   SIGMAS * se);
		/* A run stays a single burst when the packet after it does
		 * not start another: probability 1 - q. */
		if (cfg.burst_len > 1) {
			snprintf(what, sizeof(what), "runs of exactly burst_len=%u (share)",
				 cfg.burst_len);
			CHECK_NEAR(what, (double)s.run_exact / s.runs, 1 - q,
				   SIGMAS * sqrt(q * (1 - q) / s.runs));
		}
		CHECK_NEAR("mean burst length (lost / starts)", (double)s.lost / (double)starts, L,
			   0);
	}

	/* p = 1 loses everything; p = 0 nothing. */
	{
		struct il_loss_cfg all = { .model = IL_LOSS_BURST, .p = 1, .burst_len = 4 };
		struct il_loss_cfg none = { .model = IL_LOSS_BURST, .p = 0, .burst_len = 4 };
		struct il_loss a, b;

		init_or_fail(&a, &all);
		init_or_fail(&b, &none);
		for (int k = 0; k < 10000; k++) {
			assert_true(il_loss_drop(&a));
			assert_false(il_loss_drop(&b));
		}
	}
}

/* With bursts rare enough that none touch, every run is exactly L long. */
static void test_fixed_bursts_separated(void **state)
{
	struct il_loss_cfg cfg = { .model = IL_LOSS_BURST, .p = 0.002, .burst_len = 8,
				   .seed = 5 };
	struct run_stats s = { 0 };
	struct il_loss l;
	uint64_t touching = 0, starts = 0;
	bool prev = false;

	(void)state;
	init_or_fail(&l, &cfg);
	for (unsigned k = 0; k < N_PKTS || l.burst_left; k++) {
		bool idle = l.burst_left == 0;
		bool drop = il_loss_drop(&l);

		/* A burst that begins right where the last one ended merges
		 * with it; count those to know what to expect below. */
		starts += drop && idle;
		touching += drop && idle && prev;
		prev = drop;
		run_add(&s, drop, cfg.burst_len);
	}
	run_close(&s, cfg.burst_len);
	print_message(" burst p=0.002 len=8: %" PRIu64 " bursts, %" PRIu64 " loss runs, %" PRIu64
		      " of exactly 8, %" PRIu64 " touching the previous burst\n",
		      starts, s.runs, s.run_exact, touching);
	assert_true(s.runs > 100);
	/* Each burst is exactly 8 losses; a run longer than 8 happens only
	 * where bursts touch, and then each touch adds exactly one burst. */
	assert_true(s.lost == starts * cfg.burst_len);
	assert_true(s.run_not_multiple == 0);
	assert_true(starts == s.runs + touching);
	assert_true(s.run_exact >= s.runs - touching);
}

/* ---- determinism ----------------------------------------------------------- */

static void test_determinism(void **state)
{
	static const struct il_loss_cfg cases[] = {
		{ .model = IL_LOSS_BERNOULLI, .p = 0.1 },
		{ .model = IL_LOSS_GILBERT_ELLIOTT, .ge_p_gb = 0.02, .ge_p_bg = 0.3,
		  .ge_loss_good = 0.01, .ge_loss_bad = 0.9 },
		{ .model = IL_LOSS_BURST, .p = 0.1, .burst_len = 6 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct il_loss_cfg c1 = cases[i], c2 = cases[i];
		struct il_loss a, b, c;
		unsigned differ = 0, lost = 0;
		bool first[1000];

		c1.seed = 1234;
		c2.seed = 1235;
		init_or_fail(&a, &c1);
		init_or_fail(&b, &c1);
		init_or_fail(&c, &c2);
		for (unsigned k = 0; k < 200000; k++) {
			bool x = il_loss_drop(&a);

			if (k < 1000)
				first[k] = x;
			assert_true(x == il_loss_drop(&b));
			differ += x != il_loss_drop(&c);
			lost += x;
		}
		print_message(" model %d: same seed identical, seed+1 differs on %u of 200000 "
			      "(%u lost)\n", (int)cases[i].model, differ, lost);
		/* Two independent streams at ~10%% loss disagree on ~18%%
		 * of packets; demanding 5%% catches a seed that is ignored. */
		assert_true(differ > 10000);
		/* Re-initialising replays the same sequence. */
		init_or_fail(&a, &c1);
		for (unsigned k = 0; k < 1000; k++)
			assert_true(il_loss_drop(&a) == first[k]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rng),
		cmocka_unit_test(test_loss_validation),
		cmocka_unit_test(test_bernoulli),
		cmocka_unit_test(test_gilbert_elliott),
		cmocka_unit_test(test_fixed_bursts),
		cmocka_unit_test(test_fixed_bursts_separated),
		cmocka_unit_test(test_determinism),
	};

	return cmocka_run_group_tests_name("impair_loss", tests, NULL, NULL);
}
