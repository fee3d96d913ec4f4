/* SPDX-License-Identifier: BSD-3-Clause
 * interlink-pktgen's pure pieces on virtual clocks: size distributions
 * (IMIX exact per cycle), pacing (the count over a virtual second is within
 * one frame of the target, stalls caught up or forgiven), histogram
 * quantiles within the bucket resolution, and pcap round trips.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pgutil.h"

#define HZ 2600000000ull

static void test_sizes_parse(void **state)
{
	struct pg_sizes sz;
	char err[128];
	(void)state;
	assert_int_equal(pg_sizes_parse(&sz, "64", 1, err, sizeof(err)), 0);
	assert_int_equal(sz.kind, PG_SIZE_FIXED);
	assert_int_equal(pg_sizes_next(&sz), 64);
	assert_int_equal(pg_sizes_parse(&sz, "100-200", 1, err, sizeof(err)), 0);
	assert_int_equal(sz.kind, PG_SIZE_RANGE);
	assert_int_equal(pg_sizes_max(&sz), 200);
	assert_int_equal(pg_sizes_parse(&sz, "imix", 1, err, sizeof(err)), 0);
	assert_int_equal(pg_sizes_max(&sz), 1518);
	assert_int_equal(pg_sizes_parse(&sz, "200-100", 1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "A <= B"));
	assert_int_equal(pg_sizes_parse(&sz, "12x", 1, err, sizeof(err)), -1);
	assert_int_equal(pg_sizes_parse(&sz, "70000", 1, err, sizeof(err)), -1);
	assert_int_equal(pg_sizes_parse(&sz, "", 1, err, sizeof(err)), -1);
}

static void test_sizes_range(void **state)
{
	struct pg_sizes sz;
	char err[128];
	unsigned seen_lo = 0, seen_hi = 0;
	double sum = 0;
	const unsigned n = 200000;
	(void)state;
	assert_int_equal(pg_sizes_parse(&sz, "100-199", 7, err, sizeof(err)), 0);
	for (unsigned i = 0; i < n; i++) {
		unsigned v = pg_sizes_next(&sz);
		assert_true(v >= 100 && v <= 199);
		seen_lo += v == 100;
		seen_hi += v == 199;
		sum += v;
	}
	assert_true(seen_lo > 0 && seen_hi > 0);
	/* mean 149.5, sd of the mean 28.9 / sqrt(n) = 0.065: 5 sigma */
	assert_true(fabs(sum / n - 149.5) < 0.33);
	assert_true(fabs(pg_sizes_mean(&sz) - 149.5) < 1e-9);
}

static void test_sizes_imix_exact_per_cycle(void **state)
{
	struct pg_sizes sz, sz2;
	char err[128];
	bool differs = false;
	(void)state;
	assert_int_equal(pg_sizes_parse(&sz, "imix", 3, err, sizeof(err)), 0);
	assert_int_equal(pg_sizes_parse(&sz2, "imix", 3, err, sizeof(err)), 0);
	for (unsigned cyc = 0; cyc < 1000; cyc++) {
		unsigned small = 0, mid = 0, large = 0;
		double sum = 0;
		for (unsigned i = 0; i < 12; i++) {
			unsigned v = pg_sizes_next(&sz);
			assert_int_equal(v, pg_sizes_next(&sz2)); /* same seed, same draws */
			small += v == PG_IMIX_SMALL;
			mid += v == PG_IMIX_MID;
			large += v == PG_IMIX_LARGE;
			sum += v;
			if (cyc == 0 && i == 0 && v != PG_IMIX_SMALL)
				differs = true;
		}
		assert_int_equal(small, 7);
		assert_int_equal(mid, 4);
		assert_int_equal(large, 1);
		assert_true(fabs(sum / 12 - pg_sizes_mean(&sz)) < 1e-9);
	}
	(void)differs;
	/* 7*64 + 4*570 + 1518 = 4246 over 12 frames */
	assert_true(fabs(pg_sizes_mean(&sz) - 4246.0 / 12) < 1e-9);
}

/* Drive the pacer like the poll loop: look at the clock, send what is due
 * in bursts of at most 32, advance the clock by a jittery loop time. */
static uint64_t pace_run(struct pg_pace *p, uint64_t t0, uint64_t t1, unsigned len,
			 uint64_t step, uint64_t stall_at, uint64_t stall)
{
	uint64_t now = t0, sent = 0, x = 88172645463325252ull;
	bool stalled = false;
	while (now < t1) {
		unsigned k = pg_pace_due(p, now, len, 32);
		for (unsigned i = 0; i < k; i++)
			pg_pace_charge(p, len);
		sent += k;
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		now += step / 2 + x % step;
		if (stall && !stalled && now >= stall_at) {
			now += stall;
			stalled = true;
		}
	}
	return sent;
}

static void test_pace_pps_exact(void **state)
{
	struct pg_pace p;
	const double rates[] = {1000, 100000, 1e6, 14.88e6};
	(void)state;
	for (unsigned i = 0; i < 4; i++) {
		pg_pace_init(&p, HZ, rates[i], 0, 1000);
		uint64_t n = pace_run(&p, 1000, 1000 + HZ, 60, 600, 0, 0);
		/* within one burst of the target over one virtual second */
		assert_true(fabs((double)n - rates[i]) <= 32.0);
		assert_true(fabs((double)n - rates[i]) / rates[i] < 0.001);
	}
}

static void test_pace_bps(void **state)
{
	struct pg_pace p;
	(void)state;
	/* 10 Gbit/s of 64-byte frames (60 without FCS) is 14.88 Mpps */
	pg_pace_init(&p, HZ, 0, 10e9, 0);
	uint64_t n = pace_run(&p, 0, HZ, 60, 500, 0, 0);
	assert_true(fabs((double)n - 1e10 / 672.0) <= 32.0);
	/* and of 1518-byte frames, 812.7 kpps */
	pg_pace_init(&p, HZ, 0, 10e9, 0);
	n = pace_run(&p, 0, HZ, 1514, 500, 0, 0);
	assert_true(fabs((double)n - 1e10 / (1538.0 * 8)) <= 32.0);
	assert_int_equal(pg_wire_bits(60), 672);
}

static void test_pace_stalls(void **state)
{
	struct pg_pace p;
	(void)state;
	/* A 5 ms stall (a busy shared CPU) is caught up: the second is exact. */
	pg_pace_init(&p, HZ, 100000, 0, 0);
	uint64_t n = pace_run(&p, 0, HZ, 60, 2600, HZ / 2, HZ / 200);
	assert_true(fabs((double)n - 100000) <= 32.0);
	/* A 200 ms stall (a stopped process) is forgiven beyond 10 ms: about
	 * 190 ms' worth of frames are not sent, none is flooded. */
	pg_pace_init(&p, HZ, 100000, 0, 0);
	n = pace_run(&p, 0, HZ, 60, 2600, HZ / 2, HZ / 5);
	assert_true(n < 100000 - 18000 && n > 100000 - 20000);
	/* off: everything is due */
	pg_pace_init(&p, HZ, 0, 0, 0);
	assert_int_equal(pg_pace_due(&p, 0, 60, 32), 32);
}

static void test_hist_quantiles(void **state)
{
	struct pg_hist *h = calloc(1, sizeof(*h)), *h2 = calloc(1, sizeof(*h2));
	(void)state;
	assert_non_null(h);
	assert_int_equal(pg_hist_quantile(h, 0.5), 0);
	for (uint64_t v = 1; v <= 100000; v++)
		pg_hist_add(h, v);
	const double qs[] = {0.5, 0.9, 0.99, 0.999};
	for (unsigned i = 0; i < 4; i++) {
		double want = qs[i] * 100000, got = (double)pg_hist_quantile(h, qs[i]);
		assert_true(got >= want * 0.999 && got <= want * (1 + 1.0 / 32) + 1);
	}
	assert_int_equal(pg_hist_quantile(h, 1.0), 100000);
	assert_int_equal(h->max, 100000);
	/* small values are exact */
	for (uint64_t v = 0; v < 10; v++)
		pg_hist_add(h2, 7);
	assert_int_equal(pg_hist_quantile(h2, 0.5), 7);
	pg_hist_add(h2, 1000000007ull);
	pg_hist_merge(h2, h);
	assert_int_equal(h2->count, 100011);
	assert_int_equal(h2->max, 1000000007ull);
	assert_int_equal(pg_hist_quantile(h2, 0.0), 1);
	free(h);
	free(h2);
}

static void test_pcap_round_trip(void **state)
{
	struct pg_capture c;
	struct pg_pcap pc;
	char path[] = "/tmp/pg-pcap-XXXXXX", err[256];
	uint8_t frame[1600];
	(void)state;
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(pg_capture_init(&c, 3, 128), 0);
	for (unsigned i = 0; i < sizeof(frame); i++)
		frame[i] = (uint8_t)i;
	pg_capture_add(&c, frame, 60, 0);
	pg_capture_add(&c, frame, 1500, 1500);         /* cut at the snap length */
	pg_capture_add(&c, frame, 64, 2000000123ull);
	pg_capture_add(&c, frame, 64, 3000000000ull); /* over the count: ignored */
	assert_int_equal(c.n, 3);
	assert_int_equal(pg_capture_write(&c, path, 1700000000ull * 1000000000ull + 5), 0);
	pg_capture_free(&c);
	assert_int_equal(pg_pcap_load(&pc, path, 100, err, sizeof(err)), 0);
	assert_int_equal(pc.n, 3);
	assert_int_equal(pc.rec[0].ts_ns, 0);
	assert_int_equal(pc.rec[1].ts_ns, 1500);
	assert_int_equal(pc.rec[2].ts_ns, 2000000123ull);
	assert_int_equal(pc.rec[1].len, 128);
	assert_memory_equal(pc.data + pc.rec[1].off, frame, 128);
	assert_int_equal(pg_pcap_due(&pc, 2, 1.0, 1000000000ull), 2000000123ull);
	assert_int_equal(pg_pcap_due(&pc, 2, 4.0, 1000000000ull), 500000030ull);
	assert_int_equal(pg_pcap_due(&pc, 2, 0.0, 1000000000ull), 0);
	pg_pcap_free(&pc);
	/* max_frames bounds what is loaded */
	assert_int_equal(pg_pcap_load(&pc, path, 2, err, sizeof(err)), 0);
	assert_int_equal(pc.n, 2);
	pg_pcap_free(&pc);
	/* not a pcap */
	FILE *f = fopen(path, "w");
	fputs("hello, this is not a capture file at all", f);
	fclose(f);
	assert_int_equal(pg_pcap_load(&pc, path, 100, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a classic pcap"));
	unlink(path);
	assert_int_equal(pg_pcap_load(&pc, path, 100, err, sizeof(err)), -1);
}

/* A microsecond pcap in the other byte order, as some tools write. */
static void test_pcap_usec_swapped(void **state)
{
	char path[] = "/tmp/pg-pcap-XXXXXX", err[256];
	struct pg_pcap pc;
	uint32_t gh[6] = {0xa1b2c3d4u, 0x00040002u, 0, 0, 65535, 1};
	uint32_t rh[2][4] = {{10, 999999, 60, 60}, {11, 250, 60, 60}};
	uint8_t data[60] = {0};
	(void)state;
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	FILE *f = fdopen(fd, "wb");
	for (unsigned i = 0; i < 6; i++)
		gh[i] = __builtin_bswap32(gh[i]);
	fwrite(gh, sizeof(gh), 1, f);
	for (unsigned r = 0; r < 2; r++) {
		for (unsigned i = 0; i < 4; i++)
			rh[r][i] = __builtin_bswap32(rh[r][i]);
		fwrite(rh[r], sizeof(rh[r]), 1, f);
		fwrite(data, sizeof(data), 1, f);
	}
	fclose(f);
	assert_int_equal(pg_pcap_load(&pc, path, 100, err, sizeof(err)), 0);
	assert_int_equal(pc.n, 2);
	assert_int_equal(pc.rec[1].ts_ns, 251000ull); /* 11.000250 - 10.999999 s */
	pg_pcap_free(&pc);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes_parse),
		cmocka_unit_test(test_sizes_range),
		cmocka_unit_test(test_sizes_imix_exact_per_cycle),
		cmocka_unit_test(test_pace_pps_exact),
		cmocka_unit_test(test_pace_bps),
		cmocka_unit_test(test_pace_stalls),
		cmocka_unit_test(test_hist_quantiles),
		cmocka_unit_test(test_pcap_round_trip),
		cmocka_unit_test(test_pcap_usec_swapped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
