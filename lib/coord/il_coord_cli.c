/* SPDX-License-Identifier: BSD-3-Clause
 * il-coord: the il_coord library from the command line, for tests,
 * measurements and an operator's look at the HA keys (docs/ha.md).
 * Every result is one JSON object per line on stdout; times are
 * CLOCK_MONOTONIC milliseconds, the clock the tests read too.
 *
 * Options: --deadline-ms (one call, all endpoints), --attempt-ms (one
 * request to one endpoint): il_coord_cfg's deadline_ms and attempt_ms.
 *
 *   il-coord -e URLS get KEY
 *   il-coord -e URLS put KEY VALUE
 *   il-coord -e URLS cas KEY EXPECT_MOD VALUE
 *   il-coord -e URLS campaign KEY VALUE [--ttl S] [--hold-ms MS] [--lapse-ms MS]
 *   il-coord -e URLS watch KEY [--prefix] [--count N] [--timeout-ms MS]
 *   il-coord -e URLS bench-txn KEY N
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <interlink/coord.h>
#include <interlink/json.h>

#define PROG "il-coord"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* One result per line: {"result": ..., the fields, "t_ms": ...}. */
static void result_begin(struct il_json *j, const char *result)
{
	il_json_begin(j, stdout, 0);
	il_json_obj(j, NULL);
	il_json_str(j, "result", result);
}

static void result_end(struct il_json *j, bool t_ms)
{
	if (t_ms)
		il_json_fixed(j, "t_ms", now_ms(), 3);
	il_json_end(j);
	il_json_finish(j); /* a line, flushed */
}

static void print_kv(const char *what, const struct il_coord_kv *kv)
{
	struct il_json j;

	result_begin(&j, what);
	il_json_strn(&j, "key", kv->key, kv->key_len);
	il_json_strn(&j, "value", kv->value, kv->value_len);
	il_json_i64(&j, "create_rev", kv->create_rev);
	il_json_i64(&j, "mod_rev", kv->mod_rev);
	il_json_i64(&j, "version", kv->version);
	il_json_i64(&j, "lease", kv->lease);
	result_end(&j, true);
}

static int fail(struct il_coord *c, const char *what, int rc)
{
	struct il_json j;

	result_begin(&j, "error");
	il_json_str(&j, "op", what);
	il_json_i64(&j, "rc", rc);
	il_json_str(&j, "error", il_coord_strerror(c));
	result_end(&j, true);
	return 2;
}

/* {"result": "ok", "rev": rev}: a put or compare-and-swap that took. */
static void print_ok(int64_t rev)
{
	struct il_json j;

	result_begin(&j, "ok");
	il_json_i64(&j, "rev", rev);
	result_end(&j, true);
}

static int cmd_get(struct il_coord *c, char **av)
{
	struct il_coord_kv kv;
	int rc = il_coord_get(c, av[0], &kv, NULL);

	if (rc < 0)
		return fail(c, "get", rc);
	print_kv(rc == IL_COORD_OK ? "found" : "absent", &kv);
	il_coord_kv_free(&kv);
	return rc == IL_COORD_OK ? 0 : 1;
}

static int cmd_put(struct il_coord *c, char **av)
{
	int64_t rev = 0;
	int rc = il_coord_put(c, av[0], av[1], strlen(av[1]), 0, &rev);

	if (rc < 0)
		return fail(c, "put", rc);
	print_ok(rev);
	return 0;
}

static int cmd_cas(struct il_coord *c, char **av)
{
	struct il_coord_kv cur;
	int64_t rev = 0;
	int rc = il_coord_cas(c, av[0], atoll(av[1]), av[2], strlen(av[2]), 0, &rev, &cur);

	if (rc < 0)
		return fail(c, "cas", rc);
	if (rc == IL_COORD_OK)
		print_ok(rev);
	else
		print_kv("failed", &cur);
	il_coord_kv_free(&cur);
	return rc;
}

/* Campaign until leader (waiting for the holder's key to go), then keep
 * the lease alive for hold_ms (0: until a signal); with lapse_ms, stop
 * renewing after that long but stay up, so that the lease expires. */
static int cmd_campaign(struct il_coord *c, const struct il_coord_cfg *cfg, char **av,
			int64_t ttl, unsigned hold_ms, unsigned lapse_ms)
{
	int64_t lease, granted, rev, left;
	struct il_coord_kv holder;
	struct il_coord_watch *w = NULL;
	struct il_json j;
	char err[256];
	int rc = il_coord_lease_grant(c, ttl, &lease, &granted);

	if (rc < 0)
		return fail(c, "lease_grant", rc);
	result_begin(&j, "lease");
	il_json_i64(&j, "lease", lease);
	il_json_i64(&j, "ttl", granted);
	result_end(&j, true);
	double renew = now_ms();
	while (!stop) {
		rc = il_coord_campaign(c, av[0], av[1], strlen(av[1]), lease, &rev, &holder);
		if (rc < 0) {
			fail(c, "campaign", rc);
			sleep_ms(50);
			continue;
		}
		if (rc == IL_COORD_OK)
			break;
		print_kv("follower", &holder);
		if (w == NULL) {
			/* From the revision after the holder's key: its delete
			 * cannot slip between this read and the watch. */
			w = il_coord_watch_open(cfg, av[0], false, holder.mod_rev + 1, err, sizeof(err));
			if (w == NULL) {
				fprintf(stderr, PROG ": %s\n", err);
				return 2;
			}
		}
		il_coord_kv_free(&holder);
		/* Keep our own lease while we wait; campaign again on a DELETE. */
		for (bool gone = false; !gone && !stop;) {
			struct il_coord_event ev;

			if (now_ms() - renew > (double)granted * 1000 / 3) {
				if (il_coord_lease_keepalive(c, lease, NULL) == IL_COORD_OK)
					renew = now_ms();
			}
			if (il_coord_watch_wait(w, &ev, 100) != IL_COORD_OK)
				continue;
			gone = ev.type != IL_COORD_EV_PUT;
			il_coord_event_free(&ev);
		}
	}
	il_coord_watch_close(w);
	if (stop)
		return 1;
	double t0 = now_ms(), last_ka = renew;
	result_begin(&j, "leader");
	il_json_str(&j, "value", av[1]);
	il_json_i64(&j, "rev", rev);
	il_json_i64(&j, "lease", lease);
	il_json_fixed(&j, "t_ms", t0, 3);
	result_end(&j, false);
	bool lapsed = false;
	while (!stop && (hold_ms == 0 || now_ms() - t0 < hold_ms)) {
		if (lapse_ms && !lapsed && now_ms() - t0 >= lapse_ms) {
			lapsed = true;
			result_begin(&j, "lapse");
			il_json_fixed(&j, "last_keepalive_ms", last_ka, 3);
			result_end(&j, true);
		}
		if (!lapsed && now_ms() - last_ka >= (double)granted * 1000 / 3) {
			double sent = now_ms();

			rc = il_coord_lease_keepalive(c, lease, &left);
			if (rc == IL_COORD_OK)
				last_ka = sent;
			else if (rc == IL_COORD_FAILED) {
				result_begin(&j, "lost");
				result_end(&j, true);
				return 1;
			}
		}
		sleep_ms(20);
	}
	if (!lapsed)
		il_coord_resign(c, av[0], lease);
	return 0;
}

static int cmd_watch(const struct il_coord_cfg *cfg, char **av, bool prefix, unsigned count,
		     unsigned timeout_ms)
{
	char err[256];
	struct il_coord_watch *w = il_coord_watch_open(cfg, av[0], prefix, 0, err, sizeof(err));
	double until = now_ms() + timeout_ms;
	unsigned got = 0;
	struct il_json j;

	if (w == NULL) {
		fprintf(stderr, PROG ": %s\n", err);
		return 2;
	}
	result_begin(&j, "watching");
	result_end(&j, true);
	while (!stop && got < count && now_ms() < until) {
		struct il_coord_event ev;

		if (il_coord_watch_wait(w, &ev, 50) != IL_COORD_OK)
			continue;
		got++;
		print_kv(ev.type == IL_COORD_EV_PUT ? "put" : ev.type == IL_COORD_EV_DELETE ?
			 "delete" : "reset", &ev.kv);
		il_coord_event_free(&ev);
	}
	result_begin(&j, "done");
	il_json_u64(&j, "events", got);
	il_json_u64(&j, "reconnects", il_coord_watch_reconnects(w));
	result_end(&j, true);
	il_coord_watch_close(w);
	return got >= count ? 0 : 1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* N compare-and-swaps in a row, each on the revision the last one made:
 * the latency of the commit the control process waits for. */
static int cmd_bench(struct il_coord *c, char **av)
{
	long n = atol(av[1]);
	double *lat = calloc(n > 0 ? (size_t)n : 1, sizeof(double));
	struct il_coord_kv cur;
	int64_t mod = 0, rev;
	char val[64];

	if (n <= 0 || lat == NULL) {
		fprintf(stderr, PROG ": bench-txn: N must be a positive count\n");
		free(lat);
		return 2;
	}
	int rc = il_coord_get(c, av[0], &cur, NULL);
	if (rc < 0) {
		free(lat);
		return fail(c, "get", rc);
	}
	mod = cur.mod_rev;
	il_coord_kv_free(&cur);
	for (long i = 0; i < n; i++) {
		double t = now_ms();

		snprintf(val, sizeof(val), "bench %d %ld", (int)getpid(), i);
		rc = il_coord_cas(c, av[0], mod, val, strlen(val), 0, &rev, NULL);
		lat[i] = now_ms() - t;
		if (rc != IL_COORD_OK) {
			free(lat);
			return rc < 0 ? fail(c, "cas", rc) : 1;
		}
		mod = rev;
	}
	qsort(lat, (size_t)n, sizeof(double), cmp_double);
	struct il_json j;
	result_begin(&j, "bench");
	il_json_i64(&j, "n", n);
	il_json_fixed(&j, "min_ms", lat[0], 3);
	il_json_fixed(&j, "median_ms", lat[n / 2], 3);
	il_json_fixed(&j, "p90_ms", lat[n * 90 / 100], 3);
	il_json_fixed(&j, "p99_ms", lat[n * 99 / 100], 3);
	il_json_fixed(&j, "max_ms", lat[n - 1], 3);
	result_end(&j, false);
	free(lat);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " -e URLS [--deadline-ms MS] [--attempt-ms MS] COMMAND ARGS...\n"
		"  get KEY | put KEY VALUE | cas KEY EXPECT_MOD VALUE (EXPECT_MOD 0: create)\n"
		"  campaign KEY VALUE [--ttl S] [--hold-ms MS] [--lapse-ms MS]\n"
		"  watch KEY [--prefix] [--count N] [--timeout-ms MS]\n"
		"  bench-txn KEY N\n"
		"One JSON object per line; exit 0 ok, 1 not done (compare failed, absent,\n"
		"lost), 2 error.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "endpoints", required_argument, NULL, 'e' },
		{ "deadline-ms", required_argument, NULL, 'd' },
		{ "attempt-ms", required_argument, NULL, 'a' },
		{ "ttl", required_argument, NULL, 't' },
		{ "hold-ms", required_argument, NULL, 'H' },
		{ "lapse-ms", required_argument, NULL, 'l' },
		{ "prefix", no_argument, NULL, 'p' },
		{ "count", required_argument, NULL, 'n' },
		{ "timeout-ms", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct il_coord_cfg cfg;
	unsigned hold = 0, lapse = 0, count = 1, timeout = 10000;
	bool prefix = false;
	int64_t ttl = 2;
	char err[256];
	int o;

	il_coord_cfg_init(&cfg);
	while ((o = getopt_long(argc, argv, "e:h", opts, NULL)) != -1) {
		switch (o) {
		case 'e': cfg.endpoints = optarg; break;
		case 'd': cfg.deadline_ms = (unsigned)atoi(optarg); break;
		case 'a': cfg.attempt_ms = (unsigned)atoi(optarg); break;
		case 't': ttl = atoll(optarg); break;
		case 'H': hold = (unsigned)atoi(optarg); break;
		case 'l': lapse = (unsigned)atoi(optarg); break;
		case 'p': prefix = true; break;
		case 'n': count = (unsigned)atoi(optarg); break;
		case 'T': timeout = (unsigned)atoi(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	/* GNU getopt permutes: options may come before or after the command. */
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	int cmd = optind;
	optind++;
	const char *name = argv[cmd];
	char **av = &argv[optind];
	int nargs = argc - optind;
	static const struct { const char *name; int nargs; } need[] = {
		{ "get", 1 }, { "put", 2 }, { "cas", 3 }, { "campaign", 2 }, { "watch", 1 },
		{ "bench-txn", 2 },
	};
	int want = -1;
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if (strcmp(name, need[i].name) == 0)
			want = need[i].nargs;
	if (want < 0 || nargs != want) {
		fprintf(stderr, PROG ": '%s' %s (see --help)\n", name,
			want < 0 ? "is not a command" : "has the wrong number of arguments");
		return 2;
	}
	if (cfg.attempt_ms > cfg.deadline_ms)
		cfg.attempt_ms = cfg.deadline_ms;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(name, "watch") == 0)
		return cmd_watch(&cfg, av, prefix, count, timeout);
	struct il_coord *c = il_coord_open(&cfg, err, sizeof(err));
	if (c == NULL) {
		fprintf(stderr, PROG ": %s\n", err);
		return 2;
	}
	int rc;
	if (strcmp(name, "get") == 0)
		rc = cmd_get(c, av);
	else if (strcmp(name, "put") == 0)
		rc = cmd_put(c, av);
	else if (strcmp(name, "cas") == 0)
		rc = cmd_cas(c, av);
	else if (strcmp(name, "campaign") == 0)
		rc = cmd_campaign(c, &cfg, av, ttl, hold, lapse);
	else
		rc = cmd_bench(c, av);
	struct il_coord_stats st;
	struct il_json j;
	il_coord_get_stats(c, &st);
	result_begin(&j, "stats");
	il_json_u64(&j, "calls", st.calls);
	il_json_u64(&j, "requests", st.requests);
	il_json_u64(&j, "failovers", st.failovers);
	il_json_u64(&j, "ambiguous", st.ambiguous);
	il_json_u64(&j, "unavailable", st.unavailable);
	il_json_str(&j, "endpoint", il_coord_endpoint(c));
	result_end(&j, false);
	il_coord_close(c);
	return rc;
}
