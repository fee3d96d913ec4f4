/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Decoder state shared by fec_store.c (bounded packet and repair stores)
 * and fec_dec.c (repair handling and recovery).
 *
 * Packet store: a FIFO ring of records, one per packet id the decoder
 * knows: received (HAVE), recovered (RECOVERED) or named by a repair but
 * not here yet (MISSING). Each record owns one payload slot. An
 * open-addressing hash table (linear probing, backward-shift deletion)
 * maps ids to records. The oldest record is evicted when the ring is
 * full or, once settled, when it is older than the age limit.
 *
 * Repair store: repairs still missing several packets, in a ring that
 * may have holes (a repair leaves as soon as it is used). A stored repair
 * is kept reduced: the packets present when it arrived, and every packet
 * that arrived or was recovered since, are already XORed out of its
 * payload (RS: their parity contribution subtracted). Its payload is
 * therefore the code of its missing packets alone, it never needs a kept
 * packet again, and it is usable the moment one packet is left (RS: as
 * soon as enough parities of the block hold the same missing set).
 * MISSING records list the stored repairs that await them (refs, with a
 * generation number so a reused repair slot is not mistaken).
 */
#ifndef IL_FEC_DEC_INTERNAL_H
#define IL_FEC_DEC_INTERNAL_H

#include "fec_internal.h"

#define REC_NONE UINT32_MAX
#define X_UNKNOWN UINT64_MAX
#define REC_MAXREF IL_FEC_MAX_C

enum rec_state {
	REC_FREE = 0,
	REC_HAVE,
	REC_RECOVERED,
	REC_MISSING,
};

struct rec_ref {
	uint32_t idx;
	uint32_t gen;
};

struct dec_rec {
	struct il_fec_id id;
	uint64_t x;    /* encoder packet number, once a repair told us */
	uint64_t t_ns; /* arrival (MISSING: when its neighbours arrived) */
	const uint8_t *ext; /* HAVE by reference: the caller's bytes (else the slot) */
	void *handle;       /* ... released through cfg.release */
	uint32_t hash;      /* of the id without its payload check */
	uint16_t len;
	uint8_t state;
	uint8_t nref;
	uint8_t csum_known; /* id.csum is the payload check (else not computed yet) */
	struct rec_ref ref[REC_MAXREF];
};

struct dec_pend {
	uint32_t gen;
	uint8_t live;
	uint8_t layer; /* XOR layer or RS parity row */
	uint8_t nmiss;
	uint8_t count;
	uint16_t xor_len;
	uint16_t len_code;
	uint16_t interleave;
	uint64_t x_first;
	uint64_t t_ns;
	uint32_t miss[IL_FEC_MAX_R];    /* records still missing */
	uint8_t miss_pos[IL_FEC_MAX_R]; /* their places in the recipe */
};

struct il_fec_dec {
	struct il_fec_cfg cfg;
	il_fec_deliver_fn deliver;
	void *arg;
	struct il_fec_dec_stats st;
	uint32_t slot;
	uint32_t max_span;
	uint64_t settle;
	bool rs;
	bool ref_impl;

	struct dec_rec *rec;
	uint8_t *rec_buf;
	uint32_t nrec, rec_old, rec_next, rec_live;
	uint32_t *ht;
	uint32_t ht_mask;

	struct dec_pend *pend;
	uint8_t *pend_buf;
	uint32_t npend, pend_tail, pend_next, pend_used;

	uint32_t *work; /* records whose waiting repairs must be updated */
	uint32_t nwork, work_cap;

	uint8_t *scratch; /* IL_FEC_MAX_C slots for RS outputs nobody awaits */

	bool have_epoch, have_seq, have_horizon, have_x;
	uint32_t epoch;
	uint64_t next_seq;
	uint64_t horizon; /* highest packet number evicted from the store */
	uint64_t x_high;  /* newest packet number named by a repair */
	uint64_t t_high;  /* when x_high was learnt */
	uint64_t ns_pp_q8; /* smoothed ns per encoder packet, x 256 */
	size_t footprint;
	struct fec_gf gf;
};

/* The record's slot: where a copied or rebuilt packet is written. */
static inline uint8_t *rec_slot(const struct il_fec_dec *d, uint32_t i)
{
	return d->rec_buf + (size_t)i * d->slot;
}

/* The record's packet bytes, wherever they are. */
static inline const uint8_t *rec_data(const struct il_fec_dec *d, uint32_t i)
{
	return d->rec[i].ext != NULL ? d->rec[i].ext : rec_slot(d, i);
}

static inline uint8_t *pend_data(const struct il_fec_dec *d, uint32_t i)
{
	return d->pend_buf + (size_t)i * d->slot;
}

static inline bool ref_valid(const struct il_fec_dec *d, struct rec_ref r)
{
	return d->pend[r.idx].live && d->pend[r.idx].gen == r.gen;
}

/* Ids are hashed and indexed without their payload check: a received
 * packet's check is computed only when two packets share the rest. */
uint32_t fec_id_hash(const struct il_fec_id *id);
static inline bool fec_tuple_eq(const struct il_fec_id *a, const struct il_fec_id *b)
{
	return a->src == b->src && a->dst == b->dst && a->ip_id == b->ip_id &&
	       a->ip_len == b->ip_len;
}
/* Next record after table position *pos (start with *pos = hash &
 * ht_mask) whose id has the same addresses, IP id and length, or REC_NONE. */
uint32_t dec_next_tuple(const struct il_fec_dec *d, const struct il_fec_id *id, uint32_t hash,
			uint32_t *pos);
/* The record a recipe entry names (id with its check, packet number x). */
uint32_t dec_lookup(struct il_fec_dec *d, const struct il_fec_id *id, uint32_t hash, uint64_t x);
/* Make record ri's payload check known (a HAVE record computes it from
 * its bytes); false when its bytes are not an IPv4 packet. */
bool dec_rec_check(struct il_fec_dec *d, uint32_t ri);
/* A new record (evicting the oldest if the store is full). */
uint32_t dec_rec_alloc(struct il_fec_dec *d, const struct il_fec_id *id, uint32_t hash,
		       uint64_t now, uint8_t state);
uint32_t dec_pend_alloc(struct il_fec_dec *d, uint64_t now);
void dec_pend_free(struct il_fec_dec *d, uint32_t pi);
bool dec_ref_add(struct il_fec_dec *d, struct dec_rec *r, uint32_t pi);
/* Age evictions. */
void dec_expire(struct il_fec_dec *d, uint64_t now);
/* The encoder restarted: forget packet numbers and stored repairs. */
void dec_epoch_reset(struct il_fec_dec *d);
static inline void dec_push(struct il_fec_dec *d, uint32_t ri)
{
	if (d->nwork < d->work_cap)
		d->work[d->nwork++] = ri;
}

#endif /* IL_FEC_DEC_INTERNAL_H */
