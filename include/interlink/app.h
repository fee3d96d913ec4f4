/* SPDX-License-Identifier: BSD-3-Clause
 * The appliance: ports, groups, stage instances and their placement on
 * lcores, all built from one config (dataplane/app.c).
 */
#ifndef INTERLINK_APP_H
#define INTERLINK_APP_H

#include <stdbool.h>
#include <stdint.h>

#include <string.h>

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <interlink/config.h>
#include <interlink/frame.h>
#include <interlink/stage.h>

#define IL_MAX_GROUPS 256
#define IL_MAX_STAGES 32
#define IL_MAX_CHAINS 8
#define IL_MAX_CHAIN_STAGES 8
#define IL_MAX_WORKERS 16
#include <interlink/port.h>
#include <interlink/shard.h>

struct il_port {
	char name[IL_NAME_LEN];        /* config name: "in", "out", ... */
	char device[IL_DEVARGS_LEN];   /* PCI address or vdev string */
	char dev_name[IL_DEVARGS_LEN]; /* device name as DPDK knows it */
	uint16_t port_id;              /* DPDK port id */
	uint16_t rx_desc, tx_desc;
	uint16_t n_txq;                /* one per lcore that transmits on it */
	uint16_t n_rxq;                /* 'queues': 1, or one per shard */
	bool promisc;
	uint8_t mac[6];
};

struct il_group {
	uint16_t id;          /* wire group id */
	uint32_t address;     /* multicast destination (host order), 0 = none */
	uint16_t out_port;    /* UDP destination port of sequenced frames */
	bool raw;             /* raw-mode filter configured */
	uint32_t raw_dst_ip;  /* raw filter: destination address (host order) */
	uint16_t raw_dst_port;/* raw filter: UDP destination port */
	bool wan;             /* TCP-friendly rate (thesis eq. 4.1) in its credits */
	uint8_t shard;        /* owner shard (0 without shards) */
	uint16_t wan_packet_bytes; /* s of eq. 4.1 for a WAN group */
};

struct il_chain {
	uint16_t rx_port; /* app port index */
	uint16_t tx_port;
	uint16_t rx_queue; /* the shard's queue of rx_port (0 without shards) */
	bool rx_poll;      /* false: a shard whose port has one queue, polled by
			    * shard 0 (it still runs what is handed over) */
	int16_t handoff_at; /* strays leave after this stage (classify); -1: none */
	uint16_t n_stages;
	bool any_poll;
	struct il_stage *stages[IL_MAX_CHAIN_STAGES];
};

struct il_worker {
	unsigned lcore_id;
	uint16_t n_chains;
	struct il_chain chains[IL_MAX_CHAINS];
	struct il_lcore_io io;
	struct il_shard *shard;        /* NULL without shards */
	struct il_link_gate gate;      /* its memif ports' links (memif_guard.h) */
	uint64_t loops, busy_loops;
	uint32_t cmd_seen;             /* last runtime command this loop applied */
	uint32_t cmd_done;             /* its acknowledgement (__atomic, runtime.c) */
} __rte_cache_aligned; /* written by its lcore every loop: no line shared with the next */

/* The runtime command being handed to the poll loops (dataplane/runtime.c):
 * written by a telemetry thread, then published by bumping seq. */
enum il_rt_kind { IL_RT_RESET, IL_RT_SET };
struct il_rt_cmd {
	uint32_t seq;                   /* __atomic: published last */
	enum il_rt_kind kind;
	struct il_stage *st;            /* IL_RT_SET: the stage, on its lcore */
	const struct il_cfg *params;    /* IL_RT_SET: its new parameters */
	int rc;
	char err[256];
};

struct il_app {
	struct il_cfg *cfg;
	char name[IL_NAME_LEN];       /* also the EAL file prefix */
	uint16_t il_udp_port;         /* native Interlink port */
	uint32_t epoch;
	uint32_t appliance_ip;        /* source of frames the appliance makes */
	uint16_t frame_max;           /* largest frame the LAN carries (mtu + 14) */

	uint16_t n_ports;
	struct il_port ports[IL_MAX_PORTS];

	uint16_t n_groups;
	struct il_group groups[IL_MAX_GROUPS];
	uint16_t group_idx_by_id[65536]; /* index + 1; 0 = unknown */

	uint16_t n_stages;
	struct il_stage *stages[IL_MAX_STAGES];

	uint16_t n_workers;
	struct il_worker workers[IL_MAX_WORKERS];

	/* Shards (docs/scaling.md 1): 0 = today's pipeline as configured. */
	uint16_t n_shards;
	unsigned shard_lcores[IL_MAX_SHARDS];
	bool shard_assign_config;      /* shards.assign: config (else hash) */
	unsigned handoff_slots;
	struct il_shard *shards[IL_MAX_SHARDS];

	struct rte_mempool *pool;
	unsigned pool_size;
	struct il_rt_cmd rt;
	volatile bool quit;
	/* An appliance of a pair that is not the active one with authority
	 * (the ha stage, docs/ha.md): the pipeline sends nothing. */
	volatile bool tx_mute;
	bool last_words_said; /* il_app_last_words() ran */
	/* One of a pair: its role (enum il_ha_role, chan.h; 0: not a pair),
	 * written by the ha stage; `epoch` is then the epoch it owns (0 while
	 * standby). The main lcore reads both for the status line. */
	volatile uint32_t ha_role;
	uint64_t start_tsc;
	uint64_t first_rx_tsc, last_rx_tsc; /* seen by the main lcore (0: no traffic yet) */
};

/* Reads everything but the EAL-dependent parts; errors name the key. */
int il_app_configure(struct il_app *app, struct il_cfg *cfg, char *err, size_t errlen);
/* Before EAL: stage types and the pipeline's names and structure (the
 * lcores' existence and each stage's parameters are checked after). */
int il_app_precheck(struct il_app *app, char *err, size_t errlen);
/* Builds the EAL argument vector (ports become --vdev / -a). */
int il_app_eal_args(const struct il_app *app, const char *prog, char **argv, int max,
		    char *err, size_t errlen);
/* After rte_eal_init: pool, ports, stages, placement. */
int il_app_start(struct il_app *app, char *err, size_t errlen);
/* Push out whatever the workers left in their tx buffers. */
void il_app_flush(struct il_app *app);
void il_app_stop(struct il_app *app);
/* Once the workers have stopped, the stages' last words (il_stage_type.stop),
 * once (il_app_stop says them if nobody did before). */
void il_app_last_words(struct il_app *app);
/* A stage's last words (il_stage_type.stop): m out on port's queue 0 now,
 * or freed (a muted appliance sends nothing). Returns 0 if it went. */
int il_app_send_now(struct il_app *app, uint16_t port, struct rte_mbuf *m);
/* Service lcores (il_stage_type.service): lc, named by config key `key`
 * of stage st, is an enabled worker lcore that runs no chain and serves no
 * other stage (errors name the key). il_app_start checks every stage's. */
int il_app_check_service_lcore(const struct il_app *app, const struct il_stage *st,
			       unsigned lc, const char *key, char *err, size_t errlen);
/* Launch the service loop of every placed stage that has one, after the
 * workers; they stop with them (app->quit). Returns how many. */
unsigned il_app_launch_services(struct il_app *app);

int il_app_port_index(const struct il_app *app, const char *name);
struct il_stage *il_app_stage(const struct il_app *app, const char *name);
static inline const struct il_group *il_app_group_by_id(const struct il_app *app, uint16_t id)
{
	uint16_t i = app->group_idx_by_id[id];
	return i ? &app->groups[i - 1] : NULL;
}

/* Where the appliance's own frames to group gi go (UNAVAIL, STABLE, VIEW,
 * CREDIT): the group's multicast address and port, from port tx's MAC,
 * the appliance's address and the Interlink port, TTL 16. */
static inline void il_app_group_path(const struct il_app *app, uint16_t tx, unsigned gi,
				     struct il_path *p)
{
	const struct il_group *g = &app->groups[gi];

	*p = (struct il_path){ .src_ip = app->appliance_ip, .src_port = app->il_udp_port,
			       .dst_port = g->out_port, .ttl = 16 };
	memcpy(p->src_mac, app->ports[tx].mac, 6);
	il_path_mcast(p, g->address);
}

/* A frame of len bytes the appliance makes, from pool: the mbuf, its
 * bytes in *f; NULL when the pool is empty (the caller counts it). */
static inline struct rte_mbuf *il_frame_alloc(struct rte_mempool *pool, uint16_t len, uint8_t **f)
{
	struct rte_mbuf *m = il_pktmbuf_alloc(pool);

	if (unlikely(m == NULL))
		return NULL;
	*f = (uint8_t *)rte_pktmbuf_append(m, len);
	if (unlikely(*f == NULL)) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	m->l2_len = IL_ETH_HLEN;
	m->l3_len = IL_IPV4_HLEN;
	return m;
}

/* The same from the appliance's pool (shard 0's with shards). */
static inline struct rte_mbuf *il_app_frame_alloc(const struct il_app *app, uint16_t len,
						  uint8_t **f)
{
	return il_frame_alloc(app->pool, len, f);
}

/* The same from the pool of the stage's shard (the appliance's for a
 * stage made outside il_app_start(), as unit tests do). */
static inline struct rte_mbuf *il_stage_frame_alloc(const struct il_stage *st, uint16_t len,
						    uint8_t **f)
{
	return il_frame_alloc(st->pool ? st->pool : st->app->pool, len, f);
}

/* Runtime commands: telemetry /interlink/reset and /interlink/set. */
void il_runtime_register(struct il_app *app);
void il_runtime_apply(struct il_app *app, struct il_worker *w, uint32_t seq);

/* A stage's peer of the same shard (a nak's sequencer): `name` itself
 * without shards or on shard 0, "name@k" on shard k. */
struct il_stage *il_app_stage_peer(const struct il_app *app, const struct il_stage *st,
				   const char *name);
/* Whether stage st keeps state for group index gi (its shard owns it). */
static inline bool il_stage_owns_group(const struct il_app *app, const struct il_stage *st,
				       unsigned gi)
{
	return st->shard < 0 || app->groups[gi].shard == (unsigned)st->shard;
}
/* Run what the other shards handed to worker w through its chains (after
 * their classify) and transmit it, as if received. Returns frames taken. */
uint16_t il_shard_drain(struct il_app *app, struct il_worker *w);

/* Pipeline loop of one worker (dataplane/pipeline.c). */
int il_worker_main(void *arg);
/* A received burst through a chain's stages (dispatch by kind, per-stage
 * cycles): returns the survivors, left in pkts for the chain's tx. */
uint16_t il_chain_stages(struct il_lcore_io *io, struct il_chain *ch, struct rte_mbuf **pkts,
			 uint16_t n);
/* The app the telemetry callbacks read. */
void il_telemetry_register(struct il_app *app);
/* /interlink/stages, /interlink/counters, /interlink/groups (stats_layout.c). */
void il_telemetry_layout_register(const struct il_app *app);
void il_status_line(struct il_app *app, double elapsed_s, double dt_s);
/* traffic_s: from the first frame received to the last (rates use it). */
void il_summary(struct il_app *app, double elapsed_s, double traffic_s, const char *json_path);
/* Every stage's warnings since the last call (stage type's log()). */
void il_stage_logs(struct il_app *app, FILE *out);

#endif
