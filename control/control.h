/* SPDX-License-Identifier: BSD-3-Clause
 * interlink-control: options (main.c) and the event loop (loop.c).
 */
#ifndef INTERLINK_CONTROL_CONTROL_H
#define INTERLINK_CONTROL_CONTROL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/un.h>

/* The data plane's IL_MAX_SHARDS. */
#define CTL_MAX_CHANNELS 8u
#define CTL_PATH_LEN sizeof(((struct sockaddr_un *)0)->sun_path)

struct ctl_opts {
	char chan_path[256];
	char sock_path[CTL_PATH_LEN]; /* wake-fd server */
	char mgmt_path[CTL_PATH_LEN]; /* "" when disabled */
	uint32_t up_slots;
	uint32_t down_slots;
	unsigned tick_ms;
	unsigned suspect_ms; /* fast failure detector (0: off) */
	unsigned exclude_ms; /* slow failure detector (0: off) */
	uint32_t window;     /* credit window per sender (0: no flow control) */
	bool recreate;
	/* A sharded data plane (docs/scaling.md 1.5): one channel per shard,
	 * "<chan_path>.<k>", all waking the one eventfd; 0: one channel at
	 * chan_path. */
	uint32_t shards;
	int verbose;
	/* FT-TCP logger thread (ft_dir empty: not started) */
	char ft_dir[256], ft_ring[256], ft_sock[CTL_PATH_LEN], ft_stats[256], ft_trace[256];
	int ft_durability;
	uint32_t ft_group_ms, ft_delay_us, ft_segment_mb;
	uint32_t ft_rt_priority; /* --ftcp-rt-priority: SCHED_FIFO for the logger thread, 0: off */
	uint32_t ft_catchup_ms;  /* --ftcp-catchup-ms: a replayed server's owed output, in time */
	/* An active/standby pair (docs/ha.md); ha_etcd empty: not a pair. */
	char ha_etcd[512], ha_node[17], ha_prefix[128], ha_listen[64], ha_peer[64];
	uint32_t ha_hb_ms;      /* pair heartbeat period */
	uint32_t ha_detect_ms;  /* T_link and T_hb: silence that means the active is gone */
	uint32_t ha_auth_ms;    /* T_auth: how long the data plane may stamp unrenewed */
	uint32_t ha_report_ms;  /* T_report: how long receivers have to report at a takeover */
	uint32_t ha_dp_dead_ms; /* the data plane silent this long is dead: resign */
	uint32_t ha_cold_ms;    /* T_cold: at start, how long an owner may stay unseen */
	uint32_t ha_quiesce_ms; /* T_q: a hand-over waits this long for stability */
	uint32_t ha_lease_s;
	uint32_t ha_attempt_ms, ha_deadline_ms; /* il_coord */
};

/* Runs until SIGINT/SIGTERM; returns the process exit code. */
int ctl_run(const struct ctl_opts *o);

#endif
