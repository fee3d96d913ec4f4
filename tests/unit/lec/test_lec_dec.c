/* SPDX-License-Identifier: BSD-3-Clause
 *
 * LEC unit tests, part 2: decoding. One missing id (recovered at once),
 * two missing (stored, recovered when the data or another repair comes),
 * two stored repairs differing by one id, bad repairs, the store's
 * horizon, age limits, stagger against a burst, and a randomised run in
 * which no id is ever delivered twice.
 */
#include "lec_test.h"

#define ME 2u
#define PEER 1u

static struct il_lec *receiver(struct t_cap *cap, uint32_t store_msgs)
{
	struct il_lec_cfg cfg;
	struct il_lec *l;
	uint32_t m[] = { PEER, ME, 3, 4 };

	il_lec_cfg_defaults(&cfg);
	cfg.self_id = ME;
	cfg.store_msgs = store_msgs;
	cfg.max_len = T_MAXLEN;
	cfg.seed = 3;
	l = t_lec(&cfg, cap);
	t_group(l, 1, 0, m, 4);
	t_group(l, 2, 0, m, 4);
	t_apply(l);
	return l;
}

static void ids(struct il_lec_id *out, uint16_t group, uint64_t first, unsigned n)
{
	for (unsigned k = 0; k < n; k++)
		out[k] = t_id(group, first + k);
}

static void test_one_missing(void **state)
{
	struct t_cap cap;
	struct il_lec *l;
	struct il_lec_id v[8];
	struct t_repair r;

	(void)state;
	t_cap_init(&cap, 64, 16);
	l = receiver(&cap, 4096);
	ids(v, 1, 1, 8);
	for (uint64_t s = 1; s <= 8; s++)
		if (s != 5)
			assert_int_equal(t_data(l, 1, s, 100), IL_LEC_NEW);
	t_build(&r, v, 8);
	assert_int_equal(t_repair_in(l, &r, 200), IL_LEC_REP_RECOVERED);
	assert_int_equal(cap.nrec, 1);
	assert_int_equal(cap.rec[0].id.seq, 5);
	assert_int_equal(cap.rec[0].info.how, IL_LEC_HOW_IMMEDIATE);
	assert_int_equal(cap.rec[0].info.discovered_ns, 200);
	t_check_recovery(&cap.rec[0]);
	/* the data coming late is a duplicate; the repair again is useless */
	assert_int_equal(t_data(l, 1, 5, 300), IL_LEC_DUP);
	assert_int_equal(t_repair_in(l, &r, 300), IL_LEC_REP_USELESS);
	assert_int_equal(cap.nrec, 1);
	assert_int_equal(il_lec_stats(l)->recovered, 1);
	assert_int_equal(il_lec_stats(l)->data_dup, 1);
	/* a repair of one message is a retransmission */
	ids(v, 2, 1, 1);
	t_build(&r, v, 1);
	assert_int_equal(t_repair_in(l, &r, 400), IL_LEC_REP_RECOVERED);
	t_check_recovery(&cap.rec[1]);
	il_lec_free(l);
	t_cap_free(&cap);
}

static void test_two_missing_then_data(void **state)
{
	struct t_cap cap;
	struct il_lec *l;
	struct il_lec_id v[8];
	struct t_repair r;
	struct il_lec_group_stats gs;

	(void)state;
	t_cap_init(&cap, 64, 16);
	l = receiver(&cap, 4096);
	ids(v, 1, 1, 4);
	ids(v + 4, 2, 1, 4); /* a composite repair: groups 1 and 2 */
	for (uint64_t s = 1; s <= 4; s++) {
		if (s != 2)
			t_data(l, 1, s, 0);
		if (s != 3)
			t_data(l, 2, s, 0);
	}
	t_build(&r, v, 8);
	assert_int_equal(t_repair_in(l, &r, 10), IL_LEC_REP_STORED);
	assert_int_equal(cap.nrec, 0);
	assert_int_equal(il_lec_stats(l)->repairs_live, 1);
	/* (2, 3) arrives: the stored repair now misses only (1, 2) */
	assert_int_equal(t_data(l, 2, 3, 50), IL_LEC_NEW);
	assert_int_equal(cap.nrec, 1);
	assert_int_equal(cap.rec[0].id.group, 1);
	assert_int_equal(cap.rec[0].id.seq, 2);
	assert_int_equal(cap.rec[0].info.how, IL_LEC_HOW_CASCADE);
	assert_int_equal(cap.rec[0].info.discovered_ns, 10);
	assert_int_equal(cap.rec[0].info.data_since, 1);
	t_check_recovery(&cap.rec[0]);
	assert_int_equal(il_lec_stats(l)->repairs_live, 0);
	assert_int_equal(il_lec_group_stats(l, 1, &gs), 0);
	assert_int_equal(gs.recovered, 1);
	assert_int_equal(il_lec_group_stats(l, 9, &gs), -1);
	il_lec_free(l);
	t_cap_free(&cap);
}

static void test_two_missing_then_repair(void **state)
{
	struct t_cap cap;
	struct il_lec *l;
	struct il_lec_id v[8];
	struct t_repair r1, r2;

	(void)state;
	t_cap_init(&cap, 64, 16);
	l = receiver(&cap, 4096);
	for (uint64_t s = 1; s <= 15; s++)
		if (s != 3 && s != 6)
			t_data(l, 1, s, 0);
	ids(v, 1, 1, 8); /* misses 3 and 6 */
	t_build(&r1, v, 8);
	assert_int_equal(t_repair_in(l, &r1, 0), IL_LEC_REP_STORED);
	ids(v, 1, 6, 8); /* 6..13: misses only 6 */
	t_build(&r2, v, 8);
	assert_int_equal(t_repair_in(l, &r2, 0), IL_LEC_REP_RECOVERED);
	/* 6 at once, then 3 from the stored repair */
	assert_int_equal(cap.nrec, 2);
	assert_int_equal(cap.rec[0].id.seq, 6);
	assert_int_equal(cap.rec[0].info.how, IL_LEC_HOW_IMMEDIATE);
	assert_int_equal(cap.rec[1].id.seq, 3);
	assert_int_equal(cap.rec[1].info.how, IL_LEC_HOW_CASCADE);
	t_check_recovery(&cap.rec[0]);
	t_check_recovery(&cap.rec[1]);
	assert_int_equal(t_data(l, 1, 3, 0), IL_LEC_DUP);
	assert_int_equal(t_data(l, 1, 6, 0), IL_LEC_DUP);
	il_lec_free(l);
	t_cap_free(&cap);
}

/* Section 4.2.8: R1 misses {3, 5, 7}, R2 misses {3, 5}: R1 ^ R2 is 7. */
static void test_pair(void **state)
{
	struct t_cap cap;
	struct il_lec *l;
	struct il_lec_id v[8];
	struct t_repair r1, r2;

	(void)state;
	t_cap_init(&cap, 64, 16);
	l = receiver(&cap, 4096);
	for (uint64_t s = 1; s <= 20; s++)
		if (s != 3 && s != 5 && s != 7)
			t_data(l, 1, s, 0);
	ids(v, 1, 1, 8);
	t_build(&r1, v, 8);
	assert_int_equal(t_repair_in(l, &r1, 0), IL_LEC_REP_STORED);
	v[0] = t_id(1, 3);
	v[1] = t_id(1, 5);
	ids(v + 2, 1, 10, 6);
	t_build(&r2, v, 8);
	assert_int_equal(t_repair_in(l, &r2, 0), IL_LEC_REP_STORED);
	assert_int_equal(cap.nrec, 1);
	assert_int_equal(cap.rec[0].id.seq, 7);
	assert_int_equal(cap.rec[0].info.how, IL_LEC_HOW_PAIR);
	t_check_recovery(&cap.rec[0]);
	/* 3 and 5 stay unknown: both repairs now give only their XOR */
	assert_int_equal(il_lec_stats(l)->recovered, 1);
	/* ...until 5 arrives */
	assert_int_equal(t_data(l, 1, 5, 0), IL_LEC_NEW);
	assert_int_equal(cap.nrec, 2);
	assert_int_equal(cap.rec[1].id.seq, 3);
	t_check_recovery(&cap.rec[1]);
	il_lec_free(l);
	t_cap_free(&cap);
}

static void test_bad_repairs(void **state)
{
	struct t_cap cap;
	struct il_lec *l;
	struct il_lec_id v[IL_LEC_MAX_R + 1];
	struct t_repair r, good;
	struct il_lec_repair rep;
	const struct il_lec_stats *st;

	(void)state;
	t_cap_init(&cap, 64, 16);
	l = receiver(&cap, 4096);
	/* 1, the shortest, is missing: its padding is checked */
	for (uint64_t s = 2; s <= 8; s++)
		t_data(l, 1, s, 0);
	ids(v, 1, 1, 8);
	t_build(&good, v, 8);

	r = good, r.count = 0;
	assert_int_equal(t_repair_in(l, &r, 0), IL_LEC_REP_BAD_COUNT);
	rep = (struct il_lec_repair){ .ids = v, .payload = good.payload, .count = 33,
				      .len = good.len };
	assert_int_equal(il_lec_repair(l, &rep, 0), IL_LEC_REP_BAD_COUNT);
	r = good, r.len = 0;
	assert_int_equal(t_repair_in(l, &r, 0), IL_LEC_REP_BAD_LEN);
	r = good, r.ids[3] = r.ids[1];
	assert_int_equal(t_repair_in(l, &r, 0), IL_LEC_REP_BAD_ID);
	r = good, r.ids[2].zero = 1;
	assert_int_equal(t_repair_in(l, &r, 0), IL_LEC_REP_BAD_ID);
	r = good, r.ids[4].group = 9;
	assert_int_equal(t_repair_in(l, &r, 0), IL_LEC_REP_FOREIGN);
	/* wrong length code: the recovered length exceeds the repair's */
	r = good, r.len_xor ^= 0x4000;
	assert_int_equal(t_repair_in(l, &r, 0), IL_LEC_REP_INCONSISTENT);
	/* wrong bytes past the recovered message's end */
	r = good, r.payload[r.len - 1] ^= 1;
	assert_true(t_len(1) < r.len);
	assert_int_equal(t_repair_in(l, &r, 0), IL_LEC_REP_INCONSISTENT);
	st = il_lec_stats(l);
	assert_int_equal(st->repair_result[IL_LEC_REP_BAD_COUNT], 2);
	assert_int_equal(st->repair_result[IL_LEC_REP_BAD_ID], 2);
	assert_int_equal(st->recovered, 0);
	/* the good one still works */
	assert_int_equal(t_repair_in(l, &good, 0), IL_LEC_REP_RECOVERED);
	t_check_recovery(&cap.rec[0]);
	assert_string_equal(il_lec_result_name(IL_LEC_REP_FOREIGN), "foreign");
	assert_string_equal(il_lec_result_name(99), "unknown");
	il_lec_free(l);

	/* an encode-only node does not decode */
	{
		struct il_lec_cfg cfg;
		uint32_t m[] = { 1, 2 };

		il_lec_cfg_defaults(&cfg);
		cfg.self_id = 2;
		cfg.decode = false;
		l = t_lec(&cfg, &cap);
		t_group(l, 1, 0, m, 2);
		t_apply(l);
		assert_int_equal(t_repair_in(l, &good, 0), IL_LEC_REP_NODECODE);
		il_lec_free(l);
	}
	t_cap_free(&cap);
}

/* A bounded store forgets; what it forgot is never recovered. */
static void test_horizon(void **state)
{
	struct t_cap cap;
	struct il_lec *l;
	struct il_lec_id v[8];
	struct t_repair r;

	(void)state;
	t_cap_init(&cap, 0, 16);
	l = receiver(&cap, 128);
	for (uint64_t s = 1; s <= 1000; s++)
		if (s != 5)
			t_data(l, 1, s, 0);
	assert_true(il_lec_stats(l)->drop_msg_evict_count > 0);
	assert_true(il_lec_stats(l)->msgs_hwm <= 128);
	/* 5 was never held, but 1..8 were forgotten: 5 might have been too */
	ids(v, 1, 1, 8);
	t_build(&r, v, 8);
	assert_int_equal(t_repair_in(l, &r, 0), IL_LEC_REP_STALE);
	assert_int_equal(t_data(l, 1, 5, 0), IL_LEC_UNKNOWN);
	assert_int_equal(t_data(l, 1, 6, 0), IL_LEC_UNKNOWN);
	assert_int_equal(il_lec_stats(l)->data_stale, 2);
	/* a newer epoch starts above the horizon */
	{
		struct il_lec_id id = t_id(1, 5);
		uint8_t b[8] = { 0 };

		id.epoch = 8;
		assert_int_equal(il_lec_data(l, &id, b, 8, NULL, 0), IL_LEC_NEW);
	}
	/* recent ids still decode */
	ids(v, 1, 990, 8);
	t_build(&r, v, 8);
	assert_int_equal(t_repair_in(l, &r, 0), IL_LEC_REP_USELESS);
	assert_int_equal(cap.nrec, 0);
	il_lec_free(l);
	t_cap_free(&cap);
}

static void test_age_limit(void **state)
{
	struct t_cap cap;
	struct il_lec *l;
	struct il_lec_id v[8];
	struct t_repair r;
	const struct il_lec_stats *st;

	(void)state;
	t_cap_init(&cap, 64, 16);
	l = receiver(&cap, 4096); /* max_age 1 s */
	for (uint64_t s = 1; s <= 6; s++)
		t_data(l, 1, s, 1000);
	ids(v, 1, 1, 8);
	t_build(&r, v, 8);
	assert_int_equal(t_repair_in(l, &r, 2000), IL_LEC_REP_STORED);
	st = il_lec_stats(l);
	assert_int_equal(st->repairs_live, 1);
	il_lec_tick(l, 2000 + 1000000001ull);
	assert_int_equal(st->repairs_live, 0);
	assert_int_equal(st->drop_repair_evict_age, 1);
	assert_int_equal(st->drop_repair_orphan, 0);
	assert_int_equal(st->msgs_live, 0);
	assert_int_equal(st->drop_msg_evict_age, 8);
	assert_int_equal(st->drop_unrecoverable, 2);
	il_lec_free(l);
	t_cap_free(&cap);
}

/* Stagger 3 puts 4, 5, 6 into three repairs: a burst of three is
 * recovered whole; without stagger one repair holds two of them. */
static unsigned burst_recovered(uint8_t stagger)
{
	struct il_lec_cfg cfg;
	struct t_cap ecap, dcap;
	struct il_lec *enc, *dec;
	uint32_t m[] = { PEER, ME };
	unsigned n;

	il_lec_cfg_defaults(&cfg);
	cfg.r = 4;
	cfg.stagger = stagger;
	cfg.self_id = PEER;
	cfg.max_len = T_MAXLEN;
	t_cap_init(&ecap, 64, 64);
	t_cap_init(&dcap, 64, 64);
	enc = t_lec(&cfg, &ecap);
	cfg.self_id = ME;
	dec = t_lec(&cfg, &dcap);
	t_group(enc, 1, 1.0, m, 2);
	t_group(dec, 1, 1.0, m, 2);
	t_apply(enc);
	t_apply(dec);
	for (uint64_t s = 1; s <= 24; s++) {
		t_data(enc, 1, s, 0);
		if (s < 4 || s > 6)
			t_data(dec, 1, s, 0);
	}
	assert_int_equal(ecap.nrep, 6);
	for (uint32_t i = 0; i < ecap.nrep; i++) {
		const struct t_repair *r = &ecap.rep[i];

		assert_int_equal(r->count, 4);
		assert_int_equal(r->n, 1);
		assert_int_equal(r->targets[0], ME);
		/* instance k of the bin holds every stagger-th message */
		for (unsigned k = 1; k < r->count; k++)
			assert_int_equal(r->ids[k].seq - r->ids[k - 1].seq, stagger);
		t_repair_in(dec, r, 0);
	}
	for (uint32_t i = 0; i < dcap.nrec; i++)
		t_check_recovery(&dcap.rec[i]);
	n = dcap.nrec;
	il_lec_free(enc);
	il_lec_free(dec);
	t_cap_free(&ecap);
	t_cap_free(&dcap);
	return n;
}

static void test_stagger(void **state)
{
	(void)state;
	assert_int_equal(burst_recovered(3), 3);
	assert_int_equal(burst_recovered(1), 1);
}

/* Checks and marks the recoveries from cap->rec[seen] on. */
static unsigned mark(const struct t_cap *cap, unsigned seen, uint8_t *delivered,
		     uint32_t *twice)
{
	for (; seen < cap->nrec; seen++) {
		t_check_recovery(&cap->rec[seen]);
		*twice += delivered[cap->rec[seen].id.seq];
		delivered[cap->rec[seen].id.seq] = 1;
	}
	return seen;
}

/* Random repairs over a window, random holdings, data arriving late:
 * every recovery is right and no id is delivered twice. */
static void test_random_never_twice(void **state)
{
	enum { N = 300, REPAIRS = 3000 };
	struct t_cap cap;
	struct il_lec *l;
	uint8_t delivered[N + 1] = { 0 }, held0[N + 1];
	uint64_t rng = 12345;
	uint32_t twice = 0, missing = 0;

	(void)state;
	t_cap_init(&cap, 0, N + 1);
	l = receiver(&cap, 4096);
	for (uint64_t s = 1; s <= N; s++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		held0[s] = (rng >> 33) % 100 < 70;
		if (held0[s]) {
			assert_int_equal(t_data(l, 1, s, 0), IL_LEC_NEW);
			delivered[s] = 1;
		} else {
			missing++;
		}
	}
	for (unsigned i = 0, seen = 0; i < REPAIRS; i++) {
		struct il_lec_id v[8];
		struct t_repair r;
		unsigned n, k = 0;

		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		n = 2 + (unsigned)((rng >> 33) % 7);
		while (k < n) {
			uint64_t s;
			bool dup = false;

			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			s = 1 + (rng >> 33) % N;
			for (unsigned j = 0; j < k; j++)
				dup |= v[j].seq == s;
			if (!dup)
				v[k++] = t_id(1, s);
		}
		t_build(&r, v, n);
		t_repair_in(l, &r, 0);
		seen = mark(&cap, seen, delivered, &twice);
		/* now and then a lost message arrives late */
		if (i % 10 == 0) {
			uint64_t s = 1 + (rng >> 40) % N;
			bool before = delivered[s];
			enum il_lec_verdict vd = t_data(l, 1, s, 0);

			if (vd == IL_LEC_NEW) {
				twice += before;
				delivered[s] = 1;
			} else {
				assert_int_equal(vd, IL_LEC_DUP);
				assert_int_equal(before, 1);
			}
		}
		seen = mark(&cap, seen, delivered, &twice);
	}
	assert_int_equal(twice, 0);
	assert_true(il_lec_stats(l)->recovered > 0);
	printf("# %u recovered of %u missing at first; by pair: %llu\n", cap.nrec, missing,
	       (unsigned long long)il_lec_stats(l)->recovered_how[IL_LEC_HOW_PAIR]);
	il_lec_free(l);
	t_cap_free(&cap);
}

static void test_xor_ref(void **state)
{
	uint8_t a[200], b[200], c[200];

	(void)state;
	for (unsigned i = 0; i < 200; i++) {
		a[i] = (uint8_t)(i * 7);
		b[i] = (uint8_t)(i * 13 + 1);
	}
	for (unsigned off = 0; off < 9; off++) {
		for (unsigned len = 0; len < 150; len += 7) {
			memcpy(c, a, sizeof(c));
			il_xor(c + off, b + 3, len);
			for (unsigned i = 0; i < 200; i++) {
				uint8_t want = a[i];

				if (i >= off && i < off + len)
					want ^= b[3 + i - off];
				assert_int_equal(c[i], want);
			}
		}
	}
}

/* A decoding node's bins refer to its store: a message the store evicts
 * before its bin fires is left out of the repair (counted), and the
 * repair is still the exact XOR of the messages it names. */
static void test_bin_evicted(void **state)
{
	struct il_lec_cfg cfg;
	struct t_cap cap;
	struct il_lec *l;
	uint32_t a[] = { 1, 3, 4 }, b[] = { 5, 6, 7 };
	struct t_repair want;
	struct il_lec_id v[7];

	(void)state;
	il_lec_cfg_defaults(&cfg);
	cfg.self_id = ME;
	cfg.store_msgs = 128;
	cfg.max_len = T_MAXLEN;
	cfg.plan = IL_LEC_PLAN_GROUPS;
	t_cap_init(&cap, 200, 16);
	l = t_lec(&cfg, &cap);
	t_group(l, 1, 3.0, a, 3); /* c = |G|: every round builds its repair */
	t_group(l, 2, 3.0, b, 3);
	t_apply(l);
	assert_int_equal(t_data(l, 1, 1, 0), IL_LEC_NEW);
	/* 200 messages of group 2 push message 1 of group 1 out of the store */
	for (uint64_t s = 1; s <= 200; s++)
		assert_int_equal(t_data(l, 2, s, 0), IL_LEC_NEW);
	assert_int_equal(cap.nrep, 25);
	for (uint64_t s = 2; s <= 8; s++)
		assert_int_equal(t_data(l, 1, s, 0), IL_LEC_NEW);
	assert_int_equal(cap.nrep, 26);
	assert_int_equal(il_lec_stats(l)->drop_bin_evicted, 1);
	ids(v, 1, 2, 7);
	t_build(&want, v, 7);
	assert_int_equal(cap.rep[25].count, 7);
	assert_memory_equal(cap.rep[25].ids, v, sizeof(v));
	assert_int_equal(cap.rep[25].len, want.len);
	assert_int_equal(cap.rep[25].len_xor, want.len_xor);
	assert_memory_equal(cap.rep[25].payload, want.payload, want.len);
	il_lec_free(l);
	t_cap_free(&cap);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_missing),
		cmocka_unit_test(test_two_missing_then_data),
		cmocka_unit_test(test_two_missing_then_repair),
		cmocka_unit_test(test_pair),
		cmocka_unit_test(test_bad_repairs),
		cmocka_unit_test(test_horizon),
		cmocka_unit_test(test_age_limit),
		cmocka_unit_test(test_stagger),
		cmocka_unit_test(test_random_never_twice),
		cmocka_unit_test(test_xor_ref),
		cmocka_unit_test(test_bin_evicted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
