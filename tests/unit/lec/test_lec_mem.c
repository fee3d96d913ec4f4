/* SPDX-License-Identifier: BSD-3-Clause
 *
 * LEC unit tests, part 3: memory stays bounded. The 16-node network of
 * lec_sim.c runs at 10% loss with deliberately small stores: no store
 * ever exceeds its configured size, every eviction is counted, recovery
 * stays correct (no wrong bytes, no id delivered twice), and no instance
 * calls the allocator once created (the binary is linked with
 * --wrap=malloc,calloc,realloc,aligned_alloc,posix_memalign,free, so the
 * test sees every call made while the network runs). And an instance
 * made with the default allocator takes memory as it is used: creating one
 * whose stores reserve a hundred megabytes adds little to the resident set.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
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

static void no_send(void *arg, const struct il_lec_repair *rep, const uint32_t *t, uint32_t n)
{
	(void)arg, (void)rep, (void)t, (void)n;
}

static void no_recovered(void *arg, const struct il_lec_id *id, const uint8_t *p, uint32_t len,
			 const struct il_lec_recovery *info)
{
	(void)arg, (void)id, (void)p, (void)len, (void)info;
}

/* Resident pages of this process, from /proc/self/statm. */
static size_t resident_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size = 0, res = 0;

	assert_non_null(f);
	assert_int_equal(fscanf(f, "%lu %lu", &size, &res), 2);
	fclose(f);
	return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

static void test_default_memory_is_taken_as_used(void **state)
{
	struct il_lec_cfg c;
	struct il_lec_ops ops = { .send = no_send, .recovered = no_recovered };
	char err[200];
	size_t before, after;
	struct il_lec *l;

	(void)state;
	il_lec_cfg_defaults(&c);
	c.self_id = 1;
	c.store_msgs = 65536; /* 65536 slots of about 1.5 KB: 100 MB reserved */
	before = resident_bytes();
	l = il_lec_create(&c, &ops, err, sizeof(err));
	assert_non_null(l);
	after = resident_bytes();
	printf("# footprint %zu bytes, resident set grew by %zu\n", il_lec_footprint(l),
	       after - before);
	assert_true(il_lec_footprint(l) > 90u << 20);
	/* the tables create writes (the decoder's index, the free lists) are
	 * a few megabytes; the stores are untouched */
	assert_true(after - before < il_lec_footprint(l) / 8);
	il_lec_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bounded_at_10pct),
		cmocka_unit_test(test_default_memory_is_taken_as_used),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
