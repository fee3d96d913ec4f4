/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The delay line on a virtual clock: the caller supplies the ticks, so the
 * results are exact and do not depend on machine load. (The rate limit is
 * the project's token bucket: tests/unit/util/test_tbucket.c.) The
 * clock here runs at 2.4 GHz, like a TSC, and the "poll loop" samples it
 * every 0.1 or 1 microsecond.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <interlink/impair.h>

#include "impair_check.h"

#define HZ 2400000000ull
#define US (HZ / 1000000ull)
#define POLL_STEP US
#define FINE_STEP (US / 10)

struct delay_run {
	uint64_t pushed, popped, overflow;
	double sum, sum2, min, max;
	bool fifo_ok;
};

/*
 * Poll-loop simulation: every step_tsc ticks release everything due, then
 * push the packets that arrived in this step. Arrivals are Poisson-like with
 * the given mean gap (in steps). Items carry their sequence number; their
 * push time is remembered to measure the delay each one saw.
 */
static void delay_simulate(struct il_delay *d, uint64_t n_pkts, uint64_t step_tsc,
			   double mean_gap_steps, uint64_t seed, struct delay_run *r)
{
	uint64_t *t_push = calloc(n_pkts, sizeof(*t_push));
	struct il_rng rng;
	uint64_t now = 1000 * HZ, next_seq = 0, expect = 0;
	double next_arrival = 0;

	assert_non_null(t_push);
	il_rng_seed(&rng, seed);
	*r = (struct delay_run){ .min = 1e300, .fifo_ok = true };
	for (uint64_t step = 0; r->popped < n_pkts; step++, now += step_tsc) {
		void *it;

		while ((it = il_delay_pop(d, now)) != NULL) {
			uint64_t seq = (uintptr_t)it - 1;
			double dt = (double)(now - t_push[seq]);

			r->fifo_ok &= seq == expect;
			expect = seq + 1;
			r->popped++;
			r->sum += dt;
			r->sum2 += dt * dt;
			r->min = dt < r->min ? dt : r->min;
			r->max = dt > r->max ? dt : r->max;
		}
		while (next_seq < n_pkts && next_arrival <= (double)step) {
			t_push[next_seq] = now;
			if (il_delay_push(d, (void *)(uintptr_t)(next_seq + 1), now))
				r->pushed++;
			else
				fail_msg("delay line full at packet %" PRIu64, next_seq);
			next_seq++;
			/* Exponential gaps; 1 - u is in (0, 1]. */
			next_arrival += -mean_gap_steps * log(1 - il_rng_unit(&rng));
		}
	}
	r->overflow = d->overflow;
	free(t_push);
}

static void test_delay_validation(void **state)
{
	struct il_delay_slot ring[8];
	struct il_delay d;
	char err[256];

	(void)state;
	assert_int_equal(il_delay_init(&d, ring, 0, 10, 0, 1, err, sizeof(err)), -1);
	CHECK_ERR_PRINT(err, "'cap'");
	assert_int_equal(il_delay_init(&d, ring, 6, 10, 0, 1, err, sizeof(err)), -1);
	CHECK_ERR_PRINT(err, "power of two");
	assert_int_equal(il_delay_init(&d, NULL, 8, 10, 0, 1, err, sizeof(err)), -1);
	CHECK_ERR_PRINT(err, "'ring'");
	assert_int_equal(il_delay_init(&d, ring, 8, UINT64_MAX / 2, UINT64_MAX / 2, 1, err,
				       sizeof(err)), -1);
	CHECK_ERR_PRINT(err, "'jitter_tsc'");
	assert_int_equal(il_delay_init(&d, ring, 8, 10, 5, 1, err, sizeof(err)), 0);
	assert_int_equal(il_delay_init(&d, ring, 1, 0, 0, 1, err, sizeof(err)), 0);
}

/* Exact release times, bounded capacity and order through wrap-around. */
static void test_delay_basic(void **state)
{
	struct il_delay_slot ring[8];
	struct il_delay d;
	char err[256];
	uint64_t t = 5000;
	uintptr_t next_out = 1;

	(void)state;
	assert_int_equal(il_delay_init(&d, ring, 8, 100, 0, 1, err, sizeof(err)), 0);
	assert_null(il_delay_pop(&d, UINT64_MAX));
	assert_int_equal(il_delay_next_due(&d), UINT64_MAX);
	assert_true(il_delay_push(&d, (void *)1, t));
	assert_int_equal(il_delay_next_due(&d), t + 100);
	assert_null(il_delay_pop(&d, t + 99));
	assert_null(il_delay_peek(&d, t + 99));
	assert_ptr_equal(il_delay_peek(&d, t + 100), (void *)1);
	assert_int_equal(il_delay_count(&d), 1);
	assert_ptr_equal(il_delay_pop(&d, t + 100), (void *)1);
	assert_int_equal(il_delay_count(&d), 0);

	/* Full at 8: the ninth push is refused and counted. */
	for (uintptr_t i = 1; i <= 8; i++)
		assert_true(il_delay_push(&d, (void *)i, t + i));
	assert_false(il_delay_push(&d, (void *)9, t + 9));
	assert_int_equal(d.overflow, 1);
	assert_int_equal(il_delay_count(&d), 8);

	/* Many times round the ring, 3 in and 3 out per step. */
	for (uintptr_t i = 1; i <= 8; i++)
		assert_ptr_equal(il_delay_pop(&d, t + 200), (void *)i);
	for (uintptr_t i = 1; i <= 3000; i += 3) {
		t += 1000;
		for (uintptr_t k = 0; k < 3; k++)
			assert_true(il_delay_push(&d, (void *)(i + k), t));
		assert_null(il_delay_pop(&d, t + 99));
		for (uintptr_t k = 0; k < 3; k++)
			assert_ptr_equal(il_delay_pop(&d, t + 100), (void *)next_out++);
	}
}

/* Constant delay: every packet waits the configured time, to within one
 * poll step (0.1 us), and the mean is within 1%. */
static void test_delay_constant(void **state)
{
	static const uint64_t delays_us[] = { 50, 1000, 100000 };
	static struct il_delay_slot ring[1 << 15];
	char err[256], what[80];

	(void)state;
	for (size_t i = 0; i < sizeof(delays_us) / sizeof(delays_us[0]); i++) {
		/* Not a multiple of the poll step, so rounding is exercised. */
		uint64_t delay = delays_us[i] * US + 1234;
		struct il_delay d;
		struct delay_run r;

		assert_int_equal(il_delay_init(&d, ring, 1 << 15, delay, 0, 9, err, sizeof(err)), 0);
		delay_simulate(&d, 200000, FINE_STEP, 40.0, 3, &r);
		assert_true(r.fifo_ok);
		assert_int_equal(r.overflow, 0);
		print_message(" delay %" PRIu64 " us + 1234 ticks: min %.2f us max %.2f us\n",
			      delays_us[i], r.min / US, r.max / US);
		assert_true(r.min >= (double)delay);
		assert_true(r.max < (double)(delay + FINE_STEP));
		snprintf(what, sizeof(what), "mean delay, %" PRIu64 " us (ticks)", delays_us[i]);
		CHECK_NEAR(what, r.sum / r.popped, (double)delay, 0.01 * (double)delay);
	}
}

/* Jitter: uniform extra in [0, J] when packets are sparse; FIFO always,
 * even when packets arrive much faster than the jitter span. */
static void test_delay_jitter(void **state)
{
	static struct il_delay_slot ring[1 << 16];
	const uint64_t delay = 500 * US, jitter = 200 * US;
	const double n = 50000;
	struct il_delay d;
	struct delay_run r;
	char err[256];
	double mean, sd;

	(void)state;
	/* Sparse: 1 ms gaps, far more than the jitter, so nothing clamps. */
	assert_int_equal(il_delay_init(&d, ring, 1 << 16, delay, jitter, 21, err, sizeof(err)),
			 0);
	delay_simulate(&d, (uint64_t)n, POLL_STEP, 1000.0, 4, &r);
	mean = r.sum / r.popped;
	sd = sqrt(r.sum2 / r.popped - mean * mean);
	assert_true(r.fifo_ok);
	print_message(" jitter sparse: min %.1f us max %.1f us\n", r.min / US, r.max / US);
	assert_true(r.min >= (double)delay && r.max < (double)(delay + jitter + POLL_STEP));
	CHECK_NEAR("jitter mean delay (ticks)", mean, delay + jitter / 2.0,
		   0.01 * (delay + jitter / 2.0));
	/* Uniform on [0, J]: sd J/sqrt(12), plus up to one step of polling. */
	CHECK_NEAR("jitter sd (ticks)", sd, jitter / sqrt(12.0), 0.03 * jitter / sqrt(12.0));
	CHECK_NEAR("jitter min (us above delay)", (r.min - delay) / US, 0, 2.0);
	CHECK_NEAR("jitter max (us above delay)", (r.max - delay) / US, jitter / US, 2.0);

	/* Dense: 0.5 us gaps, 400 packets per jitter span. Without the FIFO
	 * clamp nearly every packet would overtake or be overtaken. */
	assert_int_equal(il_delay_init(&d, ring, 1 << 16, delay, jitter, 22, err, sizeof(err)),
			 0);
	delay_simulate(&d, 200000, POLL_STEP, 0.5, 5, &r);
	assert_true(r.fifo_ok);
	assert_int_equal(r.popped, 200000);
	print_message(" jitter dense: min %.1f us mean %.1f us max %.1f us (FIFO kept)\n",
		      r.min / US, r.sum / r.popped / US, r.max / US);
	assert_true(r.min >= (double)delay && r.max < (double)(delay + jitter + POLL_STEP));

	/* Due times in the ring never decrease, even when the jitter drawn
	 * for a packet is smaller than for the one before it. */
	{
		static struct il_delay_slot rs[1024];
		unsigned clamped = 0;

		il_delay_init(&d, rs, 1024, delay, jitter, 23, err, sizeof(err));
		for (uint64_t k = 0; k < 1024; k++)
			assert_true(il_delay_push(&d, NULL, 1000 + k * US));
		for (unsigned k = 1; k < 1024; k++) {
			assert_true(rs[k].due >= rs[k - 1].due);
			clamped += rs[k].due == rs[k - 1].due;
		}
		/* 1 us apart with 200 us of jitter: most are clamped. */
		assert_true(clamped > 512);
	}

	/* The same seed gives the same due times; another seed does not. */
	{
		struct il_delay a, b, c;
		static struct il_delay_slot ra[64], rb[64], rc[64];
		unsigned differ = 0;

		il_delay_init(&a, ra, 64, delay, jitter, 77, err, sizeof(err));
		il_delay_init(&b, rb, 64, delay, jitter, 77, err, sizeof(err));
		il_delay_init(&c, rc, 64, delay, jitter, 78, err, sizeof(err));
		for (uint64_t k = 0; k < 64; k++) {
			uint64_t t = k * 10 * jitter;

			il_delay_push(&a, NULL, t);
			il_delay_push(&b, NULL, t);
			il_delay_push(&c, NULL, t);
			assert_int_equal(ra[k].due, rb[k].due);
			differ += ra[k].due != rc[k].due;
		}
		assert_true(differ > 60);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_delay_validation),
		cmocka_unit_test(test_delay_basic),
		cmocka_unit_test(test_delay_constant),
		cmocka_unit_test(test_delay_jitter),
	};

	return cmocka_run_group_tests_name("impair_delay_rate", tests, NULL, NULL);
}
