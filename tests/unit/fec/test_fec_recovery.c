/* SPDX-License-Identifier: BSD-3-Clause
 *
 * FEC recovery against loss, the Maelstrom paper's analysis and figures
 * as tests (docs/fec.md, "Measured"):
 *   - Fig. 8 / §4.4: under independent loss the recovered fraction of
 *     lost packets is at least the closed-form bound 1 - (1-(1-p)^r)^c,
 *     for (7,2) and (8,3) at p = 0.1%, 1%, 5%, 10%, 10^6 packets each;
 *     Reed-Solomon at the same (r, c) matches its closed form;
 *   - Fig. 13: under bursty loss, relatively prime interleaves (1,11,19)
 *     beat (1,10,20) at high loss;
 *   - Fig. 14: (1,19,41) recovers >= 99% of packets lost in 25-packet
 *     bursts, and singletons within a few dozen packets;
 *   - Fig. 15: RS (8,2) at interleave 20 against layered (1,40): both
 *     tolerate 30-packet bursts; RS latency is flat, layered repairs
 *     singletons almost at once.
 * Loss hits every link packet, data and repairs alike. Packets are small
 * (40..100 bytes) to keep the suite fast.
 *
 * Modes: no argument runs the tests; `--csv [N]` prints the recovery
 * curves (measured layered, its bound, measured RS, RS closed form) for
 * bench/fec/plot_recovery.py; `--csv-bursts [N]` prints Fig. 13 and 14
 * points.
 */
#include <math.h>
#include <stdio.h>

#include "fec_test.h"

#define N_POINT 1000000ull

static void run(struct sim_cfg *sc, struct sim_res *res)
{
	if (sim_run(sc, res) != 0)
		fail_msg("simulation failed");
	assert_int_equal(res->bad_recovered, 0);
	assert_int_equal(res->dup_recovered, 0);
}

static void li_cfg(struct sim_cfg *sc, unsigned r, unsigned c, const unsigned *iv)
{
	sim_cfg_defaults(sc);
	sc->fec.r = (uint8_t)r;
	sc->fec.c = (uint8_t)c;
	memset(sc->fec.interleave, 0, sizeof(sc->fec.interleave));
	for (unsigned l = 0; l < c; l++)
		sc->fec.interleave[l] = (uint16_t)iv[l];
}

static void rs_cfg(struct sim_cfg *sc, unsigned r, unsigned c, unsigned interleave)
{
	sim_cfg_defaults(sc);
	sc->fec.code = IL_FEC_CODE_RS;
	sc->fec.r = (uint8_t)r;
	sc->fec.c = (uint8_t)c;
	sc->fec.interleave[0] = (uint16_t)interleave;
}

static void bernoulli(struct sim_cfg *sc, double p, uint64_t seed, uint64_t n)
{
	sc->loss.model = IL_LOSS_BERNOULLI;
	sc->loss.p = p;
	sc->loss.seed = seed;
	sc->npkts = n;
}

static void bursts(struct sim_cfg *sc, double p, unsigned len, uint64_t seed, uint64_t n)
{
	sc->loss.model = IL_LOSS_BURST;
	sc->loss.p = p;
	sc->loss.burst_len = len;
	sc->loss.seed = seed;
	sc->npkts = n;
}

/*
 * Largest number of unrecovered packets still consistent with the bound:
 * with lost packets each recovered with probability >= q, the count of
 * failures is at most Poisson(lost * (1-q)) in the tail; allow k with
 * P(X > k) < 1e-6. Where the bound predicts far less than one failure
 * (0.1% loss) this allows a couple instead of demanding a perfect run.
 */
static uint64_t allowed_failures(uint64_t lost, double q)
{
	double lambda = (double)lost * (1.0 - q), term = exp(-lambda), cdf = term;
	uint64_t k = 0;

	while (1.0 - cdf > 1e-6 && k < lost) {
		k++;
		term *= lambda / (double)k;
		cdf += term;
	}
	return k;
}

/* ---- Fig. 8 / §4.4 ---------------------------------------------------- */

static const double loss_pts[] = { 0.001, 0.01, 0.05, 0.10 };

static void check_bound(unsigned r, unsigned c, const unsigned *iv)
{
	for (unsigned i = 0; i < 4; i++) {
		double p = loss_pts[i], bound = il_fec_li_bound(p, r, c);
		struct sim_cfg sc;
		struct sim_res res;
		uint64_t fails;

		li_cfg(&sc, r, c, iv);
		bernoulli(&sc, p, 1000 + i, N_POINT);
		run(&sc, &res);
		fails = res.data_lost - res.recovered;
		print_message("(%u,%u) p=%5.3f%%: lost %7llu recovered %.5f%%  bound %.5f%%  "
			      "(RS closed form %.5f%%)\n",
			      r, c, 100 * p, (unsigned long long)res.data_lost,
			      100 * sim_frac(&res), 100 * bound, 100 * il_fec_rs_prob(p, r, c));
		if (sim_frac(&res) < bound && fails > allowed_failures(res.data_lost, bound))
			fail_msg("(%u,%u) at p=%g: recovered %.6f < bound %.6f (%llu failures, "
				 "%llu allowed)",
				 r, c, p, sim_frac(&res), bound, (unsigned long long)fails,
				 (unsigned long long)allowed_failures(res.data_lost, bound));
	}
}

static void test_bound_7_2(void **state)
{
	static const unsigned iv[] = { 1, 10 };

	(void)state;
	check_bound(7, 2, iv);
}

static void test_bound_8_3(void **state)
{
	static const unsigned iv[] = { 1, 11, 19 };

	(void)state;
	check_bound(8, 3, iv);
}

/* RS at the same (r, c), interleave 1: recovery is exactly "at most c-1
 * of the other r+c-1 symbols lost", so measured and closed form agree
 * within sampling error (losses cluster in blocks, hence the margin). */
static void test_rs_closed_form(void **state)
{
	static const unsigned rc[2][2] = { { 7, 2 }, { 8, 3 } };

	(void)state;
	for (unsigned k = 0; k < 2; k++) {
		for (unsigned i = 0; i < 4; i++) {
			unsigned r = rc[k][0], c = rc[k][1];
			double p = loss_pts[i], q = il_fec_rs_prob(p, r, c), tol;
			struct sim_cfg sc;
			struct sim_res res;

			rs_cfg(&sc, r, c, 1);
			bernoulli(&sc, p, 2000 + i, N_POINT);
			run(&sc, &res);
			tol = 8 * sqrt(q * (1 - q) / (double)res.data_lost) +
			      3.0 / (double)res.data_lost;
			print_message("RS(%u,%u) p=%5.3f%%: recovered %.5f%%  closed form "
				      "%.5f%%\n",
				      r, c, 100 * p, 100 * sim_frac(&res), 100 * q);
			if (fabs(sim_frac(&res) - q) > tol)
				fail_msg("RS(%u,%u) p=%g: %.6f vs closed form %.6f", r, c, p,
					 sim_frac(&res), q);
			assert_int_equal(res.dec.recovered_how[IL_FEC_HOW_RS], res.recovered);
		}
	}
}

/* ---- Fig. 13 ---------------------------------------------------------- */

static void test_fig13_relatively_prime(void **state)
{
	static const unsigned prime[] = { 1, 11, 19 }, shared[] = { 1, 10, 20 };
	static const double ps[] = { 0.001, 0.01, 0.05, 0.10 };
	static const unsigned lens[] = { 5, 10 };
	uint64_t two = 0;

	(void)state;
	for (unsigned b = 0; b < 2; b++) {
		for (unsigned i = 0; i < 4; i++) {
			struct sim_cfg sc;
			struct sim_res a, z;

			li_cfg(&sc, 8, 3, prime);
			bursts(&sc, ps[i], lens[b], 3000 + i, 300000);
			run(&sc, &a);
			li_cfg(&sc, 8, 3, shared);
			bursts(&sc, ps[i], lens[b], 3000 + i, 300000);
			run(&sc, &z);
			two += z.dec.recovered_how[IL_FEC_HOW_TWO_REPAIR];
			print_message("bursts of %2u, p=%5.3f%%: (1,11,19) %.4f%%  (1,10,20) "
				      "%.4f%%\n",
				      lens[b], 100 * ps[i], 100 * sim_frac(&a), 100 * sim_frac(&z));
			if (ps[i] >= 0.05 && sim_frac(&a) < sim_frac(&z) + 0.02)
				fail_msg("bursts of %u at p=%g: (1,11,19) %.4f not above (1,10,20) "
					 "%.4f",
					 lens[b], ps[i], sim_frac(&a), sim_frac(&z));
		}
	}
	/* With interleaves that share packets, Ricochet's two-repair XOR
	 * does fire. */
	print_message("two-repair recoveries with (1,10,20): %llu\n", (unsigned long long)two);
	assert_true(two > 0);
}

/* ---- Fig. 14 ---------------------------------------------------------- */

static void test_fig14_long_bursts(void **state)
{
	static const unsigned wide[] = { 1, 19, 41 }, narrow[] = { 1, 11, 19 };
	struct sim_cfg sc;
	struct sim_res res, imm, nar;

	(void)state;
	/* Delayed XORs: a burst that takes a bin's last packet no longer
	 * takes the repair sent right behind it (§4.3.1). */
	li_cfg(&sc, 8, 3, wide);
	sc.fec.delay_xor = true;
	bursts(&sc, 0.001, 25, 4000, 3000000);
	sc.long_run = 25;
	run(&sc, &res);
	li_cfg(&sc, 8, 3, wide);
	bursts(&sc, 0.001, 25, 4000, 3000000);
	sc.long_run = 25;
	run(&sc, &imm);
	li_cfg(&sc, 8, 3, narrow);
	bursts(&sc, 0.001, 25, 4000, 3000000);
	sc.long_run = 25;
	run(&sc, &nar);
	print_message("25-packet bursts, 0.1%%: (1,19,41) delayed %.3f%% of %llu (mean latency "
		      "%.1f packets), immediate %.3f%%; (1,11,19) %.3f%%\n",
		      100.0 * (double)res.rec_long / (double)res.lost_long,
		      (unsigned long long)res.lost_long, res.lat_long_mean,
		      100.0 * (double)imm.rec_long / (double)imm.lost_long,
		      100.0 * (double)nar.rec_long / (double)nar.lost_long);
	assert_true(res.lost_long > 1500);
	assert_true((double)res.rec_long >= 0.99 * (double)res.lost_long);
	/* Immediate repairs lose the ~1/64 of burst packets that were last
	 * in both of their long bins. */
	assert_true((double)imm.rec_long >= 0.97 * (double)imm.lost_long);
	/* Longer interleaves are what catch long bursts. */
	assert_true(imm.rec_long * nar.lost_long > nar.rec_long * imm.lost_long);

	/* Random singletons come back within a few dozen packets. */
	li_cfg(&sc, 8, 3, wide);
	bernoulli(&sc, 0.001, 4100, N_POINT);
	run(&sc, &res);
	print_message("singletons at 0.1%%: recovered %.4f%%, latency mean %.1f p99 %.0f max "
		      "%.0f packets; decoder mean %.1f us\n",
		      100 * sim_frac(&res), res.lat_single_mean, res.lat_single_p99,
		      res.lat_single_max,
		      (double)res.dec.lat_ns_sum / 1000.0 /
			      (double)(res.dec.recovered[0] + res.dec.recovered[1] +
				       res.dec.recovered[2]));
	assert_true(res.lost_single > 900);
	assert_int_equal(res.rec_single, res.lost_single);
	/* The decoder's own latency counters agree with the harness: in
	 * packets, and in time (one link packet per microsecond, about
	 * 1 + 3/8 link packets per data packet). */
	{
		uint64_t nrec = res.dec.recovered[0] + res.dec.recovered[1] + res.dec.recovered[2];
		double pk = (double)res.dec.lat_pkts_sum / (double)nrec;
		double us = (double)res.dec.lat_ns_sum / 1000.0 / (double)nrec;
		uint64_t hist = 0;

		for (unsigned b = 0; b < IL_FEC_LAT_BUCKETS; b++)
			hist += res.dec.lat_pkts_hist[b];
		assert_int_equal(hist, nrec);
		assert_true(fabs(pk - res.lat_mean) < 1.0);
		assert_true(us > 0.5 * 1.375 * res.lat_mean && us < 2.0 * 1.375 * res.lat_mean);
	}
	assert_true(res.lat_single_mean <= 8);
	assert_true(res.lat_single_p99 <= 24);
}

/* ---- Fig. 15 ---------------------------------------------------------- */

static void fig15_loss(struct sim_cfg *sc)
{
	sc->npkts = 2000000;
	sc->fec.delay_xor = true;
	sc->loss.model = IL_LOSS_BERNOULLI;
	sc->loss.p = 0.001;
	sc->loss.seed = 5000;
	sc->use_loss2 = true;
	sc->loss2.model = IL_LOSS_BURST;
	sc->loss2.p = 0.0005;
	sc->loss2.burst_len = 30;
	sc->loss2.seed = 5001;
}

static void test_fig15_rs_vs_layered(void **state)
{
	static const unsigned iv[] = { 1, 40 };
	struct sim_cfg sc;
	struct sim_res li, rs;

	(void)state;
	li_cfg(&sc, 8, 2, iv);
	fig15_loss(&sc);
	sc.long_run = 20;
	run(&sc, &li);
	rs_cfg(&sc, 8, 2, 20);
	fig15_loss(&sc);
	sc.long_run = 20;
	run(&sc, &rs);
	print_message("0.1%% singletons + 30-packet bursts: layered (1,40) %.3f%% (singletons "
		      "%.1f, bursts %.1f packets), RS interleave 20 %.3f%% (%.1f, %.1f)\n",
		      100 * sim_frac(&li), li.lat_single_mean, li.lat_long_mean,
		      100 * sim_frac(&rs), rs.lat_single_mean, rs.lat_long_mean);
	assert_true(sim_frac(&li) > 0.99);
	assert_true(sim_frac(&rs) > 0.98);
	assert_int_equal(li.rec_single, li.lost_single);
	/* Layered: singletons almost at once, bursts much later. RS: about
	 * the same wait for both. */
	assert_true(li.lat_single_mean * 5 < rs.lat_single_mean);
	assert_true(li.lat_long_mean > 10 * li.lat_single_mean);
	assert_true(rs.lat_long_mean < 1.5 * rs.lat_single_mean);
}

/* ---- CSV modes -------------------------------------------------------- */

static int csv_curves(uint64_t n)
{
	static const double ps[] = { 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
				     0.08,  0.10,  0.15,  0.20 };
	static const unsigned rc[][2] = { { 7, 2 }, { 8, 3 } };
	static const unsigned iv72[] = { 1, 10 }, iv83[] = { 1, 11, 19 };

	printf("code,r,c,interleaves,p,lost,recovered,measured,closed_form\n");
	for (unsigned k = 0; k < 2; k++) {
		unsigned r = rc[k][0], c = rc[k][1];

		for (unsigned i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
			struct sim_cfg sc;
			struct sim_res res;

			li_cfg(&sc, r, c, k ? iv83 : iv72);
			bernoulli(&sc, ps[i], 1000 + i, n);
			if (sim_run(&sc, &res) != 0)
				return 1;
			printf("xor,%u,%u,%s,%g,%llu,%llu,%.7f,%.7f\n", r, c,
			       k ? "1 11 19" : "1 10", ps[i], (unsigned long long)res.data_lost,
			       (unsigned long long)res.recovered, sim_frac(&res),
			       il_fec_li_bound(ps[i], r, c));
			rs_cfg(&sc, r, c, 1);
			bernoulli(&sc, ps[i], 2000 + i, n);
			if (sim_run(&sc, &res) != 0)
				return 1;
			printf("rs,%u,%u,1,%g,%llu,%llu,%.7f,%.7f\n", r, c, ps[i],
			       (unsigned long long)res.data_lost, (unsigned long long)res.recovered,
			       sim_frac(&res), il_fec_rs_prob(ps[i], r, c));
			fflush(stdout);
		}
	}
	return 0;
}

static int csv_bursts(uint64_t n)
{
	static const unsigned sets[][3] = { { 1, 10, 20 }, { 1, 11, 19 }, { 1, 19, 41 } };
	static const double ps[] = { 0.001, 0.003, 0.01, 0.03, 0.05, 0.10 };
	static const unsigned lens[] = { 1, 5, 10, 15, 20, 25, 30, 40 };

	printf("figure,interleaves,delay,burst,p,lost,recovered,measured,lat_mean\n");
	for (unsigned s = 0; s < 2; s++)
		for (unsigned i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
			struct sim_cfg sc;
			struct sim_res res;

			li_cfg(&sc, 8, 3, sets[s]);
			bursts(&sc, ps[i], 5, 3000 + i, n);
			if (sim_run(&sc, &res) != 0)
				return 1;
			printf("13,%u %u %u,0,5,%g,%llu,%llu,%.6f,%.2f\n", sets[s][0], sets[s][1],
			       sets[s][2], ps[i], (unsigned long long)res.data_lost,
			       (unsigned long long)res.recovered, sim_frac(&res), res.lat_mean);
			fflush(stdout);
		}
	for (unsigned s = 1; s < 3; s++)
		for (unsigned delay = 0; delay < 2; delay++)
			for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
				struct sim_cfg sc;
				struct sim_res res;

				li_cfg(&sc, 8, 3, sets[s]);
				sc.fec.delay_xor = delay;
				bursts(&sc, 0.001, lens[i], 4000 + i, n);
				if (sim_run(&sc, &res) != 0)
					return 1;
				printf("14,%u %u %u,%u,%u,0.001,%llu,%llu,%.6f,%.2f\n", sets[s][0],
				       sets[s][1], sets[s][2], delay, lens[i],
				       (unsigned long long)res.data_lost,
				       (unsigned long long)res.recovered, sim_frac(&res),
				       res.lat_mean);
				fflush(stdout);
			}
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bound_7_2),
		cmocka_unit_test(test_bound_8_3),
		cmocka_unit_test(test_rs_closed_form),
		cmocka_unit_test(test_fig13_relatively_prime),
		cmocka_unit_test(test_fig14_long_bursts),
		cmocka_unit_test(test_fig15_rs_vs_layered),
	};

	if (argc > 1 && strcmp(argv[1], "--csv") == 0)
		return csv_curves(argc > 2 ? strtoull(argv[2], NULL, 0) : N_POINT);
	if (argc > 1 && strcmp(argv[1], "--csv-bursts") == 0)
		return csv_bursts(argc > 2 ? strtoull(argv[2], NULL, 0) : N_POINT);
	return cmocka_run_group_tests_name("fec_recovery", tests, NULL, NULL);
}
