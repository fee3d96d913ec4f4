/* SPDX-License-Identifier: BSD-3-Clause
 *
 * FEC unit tests, part 2: the decoder. Every single loss, cascades, the
 * two-repair trick, Reed-Solomon blocks, late and duplicate originals,
 * id reuse, malformed repairs, evictions by count and age, epochs.
 */
#include <stdio.h>

#include "fec_test.h"

#define MINL 40
#define MAXL 300

/* A link where exactly the link packets in `drop` (positions counted
 * over data and repairs) are lost. */
struct link {
	struct il_fec_dec *dec;
	uint64_t pos;
	const uint64_t *drop;
	unsigned ndrop;
	unsigned repairs;
};

static bool link_lost(struct link *l)
{
	uint64_t p = l->pos++;

	for (unsigned i = 0; i < l->ndrop; i++)
		if (l->drop[i] == p)
			return true;
	return false;
}

static void link_emit(void *arg, const uint8_t *msg, uint32_t len,
		      const struct il_fec_repair_info *info)
{
	struct link *l = arg;

	(void)info;
	l->repairs++;
	if (!link_lost(l))
		assert_int_equal(il_fec_dec_repair(l->dec, msg, len, l->pos * 1000), IL_FEC_OK);
}

/* by_ref: received packets are handed to the decoder by reference
 * (il_fec_dec_data_ref), each in a buffer of its own that only the
 * release callback frees (ASan catches a read after it), and without
 * their payload check, as the fec_dec stage does. */
static bool by_ref;
static unsigned refs_taken, refs_released;

static void ref_release(void *handle, void *arg)
{
	(void)arg;
	memset(handle, 0xa5, 64);
	free(handle);
	refs_released++;
}

/* Run n packets over the link; deliveries land in g. */
static void run_link(const struct il_fec_cfg *cfg_in, uint64_t n, const uint64_t *drop,
		     unsigned ndrop, struct got *g, struct il_fec_dec_stats *st,
		     uint64_t *lost_x, unsigned *nlost)
{
	uint8_t pkt[2048] __attribute__((aligned(64)));
	struct link l = { .drop = drop, .ndrop = ndrop };
	struct il_fec_cfg cfgr = *cfg_in;
	const struct il_fec_cfg *cfg = &cfgr;
	struct il_fec_enc *e;
	char err[256];

	if (by_ref)
		cfgr.release = ref_release;
	refs_taken = refs_released = 0;
	memset(g, 0, sizeof(*g));
	g->min_len = MINL;
	g->max_len = MAXL;
	*nlost = 0;
	l.dec = il_fec_dec_create(cfg, got_deliver, g, err, sizeof(err));
	e = il_fec_enc_create(cfg, link_emit, &l, err, sizeof(err));
	assert_non_null(l.dec);
	assert_non_null(e);
	for (uint64_t x = 0; x < n; x++) {
		uint32_t len = sim_pkt_len(x, MINL, MAXL);
		struct il_fec_id id;

		sim_pkt_build(pkt, x, len);
		assert_int_equal(il_fec_id_ipv4(pkt, len, &id), 0);
		if (link_lost(&l)) {
			lost_x[(*nlost)++] = x;
		} else if (by_ref) {
			uint8_t *copy = aligned_alloc(64, 2048);
			struct il_fec_id tuple;
			bool kept;

			memcpy(copy, pkt, len);
			assert_int_equal(il_fec_id_ipv4_tuple(copy, len, &tuple), 0);
			assert_int_equal(il_fec_dec_data_ref(l.dec, &tuple, false, copy, len, copy,
							     &kept, l.pos * 1000),
					 IL_FEC_FORWARD);
			if (kept)
				refs_taken++;
			else
				free(copy);
		} else {
			assert_int_equal(il_fec_dec_data(l.dec, &id, pkt, len, l.pos * 1000),
					 IL_FEC_FORWARD);
		}
		il_fec_enc_add(e, &id, pkt, len);
	}
	il_fec_enc_flush(e, true);
	*st = *il_fec_dec_stats(l.dec);
	il_fec_enc_free(e);
	il_fec_dec_free(l.dec);
	/* Every reference taken was given back, once (freeing the decoder
	 * releases what it still held). */
	assert_int_equal(refs_released, refs_taken);
	/* Originals never arrive after their repairs here, and no two share
	 * addresses, IP id and length: no payload check at the decoder. */
	if (by_ref)
		assert_int_equal(st->checks_computed, 0);
}

/* Lose each link packet of a run in turn: every lost data packet comes
 * back exactly once, intact, and a lost repair costs nothing. */
static void check_every_single_loss(struct il_fec_cfg *cfg, uint64_t n)
{
	struct il_fec_dec_stats st;
	uint64_t lost_x[4];
	unsigned nlost, link_len;
	struct got *g = malloc(sizeof(*g));

	run_link(cfg, n, NULL, 0, g, &st, lost_x, &nlost);
	assert_int_equal(g->n, 0);
	link_len = (unsigned)(n + st.repairs_in);
	for (uint64_t p = 0; p < link_len; p++) {
		run_link(cfg, n, &p, 1, g, &st, lost_x, &nlost);
		assert_int_equal(g->bad, 0);
		if (nlost == 0) {
			assert_int_equal(g->n, 0);
			continue;
		}
		if (g->n != 1 || g->x[0] != lost_x[0])
			fail_msg("r=%u c=%u: losing link packet %llu (data %llu) gave %u "
				 "recoveries",
				 cfg->r, cfg->c, (unsigned long long)p,
				 (unsigned long long)lost_x[0], g->n);
		assert_int_equal(g->how[0], cfg->code == IL_FEC_CODE_RS ? IL_FEC_HOW_RS
									 : IL_FEC_HOW_IMMEDIATE);
		assert_int_equal(st.recovered[g->layer[0]], 1);
	}
	free(g);
}

static void test_every_single_loss(void **state)
{
	struct il_fec_cfg cfg;

	(void)state;
	for (unsigned impl = 0; impl <= IL_FEC_XOR_ISAL_XORGEN; impl++) {
		il_fec_cfg_defaults(&cfg);
		cfg.xor_impl = (uint8_t)impl;
		check_every_single_loss(&cfg, 200);
	}
	il_fec_cfg_defaults(&cfg);
	cfg.delay_xor = true;
	check_every_single_loss(&cfg, 200);
	il_fec_cfg_defaults(&cfg);
	cfg.r = 7;
	cfg.c = 2;
	cfg.interleave[1] = 10;
	check_every_single_loss(&cfg, 150);
	il_fec_cfg_defaults(&cfg);
	cfg.code = IL_FEC_CODE_RS;
	cfg.interleave[0] = 3;
	check_every_single_loss(&cfg, 150);
}

/* The same with received packets held by reference and their payload
 * checks left to the repairs' recipes (what the fec_dec stage does). */
static void test_every_single_loss_by_reference(void **state)
{
	struct il_fec_cfg cfg;

	(void)state;
	by_ref = true;
	il_fec_cfg_defaults(&cfg);
	cfg.verify_l3_off = 0;
	check_every_single_loss(&cfg, 200);
	il_fec_cfg_defaults(&cfg);
	cfg.delay_xor = true;
	check_every_single_loss(&cfg, 200);
	il_fec_cfg_defaults(&cfg);
	cfg.code = IL_FEC_CODE_RS;
	cfg.interleave[0] = 3;
	check_every_single_loss(&cfg, 150);
	by_ref = false;
}

static struct il_fec_dec *hand_dec(struct il_fec_cfg *cfg, struct got *g)
{
	char err[256];
	struct il_fec_dec *d;

	il_fec_cfg_defaults(cfg);
	memset(g, 0, sizeof(*g));
	g->min_len = MINL;
	g->max_len = MAXL;
	d = il_fec_dec_create(cfg, got_deliver, g, err, sizeof(err));
	assert_non_null(d);
	return d;
}

static void send_hand(struct il_fec_dec *d, const struct il_fec_cfg *cfg, unsigned layer,
		      const uint64_t *xs, unsigned n, uint64_t seq)
{
	uint8_t m[4096];
	uint32_t len = hand_repair(m, cfg, layer, 1, xs, n, xs[0], seq, 0, MINL, MAXL);

	assert_int_equal(il_fec_dec_repair(d, m, len, 1000), IL_FEC_OK);
}

/* Stored repairs are used when a later packet arrives, and a recovery
 * can complete another stored repair in turn. */
static void test_cascade(void **state)
{
	static const uint64_t a[] = { 1, 2 }, b[] = { 2, 3 };
	struct il_fec_cfg cfg;
	struct got *g = malloc(sizeof(*g));
	struct il_fec_dec *d = hand_dec(&cfg, g);

	(void)state;
	send_hand(d, &cfg, 0, a, 2, 0);
	send_hand(d, &cfg, 1, b, 2, 1);
	assert_int_equal(g->n, 0);
	assert_int_equal(il_fec_dec_stats(d)->repairs_stored, 2);
	assert_int_equal(give_data(d, 3, MINL, MAXL, 2000), IL_FEC_FORWARD);
	assert_int_equal(g->n, 2);
	assert_int_equal(g->x[0], 2);
	assert_int_equal(g->x[1], 1);
	assert_int_equal(g->how[0], IL_FEC_HOW_CASCADE);
	assert_int_equal(g->how[1], IL_FEC_HOW_CASCADE);
	assert_int_equal(g->layer[0], 1);
	assert_int_equal(g->layer[1], 0);
	assert_int_equal(g->bad, 0);
	assert_int_equal(il_fec_dec_stats(d)->repairs_live, 0);
	il_fec_dec_free(d);
	free(g);
}

/* Ricochet's trick: missing {1,2,3} and {1,2,3,4} give packet 4, in
 * either order. */
static void test_two_repair(void **state)
{
	static const uint64_t s[] = { 1, 2, 3 }, b[] = { 1, 2, 3, 4 };
	struct il_fec_cfg cfg;
	struct got *g = malloc(sizeof(*g));

	(void)state;
	for (int order = 0; order < 2; order++) {
		struct il_fec_dec *d = hand_dec(&cfg, g);

		if (order == 0) {
			send_hand(d, &cfg, 0, s, 3, 0);
			send_hand(d, &cfg, 1, b, 4, 1);
		} else {
			send_hand(d, &cfg, 1, b, 4, 0);
			send_hand(d, &cfg, 0, s, 3, 1);
		}
		assert_int_equal(g->n, 1);
		assert_int_equal(g->x[0], 4);
		assert_int_equal(g->how[0], IL_FEC_HOW_TWO_REPAIR);
		assert_int_equal(g->bad, 0);
		assert_int_equal(il_fec_dec_stats(d)->recovered_how[IL_FEC_HOW_TWO_REPAIR], 1);
		/* Then one more packet cascades through both. */
		give_data(d, 1, MINL, MAXL, 2000);
		give_data(d, 2, MINL, MAXL, 2000);
		assert_int_equal(g->n, 2);
		assert_int_equal(g->x[1], 3);
		il_fec_dec_free(d);
	}
	free(g);
}

static void test_late_and_duplicate(void **state)
{
	static const uint64_t a[] = { 10, 11, 12, 13 };
	struct il_fec_cfg cfg;
	struct got *g = malloc(sizeof(*g));
	struct il_fec_dec *d = hand_dec(&cfg, g);

	(void)state;
	give_data(d, 10, MINL, MAXL, 1);
	give_data(d, 11, MINL, MAXL, 2);
	give_data(d, 13, MINL, MAXL, 3);
	send_hand(d, &cfg, 0, a, 4, 0);
	assert_int_equal(g->n, 1);
	assert_int_equal(g->x[0], 12);
	/* The original shows up after its recovery: not delivered again. */
	assert_int_equal(give_data(d, 12, MINL, MAXL, 5), IL_FEC_DROP_LATE);
	assert_int_equal(give_data(d, 12, MINL, MAXL, 6), IL_FEC_DROP_LATE);
	assert_int_equal(il_fec_dec_stats(d)->late_originals, 2);
	/* A repeated original is forwarded (the network duplicated it, the
	 * codec did not) and counted. */
	assert_int_equal(give_data(d, 11, MINL, MAXL, 7), IL_FEC_FORWARD);
	assert_int_equal(il_fec_dec_stats(d)->dup_originals, 1);
	/* The same repair again recovers nothing twice. */
	send_hand(d, &cfg, 0, a, 4, 1);
	assert_int_equal(g->n, 1);
	assert_int_equal(il_fec_dec_stats(d)->repairs_useless, 1);
	il_fec_dec_free(d);
	free(g);
}

/* Forced IP-id reuse (same addresses, id and length, other payload):
 * the payload check keeps the two packets apart. */
static void test_ip_id_reuse(void **state)
{
	const uint64_t a[] = { 5, 5 + 65536 * 4, 9 };
	struct il_fec_cfg cfg;
	struct got *g = malloc(sizeof(*g));
	struct il_fec_dec *d;
	uint8_t p1[512], p2[512];
	struct il_fec_id i1, i2;

	(void)state;
	/* Fixed length so that both collide on every header field. */
	sim_pkt_build(p1, a[0], 200);
	sim_pkt_build(p2, a[1], 200);
	assert_int_equal(memcmp(p1, p2, 20), 0);
	il_fec_id_ipv4(p1, 200, &i1);
	il_fec_id_ipv4(p2, 200, &i2);
	assert_false(il_fec_id_eq(&i1, &i2));

	d = hand_dec(&cfg, g);
	g->min_len = g->max_len = 200;
	give_data(d, a[0], 200, 200, 1);
	give_data(d, a[2], 200, 200, 2);
	{
		uint8_t m[4096];
		uint32_t len = hand_repair(m, &cfg, 0, 1, a, 3, 0, 0, 0, 200, 200);

		assert_int_equal(il_fec_dec_repair(d, m, len, 3), IL_FEC_OK);
	}
	assert_int_equal(g->n, 1);
	assert_int_equal(g->x[0], a[1]);
	assert_int_equal(g->bad, 0);
	assert_int_equal(il_fec_dec_stats(d)->verify_fail, 0);
	il_fec_dec_free(d);
	free(g);
}

/* Two packets that share addresses, IP id and length, handed over
 * without their checks. The kept one and the lost one are told apart by
 * their packet numbers (the lost one is recovered); a second arrival with
 * the same tuple makes the decoder compute both checks (a duplicate is
 * recognised as one, a different packet is kept apart). When the lost
 * one is named first, the kept one may be taken for it: the recovery then
 * fails its verification, and nothing wrong reaches a host. */
static void test_ip_id_reuse_without_checks(void **state)
{
	const uint64_t a[] = { 5, 5 + 65536 * 4, 9 };
	struct il_fec_cfg cfg;
	struct got *g = malloc(sizeof(*g));
	uint8_t p[3][512] __attribute__((aligned(64)));
	struct il_fec_id t[3];
	uint8_t m[4096];
	uint32_t len;
	bool kept;

	(void)state;
	for (unsigned i = 0; i < 3; i++) {
		sim_pkt_build(p[i], a[i], 200);
		il_fec_id_ipv4_tuple(p[i], 200, &t[i]);
	}
	il_fec_cfg_defaults(&cfg);
	len = hand_repair(m, &cfg, 0, 1, a, 3, 0, 0, 0, 200, 200);

	/* a[1] lost: recovered. */
	struct il_fec_dec *d = hand_dec(&cfg, g);
	g->min_len = g->max_len = 200;
	il_fec_dec_data_ref(d, &t[0], false, p[0], 200, NULL, &kept, 1);
	il_fec_dec_data_ref(d, &t[2], false, p[2], 200, NULL, &kept, 2);
	assert_int_equal(il_fec_dec_repair(d, m, len, 3), IL_FEC_OK);
	assert_int_equal(g->n, 1);
	assert_int_equal(g->x[0], a[1]);
	assert_int_equal(g->bad, 0);
	assert_int_equal(il_fec_dec_stats(d)->checks_computed, 0);
	/* a[0] again: a duplicate (both checks computed to tell); a[1] again:
	 * the late original of what was recovered. */
	assert_int_equal(il_fec_dec_data_ref(d, &t[0], false, p[0], 200, NULL, &kept, 4),
			 IL_FEC_FORWARD);
	assert_int_equal(il_fec_dec_stats(d)->dup_originals, 1);
	assert_int_equal(il_fec_dec_data_ref(d, &t[1], false, p[1], 200, NULL, &kept, 5),
			 IL_FEC_DROP_LATE);
	assert_true(il_fec_dec_stats(d)->checks_computed >= 2);
	il_fec_dec_free(d);

	/* a[0] lost, a[1] kept: a[1] is taken for a[0] (nothing told them
	 * apart yet), the rebuilt bytes fail verification, nothing wrong
	 * is delivered. */
	d = hand_dec(&cfg, g);
	g->min_len = g->max_len = 200;
	il_fec_dec_data_ref(d, &t[1], false, p[1], 200, NULL, &kept, 1);
	il_fec_dec_data_ref(d, &t[2], false, p[2], 200, NULL, &kept, 2);
	assert_int_equal(il_fec_dec_repair(d, m, len, 3), IL_FEC_OK);
	assert_int_equal(g->bad, 0);
	for (unsigned i = 0; i < g->n; i++)
		assert_int_not_equal(g->x[i], a[1]);
	assert_int_equal(g->n + il_fec_dec_stats(d)->verify_fail, 1);
	il_fec_dec_free(d);
	free(g);
}

/* A repair whose payload does not rebuild the packet it names (garbage,
 * or an id collision) is caught and nothing is delivered. */
static void test_verify_fail(void **state)
{
	static const uint64_t a[] = { 1, 2 };
	struct il_fec_cfg cfg;
	struct got *g = malloc(sizeof(*g));
	struct il_fec_dec *d = hand_dec(&cfg, g);
	uint8_t m[4096];
	uint32_t len = hand_repair(m, &cfg, 0, 1, a, 2, 1, 0, 0, MINL, MAXL);

	(void)state;
	/* Inside packet 2's IP payload, whichever packet is longer. */
	m[IL_FEC_REPAIR_HDR_LEN(2) + 30] ^= 0x55;
	assert_true(len > IL_FEC_REPAIR_HDR_LEN(2) + 30);
	give_data(d, 1, MINL, MAXL, 1);
	assert_int_equal(il_fec_dec_repair(d, m, len, 2), IL_FEC_OK);
	assert_int_equal(g->n, 0);
	assert_int_equal(il_fec_dec_stats(d)->verify_fail, 1);
	il_fec_dec_free(d);
	free(g);
}

static void test_bad_repairs(void **state)
{
	static const uint64_t a[] = { 1, 2, 3 };
	struct il_fec_cfg cfg;
	struct got *g = malloc(sizeof(*g));
	struct il_fec_dec *d = hand_dec(&cfg, g);
	uint8_t good[4096], m[4096];
	uint32_t len = hand_repair(good, &cfg, 0, 1, a, 3, 1, 0, 0, MINL, MAXL);
	struct {
		unsigned reason;
		unsigned off;
		uint8_t val;
		int dlen;
	} cases[] = {
		{ IL_FEC_BAD_VERSION, IL_OFF_VERSION, 2, 0 },
		{ IL_FEC_BAD_TYPE, IL_OFF_TYPE, IL_T_DATA, 0 },
		{ IL_FEC_BAD_HDR_LEN, IL_OFF_HDR_LEN, 39, 0 },
		{ IL_FEC_BAD_HDR_LEN, IL_OFF_HDR_LEN, 42, 0 },
		{ IL_FEC_BAD_LINK, IL_OFF_GROUP_ID + 1, 1, 0 },
		{ IL_FEC_BAD_CODE, IL_HDR_LEN + IL_FEC_OFF_CODE, IL_FEC_CODE_RS, 0 },
		{ IL_FEC_BAD_CODE, IL_HDR_LEN + IL_FEC_OFF_CODE, 0, 0 },
		{ IL_FEC_BAD_RATE, IL_HDR_LEN + IL_FEC_OFF_RATE_R, 1, 0 },
		{ IL_FEC_BAD_RATE, IL_HDR_LEN + IL_FEC_OFF_RATE_C, 0, 0 },
		{ IL_FEC_BAD_LAYER, IL_HDR_LEN + IL_FEC_OFF_LAYER, 3, 0 },
		{ IL_FEC_BAD_COUNT, IL_HDR_LEN + IL_FEC_OFF_COUNT, 0, 0 },
		{ IL_FEC_BAD_COUNT, IL_HDR_LEN + IL_FEC_OFF_COUNT, 9, 0 },
		{ IL_FEC_BAD_ID_LEN, IL_HDR_LEN + IL_FEC_OFF_ID_LEN, 8, 0 },
		{ IL_FEC_BAD_INTERLEAVE, IL_HDR_LEN + IL_FEC_OFF_INTERLEAVE + 1, 0, 0 },
		{ IL_FEC_BAD_XOR_LEN, IL_HDR_LEN + IL_FEC_OFF_XOR_LEN, 0xff, 0 },
		{ IL_FEC_BAD_LENGTH, 0, 0, -1 },
		{ IL_FEC_BAD_LENGTH, 0, 0, +1 },
		/* A count that fits r but not the datagram. */
		{ IL_FEC_BAD_LENGTH, IL_HDR_LEN + IL_FEC_OFF_COUNT, 4, 0 },
	};

	(void)state;
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t l = (uint32_t)((int)len + cases[i].dlen);

		memcpy(m, good, sizeof(good));
		if (cases[i].dlen == 0)
			m[cases[i].off] = cases[i].val;
		assert_int_equal(il_fec_dec_repair(d, m, l, 1), cases[i].reason);
	}
	/* Every truncation of a good repair is refused, never read past
	 * (exact-size copies, so ASan sees an overread). */
	for (uint32_t l = 0; l < len; l++) {
		uint8_t *t = malloc(l ? l : 1);
		enum il_fec_bad why;

		memcpy(t, good, l);
		why = il_fec_dec_repair(d, t, l, 1);
		assert_int_equal(why, l < IL_HDR_LEN + IL_FEC_BODY_LEN ? IL_FEC_BAD_SHORT
								 : IL_FEC_BAD_LENGTH);
		free(t);
	}
	assert_int_equal(il_fec_dec_stats(d)->repairs_in, 0);
	assert_int_equal(il_fec_dec_stats(d)->repair_bad[IL_FEC_BAD_VERSION], 1);
	assert_int_equal(il_fec_dec_stats(d)->repair_bad[IL_FEC_BAD_HDR_LEN], 2);
	assert_string_equal(il_fec_bad_name(IL_FEC_BAD_XOR_LEN), "xor_len");
	il_fec_dec_free(d);
	free(g);
}

/* RS (8,3): any 3 losses among a block's 11 symbols are repaired; 4 lost
 * data packets are not. */
static void test_rs_block(void **state)
{
	struct il_fec_cfg cfg;
	struct il_fec_dec_stats st;
	struct got *g = malloc(sizeof(*g));
	uint64_t lost_x[8];
	unsigned nlost;

	(void)state;
	il_fec_cfg_defaults(&cfg);
	cfg.code = IL_FEC_CODE_RS;
	cfg.interleave[0] = 1;
	cfg.stagger = false;
	/* Block 2 is data 16..23 at link positions 22..29 (each earlier
	 * block adds 3 parities), parities at 30..32. */
	{
		const uint64_t d3[] = { 22, 25, 29 }, d2p1[] = { 23, 24, 31 },
			       d1p2[] = { 27, 30, 32 }, d4[] = { 22, 23, 24, 25 };

		run_link(&cfg, 64, d3, 3, g, &st, lost_x, &nlost);
		assert_int_equal(nlost, 3);
		assert_int_equal(g->n, 3);
		assert_int_equal(st.recovered[2], 3); /* a decode with 3 parities */
		run_link(&cfg, 64, d2p1, 3, g, &st, lost_x, &nlost);
		assert_int_equal(g->n, 2);
		run_link(&cfg, 64, d1p2, 3, g, &st, lost_x, &nlost);
		assert_int_equal(g->n, 1);
		assert_int_equal(g->x[0], 21);
		run_link(&cfg, 64, d4, 4, g, &st, lost_x, &nlost);
		assert_int_equal(nlost, 4);
		assert_int_equal(g->n, 0);
		assert_int_equal(g->bad, 0);
	}
	free(g);
}

/* Age limits: with traffic stopped, kept packets and repairs leave once
 * they are older than the limit (packets only once settled). */
static void test_age_eviction(void **state)
{
	static const uint64_t a[] = { 100, 101, 102 };
	struct il_fec_cfg cfg;
	struct got *g = malloc(sizeof(*g));
	struct il_fec_dec *d;
	char err[256];

	(void)state;
	il_fec_cfg_defaults(&cfg);
	cfg.dec_max_age_ns = 1000000; /* 1 ms */
	memset(g, 0, sizeof(*g));
	g->min_len = MINL;
	g->max_len = MAXL;
	d = il_fec_dec_create(&cfg, got_deliver, g, err, sizeof(err));
	for (uint64_t x = 0; x < 50; x++)
		give_data(d, x, MINL, MAXL, x * 1000);
	/* Nothing says which packet numbers these are: they stay until
	 * four times the limit. */
	il_fec_dec_tick(d, 3000000);
	assert_int_equal(il_fec_dec_stats(d)->pkt_evict_age, 0);
	il_fec_dec_tick(d, 5000000);
	assert_int_equal(il_fec_dec_stats(d)->pkt_evict_age, 50);
	assert_int_equal(il_fec_dec_stats(d)->pkts_live, 0);
	/* A stored repair (two missing) ages out by itself. */
	{
		uint8_t m[4096];
		uint32_t len = hand_repair(m, &cfg, 0, 1, a, 3, 100, 0, 0, MINL, MAXL);

		assert_int_equal(il_fec_dec_repair(d, m, len, 6000000), IL_FEC_OK);
	}
	assert_int_equal(il_fec_dec_stats(d)->repairs_live, 1);
	il_fec_dec_tick(d, 7100000);
	assert_int_equal(il_fec_dec_stats(d)->repair_evict_age, 1);
	assert_int_equal(il_fec_dec_stats(d)->repairs_live, 0);
	il_fec_dec_free(d);
	free(g);
}

/* Count limits, the horizon, epochs and lost-repair counting. */
static void test_bounds_and_epochs(void **state)
{
	static const uint64_t a[] = { 0, 1, 2 }, b[] = { 600, 601, 602, 603 };
	struct il_fec_cfg cfg;
	struct got *g = malloc(sizeof(*g));
	struct il_fec_dec *d;
	uint8_t m[4096];
	uint32_t len;
	char err[256];

	(void)state;
	il_fec_cfg_defaults(&cfg);
	cfg.dec_max_pkts = 200;
	memset(g, 0, sizeof(*g));
	g->min_len = MINL;
	g->max_len = MAXL;
	d = il_fec_dec_create(&cfg, got_deliver, g, err, sizeof(err));
	assert_non_null(d);
	for (uint64_t x = 0; x < 3; x++)
		give_data(d, x, MINL, MAXL, 1);
	len = hand_repair(m, &cfg, 0, 1, a, 3, 0, 0, 0, MINL, MAXL);
	assert_int_equal(il_fec_dec_repair(d, m, len, 2), IL_FEC_OK); /* learns x = 0..2 */
	for (uint64_t x = 3; x < 600; x++)
		give_data(d, x, MINL, MAXL, 3);
	assert_int_equal(il_fec_dec_stats(d)->pkts_hwm, 200);
	assert_int_equal(il_fec_dec_stats(d)->pkt_evict_count, 400);
	/* Packets 0..2 were evicted: a repair naming them now cannot tell
	 * lost from forgotten, and must not deliver them again. */
	len = hand_repair(m, &cfg, 0, 1, a, 3, 0, 5, 0, MINL, MAXL);
	assert_int_equal(il_fec_dec_repair(d, m, len, 4), IL_FEC_OK);
	assert_int_equal(il_fec_dec_stats(d)->repairs_expired, 1);
	assert_int_equal(g->n, 0);
	/* Sequence numbers 1..4 never arrived. */
	assert_int_equal(il_fec_dec_stats(d)->repairs_lost, 4);
	/* A new encoder epoch resets packet numbers. */
	give_data(d, 600, MINL, MAXL, 5);
	give_data(d, 601, MINL, MAXL, 5);
	give_data(d, 602, MINL, MAXL, 5);
	len = hand_repair(m, &cfg, 0, 1, b, 4, 0, 0, 7, MINL, MAXL);
	assert_int_equal(il_fec_dec_repair(d, m, len, 6), IL_FEC_OK);
	assert_int_equal(il_fec_dec_stats(d)->epoch_changes, 1);
	assert_int_equal(g->n, 1);
	assert_int_equal(g->x[0], 603);
	assert_int_equal(g->bad, 0);
	il_fec_dec_free(d);
	free(g);
}

/* Reset (il_fec_enc_reset, il_fec_dec_reset): the same encoder and decoder
 * behave as new ones. The same lossy run twice on one pair, a reset
 * between, gives the same recoveries and counters; without the reset the
 * second run meets packets the decoder still holds and differs. */
static void run_on(struct il_fec_enc *e, struct link *l, uint64_t n)
{
	uint8_t pkt[2048] __attribute__((aligned(64)));

	l->pos = 0;
	for (uint64_t x = 0; x < n; x++) {
		uint32_t len = sim_pkt_len(x, MINL, MAXL);
		struct il_fec_id id;

		sim_pkt_build(pkt, x, len);
		assert_int_equal(il_fec_id_ipv4(pkt, len, &id), 0);
		if (!link_lost(l))
			il_fec_dec_data(l->dec, &id, pkt, len, l->pos * 1000);
		il_fec_enc_add(e, &id, pkt, len);
	}
	il_fec_enc_flush(e, true);
}

static void test_reset_is_a_new_codec(void **state)
{
	static const uint64_t drop[] = {3, 17, 18, 40, 41, 42, 77};
	struct il_fec_dec_stats first;
	struct got *g = malloc(sizeof(*g));
	struct il_fec_cfg cfg;
	char err[256];

	(void)state;
	for (unsigned code = IL_FEC_CODE_XOR; code <= IL_FEC_CODE_RS; code++) {
		struct link l = { .drop = drop, .ndrop = 7 };

		il_fec_cfg_defaults(&cfg);
		cfg.code = (uint8_t)code;
		cfg.r = 4;
		cfg.c = 2;
		cfg.interleave[1] = 3;
		memset(g, 0, sizeof(*g));
		g->min_len = MINL;
		g->max_len = MAXL;
		l.dec = il_fec_dec_create(&cfg, got_deliver, g, err, sizeof(err));
		struct il_fec_enc *e = il_fec_enc_create(&cfg, link_emit, &l, err, sizeof(err));
		assert_non_null(l.dec);
		assert_non_null(e);
		run_on(e, &l, 100);
		assert_true(g->n > 0);
		assert_int_equal(g->bad, 0);
		unsigned n1 = g->n;
		uint64_t x1[16];
		memcpy(x1, g->x, sizeof(x1));
		first = *il_fec_dec_stats(l.dec);
		const struct il_fec_enc_stats es = *il_fec_enc_stats(e);

		il_fec_enc_reset(e);
		il_fec_dec_reset(l.dec);
		assert_int_equal(il_fec_enc_stats(e)->packets, 0);
		assert_int_equal(il_fec_dec_stats(l.dec)->data_in, 0);
		g->n = 0;
		l.repairs = 0;
		run_on(e, &l, 100);
		assert_int_equal(g->n, n1);
		assert_memory_equal(g->x, x1, sizeof(x1[0]) * (n1 < 16 ? n1 : 16));
		assert_int_equal(g->bad, 0);
		assert_memory_equal(il_fec_dec_stats(l.dec), &first, sizeof(first));
		assert_memory_equal(il_fec_enc_stats(e), &es, sizeof(es));
		/* Without a reset the decoder still holds the packets. */
		run_on(e, &l, 100);
		assert_true(il_fec_dec_stats(l.dec)->dup_originals > 0);
		il_fec_enc_free(e);
		il_fec_dec_free(l.dec);
	}
	free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_single_loss),
		cmocka_unit_test(test_cascade),
		cmocka_unit_test(test_two_repair),
		cmocka_unit_test(test_late_and_duplicate),
		cmocka_unit_test(test_every_single_loss_by_reference),
		cmocka_unit_test(test_ip_id_reuse),
		cmocka_unit_test(test_ip_id_reuse_without_checks),
		cmocka_unit_test(test_verify_fail),
		cmocka_unit_test(test_bad_repairs),
		cmocka_unit_test(test_rs_block),
		cmocka_unit_test(test_age_eviction),
		cmocka_unit_test(test_bounds_and_epochs),
		cmocka_unit_test(test_reset_is_a_new_codec),
	};

	return cmocka_run_group_tests_name("fec_dec", tests, NULL, NULL);
}
