/* SPDX-License-Identifier: BSD-3-Clause
 * FT-TCP stage: configuration, set-up and telemetry (the packet work is in
 * ftcp.c). Keys: client_port, server_port, protect (list of {address,
 * port}), strategy, ring, ring_size, max_flows, linger_ms, hold_refusals_ms;
 * docs/ft-tcp.md.
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_hash.h>
#include <rte_jhash.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include <interlink/app.h>
#include <interlink/err.h>
#include <interlink/stage.h>

#include "ftcp.h"
#include "ftcp_timer.h"

const char *const ftcp_counter_names[C_COUNT] = {
	"conns_protected", "segs_logged", "bytes_logged", "bytes_stable", "logger_lag_bytes",
	"logger_lag_us_last", "logger_lag_us_max", "acks_to_client", "acks_clamped",
	"acks_generated", "acks_held", "synack_held", "closed_window_acks", "recoveries",
	"recovery_us_last", "recovery_us_total", "fabricated_syns", "rst_to_server",
	"flows_active", "logger_msgs", "drop_ring_full", "drop_bad_csum",
	"drop_unannounced_fin", "drop_unannounced_rst", "drop_in_recovery",
	"drop_flow_table_full", "drop_server_dead", "drop_no_mbuf",
	"server_mac_moves", "flows_moved", "drop_fenced",
	"synack_reacked", "recoveries_abandoned", "recoveries_client_reset",
	"held_in_recovery", "held_passed", "drop_refusal_in_outage",
};

static const char *const strategy_names[] = {"basic", "lazy", "eager", "conditional", NULL};

/* ---- set-up ----------------------------------------------------------- */

static int parse_protect(struct ftcp *f, const struct il_cfg *p, char *err, size_t errlen)
{
	const struct il_cfg *l = il_cfg_get(p, "protect");
	static const char *const pkeys[] = {"address", "port", NULL};

	if (!l)
		return ERR("config: key '%s.protect' is missing: list the servers, e.g. "
			   "[{ address: 10.77.0.2, port: 5001 }]", il_cfg_path(p));
	if (il_cfg_expect(l, IL_CFG_SEQ, err, errlen))
		return -1;
	if (il_cfg_len(l) == 0 || il_cfg_len(l) > FTCP_MAX_PROTECT)
		return ERR("config: key '%s' must list 1..%d servers", il_cfg_path(l),
			   FTCP_MAX_PROTECT);
	for (unsigned i = 0; i < il_cfg_len(l); i++) {
		const struct il_cfg *e = il_cfg_at(l, i);
		uint32_t ip;
		uint64_t port;

		if (il_cfg_expect(e, IL_CFG_MAP, err, errlen) ||
		    il_cfg_check_keys(e, pkeys, err, errlen) ||
		    il_cfg_ipv4(e, "address", 0, &ip, err, errlen) ||
		    il_cfg_u64(e, "port", 0, 1, 65535, &port, err, errlen))
			return -1;
		if (!ip || !port)
			return ERR("config: key '%s' needs 'address' and 'port'", il_cfg_path(e));
		f->prot_ip[i] = rte_cpu_to_be_32(ip);
		f->prot_port[i] = rte_cpu_to_be_16((uint16_t)port);
	}
	f->n_protect = il_cfg_len(l);
	return 0;
}

static int ftcp_create(struct il_stage *st, const struct il_cfg *p, struct il_app *app,
		       char *err, size_t errlen)
{
	static const char *const keys[] = {"type", "client_port", "server_port", "protect",
					   "strategy", "ring", "ring_size", "max_flows",
					   "linger_ms", "hold_refusals_ms", NULL};
	const char *cp, *sp, *ring;
	uint64_t max_flows, ring_size, linger, hold_refusals;
	struct ftcp *f;
	int ci, si;

	if (il_cfg_check_keys(p, keys, err, errlen))
		return -1;
	f = rte_zmalloc("il_ftcp", sizeof(*f), RTE_CACHE_LINE_SIZE);
	if (!f)
		return ERR("out of memory for stage '%s'", st->name);
	st->ctx = f;
	f->app = app;
	f->wake_fd = -1;
	if (il_cfg_str(p, "client_port", "client", &cp, err, errlen) ||
	    il_cfg_str(p, "server_port", "server", &sp, err, errlen) ||
	    il_cfg_enum(p, "strategy", strategy_names, FTCP_LAZY, &f->strategy, err, errlen) ||
	    il_cfg_str(p, "ring", FTC_RING_PATH_DEF, &ring, err, errlen) ||
	    il_cfg_u64(p, "ring_size", FTC_UP_SIZE_DEF, 1u << 16, 1u << 30, &ring_size, err,
		       errlen) ||
	    il_cfg_u64(p, "max_flows", 4096, 16, 1u << 20, &max_flows, err, errlen) ||
	    il_cfg_u64(p, "linger_ms", 2000, 0, 600000, &linger, err, errlen) ||
	    il_cfg_u64(p, "hold_refusals_ms", 5000, 0, 600000, &hold_refusals, err, errlen) ||
	    parse_protect(f, p, err, errlen))
		return -1;
	if (ring_size & (ring_size - 1))
		return ERR("config: key '%s.ring_size': %llu is not a power of two",
			   il_cfg_path(p), (unsigned long long)ring_size);
	ci = il_app_port_index(app, cp);
	si = il_app_port_index(app, sp);
	if (ci < 0)
		return ERR("config: key '%s.client_port': '%s' is not a configured port",
			   il_cfg_path(p), cp);
	if (si < 0)
		return ERR("config: key '%s.server_port': '%s' is not a configured port",
			   il_cfg_path(p), sp);
	f->cport = (uint16_t)ci;
	f->sport = (uint16_t)si;
	snprintf(f->ring_path, sizeof(f->ring_path), "%s", ring);

	char hname[64];
	snprintf(hname, sizeof(hname), "ftcp_%s", st->name);
	struct rte_hash_parameters hp = {
		.name = hname,
		.entries = (uint32_t)max_flows,
		.key_len = sizeof(struct ftc_key),
		.hash_func = rte_jhash,
		.socket_id = (int)rte_socket_id(),
	};
	f->h = rte_hash_create(&hp);
	f->max_flows = (uint32_t)max_flows;
	/* rte_hash may hand out positions up to entries + a few per-lcore
	 * cache slots; size the array from what it reports. */
	f->flows = rte_zmalloc("il_ftcp_flows",
			       sizeof(struct ftcp_flow) * (rte_hash_max_key_id(f->h) + 1),
			       RTE_CACHE_LINE_SIZE);
	if (!f->h || !f->flows)
		return ERR("cannot create the flow table of stage '%s' (%llu flows)", st->name,
			   (unsigned long long)max_flows);
	ftl_init(f);
	f->ring = ftc_ring_open(ring, (uint32_t)ring_size, FTC_DATAPLANE, err, errlen);
	if (!f->ring)
		return -1;
	f->hz = rte_get_tsc_hz();
	f->linger_tsc = linger * f->hz / 1000;
	f->refusal_hold_tsc = hold_refusals * f->hz / 1000;
	f->syn_rto_tsc = f->hz / 5;
	f->wake_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	f->wake_addr.sun_family = AF_UNIX;
	snprintf(f->wake_addr.sun_path, sizeof(f->wake_addr.sun_path), "%s.wake", ring);
	return 0;
}

static void ftcp_destroy(struct il_stage *st)
{
	struct ftcp *f = st->ctx;

	if (!f)
		return;
	if (f->h) {
		const void *key;
		void *data;
		uint32_t it = 0;
		int32_t pos;

		while ((pos = rte_hash_iterate(f->h, &key, &data, &it)) >= 0) {
			rte_pktmbuf_free(f->flows[pos].held_ack);
			rte_pktmbuf_free(f->flows[pos].held_synack);
			rte_pktmbuf_free(f->flows[pos].held_rec);
		}
		rte_hash_free(f->h);
	}
	if (f->wake_fd >= 0)
		close(f->wake_fd);
	ftc_ring_close(f->ring);
	rte_free(f->flows);
	rte_free(f);
	st->ctx = NULL;
}

static void ftcp_state(const struct il_stage *st, struct il_state_sink *out)
{
	const struct ftcp *f = st->ctx;
	struct il_shm_ring_stats rs;

	if (!f || !f->ring)
		return;
	il_shm_ring_stats(f->ring->up, &rs);
	il_state_put(out, -1, "strategy", (uint64_t)f->strategy);
	il_state_put(out, -1, "ring_bytes_queued", rs.head - rs.tail);
	il_state_put(out, -1, "ring_drops", rs.drops);
}

const struct il_stage_type il_stage_ftcp = {
	.name = "ftcp",
	.help = "FT-TCP south-side wrapper: log client segments, clamp acks, mask server crashes",
	.counter_names = ftcp_counter_names,
	.n_counters = C_COUNT,
	.create = ftcp_create,
	.process = ftcp_process,
	.poll = true,
	.destroy = ftcp_destroy,
	.state = ftcp_state,
	.writes_frames = true, /* rewrites sequence and ack numbers in place */
};
