/* SPDX-License-Identifier: BSD-3-Clause
 *
 * LEC unit tests, part 3: memory stays bounded. The 16-node network of
 * lec_sim.c runs at 10% loss with deliberately small stores: no store
 * ever exceeds its configured size, every eviction is counted, recovery
 * stays correct (no wrong bytes, no id delivered twice), and no instance
 * calls the allocator once created (the binary is linked with
 * --wrap=malloc,calloc,realloc,aligned_alloc,posix_memalign,free, so the
 * test sees every call made while the network runs).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "lec_sim.h"
#include "../alloc_count.h"

static void hook(int phase, void *arg)
{
	(void)arg;
	counting = phase == 0;
}

static void test_bounded_at_10pct(void **state)
{
	struct lsim_cfg sc;
	struct lsim_res res;
	const struct il_lec_stats *s = &res.sum;

	(void)state;
	lsim_cfg_defaults(&sc);
	sc.msgs = 60000;
	sc.loss.p = 0.10;
	sc.lec.store_msgs = 256;
	sc.lec.store_repairs = 16;
	sc.hook = hook;
	alloc_calls = 0;
	assert_int_equal(lsim_run(&sc, &res), 0);
	printf("# 10%% loss, stores 256 messages / 16 repairs: recovered %.1f%%, hwm %u / %u, "
	       "evicted %llu messages, %llu repairs (+%llu orphaned), %llu unrecoverable, "
	       "%llu stale repairs; %zu bytes per node\n",
	       100.0 * (double)res.recovered / (double)res.lost, s->msgs_hwm, s->repairs_hwm,
	       (unsigned long long)s->drop_msg_evict_count,
	       (unsigned long long)s->drop_repair_evict_count,
	       (unsigned long long)s->drop_repair_orphan,
	       (unsigned long long)s->drop_unrecoverable,
	       (unsigned long long)s->repair_result[IL_LEC_REP_STALE], res.footprint);
	assert_int_equal(alloc_calls, 0);
	assert_int_equal(res.bad, 0);
	assert_int_equal(res.double_delivery, 0);
	assert_int_equal(res.queue_overflow, 0);
	assert_true(s->msgs_hwm <= 256);
	assert_true(s->repairs_hwm <= 16);
	/* the small stores did overflow, and said so */
	assert_true(s->drop_msg_evict_count > 0);
	assert_true(s->drop_repair_evict_count > 0);
	/* every stored repair left in a counted way or is still there */
	assert_int_equal(s->repair_result[IL_LEC_REP_STORED],
			 s->drop_repair_evict_count + s->drop_repair_evict_age +
				 s->drop_repair_orphan + s->drop_repair_refs +
				 s->drop_inconsistent + s->repairs_live + s->repairs_spent);
	/* and LEC still works */
	assert_true((double)res.recovered / (double)res.lost > 0.8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bounded_at_10pct),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
