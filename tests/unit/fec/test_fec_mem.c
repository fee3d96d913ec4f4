/* SPDX-License-Identifier: BSD-3-Clause
 *
 * FEC unit tests, part 3: memory stays bounded under sustained loss.
 * 10^6 packets at 10% loss: the decoder's stores never exceed their
 * limits, every eviction is counted, and neither encoder nor decoder
 * calls the allocator once created (the binary is linked with
 * --wrap=malloc,calloc,realloc,aligned_alloc,posix_memalign,free so the
 * test sees every call made while the link runs).
 */
#include <stdio.h>

#include "fec_test.h"
#include "../alloc_count.h"

static void hook(int phase, void *arg)
{
	(void)arg;
	if (phase == 0)
		alloc_calls = 0;
	counting = phase == 0;
}

static void run_lossy(struct sim_cfg *sc, struct sim_res *res)
{
	sc->hook = hook;
	assert_int_equal(sim_run(sc, res), 0);
	assert_false(counting);
	if (alloc_calls)
		fail_msg("%llu allocator calls while the link ran",
			 (unsigned long long)alloc_calls);
	assert_int_equal(res->bad_recovered, 0);
	assert_int_equal(res->dup_recovered, 0);
	/* Stores at or under their limits the whole time. */
	assert_true(res->dec.pkts_hwm <= sc->fec.dec_max_pkts);
	assert_true(res->dec.repairs_hwm <= sc->fec.dec_max_repairs);
}

static void test_bounded_default(void **state)
{
	struct sim_cfg sc;
	struct sim_res res;
	size_t slot;

	(void)state;
	sim_cfg_defaults(&sc);
	sc.npkts = 1000000;
	sc.loss.model = IL_LOSS_BERNOULLI;
	sc.loss.p = 0.10;
	sc.loss.seed = 11;
	run_lossy(&sc, &res);
	/* The store filled and then turned over: one eviction per packet
	 * beyond its size. */
	assert_int_equal(res.dec.pkts_hwm, sc.fec.dec_max_pkts);
	assert_true(res.dec.pkt_evict_count > 900000);
	assert_true(res.dec.repairs_hwm < sc.fec.dec_max_repairs);
	assert_true(sim_frac(&res) > 0.99);
	/* Memory is what create() took: about the paper's "3 MB for 1024
	 * entries of 1500 bytes" per 1024 kept packets here. */
	slot = (1500 + 63) / 64 * 64;
	assert_true(res.dec_bytes < (size_t)sc.fec.dec_max_pkts * (slot + 200) +
					    (size_t)sc.fec.dec_max_repairs * (slot + 300) +
					    (1 << 20));
	assert_true(res.enc_bytes < (size_t)(1 + 11 + 19) * (slot + 256) + (1 << 16));
	print_message("10%% loss, 10^6 packets: recovered %.4f%%, packet store hwm %u, "
		      "repair store hwm %u, evictions %llu, decoder %zu bytes, encoder %zu "
		      "bytes\n",
		      100 * sim_frac(&res), res.dec.pkts_hwm, res.dec.repairs_hwm,
		      (unsigned long long)res.dec.pkt_evict_count, res.dec_bytes, res.enc_bytes);
}

/* Tiny stores: repair and packet evictions happen and are counted, and
 * nothing wrong is ever delivered. */
static void test_bounded_small(void **state)
{
	struct sim_cfg sc;
	struct sim_res res;

	(void)state;
	sim_cfg_defaults(&sc);
	sc.npkts = 200000;
	sc.loss.model = IL_LOSS_BERNOULLI;
	sc.loss.p = 0.10;
	sc.loss.seed = 12;
	sc.fec.dec_max_pkts = 140;
	sc.fec.dec_max_repairs = 8;
	run_lossy(&sc, &res);
	assert_int_equal(res.dec.pkts_hwm, 140);
	assert_int_equal(res.dec.repairs_hwm, 8);
	assert_true(res.dec.repair_evict_count > 0);
	assert_true(res.dec.pkt_evict_count > 0);
	assert_true(res.dec.unrecoverable > 0);
	assert_true(sim_frac(&res) > 0.9);
}

/* A slow link (1 ms per link packet) against a 200 ms age limit: the age
 * limit, not the count, bounds the stores. */
static void test_bounded_by_age(void **state)
{
	struct sim_cfg sc;
	struct sim_res res;

	(void)state;
	sim_cfg_defaults(&sc);
	sc.npkts = 100000;
	sc.loss.model = IL_LOSS_BERNOULLI;
	sc.loss.p = 0.10;
	sc.loss.seed = 13;
	sc.link_ns = 1000000;
	sc.fec.dec_max_age_ns = 200000000; /* 200 ms: 200 link packets */
	run_lossy(&sc, &res);
	assert_true(res.dec.pkt_evict_age > 90000);
	assert_int_equal(res.dec.pkt_evict_count, 0);
	print_message("age-bounded: packet store hwm %u, age evictions %llu\n", res.dec.pkts_hwm,
		      (unsigned long long)res.dec.pkt_evict_age);
	assert_true(res.dec.pkts_hwm < 400);
	/* Stored repairs go with the packets they await (which age first:
	 * they arrived before the repair). */
	assert_true(res.dec.repair_evict_orphan > 0);
	assert_true(res.dec.repairs_hwm < 64);
	assert_true(sim_frac(&res) > 0.99);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bounded_default),
		cmocka_unit_test(test_bounded_small),
		cmocka_unit_test(test_bounded_by_age),
	};

	return cmocka_run_group_tests_name("fec_mem", tests, NULL, NULL);
}
