/* SPDX-License-Identifier: BSD-3-Clause
 * interlink-control: command line.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <interlink/chan.h>

#include "control.h"

#define PROG "interlink-control"

enum {
	OPT_UP_SLOTS = 256,
	OPT_DOWN_SLOTS,
	OPT_TICK_MS,
	OPT_RECREATE,
	OPT_SUSPECT_MS,
	OPT_EXCLUDE_MS,
	OPT_WINDOW,
};

static const struct option long_opts[] = {
	{ "chan", required_argument, NULL, 'c' },
	{ "wake-sock", required_argument, NULL, 's' },
	{ "mgmt", required_argument, NULL, 'm' },
	{ "up-slots", required_argument, NULL, OPT_UP_SLOTS },
	{ "down-slots", required_argument, NULL, OPT_DOWN_SLOTS },
	{ "tick-ms", required_argument, NULL, OPT_TICK_MS },
	{ "recreate", no_argument, NULL, OPT_RECREATE },
	{ "suspect-ms", required_argument, NULL, OPT_SUSPECT_MS },
	{ "exclude-ms", required_argument, NULL, OPT_EXCLUDE_MS },
	{ "window", required_argument, NULL, OPT_WINDOW },
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
		"  -v, --verbose          log attach, resync and shutdown events\n"
		"  -h, --help             this text\n"
		"  -V, --version          print the version and the channel layout version\n"
		"\n"
		"SIGINT or SIGTERM stops it cleanly (exit status 0). Exit status 2: bad\n"
		"arguments; 1: run-time failure. See docs/control.md.\n",
		IL_CHAN_MIN_SLOTS, IL_CHAN_MAX_SLOTS, IL_CHAN_UP_SLOTS_DEFAULT,
		IL_CHAN_DOWN_SLOTS_DEFAULT);
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
		case OPT_SUSPECT_MS:
			rc = parse_u32("--suspect-ms", optarg, 0, 600000, false, &suspect);
			break;
		case OPT_EXCLUDE_MS:
			rc = parse_u32("--exclude-ms", optarg, 0, 600000, false, &exclude);
			break;
		case OPT_WINDOW:
			rc = parse_u32("--window", optarg, 0, 1u << 24, false, &window);
			break;
		case 'v':
			o->verbose++;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case 'V':
			printf(PROG " 0.1.0 (channel layout %u, %u-byte messages)\n",
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

int main(int argc, char **argv)
{
	struct ctl_opts o;
	int rc = parse_args(argc, argv, &o);

	if (rc < 0)
		return 2;
	if (rc > 0)
		return 0;
	return ctl_run(&o);
}
