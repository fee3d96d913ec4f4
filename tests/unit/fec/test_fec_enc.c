/* SPDX-License-Identifier: BSD-3-Clause
 *
 * FEC unit tests, part 1: configuration, packet identity, XOR kernels,
 * the encoder (bin placement, staggering, delayed XORs) and the repair
 * wire format.
 */
#include <stdio.h>

#include "fec_test.h"
#include "../../../dataplane/fec/fec_internal.h"

static struct il_fec_cfg cfg_of(unsigned r, unsigned c, const unsigned *iv)
{
	struct il_fec_cfg cfg;

	il_fec_cfg_defaults(&cfg);
	cfg.r = (uint8_t)r;
	cfg.c = (uint8_t)c;
	memset(cfg.interleave, 0, sizeof(cfg.interleave));
	for (unsigned l = 0; l < c; l++)
		cfg.interleave[l] = (uint16_t)iv[l];
	return cfg;
}

/* ---- configuration ---------------------------------------------------- */

static void expect_error(const struct il_fec_cfg *cfg, const char *key)
{
	char err[512], warn[512];

	assert_int_equal(il_fec_cfg_check(cfg, err, sizeof(err), warn, sizeof(warn)), -1);
	if (!strstr(err, key))
		fail_msg("error \"%s\" does not name %s", err, key);
	assert_null(il_fec_enc_create(cfg, cap_emit, NULL, err, sizeof(err)));
	assert_null(il_fec_dec_create(cfg, got_deliver, NULL, err, sizeof(err)));
}

static void test_cfg_refused(void **state)
{
	struct il_fec_cfg cfg;
	char err[512];

	(void)state;
	il_fec_cfg_defaults(&cfg);
	assert_int_equal(il_fec_cfg_check(&cfg, err, sizeof(err), NULL, 0), 0);

	cfg.r = 1;
	expect_error(&cfg, "fec.r = 1");
	cfg.r = 0;
	expect_error(&cfg, "fec.r = 0");
	cfg.r = IL_FEC_MAX_R + 1;
	expect_error(&cfg, "fec.r");
	il_fec_cfg_defaults(&cfg);
	cfg.c = 0;
	expect_error(&cfg, "fec.c = 0");
	cfg.c = IL_FEC_MAX_C + 1;
	expect_error(&cfg, "fec.c");
	il_fec_cfg_defaults(&cfg);
	cfg.interleave[1] = 0;
	expect_error(&cfg, "fec.interleaves[1] = 0");
	il_fec_cfg_defaults(&cfg);
	cfg.code = 7;
	expect_error(&cfg, "fec.code");
	il_fec_cfg_defaults(&cfg);
	cfg.lan_mtu = 60;
	expect_error(&cfg, "fec.lan_mtu");
	il_fec_cfg_defaults(&cfg);
	cfg.xor_impl = 9;
	expect_error(&cfg, "fec.xor_impl");
	il_fec_cfg_defaults(&cfg);
	cfg.verify_l3_off = 14; /* beyond span_extra = 0 */
	expect_error(&cfg, "fec.verify_l3_off");
	il_fec_cfg_defaults(&cfg);
	cfg.dec_max_pkts = 100; /* below (8-1)*19 + 1 = 134 */
	expect_error(&cfg, "fec.dec_max_pkts");
	il_fec_cfg_defaults(&cfg);
	cfg.dec_max_repairs = 0;
	expect_error(&cfg, "fec.dec_max_repairs");
	il_fec_cfg_defaults(&cfg);
	cfg.code = IL_FEC_CODE_RS;
	cfg.interleave[0] = 0;
	expect_error(&cfg, "fec.interleaves[0]");
}

static void test_cfg_mtu(void **state)
{
	struct il_fec_cfg cfg;
	char err[512];
	/* IPv4+UDP 28, Interlink 40, FEC body 24, recipe 8 x 16, XOR 1500 */
	const unsigned need = 28 + 40 + 24 + 8 * 16 + 1500;

	(void)state;
	il_fec_cfg_defaults(&cfg);
	cfg.link_mtu = 1500;
	expect_error(&cfg, "fec.link_mtu = 1500 is too small");
	assert_int_equal(il_fec_cfg_check(&cfg, err, sizeof(err), NULL, 0), -1);
	assert_non_null(strstr(err, "1720"));
	cfg.link_mtu = need - 1;
	expect_error(&cfg, "fec.link_mtu");
	cfg.link_mtu = need;
	assert_int_equal(il_fec_cfg_check(&cfg, err, sizeof(err), NULL, 0), 0);
	assert_int_equal(IL_FEC_IP_UDP_LEN + il_fec_repair_max_len(&cfg), need);
	/* Spans that carry the Ethernet header need 14 more. */
	cfg.span_extra = 14;
	cfg.verify_l3_off = 14;
	expect_error(&cfg, "fec.link_mtu");
	cfg.link_mtu = need + 14;
	assert_int_equal(il_fec_cfg_check(&cfg, err, sizeof(err), NULL, 0), 0);
}

static void expect_warn(unsigned r, unsigned c, const unsigned *iv, bool warns)
{
	struct il_fec_cfg cfg = cfg_of(r, c, iv);
	char err[512], warn[1024];
	struct il_fec_enc *e;

	cfg.dec_max_pkts = 65536;
	assert_int_equal(il_fec_cfg_check(&cfg, err, sizeof(err), warn, sizeof(warn)), 0);
	if (warns != (warn[0] != '\0'))
		fail_msg("(%u,%u) I=(%u,%u,%u): warning \"%s\" expected %d", r, c, iv[0],
			 c > 1 ? iv[1] : 0, c > 2 ? iv[2] : 0, warn, warns);
	/* A warning never stops the codec. */
	e = il_fec_enc_create(&cfg, cap_emit, NULL, err, sizeof(err));
	assert_non_null(e);
	il_fec_enc_free(e);
}

static void test_cfg_interleave_rule(void **state)
{
	static const unsigned i1_11_19[] = { 1, 11, 19 }, i1_19_41[] = { 1, 19, 41 },
			      i1_10_20[] = { 1, 10, 20 }, i1_20_40[] = { 1, 20, 40 },
			      i1_10[] = { 1, 10 }, i1_40[] = { 1, 40 }, i1_5[] = { 1, 5 },
			      i7_7[] = { 7, 7 };
	struct il_fec_cfg cfg = cfg_of(8, 3, i1_20_40);
	char err[256], warn[1024];

	(void)state;
	expect_warn(8, 3, i1_11_19, false);
	expect_warn(8, 3, i1_19_41, false);
	expect_warn(7, 2, i1_10, false);
	expect_warn(8, 2, i1_40, false);
	/* The paper's own sets break its rule of thumb. */
	expect_warn(8, 3, i1_10_20, true);
	expect_warn(8, 3, i1_20_40, true);
	/* Largest interleave not above r: layer-1 and layer-5 repairs share. */
	expect_warn(8, 2, i1_5, true);
	expect_warn(8, 2, i7_7, true);
	assert_int_equal(il_fec_cfg_check(&cfg, err, sizeof(err), warn, sizeof(warn)), 0);
	assert_non_null(strstr(warn, "layers 1 (i=20) and 2 (i=40)"));
	assert_non_null(strstr(warn, "share up to 4 packets"));
}

/* ---- identity and XOR ------------------------------------------------- */

static void test_payload_check(void **state)
{
	uint8_t a[1600], b[1600];
	uint32_t base;

	(void)state;
	for (unsigned i = 0; i < sizeof(a); i++)
		a[i] = (uint8_t)(i * 131 + 7);
	base = il_fec_payload_check(a, 1480);
	assert_int_equal(base, il_fec_payload_check(a, 1480));
	assert_int_not_equal(base, il_fec_payload_check(a, 1479));
	for (unsigned pos = 0; pos < 1480; pos += 37) {
		memcpy(b, a, sizeof(a));
		b[pos] ^= 0x10;
		assert_int_not_equal(base, il_fec_payload_check(b, 1480));
	}
	/* Swapped words change it (a plain sum would not notice). */
	memcpy(b, a, sizeof(a));
	memcpy(b + 64, a + 128, 4);
	memcpy(b + 128, a + 64, 4);
	assert_int_not_equal(base, il_fec_payload_check(b, 1480));
	/* Short payloads, no payload. */
	assert_int_not_equal(il_fec_payload_check(a, 1), il_fec_payload_check(a, 2));
	(void)il_fec_payload_check(a, 0);
}

static void test_id_ipv4(void **state)
{
	uint8_t p[256];
	struct il_fec_id id, id2;

	(void)state;
	sim_pkt_build(p, 77, 100);
	assert_int_equal(il_fec_id_ipv4(p, 100, &id), 0);
	assert_memory_equal(&id.src, p + 12, 4);
	assert_memory_equal(&id.dst, p + 16, 4);
	assert_memory_equal(&id.ip_id, p + 4, 2);
	assert_int_equal(ntohs(id.ip_len), 100);
	assert_int_equal(ntohl(id.csum), il_fec_payload_check(p + 20, 80));
	/* Extra bytes after the packet (Ethernet padding) do not count. */
	assert_int_equal(il_fec_id_ipv4(p, 160, &id2), 0);
	assert_true(il_fec_id_eq(&id, &id2));
	/* Same IP id and length, other payload: another packet. */
	sim_pkt_build(p, 77 + 65536, 100);
	assert_int_equal(il_fec_id_ipv4(p, 100, &id2), 0);
	assert_int_equal(id.ip_id, id2.ip_id);
	assert_false(il_fec_id_eq(&id, &id2));
	/* Not IPv4, truncated, bad header length. */
	assert_int_equal(il_fec_id_ipv4(p, 99, &id), -1);
	assert_int_equal(il_fec_id_ipv4(p, 19, &id), -1);
	p[0] = 0x65;
	assert_int_equal(il_fec_id_ipv4(p, 100, &id), -1);
	p[0] = 0x44;
	assert_int_equal(il_fec_id_ipv4(p, 100, &id), -1);
}

static void test_xor_isal_vs_ref(void **state)
{
	uint8_t *src[8], *d1, *d2, *un;
	struct il_rng rng;
	const void *s[8];

	(void)state;
	il_rng_seed(&rng, 5);
	for (unsigned k = 0; k < 8; k++) {
		src[k] = aligned_alloc(64, 2304);
		for (unsigned i = 0; i < 2304; i++)
			src[k][i] = (uint8_t)il_rng_next(&rng);
		s[k] = src[k];
	}
	d1 = aligned_alloc(64, 2304);
	d2 = aligned_alloc(64, 2304);
	un = aligned_alloc(64, 2432);
	for (uint32_t len = 1; len <= 2200; len += (len < 80 ? 1 : 37)) {
		for (unsigned n = 1; n <= 8; n++) {
			for (unsigned i = 0; i < 2304; i++)
				d1[i] = d2[i] = (uint8_t)(i * 13);
			assert_true(il_fec_xor_acc(IL_FEC_XOR_ISAL, d1, s, n, len));
			assert_false(il_fec_xor_acc(IL_FEC_XOR_REF, d2, s, n, len));
			/* Bytes past len are untouched too. */
			assert_memory_equal(d1, d2, 2304);
		}
		/* The destination doubling as first source (how the encoder
		 * calls xor_gen). */
		memcpy(d1, src[0], 2304);
		memcpy(d2, src[0], 2304);
		assert_true(fec_xor1(IL_FEC_XOR_ISAL, d1, src[1], len));
		il_xor(d2, src[1], len);
		assert_memory_equal(d1, d2, 2304);
		/* Unaligned source: plain C fallback, same result. */
		memcpy(un + 14, src[1], len);
		memcpy(d1, src[0], 2304);
		assert_false(fec_xor1(IL_FEC_XOR_ISAL, d1, un + 14, len));
		assert_memory_equal(d1, d2, 2304);
	}
	for (unsigned k = 0; k < 8; k++)
		free(src[k]);
	free(d1);
	free(d2);
	free(un);
}

/* ---- encoder ---------------------------------------------------------- */

/* Feed n synthetic packets of 64 bytes (content from x). */
static void feed(struct il_fec_enc *e, struct cap *c, uint64_t from, uint64_t n)
{
	uint8_t pkt[64] __attribute__((aligned(64)));

	for (uint64_t x = from; x < from + n; x++) {
		struct il_fec_id id;

		synth_id(x, &id);
		memset(pkt, (int)(x & 0xff), sizeof(pkt));
		memcpy(pkt, &x, 8);
		c->added = x + 1;
		assert_int_equal(il_fec_enc_add(e, &id, pkt, sizeof(pkt)), 0);
	}
}

static void check_placement(bool stagger)
{
	static const unsigned iv[] = { 1, 11, 19 };
	struct il_fec_cfg cfg = cfg_of(8, 3, iv);
	struct il_fec_enc *e;
	char err[256];
	struct cap c;

	cfg.stagger = stagger;
	cap_init(&c, 4000);
	e = il_fec_enc_create(&cfg, cap_emit, &c, err, sizeof(err));
	assert_non_null(e);
	feed(e, &c, 0, 8000);
	for (unsigned n = 0; n < c.n; n++) {
		const struct cap_repair *r = &c.r[n];
		unsigned l = r->info.layer, i = iv[l], cnt = rep_count(r);
		struct il_fec_id id;
		uint64_t x0;

		assert_int_equal(r->info.interleave, i);
		rep_id(r, 0, &id);
		x0 = synth_x(&id);
		assert_int_equal(x0, r->info.x_first);
		for (unsigned k = 0; k < cnt; k++) {
			rep_id(r, k, &id);
			/* Packet x sits in bin x mod i: members of a repair
			 * are i apart, consecutive in their residue class. */
			assert_int_equal(synth_x(&id), x0 + (uint64_t)k * i);
			assert_int_equal(synth_x(&id) % i, x0 % i);
		}
		/* Immediate mode: the repair leaves right after its last
		 * packet. */
		assert_int_equal(r->at, x0 + (uint64_t)(cnt - 1) * i + 1);
		if (!stagger || x0 >= (uint64_t)8 * i)
			assert_int_equal(cnt, 8);
	}
	il_fec_enc_free(e);
	cap_fini(&c);
}

static void test_bin_placement(void **state)
{
	(void)state;
	check_placement(true);
	check_placement(false);
}

/* Every packet is in exactly c repairs, one per layer (after a partial
 * flush closes the open bins); RS: in the c parities of its block. */
static void check_c_repairs(unsigned code, bool delay)
{
	static const unsigned iv[] = { 1, 11, 19, 5 };
	const uint64_t N = 3000;
	struct il_fec_cfg cfg = cfg_of(8, code == IL_FEC_CODE_RS ? 3 : 4, iv);
	uint8_t *seen = calloc(N, IL_FEC_MAX_C);
	struct il_fec_enc *e;
	char err[256];
	struct cap c;

	cfg.code = (uint8_t)code;
	cfg.delay_xor = delay;
	cfg.dec_max_pkts = 65536;
	if (code == IL_FEC_CODE_RS)
		cfg.interleave[0] = 4;
	cap_init(&c, 4000);
	e = il_fec_enc_create(&cfg, cap_emit, &c, err, sizeof(err));
	assert_non_null(e);
	feed(e, &c, 0, N);
	il_fec_enc_flush(e, true);
	for (unsigned n = 0; n < c.n; n++) {
		for (unsigned k = 0; k < rep_count(&c.r[n]); k++) {
			struct il_fec_id id;

			rep_id(&c.r[n], k, &id);
			assert_true(synth_x(&id) < N);
			seen[synth_x(&id) * IL_FEC_MAX_C + c.r[n].info.layer]++;
		}
	}
	for (uint64_t x = 0; x < N; x++)
		for (unsigned l = 0; l < cfg.c; l++)
			assert_int_equal(seen[x * IL_FEC_MAX_C + l], 1);
	free(seen);
	il_fec_enc_free(e);
	cap_fini(&c);
}

static void test_each_packet_in_c_repairs(void **state)
{
	(void)state;
	check_c_repairs(IL_FEC_CODE_XOR, false);
	check_c_repairs(IL_FEC_CODE_XOR, true);
	check_c_repairs(IL_FEC_CODE_RS, false);
}

/* First firing sizes: the paper's rule, bins numbered from 1. */
static void check_first_sizes(unsigned r, unsigned i, const unsigned *expect)
{
	unsigned iv[1] = { i }, first[64] = { 0 };
	struct il_fec_cfg cfg = cfg_of(r, 1, iv);
	struct il_fec_enc *e;
	char err[256];
	struct cap c;

	cfg.dec_max_pkts = 65536;
	cap_init(&c, 2000);
	e = il_fec_enc_create(&cfg, cap_emit, &c, err, sizeof(err));
	assert_non_null(e);
	feed(e, &c, 0, (uint64_t)r * i + 1);
	for (unsigned n = 0; n < c.n; n++) {
		unsigned b = (unsigned)(c.r[n].info.x_first % i);

		if (!first[b])
			first[b] = rep_count(&c.r[n]);
	}
	for (unsigned b = 0; b < i; b++) {
		if (first[b] != expect[b])
			fail_msg("r=%u i=%u bin %u: first firing at %u, expected %u", r, i,
				 b + 1, first[b], expect[b]);
		assert_int_equal(fec_first_target(b, i, r), expect[b]);
	}
	il_fec_enc_free(e);
	cap_fini(&c);
}

static void test_stagger_first_sizes(void **state)
{
	/* i >= r: bin k fires first at k mod r (0 -> r). */
	static const unsigned r8_i11[] = { 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3 };
	static const unsigned r8_i8[] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	static const unsigned r5_i5[] = { 1, 2, 3, 4, 5 };
	/* i < r: bin k fires first at k*r/i, rounded. */
	static const unsigned r4_i2[] = { 2, 4 };        /* the paper's example */
	static const unsigned r8_i3[] = { 3, 5, 8 };     /* 2.67, 5.33, 8 */
	static const unsigned r5_i4[] = { 1, 3, 4, 5 };  /* 1.25, 2.5, 3.75, 5 */
	static const unsigned r8_i1[] = { 8 };

	(void)state;
	check_first_sizes(8, 11, r8_i11);
	check_first_sizes(8, 8, r8_i8);
	check_first_sizes(5, 5, r5_i5);
	check_first_sizes(4, 2, r4_i2);
	check_first_sizes(8, 3, r8_i3);
	check_first_sizes(5, 4, r5_i4);
	check_first_sizes(8, 1, r8_i1);
}

/* Staggering spreads a layer's repairs to about one per r packets; without
 * it, all bins of a layer fire back to back. */
static void check_spacing(unsigned i, bool stagger, unsigned *max_gap, unsigned *max_run,
			  double *mean_gap)
{
	unsigned iv[1] = { i }, prev_at = 0, run = 0, gaps = 0;
	struct il_fec_cfg cfg = cfg_of(8, 1, iv);
	const uint64_t N = 20000;
	struct il_fec_enc *e;
	uint64_t sum = 0;
	char err[256];
	struct cap c;

	cfg.stagger = stagger;
	cfg.dec_max_pkts = 65536;
	cap_init(&c, 4000);
	e = il_fec_enc_create(&cfg, cap_emit, &c, err, sizeof(err));
	feed(e, &c, 0, N);
	*max_gap = 0;
	*max_run = 0;
	for (unsigned n = 0; n < c.n; n++) {
		unsigned at = (unsigned)c.r[n].at;

		if (at <= 8u * i * 2)
			continue; /* past the first firings */
		if (prev_at) {
			unsigned gap = at - prev_at;

			sum += gap;
			gaps++;
			if (gap > *max_gap)
				*max_gap = gap;
			run = gap <= 1 ? run + 1 : 0;
			if (run > *max_run)
				*max_run = run;
		}
		prev_at = at;
	}
	*mean_gap = (double)sum / gaps;
	il_fec_enc_free(e);
	cap_fini(&c);
}

static void test_stagger_rate(void **state)
{
	static const unsigned is[] = { 11, 19, 41, 16 };
	unsigned gap, run;
	double mean;

	(void)state;
	for (unsigned k = 0; k < 4; k++) {
		check_spacing(is[k], true, &gap, &run, &mean);
		print_message("r=8 i=%u staggered: mean gap %.2f, largest %u, back-to-back runs "
			      "%u\n",
			      is[k], mean, gap, run);
		assert_true(mean > 7.9 && mean < 8.1);
		if (gap > 16)
			fail_msg("i=%u staggered: a gap of %u packets between repairs", is[k], gap);
		assert_true(run <= 1);
		check_spacing(is[k], false, &gap, &run, &mean);
		print_message("r=8 i=%u unstaggered: mean gap %.2f, largest %u, back-to-back "
			      "runs %u\n",
			      is[k], mean, gap, run);
		assert_true(mean > 7.9 && mean < 8.1);
		/* Unstaggered: i repairs in i consecutive packets. */
		assert_true(run >= is[k] - 2);
	}
}

static void test_delay_xor(void **state)
{
	static const unsigned iv[] = { 1, 11, 19 };
	struct il_fec_cfg cfg = cfg_of(8, 3, iv);
	struct il_fec_enc *e;
	unsigned parked = 0;
	char err[256];
	struct cap c;

	(void)state;
	cfg.delay_xor = true;
	cap_init(&c, 2000);
	e = il_fec_enc_create(&cfg, cap_emit, &c, err, sizeof(err));
	feed(e, &c, 0, 2000);
	for (unsigned n = 0; n < c.n; n++) {
		const struct cap_repair *r = &c.r[n];
		uint64_t last = r->info.x_first + (uint64_t)(rep_count(r) - 1) * r->info.interleave;

		/* Sent when its bin takes its next packet, i packets on,
		 * before that packet joins the emptied bin. */
		assert_int_equal(r->at, last + r->info.interleave + 1);
	}
	/* Parked repairs leave on flush, without touching open bins. */
	{
		unsigned before = c.n;

		il_fec_enc_flush(e, false);
		parked = c.n - before;
		assert_true(parked > 0 && parked <= 1 + 11 + 19);
		for (unsigned n = before; n < c.n; n++)
			assert_int_equal(rep_count(&c.r[n]), 8);
		assert_int_equal(il_fec_enc_stats(e)->flushed, parked);
	}
	il_fec_enc_free(e);
	cap_fini(&c);
}

/* ---- wire format ------------------------------------------------------ */

static void test_wire_format(void **state)
{
	struct il_fec_cfg cfg;
	uint8_t pkts[8][1600] __attribute__((aligned(64)));
	uint32_t lens[8];
	struct il_fec_enc *e;
	char err[256];
	struct cap c;

	(void)state;
	il_fec_cfg_defaults(&cfg);
	cfg.c = 1;
	cfg.interleave[0] = 1;
	cfg.link_id = 0x1234;
	cfg.sender_id = 0x0a000001;
	cfg.epoch = 9;
	cap_init(&c, 16);
	e = il_fec_enc_create(&cfg, cap_emit, &c, err, sizeof(err));
	for (unsigned round = 0; round < 2; round++) {
		uint8_t x[1600] = { 0 };
		uint16_t lc = 0, xl = 0;
		const struct cap_repair *r;
		const uint8_t *m, *b;

		for (unsigned k = 0; k < 8; k++) {
			struct il_fec_id id;

			lens[k] = 100 + 173 * k + round;
			sim_pkt_build(pkts[k], 1000 * round + k, lens[k]);
			assert_int_equal(il_fec_id_ipv4(pkts[k], lens[k], &id), 0);
			assert_int_equal(il_fec_enc_add(e, &id, pkts[k], lens[k]), 0);
			il_xor(x, pkts[k], lens[k]);
			lc ^= (uint16_t)lens[k];
			if (lens[k] > xl)
				xl = (uint16_t)lens[k];
		}
		assert_int_equal(c.n, round + 1);
		r = &c.r[round];
		m = r->msg;
		b = m + IL_HDR_LEN;
		assert_int_equal(r->len, IL_FEC_REPAIR_HDR_LEN(8) + xl);
		assert_int_equal(m[IL_OFF_VERSION], IL_VERSION);
		assert_int_equal(m[IL_OFF_TYPE], IL_T_FEC_REPAIR);
		assert_int_equal(m[IL_OFF_HDR_LEN], IL_HDR_LEN);
		assert_int_equal(m[IL_OFF_FLAGS], 0);
		assert_int_equal(il_get16(m + IL_OFF_GROUP_ID), 0x1234);
		assert_int_equal(il_get16(m + IL_OFF_MSG_COUNT), 0);
		assert_int_equal(il_get32(m + IL_OFF_SENDER_ID), 0x0a000001);
		assert_int_equal(il_get32(m + IL_OFF_EPOCH), 9);
		assert_int_equal(il_get64(m + IL_OFF_SENDER_SEQ), round);
		assert_int_equal(b[IL_FEC_OFF_CODE], IL_FEC_CODE_XOR);
		assert_int_equal(b[IL_FEC_OFF_LAYER], 0);
		assert_int_equal(b[IL_FEC_OFF_RATE_R], 8);
		assert_int_equal(b[IL_FEC_OFF_RATE_C], 1);
		assert_int_equal(b[IL_FEC_OFF_COUNT], 8);
		assert_int_equal(b[IL_FEC_OFF_ID_LEN], IL_FEC_ID_LEN);
		assert_int_equal(il_get16(b + IL_FEC_OFF_INTERLEAVE), 1);
		assert_int_equal(il_get16(b + IL_FEC_OFF_XOR_LEN), xl);
		assert_int_equal(il_get16(b + IL_FEC_OFF_LEN_CODE), lc);
		assert_int_equal(il_get32(b + IL_FEC_OFF_RESERVED), 0);
		assert_int_equal(il_get64(b + IL_FEC_OFF_X_FIRST), 8 * round);
		for (unsigned k = 0; k < 8; k++) {
			const uint8_t *idw = b + IL_FEC_BODY_LEN + k * IL_FEC_ID_LEN;

			/* Tuple fields verbatim from the IPv4 header. */
			assert_memory_equal(idw + 0, pkts[k] + 12, 4);
			assert_memory_equal(idw + 4, pkts[k] + 16, 4);
			assert_memory_equal(idw + 8, pkts[k] + 4, 2);
			assert_memory_equal(idw + 10, pkts[k] + 2, 2);
			assert_int_equal(il_get32(idw + 12),
					 il_fec_payload_check(pkts[k] + 20, lens[k] - 20));
		}
		/* Payload: XOR of the packets, each padded with zeros. */
		assert_memory_equal(b + IL_FEC_BODY_LEN + 8 * IL_FEC_ID_LEN, x, xl);
	}
	il_fec_enc_free(e);
	cap_fini(&c);
}

/* Repairs never exceed the link MTU, whatever the packet sizes. */
static void test_repairs_fit_link(void **state)
{
	struct sim_cfg sc;
	struct sim_res res;

	(void)state;
	sim_cfg_defaults(&sc);
	sc.fec.link_mtu = (uint16_t)(IL_FEC_IP_UDP_LEN + il_fec_repair_max_len(&sc.fec));
	sc.min_len = 28;
	sc.max_len = 1500;
	sc.npkts = 20000;
	assert_int_equal(sim_run(&sc, &res), 0);
	assert_true(res.max_repair_len + IL_FEC_IP_UDP_LEN <= sc.fec.link_mtu);
	assert_true(res.max_repair_len > 1500);
}

static void test_enc_refuses(void **state)
{
	struct il_fec_cfg cfg;
	uint8_t buf[1600] __attribute__((aligned(64))) = { 0 };
	struct il_fec_id id;
	struct il_fec_enc *e;
	char err[256];
	struct cap c;

	(void)state;
	il_fec_cfg_defaults(&cfg);
	cap_init(&c, 64);
	e = il_fec_enc_create(&cfg, cap_emit, &c, err, sizeof(err));
	synth_id(1, &id);
	assert_int_equal(il_fec_enc_add(e, &id, buf, 0), -1);
	assert_int_equal(il_fec_enc_add(e, &id, buf, 1501), -1);
	assert_int_equal(il_fec_enc_stats(e)->empty, 1);
	assert_int_equal(il_fec_enc_stats(e)->too_long, 1);
	assert_int_equal(il_fec_enc_stats(e)->packets, 0);
	assert_int_equal(il_fec_enc_add(e, &id, buf, 1500), 0);
	/* The one-pass ISA-L path takes any alignment. */
	assert_int_equal(il_fec_enc_add(e, &id, buf + 14, 100), 0);
	assert_int_equal(il_fec_enc_stats(e)->unaligned, 0);
	il_fec_enc_free(e);
	/* xor_gen does not: a span off the 32-byte grid takes the plain C
	 * path, counted. */
	cfg.xor_impl = IL_FEC_XOR_ISAL_XORGEN;
	e = il_fec_enc_create(&cfg, cap_emit, &c, err, sizeof(err));
	assert_int_equal(il_fec_enc_add(e, &id, buf + 14, 100), 0);
	assert_int_equal(il_fec_enc_add(e, &id, buf, 100), 0);
	assert_int_equal(il_fec_enc_stats(e)->unaligned, 1);
	il_fec_enc_free(e);
	cap_fini(&c);
}

/* The four XOR implementations (and RS's SIMD and base code) write the
 * same repairs byte for byte, whatever the packet lengths and alignment;
 * so do ids whose payload check the encoder computes itself
 * (il_fec_enc_add_checked: AVX2 sums it in its XOR pass, the others
 * call il_fec_payload_check). */
static void test_impls_agree(void **state)
{
	static const struct {
		unsigned impl;
		bool checked;
	} v[] = { { IL_FEC_XOR_ISAL, false }, { IL_FEC_XOR_REF, false },
		  { IL_FEC_XOR_ISAL_XORGEN, false }, { IL_FEC_XOR_AVX2, false },
		  { IL_FEC_XOR_AVX2, true }, { IL_FEC_XOR_REF, true },
		  { IL_FEC_XOR_ISAL, true } };
	enum { NV = sizeof(v) / sizeof(v[0]) };
	uint8_t *buf = aligned_alloc(64, 2048 + 64);
	struct cap c[NV];

	(void)state;
	for (unsigned code = IL_FEC_CODE_XOR; code <= IL_FEC_CODE_RS; code++) {
		for (unsigned k = 0; k < NV; k++) {
			struct il_fec_cfg cfg;
			struct il_fec_enc *e;
			char err[256];

			il_fec_cfg_defaults(&cfg);
			cfg.code = (uint8_t)code;
			cfg.xor_impl = (uint8_t)v[k].impl;
			cap_init(&c[k], 2000);
			e = il_fec_enc_create(&cfg, cap_emit, &c[k], err, sizeof(err));
			assert_non_null(e);
			for (uint64_t x = 0; x < 3000; x++) {
				uint32_t len = sim_pkt_len(x, 28, 1500);
				uint32_t off = (x % 3) * 14; /* 0, 14, 28 */
				struct il_fec_id id;

				sim_pkt_build(buf + off, x, len);
				if (v[k].checked) {
					assert_int_equal(il_fec_id_ipv4_tuple(buf + off, len, &id), 0);
					id.csum = 0xdeadbeef; /* overwritten */
					assert_int_equal(il_fec_enc_add_checked(
								 e, &id, buf + off, len,
								 (uint32_t)(buf[off] & 0x0f) * 4),
							 0);
				} else {
					il_fec_id_ipv4(buf + off, len, &id);
					assert_int_equal(il_fec_enc_add(e, &id, buf + off, len), 0);
				}
			}
			il_fec_enc_flush(e, true);
			il_fec_enc_free(e);
		}
		for (unsigned k = 1; k < NV; k++) {
			assert_int_equal(c[k].n, c[0].n);
			for (unsigned n = 0; n < c[0].n; n++) {
				assert_int_equal(c[k].r[n].len, c[0].r[n].len);
				assert_memory_equal(c[k].r[n].msg, c[0].r[n].msg, c[0].r[n].len);
			}
		}
		for (unsigned k = 0; k < NV; k++)
			cap_fini(&c[k]);
	}
	free(buf);
}

/* The AVX2 kernels against plain C: bins XORed (bytes past len and
 * before each bin untouched) and the payload check summed in the same
 * pass, for 0 to 3 bins, every length up to 80 then every 37th, offsets
 * of the check from 0 to len, source and bins off the 32-byte grid. */
static void test_xor_multi_check(void **state)
{
	struct il_rng rng;
	uint8_t *src = aligned_alloc(64, 2432), *d[3], *r[3];
	static const uint32_t offs[] = { 0, 1, 14, 20, 34, 54, 97 };

	(void)state;
	il_rng_seed(&rng, 9);
	for (unsigned i = 0; i < 2432; i++)
		src[i] = (uint8_t)il_rng_next(&rng);
	for (unsigned k = 0; k < 3; k++) {
		d[k] = aligned_alloc(64, 2432);
		r[k] = aligned_alloc(64, 2432);
	}
	for (uint32_t len = 0; len <= 2200; len += (len < 80 ? 1 : 37)) {
		for (unsigned o = 0; o < sizeof(offs) / sizeof(offs[0]); o++) {
			uint32_t off = offs[o] > len ? len : offs[o];
			const uint8_t *s = src + 3 + o; /* off the grid */

			for (unsigned n = 0; n <= 3; n++) {
				uint8_t *dst[3];

				for (unsigned k = 0; k < 3; k++) {
					for (unsigned i = 0; i < 2432; i++)
						d[k][i] = r[k][i] = (uint8_t)(i * 7 + k);
					dst[k] = d[k] + 5 + k;
				}
				assert_int_equal(fec_xor_multi_check(dst, n, s, len, off),
						 il_fec_payload_check(s + off, len - off));
				for (unsigned k = 0; k < n; k++)
					il_xor(r[k] + 5 + k, s, len);
				for (unsigned k = 0; k < 3; k++)
					assert_memory_equal(d[k], r[k], 2432);
				/* the XOR alone */
				for (unsigned k = 0; k < 3; k++)
					for (unsigned i = 0; i < 2432; i++)
						d[k][i] = (uint8_t)(i * 7 + k);
				assert_int_equal(fec_xor_multi(dst, n, s, len), fec_cpu_avx2());
				for (unsigned k = 0; k < 3; k++)
					assert_memory_equal(d[k], r[k], 2432);
			}
		}
	}
	/* fec_xor1 and il_fec_xor_acc with AVX2 */
	for (uint32_t len = 1; len <= 1600; len += 33) {
		const void *ss[2] = { src + 1, src + 700 };

		memcpy(d[0], src + 400, 2000);
		memcpy(r[0], src + 400, 2000);
		assert_int_equal(fec_xor1(IL_FEC_XOR_AVX2, d[0] + 3, src + 5, len), fec_cpu_avx2());
		il_xor(r[0] + 3, src + 5, len);
		assert_memory_equal(d[0], r[0], 2000);
		assert_int_equal(il_fec_xor_acc(IL_FEC_XOR_AVX2, d[0] + 3, ss, 2, len),
				 fec_cpu_avx2());
		il_xor(r[0] + 3, ss[0], len);
		il_xor(r[0] + 3, ss[1], len);
		assert_memory_equal(d[0], r[0], 2000);
	}
	for (unsigned k = 0; k < 3; k++) {
		free(d[k]);
		free(r[k]);
	}
	free(src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cfg_refused),
		cmocka_unit_test(test_cfg_mtu),
		cmocka_unit_test(test_cfg_interleave_rule),
		cmocka_unit_test(test_payload_check),
		cmocka_unit_test(test_id_ipv4),
		cmocka_unit_test(test_xor_isal_vs_ref),
		cmocka_unit_test(test_impls_agree),
		cmocka_unit_test(test_xor_multi_check),
		cmocka_unit_test(test_bin_placement),
		cmocka_unit_test(test_each_packet_in_c_repairs),
		cmocka_unit_test(test_stagger_first_sizes),
		cmocka_unit_test(test_stagger_rate),
		cmocka_unit_test(test_delay_xor),
		cmocka_unit_test(test_wire_format),
		cmocka_unit_test(test_repairs_fit_link),
		cmocka_unit_test(test_enc_refuses),
	};

	return cmocka_run_group_tests_name("fec_enc", tests, NULL, NULL);
}
