/* SPDX-License-Identifier: BSD-3-Clause
 * From config to a running appliance: ports, groups, stage instances and
 * their placement on lcores. Every error names the config key at fault.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_pause.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include <interlink/app.h>
#include <interlink/err.h>
#include <interlink/memif_guard.h>
#include <interlink/port.h>
#include <interlink/wire.h>

static const char *const top_keys[] = {
	"name", "udp_port", "epoch", "appliance_ip", "mtu", "status_interval_ms", "eal",
	"ports", "groups", "stages", "pipeline", "pool_size", "shards", NULL,
};

int il_app_port_index(const struct il_app *app, const char *name)
{
	for (unsigned i = 0; i < app->n_ports; i++)
		if (!strcmp(app->ports[i].name, name))
			return (int)i;
	return -1;
}

struct il_stage *il_app_stage(const struct il_app *app, const char *name)
{
	for (unsigned i = 0; i < app->n_stages; i++)
		if (!strcmp(app->stages[i]->name, name))
			return app->stages[i];
	return NULL;
}

struct il_stage *il_app_stage_peer(const struct il_app *app, const struct il_stage *st,
				   const char *name)
{
	char full[IL_NAME_LEN + 8];

	if (st->shard <= 0)
		return il_app_stage(app, name);
	snprintf(full, sizeof(full), "%s@%d", name, st->shard);
	return il_app_stage(app, full);
}

static int configure_ports(struct il_app *app, const struct il_cfg *ports, char *err,
			   size_t errlen)
{
	static const char *const keys[] = {"device", "rx_desc", "tx_desc", "promisc", "queues",
					   NULL};

	if (!ports)
		return ERR("config: key 'ports' is missing: name at least an 'in' and an 'out' port, "
			   "each with a 'device' (a PCI address or a vdev string)");
	if (il_cfg_expect(ports, IL_CFG_MAP, err, errlen))
		return -1;
	if (il_cfg_len(ports) == 0 || il_cfg_len(ports) > IL_MAX_PORTS)
		return ERR("config: 'ports' must name 1..%d ports, it names %u", IL_MAX_PORTS,
			   il_cfg_len(ports));
	for (unsigned i = 0; i < il_cfg_len(ports); i++) {
		const struct il_cfg *p = il_cfg_at(ports, i);
		struct il_port *port = &app->ports[app->n_ports];
		const char *name = il_cfg_key_at(ports, i), *dev;
		uint64_t v;
		bool b;

		if (strlen(name) >= IL_NAME_LEN)
			return ERR("config: port name '%s' is longer than %d characters", name,
				   IL_NAME_LEN - 1);
		snprintf(port->name, sizeof(port->name), "%s", name);
		if (il_cfg_expect(p, IL_CFG_MAP, err, errlen) || il_cfg_check_keys(p, keys, err, errlen))
			return -1;
		if (il_cfg_str(p, "device", NULL, &dev, err, errlen))
			return -1;
		if (!dev || !*dev)
			return ERR("config: key '%s.device' is missing: give a PCI address "
				   "(0000:03:00.0) or a vdev string (net_memif0,role=server,...)",
				   il_cfg_path(p));
		if (strlen(dev) >= IL_DEVARGS_LEN)
			return ERR("config: key '%s.device' is longer than %d characters",
				   il_cfg_path(p), IL_DEVARGS_LEN - 1);
		snprintf(port->device, sizeof(port->device), "%s", dev);
		if (il_port_dev_name(dev, port->dev_name, sizeof(port->dev_name)))
			return ERR("config: key '%s.device': '%s' is neither a PCI address nor a "
				   "vdev string starting with net_", il_cfg_path(p), dev);
		for (unsigned j = 0; j < app->n_ports; j++)
			if (!strcmp(app->ports[j].dev_name, port->dev_name))
				return ERR("config: ports '%s' and '%s' both use device '%s'",
					   app->ports[j].name, name, port->dev_name);
		if (il_cfg_u64(p, "rx_desc", 1024, 64, 16384, &v, err, errlen))
			return -1;
		port->rx_desc = (uint16_t)v;
		if (il_cfg_u64(p, "tx_desc", 1024, 64, 16384, &v, err, errlen))
			return -1;
		port->tx_desc = (uint16_t)v;
		if (il_cfg_bool(p, "promisc", true, &b, err, errlen))
			return -1;
		port->promisc = b;
		/* Receive queues: with shards, one per shard (each polls its
		 * own) or one (shard 0 polls it, strays are handed over). */
		if (il_cfg_u64(p, "queues", 1, 1, IL_MAX_SHARDS, &v, err, errlen))
			return -1;
		port->n_rxq = (uint16_t)v;
		app->n_ports++;
	}
	return 0;
}

static int configure_groups(struct il_app *app, const struct il_cfg *groups, char *err,
			    size_t errlen)
{
	static const char *const keys[] = {"id", "address", "port", "raw", "wan",
					   "wan_packet_bytes", "shard", NULL};
	static const char *const raw_keys[] = {"dst", "port", NULL};

	if (!groups)
		return ERR("config: key 'groups' is missing: list at least one group "
			   "({ id: 1, address: 239.1.1.1 })");
	if (il_cfg_expect(groups, IL_CFG_SEQ, err, errlen))
		return -1;
	if (il_cfg_len(groups) == 0 || il_cfg_len(groups) > IL_MAX_GROUPS)
		return ERR("config: 'groups' must list 1..%d groups, it lists %u", IL_MAX_GROUPS,
			   il_cfg_len(groups));
	for (unsigned i = 0; i < il_cfg_len(groups); i++) {
		const struct il_cfg *g = il_cfg_at(groups, i);
		struct il_group *grp = &app->groups[i];
		uint64_t v;

		if (il_cfg_expect(g, IL_CFG_MAP, err, errlen) || il_cfg_check_keys(g, keys, err, errlen))
			return -1;
		if (!il_cfg_get(g, "id"))
			return ERR("config: key '%s.id' is missing (a group id in 0..65535)",
				   il_cfg_path(g));
		if (il_cfg_u64(g, "id", 0, 0, 65535, &v, err, errlen))
			return -1;
		grp->id = (uint16_t)v;
		if (app->group_idx_by_id[grp->id])
			return ERR("config: key '%s.id': group %u is configured twice", il_cfg_path(g),
				   grp->id);
		if (il_cfg_ipv4(g, "address", 0, &grp->address, err, errlen))
			return -1;
		if (grp->address && (grp->address >> 28) != 0xe)
			return ERR("config: key '%s.address': %u.%u.%u.%u is not a multicast address "
				   "(224.0.0.0/4)", il_cfg_path(g), grp->address >> 24,
				   (grp->address >> 16) & 255, (grp->address >> 8) & 255,
				   grp->address & 255);
		if (il_cfg_u64(g, "port", app->il_udp_port, 1, 65535, &v, err, errlen))
			return -1;
		grp->out_port = (uint16_t)v;
		/* A WAN group's credits carry the TCP-friendly rate (docs/control.md
		 * section 12); s, the packet size of eq. 4.1, defaults to the MTU's
		 * UDP payload. */
		if (il_cfg_bool(g, "wan", false, &grp->wan, err, errlen))
			return -1;
		if (!grp->wan && il_cfg_get(g, "wan_packet_bytes"))
			return ERR("config: key '%s.wan_packet_bytes' applies to WAN groups only: "
				   "set '%s.wan: true' too", il_cfg_path(g), il_cfg_path(g));
		v = app->frame_max - 14u - 28u;
		if (grp->wan && il_cfg_u64(g, "wan_packet_bytes", v, 64, 9000, &v, err, errlen))
			return -1;
		grp->wan_packet_bytes = (uint16_t)v;
		const struct il_cfg *raw = il_cfg_get(g, "raw");
		if (raw) {
			if (il_cfg_expect(raw, IL_CFG_MAP, err, errlen) ||
			    il_cfg_check_keys(raw, raw_keys, err, errlen))
				return -1;
			if (!il_cfg_get(raw, "dst") || !il_cfg_get(raw, "port"))
				return ERR("config: '%s' needs both 'dst' (IPv4) and 'port' (UDP "
					   "destination port) of the plain UDP traffic to sequence",
					   il_cfg_path(raw));
			if (il_cfg_ipv4(raw, "dst", 0, &grp->raw_dst_ip, err, errlen) ||
			    il_cfg_u64(raw, "port", 0, 1, 65535, &v, err, errlen))
				return -1;
			grp->raw_dst_port = (uint16_t)v;
			if (grp->raw_dst_port == app->il_udp_port)
				return ERR("config: key '%s.port': %u is the native Interlink port "
					   "(udp_port); raw traffic needs another one",
					   il_cfg_path(raw), grp->raw_dst_port);
			if (!grp->address)
				return ERR("config: key '%s.address' is missing: a raw-mode group "
					   "needs the multicast address its sequenced frames go to",
					   il_cfg_path(g));
			for (unsigned j = 0; j < i; j++)
				if (app->groups[j].raw && app->groups[j].raw_dst_ip == grp->raw_dst_ip &&
				    app->groups[j].raw_dst_port == grp->raw_dst_port)
					return ERR("config: '%s': groups %u and %u use the same raw "
						   "filter", il_cfg_path(raw), app->groups[j].id,
						   grp->id);
			grp->raw = true;
		}
		app->group_idx_by_id[grp->id] = (uint16_t)(i + 1);
		app->n_groups++;
	}
	return 0;
}

/* shards: { lcores: [1, 2], assign: hash | config, handoff_slots: 1024 } and
 * groups[i].shard (docs/scaling.md 1.2). Absent: no shards, the pipeline
 * exactly as configured. */
static int configure_shards(struct il_app *app, char *err, size_t errlen)
{
	static const char *const keys[] = {"lcores", "assign", "handoff_slots", NULL};
	static const char *const assigns[] = {"hash", "config", NULL};
	const struct il_cfg *sh = il_cfg_get(app->cfg, "shards");
	const struct il_cfg *groups = il_cfg_get(app->cfg, "groups");
	const struct il_cfg *lc;
	int assign;
	uint64_t v;

	if (!sh) {
		for (unsigned i = 0; i < app->n_groups; i++)
			if (il_cfg_get(il_cfg_at(groups, i), "shard"))
				return ERR("config: key '%s.shard': there are no shards (add "
					   "'shards: { lcores: [...], assign: config }')",
					   il_cfg_path(il_cfg_at(groups, i)));
		for (unsigned p = 0; p < app->n_ports; p++)
			if (app->ports[p].n_rxq != 1)
				return ERR("config: key 'ports.%s.queues': %u queues need shards "
					   "(shards.lcores), one per shard", app->ports[p].name,
					   app->ports[p].n_rxq);
		return 0;
	}
	if (il_cfg_expect(sh, IL_CFG_MAP, err, errlen) || il_cfg_check_keys(sh, keys, err, errlen))
		return -1;
	lc = il_cfg_get(sh, "lcores");
	if (!lc || il_cfg_kind(lc) != IL_CFG_SEQ || il_cfg_len(lc) == 0 ||
	    il_cfg_len(lc) > IL_MAX_SHARDS)
		return ERR("config: key 'shards.lcores' must list 1..%d worker lcores, one shard "
			   "each (e.g. [1, 2])", IL_MAX_SHARDS);
	for (unsigned i = 0; i < il_cfg_len(lc); i++) {
		const char *sv = il_cfg_scalar(il_cfg_at(lc, i));
		char *end = NULL;
		unsigned long l = sv ? strtoul(sv, &end, 10) : 0;

		if (!sv || !*sv || *end || l >= RTE_MAX_LCORE)
			return ERR("config: key 'shards.lcores[%u]': '%s' is not an lcore id "
				   "(0..%d)", i, sv ? sv : "?", RTE_MAX_LCORE - 1);
		for (unsigned j = 0; j < i; j++)
			if (app->shard_lcores[j] == l)
				return ERR("config: key 'shards.lcores': lcore %lu is listed twice",
					   l);
		app->shard_lcores[i] = (unsigned)l;
	}
	app->n_shards = (uint16_t)il_cfg_len(lc);
	if (il_cfg_enum(sh, "assign", assigns, 0, &assign, err, errlen))
		return -1;
	app->shard_assign_config = assign == 1;
	if (il_cfg_u64(sh, "handoff_slots", 1024, 2, 1u << 20, &v, err, errlen))
		return -1;
	if (v & (v - 1))
		return ERR("config: key 'shards.handoff_slots': %lu is not a power of two "
			   "(entries per hand-over ring, e.g. 1024)", (unsigned long)v);
	app->handoff_slots = (unsigned)v;
	for (unsigned i = 0; i < app->n_groups; i++) {
		const struct il_cfg *g = il_cfg_at(groups, i);
		struct il_group *grp = &app->groups[i];

		if (!app->shard_assign_config) {
			if (il_cfg_get(g, "shard"))
				return ERR("config: key '%s.shard': groups name their shard only "
					   "with 'shards.assign: config' (it is 'hash': the shard "
					   "follows from the group's address)", il_cfg_path(g));
		} else if (il_cfg_get(g, "shard")) {
			if (il_cfg_u64(g, "shard", 0, 0, UINT16_MAX, &v, err, errlen))
				return -1;
			if (v >= app->n_shards)
				return ERR("config: key '%s.shard': %lu is not a shard "
					   "(shards.lcores has %u entries: 0..%u)", il_cfg_path(g),
					   (unsigned long)v, app->n_shards, app->n_shards - 1u);
			grp->shard = (uint8_t)v;
			continue;
		}
		/* By hash (also a group that names no shard under assign:
		 * config): where RSS on its destination lands it. */
		uint32_t dst = grp->raw ? grp->raw_dst_ip : grp->address;
		if (dst == 0)
			return ERR("config: key '%s.address' is missing: with shards the owner "
				   "of a group follows from its address (or name it: "
				   "'%s.shard' with 'shards.assign: config')", il_cfg_path(g),
				   il_cfg_path(g));
		grp->shard = (uint8_t)il_shard_of_addr(dst, app->n_shards);
	}
	for (unsigned p = 0; p < app->n_ports; p++)
		if (app->ports[p].n_rxq != 1 && app->ports[p].n_rxq != app->n_shards)
			return ERR("config: key 'ports.%s.queues': %u; with %u shards a port has "
				   "1 queue (polled by shard 0, strays handed over) or %u (one "
				   "per shard)", app->ports[p].name, app->ports[p].n_rxq,
				   app->n_shards, app->n_shards);
	return 0;
}

int il_app_configure(struct il_app *app, struct il_cfg *cfg, char *err, size_t errlen)
{
	const char *name;
	uint64_t v;

	app->cfg = cfg;
	if (il_cfg_check_keys(cfg, top_keys, err, errlen))
		return -1;
	if (il_cfg_str(cfg, "name", "interlink", &name, err, errlen))
		return -1;
	if (!*name || strlen(name) >= IL_NAME_LEN || strspn(name,
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != strlen(name))
		return ERR("config: key 'name': '%s' must be 1..%d letters, digits, '-' or '_'",
			   name, IL_NAME_LEN - 1);
	snprintf(app->name, sizeof(app->name), "%s", name);
	if (il_cfg_u64(cfg, "udp_port", IL_UDP_PORT_DEFAULT, 1, 65535, &v, err, errlen))
		return -1;
	app->il_udp_port = (uint16_t)v;
	if (il_cfg_u64(cfg, "epoch", 0, 0, UINT32_MAX, &v, err, errlen))
		return -1;
	app->epoch = v ? (uint32_t)v : (uint32_t)time(NULL);
	if (il_cfg_ipv4(cfg, "appliance_ip", 0xc0000201u, &app->appliance_ip, err, errlen))
		return -1;
	if (il_cfg_u64(cfg, "mtu", 1500, 576, 9600, &v, err, errlen))
		return -1;
	app->frame_max = (uint16_t)(v + 14);
	if (configure_ports(app, il_cfg_get(cfg, "ports"), err, errlen))
		return -1;
	if (configure_groups(app, il_cfg_get(cfg, "groups"), err, errlen))
		return -1;
	if (configure_shards(app, err, errlen))
		return -1;
	return 0;
}

int il_app_eal_args(const struct il_app *app, const char *prog, char **argv, int max, char *err,
		    size_t errlen)
{
	int n = il_cfg_str_list(app->cfg, "eal", (const char **)argv + 1, max - 3, err, errlen);
	bool pci = false, prefix = false;
	static char prefix_arg[IL_NAME_LEN + 16];

	if (n < 0)
		return -1;
	argv[0] = (char *)prog;
	for (int i = 1; i <= n; i++)
		prefix |= !strncmp(argv[i], "--file-prefix", 13);
	n++;
	for (unsigned i = 0; i < app->n_ports; i++) {
		if (n >= max - 3)
			return ERR("config: too many EAL arguments");
		if (il_port_is_vdev(app->ports[i].device)) {
			argv[n++] = (char *)"--vdev";
		} else {
			argv[n++] = (char *)"-a";
			pci = true;
		}
		argv[n++] = (char *)app->ports[i].device;
	}
	if (!pci && n < max - 1)
		argv[n++] = (char *)"--no-pci";
	if (!prefix && n < max - 1) {
		snprintf(prefix_arg, sizeof(prefix_arg), "--file-prefix=%s", app->name);
		argv[n++] = prefix_arg;
	}
	argv[n] = NULL;
	return n;
}

/* The type of stage instance i of 'stages' (NULL: err says why). */
static const struct il_stage_type *stage_type_at(const struct il_cfg *stages, unsigned i,
						  char *err, size_t errlen)
{
	const struct il_cfg *p = il_cfg_at(stages, i);
	const char *name = il_cfg_key_at(stages, i), *type;
	char list[512];

	if (il_cfg_expect(p, IL_CFG_MAP, err, errlen))
		return NULL;
	if (strlen(name) >= IL_NAME_LEN) {
		il_err(err, errlen, "config: stage name '%s' is longer than %d characters", name,
		       IL_NAME_LEN - 1);
		return NULL;
	}
	if (il_cfg_str(p, "type", NULL, &type, err, errlen))
		return NULL;
	il_stage_types_list(list, sizeof(list));
	if (!type) {
		il_err(err, errlen, "config: key '%s.type' is missing (one of: %s)",
		       il_cfg_path(p), list);
		return NULL;
	}
	const struct il_stage_type *t = il_stage_type_find(type);
	if (!t)
		il_err(err, errlen, "config: key '%s.type': unknown stage type '%s' (one of: %s)",
		       il_cfg_path(p), type, list);
	return t;
}

static int check_stages_map(const struct il_cfg *stages, char *err, size_t errlen)
{
	if (!stages)
		return ERR("config: key 'stages' is missing: name the stage instances, e.g. "
			   "{ classify: { type: classify }, seq: { type: sequencer } }");
	if (il_cfg_expect(stages, IL_CFG_MAP, err, errlen))
		return -1;
	if (il_cfg_len(stages) > IL_MAX_STAGES)
		return ERR("config: 'stages' names %u stages; at most %d", il_cfg_len(stages),
			   IL_MAX_STAGES);
	return 0;
}

static int create_stages(struct il_app *app, char *err, size_t errlen)
{
	const struct il_cfg *stages = il_cfg_get(app->cfg, "stages");

	if (check_stages_map(stages, err, errlen))
		return -1;
	for (unsigned i = 0; i < il_cfg_len(stages); i++) {
		const struct il_cfg *p = il_cfg_at(stages, i);
		const char *name = il_cfg_key_at(stages, i);
		const struct il_stage_type *t = stage_type_at(stages, i, err, errlen);

		if (!t)
			return -1;
		struct il_stage *st = rte_zmalloc("il_stage", sizeof(*st), RTE_CACHE_LINE_SIZE);
		if (!st)
			return ERR("out of memory creating stage '%s'", name);
		snprintf(st->name, sizeof(st->name), "%s", name);
		st->type = t;
		st->app = app;
		st->lcore = -1;
		st->shard = app->n_shards ? 0 : -1;
		st->kinds = t->kinds;
		app->stages[app->n_stages++] = st;
		if (t->create(st, p, app, err, errlen))
			return -1;
	}
	return 0;
}

/* Every stage of a chain must be given the per-packet metadata it reads
 * (struct il_stage_type, meta_needs): set by an earlier stage, and not
 * lost since (a stage that adds untagged packets to the burst). The tags
 * are in m->hash, where a stage that reads them without a classify before
 * it would find whatever the PMD or the mbuf's last user left there. */
static int check_chain_meta(const struct il_chain *ch, const struct il_cfg *where, char *err,
			    size_t errlen)
{
	const struct il_stage *setter = NULL, *loser = NULL;
	unsigned have = 0;

	for (uint16_t i = 0; i < ch->n_stages; i++) {
		const struct il_stage *st = ch->stages[i];
		const struct il_stage_type *t = st->type;

		if (t->meta_needs & ~have) {
			if (loser)
				return ERR("config: key '%s': stage '%s' (%s) needs every packet "
					   "tagged by a classify stage, but '%s' (%s) after '%s' "
					   "adds untagged packets to the burst; put '%s' before "
					   "'%s'", il_cfg_path(where), st->name, t->name,
					   loser->name, loser->type->name, setter->name,
					   loser->name, setter->name);
			return ERR("config: key '%s': stage '%s' (%s) needs every packet tagged "
				   "by a classify stage earlier in the chain; add one before it",
				   il_cfg_path(where), st->name, t->name);
		}
		if (t->meta_loses & have)
			loser = st;
		have = (have & ~t->meta_loses) | t->meta_sets;
		if (t->meta_sets) {
			setter = st;
			loser = NULL;
		}
	}
	return 0;
}

/* Stage types a shard can run: their state is per group and per instance
 * (a control stage opens one channel per shard, "<chan>.<k>"; a lec stage
 * protects its shard's groups). The others (FT-TCP rings, pair, FEC,
 * impairment) keep state or files of their own that one instance per shard
 * would duplicate (docs/scaling.md, "Where the implementation stands"). */
static bool shardable_type(const char *type)
{
	return type && (!strcmp(type, "classify") || !strcmp(type, "sequencer") ||
			!strcmp(type, "nak") || !strcmp(type, "control") || !strcmp(type, "lec"));
}

static int check_lcore(const struct il_app *app, unsigned lc, const char *key, char *err,
		       size_t errlen)
{
	char avail[256] = "";
	size_t off = 0;
	unsigned id;

	if (rte_lcore_is_enabled(lc) && lc != rte_get_main_lcore())
		return 0;
	(void)app;
	RTE_LCORE_FOREACH_WORKER(id)
		off += (size_t)snprintf(avail + off, sizeof(avail) - off, "%s%u", off ? ", " : "",
					id);
	return ERR("config: key '%s': %u is not a worker lcore (main lcore %u runs the status "
		   "line; enabled workers: %s; add lcores with eal: [--lcores, ...])", key, lc,
		   rte_get_main_lcore(), off ? avail : "none");
}

int il_app_check_service_lcore(const struct il_app *app, const struct il_stage *st,
			       unsigned lc, const char *key, char *err, size_t errlen)
{
	if (check_lcore(app, lc, key, err, errlen))
		return -1;
	for (unsigned w = 0; w < app->n_workers; w++)
		if (app->workers[w].lcore_id == lc)
			return ERR("config: key '%s': lcore %u runs chains (pipeline[%u]): a "
				   "service lcore is one no chain uses", key, lc, w);
	for (unsigned s = 0; s < app->n_stages; s++)
		if (app->stages[s] != st && app->stages[s]->has_service &&
		    app->stages[s]->service_lcore == lc)
			return ERR("config: key '%s': lcore %u already serves stage '%s'", key, lc,
				   app->stages[s]->name);
	return 0;
}

/* The loop of a stage's service lcore (il_stage_type.service). */
static int service_main(void *arg)
{
	struct il_stage *st = arg;

	while (!st->app->quit)
		if (!st->type->service(st))
			rte_pause();
	return 0;
}

unsigned il_app_launch_services(struct il_app *app)
{
	unsigned n = 0;

	for (unsigned s = 0; s < app->n_stages; s++) {
		struct il_stage *st = app->stages[s];

		if (!st->has_service || st->lcore < 0 || !st->type->service)
			continue;
		if (rte_eal_remote_launch(service_main, st, st->service_lcore) == 0)
			n++;
		else /* checked free at start: not expected */
			fprintf(stderr, "interlink: warning: stage '%s': cannot launch its service "
				"on lcore %u (busy)\n", st->name, st->service_lcore);
	}
	return n;
}

/* Shard k's copy of stage `orig`, on lcore lc: "name@k", made from the same
 * config node, keeping state only for the groups shard k owns. */
static struct il_stage *clone_stage(struct il_app *app, const struct il_stage *orig, unsigned k,
				    struct il_worker *wk, char *err, size_t errlen)
{
	const struct il_cfg *p = il_cfg_get(il_cfg_get(app->cfg, "stages"), orig->name);
	struct il_stage *st;

	if (app->n_stages >= IL_MAX_STAGES) {
		il_err(err, errlen, "config: 'shards': %u shards of the pipeline's stages make "
		       "more than %d stage instances", app->n_shards, IL_MAX_STAGES);
		return NULL;
	}
	st = rte_zmalloc("il_stage", sizeof(*st), RTE_CACHE_LINE_SIZE);
	if (!st) {
		il_err(err, errlen, "out of memory creating stage '%s@%u'", orig->name, k);
		return NULL;
	}
	if ((size_t)snprintf(st->name, sizeof(st->name), "%s@%u", orig->name, k) >=
	    sizeof(st->name)) {
		il_err(err, errlen, "config: stage name '%s' is too long for its shard copies "
		       "('%s@%u'): at most %d characters", orig->name, orig->name, k,
		       IL_NAME_LEN - 4);
		rte_free(st);
		return NULL;
	}
	st->type = orig->type;
	st->app = app;
	st->lcore = (int)wk->lcore_id;
	st->shard = (int)k;
	st->kinds = st->type->kinds;
	st->io = &wk->io;
	app->stages[app->n_stages++] = st;
	if (st->type->create(st, p, app, err, errlen))
		return NULL;
	return st;
}

/* Shards 1..n-1 run worker 0's chains over their own queues with their own
 * stage instances; every shard splits strays off after classify. */
static int place_shards(struct il_app *app, char *err, size_t errlen)
{
	const struct il_worker *w0 = &app->workers[0];
	char key[64];

	for (unsigned k = 1; k < app->n_shards; k++) {
		struct il_worker *wk = &app->workers[k];
		const struct il_stage *orig[IL_MAX_STAGES];
		struct il_stage *copy[IL_MAX_STAGES];
		unsigned n_map = 0;

		snprintf(key, sizeof(key), "shards.lcores[%u]", k);
		if (check_lcore(app, app->shard_lcores[k], key, err, errlen))
			return -1;
		wk->lcore_id = app->shard_lcores[k];
		wk->io.lcore_id = wk->lcore_id;
		wk->n_chains = w0->n_chains;
		for (unsigned c = 0; c < w0->n_chains; c++) {
			const struct il_chain *src = &w0->chains[c];
			struct il_chain *ch = &wk->chains[c];

			*ch = *src;
			for (unsigned s = 0; s < src->n_stages; s++) {
				struct il_stage *st = NULL;
				for (unsigned i = 0; i < n_map; i++)
					if (orig[i] == src->stages[s])
						st = copy[i];
				if (!st) {
					st = clone_stage(app, src->stages[s], k, wk, err, errlen);
					if (!st)
						return -1;
					orig[n_map] = src->stages[s];
					copy[n_map++] = st;
				}
				ch->stages[s] = st;
			}
		}
		app->n_workers++;
	}
	for (unsigned k = 0; k < app->n_shards; k++) {
		struct il_worker *wk = &app->workers[k];
		for (unsigned c = 0; c < wk->n_chains; c++) {
			struct il_chain *ch = &wk->chains[c];
			const struct il_port *rp = &app->ports[ch->rx_port];

			ch->rx_queue = rp->n_rxq > 1 ? (uint16_t)k : 0;
			ch->rx_poll = rp->n_rxq > 1 || k == 0;
			ch->handoff_at = -1;
			for (unsigned s = 0; s < ch->n_stages; s++)
				if (ch->stages[s]->type->meta_sets & IL_META_TAGS) {
					ch->handoff_at = (int16_t)s;
					break;
				}
		}
	}
	return 0;
}

/* dry: before EAL, with no stage created yet: check the names and the
 * structure, leave the lcores' existence and the workers for later. */
static int place_stages(struct il_app *app, bool dry, char *err, size_t errlen)
{
	static const char *const wkeys[] = {"lcore", "chains", NULL};
	static const char *const ckeys[] = {"rx", "tx", "stages", NULL};
	const struct il_cfg *pl = il_cfg_get(app->cfg, "pipeline");

	if (!pl)
		return ERR("config: key 'pipeline' is missing: place chains on lcores, e.g. "
			   "[{ lcore: 1, chains: [{ rx: in, stages: [classify, seq], tx: out }] }]");
	if (il_cfg_expect(pl, IL_CFG_SEQ, err, errlen))
		return -1;
	if (il_cfg_len(pl) == 0 || il_cfg_len(pl) > IL_MAX_WORKERS)
		return ERR("config: 'pipeline' must place 1..%d lcores", IL_MAX_WORKERS);
	if (app->n_shards && il_cfg_len(pl) != 1)
		return ERR("config: key 'pipeline': with shards it places one lcore, shard 0's "
			   "(shards.lcores[0]), whose chains every shard runs; it places %u",
			   il_cfg_len(pl));
	for (unsigned w = 0; w < il_cfg_len(pl); w++) {
		const struct il_cfg *wc = il_cfg_at(pl, w);
		struct il_worker *wk = &app->workers[w];
		uint64_t lc;

		if (il_cfg_expect(wc, IL_CFG_MAP, err, errlen) ||
		    il_cfg_check_keys(wc, wkeys, err, errlen))
			return -1;
		if (il_cfg_u64(wc, "lcore", 1, 0, RTE_MAX_LCORE - 1, &lc, err, errlen))
			return -1;
		if (app->n_shards && lc != app->shard_lcores[0])
			return ERR("config: key '%s.lcore': %u; with shards the pipeline's lcore is "
				   "shard 0's, shards.lcores[0] = %u", il_cfg_path(wc), (unsigned)lc,
				   app->shard_lcores[0]);
		if (!dry) {
			char key[IL_NAME_LEN + 64];
			snprintf(key, sizeof(key), "%s.lcore", il_cfg_path(wc));
			if (check_lcore(app, (unsigned)lc, key, err, errlen))
				return -1;
		}
		for (unsigned j = 0; j < w; j++)
			if (app->workers[j].lcore_id == lc)
				return ERR("config: key '%s.lcore': lcore %u is placed twice",
					   il_cfg_path(wc), (unsigned)lc);
		wk->lcore_id = (unsigned)lc;
		wk->io.lcore_id = (unsigned)lc;
		const struct il_cfg *chains = il_cfg_get(wc, "chains");
		if (!chains || il_cfg_expect(chains, IL_CFG_SEQ, err, errlen) ||
		    il_cfg_len(chains) == 0 || il_cfg_len(chains) > IL_MAX_CHAINS)
			return ERR("config: key '%s.chains' must list 1..%d chains "
				   "({ rx: PORT, stages: [...], tx: PORT })", il_cfg_path(wc),
				   IL_MAX_CHAINS);
		for (unsigned c = 0; c < il_cfg_len(chains); c++) {
			const struct il_cfg *cc = il_cfg_at(chains, c);
			struct il_chain *ch = &wk->chains[wk->n_chains];
			const char *rx, *tx;

			if (il_cfg_expect(cc, IL_CFG_MAP, err, errlen) ||
			    il_cfg_check_keys(cc, ckeys, err, errlen))
				return -1;
			if (il_cfg_str(cc, "rx", NULL, &rx, err, errlen) ||
			    il_cfg_str(cc, "tx", NULL, &tx, err, errlen))
				return -1;
			int rxi = rx ? il_app_port_index(app, rx) : -1;
			int txi = tx ? il_app_port_index(app, tx) : -1;
			if (rxi < 0)
				return ERR("config: key '%s.rx': '%s' is not a configured port",
					   il_cfg_path(cc), rx ? rx : "(missing)");
			if (txi < 0)
				return ERR("config: key '%s.tx': '%s' is not a configured port",
					   il_cfg_path(cc), tx ? tx : "(missing)");
			for (unsigned ow = 0; ow <= w; ow++)
				for (unsigned oc = 0; oc < app->workers[ow].n_chains; oc++)
					if (app->workers[ow].chains[oc].rx_port == rxi)
						return ERR("config: key '%s.rx': port '%s' is already "
							   "received by another chain (one rx queue "
							   "per port)", il_cfg_path(cc), rx);
			ch->rx_port = (uint16_t)rxi;
			ch->tx_port = (uint16_t)txi;
			const struct il_cfg *sl = il_cfg_get(cc, "stages");
			if (sl && il_cfg_expect(sl, IL_CFG_SEQ, err, errlen))
				return -1;
			if (il_cfg_len(sl) > IL_MAX_CHAIN_STAGES)
				return ERR("config: key '%s.stages': at most %d stages per chain",
					   il_cfg_path(cc), IL_MAX_CHAIN_STAGES);
			for (unsigned s = 0; s < il_cfg_len(sl); s++) {
				const char *sn = il_cfg_scalar(il_cfg_at(sl, s));
				const char *ty = sn ? il_cfg_scalar(il_cfg_get(il_cfg_get(il_cfg_get(
					app->cfg, "stages"), sn), "type")) : NULL;
				if (app->n_shards && ty && !shardable_type(ty))
					return ERR("config: key '%s': stage '%s' is of type '%s', which "
						   "does not run in shards yet (shards.lcores): only "
						   "classify, sequencer, nak, control and lec do "
						   "(docs/scaling.md)",
						   il_cfg_path(il_cfg_at(sl, s)), sn, ty);
				if (dry) {
					if (!sn || !il_cfg_get(il_cfg_get(app->cfg, "stages"), sn))
						return ERR("config: key '%s': '%s' is not a stage "
							   "named under 'stages'",
							   il_cfg_path(il_cfg_at(sl, s)), sn ? sn : "?");
					continue;
				}
				struct il_stage *st = sn ? il_app_stage(app, sn) : NULL;
				if (!st)
					return ERR("config: key '%s': '%s' is not a stage named "
						   "under 'stages'", il_cfg_path(il_cfg_at(sl, s)),
						   sn ? sn : "?");
				if (st->lcore >= 0 && st->lcore != (int)lc)
					return ERR("config: key '%s': stage '%s' is already placed "
						   "on lcore %d; a stage instance runs on one lcore",
						   il_cfg_path(il_cfg_at(sl, s)), sn, st->lcore);
				st->lcore = (int)lc;
				st->io = &wk->io;
				ch->stages[ch->n_stages++] = st;
				if (st->type->poll)
					ch->any_poll = true;
			}
			if (check_chain_meta(ch, sl, err, errlen))
				return -1;
			wk->n_chains++;
		}
		app->n_workers++;
	}
	if (dry) {
		memset(app->workers, 0, sizeof(app->workers));
		app->n_workers = 0;
		return 0;
	}
	for (unsigned w = 0; w < app->n_workers; w++)
		for (unsigned c = 0; c < app->workers[w].n_chains; c++) {
			app->workers[w].chains[c].rx_poll = true;
			app->workers[w].chains[c].handoff_at = -1;
		}
	if (app->n_shards && place_shards(app, err, errlen))
		return -1;
	/* Every placed lcore gets a tx queue on every port. */
	for (unsigned p = 0; p < app->n_ports; p++)
		app->ports[p].n_txq = app->n_workers;
	for (unsigned w = 0; w < app->n_workers; w++)
		for (unsigned p = 0; p < app->n_ports; p++) {
			app->workers[w].io.txq[p] = (uint16_t)w;
			app->workers[w].io.port_id[p] = app->ports[p].port_id;
		}
	return 0;
}

int il_app_precheck(struct il_app *app, char *err, size_t errlen)
{
	const struct il_cfg *stages = il_cfg_get(app->cfg, "stages");

	if (check_stages_map(stages, err, errlen))
		return -1;
	for (unsigned i = 0; i < il_cfg_len(stages); i++)
		if (!stage_type_at(stages, i, err, errlen))
			return -1;
	return place_stages(app, true, err, errlen);
}

/* One il_shard per shard on its lcore's socket, and a ring per ordered pair
 * of shards (single producer, single consumer). */
static int setup_shards(struct il_app *app, char *err, size_t errlen)
{
	static unsigned instance; /* ring names are per process: tests run several apps */
	unsigned inst = instance++;

	for (unsigned k = 0; k < app->n_shards; k++) {
		int sock = (int)rte_lcore_to_socket_id(app->shard_lcores[k]);
		struct il_shard *sh = rte_zmalloc_socket("il_shard", sizeof(*sh),
							 RTE_CACHE_LINE_SIZE, sock);
		if (!sh)
			return ERR("out of memory for shard %u", k);
		sh->index = (uint16_t)k;
		sh->n = app->n_shards;
		sh->lcore = app->shard_lcores[k];
		for (unsigned g = 0; g < app->n_groups; g++)
			sh->owner[g] = app->groups[g].shard;
		app->shards[k] = sh;
		app->workers[k].shard = sh;
		app->workers[k].io.shard = sh;
	}
	for (unsigned j = 0; j < app->n_shards; j++)
		for (unsigned k = 0; k < app->n_shards; k++) {
			char name[RTE_RING_NAMESIZE];
			if (j == k)
				continue;
			snprintf(name, sizeof(name), "ilho%u_%u_%u", inst, j, k);
			/* The owner's socket: it is the one that reads the frames. */
			struct rte_ring *r = rte_ring_create(name, app->handoff_slots,
				(int)rte_lcore_to_socket_id(app->shard_lcores[k]),
				RING_F_SP_ENQ | RING_F_SC_DEQ);
			if (!r)
				return ERR("cannot create the hand-over ring from shard %u to %u (%u "
					   "slots): %s", j, k, app->handoff_slots,
					   rte_strerror(rte_errno));
			app->shards[j]->out[k] = r;
			app->shards[k]->in[j] = r;
		}
	return 0;
}

static void tx_drop_cb(struct rte_mbuf **pkts, uint16_t unsent, void *userdata)
{
	uint64_t *ctr = userdata;
	*ctr += unsent;
	rte_pktmbuf_free_bulk(pkts, unsent);
}

/*
 * The mbufs a pool must back: every descriptor, every mbuf a stage may hold
 * (every history slot, every packet a FEC decoder keeps by reference),
 * every burst in flight. Without shards one pool backs everything. With
 * shards each has its own (docs/scaling.md 1.1), backing what that shard
 * holds: its stages, receive queue k of every multi-queue port (shard 0
 * also the single-queue ports, which only it polls), its transmit queue
 * on every port, the hand-over rings it fills (a stray stays the sender's
 * until its owner copies it into its own pool) and its bursts.
 */
static unsigned pool_need(const struct il_app *app, int shard)
{
	unsigned hist = 0, need = 4096;
	unsigned workers = shard < 0 ? app->n_workers : 1;

	for (unsigned i = 0; i < app->n_stages; i++) {
		const struct il_stage *st = app->stages[i];
		if (st->type->mbufs_held && (shard < 0 || st->shard == shard))
			hist += st->type->mbufs_held(st);
	}
	if (shard < 0) {
		/* A pair's standby keeps the active's frames (docs/ha.md). */
		const struct il_cfg *stages = il_cfg_get(app->cfg, "stages");
		for (unsigned i = 0; i < il_cfg_len(stages); i++) {
			uint64_t h;
			const char *type =
				il_cfg_scalar(il_cfg_get(il_cfg_at(stages, i), "type"));
			if (type != NULL && strcmp(type, "ha") == 0 &&
			    il_cfg_u64(il_cfg_at(stages, i), "shadow_history", 16384, 0,
				       UINT32_MAX, &h, NULL, 0) == 0)
				hist += (unsigned)h * app->n_groups;
		}
	}
	need += hist;
	for (unsigned p = 0; p < app->n_ports; p++) {
		unsigned nq = app->ports[p].n_rxq ? app->ports[p].n_rxq : 1u;
		if (shard < 0)
			need += app->ports[p].rx_desc * nq;
		else if (nq > 1 || shard == 0)
			need += app->ports[p].rx_desc;
		need += app->ports[p].tx_desc * workers;
	}
	if (shard >= 0)
		need += (app->n_shards - 1u) * app->handoff_slots;
	need += workers * app->n_ports * IL_BURST_CAP * 2;
	return need;
}

static int make_pools(struct il_app *app, char *err, size_t errlen)
{
	unsigned room = RTE_MBUF_DEFAULT_BUF_SIZE;
	unsigned n = app->n_shards ? app->n_shards : 1;
	uint64_t v;

	if ((unsigned)app->frame_max + 64 + RTE_PKTMBUF_HEADROOM > room)
		room = app->frame_max + 64 + RTE_PKTMBUF_HEADROOM;
	app->pool_size = 0;
	for (unsigned k = 0; k < n; k++) {
		int shard = app->n_shards ? (int)k : -1;
		/* pool_size, when set, is each pool's */
		if (il_cfg_u64(app->cfg, "pool_size", pool_need(app, shard), 1024, 1u << 26, &v,
			       err, errlen))
			return -1;
		char pname[64];
		if (shard < 0)
			snprintf(pname, sizeof(pname), "il_pool_%s", app->name);
		else
			snprintf(pname, sizeof(pname), "il_pool_%s_%u", app->name, k);
		int sock = shard < 0 ? (int)rte_socket_id()
				     : (int)rte_lcore_to_socket_id(app->shard_lcores[k]);
		struct rte_mempool *mp = rte_pktmbuf_pool_create(
			pname, (unsigned)v, 256, IL_MBUF_PRIV_SIZE, (uint16_t)room, sock);
		if (!mp)
			return ERR("cannot create a pool of %u mbufs of %u bytes%s (%s): raise the "
				   "EAL memory (eal: [-m, MB]) or lower 'pool_size'/'history'",
				   (unsigned)v, room, shard < 0 ? "" : " for a shard",
				   rte_strerror(rte_errno));
		app->pool_size += (unsigned)v;
		if (shard >= 0)
			app->shards[k]->pool = mp;
		if (k == 0)
			app->pool = mp; /* shard 0's with shards */
	}
	return 0;
}

int il_app_start(struct il_app *app, char *err, size_t errlen)
{
	for (unsigned p = 0; p < app->n_ports; p++)
		if (il_port_lookup(&app->ports[p], err, errlen))
			return -1;
	if (create_stages(app, err, errlen))
		return -1;
	if (place_stages(app, false, err, errlen))
		return -1;
	for (unsigned s = 0; s < app->n_stages; s++) {
		const struct il_stage *st = app->stages[s];
		char key[IL_NAME_LEN + 48];

		if (!st->has_service)
			continue;
		snprintf(key, sizeof(key), "stages.%s.%s", st->name,
			 st->type->service_key ? st->type->service_key : "lcore");
		if (il_app_check_service_lcore(app, st, st->service_lcore, key, err,
					       errlen))
			return -1;
	}
	for (unsigned s = 0; s < app->n_stages; s++)
		if (app->stages[s]->lcore < 0)
			fprintf(stderr, "interlink: warning: stage '%s' is not placed on any chain\n",
				app->stages[s]->name);
	if (app->n_shards && setup_shards(app, err, errlen))
		return -1;

	if (make_pools(app, err, errlen))
		return -1;
	struct rte_mempool *pools[IL_MAX_SHARDS];
	unsigned n_pools = app->n_shards ? app->n_shards : 1;
	for (unsigned k = 0; k < n_pools; k++)
		pools[k] = app->n_shards ? app->shards[k]->pool : app->pool;
	for (unsigned p = 0; p < app->n_ports; p++)
		if (il_port_setup(&app->ports[p], pools, n_pools, app->frame_max, err, errlen))
			return -1;
	for (unsigned s = 0; s < app->n_stages; s++) {
		struct il_stage *st = app->stages[s];
		st->pool = st->shard >= 0 && app->n_shards ? app->shards[st->shard]->pool : app->pool;
	}
	for (unsigned w = 0; w < app->n_workers; w++) {
		struct il_lcore_io *io = &app->workers[w].io;
		for (unsigned p = 0; p < app->n_ports; p++) {
			io->port_id[p] = app->ports[p].port_id;
			io->txb[p] = rte_zmalloc_socket("il_txb", RTE_ETH_TX_BUFFER_SIZE(IL_BURST), 0,
							(int)rte_socket_id());
			if (!io->txb[p])
				return ERR("out of memory for tx buffers");
			rte_eth_tx_buffer_init(io->txb[p], IL_BURST);
			rte_eth_tx_buffer_set_err_callback(io->txb[p], tx_drop_cb, &io->tx_dropped[p]);
		}
	}
	for (unsigned s = 0; s < app->n_stages; s++) {
		struct il_stage *st = app->stages[s];
		if (st->lcore >= 0 && st->type->bind && st->type->bind(st, err, errlen))
			return -1;
	}
	for (unsigned p = 0; p < app->n_ports; p++)
		if (il_port_start(&app->ports[p], err, errlen))
			return -1;
	/* A memif peer that disconnects must not unmap rings under a burst. */
	if (il_guard_arm() < 0)
		return ERR("out of memory for the memif disconnect guard");
	uint32_t memif = 0;
	for (unsigned p = 0; p < app->n_ports; p++) {
		struct rte_eth_dev_info info;
		if (rte_eth_dev_info_get(app->ports[p].port_id, &info) == 0 &&
		    info.driver_name != NULL && !strcmp(info.driver_name, "net_memif"))
			memif |= 1u << p;
	}
	for (unsigned w = 0; w < app->n_workers; w++)
		il_guard_gate_init(&app->workers[w].gate, memif);
	return 0;
}

void il_app_flush(struct il_app *app)
{
	for (unsigned w = 0; w < app->n_workers; w++)
		for (unsigned p = 0; p < app->n_ports; p++)
			if (app->workers[w].io.txb[p])
				rte_eth_tx_buffer_flush(app->ports[p].port_id, (uint16_t)w,
							app->workers[w].io.txb[p]);
}

int il_app_send_now(struct il_app *app, uint16_t port, struct rte_mbuf *m)
{
	if (!app->tx_mute && port < app->n_ports &&
	    rte_eth_tx_burst(app->ports[port].port_id, 0, &m, 1) == 1)
		return 0;
	rte_pktmbuf_free(m);
	return -1;
}

void il_app_last_words(struct il_app *app)
{
	if (app->last_words_said)
		return;
	app->last_words_said = true;
	/* The workers are done: queue 0 of every port is free. */
	for (unsigned s = 0; s < app->n_stages; s++)
		if (app->stages[s]->type->stop)
			app->stages[s]->type->stop(app->stages[s]);
}

void il_app_stop(struct il_app *app)
{
	il_app_flush(app);
	il_app_last_words(app);
	for (unsigned p = 0; p < app->n_ports; p++)
		il_port_stop(&app->ports[p]);
	for (unsigned s = 0; s < app->n_stages; s++) {
		struct il_stage *st = app->stages[s];
		if (st->type->destroy)
			st->type->destroy(st);
		rte_free(st);
	}
	app->n_stages = 0;
	for (unsigned k = 0; k < app->n_shards; k++) {
		struct il_shard *sh = app->shards[k];
		if (!sh)
			continue;
		for (unsigned j = 0; j < app->n_shards; j++) {
			struct rte_mbuf *m;
			if (!sh->in[j])
				continue;
			while (rte_ring_dequeue(sh->in[j], (void **)&m) == 0)
				rte_pktmbuf_free(m);
			rte_ring_free(sh->in[j]);
		}
		rte_free(sh);
		app->shards[k] = NULL;
	}
	for (unsigned w = 0; w < app->n_workers; w++)
		for (unsigned p = 0; p < app->n_ports; p++)
			rte_free(app->workers[w].io.txb[p]);
}
