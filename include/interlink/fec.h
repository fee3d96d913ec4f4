/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Maelstrom FEC codec: layered-interleaving XOR repairs (NSDI 2008, §4.3)
 * and a Reed-Solomon mode at the same (r, c), for a link pair of
 * appliances. Design, parameters and wire format: docs/fec.md.
 *
 * The codec knows no DPDK: it works on byte spans and calls back with the
 * repairs it emits and the packets it recovers, so a data-plane stage can
 * wrap it (copy a repair message into an mbuf behind Ethernet/IPv4/UDP
 * headers; copy a recovered span into an mbuf and send it on). All
 * memory is taken once at create time; the per-packet calls never
 * allocate, block or make system calls. One encoder or decoder belongs
 * to one thread.
 *
 * A "span" is the bytes the code protects for one packet: the IPv4
 * packet, optionally preceded by cfg.span_extra bytes the caller wants
 * carried along (for example the 14-byte Ethernet header, so that the
 * span starts at the cache-line-aligned start of an mbuf's data). The
 * default XOR kernel takes spans at any alignment; see enum
 * il_fec_xor_impl for the one that needs 32-byte alignment.
 */
#ifndef INTERLINK_FEC_H
#define INTERLINK_FEC_H

#include <interlink/xor.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <interlink/fec_wire.h>

#define IL_FEC_MAX_R 32           /* packets per repair */
#define IL_FEC_MAX_C 8            /* layers (XOR) or parity rows (RS) */
#define IL_FEC_MAX_INTERLEAVE 4096
#define IL_FEC_LAT_BUCKETS 24     /* log2 latency histogram buckets */

/* XOR implementations (docs/fec.md, "XOR kernels").
 *   ISAL:        encoder: one pass over the packet for all c bins with
 *                ISA-L's GF(2^8) multiply-accumulate at coefficient 1
 *                (ec_encode_data_update), any alignment, spans of 64
 *                bytes or more; decoder: xor_gen.
 *   REF:         plain C everywhere (any alignment), the tests' reference.
 *   ISAL_XORGEN: xor_gen once per bin (32-byte aligned spans only; others
 *                take the plain C loop, counted).
 *   AVX2:        (default) encoder: one pass over the packet XORing it
 *                into every bin with ordinary (cached) stores, any
 *                alignment; decoder: the same kernel with one bin. Where
 *                the CPU has no AVX2, ISAL.
 * RS mode: ISAL, ISAL_XORGEN and AVX2 use ISA-L's SIMD GF code, REF its base C. */
enum il_fec_xor_impl {
	IL_FEC_XOR_ISAL = 0,
	IL_FEC_XOR_REF = 1,
	IL_FEC_XOR_ISAL_XORGEN = 2,
	IL_FEC_XOR_AVX2 = 3,
};

/* ---- packet identity -------------------------------------------------- */

/* The paper's tuple, every field in network byte order (as on the wire,
 * struct il_fec_id_wire), so ids copy and compare as 16 raw bytes. */
struct il_fec_id {
	uint32_t src;
	uint32_t dst;
	uint16_t ip_id;
	uint16_t ip_len;
	uint32_t csum;
};
IL_STATIC_ASSERT(sizeof(struct il_fec_id) == IL_FEC_ID_LEN, "il_fec_id size");

/* 32-bit check over `len` bytes (docs/fec.md, "Packet identity"). */
uint32_t il_fec_payload_check(const void *p, uint32_t len);

/* Fill *id from the IPv4 packet at ip (avail bytes readable). -1 when it
 * is not IPv4, the header is malformed or the packet is truncated. */
int il_fec_id_ipv4(const void *ip, uint32_t avail, struct il_fec_id *id);
/* The same without the payload check (csum 0): what a decoder needs to
 * look a received packet up, the check coming with the repairs. */
int il_fec_id_ipv4_tuple(const void *ip, uint32_t avail, struct il_fec_id *id);

static inline bool il_fec_id_eq(const struct il_fec_id *a, const struct il_fec_id *b)
{
	return a->src == b->src && a->dst == b->dst && a->ip_id == b->ip_id &&
	       a->ip_len == b->ip_len && a->csum == b->csum;
}

/* ---- configuration ---------------------------------------------------- */

struct il_fec_cfg {
	uint8_t code;        /* IL_FEC_CODE_XOR (default) or IL_FEC_CODE_RS */
	uint8_t r;           /* data packets per repair, 2..IL_FEC_MAX_R (8) */
	uint8_t c;           /* layers (XOR) or parity rows (RS), 1..IL_FEC_MAX_C (3) */
	uint16_t interleave[IL_FEC_MAX_C]; /* XOR: one per layer (1, 11, 19);
	                                    * RS: [0] is the block interleave (1) */
	bool stagger;        /* staggered first firings (true) */
	bool delay_xor;      /* send a repair when its bin next fills (false) */
	uint8_t xor_impl;    /* enum il_fec_xor_impl (AVX2) */
	uint16_t lan_mtu;    /* largest IPv4 packet protected (1500) */
	uint16_t span_extra; /* bytes of a span in front of the IPv4 header (0) */
	uint16_t link_mtu;   /* IP MTU of the link between the appliances (9000) */
	uint16_t link_id;    /* il_hdr.group_id of repairs (0) */
	uint32_t sender_id;  /* il_hdr.sender_id of repairs (0) */
	uint32_t epoch;      /* il_hdr.epoch of repairs (0) */

	uint32_t dec_max_pkts;    /* packets (received, recovered or awaited) kept (4096) */
	uint32_t dec_max_repairs; /* repairs missing several packets kept (1024) */
	uint64_t dec_max_age_ns;  /* evict kept packets and repairs older than this;
	                           * 0 = count bound only (1 s) */
	int32_t verify_l3_off;    /* offset of the IPv4 header in a span: recovered
	                           * spans must yield their recipe id or are
	                           * dropped; -1 turns the check off (0) */

	/* Decoder: spans handed over by il_fec_dec_data_ref are kept by
	 * reference, not copied; release(handle, release_arg) is called when
	 * the decoder no longer needs one (its record left the store, or the
	 * decoder is freed). */
	void (*release)(void *handle, void *arg);
	void *release_arg;

	/* Memory for create(); NULL means aligned_alloc/free. A stage passes
	 * rte_zmalloc_socket/rte_free wrappers for its NUMA node. */
	void *(*alloc)(size_t size, size_t align, void *arg);
	void (*free)(void *p, void *arg);
	void *alloc_arg;
};

void il_fec_cfg_defaults(struct il_fec_cfg *cfg);

/* 0 when the configuration works, -1 (err names the key, the value and
 * what is allowed) when it cannot. warn, when not NULL, receives advice
 * that does not stop the codec, e.g. interleaves that let two repairs
 * share more than one packet (empty string when none). */
int il_fec_cfg_check(const struct il_fec_cfg *cfg, char *err, size_t errlen, char *warn,
		     size_t warnlen);

/* Largest repair message (Interlink header onwards) for cfg. */
uint32_t il_fec_repair_max_len(const struct il_fec_cfg *cfg);

/* ---- encoder ---------------------------------------------------------- */

struct il_fec_enc;

struct il_fec_repair_info {
	uint8_t layer;       /* XOR layer, or RS parity row */
	uint8_t count;       /* packets in the recipe */
	uint16_t interleave;
	uint64_t x_first;    /* encoder packet number of the first packet */
	uint64_t seq;        /* repair sequence number (il_hdr.sender_seq) */
};

/* msg/len: the complete repair message from the Interlink header on, to
 * be sent as the payload of one UDP datagram to the peer appliance. It is
 * valid only during the call. */
typedef void (*il_fec_emit_fn)(void *arg, const uint8_t *msg, uint32_t len,
			       const struct il_fec_repair_info *info);

struct il_fec_enc_stats {
	uint64_t packets;       /* spans added */
	uint64_t bytes;         /* their bytes */
	uint64_t too_long;      /* refused: longer than lan_mtu + span_extra */
	uint64_t empty;         /* refused: zero length */
	uint64_t unaligned;     /* ISAL_XORGEN, span not 32-byte aligned: plain C used */
	uint64_t repairs[IL_FEC_MAX_C]; /* repairs sent, per layer / parity row */
	uint64_t repair_bytes;  /* bytes of repair messages sent */
	uint64_t flushed;       /* repairs sent by il_fec_enc_flush() */
};

struct il_fec_enc *il_fec_enc_create(const struct il_fec_cfg *cfg, il_fec_emit_fn emit,
				     void *arg, char *err, size_t errlen);
void il_fec_enc_free(struct il_fec_enc *e);
/* Back to what create() made: every bin empty, counters zero (the same
 * configuration and memory; e.g. a test or fuzzer's next case). */
void il_fec_enc_reset(struct il_fec_enc *e);

/* Protect one packet: XOR its span into one bin of every layer (RS: into
 * the parities of its block) and emit the repairs that fire. 0, or -1
 * when the span was refused (empty or too long; counted): the caller
 * forwards it unprotected. */
int il_fec_enc_add(struct il_fec_enc *e, const struct il_fec_id *id, const void *span,
		   uint32_t len);

/* il_fec_enc_add for an id without its payload check yet (from
 * il_fec_id_ipv4_tuple): the check of span[check_off, len) (the IPv4
 * payload) is computed into id->csum, by the same pass over the span that
 * XORs it into the bins where the kernel allows (AVX2), so the packet is
 * read once. -1 also when check_off > len (nothing done). */
int il_fec_enc_add_checked(struct il_fec_enc *e, struct il_fec_id *id, const void *span,
			   uint32_t len, uint32_t check_off);

/* Send the repairs held back by delay_xor; with partial, also every bin
 * holding packets (a short recipe), e.g. when traffic stops. */
void il_fec_enc_flush(struct il_fec_enc *e, bool partial);

const struct il_fec_enc_stats *il_fec_enc_stats(const struct il_fec_enc *e);
/* Bytes the encoder allocated. */
size_t il_fec_enc_footprint(const struct il_fec_enc *e);

/* ---- decoder ---------------------------------------------------------- */

struct il_fec_dec;

enum il_fec_how {
	IL_FEC_HOW_IMMEDIATE = 0, /* the repair arrived missing only this packet */
	IL_FEC_HOW_CASCADE,       /* a stored repair, after a later arrival or recovery */
	IL_FEC_HOW_TWO_REPAIR,    /* XOR of two stored repairs that differ by one packet */
	IL_FEC_HOW_RS,            /* Reed-Solomon decode */
};

struct il_fec_recovery {
	const struct il_fec_id *id;
	uint8_t layer;     /* layer (RS: parity row) of the repair that yielded it */
	uint8_t how;       /* enum il_fec_how */
	uint64_t x;        /* encoder packet number */
	uint64_t lat_pkts; /* encoder packets between it and the newest one known */
	uint64_t lat_ns;   /* since its neighbours arrived */
};

/* A recovered span (the packet as the encoder saw it), valid only during
 * the call: send it toward its destination. */
typedef void (*il_fec_deliver_fn)(void *arg, const uint8_t *span, uint32_t len,
				  const struct il_fec_recovery *rec);

enum il_fec_verdict {
	IL_FEC_FORWARD = 0, /* deliver the packet */
	IL_FEC_DROP_LATE,   /* it was recovered already: drop (counted) */
};

/* Why a repair was refused, il_fec_dec_repair's return value. */
enum il_fec_bad {
	IL_FEC_OK = 0,
	IL_FEC_BAD_SHORT,      /* shorter than the headers it announces */
	IL_FEC_BAD_VERSION,
	IL_FEC_BAD_TYPE,       /* not IL_T_FEC_REPAIR */
	IL_FEC_BAD_HDR_LEN,
	IL_FEC_BAD_LINK,       /* group_id is not our link id */
	IL_FEC_BAD_CODE,       /* another code than ours */
	IL_FEC_BAD_RATE,       /* r or c out of range or (RS) not ours */
	IL_FEC_BAD_LAYER,
	IL_FEC_BAD_COUNT,
	IL_FEC_BAD_ID_LEN,
	IL_FEC_BAD_INTERLEAVE,
	IL_FEC_BAD_XOR_LEN,    /* zero, or longer than our spans */
	IL_FEC_BAD_LENGTH,     /* datagram length disagrees with the header */
	IL_FEC_BAD_COUNT_      /* number of reasons */
};
const char *il_fec_bad_name(unsigned reason);

struct il_fec_dec_stats {
	/* data packets */
	uint64_t data_in;
	uint64_t dup_originals;   /* same id seen before: forwarded, not stored */
	uint64_t late_originals;  /* arrived after their recovery: dropped */
	uint64_t data_unstored;   /* too long or empty: forwarded, not stored */
	uint64_t checks_computed; /* payload checks of received packets computed
				   * (tuple shared by two packets, or late arrivals) */
	/* repairs */
	uint64_t repairs_in;
	uint64_t repairs_useless;      /* nothing missing */
	uint64_t repairs_stored;       /* missing several: kept */
	uint64_t repairs_expired;      /* recipe reaches behind the store: ignored */
	uint64_t repairs_inconsistent; /* disagrees with kept packets: ignored */
	uint64_t repairs_lost;         /* gaps in the repair sequence numbers */
	uint64_t repair_bad[IL_FEC_BAD_COUNT_]; /* refused, by reason */
	/* recoveries */
	uint64_t recovered[IL_FEC_MAX_C]; /* by layer (RS: parity row) */
	uint64_t recovered_how[4];        /* by enum il_fec_how */
	uint64_t verify_fail;     /* recovered bytes do not match the id: dropped */
	uint64_t unrecoverable;   /* awaited packets evicted before recovery */
	/* evictions, each with its cause */
	uint64_t pkt_evict_count;     /* packet store full */
	uint64_t pkt_evict_age;       /* older than dec_max_age_ns */
	uint64_t repair_evict_count;  /* repair store full */
	uint64_t repair_evict_age;
	uint64_t repair_evict_orphan; /* a packet it awaits was evicted */
	uint64_t ref_overflow;        /* a packet awaited by too many repairs */
	uint64_t epoch_changes;
	/* recovery latency: bucket 0 holds 0, bucket k >= 1 holds [2^(k-1), 2^k) */
	uint64_t lat_pkts_hist[IL_FEC_LAT_BUCKETS];
	uint64_t lat_us_hist[IL_FEC_LAT_BUCKETS];
	uint64_t lat_pkts_sum;
	uint64_t lat_ns_sum;
	/* occupancy: now and high-water mark */
	uint32_t pkts_live, pkts_hwm;
	uint32_t repairs_live, repairs_hwm;
};

struct il_fec_dec *il_fec_dec_create(const struct il_fec_cfg *cfg, il_fec_deliver_fn deliver,
				     void *arg, char *err, size_t errlen);
void il_fec_dec_free(struct il_fec_dec *d);
/* Back to what create() made: no packet or repair held, counters zero. */
void il_fec_dec_reset(struct il_fec_dec *d);

/* An original packet arrived from the link. The span is copied (it may
 * be needed by repairs still to come); recoveries it enables are
 * delivered before this returns. */
enum il_fec_verdict il_fec_dec_data(struct il_fec_dec *d, const struct il_fec_id *id,
				    const void *span, uint32_t len, uint64_t now_ns);

/*
 * The same, keeping the span by reference: the caller guarantees the
 * bytes stay as they are until cfg.release(handle) (for an mbuf: one more
 * reference, and nothing after the decoder writes into the frame).
 * *kept says whether the decoder took the reference (not for a duplicate,
 * a late original or a span it does not store). With check_known false
 * the id's csum is not filled in (il_fec_id_ipv4_tuple): the decoder then
 * computes the payload check of a received packet only when it needs it
 * (another packet with the same addresses, IP id and length in the
 * store), and matches repairs' recipes to it by the rest of the id and
 * the packet number; a recovered packet is still checked against the
 * whole id its recipe names (verify_l3_off, which must be set).
 */
enum il_fec_verdict il_fec_dec_data_ref(struct il_fec_dec *d, const struct il_fec_id *id,
					bool check_known, const void *span, uint32_t len,
					void *handle, bool *kept, uint64_t now_ns);

/* A repair message (from the Interlink header on) arrived. IL_FEC_OK or
 * the reason it was refused (also counted). */
enum il_fec_bad il_fec_dec_repair(struct il_fec_dec *d, const void *msg, uint32_t len,
				  uint64_t now_ns);

/* Age evictions when no traffic arrives (call now and then). */
void il_fec_dec_tick(struct il_fec_dec *d, uint64_t now_ns);

const struct il_fec_dec_stats *il_fec_dec_stats(const struct il_fec_dec *d);
size_t il_fec_dec_footprint(const struct il_fec_dec *d);

/* ---- XOR kernels and closed forms (tests, benchmarks) ----------------- */

/* The plain one-source XOR is il_xor (<interlink/xor.h>). */
/* dst ^= src[0] ^ ... ^ src[n-1] over len bytes with impl; ISA-L needs
 * every pointer 32-byte aligned and falls back to plain C otherwise, AVX2
 * takes any alignment (plain C where the CPU lacks it). Returns true when
 * a SIMD kernel (ISA-L or AVX2) did the work. */
bool il_fec_xor_acc(unsigned impl, void *dst, const void *const *src, unsigned n,
		    uint32_t len);

/* Maelstrom §4.4: lower bound on the recovered fraction of lost packets
 * for layered interleaving under independent loss p. */
double il_fec_li_bound(double p, unsigned r, unsigned c);
/* Probability that Reed-Solomon (r, c) recovers a lost packet under
 * independent loss p: at most c-1 of the other r+c-1 symbols lost. */
double il_fec_rs_prob(double p, unsigned r, unsigned c);

#endif /* INTERLINK_FEC_H */
