/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Lateral error correction (LEC), after Ricochet (NSDI 2007, section 4):
 * the receivers of overlapping multicast groups exchange XOR repairs of
 * the data they received, composed across the groups they share, so a
 * lost message is repaired in a time set by a node's aggregate receive
 * rate rather than by one group's rate. Design as built: docs/lec.md.
 *
 * This is the algorithm core, with no DPDK, no sockets and no wire
 * format: a host library and a data-plane stage both drive one instance
 * per node (per thread) through four calls:
 *   - il_lec_group_set()/il_lec_group_remove() then il_lec_apply() when
 *     a view changes: regions and repair bins are recomputed;
 *   - il_lec_data() for every data message the node holds (received, or
 *     recovered by other means such as a NAK retransmission): it feeds
 *     the repair bins (repairs leave through ops.send) and the decoder;
 *   - il_lec_repair() for every repair that arrives: messages it yields
 *     leave through ops.recovered, at most once per id;
 *   - il_lec_tick() now and then, for age limits.
 * The clock is passed in (nanoseconds, any monotonic origin). All memory
 * is reserved at create time from sizes in the configuration; no call
 * after create allocates, blocks, locks or makes a system call. With the
 * default allocator the kernel backs the reserved pages as they are first
 * written (minor faults, once per page); a process that wants none later
 * locks its memory (mlockall(MCL_CURRENT | MCL_FUTURE) populates the
 * mapping at create) or passes an allocator of its own. Callbacks run
 * inside the call that triggered them and must not call back into the
 * same instance.
 */
#ifndef INTERLINK_LEC_H
#define INTERLINK_LEC_H

#include <interlink/xor.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IL_LEC_MAX_R 32         /* messages per repair */
#define IL_LEC_MAX_STAGGER 64   /* bin instances per logical bin */
#define IL_LEC_MAX_LAYERS 64    /* repairs per message per target region (c > |G|) */
#define IL_LEC_MAX_C 64.0       /* repair targets per message per group */
#define IL_LEC_MAX_GROUPS 4096  /* groups per node */
#define IL_LEC_MAX_LEN 65535u   /* longest payload */
#define IL_LEC_OBSERVER UINT32_MAX /* self_id of a node in no view (the appliance) */

/* ---- identities and repairs --------------------------------------------- */

/* One data message: the sequencer stamps (epoch, group, seq). Epochs of
 * one group compare as numbers (a newer incarnation stamps a larger one). */
struct il_lec_id {
	uint64_t seq;   /* global sequence number in the group */
	uint32_t epoch; /* sequencer incarnation that stamped it */
	uint16_t group;
	uint16_t zero;  /* reserved, must be 0 */
};

static inline bool il_lec_id_eq(const struct il_lec_id *a, const struct il_lec_id *b)
{
	return a->seq == b->seq && a->epoch == b->epoch && a->group == b->group &&
	       a->zero == b->zero;
}

/* A repair: the XOR of `count` distinct messages, each zero-padded to
 * `len`, the longest of them. len_xor, the XOR of their lengths, gives the
 * length of the one a receiver recovers. The wire form is the caller's. */
struct il_lec_repair {
	const struct il_lec_id *ids;
	const uint8_t *payload; /* len bytes; NULL in ops.send of an instance
	                         * that keeps references (defer_xor, or
	                         * decode): il_lec_repair_xor() writes them
	                         * where the caller wants them */
	uint16_t count;         /* 1..IL_LEC_MAX_R */
	uint16_t len;
	uint16_t len_xor;
	/* by reference: the messages themselves (count of them), and the
	 * instance that keeps them, for il_lec_repair_xor() */
	const uint8_t *const *src;
	const uint16_t *src_len;
	const struct il_lec *from;
};

/* ---- configuration ------------------------------------------------------ */

/* XOR kernels. AVX2 (the default): multi-source XOR in one pass, any
 * alignment, cached stores, when the CPU has AVX2 (else as ISAL); ISAL:
 * ISA-L xor_gen over 32-byte aligned internal copies (every message is
 * copied once into an aligned slot; its stores are non-temporal); REF:
 * plain C straight from the caller's bytes (the tests' reference). */
enum il_lec_xor_impl {
	IL_LEC_XOR_ISAL = 0,
	IL_LEC_XOR_REF = 1,
	IL_LEC_XOR_AVX2 = 2,
};

/* Which bins a node keeps. REGIONS: Algorithm 1, composite bins per
 * region (a Ricochet node: repairs mix every group a target shares with
 * it, so bins fill at the rate of all those groups). GROUPS: one bin per
 * group, drawing its c targets from every region of the group (an
 * observer such as the appliance: one XOR pass per message whatever the
 * regions, each repair to c targets; bins fill at the group's own rate,
 * so pair it with il_lec_flush_aged()). Same targets per message and
 * region either way. */
enum il_lec_plan {
	IL_LEC_PLAN_REGIONS = 0,
	IL_LEC_PLAN_GROUPS = 1,
};

struct il_lec_cfg {
	uint8_t r;        /* messages per repair, 2..IL_LEC_MAX_R (8) */
	uint8_t stagger;  /* instances per logical bin, 1..IL_LEC_MAX_STAGGER (1) */
	uint8_t xor_impl; /* enum il_lec_xor_impl (AVX2) */
	uint8_t plan;     /* enum il_lec_plan (REGIONS) */
	uint8_t max_layers; /* 1..IL_LEC_MAX_LAYERS (1): a bin whose targets per
	                     * repair exceed a region's size (c_G above |G|, each
	                     * member owed several repairs of a message) gets
	                     * that many layers: bin instances that take every
	                     * message, their rounds out of phase, so each of
	                     * a member's repairs of a message has other
	                     * companions. c_G is capped at |G| x max_layers */
	bool layer_stride; /* layer j of a bin deals its messages in turn over
	                    * j + 1 instances (false: every layer takes them in
	                    * order, its rounds out of phase only). Layers in
	                    * order keep the same neighbours together: all the
	                    * repairs of a message share most of their
	                    * companions, so two losses close together are
	                    * in the same repairs and neither is rebuilt.
	                    * Strides 1, 2, 3, ... put any two messages in one
	                    * repair of at most a few layers; the price is
	                    * rounds that span j + 1 times as many messages
	                    * (docs/lec.md, "Layers in order, 2026-11-28") */
	bool decode;      /* keep a message store and decode repairs (true); an
	                   * encode-only node (false) trusts its caller to pass
	                   * each message once */
	bool defer_xor;   /* encode-only: bins keep references to the caller's
	                   * payloads (ops.hold/ops.release) and XOR them all
	                   * at once when they fire, instead of copying each
	                   * message into every bin as it arrives (false). A
	                   * decoding node always does so, from its store */
	double c;         /* default repair targets per message per group (5) */
	uint32_t self_id; /* this node's member id, left out of every view;
	                   * IL_LEC_OBSERVER for a node in none (0) */
	uint32_t max_len; /* longest payload protected, 1..65535 (1500) */
	uint32_t src_slack; /* defer_xor: bytes before every payload that LEC may read
	                     * (an mbuf's headroom), 0..31 used (0). When all
	                     * the payloads of a repair sit at one offset from a
	                     * 32-byte boundary, ISA-L then XORs them from that
	                     * boundary instead of the plain C path */

	uint32_t max_groups;     /* groups at once (64) */
	uint32_t max_group_size; /* members in one group's view (256) */
	uint32_t max_members;    /* distinct neighbours over all groups (1024) */
	uint32_t max_bins;       /* logical repair bins (512) */
	uint32_t max_links;      /* (group, bin) pairs: bins a message enters (4096) */

	uint32_t store_msgs;    /* decoder: messages held or awaited (4096) */
	uint32_t store_repairs; /* decoder: repairs missing several (1024); 0 keeps
	                         * none (immediate decoding only, for comparison) */
	uint64_t max_age_ns;    /* decoder: evict older entries; 0 = count only (1 s) */
	uint64_t seed;          /* target draws (0: a fixed default) */

	/* Memory for create(); NULL means an anonymous mapping of its own
	 * (zero pages, taking memory only as they are first written). */
	void *(*alloc)(size_t size, size_t align, void *arg);
	void (*free)(void *p, void *arg);
	void *alloc_arg;
};

void il_lec_cfg_defaults(struct il_lec_cfg *cfg);
/* 0, or -1 with err naming the key, its value and what is allowed. */
int il_lec_cfg_check(const struct il_lec_cfg *cfg, char *err, size_t errlen);

/* ---- callbacks ---------------------------------------------------------- */

enum il_lec_how {
	IL_LEC_HOW_IMMEDIATE = 0, /* the repair arrived missing only this message */
	IL_LEC_HOW_CASCADE,       /* a stored repair, after later data or a recovery */
	IL_LEC_HOW_PAIR,          /* two stored repairs whose missing sets differ by one */
	IL_LEC_HOW_COUNT_
};

struct il_lec_recovery {
	uint8_t how;            /* enum il_lec_how */
	uint64_t discovered_ns; /* when a repair first named it missing */
	uint64_t data_since;    /* new data messages held since then */
};

struct il_lec_ops {
	/* A repair to send, one copy to each of targets[0..n-1] (member ids,
	 * distinct). rep and targets are valid during the call only. */
	void (*send)(void *arg, const struct il_lec_repair *rep, const uint32_t *targets,
		     uint32_t n);
	/* A message recovered from repairs, reported once per id; the payload
	 * is valid during the call only. */
	void (*recovered)(void *arg, const struct il_lec_id *id, const uint8_t *payload,
			  uint32_t len, const struct il_lec_recovery *info);
	/* defer_xor only: the payload passed with cookie to il_lec_data() must
	 * stay valid until released (a DPDK caller adds n to the mbuf's
	 * reference count; n is 1: the core counts the bins itself)... */
	void (*hold)(void *arg, void *cookie, uint32_t n);
	/* ...and each of these is released once (rte_pktmbuf_free_bulk) */
	void (*release)(void *arg, void *const *cookies, uint32_t n);
	void *arg;
};

/* ---- lifetime ----------------------------------------------------------- */

struct il_lec;

struct il_lec *il_lec_create(const struct il_lec_cfg *cfg, const struct il_lec_ops *ops,
			     char *err, size_t errlen);
/* Releases (ops.release) every payload the bins still reference. */
void il_lec_free(struct il_lec *l);
size_t il_lec_footprint(const struct il_lec *l); /* bytes allocated */

/* ---- views -------------------------------------------------------------- */

/* c of a group whose messages this node decodes but sends no repairs
 * for (a host whose repairs for that group come from the appliance). */
#define IL_LEC_DECODE_ONLY (-1.0)

/* Record group's view: its members (self_id is skipped wherever it
 * appears, duplicates are ignored) and c, its repair targets per message
 * (IL_LEC_DECODE_ONLY: none; other values <= 0: cfg.c). A group not seen
 * before is joined. Takes effect at il_lec_apply(). 0, or -1 with err
 * naming the limit exceeded. */
int il_lec_group_set(struct il_lec *l, uint16_t group, double c, const uint32_t *members,
		     uint32_t n, char *err, size_t errlen);
/* Leave group (effective at il_lec_apply()); -1 when not a member. */
int il_lec_group_remove(struct il_lec *l, uint16_t group);
/* Recompute regions, repair bins and their targets from the recorded
 * views. Bins that survive keep the messages they hold. 0, or -1 with
 * err naming the configuration key too small for these views: the
 * previous regions and bins then stay in force. */
int il_lec_apply(struct il_lec *l, char *err, size_t errlen);

/* ---- data path ---------------------------------------------------------- */

enum il_lec_verdict {
	IL_LEC_NEW = 0, /* first time: deliver it */
	IL_LEC_DUP,     /* held already (received or recovered): drop it */
	IL_LEC_UNKNOWN, /* not protected (unknown group, too long, or older than
	                 * the store remembers): the caller's own window decides */
};

/* A data message the node holds. Repairs its bins complete are sent
 * (ops.send), and stored repairs it completes are decoded (ops.recovered)
 * before this returns. cookie is handed back to ops.hold/ops.release with
 * defer_xor and ignored otherwise (the payload is then copied as needed
 * and may be reused when this returns). */
enum il_lec_verdict il_lec_data(struct il_lec *l, const struct il_lec_id *id,
				const void *payload, uint32_t len, void *cookie,
				uint64_t now_ns);

enum il_lec_result {
	IL_LEC_REP_RECOVERED = 0, /* one message recovered at once (and any cascade) */
	IL_LEC_REP_STORED,        /* several missing: kept until it can be used */
	IL_LEC_REP_UNSTORED,      /* several missing, and no repair store (store_repairs = 0) */
	IL_LEC_REP_USELESS,       /* nothing missing */
	IL_LEC_REP_STALE,         /* names a message older than the store remembers */
	IL_LEC_REP_BAD_COUNT,     /* count 0 or above IL_LEC_MAX_R */
	IL_LEC_REP_BAD_LEN,       /* len 0 or above cfg.max_len */
	IL_LEC_REP_BAD_ID,        /* an id repeated, or a reserved field set */
	IL_LEC_REP_FOREIGN,       /* an id of a group this node is not in */
	IL_LEC_REP_INCONSISTENT,  /* lengths or padding disagree with held messages */
	IL_LEC_REP_NODECODE,      /* the instance was created with decode = false */
	IL_LEC_REP_COUNT_
};
const char *il_lec_result_name(unsigned result);

enum il_lec_result il_lec_repair(struct il_lec *l, const struct il_lec_repair *rep,
				 uint64_t now_ns);

/* Age evictions when no traffic arrives (call now and then). */
void il_lec_tick(struct il_lec *l, uint64_t now_ns);

/* Fire every bin instance holding at least min_fill (>= 1) messages as a
 * short repair, e.g. when a stream ends. Returns the repairs sent. */
uint32_t il_lec_flush(struct il_lec *l, unsigned min_fill);
/* Fire, as short repairs, the bin instances whose oldest message was
 * handed in (il_lec_data's now_ns) at or before now_ns - age_ns: the last
 * messages of a stream, or of a slow group, are not left waiting for
 * more. A bin's layer j of L waits age_ns (1 + j / L), so that layers
 * whose rounds end by age still repair different sets of messages.
 * Returns the repairs sent. */
uint32_t il_lec_flush_aged(struct il_lec *l, uint64_t now_ns, uint64_t age_ns);
/* When the earliest instance the last il_lec_flush_aged() left holding
 * messages comes due, in its clock (UINT64_MAX: none). An instance that
 * starts after that call comes due age_ns after its first message at the
 * earliest, so a caller that calls again at this time, and at least every
 * age_ns / k (k >= 1), fires every instance within one call's lateness of
 * its age. */
uint64_t il_lec_next_due(const struct il_lec *l);

/* In ops.send, when rep->payload is NULL (an instance with defer_xor or
 * decode): the XOR of rep's messages (rep->src, rep->src_len), zero-
 * padded to rep->len, into dst[0, rep->len). When dst and every message
 * sit at one offset a from a 32-byte boundary, with a <= cfg.src_slack and
 * a <= dst_slack, ISA-L runs from the boundary and dst[-a, 0) gets junk;
 * else the plain C path. Call it from ops.send, while rep is valid. */
void il_lec_repair_xor(const struct il_lec_repair *rep, uint8_t *dst, uint32_t dst_slack);

/* ---- counters ----------------------------------------------------------- */

struct il_lec_stats {
	/* data */
	uint64_t data_in;
	uint64_t data_new;
	uint64_t data_dup;           /* held already */
	uint64_t data_stale;         /* older than the store remembers */
	uint64_t drop_data_foreign;  /* group not in any view: not protected */
	uint64_t drop_data_too_long; /* above cfg.max_len: not protected */
	uint64_t drop_data_bad_id;   /* reserved id field set: not protected */
	/* encoding */
	uint64_t bin_adds;       /* message entered a bin instance */
	uint64_t xor_ops;        /* two-input payload XORs into bins */
	uint64_t copy_ops;       /* first message copied into an empty bin (defer_xor:
	                          * one per repair built, its other messages
	                          * counting in xor_ops) */
	uint64_t holds;          /* defer_xor: references taken (ops.hold): one per
	                          * message that any instance keeps */
	uint64_t repairs_sent;   /* repairs with at least one target */
	uint64_t repair_targets; /* copies to send (sum of targets) */
	uint64_t repairs_skipped;    /* drawn with no target: never built */
	uint64_t drop_repair_view;   /* built, but a view change left no target */
	uint64_t drop_bin_view;      /* messages in bins a view change removed */
	uint64_t drop_bin_evicted;   /* decoding: messages left out of a repair because
	                              * the store evicted them before it fired */
	uint64_t flushed;            /* short repairs sent by il_lec_flush(_aged) */
	/* decoding */
	uint64_t repairs_in;
	uint64_t repair_result[IL_LEC_REP_COUNT_];
	uint64_t recovered;
	uint64_t recovered_how[IL_LEC_HOW_COUNT_];
	uint64_t recover_xor_ops;        /* payload XORs while decoding */
	uint64_t repairs_spent;          /* stored repairs used up (their last message
	                                  * recovered or held) */
	uint64_t drop_inconsistent;      /* stored repair found inconsistent later */
	uint64_t drop_unrecoverable;     /* awaited message evicted unrecovered */
	uint64_t drop_msg_evict_count;   /* store full: oldest message evicted */
	uint64_t drop_msg_evict_age;
	uint64_t drop_repair_evict_count;
	uint64_t drop_repair_evict_age;
	uint64_t drop_repair_orphan;     /* a message it awaited was evicted */
	uint64_t drop_repair_refs;       /* a message awaited by too many repairs */
	uint32_t msgs_live, msgs_hwm;
	uint32_t repairs_live, repairs_hwm;
	/* views */
	uint64_t applies;
	uint64_t apply_fail;
	uint64_t c_capped; /* groups whose c exceeded their size (capped) */
};

struct il_lec_group_stats {
	uint64_t data_new;
	uint64_t data_dup;
	uint64_t recovered;
};

const struct il_lec_stats *il_lec_stats(const struct il_lec *l);
/* 0, or -1 when not a member of group. */
int il_lec_group_stats(const struct il_lec *l, uint16_t group, struct il_lec_group_stats *out);

/* ---- regions and bins, as applied (tests, telemetry) ------------------- */

struct il_lec_region_info {
	const uint16_t *groups;  /* the groups whose intersection it is, ascending */
	uint32_t ngroups;
	const uint32_t *members; /* its neighbours (order changes with draws) */
	uint32_t nmembers;
};

struct il_lec_bin_info {
	const uint16_t *groups; /* the groups whose messages it takes, ascending */
	uint32_t ngroups;
	uint32_t ntargets;      /* regions it draws targets from */
};

uint32_t il_lec_region_count(const struct il_lec *l);
/* The region's groups are copied into gbuf (gmax entries). -1 if i is out
 * of range or gbuf too short. */
int il_lec_region_get(const struct il_lec *l, uint32_t i, uint16_t *gbuf, uint32_t gmax,
		      struct il_lec_region_info *out);
uint32_t il_lec_bin_count(const struct il_lec *l);
int il_lec_bin_get(const struct il_lec *l, uint32_t i, uint16_t *gbuf, uint32_t gmax,
		   struct il_lec_bin_info *out);
/* Mean targets bin i draws from its t-th region, and that region's index. */
double il_lec_bin_target(const struct il_lec *l, uint32_t i, uint32_t t, uint32_t *region);
/* Mean targets per repair that the bin named by groups bin[] draws from
 * the region named by groups reg[]; 0 when there is no such bin, region or
 * pairing. Group lists in any order. */
double il_lec_takes(const struct il_lec *l, const uint16_t *bin, uint32_t nbin,
		    const uint16_t *reg, uint32_t nreg);

/* ---- XOR (tests, benchmarks): il_xor, <interlink/xor.h> ----------------- */

#ifdef __cplusplus
}
#endif

#endif /* INTERLINK_LEC_H */
