/* SPDX-License-Identifier: BSD-3-Clause
 *
 * LEC unit tests, part 1: regions, the bin plan (Algorithm 1), target
 * draws, view changes and configuration errors.
 *
 * The worked example is the paper's Fig. 7 (c_A = 5, c_B = 4, c_C = 3:
 * bin abc takes 1.2 targets from region abc, bin ab takes 0.4 from ab and
 * 0.8 from abc). The figure gives no sizes; these make it exact:
 *   abc 10, ab 2, ac 4, bc 4, a 4, b 4, c 7 neighbours, so |A| = |B| = 20
 *   and |C| = 25: c_C^abc = 3 * 10/25 = 1.2, c_B^abc = 2.0, c_A^abc = 2.5,
 *   c_B^ab = 0.4 < c_A^ab = 0.5.
 */
#include <math.h>

#include "lec_test.h"

#define SELF 1000u
enum { GA = 1, GB = 2, GC = 3 };

/* neighbour ids by region: abc 1..10, ab 11..12, ac 13..16, bc 17..20,
 * a 21..24, b 25..28, c 29..35 */
static const struct {
	uint32_t lo, hi;
	const char *name;
} fig7_regions[] = {
	{ 1, 10, "abc" }, { 11, 12, "ab" }, { 13, 16, "ac" }, { 17, 20, "bc" },
	{ 21, 24, "a" },  { 25, 28, "b" },  { 29, 35, "c" },
};

static bool fig7_in(uint16_t g, uint32_t m)
{
	for (unsigned r = 0; r < 7; r++) {
		if (m < fig7_regions[r].lo || m > fig7_regions[r].hi)
			continue;
		return strchr(fig7_regions[r].name, 'a' + (g - 1)) != NULL;
	}
	return false;
}

static void fig7_views(struct il_lec *l)
{
	for (uint16_t g = GA; g <= GC; g++) {
		uint32_t m[64], n = 0;

		m[n++] = SELF; /* the node is in its own views; LEC leaves it out */
		for (uint32_t id = 1; id <= 35; id++)
			if (fig7_in(g, id))
				m[n++] = id;
		t_group(l, g, g == GA ? 5.0 : g == GB ? 4.0 : 3.0, m, n);
	}
	t_apply(l);
}

static double takes(struct il_lec *l, const char *bin, const char *reg)
{
	uint16_t b[3], r[3];
	uint32_t nb = 0, nr = 0;

	for (const char *p = bin; *p; p++)
		b[nb++] = (uint16_t)(*p - 'a' + 1);
	for (const char *p = reg; *p; p++)
		r[nr++] = (uint16_t)(*p - 'a' + 1);
	return il_lec_takes(l, b, nb, r, nr);
}

static void fig7_cfg(struct il_lec_cfg *cfg)
{
	il_lec_cfg_defaults(cfg);
	cfg->self_id = SELF;
	cfg->decode = false;
	cfg->seed = 42;
}

static void test_fig7_plan(void **state)
{
	struct il_lec_cfg cfg;
	struct t_cap cap;
	struct il_lec *l;
	static const char *const all[] = { "abc", "ab", "ac", "bc", "a", "b", "c" };
	static const double cg[] = { 5.0, 4.0, 3.0 }, gsz[] = { 20, 20, 25 };

	(void)state;
	fig7_cfg(&cfg);
	t_cap_init(&cap, 0, 0);
	l = t_lec(&cfg, &cap);
	fig7_views(l);

	/* seven regions of the right sizes, and seven bins */
	assert_int_equal(il_lec_region_count(l), 7);
	for (uint32_t i = 0; i < 7; i++) {
		struct il_lec_region_info ri;
		uint16_t gb[8];
		char name[4] = { 0 };

		assert_int_equal(il_lec_region_get(l, i, gb, 8, &ri), 0);
		for (uint32_t k = 0; k < ri.ngroups; k++)
			name[k] = (char)('a' + gb[k] - 1);
		for (unsigned r = 0; r < 7; r++)
			if (!strcmp(name, fig7_regions[r].name))
				assert_int_equal(ri.nmembers,
						 fig7_regions[r].hi - fig7_regions[r].lo + 1);
		for (uint32_t k = 0; k < ri.nmembers; k++)
			assert_int_not_equal(ri.members[k], SELF);
	}
	assert_int_equal(il_lec_bin_count(l), 7);

	/* the figure */
	assert_true(fabs(takes(l, "abc", "abc") - 1.2) < 1e-9);
	assert_true(fabs(takes(l, "ab", "ab") - 0.4) < 1e-9);
	assert_true(fabs(takes(l, "ab", "abc") - 0.8) < 1e-9);
	/* the remainders go to less-shared bins */
	assert_true(fabs(takes(l, "a", "abc") - 0.5) < 1e-9);
	assert_true(fabs(takes(l, "a", "ab") - 0.1) < 1e-9);
	assert_true(fabs(takes(l, "ac", "ac") - 0.48) < 1e-9);
	assert_true(fabs(takes(l, "a", "ac") - 0.52) < 1e-9);
	assert_true(fabs(takes(l, "c", "c") - 0.84) < 1e-9);
	/* a bin never sends to a region lacking one of its groups */
	assert_true(takes(l, "ab", "ac") == 0.0);
	assert_true(takes(l, "abc", "ab") == 0.0);

	/* stratified sampling: for every group G and region T inside G, the
	 * bins containing G draw c_G * |T| / |G| from T in all */
	for (unsigned r = 0; r < 7; r++) {
		const char *t = fig7_regions[r].name;
		double size = fig7_regions[r].hi - fig7_regions[r].lo + 1;

		for (unsigned g = 0; g < 3; g++) {
			double sum = 0.0;

			if (!strchr(t, 'a' + (int)g))
				continue;
			for (unsigned b = 0; b < 7; b++)
				if (strchr(all[b], 'a' + (int)g))
					sum += takes(l, all[b], t);
			assert_true(fabs(sum - cg[g] * size / gsz[g]) < 1e-9);
		}
	}
	il_lec_free(l);
	t_cap_free(&cap);
}

/* Per-message counts: copies[g][seq] = targets of repairs holding it. */
struct rate_ctx {
	uint32_t copies[4][20001];
	uint64_t per_member[4][64];
	uint64_t bad_target;
	uint64_t hist[8];
};

static void rate_hook(struct t_cap *c, const struct il_lec_repair *rep, const uint32_t *targets,
		      uint32_t n)
{
	struct rate_ctx *x = c->user;

	for (unsigned k = 0; k < rep->count; k++) {
		const struct il_lec_id *id = &rep->ids[k];

		x->copies[id->group][id->seq] += n;
		for (uint32_t t = 0; t < n; t++) {
			/* a composite repair reaches only members of all its groups */
			if (!fig7_in(id->group, targets[t]))
				x->bad_target++;
			x->per_member[id->group][targets[t]]++;
		}
	}
	x->hist[n < 8 ? n : 7]++;
}

static void test_fig7_measured(void **state)
{
	struct il_lec_cfg cfg;
	struct t_cap cap;
	struct il_lec *l;
	struct rate_ctx *x = calloc(1, sizeof(*x));
	const uint32_t per_group = 20000;
	static const double cg[] = { 0, 5.0, 4.0, 3.0 }, gsz[] = { 0, 20, 20, 25 };
	const struct il_lec_stats *st;

	(void)state;
	assert_non_null(x);
	fig7_cfg(&cfg);
	t_cap_init(&cap, 0, 0);
	cap.on_repair = rate_hook;
	cap.user = x;
	l = t_lec(&cfg, &cap);
	fig7_views(l);
	/* groups interleaved, as a node sees them */
	for (uint32_t s = 1; s <= per_group; s++)
		for (uint16_t g = GA; g <= GC; g++)
			assert_int_equal(t_data(l, g, s, 0), IL_LEC_NEW);
	assert_int_equal(x->bad_target, 0);
	for (uint16_t g = GA; g <= GC; g++) {
		double sum = 0;
		uint32_t counted = per_group - 200; /* the last bins have not fired */

		for (uint32_t s = 1; s <= counted; s++)
			sum += x->copies[g][s];
		/* each message of G reaches c_G members on average */
		printf("# group %c: %.3f repair copies per message (c = %.0f)\n", 'A' + g - 1,
		       sum / counted, cg[g]);
		assert_true(fabs(sum / counted - cg[g]) < 0.03 * cg[g]);
		/* and no member gets more or less than its share */
		for (uint32_t m = 1; m <= 35; m++) {
			double expect = (double)per_group * cg[g] / gsz[g];

			if (!fig7_in(g, m))
				continue;
			assert_true(fabs((double)x->per_member[g][m] - expect) < 0.15 * expect);
		}
	}
	/* section 4.2.5: at most c XORs per message on average */
	st = il_lec_stats(l);
	printf("# XORs per message %.2f (+%.2f copies), repairs %llu, skipped %llu\n",
	       (double)st->xor_ops / (double)st->data_new,
	       (double)st->copy_ops / (double)st->data_new,
	       (unsigned long long)st->repairs_sent, (unsigned long long)st->repairs_skipped);
	assert_true((double)(st->xor_ops + st->copy_ops) / (double)st->data_new <= 4.0);
	il_lec_free(l);
	t_cap_free(&cap);
	free(x);
}

/* A single region with a fractional mean: floor or ceiling, in the mean's
 * proportion (the paper's 1.2: one target, or two with probability 0.2). */
static void draws(double c, uint32_t *hist, uint32_t nrep)
{
	struct il_lec_cfg cfg;
	struct t_cap cap;
	struct il_lec *l;
	uint32_t m[11];

	il_lec_cfg_defaults(&cfg);
	cfg.self_id = 100;
	cfg.decode = false;
	cfg.seed = 7;
	t_cap_init(&cap, nrep, 0);
	l = t_lec(&cfg, &cap);
	for (uint32_t i = 0; i < 10; i++)
		m[i] = i + 1;
	m[10] = 100;
	t_group(l, 1, c, m, 11);
	t_apply(l);
	for (uint64_t s = 1; cap.nrep < nrep; s++)
		t_data(l, 1, s, 0);
	for (uint32_t i = 0; i < nrep; i++) {
		const struct t_repair *r = &cap.rep[i];

		assert_true(r->n < 8);
		hist[r->n]++;
		/* distinct targets, never ourselves */
		for (uint32_t a = 0; a < r->n; a++) {
			assert_int_not_equal(r->targets[a], 100);
			for (uint32_t b = 0; b < a; b++)
				assert_int_not_equal(r->targets[a], r->targets[b]);
		}
	}
	il_lec_free(l);
	t_cap_free(&cap);
}

static void test_fractional_targets(void **state)
{
	const uint32_t nrep = 20000;
	uint32_t h[8] = { 0 };
	double mean = 0;

	(void)state;
	draws(1.2, h, nrep);
	assert_int_equal(h[0] + h[1] + h[2], nrep);
	mean = (h[1] + 2.0 * h[2]) / nrep;
	printf("# c = 1.2: %u repairs to 1 target, %u to 2, mean %.4f\n", h[1], h[2], mean);
	assert_true(fabs(mean - 1.2) < 0.015);

	memset(h, 0, sizeof(h));
	draws(2.5, h, nrep);
	assert_int_equal(h[2] + h[3], nrep);
	mean = (2.0 * h[2] + 3.0 * h[3]) / nrep;
	assert_true(fabs(mean - 2.5) < 0.015);

	/* below one target, rounds without one are never built */
	memset(h, 0, sizeof(h));
	draws(0.3, h, 5000);
	assert_int_equal(h[0], 0);
	assert_int_equal(h[1], 5000);
}

/* A group smaller than c: every repair reaches all of it. */
static void test_c_capped(void **state)
{
	struct il_lec_cfg cfg;
	struct t_cap cap;
	struct il_lec *l;
	uint32_t m[] = { 1, 2, 3, 9 };

	(void)state;
	il_lec_cfg_defaults(&cfg);
	cfg.self_id = 9;
	cfg.decode = false;
	t_cap_init(&cap, 100, 0);
	l = t_lec(&cfg, &cap);
	t_group(l, 4, 5.0, m, 4);
	t_apply(l);
	assert_int_equal(il_lec_stats(l)->c_capped, 1);
	for (uint64_t s = 1; s <= 80; s++)
		t_data(l, 4, s, 0);
	assert_int_equal(cap.nrep, 10);
	for (uint32_t i = 0; i < cap.nrep; i++)
		assert_int_equal(cap.rep[i].n, 3);
	il_lec_free(l);
	t_cap_free(&cap);
}

/* A decode-only group (repairs for it come from elsewhere, e.g. the
 * appliance): its messages enter no bin and cost no XOR, other groups'
 * repairs go on as before, and repairs naming it are decoded. */
static void test_decode_only(void **state)
{
	struct il_lec_cfg cfg;
	struct t_cap cap;
	struct il_lec *l;
	uint32_t a[] = { 1, 2, 3, 4, 5, 6, 9 }, b[] = { 3, 4, 7, 8, 9 };
	struct il_lec_id v[4];
	struct t_repair r;

	(void)state;
	il_lec_cfg_defaults(&cfg);
	cfg.self_id = 9;
	t_cap_init(&cap, 200, 8);
	l = t_lec(&cfg, &cap);
	t_group(l, 1, 3.0, a, 7);
	t_group(l, 2, IL_LEC_DECODE_ONLY, b, 5);
	t_apply(l);
	/* group 1 alone: its members' regions {1} and {1,2}, bins of {1} only */
	assert_int_equal(il_lec_region_count(l), 3);
	for (uint32_t i = 0; i < il_lec_bin_count(l); i++) {
		uint16_t g[4];
		struct il_lec_bin_info bi;

		assert_int_equal(il_lec_bin_get(l, i, g, 4, &bi), 0);
		assert_int_equal(bi.ngroups, 1);
		assert_int_equal(g[0], 1);
	}
	for (uint64_t s = 1; s <= 40; s++)
		assert_int_equal(t_data(l, 2, s, 10), IL_LEC_NEW);
	assert_int_equal(il_lec_stats(l)->bin_adds, 0);
	assert_int_equal(cap.nrep, 0);
	for (uint64_t s = 1; s <= 80; s++)
		t_data(l, 1, s, 10);
	assert_int_equal(cap.nrep, 10); /* c = 3 >= 1 per bin: every round is built */
	for (uint32_t i = 0; i < cap.nrep; i++)
		for (uint32_t k = 0; k < cap.rep[i].n; k++)
			assert_true(cap.rep[i].targets[k] <= 6);
	/* repairs naming group 2 are decoded like any other */
	for (unsigned k = 0; k < 4; k++)
		v[k] = t_id(2, 41 + k);
	t_data(l, 2, 41, 20);
	t_data(l, 2, 42, 20);
	t_data(l, 2, 44, 20);
	t_build(&r, v, 4);
	assert_int_equal(t_repair_in(l, &r, 30), IL_LEC_REP_RECOVERED);
	assert_int_equal(cap.nrec, 1);
	assert_int_equal(cap.rec[0].id.seq, 43);
	/* and switching it to a sending group gives it bins */
	t_group(l, 2, 0.0, b, 5);
	t_apply(l);
	uint64_t adds = il_lec_stats(l)->bin_adds;
	t_data(l, 2, 100, 40);
	assert_true(il_lec_stats(l)->bin_adds > adds);
	il_lec_free(l);
	t_cap_free(&cap);
}

static void test_view_change(void **state)
{
	struct il_lec_cfg cfg;
	struct t_cap cap;
	struct il_lec *l;
	uint32_t a[] = { 1, 2, 3, 4, 50 }, b[] = { 3, 4, 5, 6, 50 }, b2[] = { 3, 5, 6, 7, 50 };
	char err[128];

	(void)state;
	il_lec_cfg_defaults(&cfg);
	cfg.self_id = 50;
	cfg.decode = false;
	t_cap_init(&cap, 100, 0);
	l = t_lec(&cfg, &cap);
	t_group(l, 1, 0, a, 5);
	t_group(l, 2, 0, b, 5);
	t_apply(l);
	/* regions a {1,2}, ab {3,4}, b {5,6}; bins ab, a, b */
	assert_int_equal(il_lec_region_count(l), 3);
	assert_int_equal(il_lec_bin_count(l), 3);
	for (uint64_t s = 1; s <= 3; s++)
		t_data(l, 1, s, 0);
	assert_int_equal(cap.nrep, 0);

	/* B's view changes: region ab shrinks to {3}, a gains 4, b gains 7.
	 * The bins keep their sets, so they keep what they hold. */
	t_group(l, 2, 0, b2, 5);
	t_apply(l);
	assert_int_equal(il_lec_region_count(l), 3);
	assert_int_equal(il_lec_stats(l)->drop_bin_view, 0);
	for (uint64_t s = 4; s <= 8; s++)
		t_data(l, 1, s, 0);
	/* the A messages 1..8 filled bins ab and a: two repairs, bin ab's to
	 * region ab (now {3}: c_A^ab = c_B^ab = 1), bin a's to all of {1,2,4} */
	assert_int_equal(cap.nrep, 2);
	for (uint32_t i = 0; i < cap.nrep; i++) {
		const struct t_repair *r = &cap.rep[i];

		assert_int_equal(r->count, 8);
		if (r->n == 1) {
			assert_int_equal(r->targets[0], 3);
			continue;
		}
		assert_int_equal(r->n, 3);
		for (uint32_t t = 0; t < r->n; t++)
			assert_true(r->targets[t] == 1 || r->targets[t] == 2 || r->targets[t] == 4);
	}

	/* leaving B drops bins ab and b with what they hold */
	for (uint64_t s = 1; s <= 3; s++)
		t_data(l, 2, s, 0);
	assert_int_equal(il_lec_group_remove(l, 2), 0);
	assert_int_equal(il_lec_group_remove(l, 2), -1);
	assert_int_equal(t_data(l, 2, 4, 0), IL_LEC_UNKNOWN);
	t_apply(l);
	assert_int_equal(il_lec_region_count(l), 1);
	assert_int_equal(il_lec_bin_count(l), 1);
	assert_int_equal(il_lec_stats(l)->drop_bin_view, 6);
	assert_int_equal(il_lec_stats(l)->drop_data_foreign, 1);

	/* a view too large for the configuration leaves the plan in force */
	il_lec_free(l);
	cfg.max_bins = 2;
	l = t_lec(&cfg, &cap);
	t_group(l, 1, 0, a, 5);
	t_apply(l);
	t_group(l, 2, 0, b, 5);
	assert_int_equal(il_lec_apply(l, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "lec.max_bins"));
	assert_int_equal(il_lec_region_count(l), 1);
	assert_int_equal(il_lec_bin_count(l), 1);
	assert_int_equal(il_lec_stats(l)->apply_fail, 1);
	il_lec_free(l);

	cfg.max_bins = 512;
	cfg.max_members = 5;
	l = t_lec(&cfg, &cap);
	t_group(l, 1, 0, a, 5);
	t_group(l, 2, 0, b, 5);
	assert_int_equal(il_lec_apply(l, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "lec.max_members"));
	il_lec_free(l);

	cfg.max_members = 1024;
	cfg.max_group_size = 3;
	cfg.max_groups = 1;
	l = t_lec(&cfg, &cap);
	assert_int_equal(il_lec_group_set(l, 1, 0, a, 5, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "lec.max_group_size"));
	assert_int_equal(il_lec_group_set(l, 1, 0, a, 3, err, sizeof(err)), 0);
	assert_int_equal(il_lec_group_set(l, 2, 0, a, 3, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "lec.max_groups"));
	il_lec_free(l);
	t_cap_free(&cap);
}

/* defer_xor: references instead of copies. The same seed gives the same
 * draws, so both modes must send byte-identical repairs to the same
 * targets; every reference taken is given back, and never early. */
struct refs {
	int32_t *count; /* per message: references held */
	uint64_t holds, releases;
	int64_t negative;
	bool freed_ok;
};

static struct refs *g_refs;

static void ref_hold(void *arg, void *cookie, uint32_t n)
{
	(void)arg;
	g_refs->count[(uintptr_t)cookie] += (int32_t)n;
	g_refs->holds += n;
}

static void ref_release(void *arg, void *const *cookies, uint32_t n)
{
	(void)arg;
	for (uint32_t i = 0; i < n; i++) {
		if (--g_refs->count[(uintptr_t)cookies[i]] < 0)
			g_refs->negative++;
	}
	g_refs->releases += n;
}

/* off: where each payload starts in its T_MAXLEN buffer (42: as in an
 * mbuf, 10 bytes past a 32-byte boundary); slack: cfg.src_slack of the
 * deferring instance (with 31 it XORs those from the boundary, ISA-L). */
static void defer_matches_copy(uint32_t off, uint32_t slack, uint8_t impl)
{
	enum { PER_GROUP = 3000, NMSG = 3 * PER_GROUP };
	struct il_lec_cfg cfg;
	struct t_cap a, b;
	struct il_lec *copy, *defer;
	struct il_lec_ops ops = { .send = t_send, .hold = ref_hold, .release = ref_release,
				  .arg = &b };
	struct refs refs = { 0 };
	uint8_t *pool = aligned_alloc(64, (size_t)NMSG * T_MAXLEN + 64);
	char err[256];

	assert_non_null(pool);
	refs.count = calloc(NMSG, sizeof(int32_t));
	assert_non_null(refs.count);
	g_refs = &refs;
	fig7_cfg(&cfg);
	cfg.xor_impl = impl;
	t_cap_init(&a, 8000, 0);
	t_cap_init(&b, 8000, 0);
	/* the reference: plain C, copying */
	cfg.xor_impl = IL_LEC_XOR_REF;
	copy = t_lec(&cfg, &a);
	cfg.xor_impl = impl;
	fig7_views(copy);
	cfg.defer_xor = true;
	cfg.src_slack = slack;
	defer = il_lec_create(&cfg, &ops, err, sizeof(err));
	assert_non_null(defer);
	fig7_views(defer);
	for (uint32_t i = 0; i < NMSG; i++) {
		uint16_t g = (uint16_t)(1 + i % 3);
		struct il_lec_id id = t_id(g, 1 + i / 3);
		uint32_t len = t_len(id.seq + g);
		uint8_t *p = pool + (size_t)i * T_MAXLEN + off;

		/* junk around it: LEC must not take any of it into a repair */
		memset(p - off, 0xee, T_MAXLEN);
		t_payload(p, g, id.seq, len);
		assert_int_equal(il_lec_data(copy, &id, p, len, NULL, 0), IL_LEC_NEW);
		assert_int_equal(il_lec_data(defer, &id, p, len, (void *)(uintptr_t)i, 0),
				 IL_LEC_NEW);
	}
	il_lec_flush(copy, 1);
	il_lec_flush(defer, 1);
	assert_true(a.nrep > 1000);
	assert_int_equal(a.nrep, b.nrep);
	for (uint32_t i = 0; i < a.nrep; i++) {
		const struct t_repair *x = &a.rep[i], *y = &b.rep[i];

		assert_int_equal(x->count, y->count);
		assert_int_equal(x->len, y->len);
		assert_int_equal(x->len_xor, y->len_xor);
		assert_memory_equal(x->ids, y->ids, x->count * sizeof(x->ids[0]));
		assert_memory_equal(x->payload, y->payload, x->len);
		assert_int_equal(x->n, y->n);
		assert_memory_equal(x->targets, y->targets, x->n * sizeof(x->targets[0]));
	}
	assert_int_equal(il_lec_stats(copy)->xor_ops + il_lec_stats(copy)->copy_ops,
			 il_lec_stats(defer)->xor_ops + il_lec_stats(defer)->copy_ops);
	/* what the bins still hold (rounds without targets) goes back at free */
	il_lec_free(defer);
	assert_int_equal(refs.negative, 0);
	assert_int_equal(refs.holds, refs.releases);
	assert_int_equal(il_lec_stats(copy)->repairs_sent, a.nrep);
	for (uint32_t i = 0; i < NMSG; i++)
		assert_int_equal(refs.count[i], 0);
	il_lec_free(copy);
	t_cap_free(&a);
	t_cap_free(&b);
	free(refs.count);
	free(pool);
}

static void test_defer_matches_copy(void **state)
{
	(void)state;
	defer_matches_copy(0, 0, IL_LEC_XOR_ISAL);
	defer_matches_copy(42, 0, IL_LEC_XOR_ISAL);  /* misaligned: the plain C gather */
	defer_matches_copy(42, 31, IL_LEC_XOR_ISAL); /* ISA-L from the 32-byte boundary */
	defer_matches_copy(42, 0, IL_LEC_XOR_AVX2);  /* AVX2: any alignment */
	defer_matches_copy(0, 0, IL_LEC_XOR_REF);
}

/* The groups plan (an observer's): one bin per group, drawing c_G^T from
 * every region of the group: the same targets per message and per region
 * as Algorithm 1, each repair of one group only, one XOR pass per message. */
static void test_groups_plan(void **state)
{
	struct il_lec_cfg cfg;
	struct t_cap cap;
	struct il_lec *l;
	struct rate_ctx *x = calloc(1, sizeof(*x));
	static const char *const all[] = { "abc", "ab", "ac", "bc", "a", "b", "c" };
	static const double cg[] = { 0, 5.0, 4.0, 3.0 }, gsz[] = { 0, 20, 20, 25 };
	const uint32_t per_group = 20000;
	const struct il_lec_stats *st;

	(void)state;
	assert_non_null(x);
	fig7_cfg(&cfg);
	cfg.plan = IL_LEC_PLAN_GROUPS;
	t_cap_init(&cap, 0, 0);
	cap.on_repair = rate_hook;
	cap.user = x;
	l = t_lec(&cfg, &cap);
	fig7_views(l);
	assert_int_equal(il_lec_region_count(l), 7);
	assert_int_equal(il_lec_bin_count(l), 3);
	for (unsigned t = 0; t < 7; t++) {
		double size = fig7_regions[t].hi - fig7_regions[t].lo + 1;

		for (unsigned g = 0; g < 3; g++) {
			char bin[2] = { (char)('a' + g), 0 };
			double want = strchr(all[t], 'a' + (int)g) ? cg[g + 1] * size / gsz[g + 1] : 0;

			assert_true(fabs(takes(l, bin, all[t]) - want) < 1e-9);
		}
		assert_true(takes(l, "ab", all[t]) == 0.0);
		assert_true(takes(l, "abc", all[t]) == 0.0);
	}
	for (uint32_t s = 1; s <= per_group; s++)
		for (uint16_t g = GA; g <= GC; g++)
			assert_int_equal(t_data(l, g, s, 0), IL_LEC_NEW);
	assert_int_equal(x->bad_target, 0);
	for (uint16_t g = GA; g <= GC; g++) {
		double sum = 0;
		uint32_t counted = per_group - 200;

		for (uint32_t s = 1; s <= counted; s++)
			sum += x->copies[g][s];
		printf("# groups plan, group %c: %.3f repair copies per message (c = %.0f)\n",
		       'A' + g - 1, sum / counted, cg[g]);
		assert_true(fabs(sum / counted - cg[g]) < 0.03 * cg[g]);
		for (uint32_t m = 1; m <= 35; m++) {
			double expect = (double)per_group * cg[g] / gsz[g];

			if (fig7_in(g, m))
				assert_true(fabs((double)x->per_member[g][m] - expect) <
					    0.15 * expect);
		}
	}
	/* one pass per message: every bin draws at least c_G - 1 >= 2 targets */
	st = il_lec_stats(l);
	assert_int_equal(st->bin_adds, st->data_new);
	assert_int_equal(st->xor_ops + st->copy_ops, st->data_new);
	assert_int_equal(st->repairs_skipped, 0);
	il_lec_free(l);
	t_cap_free(&cap);
	free(x);
}

/* Layers: a group owed more repairs of a message than it has members (c =
 * 12 over 4 members: each member 3 repairs of each message). The bin gets
 * three layers whose rounds are a third of a round apart: every message
 * goes to every member in three repairs, each with other companions. */
struct layer_ctx {
	uint32_t in[400][3]; /* per message: the first id of the repairs holding it */
	uint32_t nin[400];
	uint32_t copies[400];
	uint32_t counts[IL_LEC_MAX_R + 1];
};

static void layer_hook(struct t_cap *c, const struct il_lec_repair *rep, const uint32_t *targets,
		       uint32_t n)
{
	struct layer_ctx *x = c->user;

	(void)targets;
	x->counts[rep->count]++;
	for (unsigned k = 0; k < rep->count; k++) {
		uint64_t s = rep->ids[k].seq;

		assert_true(s < 400);
		assert_true(x->nin[s] < 3);
		x->in[s][x->nin[s]++] = (uint32_t)rep->ids[0].seq;
		x->copies[s] += n;
	}
}

static void layers_run(bool defer)
{
	struct il_lec_cfg cfg;
	struct t_cap cap;
	struct il_lec *l;
	struct layer_ctx *x = calloc(1, sizeof(*x));
	struct refs refs = { 0 };
	uint32_t m[] = { 1, 2, 3, 4 };
	uint8_t *pool = aligned_alloc(64, 400 * (size_t)T_MAXLEN);
	char err[256];

	assert_non_null(x);
	assert_non_null(pool);
	refs.count = calloc(400, sizeof(int32_t));
	g_refs = &refs;
	il_lec_cfg_defaults(&cfg);
	cfg.self_id = IL_LEC_OBSERVER;
	cfg.decode = false;
	cfg.max_layers = 4;
	cfg.defer_xor = defer;
	cfg.plan = IL_LEC_PLAN_GROUPS;
	t_cap_init(&cap, 0, 0);
	cap.on_repair = layer_hook;
	cap.user = x;
	struct il_lec_ops ops = { .send = t_send, .hold = ref_hold, .release = ref_release,
				  .arg = &cap };
	l = il_lec_create(&cfg, &ops, err, sizeof(err));
	assert_non_null(l);
	t_group(l, 5, 12.0, m, 4);
	t_apply(l);
	assert_int_equal(il_lec_stats(l)->c_capped, 0);
	for (uint64_t s = 1; s < 400; s++) {
		struct il_lec_id id = t_id(5, s);
		uint8_t *p = pool + s * T_MAXLEN + 42;

		t_payload(p, 5, s, t_len(s));
		assert_int_equal(il_lec_data(l, &id, p, t_len(s), (void *)(uintptr_t)s, 0),
				 IL_LEC_NEW);
	}
	/* the layers' first rounds were short (6 and 3 of 8), then all are full */
	assert_int_equal(x->counts[6], 1);
	assert_int_equal(x->counts[3], 1);
	for (uint64_t s = 10; s < 380; s++) {
		/* three repairs, each to the whole group, with other companions */
		assert_int_equal(x->nin[s], 3);
		assert_int_equal(x->copies[s], 12);
		assert_int_not_equal(x->in[s][0], x->in[s][1]);
		assert_int_not_equal(x->in[s][1], x->in[s][2]);
		assert_int_not_equal(x->in[s][0], x->in[s][2]);
	}
	if (defer) {
		/* one reference per message, however many layers keep it */
		assert_true(refs.holds <= 399);
		assert_true(refs.holds >= 399 - 8);
	}
	il_lec_free(l);
	assert_int_equal(refs.holds, refs.releases);
	assert_int_equal(refs.negative, 0);
	t_cap_free(&cap);
	free(refs.count);
	free(pool);
	free(x);
}

static void test_layers(void **state)
{
	struct il_lec_cfg cfg;
	struct t_cap cap;
	struct il_lec *l;
	uint32_t m[] = { 1, 2, 3, 4 };

	(void)state;
	layers_run(false);
	layers_run(true);
	/* one layer (the default): c is capped at the group's size */
	il_lec_cfg_defaults(&cfg);
	cfg.self_id = IL_LEC_OBSERVER;
	cfg.decode = false;
	t_cap_init(&cap, 100, 0);
	l = t_lec(&cfg, &cap);
	t_group(l, 5, 12.0, m, 4);
	t_apply(l);
	assert_int_equal(il_lec_stats(l)->c_capped, 1);
	for (uint64_t s = 1; s <= 80; s++)
		t_data(l, 5, s, 0);
	assert_int_equal(cap.nrep, 10);
	il_lec_free(l);
	t_cap_free(&cap);
}

/* Layers of a slow group, whose rounds end by age: one message every 6 ms,
 * repairs of 8 after at most 10 ms. The layers take the same messages, so
 * they start their rounds on the same one; fired at one age they stayed
 * together and sent three copies of one XOR per round. Layer j now waits
 * (1 + j/3) times the age: the three repairs that hold a message have
 * other companions (what layers are for: a member that lost two messages
 * of one repair may use another). */
static void test_layers_apart_when_rounds_end_by_age(void **state)
{
	struct il_lec_cfg cfg;
	struct t_cap cap;
	struct il_lec *l;
	struct layer_ctx *x = calloc(1, sizeof(*x));
	uint32_t m[] = { 1, 2, 3, 4 };
	const uint64_t ms = 1000000;
	unsigned same = 0, apart = 0;

	(void)state;
	assert_non_null(x);
	il_lec_cfg_defaults(&cfg);
	cfg.self_id = IL_LEC_OBSERVER;
	cfg.decode = false;
	cfg.max_layers = 4;
	cfg.plan = IL_LEC_PLAN_GROUPS;
	t_cap_init(&cap, 0, 0);
	cap.on_repair = layer_hook;
	cap.user = x;
	l = t_lec(&cfg, &cap);
	t_group(l, 5, 12.0, m, 4);
	t_apply(l);
	for (uint64_t s = 1; s < 400; s++) {
		t_data(l, 5, s, s * 6 * ms);
		il_lec_flush_aged(l, s * 6 * ms + 1, 10 * ms);
	}
	il_lec_flush(l, 1);
	for (uint64_t s = 20; s < 380; s++) {
		assert_int_equal(x->nin[s], 3);
		if (x->in[s][0] == x->in[s][1] && x->in[s][1] == x->in[s][2])
			same++;
		else
			apart++;
	}
	/* the same three sets for every message before the change */
	assert_true(apart > 9 * same);
	assert_true(il_lec_stats(l)->flushed > 100);
	il_lec_free(l);
	t_cap_free(&cap);
	free(x);
}

/* A bin whose oldest message is older than the age fires short; younger
 * ones wait. */
static void test_flush_aged(void **state)
{
	struct il_lec_cfg cfg;
	struct t_cap cap;
	struct il_lec *l;
	uint32_t m[] = { 1, 2, 3 };

	(void)state;
	il_lec_cfg_defaults(&cfg);
	cfg.self_id = IL_LEC_OBSERVER;
	cfg.decode = false;
	t_cap_init(&cap, 100, 0);
	l = t_lec(&cfg, &cap);
	t_group(l, 2, 3.0, m, 3);
	t_apply(l);
	for (uint64_t s = 1; s <= 3; s++)
		t_data(l, 2, s, 1000 + s);
	assert_int_equal(il_lec_flush_aged(l, 1500, 1000), 0);
	/* when the round comes due: its first message's time plus the age */
	assert_true(il_lec_next_due(l) == 2001);
	assert_int_equal(il_lec_flush_aged(l, 2000, 1000), 0); /* 1001 > 1000 */
	assert_true(il_lec_next_due(l) == 2001);
	assert_int_equal(il_lec_flush_aged(l, 2001, 1000), 1);
	assert_true(il_lec_next_due(l) == UINT64_MAX); /* nothing left holding */
	assert_int_equal(cap.nrep, 1);
	assert_int_equal(cap.rep[0].count, 3);
	assert_int_equal(cap.rep[0].n, 3);
	assert_int_equal(il_lec_stats(l)->flushed, 1);
	/* the next round starts afresh: 8 more make a full repair */
	for (uint64_t s = 4; s <= 11; s++)
		t_data(l, 2, s, 3000);
	assert_int_equal(cap.nrep, 2);
	assert_int_equal(cap.rep[1].count, 8);
	assert_int_equal(cap.rep[1].ids[0].seq, 4);
	assert_int_equal(il_lec_flush_aged(l, 100000, 1000), 0);
	assert_true(il_lec_next_due(l) == UINT64_MAX);
	t_data(l, 2, 12, 100500);
	assert_int_equal(il_lec_flush_aged(l, 100600, 1000), 0);
	assert_true(il_lec_next_due(l) == 101500);
	il_lec_free(l);
	t_cap_free(&cap);
}

static void expect_cfg_error(const struct il_lec_cfg *cfg, const char *key)
{
	char err[256];

	assert_int_equal(il_lec_cfg_check(cfg, err, sizeof(err)), -1);
	if (!strstr(err, key))
		fprintf(stderr, "error '%s' does not name %s\n", err, key);
	assert_non_null(strstr(err, key));
}

static void test_cfg_errors(void **state)
{
	struct il_lec_cfg cfg, bad;
	char err[256];

	(void)state;
	il_lec_cfg_defaults(&cfg);
	assert_int_equal(il_lec_cfg_check(&cfg, err, sizeof(err)), 0);
	bad = cfg, bad.r = 1, expect_cfg_error(&bad, "lec.r");
	bad = cfg, bad.r = 33, expect_cfg_error(&bad, "lec.r");
	bad = cfg, bad.stagger = 0, expect_cfg_error(&bad, "lec.stagger");
	bad = cfg, bad.c = 0, expect_cfg_error(&bad, "lec.c");
	bad = cfg, bad.c = 100, expect_cfg_error(&bad, "lec.c");
	bad = cfg, bad.xor_impl = 7, expect_cfg_error(&bad, "lec.xor_impl");
	bad = cfg, bad.plan = 2, expect_cfg_error(&bad, "lec.plan");
	bad = cfg, bad.max_layers = 0, expect_cfg_error(&bad, "lec.max_layers");
	bad = cfg, bad.max_len = 0, expect_cfg_error(&bad, "lec.max_len");
	bad = cfg, bad.max_len = 70000, expect_cfg_error(&bad, "lec.max_len");
	bad = cfg, bad.max_groups = 0, expect_cfg_error(&bad, "lec.max_groups");
	bad = cfg, bad.store_msgs = 10, expect_cfg_error(&bad, "lec.store_msgs");
	bad = cfg, bad.defer_xor = true, expect_cfg_error(&bad, "lec.defer_xor");
	bad = cfg, bad.max_age_ns = 4000ull * 1000000000ull;
	expect_cfg_error(&bad, "lec.max_age_ns");
	/* an encode-only node has no stores to size */
	bad = cfg, bad.decode = false, bad.store_msgs = 0;
	assert_int_equal(il_lec_cfg_check(&bad, err, sizeof(err)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fig7_plan),
		cmocka_unit_test(test_fig7_measured),
		cmocka_unit_test(test_fractional_targets),
		cmocka_unit_test(test_c_capped),
		cmocka_unit_test(test_decode_only),
		cmocka_unit_test(test_view_change),
		cmocka_unit_test(test_defer_matches_copy),
		cmocka_unit_test(test_groups_plan),
		cmocka_unit_test(test_layers),
		cmocka_unit_test(test_flush_aged),
		cmocka_unit_test(test_layers_apart_when_rounds_end_by_age),
		cmocka_unit_test(test_cfg_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
