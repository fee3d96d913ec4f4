/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The token bucket on a virtual clock (2.4 GHz, like a TSC): the caller
 * supplies the ticks, so the results are exact whatever the machine's
 * load. The three uses are all here: bytes at a bit rate (the impairment
 * stage), frames per second (the NAK server's budget) and a rate that
 * changes under a sender (libinterlink's pacing, on a clock in ns).
 */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include <interlink/tbucket.h>

#define HZ 2400000000ull
#define US (HZ / 1000000ull)

static void check_near(const char *what, double got, double want, double tol)
{
	if (fabs(got - want) > tol)
		fail_msg("%s: got %.6g, want %.6g +- %.3g", what, got, want, tol);
}

/* xorshift64: frame sizes that vary, the same on every run */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * A greedy sender offers far more than the rate and sends whatever the
 * bucket allows every microsecond. Over one simulated second the bytes
 * sent match the rate (plus the first full bucket) within 1%, and at no
 * time is the sender ahead of depth + rate * elapsed (plus one frame of
 * slack for frames larger than the bucket, which leave it in debt).
 */
static void test_rate(void **state)
{
	static const struct {
		double bytes_per_s, depth;
		uint32_t min_len, max_len;
	} cases[] = {
		{ 10e6 / 8, 3036, 64, 1500 },     /* 10 Mbit/s, mixed sizes */
		{ 1e9 / 8, 12500, 1500, 1500 },   /* 1 Gbit/s, full frames */
		{ 40e9 / 8, 500000, 64, 64 },     /* 40 Gbit/s, minimum frames */
		{ 100e6 / 8, 3000, 9000, 9000 },  /* jumbo frames > bucket */
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct il_tbucket tb;
		uint64_t now = 777, start = now, bytes = 0, seed = i + 1;
		double max_excess = -1e300;
		uint32_t len = cases[i].min_len;
		char what[64];

		il_tbucket_init(&tb, cases[i].bytes_per_s, cases[i].depth, HZ, now);
		for (; now < start + HZ; now += US) {
			while (il_tbucket_take(&tb, len, now)) {
				bytes += len;
				len = cases[i].min_len +
				      (uint32_t)(rnd(&seed) % (cases[i].max_len - cases[i].min_len + 1));
			}
			double allowed = cases[i].depth + cases[i].max_len +
					 (double)(now - start) * cases[i].bytes_per_s / HZ;
			if ((double)bytes - allowed > max_excess)
				max_excess = (double)bytes - allowed;
		}
		snprintf(what, sizeof(what), "case %zu: bytes/s", i);
		check_near(what, ((double)bytes - cases[i].depth) * HZ / (double)(now - start),
			   cases[i].bytes_per_s, 0.01 * cases[i].bytes_per_s);
		assert_true(max_excess <= 0);
	}
}

/* wait() names the tick at which take() succeeds, not one earlier than
 * the tokens allow; a sender that always sleeps for wait() gets the exact
 * rate. */
static void test_wait(void **state)
{
	const double rate = 123456789.0 / 8; /* bytes/s, deliberately odd */
	const uint32_t len = 1000;
	struct il_tbucket tb;
	uint64_t now = 0, t, sent = 0;

	(void)state;
	il_tbucket_init(&tb, rate, 2000, HZ, now);
	assert_int_equal(il_tbucket_wait(&tb, len, now), 0);
	assert_true(il_tbucket_take(&tb, len, now));
	assert_true(il_tbucket_take(&tb, len, now));
	t = now + il_tbucket_wait(&tb, len, now);
	/* 1000 bytes at 123456789 bit/s is 64.8 us. */
	check_near("wait after emptying (us)", (double)(t - now) / US, len / rate * 1e6, 0.01);
	assert_false(il_tbucket_take(&tb, len, t - 2));
	assert_true(il_tbucket_take(&tb, len, t));

	now = t;
	for (int k = 0; k < 100000; k++) {
		now += il_tbucket_wait(&tb, len, now);
		assert_true(il_tbucket_take(&tb, len, now));
		sent += len;
	}
	check_near("sleeping on wait() (bytes/s)", (double)sent * HZ / (double)(now - t), rate,
		   0.01 * rate);
}

/* Frames per second, one token a frame: the NAK server's budget. A full
 * bucket lets `depth` frames go at once, then one per 1/rate. */
static void test_frames(void **state)
{
	struct il_tbucket tb;
	uint64_t now = 5 * HZ, n = 0;

	(void)state;
	il_tbucket_init(&tb, 1000, 64, HZ, now); /* 1000 frames/s, burst 64 */
	while (il_tbucket_take(&tb, 1, now))
		n++;
	assert_int_equal(n, 64);
	/* 10 ms later: 10 more, not 11. */
	now += HZ / 100;
	for (n = 0; il_tbucket_take(&tb, 1, now); n++)
		;
	assert_int_equal(n, 10);
	/* A long pause fills it to the depth and no further. */
	now += 3600 * HZ;
	for (n = 0; il_tbucket_take(&tb, 1, now); n++)
		;
	assert_int_equal(n, 64);
}

/* A take larger than the bucket goes once the bucket is full and leaves it
 * in debt: the next take waits for the debt to be paid. */
static void test_oversize_debt(void **state)
{
	struct il_tbucket tb;
	uint64_t now = 0;

	(void)state;
	il_tbucket_init(&tb, 1e6, 1000, HZ, now); /* 1 MB/s: 1 byte per us */
	assert_true(il_tbucket_take(&tb, 3000, now));
	check_near("tokens after an oversize take", tb.tokens, -2000, 1e-9);
	/* 3000 us to be full again: not at 2999 us, yes at 3000 us. */
	assert_false(il_tbucket_take(&tb, 3000, now + 2999 * US));
	assert_true(il_tbucket_take(&tb, 3000, now + 3000 * US));
	/* wait() asks for a full bucket too. */
	check_near("wait for an oversize take (us)", (double)il_tbucket_wait(&tb, 5000, now + 3000 * US) / US,
		   3000, 0.01);
}

/* A new rate keeps what the old one earned, capped at the new depth; the
 * clock may be in nanoseconds (hz = 1e9). */
static void test_set_rate(void **state)
{
	const uint64_t NS = 1000000000ull, MS = NS / 1000;
	struct il_tbucket tb;
	uint64_t now = 10 * NS;

	(void)state;
	il_tbucket_init(&tb, 1e6, 5000, NS, now); /* 10^6 B/s, 5 ms deep */
	assert_true(il_tbucket_take(&tb, 5000, now));
	/* 2 ms at the old rate earned 2000 B; the new rate starts from there. */
	now += 2 * MS;
	il_tbucket_set_rate(&tb, 1e4, 3000, NS, now);
	check_near("carried over", tb.tokens, 2000, 1e-6);
	assert_true(il_tbucket_take(&tb, 2000, now));
	assert_false(il_tbucket_take(&tb, 100, now));
	check_near("wait at the new rate (ms)", (double)il_tbucket_wait(&tb, 100, now) / MS, 10,
		   0.01);
	/* Full, then a smaller depth: capped. */
	now += 3600 * NS;
	il_tbucket_set_rate(&tb, 1e6, 1500, NS, now);
	check_near("capped at the new depth", tb.tokens, 1500, 1e-9);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rate),
		cmocka_unit_test(test_wait),
		cmocka_unit_test(test_frames),
		cmocka_unit_test(test_oversize_debt),
		cmocka_unit_test(test_set_rate),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
