/* SPDX-License-Identifier: BSD-3-Clause
 * The appliance's command line: EAL options, "--", application options
 * (dataplane/eal_args.c).
 */
#ifndef INTERLINK_EAL_ARGS_H
#define INTERLINK_EAL_ARGS_H

#include <stdbool.h>
#include <stddef.h>

#include <interlink/config.h>

#define IL_CMDLINE_MAX 128

struct il_eal_opt {
	const char *arg; /* "-l", "--file-prefix=x", "--no-huge" */
	const char *val; /* the next token when it is the option's value */
	int group;       /* options of one group > 0 exclude each other */
};

struct il_cmdline {
	int app_argc;
	char *app_argv[IL_CMDLINE_MAX + 1]; /* argv[0], then the application's */
	int n_eal;
	struct il_eal_opt eal[IL_CMDLINE_MAX];
	bool old_order; /* "interlink [options] -- [EAL options]" was given */
};

/* "interlink [EAL options] -- [options]", or "interlink [options]" with no
 * EAL options; the old order "interlink [options] -- [EAL options]" is
 * recognised by its first option and still accepted (old_order). */
int il_cmdline_split(int argc, char **argv, struct il_cmdline *cl, char *err, size_t errlen);

/* The config's 'eal' list with the command line's EAL options merged in,
 * as a YAML flow sequence for il_cfg_set(cfg, "eal", out): an option given
 * on the command line replaces the config's options of its group (-l
 * replaces --lcores, -m replaces --socket-mem, --file-prefix replaces
 * --file-prefix); repeatable ones (--vdev, -a, --log-level) add up. */
int il_eal_merge(const struct il_cfg *cfg, const struct il_cmdline *cl, char *out, size_t len,
		 char *err, size_t errlen);

#endif
