/* SPDX-License-Identifier: BSD-3-Clause
 * Observability: DPDK telemetry endpoints, the once-per-second status line
 * and the final summary (human table and JSON).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_telemetry.h>

#include <interlink/app.h>
#include <interlink/chan.h>
#include <interlink/json.h>
#include <interlink/memif_guard.h>
#include <interlink/port.h>

static struct il_app *tel_app;

struct port_totals {
	uint64_t rx, tx, missed, rx_err, tx_err, tx_dropped, link_down;
};

static void port_totals(const struct il_app *app, unsigned p, struct port_totals *t)
{
	struct rte_eth_stats s;
	uint64_t queued = 0;
	memset(t, 0, sizeof(*t));
	/* Packets are counted by the workers: some PMDs (memif) reset their
	 * own statistics when the peer goes away. Errors come from the PMD. */
	if (rte_eth_stats_get(app->ports[p].port_id, &s) == 0) {
		t->missed = s.imissed + il_port_kernel_drops(app->ports[p].port_id);
		t->rx_err = s.ierrors + s.rx_nombuf;
		t->tx_err = s.oerrors;
	}
	for (unsigned w = 0; w < app->n_workers; w++) {
		const struct il_lcore_io *io = &app->workers[w].io;
		t->rx += io->rx[p];
		queued += io->tx_queued[p];
		t->tx_dropped += io->tx_dropped[p];
		t->link_down += io->tx_link_down[p];
	}
	t->tx = queued - t->tx_dropped - t->link_down;
}

static bool is_drop_counter(const char *name)
{
	return strncmp(name, "drop_", 5) == 0;
}

/* Sum of a named counter over all stages (e.g. "stamped_msgs"). */
static uint64_t counter_sum(const struct il_app *app, const char *name)
{
	uint64_t v = 0;
	for (unsigned s = 0; s < app->n_stages; s++) {
		const struct il_stage *st = app->stages[s];
		for (unsigned c = 0; c < st->type->n_counters; c++)
			if (!strcmp(st->type->counter_names[c], name))
				v += st->ctr[c];
	}
	return v;
}

static bool has_counter(const struct il_app *app, const char *name)
{
	for (unsigned s = 0; s < app->n_stages; s++) {
		const struct il_stage *st = app->stages[s];
		for (unsigned c = 0; c < st->type->n_counters; c++)
			if (!strcmp(st->type->counter_names[c], name))
				return true;
	}
	return false;
}

static uint64_t drops_total(const struct il_app *app)
{
	uint64_t v = 0;
	for (unsigned s = 0; s < app->n_stages; s++) {
		const struct il_stage *st = app->stages[s];
		for (unsigned c = 0; c < st->type->n_counters; c++)
			if (is_drop_counter(st->type->counter_names[c]))
				v += st->ctr[c];
	}
	for (unsigned p = 0; p < app->n_ports; p++) {
		struct port_totals t;
		port_totals(app, p, &t);
		v += t.missed + t.rx_err + t.tx_err + t.tx_dropped + t.link_down;
	}
	for (unsigned k = 0; k < app->n_shards; k++)
		if (app->shards[k])
			v += app->shards[k]->drop_handoff_full +
			     app->shards[k]->drop_handoff_nombuf;
	return v;
}

/* ---- stage state ------------------------------------------------------ */

/* A value for one group is named "group<ID>_<key>"; the stage's own keep
 * their key. */
static const char *state_name(const struct il_app *app, int group, const char *key, char *buf,
			      size_t len)
{
	if (group < 0)
		return key;
	snprintf(buf, len, "group%u_%s", app->groups[group].id, key);
	return buf;
}

/* Per-group state goes into /interlink/stats while it stays small (DPDK
 * caps a telemetry reply at 16 KB and a dict at 256 entries); every
 * group's state is always in /interlink/group,<id>. */
#define TEL_INLINE_GROUPS 16

struct tel_state {
	struct il_state_sink sink; /* first: the callback gets its address */
	struct rte_tel_data *d;
	int only_group; /* -1: the stage's own values, and every group's inline */
	bool groups_inline;
	unsigned n;
};

static void tel_state_put(struct il_state_sink *sink, int group, const char *key, uint64_t val)
{
	struct tel_state *t = (struct tel_state *)sink;
	char name[RTE_TEL_MAX_STRING_LEN];

	if (t->only_group >= 0) {
		if (group == t->only_group && rte_tel_data_add_dict_u64(t->d, key, val) == 0)
			t->n++;
		return;
	}
	if (group >= 0 && !t->groups_inline)
		return;
	rte_tel_data_add_dict_u64(t->d, state_name(tel_app, group, key, name, sizeof(name)), val);
}

struct json_state {
	struct il_state_sink sink; /* first: the callback gets its address */
	struct il_json *j;
	const struct il_app *app;
};

static void json_state_put(struct il_state_sink *sink, int group, const char *key, uint64_t val)
{
	struct json_state *js = (struct json_state *)sink;
	char name[IL_NAME_LEN + 32];

	il_json_u64(js->j, state_name(js->app, group, key, name, sizeof(name)), val);
}

/* ---- telemetry -------------------------------------------------------- */

static int tel_stats(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(d);
	for (unsigned s = 0; s < tel_app->n_stages; s++) {
		const struct il_stage *st = tel_app->stages[s];
		struct rte_tel_data *c = rte_tel_data_alloc();
		if (!c)
			return -1;
		rte_tel_data_start_dict(c);
		rte_tel_data_add_dict_u64(c, "pkts_in", st->pkts_in);
		if (IL_STAGE_CYCLES) {
			rte_tel_data_add_dict_u64(c, "cycles", st->tsc_busy);
			rte_tel_data_add_dict_u64(c, "poll_cycles", st->tsc_poll);
		}
		for (unsigned i = 0; i < st->type->n_counters; i++)
			rte_tel_data_add_dict_u64(c, st->type->counter_names[i], st->ctr[i]);
		if (st->type->state && st->ctx) {
			struct tel_state ts = {
				.sink = {.put = tel_state_put},
				.d = c,
				.only_group = -1,
				.groups_inline = tel_app->n_groups <= TEL_INLINE_GROUPS,
			};
			st->type->state(st, &ts.sink);
		}
		rte_tel_data_add_dict_container(d, st->name, c, 0);
	}
	return 0;
}

/* /interlink/group,<id>: every stage's state for one group. */
static int tel_group(const char *cmd, const char *params, struct rte_tel_data *d)
{
	char *end;
	unsigned long id;
	uint16_t gi;

	(void)cmd;
	if (params == NULL || *params == '\0')
		return -EINVAL;
	id = strtoul(params, &end, 10);
	if (*end != '\0' || id > UINT16_MAX || !(gi = tel_app->group_idx_by_id[id]))
		return -EINVAL;
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "id", id);
	for (unsigned s = 0; s < tel_app->n_stages; s++) {
		const struct il_stage *st = tel_app->stages[s];
		if (!st->type->state || !st->ctx)
			continue;
		struct rte_tel_data *c = rte_tel_data_alloc();
		if (!c)
			return -ENOMEM;
		rte_tel_data_start_dict(c);
		struct tel_state ts = {
			.sink = {.put = tel_state_put},
			.d = c,
			.only_group = gi - 1,
		};
		st->type->state(st, &ts.sink);
		if (ts.n)
			rte_tel_data_add_dict_container(d, st->name, c, 0);
		else
			rte_tel_data_free(c);
	}
	return 0;
}

static int tel_ports(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(d);
	for (unsigned p = 0; p < tel_app->n_ports; p++) {
		struct port_totals t;
		struct rte_tel_data *c = rte_tel_data_alloc();
		if (!c)
			return -1;
		port_totals(tel_app, p, &t);
		rte_tel_data_start_dict(c);
		rte_tel_data_add_dict_u64(c, "rx_packets", t.rx);
		rte_tel_data_add_dict_u64(c, "tx_packets", t.tx);
		rte_tel_data_add_dict_u64(c, "rx_missed", t.missed);
		rte_tel_data_add_dict_u64(c, "rx_errors", t.rx_err);
		rte_tel_data_add_dict_u64(c, "tx_errors", t.tx_err);
		rte_tel_data_add_dict_u64(c, "drop_tx_full", t.tx_dropped);
		rte_tel_data_add_dict_u64(c, "drop_link_down", t.link_down);
		rte_tel_data_add_dict_u64(c, "link_up", il_port_link_up(&tel_app->ports[p]));
		rte_tel_data_add_dict_container(d, tel_app->ports[p].name, c, 0);
	}
	return 0;
}

/* One of a pair (docs/ha.md): what the ha stage made of it. */
static const char *ha_role_name(uint32_t role)
{
	return role == IL_HA_ACTIVE ? "active" : role == IL_HA_STANDBY ? "standby" : "-";
}

static int tel_info(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "name", tel_app->name);
	rte_tel_data_add_dict_u64(d, "epoch", tel_app->epoch);
	if (tel_app->ha_role != 0)
		rte_tel_data_add_dict_string(d, "ha_role", ha_role_name(tel_app->ha_role));
	rte_tel_data_add_dict_u64(d, "udp_port", tel_app->il_udp_port);
	rte_tel_data_add_dict_u64(d, "groups", tel_app->n_groups);
	rte_tel_data_add_dict_u64(d, "workers", tel_app->n_workers);
	rte_tel_data_add_dict_u64(d, "uptime_s",
				  (rte_rdtsc() - tel_app->start_tsc) / rte_get_tsc_hz());
	rte_tel_data_add_dict_u64(d, "drops_total", drops_total(tel_app));
	return 0;
}

/* /interlink/shards: each shard's lcore, groups and hand-over counters
 * (docs/scaling.md 1.4); an empty list without shards. The counters are
 * written by the shards' lcores and read here as they stand. */
static int tel_shards(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	if (params != NULL && *params != '\0')
		return -EINVAL;
	rte_tel_data_start_dict(d);
	for (unsigned k = 0; k < tel_app->n_shards; k++) {
		const struct il_shard *sh = tel_app->shards[k];
		struct rte_tel_data *c = rte_tel_data_alloc(), *g = rte_tel_data_alloc();
		char name[16];

		if (c == NULL || g == NULL) {
			rte_tel_data_free(c);
			rte_tel_data_free(g);
			return -ENOMEM;
		}
		rte_tel_data_start_dict(c);
		rte_tel_data_add_dict_u64(c, "lcore", tel_app->shard_lcores[k]);
		rte_tel_data_add_dict_u64(c, "handoff_out", sh ? sh->handoff_out : 0);
		rte_tel_data_add_dict_u64(c, "handoff_in", sh ? sh->handoff_in : 0);
		rte_tel_data_add_dict_u64(c, "drop_handoff_full", sh ? sh->drop_handoff_full : 0);
		rte_tel_data_add_dict_u64(c, "drop_handoff_nombuf", sh ? sh->drop_handoff_nombuf : 0);
		rte_tel_data_add_dict_u64(c, "pool_avail",
					  sh && sh->pool ? rte_mempool_avail_count(sh->pool) : 0);
		rte_tel_data_start_array(g, RTE_TEL_U64_VAL);
		for (unsigned i = 0; i < tel_app->n_groups; i++)
			if (tel_app->groups[i].shard == k)
				rte_tel_data_add_array_u64(g, tel_app->groups[i].id);
		rte_tel_data_add_dict_container(c, "groups", g, 0);
		snprintf(name, sizeof(name), "%u", k);
		rte_tel_data_add_dict_container(d, name, c, 0);
	}
	return 0;
}

void il_telemetry_register(struct il_app *app)
{
	tel_app = app;
	il_telemetry_layout_register(app);
	il_runtime_register(app);
	rte_telemetry_register_cmd("/interlink/info", tel_info,
				   "Appliance identity and uptime. No parameters");
	rte_telemetry_register_cmd("/interlink/stats", tel_stats,
				   "Per-stage counters and state (per-group state inline for up to "
				   "16 groups). No parameters");
	rte_telemetry_register_cmd("/interlink/group", tel_group,
				   "One group's state in every stage. Parameters: int group id");
	rte_telemetry_register_cmd("/interlink/ports", tel_ports,
				   "Per-port packets, drops and link. No parameters");
	rte_telemetry_register_cmd("/interlink/shards", tel_shards,
				   "Per shard: lcore, groups, frames handed over and taken over, "
				   "drops on a full hand-over ring. No parameters");
}

/* ---- status line ------------------------------------------------------ */

static struct port_totals last_ports[IL_MAX_PORTS];
static uint64_t last_stamped;
static bool status_in_place; /* a status line waits for its newline */

/* A rate with the unit that shows it: 1.23 M, 45.6 k or 789 (per s). */
static const char *fmt_rate(char *buf, size_t len, double per_s, const char *unit)
{
	if (per_s >= 1e6)
		snprintf(buf, len, "%.2f M%s", per_s / 1e6, unit);
	else if (per_s >= 1e3)
		snprintf(buf, len, "%.1f k%s", per_s / 1e3, unit);
	else
		snprintf(buf, len, "%.0f %s", per_s, unit);
	return buf;
}

void il_stage_logs(struct il_app *app, FILE *out)
{
	for (unsigned i = 0; i < app->n_stages; i++) {
		struct il_stage *st = app->stages[i];
		if (st->type->log && st->ctx)
			st->type->log(st, out);
	}
}

void il_status_line(struct il_app *app, double elapsed, double dt)
{
	char buf[512], r1[32], r2[32];
	size_t off = 0;
	uint64_t stamped = counter_sum(app, "stamped_msgs");

	/* Nobody reads our stdout any more (a closed pipe): say so once on
	 * stderr, and stop formatting lines for nobody. */
	static bool gone;
	if (gone)
		return;
	if (ferror(stdout)) {
		gone = true;
		fprintf(stderr, "interlink: writing to stdout failed; status lines stop, "
			"forwarding goes on\n");
		return;
	}

	off += (size_t)snprintf(buf + off, sizeof(buf) - off, "[%6.1fs]", elapsed);
	if (app->ha_role != 0)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, " %s epoch %u |",
					ha_role_name(app->ha_role), app->epoch);
	for (unsigned p = 0; p < app->n_ports && off < sizeof(buf); p++) {
		struct port_totals t;
		port_totals(app, p, &t);
		off += (size_t)snprintf(buf + off, sizeof(buf) - off,
					" %s%s rx %s tx %s |", app->ports[p].name,
					il_port_link_up(&app->ports[p]) ? "" : "(down)",
					fmt_rate(r1, sizeof(r1), (double)(t.rx - last_ports[p].rx) / dt,
						 "pps"),
					fmt_rate(r2, sizeof(r2), (double)(t.tx - last_ports[p].tx) / dt,
						 "pps"));
		last_ports[p] = t;
	}
	/* Each deployment shows the figures of the stages it runs. */
	if (has_counter(app, "stamped_msgs") && off < sizeof(buf))
		off += (size_t)snprintf(buf + off, sizeof(buf) - off,
					" ordered %s (%" PRIu64 ") naks %" PRIu64
					" retx %" PRIu64 " unavail %" PRIu64,
					fmt_rate(r1, sizeof(r1), (double)(stamped - last_stamped) / dt,
						 "msg/s"), stamped,
					counter_sum(app, "naks"),
					counter_sum(app, "retransmitted_frames"),
					counter_sum(app, "unavail_sent"));
	if (has_counter(app, "repairs_sent") && off < sizeof(buf))
		off += (size_t)snprintf(buf + off, sizeof(buf) - off,
					" fec repairs %" PRIu64 " recovered %" PRIu64
					" unrecoverable %" PRIu64 " late %" PRIu64,
					counter_sum(app, "repairs_sent"), counter_sum(app, "recovered"),
					counter_sum(app, "unrecoverable"),
					counter_sum(app, "drop_late_original"));
	if (has_counter(app, "lost") && off < sizeof(buf))
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, " impaired-lost %" PRIu64,
					counter_sum(app, "lost"));
	if (app->n_shards && off < sizeof(buf)) {
		/* Frames that landed on a shard that does not own their group. */
		uint64_t strays = 0;

		for (unsigned k = 0; k < app->n_shards; k++)
			if (app->shards[k])
				strays += app->shards[k]->handoff_out;
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, " shards %u strays %" PRIu64,
					(unsigned)app->n_shards, strays);
	}
	if (off < sizeof(buf))
		snprintf(buf + off, sizeof(buf) - off, " drops %" PRIu64, drops_total(app));
	last_stamped = stamped;
	/* On a terminal the line is rewritten in place; into a pipe or a
	 * file each one is a line of its own. */
	if (isatty(STDOUT_FILENO)) {
		printf("\r%s\033[K", buf);
		status_in_place = true;
	} else {
		printf("%s\n", buf);
	}
	fflush(stdout);
}

/* ---- final summary ---------------------------------------------------- */

/* The --json file: the same figures as the summary, for scripts. */
static void write_json(struct il_app *app, double elapsed, double traffic_s,
		       const char *json_path)
{
	FILE *j = fopen(json_path, "w");
	struct il_json js;

	if (!j) {
		perror(json_path);
		return;
	}
	il_json_begin(&js, j, 2);
	il_json_obj(&js, NULL);
	il_json_str(&js, "name", app->name);
	il_json_u64(&js, "epoch", app->epoch);
	if (app->ha_role != 0)
		il_json_str(&js, "ha_role", ha_role_name(app->ha_role));
	il_json_fixed(&js, "elapsed_s", elapsed, 6);
	il_json_fixed(&js, "traffic_s", traffic_s, 6);
	il_json_obj(&js, "ports");
	for (unsigned p = 0; p < app->n_ports; p++) {
		struct port_totals t;
		port_totals(app, p, &t);
		il_json_obj(&js, app->ports[p].name);
		il_json_u64(&js, "rx", t.rx);
		il_json_u64(&js, "tx", t.tx);
		il_json_u64(&js, "rx_missed", t.missed);
		il_json_u64(&js, "rx_errors", t.rx_err);
		il_json_u64(&js, "tx_errors", t.tx_err);
		il_json_u64(&js, "drop_tx_full", t.tx_dropped);
		il_json_u64(&js, "drop_link_down", t.link_down);
		il_json_end(&js);
	}
	il_json_end(&js);
	il_json_obj(&js, "stages");
	for (unsigned s = 0; s < app->n_stages; s++) {
		const struct il_stage *st = app->stages[s];
		il_json_obj(&js, st->name);
		il_json_str(&js, "type", st->type->name);
		il_json_u64(&js, "pkts_in", st->pkts_in);
		if (IL_STAGE_CYCLES) {
			il_json_u64(&js, "cycles", st->tsc_busy);
			il_json_u64(&js, "poll_cycles", st->tsc_poll);
		}
		for (unsigned c = 0; c < st->type->n_counters; c++)
			il_json_u64(&js, st->type->counter_names[c], st->ctr[c]);
		if (st->type->state && st->ctx) {
			struct json_state jst = {
				.sink = {.put = json_state_put},
				.j = &js,
				.app = app,
			};
			st->type->state(st, &jst.sink);
		}
		il_json_end(&js);
	}
	il_json_end(&js);
	il_json_u64(&js, "messages_ordered", counter_sum(app, "stamped_msgs"));
	il_json_u64(&js, "frames_ordered", counter_sum(app, "stamped_frames"));
	il_json_u64(&js, "drops_total", drops_total(app));
	if (app->n_shards) {
		/* docs/scaling.md 1.4: strays handed over, per shard. */
		il_json_arr(&js, "shards");
		for (unsigned k = 0; k < app->n_shards; k++) {
			const struct il_shard *sh = app->shards[k];
			il_json_obj(&js, NULL);
			il_json_u64(&js, "shard", k);
			il_json_u64(&js, "lcore", app->shard_lcores[k]);
			il_json_u64(&js, "handoff_out", sh ? sh->handoff_out : 0);
			il_json_u64(&js, "handoff_in", sh ? sh->handoff_in : 0);
			il_json_u64(&js, "drop_handoff_full", sh ? sh->drop_handoff_full : 0);
			il_json_u64(&js, "drop_handoff_nombuf", sh ? sh->drop_handoff_nombuf : 0);
			il_json_u64(&js, "pool_size", sh && sh->pool ? sh->pool->size : 0);
			il_json_u64(&js, "pool_avail",
				    sh && sh->pool ? rte_mempool_avail_count(sh->pool) : 0);
			il_json_arr(&js, "groups");
			for (unsigned g = 0; g < app->n_groups; g++)
				if (app->groups[g].shard == k)
					il_json_u64(&js, NULL, app->groups[g].id);
			il_json_end(&js);
			il_json_end(&js);
		}
		il_json_end(&js);
	}
	il_json_end(&js);
	if (il_json_finish(&js) | fclose(j))
		fprintf(stderr, "interlink: cannot write %s\n", json_path);
}

void il_summary(struct il_app *app, double elapsed, double traffic_s, const char *json_path)
{
	uint64_t stamped = counter_sum(app, "stamped_msgs");
	uint64_t frames = counter_sum(app, "stamped_frames");
	char r1[32], r2[32];

	/* The JSON file first: whatever befalls the text below (stdout a
	 * closed pipe) cannot cost it. */
	if (json_path)
		write_json(app, elapsed, traffic_s, json_path);
	if (status_in_place)
		printf("\n");
	if (app->ha_role != 0)
		printf("\n==== interlink summary: %s, %s, epoch %u, %.2f s ====\n", app->name,
		       ha_role_name(app->ha_role), app->epoch, elapsed);
	else
		printf("\n==== interlink summary: %s, epoch %u, %.2f s ====\n", app->name,
		       app->epoch, elapsed);
	/* Rates over the time traffic flowed, not over start-up and idle. */
	printf("messages ordered   %" PRIu64 " in %" PRIu64 " frames (%s, %s over %.2f s of "
	       "traffic)\n", stamped, frames,
	       fmt_rate(r1, sizeof(r1), traffic_s > 0 ? (double)frames / traffic_s : 0.0, "pps"),
	       fmt_rate(r2, sizeof(r2), traffic_s > 0 ? (double)stamped / traffic_s : 0.0,
			"msg/s"), traffic_s);
	for (unsigned k = 0; k < app->n_shards; k++) {
		const struct il_shard *sh = app->shards[k];
		if (sh)
			printf("shard %u (lcore %u) handed over %" PRIu64 ", took over %" PRIu64
			       ", dropped on a full hand-over ring %" PRIu64
			       ", dropped with its pool empty %" PRIu64 "\n", k, sh->lcore,
			       sh->handoff_out, sh->handoff_in, sh->drop_handoff_full,
			       sh->drop_handoff_nombuf);
	}
	printf("NAKs served        %" PRIu64 " (%" PRIu64 " frames retransmitted, %" PRIu64
	       " UNAVAIL)\n",
	       counter_sum(app, "naks"), counter_sum(app, "retransmitted_frames"),
	       counter_sum(app, "unavail_sent"));
	printf("%-10s %14s %14s %10s %10s %10s %10s %10s\n", "port", "rx", "tx", "missed",
	       "rx_err", "tx_err", "tx_full", "link_down");
	for (unsigned p = 0; p < app->n_ports; p++) {
		struct port_totals t;
		port_totals(app, p, &t);
		printf("%-10s %14" PRIu64 " %14" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64
		       " %10" PRIu64 " %10" PRIu64 "\n",
		       app->ports[p].name, t.rx, t.tx, t.missed, t.rx_err, t.tx_err, t.tx_dropped,
		       t.link_down);
	}
	printf("%-12s %-10s %12s %10s %10s  counters\n", "stage", "type", "pkts_in", "cyc/pkt",
	       "poll_Mcyc");
	for (unsigned s = 0; s < app->n_stages; s++) {
		const struct il_stage *st = app->stages[s];
		printf("%-12s %-10s %12" PRIu64, st->name, st->type->name, st->pkts_in);
		if (IL_STAGE_CYCLES)
			printf(" %10.1f %10.1f ",
			       st->pkts_in ? (double)st->tsc_busy / (double)st->pkts_in : 0.0,
			       (double)st->tsc_poll / 1e6);
		else
			printf(" %10s %10s ", "-", "-"); /* built without stage_cycles */
		for (unsigned c = 0; c < st->type->n_counters; c++)
			if (st->ctr[c])
				printf(" %s=%" PRIu64, st->type->counter_names[c], st->ctr[c]);
		printf("\n");
	}
	printf("drops by reason   ");
	uint64_t any = 0;
	for (unsigned s = 0; s < app->n_stages; s++) {
		const struct il_stage *st = app->stages[s];
		for (unsigned c = 0; c < st->type->n_counters; c++)
			if (is_drop_counter(st->type->counter_names[c]) && st->ctr[c]) {
				printf(" %s.%s=%" PRIu64, st->name, st->type->counter_names[c] + 5,
				       st->ctr[c]);
				any += st->ctr[c];
			}
	}
	for (unsigned p = 0; p < app->n_ports; p++) {
		struct port_totals t;
		port_totals(app, p, &t);
		if (t.tx_dropped)
			printf(" %s.tx_full=%" PRIu64, app->ports[p].name, t.tx_dropped);
		if (t.link_down)
			printf(" %s.link_down=%" PRIu64, app->ports[p].name, t.link_down);
		if (t.missed)
			printf(" %s.rx_missed=%" PRIu64, app->ports[p].name, t.missed);
		any += t.tx_dropped + t.link_down + t.missed;
	}
	printf("%s\n", any ? "" : " none");
	if (il_guard_waits())
		printf("peer disconnects  %" PRIu64 " unmaps held until the workers were quiescent"
		       " (%" PRIu64 " gave up after 200 ms)\n", il_guard_waits(),
		       il_guard_timeouts());
	fflush(stdout);
}
