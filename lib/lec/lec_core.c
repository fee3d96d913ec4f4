/* SPDX-License-Identifier: BSD-3-Clause
 *
 * LEC instance: configuration and its validation, the one allocation that
 * holds every table (carved at create time), the XOR kernels and the
 * counters.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifdef IL_LEC_NO_ISAL
/* The copy libinterlink carries (endpoint/meson.build): a host library
 * that needs nothing beyond liburing and libc, so no ISA-L: XORs take the
 * AVX2 kernel where the CPU has it, else the plain C path (the one
 * `xor_impl = ref` selects). */
#define IL_LEC_HAVE_ISAL 0
static inline int xor_gen(int vects, int len, void **array)
{
	(void)vects;
	(void)len;
	(void)array;
	return -1;
}
#else
#define IL_LEC_HAVE_ISAL 1
#include <isa-l/raid.h>
#endif

#include "lec_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define IL_LEC_HAVE_AVX2 1
#else
#define IL_LEC_HAVE_AVX2 0
#endif

/* ---- configuration ------------------------------------------------------ */

void il_lec_cfg_defaults(struct il_lec_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->r = 8;
	cfg->stagger = 1;
	cfg->xor_impl = IL_LEC_XOR_AVX2;
	cfg->plan = IL_LEC_PLAN_REGIONS;
	cfg->max_layers = 1;
	cfg->decode = true;
	cfg->c = 5.0;
	cfg->self_id = 0;
	cfg->max_len = 1500;
	cfg->max_groups = 64;
	cfg->max_group_size = 256;
	cfg->max_members = 1024;
	cfg->max_bins = 512;
	cfg->max_links = 4096;
	cfg->store_msgs = 4096;
	cfg->store_repairs = 1024;
	cfg->max_age_ns = 1000000000ull;
	cfg->seed = 0;
}

#define RANGE(key, v, lo, hi, why)                                                       \
	do {                                                                             \
		if ((uint64_t)(v) < (uint64_t)(lo) || (uint64_t)(v) > (uint64_t)(hi))    \
			return ERR("lec." key " = %llu is out of range; allowed: %llu..%llu%s", \
				   (unsigned long long)(v), (unsigned long long)(lo),       \
				   (unsigned long long)(hi), why);                          \
	} while (0)

int il_lec_cfg_check(const struct il_lec_cfg *cfg, char *err, size_t errlen)
{
	if (errlen)
		err[0] = '\0';
	RANGE("r", cfg->r, 2, IL_LEC_MAX_R, " (with r = 1 a repair would only copy a message)");
	RANGE("stagger", cfg->stagger, 1, IL_LEC_MAX_STAGGER, "");
	if (cfg->xor_impl > IL_LEC_XOR_AVX2)
		return ERR("lec.xor_impl = %u is unknown; allowed: isal (%u), ref (%u), avx2 (%u)",
			   cfg->xor_impl, IL_LEC_XOR_ISAL, IL_LEC_XOR_REF, IL_LEC_XOR_AVX2);
	if (cfg->plan > IL_LEC_PLAN_GROUPS)
		return ERR("lec.plan = %u is unknown; allowed: regions (%u), groups (%u)", cfg->plan,
			   IL_LEC_PLAN_REGIONS, IL_LEC_PLAN_GROUPS);
	RANGE("max_layers", cfg->max_layers, 1, IL_LEC_MAX_LAYERS, "");
	if (!(cfg->c > 0.0 && cfg->c <= IL_LEC_MAX_C))
		return ERR("lec.c = %g is out of range; allowed: above 0, at most %g", cfg->c,
			   IL_LEC_MAX_C);
	RANGE("max_len", cfg->max_len, 1, IL_LEC_MAX_LEN, "");
	RANGE("max_groups", cfg->max_groups, 1, IL_LEC_MAX_GROUPS, "");
	RANGE("max_group_size", cfg->max_group_size, 1, 1u << 16, "");
	RANGE("max_members", cfg->max_members, 1, 1u << 20, "");
	RANGE("max_bins", cfg->max_bins, 1, 1u << 16, "");
	RANGE("max_links", cfg->max_links, 1, 1u << 22, "");
	if (cfg->decode) {
		/* A repair awaiting IL_LEC_MAX_R messages must not evict the
		 * records it has just made for them. */
		RANGE("store_msgs", cfg->store_msgs, 4 * IL_LEC_MAX_R, 1u << 22,
		      " (at least 4 x the largest repair)");
		if (cfg->store_repairs > (1u << 20))
			return ERR("lec.store_repairs = %u is out of range; allowed: 0 (immediate "
				   "decoding only)..%u",
				   cfg->store_repairs, 1u << 20);
		if (cfg->max_age_ns > 3600ull * 1000000000ull)
			return ERR("lec.max_age_ns = %llu is out of range; allowed: 0 (no age "
				   "limit) ..3600 s",
				   (unsigned long long)cfg->max_age_ns);
	}
	if (cfg->defer_xor && cfg->decode)
		return ERR("lec.defer_xor = true needs lec.decode = false: a decoding node "
			   "keeps its own copies of the messages");
	/* an instance by reference keeps no accumulator, only frame indexes */
	uint64_t per_inst = cfg->defer_xor || cfg->decode ? 4ull * cfg->r
							  : lec_round(cfg->max_len, LEC_ALIGN);
	uint64_t ninst = (uint64_t)cfg->max_bins * cfg->stagger *
			 lec_pos_insts(cfg->layer_stride, cfg->max_layers);

	if (ninst * per_inst > (1ull << 32))
		return ERR("lec.max_bins x lec.stagger x lec.max_layers (x (max_layers + 1) / 2 "
			   "with layer_stride) x %s = %llu bytes of bins "
			   "is too much; allowed: at most 4 GiB",
			   cfg->defer_xor || cfg->decode ? "4 r" : "lec.max_len",
			   (unsigned long long)(ninst * per_inst));
	return 0;
}

/* ---- memory: one block, carved ------------------------------------------ */

struct carve {
	uint8_t *base; /* NULL while sizing */
	size_t off;
};

static void *carve(struct carve *cv, size_t size)
{
	void *p;

	cv->off = (cv->off + LEC_ALIGN - 1) / LEC_ALIGN * LEC_ALIGN;
	p = cv->base ? cv->base + cv->off : NULL;
	cv->off += size;
	return p;
}

static uint32_t pow2_at_least(uint64_t v)
{
	uint32_t p = 16;

	while (p < v)
		p <<= 1;
	return p;
}

/* Assigns every table of l from cv (sizes only when cv->base is NULL). */
static void layout(struct il_lec *l, struct carve *cv)
{
	const struct il_lec_cfg *c = &l->cfg;
	size_t W = l->W, slot = l->slot_size;
	size_t ninst = (size_t)c->max_bins * c->stagger *
		       lec_pos_insts(c->layer_stride, c->max_layers);

	l->grp = carve(cv, sizeof(*l->grp) * c->max_groups);
	for (uint32_t g = 0; g < c->max_groups; g++) {
		uint32_t *m = carve(cv, sizeof(uint32_t) * c->max_group_size);

		if (cv->base)
			l->grp[g].members = m;
	}
	l->gmap = carve(cv, sizeof(uint16_t) * 65536);
	for (unsigned s = 0; s < 2; s++) {
		struct lec_regions *rg = &l->reg[s];

		rg->keys = carve(cv, 8 * W * c->max_members);
		rg->start = carve(cv, 4 * (size_t)c->max_members);
		rg->size = carve(cv, 4 * (size_t)c->max_members);
		rg->members = carve(cv, 4 * (size_t)c->max_members);
		rg->tgt = carve(cv, sizeof(struct lec_target) * c->max_links);
	}
	l->links = carve(cv, 4 * (size_t)c->max_links);
	l->next_links = carve(cv, 4 * (size_t)c->max_links);

	l->bin = carve(cv, sizeof(*l->bin) * c->max_bins);
	l->bin_keys = carve(cv, 8 * W * c->max_bins);
	l->bin_order = carve(cv, 4 * (size_t)c->max_bins);
	l->inst = carve(cv, sizeof(*l->inst) * ninst);
	if (c->defer_xor || c->decode) {
		/* every (instance, position) may keep a frame, and the add
		 * loop holds the one it is adding */
		size_t nframes = ninst * c->r + 1;

		l->inst_fr = carve(cv, 4 * ninst * c->r);
		l->frames = carve(cv, sizeof(*l->frames) * nframes);
		l->frame_free = carve(cv, 4 * nframes);
		l->rep_ids = carve(cv, sizeof(struct il_lec_id) * c->r);
		l->rep_src = carve(cv, sizeof(uint8_t *) * c->r);
		l->rep_len = carve(cv, sizeof(uint16_t) * c->r);
		l->rel = carve(cv, sizeof(void *) * c->r);
	} else {
		l->inst_ids = carve(cv, sizeof(struct il_lec_id) * ninst * c->r);
		l->acc_buf = carve(cv, slot * ninst);
	}

	l->nb_ids = carve(cv, 4 * (size_t)c->max_members);
	l->nb_keys = carve(cv, 8 * W * c->max_members);
	l->nb_order = carve(cv, 4 * (size_t)c->max_members);
	l->nb_hash_mask = pow2_at_least(2ull * c->max_members) - 1;
	l->nb_hash = carve(cv, 4 * ((size_t)l->nb_hash_mask + 1));
	l->ent_keys = carve(cv, 8 * W * c->max_links);
	l->ent_region = carve(cv, 4 * (size_t)c->max_links);
	l->ent_mean = carve(cv, sizeof(double) * c->max_links);
	l->ent_order = carve(cv, 4 * (size_t)c->max_links);
	l->newbin_slot = carve(cv, 4 * (size_t)c->max_bins);
	l->glink_first = carve(cv, 4 * (size_t)c->max_groups);
	l->glink_n = carve(cv, 4 * (size_t)c->max_groups);
	l->resid = carve(cv, sizeof(double) * c->max_groups);
	l->gtmp = carve(cv, sizeof(uint16_t) * c->max_groups);
	l->tmpkey = carve(cv, 8 * W);

	l->targets = carve(cv, 4 * (size_t)c->max_members);
	l->staging = carve(cv, slot);

	if (c->decode) {
		l->rec = carve(cv, sizeof(*l->rec) * c->store_msgs);
		l->rec_buf = carve(cv, slot * c->store_msgs);
		l->ht_mask = pow2_at_least(2ull * c->store_msgs) - 1;
		l->ht = carve(cv, 4 * ((size_t)l->ht_mask + 1));
		l->pend = carve(cv, sizeof(*l->pend) * c->store_repairs);
		l->pend_buf = carve(cv, slot * c->store_repairs);
		l->work = carve(cv, sizeof(*l->work) * c->store_msgs);
		l->scratch = carve(cv, slot);
		l->scratch2 = carve(cv, slot);
	}
}

struct il_lec *il_lec_create(const struct il_lec_cfg *cfg, const struct il_lec_ops *ops,
			     char *err, size_t errlen)
{
	struct carve cv = { NULL, 0 };
	struct il_lec *l;
	void *block;

	if (il_lec_cfg_check(cfg, err, errlen))
		return NULL;
	if (!ops || !ops->send || (cfg->decode && !ops->recovered) ||
	    (cfg->defer_xor && (!ops->hold || !ops->release))) {
		if (errlen)
			snprintf(err, errlen, "lec: ops.send%s%s must be set",
				 cfg->decode ? ", ops.recovered" : "",
				 cfg->defer_xor ? ", ops.hold, ops.release" : "");
		return NULL;
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		goto oom;
	l->cfg = *cfg;
	l->ops = *ops;
	l->W = (cfg->max_groups + 63) / 64;
	l->slot_size = lec_round(cfg->max_len, LEC_ALIGN);
	/* AVX2 where the CPU has it, else ISA-L (where linked), else plain C */
	l->avx2 = false;
#if IL_LEC_HAVE_AVX2
	__builtin_cpu_init();
	l->avx2 = cfg->xor_impl == IL_LEC_XOR_AVX2 && __builtin_cpu_supports("avx2");
#endif
	l->isal = IL_LEC_HAVE_ISAL && !l->avx2 && cfg->xor_impl != IL_LEC_XOR_REF;
	l->rng = cfg->seed ? cfg->seed : 0x5eed1ec0ffeeull;
	l->next_due = UINT64_MAX;

	layout(l, &cv);
	block = lec_alloc(l, cv.off);
	if (!block) {
		free(l);
		goto oom;
	}
	if (l->block_len == 0)
		memset(block, 0, cv.off); /* an allocator's memory; our own pages are zero */
	cv.base = block;
	cv.off = 0;
	layout(l, &cv);
	l->footprint = cv.off + sizeof(*l);
	l->by_ref = cfg->defer_xor || cfg->decode;
	if (l->by_ref) {
		l->nframe_free = (uint32_t)((size_t)cfg->max_bins * cfg->stagger *
						    lec_pos_insts(cfg->layer_stride,
								  cfg->max_layers) *
						    cfg->r + 1);
		for (uint32_t f = 0; f < l->nframe_free; f++)
			l->frame_free[f] = l->nframe_free - 1 - f;
	}
	if (cfg->decode) {
		l->rring.n = cfg->store_msgs;
		l->pring.n = cfg->store_repairs;
		for (uint32_t i = 0; i <= l->ht_mask; i++)
			l->ht[i] = LEC_NONE;
	}
	if (lec_regions_init(l)) {
		il_lec_free(l);
		goto oom;
	}
	return l;
oom:
	if (errlen)
		snprintf(err, errlen, "lec: out of memory for the configured sizes");
	return NULL;
}

/*
 * Without an allocator the block is a private anonymous mapping: the
 * kernel's pages are zero already and cost nothing until touched, so
 * the payload stores (most of the block: store_msgs and store_repairs
 * slots) take memory only as far as traffic fills them, and create()
 * does not write megabytes it may never use.
 */
void *lec_alloc(struct il_lec *l, size_t size)
{
	void *p;

	size = (size + LEC_ALIGN - 1) / LEC_ALIGN * LEC_ALIGN;
	if (l->cfg.alloc)
		return l->cfg.alloc(size, LEC_ALIGN, l->cfg.alloc_arg);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	l->block_len = size;
	return p;
}

void il_lec_free(struct il_lec *l)
{
	if (!l)
		return;
	if (l->cfg.defer_xor && l->bin) {
		for (uint32_t b = 0; b < l->cfg.max_bins; b++)
			if (l->bin[b].live)
				lec_bin_drop(l, &l->bin[b]);
	}
	/* grp is the first carve: the start of the block */
	if (l->grp) {
		if (l->block_len)
			munmap(l->grp, l->block_len);
		else if (l->cfg.free)
			l->cfg.free(l->grp, l->cfg.alloc_arg);
	}
	free(l);
}

size_t il_lec_footprint(const struct il_lec *l)
{
	return l->footprint;
}

/* ---- payload buffers and XOR -------------------------------------------- */

void lec_fill(uint8_t *dst, uint32_t *ext, const void *src, uint32_t len)
{
	memcpy(dst, src, len);
	/* what the slot held beyond len goes back to zero */
	if (*ext > len)
		memset(dst + len, 0, *ext - len);
	*ext = len;
}

#if IL_LEC_HAVE_AVX2
/* dst[0, len & ~31) := (acc ? dst : 0) ^ src[0] ^ ... ^ src[n-1], 64 then
 * 32 bytes at a time, any alignment, ordinary (cached) stores: the repair
 * is read again at once (the next XOR into an accumulator, the tx path).
 * ISA-L's xor_gen stores non-temporally, which costs a trip to memory for
 * whoever reads it next (measured in docs/lec.md). Returns the bytes done. */
__attribute__((target("avx2"))) static uint32_t xor_avx2(uint8_t *dst, const uint8_t *const *src,
							 unsigned n, uint32_t len, bool acc)
{
	uint32_t i = 0;

	for (; i + 64 <= len; i += 64) {
		__m256i a, b;
		unsigned j = 0;

		if (acc) {
			a = _mm256_loadu_si256((const __m256i *)(dst + i));
			b = _mm256_loadu_si256((const __m256i *)(dst + i + 32));
		} else {
			a = _mm256_loadu_si256((const __m256i *)(src[0] + i));
			b = _mm256_loadu_si256((const __m256i *)(src[0] + i + 32));
			j = 1;
		}
		for (; j < n; j++) {
			a = _mm256_xor_si256(a, _mm256_loadu_si256((const __m256i *)(src[j] + i)));
			b = _mm256_xor_si256(b, _mm256_loadu_si256((const __m256i *)(src[j] + i + 32)));
		}
		_mm256_storeu_si256((__m256i *)(dst + i), a);
		_mm256_storeu_si256((__m256i *)(dst + i + 32), b);
	}
	for (; i + 32 <= len; i += 32) {
		__m256i a;
		unsigned j = 0;

		if (acc) {
			a = _mm256_loadu_si256((const __m256i *)(dst + i));
		} else {
			a = _mm256_loadu_si256((const __m256i *)(src[0] + i));
			j = 1;
		}
		for (; j < n; j++)
			a = _mm256_xor_si256(a, _mm256_loadu_si256((const __m256i *)(src[j] + i)));
		_mm256_storeu_si256((__m256i *)(dst + i), a);
	}
	return i;
}
#endif

void lec_xor(const struct il_lec *l, uint8_t *dst, uint32_t *ext, const uint8_t *const *src,
	     unsigned n, uint32_t len)
{
	if (n == 0)
		return;
#if IL_LEC_HAVE_AVX2
	if (l->avx2) {
		/* any alignment; the caller's bytes past len are not read */
		uint32_t done = xor_avx2(dst, src, n, len, true);

		for (unsigned k = 0; done < len && k < n; k++)
			il_xor(dst + done, src[k] + done, len - done);
		if (*ext < len)
			*ext = len;
		return;
	}
#endif
	if (l->isal) {
		/* xor_gen writes the XOR of vectors 0..v-2 into vector v-1;
		 * listing dst first and last accumulates. Every slot is
		 * aligned and zero beyond its content, so the length may be
		 * rounded up to whole 32-byte blocks. */
		void *v[IL_LEC_MAX_R + 2];

		v[0] = dst;
		for (unsigned k = 0; k < n; k++)
			v[k + 1] = (void *)(uintptr_t)src[k];
		v[n + 1] = dst;
		if (xor_gen((int)n + 2, (int)lec_round(len, 32), v) != 0) {
			for (unsigned k = 0; k < n; k++)
				il_xor(dst, src[k], len);
		}
	} else {
		for (unsigned k = 0; k < n; k++)
			il_xor(dst, src[k], len);
	}
	if (*ext < len)
		*ext = len;
}

/* dst[from, to) := XOR of every source over it, 32 bytes at a time. */
static void gather_c(uint8_t *dst, const uint8_t *const *src, unsigned n, uint32_t from,
		     uint32_t to)
{
	uint32_t i = from;

	for (; i + 32 <= to; i += 32) {
		uint64_t a[4] = { 0 }, w[4];

		for (unsigned j = 0; j < n; j++) {
			memcpy(w, src[j] + i, 32);
			a[0] ^= w[0];
			a[1] ^= w[1];
			a[2] ^= w[2];
			a[3] ^= w[3];
		}
		memcpy(dst + i, a, 32);
	}
	for (; i < to; i++) {
		uint8_t b = 0;

		for (unsigned j = 0; j < n; j++)
			b ^= src[j][i];
		dst[i] = b;
	}
}

void lec_gather(const struct il_lec *l, uint8_t *dst, uint32_t dst_slack,
		const uint8_t *const *src, const uint16_t *len, unsigned n)
{
	uint32_t lo = len[0], hi = len[0], done = 0, a = (uint32_t)((uintptr_t)src[0] & 31);
	bool aligned = l->isal && n >= 2 && ((uintptr_t)dst & 31) == a && a <= l->cfg.src_slack &&
		       a <= dst_slack;

	for (unsigned j = 1; j < n; j++) {
		if (len[j] < lo)
			lo = len[j];
		if (len[j] > hi)
			hi = len[j];
		aligned = aligned && ((uintptr_t)src[j] & 31) == a;
	}
	/* Every source and dst at the same distance a from a 32-byte boundary
	 * (mbufs with their frames at one offset): with a bytes of slack
	 * before each we may start a bytes early, from the boundary. The
	 * common prefix in one pass over every source; xor_gen only over
	 * whole 32-byte blocks of it, since the caller's bytes beyond a
	 * message are not ours to read. */
#if IL_LEC_HAVE_AVX2
	if (l->avx2)
		done = xor_avx2(dst, src, n, lo, false);
#endif
	if (aligned && lo + a >= 32) {
		void *v[IL_LEC_MAX_R + 1];
		uint32_t span = (lo + a) & ~31u;

		for (unsigned j = 0; j < n; j++)
			v[j] = (void *)(uintptr_t)(src[j] - a);
		v[n] = dst - a;
		if (xor_gen((int)n + 1, (int)span, v) == 0)
			done = span - a;
	}
	gather_c(dst, src, n, done, lo);
	/* the longer messages' tails, over zero */
	if (hi > lo) {
		memset(dst + lo, 0, hi - lo);
		for (unsigned j = 0; j < n; j++)
			if (len[j] > lo)
				il_xor(dst + lo, src[j] + lo, len[j] - lo);
	}
}

bool lec_zero(const uint8_t *buf, uint32_t from, uint32_t to)
{
	uint8_t acc = 0;

	for (uint32_t i = from; i < to; i++)
		acc |= buf[i];
	return acc == 0;
}

/* ---- counters ----------------------------------------------------------- */

const struct il_lec_stats *il_lec_stats(const struct il_lec *l)
{
	return &l->st;
}

int il_lec_group_stats(const struct il_lec *l, uint16_t group, struct il_lec_group_stats *out)
{
	const struct lec_group *g = lec_group_of(l, group);

	if (!g || g->state != LEC_G_LIVE)
		return -1;
	*out = g->st;
	return 0;
}

const char *il_lec_result_name(unsigned result)
{
	static const char *const names[IL_LEC_REP_COUNT_] = {
		[IL_LEC_REP_RECOVERED] = "recovered",
		[IL_LEC_REP_STORED] = "stored",
		[IL_LEC_REP_UNSTORED] = "unstored",
		[IL_LEC_REP_USELESS] = "useless",
		[IL_LEC_REP_STALE] = "stale",
		[IL_LEC_REP_BAD_COUNT] = "bad_count",
		[IL_LEC_REP_BAD_LEN] = "bad_len",
		[IL_LEC_REP_BAD_ID] = "bad_id",
		[IL_LEC_REP_FOREIGN] = "foreign",
		[IL_LEC_REP_INCONSISTENT] = "inconsistent",
		[IL_LEC_REP_NODECODE] = "nodecode",
	};
	return result < IL_LEC_REP_COUNT_ ? names[result] : "unknown";
}
