/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Views, regions and the bin plan (Ricochet section 4.1, Algorithm 1).
 *
 * A node's neighbours are the members of its groups, itself left out.
 * Each neighbour belongs to some set of those groups; neighbours with the
 * same set form a region, so regions are disjoint and there are never
 * more of them than neighbours. For group G and region T, G's repairs
 * owe T on average c_G^T = c_G * |T| / |G| targets per message
 * (stratified sampling of c_G members out of G).
 *
 * Repairs are composed across groups: the bin named by group set S takes
 * messages of every group in S, so its repairs may go only to regions
 * whose set contains S. For each region T, the plan walks a shrinking set
 * S, starting with all of T's groups: the bin of S takes the smallest
 * residual c_G^T over S from T (the minimum, so no group is sent more
 * than it asked), that amount is charged to every group of S, and the
 * groups with nothing left drop out of S. So for each G the bins
 * containing G draw exactly c_G^T from T in all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lec_internal.h"

int lec_regions_init(struct il_lec *l)
{
	l->cur = 0;
	l->reg[0].n = 0;
	l->reg[1].n = 0;
	l->nbins = 0;
	l->nlinks = 0;
	const uint32_t per_bin =
		(uint32_t)l->cfg.stagger * lec_pos_insts(l->cfg.layer_stride, l->cfg.max_layers);

	for (uint32_t b = 0; b < l->cfg.max_bins; b++) {
		l->bin[b].inst = &l->inst[(size_t)b * per_bin];
		l->bin[b].layers = 1;
		for (uint32_t s = 0; s < per_bin; s++) {
			size_t k = (size_t)b * per_bin + s;

			if (l->by_ref) {
				l->inst[k].fr = &l->inst_fr[k * l->cfg.r];
			} else {
				l->inst[k].ids = &l->inst_ids[k * l->cfg.r];
				l->inst[k].acc = l->acc_buf + k * l->slot_size;
			}
		}
	}
	return 0;
}

/* ---- views -------------------------------------------------------------- */

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int il_lec_group_set(struct il_lec *l, uint16_t group, double c, const uint32_t *members,
		     uint32_t n, char *err, size_t errlen)
{
	struct lec_group *g = lec_group_of(l, group);
	uint32_t others = 0, k = 0;

	/* decode only: no share of any region, so no bin takes its messages */
	if (c == IL_LEC_DECODE_ONLY)
		c = 0.0;
	else if (c <= 0.0)
		c = l->cfg.c;
	if (!(c <= IL_LEC_MAX_C))
		return ERR("lec group %u: c = %g is out of range; allowed: above 0, at most %g",
			   group, c, IL_LEC_MAX_C);
	for (uint32_t i = 0; i < n; i++)
		others += members[i] != l->cfg.self_id;
	if (others > l->cfg.max_group_size)
		return ERR("lec.max_group_size = %u is too small: group %u's view has %u "
			   "other members",
			   l->cfg.max_group_size, group, others);
	if (!g) {
		uint32_t s;

		for (s = 0; s < l->cfg.max_groups; s++)
			if (l->grp[s].state == LEC_G_FREE)
				break;
		if (s == l->cfg.max_groups)
			return ERR("lec.max_groups = %u is too small: joining group %u would "
				   "make %u",
				   l->cfg.max_groups, group, l->cfg.max_groups + 1);
		g = &l->grp[s];
		memset(&g->st, 0, sizeof(g->st));
		g->h_valid = false;
		g->link_first = 0;
		g->link_n = 0;
		g->id = group;
		l->gmap[group] = (uint16_t)(s + 1);
		l->ngroups_live++;
	} else if (g->state == LEC_G_GONE) {
		l->ngroups_live++;
	}
	g->state = LEC_G_LIVE;
	g->c = c;
	for (uint32_t i = 0; i < n; i++)
		if (members[i] != l->cfg.self_id)
			g->members[k++] = members[i];
	qsort(g->members, k, sizeof(uint32_t), cmp_u32);
	g->n = 0;
	for (uint32_t i = 0; i < k; i++)
		if (i == 0 || g->members[i] != g->members[i - 1])
			g->members[g->n++] = g->members[i];
	l->dirty = true;
	return 0;
}

int il_lec_group_remove(struct il_lec *l, uint16_t group)
{
	struct lec_group *g = lec_group_of(l, group);

	if (!g || g->state != LEC_G_LIVE)
		return -1;
	g->state = LEC_G_GONE;
	l->ngroups_live--;
	l->dirty = true;
	return 0;
}

/* ---- the plan ----------------------------------------------------------- */

static int cmp_nb(const void *a, const void *b, void *arg)
{
	const struct il_lec *l = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int d = memcmp(l->nb_keys + (size_t)x * l->W, l->nb_keys + (size_t)y * l->W,
		       8 * l->W);

	if (d)
		return d;
	return cmp_u32(&l->nb_ids[x], &l->nb_ids[y]);
}

static int cmp_ent(const void *a, const void *b, void *arg)
{
	const struct il_lec *l = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int d = memcmp(l->ent_keys + (size_t)x * l->W, l->ent_keys + (size_t)y * l->W,
		       8 * l->W);

	if (d)
		return d;
	return cmp_u32(&l->ent_region[x], &l->ent_region[y]);
}

static double group_c(struct il_lec *l, const struct lec_group *g, bool count)
{
	/* One layer of bins cannot send a message's repairs to more distinct
	 * members than the group has; each further layer sends every member
	 * one more. */
	double most = (double)g->n * l->cfg.max_layers;

	if (g->c > most) {
		if (count && g->n > 0)
			l->st.c_capped++;
		return most;
	}
	return g->c;
}

/* Distinct neighbours with the set of groups each is in. */
static int plan_neighbours(struct il_lec *l, uint32_t *nnb, char *err, size_t errlen)
{
	uint32_t W = l->W, n = 0;

	memset(l->nb_hash, 0, 4 * ((size_t)l->nb_hash_mask + 1));
	for (uint32_t s = 0; s < l->cfg.max_groups; s++) {
		const struct lec_group *g = &l->grp[s];

		if (g->state != LEC_G_LIVE)
			continue;
		for (uint32_t i = 0; i < g->n; i++) {
			uint32_t m = g->members[i];
			uint32_t h = (uint32_t)((m * 0x9e3779b97f4a7c15ull) >> 32) & l->nb_hash_mask;

			while (l->nb_hash[h] && l->nb_ids[l->nb_hash[h] - 1] != m)
				h = (h + 1) & l->nb_hash_mask;
			if (!l->nb_hash[h]) {
				if (n == l->cfg.max_members)
					return ERR("lec.max_members = %u is too small: these "
						   "views have more distinct neighbours",
						   l->cfg.max_members);
				l->nb_ids[n] = m;
				memset(l->nb_keys + (size_t)n * W, 0, 8 * W);
				l->nb_hash[h] = ++n;
			}
			key_set(l->nb_keys + (size_t)(l->nb_hash[h] - 1) * W, s);
		}
	}
	*nnb = n;
	return 0;
}

static uint32_t key_groups(const struct il_lec *l, const uint64_t *key, uint16_t *out)
{
	uint32_t d = 0;

	for (uint32_t w = 0; w < l->W; w++) {
		uint64_t v = key[w];

		while (v) {
			out[d++] = (uint16_t)(w * 64 + (uint32_t)__builtin_ctzll(v));
			v &= v - 1;
		}
	}
	return d;
}

static int plan_entry(struct il_lec *l, uint32_t *ne, const uint64_t *key, uint32_t t, double m,
		      char *err, size_t errlen)
{
	if (*ne == l->cfg.max_links)
		return ERR("lec.max_links = %u is too small for these views' bin targets",
			   l->cfg.max_links);
	memcpy(l->ent_keys + (size_t)*ne * l->W, key, 8 * l->W);
	l->ent_region[*ne] = t;
	l->ent_mean[*ne] = m;
	(*ne)++;
	return 0;
}

/* The groups plan: the bin of {G} draws c_G^T from every region T of G. */
static int plan_entries_groups(struct il_lec *l, const struct lec_regions *rg, uint32_t *nent,
			       char *err, size_t errlen)
{
	uint32_t W = l->W, ne = 0;
	uint64_t *s = l->tmpkey;
	uint16_t *gs = l->gtmp;

	for (uint32_t t = 0; t < rg->n; t++) {
		uint32_t d = key_groups(l, rg->keys + (size_t)t * W, gs);

		for (uint32_t k = 0; k < d; k++) {
			const struct lec_group *g = &l->grp[gs[k]];
			double m = group_c(l, g, false) * rg->size[t] / g->n;

			if (m <= LEC_EPS)
				continue;
			memset(s, 0, 8 * W);
			key_set(s, gs[k]);
			if (plan_entry(l, &ne, s, t, m, err, errlen))
				return -1;
		}
	}
	*nent = ne;
	return 0;
}

/* Algorithm 1 for every region of rg: entries (bin set, region, mean). */
static int plan_entries(struct il_lec *l, const struct lec_regions *rg, uint32_t *nent,
			char *err, size_t errlen)
{
	uint32_t W = l->W, ne = 0;
	uint64_t *s = l->tmpkey;
	uint16_t *gs = l->gtmp;

	if (l->cfg.plan == IL_LEC_PLAN_GROUPS)
		return plan_entries_groups(l, rg, nent, err, errlen);
	for (uint32_t t = 0; t < rg->n; t++) {
		const uint64_t *tk = rg->keys + (size_t)t * W;
		uint32_t d = key_groups(l, tk, gs), live = d;

		for (uint32_t k = 0; k < d; k++) {
			const struct lec_group *g = &l->grp[gs[k]];

			l->resid[gs[k]] = group_c(l, g, false) * rg->size[t] / g->n;
		}
		memcpy(s, tk, 8 * W);
		while (live > 0) {
			double m = -1.0;

			for (uint32_t k = 0; k < d; k++)
				if (key_has(s, gs[k]) && (m < 0 || l->resid[gs[k]] < m))
					m = l->resid[gs[k]];
			if (m > LEC_EPS && plan_entry(l, &ne, s, t, m, err, errlen))
				return -1;
			/* groups whose share of T is spent leave the set: the
			 * next, smaller bin serves the others */
			for (uint32_t k = 0; k < d; k++) {
				if (!key_has(s, gs[k]))
					continue;
				l->resid[gs[k]] -= m;
				if (l->resid[gs[k]] <= LEC_EPS) {
					s[gs[k] >> 6] &= ~(1ull << (gs[k] & 63));
					live--;
				}
			}
		}
	}
	*nent = ne;
	return 0;
}

static void plan_regions(struct il_lec *l, struct lec_regions *rg, uint32_t nnb)
{
	uint32_t W = l->W;

	for (uint32_t i = 0; i < nnb; i++)
		l->nb_order[i] = i;
	qsort_r(l->nb_order, nnb, sizeof(uint32_t), cmp_nb, l);
	rg->n = 0;
	for (uint32_t i = 0; i < nnb; i++) {
		const uint64_t *k = l->nb_keys + (size_t)l->nb_order[i] * W;

		if (rg->n == 0 || memcmp(k, rg->keys + (size_t)(rg->n - 1) * W, 8 * W)) {
			memcpy(rg->keys + (size_t)rg->n * W, k, 8 * W);
			rg->start[rg->n] = i;
			rg->size[rg->n] = 0;
			rg->n++;
		}
		rg->members[i] = l->nb_ids[l->nb_order[i]];
		rg->size[rg->n - 1]++;
	}
}

static inline const uint64_t *ent_key(const struct il_lec *l, uint32_t pos)
{
	return l->ent_keys + (size_t)l->ent_order[pos] * l->W;
}

/* End of the run of entries sharing the key at pos. */
static uint32_t ent_run(const struct il_lec *l, uint32_t pos, uint32_t nent)
{
	uint32_t j = pos + 1;

	while (j < nent && !memcmp(ent_key(l, j), ent_key(l, pos), 8 * l->W))
		j++;
	return j;
}

/* Layers a bin needs: one per time its busiest region is owed all its
 * members in one repair. */
static uint32_t bin_layers(const struct il_lec *l, const struct lec_regions *nx, uint32_t i,
			   uint32_t j)
{
	uint32_t layers = 1;

	for (uint32_t e = i; e < j; e++) {
		uint32_t x = l->ent_order[e];
		double per = l->ent_mean[x] / nx->size[l->ent_region[x]];
		uint32_t need = (uint32_t)per;

		if (per - need > LEC_EPS)
			need++;
		if (need > layers)
			layers = need;
	}
	return layers < l->cfg.max_layers ? layers : l->cfg.max_layers;
}

static void make_target(struct lec_target *t, uint32_t region, double mean)
{
	double whole = (double)(uint32_t)mean, frac = mean - whole;

	t->region = region;
	t->whole = (uint32_t)whole;
	t->frac = frac * 4294967296.0 >= 4294967295.0 ? UINT32_MAX
						       : (uint32_t)(frac * 4294967296.0);
	t->mean = mean;
}

/* Swap in the next regions and the bins of the plan; cannot fail. */
static void commit(struct il_lec *l, struct lec_regions *nx, uint32_t nent)
{
	uint32_t W = l->W, oi = 0, nold = l->nbins, nd = 0, free_cur = 0, ntgt = 0, nl = 0;
	uint32_t *tmp;

	/* Bins whose set is in the plan keep their slot and what they hold;
	 * the others are dropped. Both lists are sorted by key. */
	for (uint32_t i = 0; i < nent; i = ent_run(l, i, nent)) {
		const uint64_t *k = ent_key(l, i);
		int d = 1;

		while (oi < nold &&
		       (d = memcmp(l->bin_keys + (size_t)l->bin_order[oi] * W, k, 8 * W)) < 0) {
			l->st.drop_bin_view += lec_bin_drop(l, &l->bin[l->bin_order[oi]]);
			oi++;
			d = 1;
		}
		l->newbin_slot[nd++] = d == 0 ? l->bin_order[oi++] : LEC_NONE;
	}
	while (oi < nold) {
		l->st.drop_bin_view += lec_bin_drop(l, &l->bin[l->bin_order[oi]]);
		oi++;
	}

	nd = 0;
	for (uint32_t i = 0, j; i < nent; i = j) {
		uint32_t slot = l->newbin_slot[nd];
		struct lec_bin *b;

		j = ent_run(l, i, nent);
		uint32_t layers = bin_layers(l, nx, i, j);

		if (slot != LEC_NONE && l->bin[slot].layers != layers) {
			/* its rounds are laid out anew: start it afresh */
			l->st.drop_bin_view += lec_bin_drop(l, &l->bin[slot]);
			l->bin[slot].live = true;
			l->newbin_slot[nd] = slot | 0x80000000u;
		} else if (slot == LEC_NONE) {
			while (l->bin[free_cur].live)
				free_cur++;
			slot = free_cur;
			memcpy(l->bin_keys + (size_t)slot * W, ent_key(l, i), 8 * W);
			l->bin[slot].live = true;
			l->newbin_slot[nd] = slot | 0x80000000u; /* fresh */
		}
		b = &l->bin[slot];
		if (l->newbin_slot[nd] & 0x80000000u) {
			b->rr = 0;
			b->layers = (uint8_t)layers;
		}
		b->tgt_first = ntgt;
		b->tgt_n = j - i;
		b->always = false;
		for (uint32_t e = i; e < j; e++) {
			uint32_t x = l->ent_order[e];

			/* each layer draws its share */
			make_target(&nx->tgt[ntgt], l->ent_region[x], l->ent_mean[x] / layers);
			b->always |= nx->tgt[ntgt].whole >= 1 && nx->size[l->ent_region[x]] >= 1;
			ntgt++;
		}
		l->bin_order[nd++] = slot;
	}
	nx->ntgt = ntgt;
	l->nbins = nd;

	/* group -> bins containing it (a counting sort by group) */
	memset(l->glink_n, 0, 4 * (size_t)l->cfg.max_groups);
	for (uint32_t d = 0; d < nd; d++) {
		uint32_t ng = key_groups(l, l->bin_keys + (size_t)l->bin_order[d] * W, l->gtmp);

		for (uint32_t k = 0; k < ng; k++)
			l->glink_n[l->gtmp[k]]++;
	}
	for (uint32_t g = 0; g < l->cfg.max_groups; g++) {
		l->glink_first[g] = nl;
		nl += l->glink_n[g];
		l->glink_n[g] = 0;
	}
	for (uint32_t d = 0; d < nd; d++) {
		uint32_t slot = l->bin_order[d];
		uint32_t ng = key_groups(l, l->bin_keys + (size_t)slot * W, l->gtmp);

		for (uint32_t k = 0; k < ng; k++) {
			uint32_t g = l->gtmp[k];

			l->next_links[l->glink_first[g] + l->glink_n[g]++] = slot;
		}
	}
	tmp = l->links;
	l->links = l->next_links;
	l->next_links = tmp;
	l->nlinks = nl;
	for (uint32_t g = 0; g < l->cfg.max_groups; g++) {
		l->grp[g].link_first = l->glink_first[g];
		l->grp[g].link_n = l->glink_n[g];
	}
	l->cur ^= 1;

	/* New bins draw their first round against the targets now in force. */
	for (uint32_t d = 0; d < nd; d++) {
		if (!(l->newbin_slot[d] & 0x80000000u))
			continue;
		struct lec_bin *b = &l->bin[l->newbin_slot[d] & 0x7fffffffu];

		const uint32_t per = lec_pos_insts(l->cfg.layer_stride, b->layers);

		b->nin = 0;
		for (uint32_t s = 0; s < (uint32_t)l->cfg.stagger * per; s++) {
			struct lec_inst *in = &b->inst[s];

			lec_inst_reset(l, b, in);
			/* layer j's rounds start j/layers of a round late, so
			 * the layers' repairs of a message have other
			 * companions */
			uint32_t i = s % per, j = lec_inst_layer(l->cfg.layer_stride, i);

			in->n = j * l->cfg.r / b->layers;
			if (l->cfg.layer_stride) {
				/* and the j + 1 instances of layer j fire in turn,
				 * not together (docs/lec.md, "Layers in order") */
				uint32_t k = i - lec_layer_first(j);

				in->n = (in->n + k * l->cfg.r / (j + 1)) % l->cfg.r;
			}
		}
	}

	for (uint32_t s = 0; s < l->cfg.max_groups; s++) {
		struct lec_group *g = &l->grp[s];

		if (g->state == LEC_G_GONE) {
			lec_group_purge(l, s);
			l->gmap[g->id] = 0;
			g->state = LEC_G_FREE;
			g->n = 0;
		} else if (g->state == LEC_G_LIVE) {
			group_c(l, g, true);
		}
	}
}

int il_lec_apply(struct il_lec *l, char *err, size_t errlen)
{
	struct lec_regions *nx = &l->reg[l->cur ^ 1];
	uint32_t nnb, nent, ndist = 0, nlinks = 0;

	if (errlen)
		err[0] = '\0';
	if (plan_neighbours(l, &nnb, err, errlen))
		goto fail;
	plan_regions(l, nx, nnb);
	if (plan_entries(l, nx, &nent, err, errlen))
		goto fail;
	for (uint32_t i = 0; i < nent; i++)
		l->ent_order[i] = i;
	qsort_r(l->ent_order, nent, sizeof(uint32_t), cmp_ent, l);
	for (uint32_t i = 0; i < nent; i = ent_run(l, i, nent)) {
		const uint64_t *k = ent_key(l, i);

		ndist++;
		for (uint32_t w = 0; w < l->W; w++)
			nlinks += (uint32_t)__builtin_popcountll(k[w]);
	}
	if (ndist > l->cfg.max_bins) {
		if (errlen)
			snprintf(err, errlen, "lec.max_bins = %u is too small: these views need %u "
				 "repair bins", l->cfg.max_bins, ndist);
		goto fail;
	}
	if (nlinks > l->cfg.max_links) {
		if (errlen)
			snprintf(err, errlen, "lec.max_links = %u is too small: these views need "
				 "%u (group, bin) links", l->cfg.max_links, nlinks);
		goto fail;
	}
	commit(l, nx, nent);
	l->dirty = false;
	l->st.applies++;
	return 0;
fail:
	l->st.apply_fail++;
	return -1;
}

/* ---- introspection ------------------------------------------------------ */

static int groups_out(const struct il_lec *l, const uint64_t *key, uint16_t *gbuf, uint32_t gmax,
		      uint32_t *n)
{
	uint16_t *tmp = l->gtmp;
	uint32_t d = key_groups(l, key, tmp);

	if (d > gmax)
		return -1;
	for (uint32_t k = 0; k < d; k++)
		gbuf[k] = l->grp[tmp[k]].id;
	/* ascending group ids (slots are not ordered by id) */
	for (uint32_t a = 1; a < d; a++)
		for (uint32_t b = a; b > 0 && gbuf[b - 1] > gbuf[b]; b--) {
			uint16_t t = gbuf[b];

			gbuf[b] = gbuf[b - 1];
			gbuf[b - 1] = t;
		}
	*n = d;
	return 0;
}

uint32_t il_lec_region_count(const struct il_lec *l)
{
	return l->reg[l->cur].n;
}

int il_lec_region_get(const struct il_lec *l, uint32_t i, uint16_t *gbuf, uint32_t gmax,
		      struct il_lec_region_info *out)
{
	const struct lec_regions *rg = &l->reg[l->cur];

	if (i >= rg->n || groups_out(l, rg->keys + (size_t)i * l->W, gbuf, gmax, &out->ngroups))
		return -1;
	out->groups = gbuf;
	out->members = rg->members + rg->start[i];
	out->nmembers = rg->size[i];
	return 0;
}

uint32_t il_lec_bin_count(const struct il_lec *l)
{
	return l->nbins;
}

int il_lec_bin_get(const struct il_lec *l, uint32_t i, uint16_t *gbuf, uint32_t gmax,
		   struct il_lec_bin_info *out)
{
	uint32_t slot;

	if (i >= l->nbins)
		return -1;
	slot = l->bin_order[i];
	if (groups_out(l, l->bin_keys + (size_t)slot * l->W, gbuf, gmax, &out->ngroups))
		return -1;
	out->groups = gbuf;
	out->ntargets = l->bin[slot].tgt_n;
	return 0;
}

double il_lec_bin_target(const struct il_lec *l, uint32_t i, uint32_t t, uint32_t *region)
{
	const struct lec_bin *b;
	const struct lec_target *tg;

	if (i >= l->nbins)
		return 0.0;
	b = &l->bin[l->bin_order[i]];
	if (t >= b->tgt_n)
		return 0.0;
	tg = &l->reg[l->cur].tgt[b->tgt_first + t];
	if (region)
		*region = tg->region;
	return tg->mean;
}

/* Key of a list of group ids; false when one is not a live group. */
static bool key_of(const struct il_lec *l, const uint16_t *ids, uint32_t n, uint64_t *key)
{
	memset(key, 0, 8 * l->W);
	for (uint32_t k = 0; k < n; k++) {
		const struct lec_group *g = lec_group_of(l, ids[k]);

		if (!g || g->state != LEC_G_LIVE)
			return false;
		key_set(key, (uint32_t)(g - l->grp));
	}
	return true;
}

double il_lec_takes(const struct il_lec *l, const uint16_t *bin, uint32_t nbin,
		    const uint16_t *reg, uint32_t nreg)
{
	const struct lec_regions *rg = &l->reg[l->cur];
	uint64_t *bk = l->tmpkey;
	uint64_t rk[IL_LEC_MAX_GROUPS / 64];
	uint32_t t;

	if (!key_of(l, reg, nreg, rk))
		return 0.0;
	for (t = 0; t < rg->n; t++)
		if (!memcmp(rg->keys + (size_t)t * l->W, rk, 8 * l->W))
			break;
	if (t == rg->n || !key_of(l, bin, nbin, bk))
		return 0.0;
	for (uint32_t i = 0; i < l->nbins; i++) {
		const struct lec_bin *b = &l->bin[l->bin_order[i]];

		if (memcmp(l->bin_keys + (size_t)l->bin_order[i] * l->W, bk, 8 * l->W))
			continue;
		for (uint32_t k = 0; k < b->tgt_n; k++)
			if (rg->tgt[b->tgt_first + k].region == t)
				return rg->tgt[b->tgt_first + k].mean;
	}
	return 0.0;
}
