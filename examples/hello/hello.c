/* SPDX-License-Identifier: BSD-3-Clause
 * il-hello: the short example of docs/libinterlink.md. Joins a group as
 * sender and receiver, sends --count numbered messages and prints each
 * delivery: "po" on arrival in the group's order, "uto" once stable.
 *
 *   il-hello [--auth-keys FILE [--auth-key-id ID]] TX_IF RX_IF MEMBER_ID [COUNT [MEMBERS]]
 *
 * --auth-keys: authenticated control traffic (the appliance's key file):
 * our control messages signed, the appliance's checked (docs/libinterlink.md).
 * With MEMBERS, it starts sending once a view has that many members and
 * waits for COUNT x MEMBERS U-deliveries (everyone's messages).
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <interlink/endpoint.h>

struct app {
	unsigned uto_seen, members;
};

static void on_po(void *user, const struct il_ep_msg *m)
{
	(void)user;
	printf("po  g=%lu from %u#%lu: %.*s\n", m->global_seq, m->sender, m->sender_seq,
	       (int)m->len, (const char *)m->data);
}

static void on_uto(void *user, const struct il_ep_msg *m)
{
	struct app *a = user;

	if (m->len >= 6 && memcmp(m->data, "hello ", 6) == 0)
		a->uto_seen++; /* only messages of this example count */
	printf("uto g=%lu\n", m->global_seq);
}

static void on_view(void *user, const struct il_ep_view *v)
{
	static const char *const ev[] = { "joined", "changed", "excluded", "new epoch" };

	((struct app *)user)->members = v->n_members;
	printf("view %u %s: start %lu, %u members\n", v->view_id, ev[v->event], v->start_seq,
	       v->n_members);
}

int main(int argc, char **argv)
{
	struct il_ep_config cfg;
	struct app a = { 0 };
	char err[256];

	/* A member that prints must not die because its reader went away
	 * (`il-hello ... | head`): it would leave the group mid-run. */
	signal(SIGPIPE, SIG_IGN);
	static const struct option lo[] = { { "auth-keys", 1, 0, 'A' },
					    { "auth-key-id", 1, 0, 'I' }, { 0, 0, 0, 0 } };
	const char *auth_keys = NULL;
	uint32_t auth_key_id = 0;
	int ch;

	while ((ch = getopt_long(argc, argv, "+", lo, NULL)) != -1) {
		if (ch == 'A')
			auth_keys = optarg;
		else if (ch == 'I')
			auth_key_id = (uint32_t)strtoul(optarg, NULL, 0);
		else
			argc = 0; /* usage */
	}
	argv += optind - 1;
	argc -= optind - 1;
	if (argc < 4) {
		fprintf(stderr, "usage: il-hello [--auth-keys FILE [--auth-key-id ID]] TX_IF RX_IF "
			"MEMBER_ID [COUNT [MEMBERS]]\n");
		return 2;
	}
	unsigned count = argc > 4 ? (unsigned)atoi(argv[4]) : 10;
	unsigned members = argc > 5 ? (unsigned)atoi(argv[5]) : 1;
	time_t end = time(NULL) + 60;

	il_ep_config_init(&cfg);
	cfg.tx_ifname = argv[1];
	cfg.rx_ifname = argv[2];
	cfg.member_id = (uint32_t)strtoul(argv[3], NULL, 0);
	struct il_ep *ep = il_ep_open(&cfg, err, sizeof(err));
	if (ep == NULL) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	if (auth_keys != NULL && il_ep_set_auth(ep, auth_keys, auth_key_id, err, sizeof(err))) {
		fprintf(stderr, "--auth-keys: %s\n", err);
		return 1;
	}
	const struct il_ep_callbacks cb = { .po = on_po, .uto = on_uto, .view = on_view };
	if (il_ep_join(ep, 1, "239.1.1.1", IL_EP_SENDER | IL_EP_RECEIVER, &cb, &a) != 0)
		return 1;
	while (a.members < members && time(NULL) < end)
		il_ep_poll(ep, 1000);
	for (unsigned i = 0; i < count; i++) {
		char msg[64];
		int n = snprintf(msg, sizeof(msg), "hello %u from %s", i, argv[3]);

		/* Deferred until we are in a view and have credit; never lost. */
		il_ep_send(ep, 1, msg, (size_t)n);
	}
	/* Until every message of ours is stable and we U-delivered everyone's
	 * (at most 60 s). */
	while ((il_ep_pending(ep, 1) > 0 || a.uto_seen < count * members) && time(NULL) < end)
		il_ep_poll(ep, 1000);
	struct il_ep_stats st;

	il_ep_get_stats(ep, &st);
	printf("pending %lu, %u U-delivered\n", il_ep_pending(ep, 1), a.uto_seen);
	printf("stats: data_rx %lu dup %lu naks %lu acks %lu epochs %lu views %lu credits %lu "
	       "packed %lu of %lu\n", st.data_rx, st.data_dup, st.nak_tx, st.ack_tx, st.epochs,
	       st.view_rx, st.credit_rx, st.msgs_packed, st.msgs_tx);
	printf("resend: resume_rx %lu resent_resume %lu resend_timeouts %lu resent_timeout %lu\n",
	       st.resume_rx, st.resent_resume, st.resend_timeouts, st.resent_timeout);
	struct il_ep_auth_stats as;

	il_ep_get_auth_stats(ep, &as);
	printf("auth: signed_tx %lu verified_rx %lu bad_mac %lu replay %lu\n", as.signed_tx,
	       as.verified_rx, as.bad_mac, as.replay);
	il_ep_close(ep); /* sends LEAVE */
	return a.uto_seen >= count * members ? 0 : 1;
}
