/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The stage interface: every data-plane job (classify, sequence, NAK
 * service, impairment, FEC, FT-TCP...) is a stage with one entry point:
 *
 *     uint16_t process(struct il_stage *st, struct rte_mbuf **pkts, uint16_t n);
 *
 * A stage takes a burst, keeps the survivors compacted at the front of
 * pkts and returns their count; they go on to the next stage of the chain
 * and finally to the chain's tx port. pkts always has room for
 * IL_BURST_CAP entries, so a stage may return more packets than it was
 * given (repairs, packets released by a delay line), never more than
 * IL_BURST_CAP. A stage may also emit packets to any port with il_emit()
 * (retransmissions, pass-through) and drop packets, counting each drop
 * under a named counter. A stage whose type sets `poll` is called on every
 * poll-loop iteration, with n == 0 when nothing arrived, so it can release
 * held packets.
 *
 * Stages never allocate from the heap, block, lock or make syscalls in
 * process(); they own per-instance state and run on exactly one lcore.
 */
#ifndef INTERLINK_STAGE_H
#define INTERLINK_STAGE_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <rte_mbuf.h>
#include <rte_ethdev.h>

#include <interlink/config.h>

#define IL_BURST 32
#define IL_BURST_CAP (4 * IL_BURST)
#define IL_MAX_PORTS 8
#define IL_MAX_STAGE_COUNTERS 48
#define IL_NAME_LEN 32

/* 1: the poll loop counts TSC cycles per stage (st->tsc_busy); the build
 * option stage_cycles sets it. */
#ifndef IL_STAGE_CYCLES
#define IL_STAGE_CYCLES 1
#endif

/* Per-packet metadata: 8 bytes kept in the mbuf's `hash` field, which is
 * in the first cache line that the PMD has just written; a private area
 * would cost one more cold cache line per packet. Only RSS and flow
 * director results live there, and nothing after classify needs them. */
enum il_kind {
	IL_K_NONE = 0, /* unclassified or not ours: pass through */
	IL_K_DATA,     /* native DATA, validated */
	IL_K_NAK,      /* NAK, validated */
	IL_K_RAW,      /* plain UDP matching a raw-mode group filter */
	IL_K_CONTROL,  /* other valid Interlink message */
};

/* Sets of kinds, one bit per enum il_kind. */
#define IL_KIND_BIT(k) ((uint8_t)(1u << (k)))
#define IL_KINDS_ALL 0xffu

struct __attribute__((may_alias)) il_meta {
	uint8_t kind;       /* enum il_kind */
	uint8_t l3_off;     /* IPv4 header (<= 18) */
	uint8_t l4_off;     /* UDP header (<= 78) */
	uint8_t il_off;     /* UDP payload (<= 86) */
	uint16_t group_idx; /* configured group index (DATA, RAW, NAK; CONTROL:
			     * IL_GROUP_IDX_NONE when its group is not configured) */
	uint16_t spare;     /* a stray on a hand-over ring: its chain (shard.h) */
};

/* il_meta.group_idx of a CONTROL frame whose group is not configured. */
#define IL_GROUP_IDX_NONE 0xffffu

/* No private area is needed any more; kept for pools made elsewhere. */
#define IL_MBUF_PRIV_SIZE 0

static inline struct il_meta *il_meta(struct rte_mbuf *m)
{
	RTE_BUILD_BUG_ON(sizeof(struct il_meta) != sizeof(m->hash));
	return (struct il_meta *)&m->hash;
}

/* Every mbuf a stage makes comes from here: rte_pktmbuf_alloc() leaves
 * `hash` (il_meta) as the mbuf's last user left it, and a stage after this
 * one would act on those stale tags. A made packet starts untagged
 * (IL_K_NONE: not Interlink, pass through). */
static inline struct rte_mbuf *il_pktmbuf_alloc(struct rte_mempool *mp)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(mp);

	if (likely(m != NULL))
		memset(il_meta(m), 0, sizeof(struct il_meta));
	return m;
}

/* What a stage type needs of il_meta, and what it does to it (checked per
 * chain when the pipeline is built: a chain that cannot give a stage what
 * it needs is refused, naming the stages). */
#define IL_META_TAGS 0x1u /* kind, offsets and group of every packet: classify */

struct il_app;
struct il_stage;
struct il_shard;

/* Per-lcore transmit side: one buffered tx queue per port. */
struct il_lcore_io {
	unsigned lcore_id;
	struct rte_eth_dev_tx_buffer *txb[IL_MAX_PORTS];
	uint16_t txq[IL_MAX_PORTS];
	uint16_t port_id[IL_MAX_PORTS]; /* DPDK port ids */
	uint64_t tx_dropped[IL_MAX_PORTS]; /* tx ring full: counted drops */
	uint64_t tx_link_down[IL_MAX_PORTS]; /* not sent: the port's link was down */
	uint32_t link_down;                /* bit p: no burst on port p (memif_guard.h) */
	uint64_t tx_queued[IL_MAX_PORTS];  /* handed to the tx buffer */
	uint64_t rx[IL_MAX_PORTS];         /* received by this lcore */
	struct il_shard *shard;            /* its shard (shard.h); NULL without */
	uint16_t rx_port;                  /* the port of the burst in the chain (app index) */
	/* Kinds (IL_KIND_BIT) the burst in the chain may hold: every kind
	 * before classify, which narrows it to those it tagged; a stage that
	 * does not keep kinds (il_stage_type.kinds_kept) widens it again. */
	uint8_t kinds;
	uint64_t tx_muted;                 /* not sent: the appliance is muted (app.h) */
	/* Packets stages emit go out after the survivors of the burst that
	 * produced them, so a retransmission never overtakes its original. */
	uint16_t n_defer;
	uint16_t defer_port[2 * IL_BURST_CAP];
	struct rte_mbuf *defer[2 * IL_BURST_CAP];
};

/* Where a stage's state() reports: each value under a key, either for the
 * stage as a whole (group -1) or for one configured group (its index in
 * app->groups). The reader names and places the values (the JSON summary
 * and telemetry say "group<ID>_<key>"), so a stage keeps no name buffers
 * and there is no limit on how many values it reports. */
struct il_state_sink {
	void (*put)(struct il_state_sink *sink, int group, const char *key, uint64_t val);
};

static inline void il_state_put(struct il_state_sink *sink, int group, const char *key,
				uint64_t val)
{
	sink->put(sink, group, key, val);
}

struct il_stage_type {
	const char *name;
	const char *help;
	/* Named counters, in the order of st->ctr[]. */
	const char *const *counter_names;
	unsigned n_counters;
	/* Build the instance from its config node; on error fill err (naming
	 * the key and what is allowed) and return -1. */
	int (*create)(struct il_stage *st, const struct il_cfg *params, struct il_app *app,
		      char *err, size_t errlen);
	/* Called once the instance is bound to an lcore (io is valid). */
	int (*bind)(struct il_stage *st, char *err, size_t errlen);
	uint16_t (*process)(struct il_stage *st, struct rte_mbuf **pkts, uint16_t n);
	/* Call process() on every poll iteration, even with n == 0. */
	bool poll;
	void (*destroy)(struct il_stage *st);
	/* Optional: last words. Called once when the appliance stops, after
	 * its workers have, with the ports still up: frames go out at once
	 * with il_app_send_now() (an IGMP leave for each group reported). */
	void (*stop)(struct il_stage *st);
	/* Optional: state beyond the counters (queue depths, per-group
	 * sequence numbers...), each value handed to the sink as it is read. */
	void (*state)(const struct il_stage *st, struct il_state_sink *sink);
	/* Optional, called by the main loop (never on the fast path): print
	 * what the stage has found worth a warning since the last call. The
	 * stage itself limits how often it has something to say. */
	void (*log)(struct il_stage *st, FILE *out);
	/* IL_META_* this stage reads on every packet it is given; sets on
	 * every packet it passes on; loses (it adds packets to the burst that
	 * may be Interlink frames but are not tagged as such). */
	uint8_t meta_needs, meta_sets, meta_loses;
	/* Dispatch by kind: the kinds (IL_KIND_BIT) of the packets this stage
	 * acts on; a burst holding none of them goes past it untouched, not
	 * even scanned (0: every burst). A stage instance may widen its own
	 * set at create (il_stage.kinds). A poll stage is always called and
	 * checks il_burst_has() itself. */
	uint8_t kinds;
	/* Its survivors hold no kind the burst did not (a stage that turns
	 * packets into another kind ORs it into io->kinds). Otherwise the
	 * pipeline assumes every kind after it. */
	bool kinds_kept;
	/* It writes into the frames it passes on (a stage before it that
	 * keeps references to them, fec_dec, copies instead). */
	bool writes_frames;
	/* Optional: the most mbufs the instance may hold between bursts (a
	 * history, a decoder's store), for sizing the pool. Called once the
	 * stages are placed on their chains, before the pool exists. */
	uint32_t (*mbufs_held)(const struct il_stage *st);
	/* Optional: change parameters at run time (interlink-ctl set). Called
	 * by the poll loop of the stage's lcore between two bursts, so it may
	 * change any state without a lock; params is a map of the keys to
	 * change, read with the config's getters (errors name the key and
	 * what is allowed; -1 leaves the stage as it was). */
	int (*set)(struct il_stage *st, const struct il_cfg *params, char *err, size_t errlen);
	/* Optional: work the stage does on an lcore of its own, its service
	 * lcore (il_stage.service_lcore and has_service, set by create from the
	 * stage's own config; without, this is never called). Called in a loop on that
	 * lcore from the start of the poll loops until the appliance stops;
	 * returns whether it found work. It shares with the stage's chain lcore
	 * only what the stage hands over itself (rings); it sends nothing on a
	 * port (it has no tx queue): what it makes goes back to the chain lcore
	 * to be sent. */
	int (*service)(struct il_stage *st);
	const char *service_key; /* the stage's config key that names it */
};

struct il_stage {
	char name[IL_NAME_LEN];
	const struct il_stage_type *type;
	void *ctx;
	struct il_app *app;
	struct il_lcore_io *io; /* set when placed on an lcore */
	int lcore;              /* -1 until placed */
	int shard;              /* its shard (docs/scaling.md); -1 without shards */
	struct rte_mempool *pool; /* where the frames it makes come from: its
				   * shard's pool, or the appliance's */
	uint8_t kinds;          /* type->kinds, or wider (see there) */
	uint64_t ctr[IL_MAX_STAGE_COUNTERS];
	uint64_t pkts_in;       /* packets handed to process() */
	uint64_t tsc_busy;      /* cycles in process() with packets (IL_STAGE_CYCLES) */
	uint64_t tsc_poll;      /* cycles in process() polled without packets: timers
				 * and housekeeping, not a cost per packet */
	bool has_service;       /* type->service runs on service_lcore */
	unsigned service_lcore;
};

/* Queue a packet on app port index `port`, directly. A full tx ring frees
 * the packet and counts it in io->tx_dropped[port]; a port whose link is
 * down (a memif port without its peer) in io->tx_link_down[port]. */
static inline void il_tx(struct il_lcore_io *io, uint16_t port, struct rte_mbuf *m)
{
	io->tx_queued[port]++;
	if (unlikely(io->link_down & (1u << port))) {
		io->tx_link_down[port]++;
		rte_pktmbuf_free(m);
		return;
	}
	rte_eth_tx_buffer(io->port_id[port], io->txq[port], io->txb[port], m);
}

/* Send a chain's survivors on app port `port` in one call. What is still
 * buffered for the port is older, so it goes first; what the tx ring
 * refuses is freed and counted in io->tx_dropped[port] (with the link
 * down: all of it, in io->tx_link_down[port]). */
static inline void il_tx_burst(struct il_lcore_io *io, uint16_t port, struct rte_mbuf **pkts,
			       uint16_t n)
{
	uint16_t sent;

	io->tx_queued[port] += n;
	if (unlikely(io->link_down & (1u << port))) {
		io->tx_link_down[port] += n;
		rte_pktmbuf_free_bulk(pkts, n);
		return;
	}
	rte_eth_tx_buffer_flush(io->port_id[port], io->txq[port], io->txb[port]);
	sent = rte_eth_tx_burst(io->port_id[port], io->txq[port], pkts, n);
	if (unlikely(sent < n)) {
		io->tx_dropped[port] += n - sent;
		rte_pktmbuf_free_bulk(pkts + sent, n - sent);
	}
}

/* Whether the burst being processed may hold packets of these kinds. */
static inline bool il_burst_has(const struct il_stage *st, uint8_t kinds)
{
	return st->io == NULL || (st->io->kinds & kinds) != 0;
}

/* Room left for il_emit() in this poll iteration. */
static inline uint16_t il_emit_room(const struct il_stage *st)
{
	return (uint16_t)(2 * IL_BURST_CAP - st->io->n_defer);
}

/* Send a packet a stage made or re-sends, after the current burst. With
 * no room left it is dropped, counted as the port's tx_full: sending it
 * now would put it ahead of the burst it belongs to (a retransmission
 * before its original). Stages that emit many check il_emit_room(). */
static inline void il_emit(struct il_stage *st, uint16_t port, struct rte_mbuf *m)
{
	struct il_lcore_io *io = st->io;
	if (unlikely(io->n_defer == 2 * IL_BURST_CAP)) {
		io->tx_queued[port]++;
		io->tx_dropped[port]++;
		rte_pktmbuf_free(m);
		return;
	}
	io->defer_port[io->n_defer] = port;
	io->defer[io->n_defer++] = m;
}

/* Push the deferred packets to their tx buffers (the pipeline does this). */
static inline void il_emit_flush(struct il_lcore_io *io)
{
	for (uint16_t i = 0; i < io->n_defer; i++)
		il_tx(io, io->defer_port[i], io->defer[i]);
	io->n_defer = 0;
}

/* A muted appliance (a pair's standby, an active without authority):
 * the chain's survivors and everything emitted are freed, not sent. */
static inline void il_tx_mute(struct il_lcore_io *io, struct rte_mbuf **pkts, uint16_t n)
{
	if (n)
		rte_pktmbuf_free_bulk(pkts, n);
	if (io->n_defer)
		rte_pktmbuf_free_bulk(io->defer, io->n_defer);
	io->tx_muted += n + io->n_defer;
	io->n_defer = 0;
}

static inline void il_drop(struct il_stage *st, unsigned ctr, struct rte_mbuf *m)
{
	st->ctr[ctr]++;
	rte_pktmbuf_free(m);
}

/* Stage registry (dataplane/stages/registry.c). */
const struct il_stage_type *il_stage_type_find(const char *name);
void il_stage_types_list(char *buf, size_t len);

#endif
