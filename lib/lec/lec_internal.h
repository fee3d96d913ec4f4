/* SPDX-License-Identifier: BSD-3-Clause
 *
 * LEC internals shared by the library's files (not installed).
 *
 * Groups live in slots; a bitset over slots (W 64-bit words) names a set
 * of groups, which is how regions and bins are keyed.
 *
 * Regions (lec_regions.c) are double-buffered: il_lec_apply() computes the
 * next set beside the one in force and swaps only when every limit holds,
 * so a view too large for the configuration leaves LEC as it was. Bins
 * are slots that survive an apply when their group set does.
 *
 * Payload buffers ("slots": bin accumulators, stored messages, stored
 * repairs, scratch) are LEC_ALIGN-aligned, slot_size bytes, and zero
 * beyond the length of what they hold, so the ISA-L kernel may XOR any
 * of them over a length rounded up to 32 bytes.
 */
#ifndef IL_LEC_INTERNAL_H
#define IL_LEC_INTERNAL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <interlink/err.h>
#include <interlink/lec.h>

#define LEC_ALIGN 64u
#define LEC_NONE UINT32_MAX
#define LEC_REF_MAX 8 /* stored repairs one awaited message can feed */
#define LEC_EPS 1e-9  /* residual targets below this are spent */

static inline uint32_t lec_round(uint32_t v, uint32_t a)
{
	return (v + a - 1) / a * a;
}

/* splitmix64: seeds and draws; one state per instance. */
static inline uint64_t lec_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, n) for n >= 1 (multiply-shift; the bias is < n / 2^32). */
static inline uint32_t lec_below(uint64_t *s, uint32_t n)
{
	return (uint32_t)(((lec_rand(s) >> 32) * (uint64_t)n) >> 32);
}

/* ---- groups ------------------------------------------------------------- */

enum lec_gstate {
	LEC_G_FREE = 0,
	LEC_G_LIVE,
	LEC_G_GONE, /* removed; the slot is freed at the next apply */
};

struct lec_group {
	uint8_t state;
	uint16_t id;
	double c;          /* as asked; 0: decode only */
	uint32_t n;        /* members in the view, self excluded */
	uint32_t *members; /* max_group_size entries */
	/* bins a message of this group enters, in force */
	uint32_t link_first, link_n;
	/* decoder: the newest id evicted from the store (older ones may have
	 * been held and forgotten, so they are never recovered) */
	bool h_valid;
	uint32_t h_epoch;
	uint64_t h_seq;
	struct il_lec_group_stats st;
};

/* ---- regions and bins --------------------------------------------------- */

/* A bin draws `whole` targets from a region, plus one more with
 * probability frac / 2^32 (the paper's floor/ceiling alternation). */
struct lec_target {
	uint32_t region;
	uint32_t whole;
	uint32_t frac;
	double mean;
};

struct lec_regions {
	uint32_t n;
	uint64_t *keys;   /* n x W */
	uint32_t *start;  /* into members */
	uint32_t *size;
	uint32_t *members; /* member ids, grouped by region */
	struct lec_target *tgt; /* targets of every bin, by bin */
	uint32_t ntgt;
};

struct lec_inst {
	uint32_t n;  /* messages entered this round */
	uint32_t nx; /* of which kept (xor_on) */
	uint32_t ext; /* acc bytes that may be non-zero */
	uint16_t len_max, len_xor;
	bool xor_on; /* the drawn target count for this round is > 0 */
	uint64_t seed; /* replays this round's target counts */
	uint64_t t_first; /* now_ns of the round's first message (flush by age) */
	/* copying: the ids and the XOR so far; by reference (defer_xor or
	 * decoding): the frames kept (indexes into l->frames), r entries */
	struct il_lec_id *ids;
	uint8_t *acc;
	uint32_t *fr;
};

/* One message the bins reference, however many of them do. defer_xor:
 * the caller's payload, whose reference (ops.hold) is taken once and
 * given back when the last instance holding it is done with it; a
 * decoding node: the message's record in the store (cookie is its index)
 * and the record's generation, so that a message the store evicted
 * meanwhile is left out of the repair rather than read. */
struct lec_frame {
	const uint8_t *src;
	void *cookie;
	struct il_lec_id id;
	uint16_t len;
	uint16_t refs; /* instances holding it */
	uint32_t gen;  /* decoding: the record's generation */
};

struct lec_bin {
	bool live;
	uint8_t layers;            /* instances per stagger position (layers) */
	bool always;               /* every round draws a target (whole counts >= 1) */
	uint32_t rr;               /* next stagger position */
	uint32_t nin;              /* messages in (layer_stride: layer j's turn) */
	uint32_t tgt_first, tgt_n; /* in regions.tgt of the set in force */
	struct lec_inst *inst;     /* stagger x lec_pos_insts() entries, by
	                            * position, then layer (layer_stride: layer
	                            * j's j + 1 instances from j (j + 1) / 2) */
};

/* ---- decoder stores ----------------------------------------------------- */

enum lec_rstate {
	LEC_R_FREE = 0,
	LEC_R_HELD,    /* received or recovered: payload in its slot */
	LEC_R_AWAITED, /* named missing by a stored repair */
};

struct lec_ref {
	uint32_t idx;
	uint32_t gen;
};

struct lec_rec {
	struct il_lec_id id;
	uint32_t hash;
	uint32_t gen;
	uint32_t ext;
	uint16_t len;
	uint16_t gslot;
	uint8_t state;
	uint8_t nref;
	uint64_t t_ns;      /* arrival; AWAITED: discovery */
	uint64_t disc_new;  /* data_new at discovery */
	struct lec_ref ref[LEC_REF_MAX];
};

struct lec_pend {
	uint32_t gen;
	uint8_t live;
	uint8_t nmiss;
	uint16_t len;     /* payload bytes */
	uint16_t len_xor; /* XOR of the missing messages' lengths */
	uint32_t ext;
	uint64_t t_ns;
	uint32_t miss[IL_LEC_MAX_R]; /* AWAITED records */
};

/* A FIFO ring whose entries may leave early (holes). */
struct lec_ring {
	uint32_t n, head, tail, used;
};

struct il_lec {
	struct il_lec_cfg cfg;
	struct il_lec_ops ops;
	struct il_lec_stats st;
	uint64_t rng;
	uint32_t W;         /* words per group bitset */
	uint32_t slot_size; /* bytes per payload buffer */
	bool isal;  /* ISA-L xor_gen over aligned slots */
	bool avx2;  /* our AVX2 kernels, any alignment */
	size_t footprint;
	size_t block_len; /* the block's length when it is our own mapping, else 0 */

	/* groups */
	struct lec_group *grp;
	uint16_t *gmap; /* group id -> slot + 1; 0: none */
	uint32_t ngroups_live;
	bool dirty;

	/* regions in force and the next set */
	struct lec_regions reg[2];
	unsigned cur;
	uint32_t *links; /* bin slots by group, in force */
	uint32_t nlinks;

	/* bins */
	struct lec_bin *bin;
	uint64_t *bin_keys;  /* max_bins x W */
	uint32_t *bin_order; /* live bin slots sorted by key */
	uint32_t nbins;
	struct lec_inst *inst;
	struct il_lec_id *inst_ids;
	/* il_lec_flush_aged: when the earliest instance it left holding comes
	 * due (UINT64_MAX: none) */
	uint64_t next_due;
	uint8_t *acc_buf;
	uint32_t *inst_fr;
	/* by reference: the frames the bins hold, and the free ones (a stack) */
	bool by_ref; /* defer_xor or decode */
	struct lec_frame *frames;
	uint32_t *frame_free;
	uint32_t nframe_free;
	/* defer_xor: a firing repair's ids, sources and lengths; cookies to release */
	struct il_lec_id *rep_ids;
	const uint8_t **rep_src;
	uint16_t *rep_len;
	void **rel;

	/* apply() scratch */
	uint32_t *nb_ids;     /* neighbour ids */
	uint64_t *nb_keys;    /* their group sets */
	uint32_t *nb_order;
	uint32_t *nb_hash;    /* id -> neighbour index + 1 */
	uint32_t nb_hash_mask;
	uint64_t *ent_keys;   /* plan entries: bin set, region, mean */
	uint32_t *ent_region;
	double *ent_mean;
	uint32_t *ent_order;
	uint32_t *newbin_slot; /* per distinct key of the plan */
	uint32_t *next_links;
	uint32_t *glink_first, *glink_n;
	double *resid;
	uint16_t *gtmp;
	uint64_t *tmpkey;

	/* encoder output */
	uint32_t *targets; /* max_members */
	uint8_t *staging;  /* encode-only ISA-L: an aligned copy of the message */
	uint32_t staging_ext;

	/* decoder */
	struct lec_rec *rec;
	uint8_t *rec_buf;
	struct lec_ring rring;
	uint32_t rec_live;
	uint32_t *ht;
	uint32_t ht_mask;
	struct lec_pend *pend;
	uint8_t *pend_buf;
	struct lec_ring pring;
	struct lec_ref *work;
	uint32_t nwork;
	bool in_cascade;
	uint8_t *scratch, *scratch2;
	uint32_t scratch_ext, scratch2_ext;
};

static inline bool key_has(const uint64_t *k, uint32_t g)
{
	return (k[g >> 6] >> (g & 63)) & 1;
}

static inline void key_set(uint64_t *k, uint32_t g)
{
	k[g >> 6] |= 1ull << (g & 63);
}

static inline uint8_t *rec_slot(const struct il_lec *l, uint32_t i)
{
	return l->rec_buf + (size_t)i * l->slot_size;
}

static inline uint8_t *pend_slot(const struct il_lec *l, uint32_t i)
{
	return l->pend_buf + (size_t)i * l->slot_size;
}

static inline struct lec_group *lec_group_of(const struct il_lec *l, uint16_t id)
{
	uint16_t s = l->gmap[id];

	return s ? &l->grp[s - 1] : NULL;
}

/* Bin instances per stagger position for a bin of `layers` layers: one per
 * layer, or with cfg.layer_stride j + 1 for layer j. */
static inline uint32_t lec_pos_insts(bool stride, uint32_t layers)
{
	return stride ? layers * (layers + 1) / 2 : layers;
}

/* The first of layer j's instances in a position, with cfg.layer_stride:
 * the layers before it have 1, 2, ..., j instances. */
static inline uint32_t lec_layer_first(uint32_t j)
{
	return lec_pos_insts(true, j);
}

/* The layer of instance i of a position. */
static inline uint32_t lec_inst_layer(bool stride, uint32_t i)
{
	uint32_t j = 0;

	if (!stride)
		return i;
	while (lec_layer_first(j + 1) <= i)
		j++;
	return j;
}

/* lec_core.c */
void *lec_alloc(struct il_lec *l, size_t size);
/* dst := src (len bytes), zeroing what dst held beyond; *ext tracks it. */
void lec_fill(uint8_t *dst, uint32_t *ext, const void *src, uint32_t len);
/* dst ^= src[0] ^ ... ^ src[n-1]; each source holds at most len bytes and
 * is zero beyond (ISA-L: aligned slots); *ext grows to cover len. */
void lec_xor(const struct il_lec *l, uint8_t *dst, uint32_t *ext, const uint8_t *const *src,
	     unsigned n, uint32_t len);
/* dst[0, max len) := src[0] ^ ... ^ src[n-1] (n >= 1), each zero-padded
 * from its own length, any alignment. When every source and dst sit at
 * the same offset a from a 32-byte boundary, with a <= cfg.src_slack and
 * a <= dst_slack, ISA-L XORs from the boundary before them, writing junk
 * into dst[-a, 0). */
void lec_gather(const struct il_lec *l, uint8_t *dst, uint32_t dst_slack,
		const uint8_t *const *src, const uint16_t *len, unsigned n);
/* true when buf[from, to) is all zero */
bool lec_zero(const uint8_t *buf, uint32_t from, uint32_t to);

/* lec_regions.c */
int lec_regions_init(struct il_lec *l);
void lec_group_purge(struct il_lec *l, uint32_t gslot);

/* lec_enc.c */
void lec_bins_add(struct il_lec *l, const struct lec_group *g, const struct il_lec_id *id,
		  const uint8_t *src, uint32_t len, void *cookie, uint64_t now);
void lec_inst_reset(struct il_lec *l, struct lec_bin *b, struct lec_inst *in);
/* messages held by the bin's instances (dropped with it) */
uint32_t lec_bin_drop(struct il_lec *l, struct lec_bin *b);

/* lec_store.c */
uint32_t lec_id_hash(const struct il_lec_id *id);
uint32_t lec_lookup(const struct il_lec *l, const struct il_lec_id *id, uint32_t hash);
uint32_t lec_rec_alloc(struct il_lec *l, const struct il_lec_id *id, uint32_t hash,
		       uint16_t gslot, uint64_t now, uint8_t state);
void lec_rec_free(struct il_lec *l, uint32_t ri, bool evicted);
uint32_t lec_pend_alloc(struct il_lec *l, uint64_t now);
void lec_pend_free(struct il_lec *l, uint32_t pi);
bool lec_ref_add(struct il_lec *l, struct lec_rec *r, uint32_t pi);
void lec_expire(struct il_lec *l, uint64_t now);
bool lec_stale(const struct lec_group *g, const struct il_lec_id *id);

static inline bool lec_ref_valid(const struct il_lec *l, struct lec_ref r)
{
	return l->pend[r.idx].live && l->pend[r.idx].gen == r.gen;
}

#endif /* IL_LEC_INTERNAL_H */
