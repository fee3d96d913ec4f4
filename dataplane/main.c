/* SPDX-License-Identifier: BSD-3-Clause
 * interlink: the appliance binary.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include <interlink/app.h>
#include <interlink/version.h>

#include "eal_args.h"

extern const char il_default_config[];

static struct il_app app;

static void on_signal(int sig)
{
	(void)sig;
	app.quit = true;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: interlink [EAL options] -- [options]\n"
		"       interlink [options]      (no EAL options but the config's)\n"
		"EAL options given here override the config's 'eal' list option by option.\n"
		"  -c, --config FILE     YAML config (default: the embedded sequencer config,\n"
		"                        see --print-config)\n"
		"  -s, --set KEY=VALUE   override a config key, e.g. --set groups.0.id=7\n"
		"                        or --set 'eal=[--no-huge, -m, \"512\"]' (repeatable)\n"
		"  -d, --duration SEC    stop after SEC seconds (default: run until SIGINT/SIGTERM)\n"
		"  -i, --idle-exit MS    stop once no port has received a frame for MS ms\n"
		"  -j, --json FILE       write the final summary as JSON to FILE\n"
		"  -q, --quiet           no status line\n"
		"      --print-config    print the effective config and exit\n"
		"      --list-stages     list the stage types and exit\n"
		"      --list-shards     print each group's shard and lcore (with the config\n"
		"                        and --set given) and exit; no EAL is started\n"
		"      --version         print the version and exit\n"
		"  -h, --help            this help\n");
}

static int list_stages(void)
{
	extern size_t il_stage_types_count(void);
	extern const struct il_stage_type *il_stage_type_at(size_t i);
	for (size_t i = 0; i < il_stage_types_count(); i++) {
		const struct il_stage_type *t = il_stage_type_at(i);
		printf("%-12s %s\n", t->name, t->help);
	}
	return 0;
}

/* --list-shards: the owner of every group as the configuration gives it
 * (docs/scaling.md 1.2), before EAL starts: nothing is probed. */
static int list_shards(const char *cfg_path)
{
	const struct il_cfg *groups = il_cfg_get(app.cfg, "groups");
	unsigned count[IL_MAX_SHARDS] = {0};

	if (!app.n_shards) {
		printf("# %s (%s): no shards (no 'shards' key): every group is stamped on the "
		       "pipeline's lcore\n", app.name, cfg_path ? cfg_path : "embedded default");
		return 0;
	}
	printf("# %s (%s): %u shards, shards.assign: %s\n", app.name,
	       cfg_path ? cfg_path : "embedded default", (unsigned)app.n_shards,
	       app.shard_assign_config ? "config" : "hash");
	printf("%-7s %-22s %-6s %-6s %s\n", "group", "destination", "shard", "lcore", "by");
	for (unsigned i = 0; i < app.n_groups; i++) {
		const struct il_group *g = &app.groups[i];
		uint32_t a = g->raw ? g->raw_dst_ip : g->address;
		char dst[32];
		int n = snprintf(dst, sizeof(dst), "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff,
				 (a >> 8) & 0xff, a & 0xff);
		if (g->raw && g->raw_dst_port)
			snprintf(dst + n, sizeof(dst) - (size_t)n, ":%u (raw)", g->raw_dst_port);
		else if (g->raw)
			snprintf(dst + n, sizeof(dst) - (size_t)n, " (raw)");
		bool named = app.shard_assign_config &&
			     il_cfg_get(il_cfg_at(groups, i), "shard") != NULL;
		printf("%-7u %-22s %-6u %-6u %s\n", g->id, dst, g->shard,
		       app.shard_lcores[g->shard], named ? "config" : "hash");
		count[g->shard]++;
	}
	for (unsigned k = 0; k < app.n_shards; k++)
		printf("# shard %u on lcore %u: %u group%s\n", k, app.shard_lcores[k], count[k],
		       count[k] == 1 ? "" : "s");
	for (unsigned p = 0; p < app.n_ports; p++) {
		if (app.ports[p].n_rxq == app.n_shards)
			printf("# port %s: %u queues, shard k polls queue k\n", app.ports[p].name,
			       app.ports[p].n_rxq);
		else
			printf("# port %s: 1 queue, polled by shard 0: frames of other shards' "
			       "groups are handed over\n", app.ports[p].name);
	}
	return 0;
}

/* memif needs the directory of its socket to exist. */
static void make_socket_dirs(void)
{
	for (unsigned p = 0; p < app.n_ports; p++) {
		const char *s = strstr(app.ports[p].device, "socket=");
		char path[IL_DEVARGS_LEN];
		if (!s)
			continue;
		snprintf(path, sizeof(path), "%.*s", (int)strcspn(s + 7, ","), s + 7);
		for (char *c = path + 1; *c; c++)
			if (*c == '/') {
				*c = 0;
				mkdir(path, 0755);
				*c = '/';
			}
	}
}

static uint64_t rx_total(void)
{
	uint64_t v = 0;
	for (unsigned w = 0; w < app.n_workers; w++)
		for (unsigned p = 0; p < app.n_ports; p++)
			v += app.workers[w].io.rx[p];
	return v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"set", required_argument, NULL, 's'},
		{"duration", required_argument, NULL, 'd'},
		{"idle-exit", required_argument, NULL, 'i'},
		{"json", required_argument, NULL, 'j'},
		{"quiet", no_argument, NULL, 'q'},
		{"print-config", no_argument, NULL, 'P'},
		{"list-stages", no_argument, NULL, 'L'},
		{"list-shards", no_argument, NULL, 'S'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	const char *cfg_path = NULL, *json = NULL;
	const char *sets[64];
	unsigned n_sets = 0;
	double duration = 0, idle_ms = 0;
	bool quiet = false, print_cfg = false, show_shards = false;
	char err[1024];
	static struct il_cmdline cl;
	int c;

	/* A log write must never stop the appliance: with stdout a pipe whose
	 * reader went away (`interlink | head`), writes fail with EPIPE, which
	 * stdio absorbs, instead of killing us mid-forwarding. */
	signal(SIGPIPE, SIG_IGN);

	if (il_cmdline_split(argc, argv, &cl, err, sizeof(err))) {
		fprintf(stderr, "interlink: %s\n", err);
		return 2;
	}
	if (cl.old_order)
		fprintf(stderr, "interlink: note: options before '--' and EAL options after it is the "
			"old order; DPDK's is 'interlink [EAL options] -- [options]'\n");
	while ((c = getopt_long(cl.app_argc, cl.app_argv, "c:s:d:i:j:qh", opts, NULL)) != -1) {
		char *end;
		switch (c) {
		case 'c':
			cfg_path = optarg;
			break;
		case 's':
			if (n_sets == 64 || !strchr(optarg, '=')) {
				fprintf(stderr, "interlink: --set expects KEY=VALUE (at most 64), got '%s'\n",
					optarg);
				return 2;
			}
			sets[n_sets++] = optarg;
			break;
		case 'd':
			duration = strtod(optarg, &end);
			if (*end || duration <= 0) {
				fprintf(stderr, "interlink: --duration expects seconds > 0, got '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'i':
			idle_ms = strtod(optarg, &end);
			if (*end || idle_ms <= 0) {
				fprintf(stderr, "interlink: --idle-exit expects milliseconds > 0, got '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'j':
			json = optarg;
			break;
		case 'q':
			quiet = true;
			break;
		case 'P':
			print_cfg = true;
			break;
		case 'L':
			return list_stages();
		case 'S':
			show_shards = true;
			break;
		case 'V':
			return il_print_version("interlink");
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "interlink: EAL options go before '--': "
				"interlink [EAL options] -- [options] (see --help)\n");
			return 2;
		}
	}
	if (optind < cl.app_argc) {
		fprintf(stderr, "interlink: unexpected argument '%s'; EAL options go before '--': "
			"interlink [EAL options] -- [options]\n", cl.app_argv[optind]);
		return 2;
	}

	struct il_cfg *cfg = cfg_path ? il_cfg_load_file(cfg_path, err, sizeof(err))
				      : il_cfg_load_string(il_default_config, "(embedded default)",
							   err, sizeof(err));
	if (!cfg) {
		fprintf(stderr, "interlink: %s\n", err);
		return 2;
	}
	il_cfg_record_defaults(print_cfg);
	for (unsigned i = 0; i < n_sets; i++) {
		char key[256];
		const char *eq = strchr(sets[i], '=');
		snprintf(key, sizeof(key), "%.*s", (int)(eq - sets[i]), sets[i]);
		if (il_cfg_set(cfg, key, eq + 1, err, sizeof(err))) {
			fprintf(stderr, "interlink: %s\n", err);
			return 2;
		}
	}
	/* The command line's EAL options replace the config's of their kind. */
	if (cl.n_eal) {
		static char eal_yaml[8192];
		if (il_eal_merge(cfg, &cl, eal_yaml, sizeof(eal_yaml), err,
				 sizeof(err)) ||
		    il_cfg_set(cfg, "eal", eal_yaml, err, sizeof(err))) {
			fprintf(stderr, "interlink: %s\n", err);
			return 2;
		}
	}
	/* Everything that needs no EAL is checked before EAL probes devices. */
	uint64_t interval_ms;
	if (il_app_configure(&app, cfg, err, sizeof(err)) ||
	    il_cfg_u64(cfg, "status_interval_ms", 1000, 0, 3600000, &interval_ms, err, sizeof(err)) ||
	    il_app_precheck(&app, err, sizeof(err))) {
		fprintf(stderr, "interlink: %s\n", err);
		return 2;
	}
	if (show_shards)
		return list_shards(cfg_path);
	if (print_cfg) {
		printf("# effective configuration of %s (interlink %s): %s, %u --set override%s\n",
		       app.name, IL_VERSION_STRING, cfg_path ? cfg_path : "embedded default",
		       n_sets, n_sets == 1 ? "" : "s");
		il_cfg_dump(stdout, cfg, true);
		printf("# a stage's parameters not listed above take their defaults "
		       "(docs/operations.md)\n");
		return 0;
	}

	make_socket_dirs();
	/* EAL arguments: config 'eal' (merged with the command line's), ports. */
	char *eargv[IL_CMDLINE_MAX + 32];
	int eargc = il_app_eal_args(&app, argv[0], eargv, IL_CMDLINE_MAX + 30, err, sizeof(err));
	if (eargc < 0) {
		fprintf(stderr, "interlink: %s\n", err);
		return 2;
	}
	if (rte_eal_init(eargc, eargv) < 0) {
		fprintf(stderr, "interlink: EAL initialisation failed (%s); EAL arguments were:",
			rte_strerror(rte_errno));
		for (int i = 1; i < eargc; i++)
			fprintf(stderr, " %s", eargv[i]);
		fprintf(stderr, "\n");
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	if (il_app_start(&app, err, sizeof(err))) {
		fprintf(stderr, "interlink: %s\n", err);
		rte_eal_cleanup();
		return 2;
	}
	il_telemetry_register(&app);

	if (!quiet) {
		printf("interlink: %s epoch %u, %u ports, %u groups, %u stages on %u lcores\n",
		       app.name, app.epoch, app.n_ports, app.n_groups, app.n_stages, app.n_workers);
		fflush(stdout);
	}

	const uint64_t hz = rte_get_tsc_hz();
	app.start_tsc = rte_rdtsc();
	for (unsigned w = 0; w < app.n_workers; w++)
		rte_eal_remote_launch(il_worker_main, &app, app.workers[w].lcore_id);
	il_app_launch_services(&app);

	uint64_t last_status = app.start_tsc, last_rx = 0, last_rx_change = app.start_tsc;
	while (!app.quit) {
		usleep(20000);
		il_stage_logs(&app, stderr);
		uint64_t now = rte_rdtsc();
		double elapsed = (double)(now - app.start_tsc) / (double)hz;
		if (duration > 0 && elapsed >= duration)
			break;
		uint64_t rx = rx_total();
		if (rx != last_rx) {
			if (!app.first_rx_tsc) /* it began within the last poll period */
				app.first_rx_tsc = now - hz / 50;
			app.last_rx_tsc = now;
			last_rx = rx;
			last_rx_change = now;
		} else if (idle_ms > 0 &&
			   (double)(now - last_rx_change) * 1000.0 / (double)hz >= idle_ms) {
			break;
		}
		if (!quiet && interval_ms &&
		    (double)(now - last_status) * 1000.0 / (double)hz >= (double)interval_ms) {
			il_status_line(&app, elapsed, (double)(now - last_status) / (double)hz);
			last_status = now;
		}
	}
	app.quit = true;
	rte_eal_mp_wait_lcore();
	double elapsed = (double)(rte_rdtsc() - app.start_tsc) / (double)hz;
	il_app_flush(&app);
	il_app_last_words(&app); /* before the summary, which counts them */
	il_stage_logs(&app, stderr);
	il_summary(&app, elapsed,
		   app.first_rx_tsc ? (double)(app.last_rx_tsc - app.first_rx_tsc) / (double)hz : 0,
		   json);
	il_app_stop(&app);
	il_cfg_free(cfg);
	rte_eal_cleanup();
	return 0;
}
