/* SPDX-License-Identifier: BSD-3-Clause
 * The appliance's command line in DPDK's order: EAL options first, then
 * "--", then the application's (as dpdk-testpmd and Pktgen-DPDK take
 * them), and EAL options given there override the config's 'eal' list.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <interlink/err.h>

#include "eal_args.h"

/* EAL options that take a value, and the group each belongs to: options
 * of one group exclude each other (-c, -l and --lcores all choose the
 * lcores), so one given on the command line removes every option of its
 * group from the config's list. Group 0: repeatable, both lists keep
 * theirs (--vdev, -a, --log-level...). */
struct eal_opt {
	const char *name;
	int group;
};

static const struct eal_opt eal_valued[] = {
	{"-c", 1}, {"-l", 1}, {"--lcores", 1},
	{"-m", 2}, {"--socket-mem", 2},
	{"-n", 3}, {"-r", 4}, {"--main-lcore", 5}, {"--file-prefix", 6}, {"--proc-type", 7},
	{"--socket-limit", 8}, {"--huge-dir", 9}, {"--base-virtaddr", 10}, {"--iova-mode", 11},
	{"--vfio-intr", 12}, {"--mbuf-pool-ops-name", 13}, {"-s", 14}, {"-S", 15},
	{"--force-max-simd-bitwidth", 16}, {"--trace-dir", 17}, {"--trace-bufsz", 18},
	{"--trace-mode", 19}, {"--vfio-vf-token", 20}, {"--syslog", 21},
	{"-a", 0}, {"--allow", 0}, {"-b", 0}, {"--block", 0}, {"--vdev", 0}, {"-d", 0},
	{"--log-level", 0}, {"--trace", 0},
	{NULL, 0},
};

/* The option's name without "=value"; its group (-1: a flag or unknown). */
static int opt_group(const char *arg, bool *takes_value)
{
	size_t len = strcspn(arg, "=");

	*takes_value = false;
	for (const struct eal_opt *o = eal_valued; o->name; o++)
		if (strlen(o->name) == len && !strncmp(arg, o->name, len)) {
			*takes_value = arg[len] != '=';
			return o->group;
		}
	return -1;
}

/* Split argv[from, to) into options, each one token or two. */
static int split_opts(char **argv, int from, int to, struct il_eal_opt *out, int max, char *err,
		      size_t errlen)
{
	int n = 0;

	for (int i = from; i < to; i++) {
		bool takes;

		if (n == max)
			return ERR("too many EAL options (at most %d)", max);
		out[n].arg = argv[i];
		out[n].val = NULL;
		out[n].group = opt_group(argv[i], &takes);
		if (takes) {
			if (i + 1 == to)
				return ERR("EAL option '%s' needs a value", argv[i]);
			out[n].val = argv[++i];
		} else if (out[n].group < 0 && argv[i][0] == '-' && i + 1 < to &&
			   argv[i + 1][0] != '-') {
			/* An option this table does not know: keep its value with it. */
			out[n].val = argv[++i];
		}
		n++;
	}
	return n;
}

/* Options of the old order "interlink [options] -- [EAL options]" that no
 * EAL option can be mistaken for: our long options, and our short ones by
 * the shape of their value (-c FILE, not a hex core mask; -s KEY=VALUE,
 * not a service core mask; -d SECONDS, not a driver path). */
static bool is_app_option(const char *a, const char *next)
{
	static const char *const longs[] = {
		"--config", "--set", "--duration", "--idle-exit", "--json", "--quiet",
		"--print-config", "--list-stages", "--list-shards", "--version", "--help", NULL,
	};

	for (unsigned i = 0; longs[i]; i++) {
		size_t l = strlen(longs[i]);
		if (!strncmp(a, longs[i], l) && (a[l] == 0 || a[l] == '='))
			return true;
	}
	if (!strcmp(a, "-i") || !strcmp(a, "-j") || !strcmp(a, "-q") || !strcmp(a, "-h"))
		return true;
	if (!next)
		return false;
	if (!strcmp(a, "-c"))
		return strspn(next, "0123456789abcdefABCDEFxX") != strlen(next);
	if (!strcmp(a, "-s"))
		return strchr(next, '=') != NULL;
	if (!strcmp(a, "-d"))
		return strspn(next, "0123456789.") == strlen(next);
	return false;
}

int il_cmdline_split(int argc, char **argv, struct il_cmdline *cl, char *err, size_t errlen)
{
	int dd = -1;

	memset(cl, 0, sizeof(*cl));
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			dd = i;
			break;
		}
	cl->app_argv[cl->app_argc++] = argv[0];
	if (dd < 0) {
		/* No "--": application options only. */
		for (int i = 1; i < argc && cl->app_argc < IL_CMDLINE_MAX; i++)
			cl->app_argv[cl->app_argc++] = argv[i];
		cl->app_argv[cl->app_argc] = NULL;
		return 0;
	}
	int app_from = dd + 1, app_to = argc, eal_from = 1, eal_to = dd;
	if (dd > 1 && is_app_option(argv[1], dd > 2 ? argv[2] : NULL)) {
		cl->old_order = true;
		app_from = 1;
		app_to = dd;
		eal_from = dd + 1;
		eal_to = argc;
	}
	if (app_to - app_from >= IL_CMDLINE_MAX)
		return ERR("too many options (at most %d)", IL_CMDLINE_MAX - 1);
	for (int i = app_from; i < app_to; i++)
		cl->app_argv[cl->app_argc++] = argv[i];
	cl->app_argv[cl->app_argc] = NULL;
	cl->n_eal = split_opts(argv, eal_from, eal_to, cl->eal, IL_CMDLINE_MAX, err, errlen);
	return cl->n_eal < 0 ? -1 : 0;
}

/* YAML flow-sequence item: always double-quoted. */
static size_t put_item(char *buf, size_t len, size_t off, const char *s)
{
	off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "%s\"", off > 1 ? ", " : "");
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "\\");
		off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "%c", *s);
	}
	return off + (size_t)snprintf(buf + off, off < len ? len - off : 0, "\"");
}

int il_eal_merge(const struct il_cfg *cfg, const struct il_cmdline *cl, char *out, size_t len,
		 char *err, size_t errlen)
{
	const char *cargv[IL_CMDLINE_MAX];
	struct il_eal_opt copt[IL_CMDLINE_MAX];
	int nc = il_cfg_str_list(cfg, "eal", cargv, IL_CMDLINE_MAX, err, errlen);
	size_t off;

	if (nc < 0)
		return -1;
	nc = split_opts((char **)cargv, 0, nc, copt, IL_CMDLINE_MAX, err, errlen);
	if (nc < 0)
		return -1;
	off = (size_t)snprintf(out, len, "[");
	for (int i = 0; i < nc; i++) {
		bool overridden = false;
		for (int j = 0; j < cl->n_eal && copt[i].group > 0; j++)
			overridden |= cl->eal[j].group == copt[i].group;
		if (overridden)
			continue;
		off = put_item(out, len, off, copt[i].arg);
		if (copt[i].val)
			off = put_item(out, len, off, copt[i].val);
	}
	for (int j = 0; j < cl->n_eal; j++) {
		off = put_item(out, len, off, cl->eal[j].arg);
		if (cl->eal[j].val)
			off = put_item(out, len, off, cl->eal[j].val);
	}
	off += (size_t)snprintf(out + off, off < len ? len - off : 0, "]");
	if (off >= len)
		return ERR("EAL options too long (more than %zu bytes)", len - 1);
	return 0;
}
