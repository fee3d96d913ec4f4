/* SPDX-License-Identifier: BSD-3-Clause
 * interlink-control: command line.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <interlink/chan.h>
#include <interlink/version.h>

#include "control.h"
#include "ftlog.h"

#define PROG "interlink-control"

enum {
	OPT_UP_SLOTS = 256,
	OPT_DOWN_SLOTS,
	OPT_TICK_MS,
	OPT_RECREATE,
	OPT_SUSPECT_MS,
	OPT_EXCLUDE_MS,
	OPT_WINDOW,
	OPT_FT_DIR,
	OPT_FT_RING,
	OPT_FT_SOCK,
	OPT_FT_DURABILITY,
	OPT_FT_GROUP_MS,
	OPT_FT_DELAY_US,
	OPT_FT_CATCHUP_MS,
	OPT_FT_RT_PRIO,
	OPT_FT_STATS,
	OPT_FT_TRACE,
	OPT_FT_SEGMENT_MB,
	OPT_HA_ETCD,
	OPT_HA_NODE,
	OPT_HA_PREFIX,
	OPT_HA_LISTEN,
	OPT_HA_PEER,
	OPT_HA_HB_MS,
	OPT_HA_DETECT_MS,
	OPT_HA_AUTH_MS,
	OPT_HA_REPORT_MS,
	OPT_HA_DP_DEAD_MS,
	OPT_HA_COLD_MS,
	OPT_HA_QUIESCE_MS,
	OPT_HA_LEASE_S,
	OPT_HA_ATTEMPT_MS,
	OPT_HA_DEADLINE_MS,
	OPT_SHARDS,
};

static const struct option long_opts[] = {
	{ "chan", required_argument, NULL, 'c' },
	{ "wake-sock", required_argument, NULL, 's' },
	{ "mgmt", required_argument, NULL, 'm' },
	{ "up-slots", required_argument, NULL, OPT_UP_SLOTS },
	{ "down-slots", required_argument, NULL, OPT_DOWN_SLOTS },
	{ "tick-ms", required_argument, NULL, OPT_TICK_MS },
	{ "recreate", no_argument, NULL, OPT_RECREATE },
	{ "shards", required_argument, NULL, OPT_SHARDS },
	{ "suspect-ms", required_argument, NULL, OPT_SUSPECT_MS },
	{ "exclude-ms", required_argument, NULL, OPT_EXCLUDE_MS },
	{ "window", required_argument, NULL, OPT_WINDOW },
	{ "ftcp-dir", required_argument, NULL, OPT_FT_DIR },
	{ "ftcp-ring", required_argument, NULL, OPT_FT_RING },
	{ "ftcp-sock", required_argument, NULL, OPT_FT_SOCK },
	{ "ftcp-durability", required_argument, NULL, OPT_FT_DURABILITY },
	{ "ftcp-group-ms", required_argument, NULL, OPT_FT_GROUP_MS },
	{ "ftcp-delay-us", required_argument, NULL, OPT_FT_DELAY_US },
	{ "ftcp-catchup-ms", required_argument, NULL, OPT_FT_CATCHUP_MS },
	{ "ftcp-rt-priority", required_argument, NULL, OPT_FT_RT_PRIO },
	{ "ftcp-stats", required_argument, NULL, OPT_FT_STATS },
	{ "ftcp-trace", required_argument, NULL, OPT_FT_TRACE },
	{ "ftcp-segment-mb", required_argument, NULL, OPT_FT_SEGMENT_MB },
	{ "ha-etcd", required_argument, NULL, OPT_HA_ETCD },
	{ "ha-node", required_argument, NULL, OPT_HA_NODE },
	{ "ha-prefix", required_argument, NULL, OPT_HA_PREFIX },
	{ "ha-listen", required_argument, NULL, OPT_HA_LISTEN },
	{ "ha-peer", required_argument, NULL, OPT_HA_PEER },
	{ "ha-heartbeat-ms", required_argument, NULL, OPT_HA_HB_MS },
	{ "ha-detect-ms", required_argument, NULL, OPT_HA_DETECT_MS },
	{ "ha-auth-ms", required_argument, NULL, OPT_HA_AUTH_MS },
	{ "ha-report-ms", required_argument, NULL, OPT_HA_REPORT_MS },
	{ "ha-dp-dead-ms", required_argument, NULL, OPT_HA_DP_DEAD_MS },
	{ "ha-cold-ms", required_argument, NULL, OPT_HA_COLD_MS },
	{ "ha-quiesce-ms", required_argument, NULL, OPT_HA_QUIESCE_MS },
	{ "ha-lease-s", required_argument, NULL, OPT_HA_LEASE_S },
	{ "ha-attempt-ms", required_argument, NULL, OPT_HA_ATTEMPT_MS },
	{ "ha-deadline-ms", required_argument, NULL, OPT_HA_DEADLINE_MS },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " [OPTION]...\n"
		"The Interlink control process: drains the data plane's channel, aggregates\n"
		"receivers' ACKs into per-group stability watermarks and publishes them back.\n"
		"\n"
		"  -c, --chan PATH        channel file shared with the data plane, created if\n"
		"                         absent (default " IL_CHAN_PATH_DEFAULT ")\n"
		"  -s, --wake-sock PATH   unix socket handing the wake-up eventfd to the data\n"
		"                         plane (default: the channel path + \".sock\")\n"
		"  -m, --mgmt PATH        unix datagram socket for management commands\n"
		"                         (ping, status, groups); \"none\" disables it\n"
		"                         (default: the channel path + \".mgmt\")\n"
		"      --up-slots N       data plane -> control ring size, a power of two\n"
		"                         from %u to %u (default %u)\n"
		"      --down-slots N     control -> data plane ring size, idem (default %u)\n"
		"      --tick-ms N        housekeeping period in ms, 1..60000 (default 100)\n"
		"      --suspect-ms N     suspect a member not heard from for N ms, 0..600000;\n"
		"                         0: off (default 100)\n"
		"      --exclude-ms N     exclude it (a view change) after N ms, 0..600000,\n"
		"                         at least --suspect-ms; 0: off (default 1000)\n"
		"      --window N         credit window: messages a sender may have that are\n"
		"                         not yet stable, 0..16777216; 0: no flow control\n"
		"                         (default 0)\n"
		"      --recreate         replace an existing channel file of other sizes\n"
		"                         (a data plane attached to it must re-attach)\n"
		"      --shards N         the data plane runs N shards (shards.lcores, 1..%u):\n"
		"                         one channel per shard, PATH.0 .. PATH.N-1, one wake\n"
		"                         socket and one management socket (default: not\n"
		"                         sharded, one channel at PATH)\n"
		"\n"
		"FT-TCP logger (docs/ft-tcp.md), a thread of this process, on with --ftcp-dir:\n"
		"      --ftcp-dir DIR     the log (one for every protected connection, in\n"
		"                         segment files) and the replay files\n"
		"      --ftcp-ring PATH   ring shared with the data plane's ftcp stage\n"
		"                         (default " FTC_RING_PATH_DEF ")\n"
		"      --ftcp-sock PATH   unix socket the server shims connect to\n"
		"                         (default " FTC_LOGGER_SOCK_DEF ")\n"
		"      --ftcp-durability none|group|sync\n"
		"                         acknowledge once written (none, default), once\n"
		"                         fsynced by the next group commit (group), or after\n"
		"                         an fsync of every batch (sync)\n"
		"      --ftcp-group-ms N  group commit period, 1..10000 ms (default 5)\n"
		"      --ftcp-segment-mb N  start a new log segment after N MiB, 1..65536\n"
		"                         (default 64)\n"
		"      --ftcp-rt-priority N  run the logger thread at SCHED_FIFO priority\n"
		"                         N, 1..99 (default 0: the process's own policy); on\n"
		"                         cores shared with the servers it is woken at once\n"
		"                         after each fdatasync (needs root or CAP_SYS_NICE)\n"
		"      --ftcp-catchup-ms N  a restarted server that has read a connection's\n"
		"                         replay must write again what the client already\n"
		"                         had, 16 MiB of it (or the rest) every N ms, or the\n"
		"                         connection is reset (its re-execution differs),\n"
		"                         1..3600000 (default 5000)\n"
		"      --ftcp-delay-us N  delay every acknowledgement by N us, 0..1000000\n"
		"                         (tests: a slow logger; default 0)\n"
		"      --ftcp-stats FILE  logger counters as JSON, rewritten every 200 ms\n"
		"      --ftcp-trace FILE  append every stable_seq published (tests)\n"
		"\n"
		"One of an active/standby pair of appliances (docs/ha.md), on with --ha-etcd:\n"
		"      --ha-etcd URLS     etcd client URLs, comma-separated (the pair's epochs,\n"
		"                         views and cuts are committed there)\n"
		"      --ha-node NAME     this appliance's name, 1..16 characters (required)\n"
		"      --ha-prefix P      the pair's keys (default /interlink/default/)\n"
		"      --ha-listen A:P    the pair heartbeat's local address (required)\n"
		"      --ha-peer A:P      the other control process's heartbeat address (required)\n"
		"      --ha-heartbeat-ms N  heartbeat period, 1..1000 (default 10)\n"
		"      --ha-detect-ms N   silence on the link and of the heartbeat after which\n"
		"                         the standby takes over, 5..60000 (default 40)\n"
		"      --ha-auth-ms N     how long the data plane stamps without a renewal,\n"
		"                         below --ha-detect-ms (default 30)\n"
		"      --ha-report-ms N   how long receivers have to report at a takeover,\n"
		"                         10..60000 (default 150)\n"
		"      --ha-dp-dead-ms N  the active resigns when its data plane is silent this\n"
		"                         long, 15..60000 (default 60)\n"
		"      --ha-cold-ms N     at start, how long an owner may stay unseen (default 1000)\n"
		"      --ha-quiesce-ms N  a hand-over waits this long for stability (default 50)\n"
		"      --ha-lease-s N     etcd lease TTL, 1..60 (default 2)\n"
		"      --ha-attempt-ms N, --ha-deadline-ms N  one etcd request to one member, one\n"
		"                         call in all (defaults 100, 2000)\n"
		"  -v, --verbose          log attach, resync and shutdown events\n"
		"  -h, --help             this text\n"
		"  -V, --version          print the version and the channel layout version\n"
		"\n"
		"SIGINT, SIGTERM or SIGHUP stops it cleanly (exit status 0; its socket files\n"
		"are removed). Exit status 2: bad arguments; 1: run-time failure. See\n"
		"docs/control.md.\n",
		IL_CHAN_MIN_SLOTS, IL_CHAN_MAX_SLOTS, IL_CHAN_UP_SLOTS_DEFAULT,
		IL_CHAN_DOWN_SLOTS_DEFAULT, CTL_MAX_CHANNELS);
}

static int bad(const char *opt, const char *val, const char *why)
{
	fprintf(stderr, PROG ": %s: '%s' %s (see --help)\n", opt, val, why);
	return -1;
}

static int parse_u32(const char *opt, const char *val, unsigned long min, unsigned long max,
		     bool pow2, uint32_t *out)
{
	char why[96];
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(val, &end, 10);
	snprintf(why, sizeof(why), "is not %s from %lu to %lu", pow2 ? "a power of two" : "a number",
		 min, max);
	if (val[0] == '\0' || val[0] == '-' || *end != '\0' || errno != 0 || v < min || v > max ||
	    (pow2 && (v & (v - 1)) != 0))
		return bad(opt, val, why);
	*out = (uint32_t)v;
	return 0;
}

static int set_path(const char *opt, const char *val, char *dst, size_t len)
{
	if (val[0] == '\0')
		return bad(opt, val, "is empty");
	if (strlen(val) >= len) {
		char why[64];

		snprintf(why, sizeof(why), "is longer than %zu bytes", len - 1);
		return bad(opt, val, why);
	}
	strcpy(dst, val);
	return 0;
}

/* Returns 0 to run, 1 to exit successfully (--help), -1 on a usage error. */
static int parse_args(int argc, char **argv, struct ctl_opts *o)
{
	bool sock_set = false, mgmt_set = false;
	uint32_t tick = 100, suspect = 100, exclude = 1000, window = 0;
	int c;

	memset(o, 0, sizeof(*o));
	strcpy(o->chan_path, IL_CHAN_PATH_DEFAULT);
	o->up_slots = IL_CHAN_UP_SLOTS_DEFAULT;
	o->down_slots = IL_CHAN_DOWN_SLOTS_DEFAULT;
	strcpy(o->ft_ring, FTC_RING_PATH_DEF);
	strcpy(o->ft_sock, FTC_LOGGER_SOCK_DEF);
	o->ft_group_ms = 5;
	o->ft_catchup_ms = 5000;
	o->ft_segment_mb = 64;
	strcpy(o->ha_prefix, "/interlink/default/");
	o->ha_hb_ms = 10;
	o->ha_detect_ms = 40;
	o->ha_auth_ms = 30;
	o->ha_report_ms = 150;
	o->ha_dp_dead_ms = 60;
	o->ha_cold_ms = 1000;
	o->ha_quiesce_ms = 50;
	o->ha_lease_s = 2;
	o->ha_attempt_ms = 100;
	o->ha_deadline_ms = 2000;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":c:s:m:vhV", long_opts, NULL)) != -1) {
		int rc = 0;

		switch (c) {
		case 'c':
			rc = set_path("--chan", optarg, o->chan_path, sizeof(o->chan_path));
			break;
		case 's':
			rc = set_path("--wake-sock", optarg, o->sock_path, sizeof(o->sock_path));
			sock_set = true;
			break;
		case 'm':
			if (strcmp(optarg, "none") == 0)
				o->mgmt_path[0] = '\0';
			else
				rc = set_path("--mgmt", optarg, o->mgmt_path, sizeof(o->mgmt_path));
			mgmt_set = true;
			break;
		case OPT_UP_SLOTS:
			rc = parse_u32("--up-slots", optarg, IL_CHAN_MIN_SLOTS, IL_CHAN_MAX_SLOTS, true,
				       &o->up_slots);
			break;
		case OPT_DOWN_SLOTS:
			rc = parse_u32("--down-slots", optarg, IL_CHAN_MIN_SLOTS, IL_CHAN_MAX_SLOTS,
				       true, &o->down_slots);
			break;
		case OPT_TICK_MS:
			rc = parse_u32("--tick-ms", optarg, 1, 60000, false, &tick);
			break;
		case OPT_RECREATE:
			o->recreate = true;
			break;
		case OPT_SHARDS:
			rc = parse_u32("--shards", optarg, 1, CTL_MAX_CHANNELS, false, &o->shards);
			break;
		case OPT_SUSPECT_MS:
			rc = parse_u32("--suspect-ms", optarg, 0, 600000, false, &suspect);
			break;
		case OPT_EXCLUDE_MS:
			rc = parse_u32("--exclude-ms", optarg, 0, 600000, false, &exclude);
			break;
		case OPT_WINDOW:
			rc = parse_u32("--window", optarg, 0, 1u << 24, false, &window);
			break;
		case OPT_FT_DIR:
			rc = set_path("--ftcp-dir", optarg, o->ft_dir, sizeof(o->ft_dir));
			break;
		case OPT_FT_RING:
			rc = set_path("--ftcp-ring", optarg, o->ft_ring, sizeof(o->ft_ring));
			break;
		case OPT_FT_SOCK:
			rc = set_path("--ftcp-sock", optarg, o->ft_sock, sizeof(o->ft_sock));
			break;
		case OPT_FT_STATS:
			rc = set_path("--ftcp-stats", optarg, o->ft_stats, sizeof(o->ft_stats));
			break;
		case OPT_FT_TRACE:
			rc = set_path("--ftcp-trace", optarg, o->ft_trace, sizeof(o->ft_trace));
			break;
		case OPT_FT_DURABILITY:
			if (strcmp(optarg, "none") == 0)
				o->ft_durability = FTL_NONE;
			else if (strcmp(optarg, "group") == 0)
				o->ft_durability = FTL_GROUP;
			else if (strcmp(optarg, "sync") == 0)
				o->ft_durability = FTL_SYNC;
			else
				rc = bad("--ftcp-durability", optarg, "is not one of none, group, sync");
			break;
		case OPT_FT_GROUP_MS:
			rc = parse_u32("--ftcp-group-ms", optarg, 1, 10000, false, &o->ft_group_ms);
			break;
		case OPT_FT_SEGMENT_MB:
			rc = parse_u32("--ftcp-segment-mb", optarg, 1, 65536, false,
				       &o->ft_segment_mb);
			break;
		case OPT_FT_CATCHUP_MS:
			rc = parse_u32("--ftcp-catchup-ms", optarg, 1, 3600000, false,
				       &o->ft_catchup_ms);
			break;
		case OPT_FT_DELAY_US:
			rc = parse_u32("--ftcp-delay-us", optarg, 0, 1000000, false, &o->ft_delay_us);
			break;
		case OPT_FT_RT_PRIO:
			rc = parse_u32("--ftcp-rt-priority", optarg, 0, 99, false,
				       &o->ft_rt_priority);
			break;
		case OPT_HA_ETCD:
			rc = set_path("--ha-etcd", optarg, o->ha_etcd, sizeof(o->ha_etcd));
			break;
		case OPT_HA_NODE:
			rc = set_path("--ha-node", optarg, o->ha_node, sizeof(o->ha_node));
			break;
		case OPT_HA_PREFIX:
			rc = set_path("--ha-prefix", optarg, o->ha_prefix, sizeof(o->ha_prefix));
			if (rc == 0 && o->ha_prefix[strlen(o->ha_prefix) - 1] != '/')
				rc = bad("--ha-prefix", optarg, "must end with '/'");
			break;
		case OPT_HA_LISTEN:
			rc = set_path("--ha-listen", optarg, o->ha_listen, sizeof(o->ha_listen));
			break;
		case OPT_HA_PEER:
			rc = set_path("--ha-peer", optarg, o->ha_peer, sizeof(o->ha_peer));
			break;
		case OPT_HA_HB_MS:
			rc = parse_u32("--ha-heartbeat-ms", optarg, 1, 1000, false, &o->ha_hb_ms);
			break;
		case OPT_HA_DETECT_MS:
			rc = parse_u32("--ha-detect-ms", optarg, 5, 60000, false, &o->ha_detect_ms);
			break;
		case OPT_HA_AUTH_MS:
			rc = parse_u32("--ha-auth-ms", optarg, 2, 60000, false, &o->ha_auth_ms);
			break;
		case OPT_HA_REPORT_MS:
			rc = parse_u32("--ha-report-ms", optarg, 10, 60000, false, &o->ha_report_ms);
			break;
		case OPT_HA_DP_DEAD_MS:
			rc = parse_u32("--ha-dp-dead-ms", optarg, 15, 60000, false, &o->ha_dp_dead_ms);
			break;
		case OPT_HA_COLD_MS:
			rc = parse_u32("--ha-cold-ms", optarg, 0, 600000, false, &o->ha_cold_ms);
			break;
		case OPT_HA_QUIESCE_MS:
			rc = parse_u32("--ha-quiesce-ms", optarg, 1, 60000, false, &o->ha_quiesce_ms);
			break;
		case OPT_HA_LEASE_S:
			rc = parse_u32("--ha-lease-s", optarg, 1, 60, false, &o->ha_lease_s);
			break;
		case OPT_HA_ATTEMPT_MS:
			rc = parse_u32("--ha-attempt-ms", optarg, 10, 60000, false, &o->ha_attempt_ms);
			break;
		case OPT_HA_DEADLINE_MS:
			rc = parse_u32("--ha-deadline-ms", optarg, 10, 600000, false,
				       &o->ha_deadline_ms);
			break;
		case 'v':
			o->verbose++;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case 'V':
			printf(PROG " " IL_VERSION_STRING " (channel layout %u, %u-byte messages)\n",
			       IL_CHAN_LAYOUT_VERSION, IL_CHAN_MSG_SIZE);
			return 1;
		case ':':
			fprintf(stderr, PROG ": option '%s' needs a value (see --help)\n",
				argv[optind - 1]);
			return -1;
		default:
			fprintf(stderr, PROG ": unknown option '%s' (see --help)\n",
				optopt ? (char[]){ '-', (char)optopt, '\0' } : argv[optind - 1]);
			return -1;
		}
		if (rc != 0)
			return -1;
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument '%s' (see --help)\n", argv[optind]);
		return -1;
	}
	o->tick_ms = tick;
	o->suspect_ms = suspect;
	o->exclude_ms = exclude;
	o->window = window;
	if (exclude != 0 && suspect > exclude) {
		char v[16];

		snprintf(v, sizeof(v), "%u", exclude);
		return bad("--exclude-ms", v, "must be at least --suspect-ms (the slow detector "
			   "excludes, the fast one only suspects)");
	}
	if (o->shards && o->ha_etcd[0]) {
		char v[16];

		snprintf(v, sizeof(v), "%u", o->shards);
		return bad("--shards", v, "cannot be combined with --ha-etcd: a pair's data "
			   "plane runs no shards yet (docs/scaling.md)");
	}
	if (o->ha_etcd[0]) {
		char v[16];

		if (!o->ha_node[0])
			return bad("--ha-node", "", "is required with --ha-etcd");
		if (!o->ha_listen[0] || !o->ha_peer[0])
			return bad("--ha-listen", o->ha_listen,
				   "and --ha-peer are required with --ha-etcd");
		snprintf(v, sizeof(v), "%u", o->ha_auth_ms);
		if (o->ha_auth_ms >= o->ha_detect_ms)
			return bad("--ha-auth-ms", v, "must be below --ha-detect-ms (the active's data "
				   "plane stops before the standby takes over)");
	}
	if (!sock_set && il_chan_default_sock_path(o->chan_path, o->sock_path,
						   sizeof(o->sock_path)) != 0)
		return bad("--chan", o->chan_path, "is too long to derive --wake-sock from");
	if (!mgmt_set) {
		int n = snprintf(o->mgmt_path, sizeof(o->mgmt_path), "%s.mgmt", o->chan_path);

		if (n < 0 || (size_t)n >= sizeof(o->mgmt_path))
			return bad("--chan", o->chan_path, "is too long to derive --mgmt from");
	}
	if (strcmp(o->sock_path, o->mgmt_path) == 0 || strcmp(o->sock_path, o->chan_path) == 0 ||
	    strcmp(o->mgmt_path, o->chan_path) == 0)
		return bad("--wake-sock", o->sock_path,
			   "must differ from --chan and --mgmt");
	return 0;
}

static void *logger_main(void *arg)
{
	return (void *)(intptr_t)ftlog_run(arg);
}

int main(int argc, char **argv)
{
	struct ctl_opts o;
	int rc = parse_args(argc, argv, &o);
	struct ftlog *ft = NULL;
	pthread_t ft_thread;
	int stop_fd = -1;
	sigset_t mask;

	if (rc < 0)
		return 2;
	if (rc > 0)
		return 0;
	/* A log line to a pipe nobody reads, or a data plane that hangs up
	 * while we hand it the eventfd, must fail a write, not kill us with
	 * our socket files left behind. */
	signal(SIGPIPE, SIG_IGN);
	/* Signals are the control loop's (a signalfd): block them before any
	 * thread exists, so the logger thread inherits the mask. SIGHUP (the
	 * terminal went away) stops us cleanly like SIGINT and SIGTERM. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	if (o.ft_dir[0]) {
		struct ftlog_opts fo = {
			.ring = o.ft_ring, .sock = o.ft_sock, .dir = o.ft_dir,
			.stats = o.ft_stats[0] ? o.ft_stats : NULL,
			.trace = o.ft_trace[0] ? o.ft_trace : NULL,
			.durability = o.ft_durability, .group_ms = o.ft_group_ms,
			.delay_us = o.ft_delay_us, .catchup_ms = o.ft_catchup_ms, .verbose = o.verbose,
			.seg_bytes = (uint64_t)o.ft_segment_mb << 20,
		};
		char err[512];

		stop_fd = eventfd(0, EFD_CLOEXEC);
		ft = stop_fd < 0 ? NULL : ftlog_open(&fo, stop_fd, err, sizeof(err));
		if (!ft) {
			fprintf(stderr, PROG ": FT-TCP logger: %s\n",
				stop_fd < 0 ? strerror(errno) : err);
			return 1;
		}
		/* --ftcp-rt-priority: the logger thread alone at SCHED_FIFO (its
		 * replay workers stay at the normal policy: ftlog.c), so that
		 * the end of an fdatasync wakes it at once on a core the
		 * servers share, not after their slice (docs/ft-tcp.md). */
		pthread_attr_t at;
		pthread_attr_init(&at);
		if (o.ft_rt_priority && o.ft_durability == FTL_NONE)
			fprintf(stderr, PROG ": warning: --ftcp-rt-priority with --ftcp-durability "
				"none: the logger then runs at every write, not after a device's "
				"fdatasync, and preempts the servers each time (redis-benchmark fell "
				"from 61%% to 40%% of FT-TCP off: docs/ft-tcp.md, \"Scheduling\")\n");
		if (o.ft_rt_priority) {
			struct sched_param sp = {.sched_priority = (int)o.ft_rt_priority};
			pthread_attr_setinheritsched(&at, PTHREAD_EXPLICIT_SCHED);
			pthread_attr_setschedpolicy(&at, SCHED_FIFO);
			pthread_attr_setschedparam(&at, &sp);
		}
		int e = pthread_create(&ft_thread, &at, logger_main, ft);
		pthread_attr_destroy(&at);
		if (e != 0) {
			if (e == EPERM)
				fprintf(stderr, PROG ": --ftcp-rt-priority %u: SCHED_FIFO is not "
					"permitted (run as root, give the process CAP_SYS_NICE, or "
					"raise its RLIMIT_RTPRIO to at least %u)\n",
					o.ft_rt_priority, o.ft_rt_priority);
			else
				fprintf(stderr, PROG ": FT-TCP logger: cannot start its thread: "
					"%s\n", strerror(e));
			ftlog_close(ft);
			return e == EPERM ? 2 : 1;
		}
		pthread_setname_np(ft_thread, "ftlog");
	}
	rc = ctl_run(&o);
	if (ft) {
		uint64_t one = 1;
		void *ret;

		/* The logger flushes (and syncs) what it holds before it ends. */
		if (write(stop_fd, &one, sizeof(one)) != sizeof(one))
			perror(PROG ": stopping the logger");
		pthread_join(ft_thread, &ret);
		ftlog_close(ft);
		close(stop_fd);
		if (rc == 0)
			rc = (int)(intptr_t)ret;
	}
	return rc;
}
