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

/* Values here are the tests' own ASCII words; anything else is escaped. */
static void print_str(const char *s, size_t n)
{
	putchar('"');
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static void print_kv(const char *what, const struct il_coord_kv *kv)
{
	printf("{\"result\":\"%s\",\"key\":", what);
	print_str(kv->key ? kv->key : "", kv->key_len);
	printf(",\"value\":");
	print_str(kv->value ? kv->value : "", kv->value_len);
	printf(",\"create_rev\":%lld,\"mod_rev\":%lld,\"version\":%lld,\"lease\":%lld,\"t_ms\":%.3f}\n",
	       (long long)kv->create_rev, (long long)kv->mod_rev, (long long)kv->version,
	       (long long)kv->lease, now_ms());
}

static int fail(struct il_coord *c, const char *what, int rc)
{
	printf("{\"result\":\"error\",\"op\":\"%s\",\"rc\":%d,\"error\":", what, rc);
	print_str(il_coord_strerror(c), strlen(il_coord_strerror(c)));
	printf(",\"t_ms\":%.3f}\n", now_ms());
	fflush(stdout);
	return 2;
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
	printf("{\"result\":\"ok\",\"rev\":%lld,\"t_ms\":%.3f}\n", (long long)rev, now_ms());
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
		printf("{\"result\":\"ok\",\"rev\":%lld,\"t_ms\":%.3f}\n", (long long)rev, now_ms());
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
	char err[256];
	int rc = il_coord_lease_grant(c, ttl, &lease, &granted);

	if (rc < 0)
		return fail(c, "lease_grant", rc);
	printf("{\"result\":\"lease\",\"lease\":%lld,\"ttl\":%lld,\"t_ms\":%.3f}\n", (long long)lease,
	       (long long)granted, now_ms());
	fflush(stdout);
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
		fflush(stdout);
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
	printf("{\"result\":\"leader\",\"value\":");
	print_str(av[1], strlen(av[1]));
	printf(",\"rev\":%lld,\"lease\":%lld,\"t_ms\":%.3f}\n", (long long)rev, (long long)lease, t0);
	fflush(stdout);
	bool lapsed = false;
	while (!stop && (hold_ms == 0 || now_ms() - t0 < hold_ms)) {
		if (lapse_ms && !lapsed && now_ms() - t0 >= lapse_ms) {
			lapsed = true;
			printf("{\"result\":\"lapse\",\"last_keepalive_ms\":%.3f,\"t_ms\":%.3f}\n",
			       last_ka, now_ms());
			fflush(stdout);
		}
		if (!lapsed && now_ms() - last_ka >= (double)granted * 1000 / 3) {
			double sent = now_ms();

			rc = il_coord_lease_keepalive(c, lease, &left);
			if (rc == IL_COORD_OK)
				last_ka = sent;
			else if (rc == IL_COORD_FAILED) {
				printf("{\"result\":\"lost\",\"t_ms\":%.3f}\n", now_ms());
				fflush(stdout);
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

	if (w == NULL) {
		fprintf(stderr, PROG ": %s\n", err);
		return 2;
	}
	printf("{\"result\":\"watching\",\"t_ms\":%.3f}\n", now_ms());
	fflush(stdout);
	while (!stop && got < count && now_ms() < until) {
		struct il_coord_event ev;

		if (il_coord_watch_wait(w, &ev, 50) != IL_COORD_OK)
			continue;
		got++;
		print_kv(ev.type == IL_COORD_EV_PUT ? "put" : ev.type == IL_COORD_EV_DELETE ?
			 "delete" : "reset", &ev.kv);
		fflush(stdout);
		il_coord_event_free(&ev);
	}
	printf("{\"result\":\"done\",\"events\":%u,\"reconnects\":%llu,\"t_ms\":%.3f}\n", got,
	       (unsigned long long)il_coord_watch_reconnects(w), now_ms());
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
	printf("{\"result\":\"bench\",\"n\":%ld,\"min_ms\":%.3f,\"median_ms\":%.3f,"
	       "\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f}\n", n, lat[0], lat[n / 2],
	       lat[n * 90 / 100], lat[n * 99 / 100], lat[n - 1]);
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
	il_coord_get_stats(c, &st);
	printf("{\"result\":\"stats\",\"calls\":%llu,\"requests\":%llu,\"failovers\":%llu,"
	       "\"ambiguous\":%llu,\"unavailable\":%llu,\"endpoint\":\"%s\"}\n",
	       (unsigned long long)st.calls, (unsigned long long)st.requests,
	       (unsigned long long)st.failovers, (unsigned long long)st.ambiguous,
	       (unsigned long long)st.unavailable, il_coord_endpoint(c));
	il_coord_close(c);
	return rc;
}
