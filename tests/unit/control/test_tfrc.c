/* SPDX-License-Identifier: BSD-3-Clause
 * TCP-friendly rate: Table 4.3 of the thesis recomputed from Tables 4.1
 * and 4.2 with Eq. 4.1 (s = 1400 B, 1 Mb = 10^6 bit); the RTT estimator of
 * Fig. 4.3; the loss-event estimator of section 4.3.2 on synthetic
 * sequences.
 *
 * argv[1]: the tables as extracted from the thesis text;
 * argv[2] (optional): the thesis text, to check the extract against it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <interlink/tfrc.h>

#define SITES 6
#define MS 1000000ull

static const char *tables_path;
static const char *thesis_path;

/* tab[t][row][col]; NAN where the cell is blank. */
static double tab[3][SITES][SITES];
static char rows_text[3 * (SITES + 1)][128];
static unsigned n_rows_text;

static void load_tables(void)
{
	FILE *f = fopen(tables_path, "r");
	char line[512];
	int t = -1, row = -1;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f) != NULL) {
		char *p = line, *cell;
		int col = -1;

		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		if (strncmp(line, "[Table 4.", 9) == 0) {
			t = line[9] - '1';
			assert_true(t >= 0 && t < 3);
			row = -1;
			continue;
		}
		assert_true(t >= 0);
		assert_true(n_rows_text < sizeof(rows_text) / sizeof(rows_text[0]));
		assert_true(strlen(line) < sizeof(rows_text[0]));
		strcpy(rows_text[n_rows_text++], line);
		if (strncmp(line, "Site\t", 5) == 0) {
			row = 0;
			continue;
		}
		assert_true(row >= 0 && row < SITES);
		/* strsep keeps empty fields: a blank cell is "\t\t". */
		while ((cell = strsep(&p, "\t")) != NULL) {
			if (col >= 0) {
				assert_true(col < SITES);
				tab[t][row][col] = cell[0] ? strtod(cell, NULL) : NAN;
			}
			col++;
		}
		assert_int_equal(col, SITES);
		row++;
	}
	fclose(f);
	assert_int_equal(n_rows_text, 3 * (SITES + 1));
}

static void test_extract_matches_thesis(void **state)
{
	FILE *f;
	char line[4096];
	bool found[3 * (SITES + 1)] = { false };

	(void)state;
	if (thesis_path == NULL || (f = fopen(thesis_path, "r")) == NULL) {
		print_message("thesis text not available: extract not cross-checked\n");
		skip();
		return;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		for (unsigned i = 0; i < n_rows_text; i++)
			if (strcmp(line, rows_text[i]) == 0)
				found[i] = true;
	}
	fclose(f);
	for (unsigned i = 0; i < n_rows_text; i++) {
		if (!found[i])
			print_message("not in the thesis text: '%s'\n", rows_text[i]);
		assert_true(found[i]);
	}
}

/* Cells of Table 4.3 that Eq. 4.1 reproduces with parameter b and RTO
 * factor k; checks blanks too. */
static unsigned count_matches(double s_bytes, double b, double k, bool print, double *worst)
{
	unsigned match = 0;

	*worst = 0;
	for (int r = 0; r < SITES; r++) {
		for (int c = 0; c < SITES; c++) {
			double rtt = tab[0][r][c] / 1e3, p = tab[1][r][c] / 100, want = tab[2][r][c];
			double got;

			if (r == c) {
				/* No RTT to oneself, no loss, no rate. */
				assert_true(isnan(tab[0][r][c]));
				assert_true(p == 0);
				assert_true(isnan(want));
				if (print)
					print_message("%8s", "");
				continue;
			}
			got = il_tfrc_rate_ex(s_bytes * 8, rtt, p, b, k * rtt) / 1e6;
			if (isnan(want)) {
				/* Blank exactly where no loss was seen: the rate is
				 * not limited by that receiver. */
				assert_true(p == 0);
				assert_true(isinf(got));
				if (print)
					print_message("%8s", "-");
				continue;
			}
			assert_true(p > 0);
			if (print)
				print_message("%8.4f", got);
			if (fabs(got - want) <= 0.005)
				match++;
			if (fabs(got - want) > *worst)
				*worst = fabs(got - want);
		}
		if (print)
			print_message("\n");
	}
	return match;
}

static void test_table_4_3(void **state)
{
	unsigned nonblank = 0, m;
	double worst;

	(void)state;
	for (int r = 0; r < SITES; r++)
		for (int c = 0; c < SITES; c++)
			nonblank += !isnan(tab[2][r][c]);
	assert_int_equal(nonblank, 26);
	print_message("Table 4.3 recomputed (Mb/s, rows = receivers, columns = senders):\n");
	m = count_matches(1400, IL_TFRC_B, IL_TFRC_RTO_FACTOR, true, &worst);
	print_message("s = 1400 B, b = 2, RTO = 4 RTT: %u of 26 cells within 0.005 "
		      "(largest difference %.4f Mb/s)\n",
		      m, worst);
	assert_int_equal(m, 26);
	assert_true(worst <= 0.005);
	/* The cell the digest quotes: receiver RON45, sender RON33. */
	assert_true(fabs(il_tfrc_rate(1400 * 8, 0.02527, 0.0063) / 1e6 - 4.58) < 0.005);
	/* The check has teeth: the wrong constants do not reproduce it. */
	m = count_matches(1400, 1, IL_TFRC_RTO_FACTOR, false, &worst);
	print_message("b = 1: %u of 26\n", m);
	assert_true(m <= 11);
	m = count_matches(1400, IL_TFRC_B, 2, false, &worst);
	print_message("RTO = 2 RTT: %u of 26\n", m);
	assert_true(m <= 11);
	m = count_matches(1300, IL_TFRC_B, IL_TFRC_RTO_FACTOR, false, &worst);
	assert_true(m < 26);
}

static void test_rate_edges(void **state)
{
	double prev = INFINITY;

	(void)state;
	assert_true(isinf(il_tfrc_rate(11200, 0.1, 0)));
	assert_true(isnan(il_tfrc_rate(11200, 0, 0.01)));
	assert_true(isnan(il_tfrc_rate(11200, 0.1, -0.1)));
	assert_true(isnan(il_tfrc_rate(11200, 0.1, 1.5)));
	assert_true(isnan(il_tfrc_rate(0, 0.1, 0.1)));
	/* Falls with p (and with RTT); finite at p = 1. */
	for (double p = 1e-6; p <= 1; p *= 1.5) {
		double r = il_tfrc_rate(11200, 0.05, p);

		assert_true(r < prev && r > 0);
		assert_true(il_tfrc_rate(11200, 0.1, p) < r);
		prev = r;
	}
	assert_true(isfinite(il_tfrc_rate(11200, 0.05, 1)));
}

static void test_rtt_estimator(void **state)
{
	struct il_tfrc_sendlog_slot tbl[8];
	struct il_tfrc_sendlog lg;
	struct il_tfrc_rtt r;

	(void)state;
	/* Fig. 4.3: RTT = (T_now - T_out) - Delta. */
	assert_int_equal(il_tfrc_rtt_sample(100, 400, 50), 250);
	assert_int_equal(il_tfrc_rtt_sample(100, 400, 300), 0);
	assert_int_equal(il_tfrc_rtt_sample(100, 400, 301), -1);
	assert_int_equal(il_tfrc_rtt_sample(500, 400, 0), -1);

	il_tfrc_sendlog_init(&lg, tbl, 7);
	il_tfrc_sent(&lg, 5, 1000 * MS);
	il_tfrc_sent(&lg, 6, 1001 * MS);
	/* Clocks need not agree: only differences on each host matter. */
	assert_int_equal(il_tfrc_rtt_from_ack(&lg, 5, 1090 * MS, 30 * MS), 60 * MS);
	/* A second RD acknowledging the same packet gives its own sample. */
	assert_int_equal(il_tfrc_rtt_from_ack(&lg, 5, 1120 * MS, 0), 120 * MS);
	/* A retransmitted seq is ambiguous: excluded. */
	il_tfrc_sent(&lg, 6, 1050 * MS);
	assert_int_equal(il_tfrc_rtt_from_ack(&lg, 6, 1100 * MS, 0), -1);
	/* Never sent, or overwritten in the table (13 & 7 == 5). */
	assert_int_equal(il_tfrc_rtt_from_ack(&lg, 7, 1100 * MS, 0), -1);
	il_tfrc_sent(&lg, 13, 1200 * MS);
	assert_int_equal(il_tfrc_rtt_from_ack(&lg, 5, 1300 * MS, 0), -1);
	assert_int_equal(il_tfrc_rtt_from_ack(&lg, 13, 1300 * MS, 1000), 100 * MS - 1000);
	assert_int_equal(lg.excluded, 3);

	il_tfrc_rtt_init(&r, 0.125);
	assert_true(il_tfrc_rtt_update(&r, 1000) == 1000);
	assert_true(il_tfrc_rtt_update(&r, 2000) == 1125);
	assert_true(il_tfrc_rtt_update(&r, -1) == 1125);
	assert_int_equal(r.samples, 2);
	assert_true(r.last_ns == 2000);
}

/* Feed seqs [from, to) of flow f at one packet per `gap_ms`, starting
 * at t = from * gap_ms ms, skipping those for which lost() is true. */
static unsigned feed(struct il_tfrc_loss *l, struct il_tfrc_flow *f, uint64_t from, uint64_t to,
		     bool (*lost)(uint64_t))
{
	unsigned events = 0;

	for (uint64_t s = from; s < to; s++)
		if (lost == NULL || !lost(s))
			events += il_tfrc_loss_rx(l, f, s, s * MS);
	return events;
}

static bool every_100th(uint64_t s)
{
	return s % 100 == 99;
}

static void test_loss_periodic(void **state)
{
	struct il_tfrc_loss l;
	struct il_tfrc_flow f;

	(void)state;
	il_tfrc_loss_init(&l, 10 * MS);
	il_tfrc_flow_init(&f);
	/* No loss: p = 0, the rate is unlimited. */
	assert_int_equal(feed(&l, &f, 0, 99, NULL), 0);
	assert_true(il_tfrc_loss_p(&l) == 0);
	assert_true(isinf(il_tfrc_loss_rate(&l, 11200)));
	/* Seq 99 lost (nominal time 99 ms, interpolated): the first event;
	 * its interval is the 99 packets before it. */
	assert_int_equal(feed(&l, &f, 99, 199, every_100th), 1);
	assert_true(l.event_ns == 99 * MS);
	assert_true(l.i_mean == 99);
	/* One packet per ms, RTT 10 ms, one loss per 100 packets: the
	 * interval [T1 + RTT, T2) holds 90 packets. Eq. 4.2 halves the
	 * distance to 90 at every event. */
	assert_int_equal(feed(&l, &f, 199, 299, every_100th), 1);
	assert_true(l.i_mean == 94.5);
	assert_int_equal(feed(&l, &f, 299, 399, every_100th), 1);
	assert_true(l.i_mean == 92.25);
	/* Seq 100000 reveals the loss of 99999: 997 more events. */
	assert_int_equal(feed(&l, &f, 399, 100001, every_100th), 997);
	assert_true(fabs(l.i_mean - 90) < 1e-9);
	assert_true(fabs(il_tfrc_loss_p(&l) - 1.0 / 90) < 1e-12);
	assert_int_equal(l.events, 1000);
	assert_int_equal(l.lost, 1000);
	assert_true(fabs(il_tfrc_loss_rate(&l, 11200) - il_tfrc_rate(11200, 0.010, 1.0 / 90)) <
		    1e-6);

	/* A long loss-free stretch after the event at 99999 ms (counting
	 * resumes at 100009 ms): I_mean holds while I_sample < I_past, then
	 * grows with it, so p falls before the next loss. */
	feed(&l, &f, 100001, 100009 + 50, NULL);
	assert_true(l.i_sample == 50);
	assert_true(fabs(l.i_mean - 90) < 1e-9);
	feed(&l, &f, 100009 + 50, 100009 + 1000, NULL);
	assert_true(l.i_sample == 1000);
	assert_true(fabs(l.i_mean - (90 + 1000) / 2.0) < 1e-6);
}

static bool burst_around_50(uint64_t s)
{
	return s == 50 || s == 52 || s == 55 || s == 70;
}

static void test_loss_event_spans_rtt(void **state)
{
	struct il_tfrc_loss l;
	struct il_tfrc_flow f;

	(void)state;
	il_tfrc_loss_init(&l, 10 * MS);
	il_tfrc_flow_init(&f);
	/* 50, 52, 55 lie within one RTT of 50: one event. 70 does not. */
	assert_int_equal(feed(&l, &f, 0, 60, burst_around_50), 1);
	assert_true(l.i_mean == 50);
	assert_int_equal(l.lost, 3);
	/* Arrivals in [50, 60) are inside the event: not counted. */
	assert_true(l.i_sample == 0);
	assert_int_equal(feed(&l, &f, 60, 80, burst_around_50), 1);
	/* Interval [60, 70): 10 packets. (50 + 10) / 2. */
	assert_true(l.i_mean == 30);
	assert_int_equal(l.events, 2);
}

static void test_loss_long_outage(void **state)
{
	struct il_tfrc_loss l;
	struct il_tfrc_flow f;

	(void)state;
	il_tfrc_loss_init(&l, 10 * MS);
	il_tfrc_flow_init(&f);
	feed(&l, &f, 0, 101, NULL);
	/* 500 packets lost (101..600, nominal times 101..600 ms): one event
	 * per RTT, at 101, 111, ..., 591 ms. */
	assert_int_equal(il_tfrc_loss_rx(&l, &f, 601, 601 * MS), 50);
	assert_int_equal(l.lost, 500);
	assert_true(l.event_ns == 591 * MS);
	/* Empty intervals between them drive I_mean to its floor of 1. */
	assert_true(il_tfrc_loss_p(&l) > 0.5);
	assert_true(il_tfrc_loss_p(&l) <= 1);
	/* A huge gap costs O(events), not O(lost). */
	il_tfrc_loss_init(&l, 1000 * MS);
	il_tfrc_flow_init(&f);
	il_tfrc_loss_rx(&l, &f, 0, 0);
	assert_int_equal(il_tfrc_loss_rx(&l, &f, 1000000000ull, 10000 * MS), 10);
}

static void test_loss_meta_flow(void **state)
{
	struct il_tfrc_loss l;
	struct il_tfrc_flow a, b;

	(void)state;
	il_tfrc_loss_init(&l, 10 * MS);
	il_tfrc_flow_init(&a);
	il_tfrc_flow_init(&b);
	/* Two senders of one LAN, each with its own sequence space: A's
	 * packet k at 2k ms, B's at 2k + 1 ms. A loses 50 and 100. */
	for (uint64_t k = 0; k < 150; k++) {
		if (k != 50 && k != 100)
			il_tfrc_loss_rx(&l, &a, k, 2 * k * MS);
		il_tfrc_loss_rx(&l, &b, k, (2 * k + 1) * MS);
		if (k == 51) {
			/* Both flows' packets before 100 ms: 50 + 50. */
			assert_int_equal(l.events, 1);
			assert_true(l.event_ns == 100 * MS);
			assert_true(l.i_mean == 100);
		}
	}
	/* Interval [110, 200) ms: A 55..99 and B 55..99 = 90 packets. B's
	 * packet at 201 ms, counted before A's gap showed up at 202 ms,
	 * was taken back out: it lies inside the new event. */
	assert_int_equal(l.events, 2);
	assert_true(l.event_ns == 200 * MS);
	assert_true(l.i_mean == 95);
	/* Duplicates and reordering are not arrivals. */
	il_tfrc_loss_rx(&l, &a, 10, 400 * MS);
	assert_int_equal(l.late, 1);
}

static void test_loss_at_start(void **state)
{
	struct il_tfrc_loss l;
	struct il_tfrc_flow f;

	(void)state;
	il_tfrc_loss_init(&l, 10 * MS);
	il_tfrc_flow_init(&f);
	/* The flow's first seq seen need not be 0. */
	il_tfrc_loss_rx(&l, &f, 1000, 0);
	assert_int_equal(l.lost, 0);
	assert_int_equal(il_tfrc_loss_rx(&l, &f, 1002, 2 * MS), 1);
	/* One packet before the first loss: p = 1, still a finite rate. */
	assert_true(il_tfrc_loss_p(&l) == 1);
	assert_true(isfinite(il_tfrc_loss_rate(&l, 11200)));
}

static int load(void **state)
{
	(void)state;
	load_tables();
	return 0;
}

static uint64_t sum(const uint32_t *x, unsigned n)
{
	uint64_t t = 0;

	for (unsigned i = 0; i < n; i++)
		t += x[i];
	return t;
}

/* Max-min split (4.3.3): water-filling, the rest spread evenly. */
static void test_split_maxmin(void **state)
{
	uint32_t sh[5];
	(void)state;

	/* Everyone wants all: even parts, the remainder one each to the first. */
	const uint32_t any3[3] = { IL_TFRC_DEMAND_ANY, IL_TFRC_DEMAND_ANY, IL_TFRC_DEMAND_ANY };
	il_tfrc_split(1000, 3, any3, sh);
	assert_int_equal(sh[0], 334);
	assert_int_equal(sh[1], 333);
	assert_int_equal(sh[2], 333);
	/* Small demands are met; the big ones share the rest evenly. */
	const uint32_t d1[4] = { 100, 5000, 250, 5000 };
	il_tfrc_split(1000, 4, d1, sh);
	assert_int_equal(sh[0], 100);
	assert_int_equal(sh[2], 250);
	assert_int_equal(sh[1], 325);
	assert_int_equal(sh[3], 325);
	assert_int_equal(sum(sh, 4), 1000);
	/* A demand between the first level and the last: 1000/3 = 333 first,
	 * then (1000 - 100) / 2 = 450 >= 400. */
	const uint32_t d2[3] = { 100, 400, 900 };
	il_tfrc_split(1000, 3, d2, sh);
	assert_int_equal(sh[0], 100);
	assert_int_equal(sh[1], 400);
	assert_int_equal(sh[2], 500);
	/* All demands met: what is left goes to everyone evenly. */
	const uint32_t d3[2] = { 100, 300 };
	il_tfrc_split(1000, 2, d3, sh);
	assert_int_equal(sh[0], 400);
	assert_int_equal(sh[1], 600);
	/* Never 0 (that would read "no limit"), even for a tiny rate. */
	const uint32_t d4[5] = { IL_TFRC_DEMAND_ANY, 0, 0, IL_TFRC_DEMAND_ANY, 0 };
	il_tfrc_split(3, 5, d4, sh);
	for (unsigned i = 0; i < 5; i++)
		assert_true(sh[i] >= 1);
	assert_true(sum(sh, 5) <= 3 + 5);
	/* No rate: no limit for anyone. */
	il_tfrc_split(0, 2, d3, sh);
	assert_int_equal(sh[0], 0);
	assert_int_equal(sh[1], 0);
	il_tfrc_split(1000, 0, d3, sh); /* nothing to do, nothing touched */
}

static void test_split_demand(void **state)
{
	(void)state;
	assert_int_equal(il_tfrc_demand(0, 0, 10), IL_TFRC_DEMAND_ANY); /* new */
	assert_int_equal(il_tfrc_demand(800, 800, 10), 1600);  /* held back: double */
	assert_int_equal(il_tfrc_demand(800, 700, 10), 1600);  /* 7/8 used */
	assert_int_equal(il_tfrc_demand(800, 699, 10), 873);   /* less: used + 1/4 */
	assert_int_equal(il_tfrc_demand(800, 0, 10), 10);      /* idle: the floor */
	assert_int_equal(il_tfrc_demand(0xF0000000u, 0xF0000000u, 1), IL_TFRC_DEMAND_ANY - 1);
}

/* Rounds of demand and split as the appliance runs them: two greedy
 * senders converge to halves; one that uses only 400 keeps what it uses
 * and the greedy one gets the rest; a sender that stops using its share
 * gives it back within a few rounds, and takes it back by doubling. */
static void test_split_rounds(void **state)
{
	uint32_t sh[2] = { 0, 0 }, d[2], used[2];
	const uint32_t R = 2000, floor = R / 16;
	(void)state;

	for (int round = 0; round < 20; round++) {
		used[0] = sh[0];
		used[1] = sh[1] < 400 ? sh[1] : 400; /* sender 1 wants 400 at most */
		for (int i = 0; i < 2; i++)
			d[i] = il_tfrc_demand(sh[i], used[i], floor);
		il_tfrc_split(R, 2, d, sh);
		assert_true(sum(sh, 2) <= R);
	}
	assert_true(sh[1] >= 400 && sh[1] <= 500);
	assert_int_equal(sh[0] + sh[1], R);
	/* Sender 1 goes idle: its share falls to the floor, 0 gives it all. */
	for (int round = 0; round < 20; round++) {
		used[0] = sh[0];
		used[1] = 0;
		for (int i = 0; i < 2; i++)
			d[i] = il_tfrc_demand(sh[i], used[i], floor);
		il_tfrc_split(R, 2, d, sh);
	}
	assert_int_equal(sh[1], floor);
	assert_int_equal(sh[0], R - floor);
	/* Both greedy: halves within a few rounds of doubling. */
	int rounds = 0;
	while (sh[1] < R / 2 && rounds < 20) {
		used[0] = sh[0];
		used[1] = sh[1];
		for (int i = 0; i < 2; i++)
			d[i] = il_tfrc_demand(sh[i], used[i], floor);
		il_tfrc_split(R, 2, d, sh);
		rounds++;
	}
	assert_int_equal(sh[0], R / 2);
	assert_int_equal(sh[1], R / 2);
	assert_true(rounds <= 5);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_extract_matches_thesis),
		cmocka_unit_test(test_table_4_3),
		cmocka_unit_test(test_rate_edges),
		cmocka_unit_test(test_rtt_estimator),
		cmocka_unit_test(test_loss_periodic),
		cmocka_unit_test(test_loss_event_spans_rtt),
		cmocka_unit_test(test_loss_long_outage),
		cmocka_unit_test(test_loss_meta_flow),
		cmocka_unit_test(test_loss_at_start),
		cmocka_unit_test(test_split_maxmin),
		cmocka_unit_test(test_split_demand),
		cmocka_unit_test(test_split_rounds),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: %s TABLES [THESIS_TEXT]\n", argv[0]);
		return 2;
	}
	tables_path = argv[1];
	thesis_path = argc > 2 ? argv[2] : NULL;
	return cmocka_run_group_tests(tests, load, NULL);
}
