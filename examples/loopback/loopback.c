/* SPDX-License-Identifier: BSD-3-Clause
 * il-loopback: the smallest program on an installed libinterlink, built
 * the way docs/libinterlink.md says (pkg-config), and runnable on any
 * machine without an appliance: it prints the library's version, opens an
 * endpoint on the loopback interface, joins a group and polls until its
 * JOINs have gone out on the wire (to the group's address on lo), sends
 * one message (deferred: no appliance answers, so no VIEW ever names us),
 * then leaves.
 *
 *   cc loopback.c $(pkg-config --cflags --libs interlink) -o il-loopback
 *   ./il-loopback [PORT [GROUP_ADDRESS [MEMBER_ID]]]
 *
 * Exit status 0 once at least one JOIN was sent, 1 otherwise, 2 for bad
 * arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <interlink/endpoint.h>

int main(int argc, char **argv)
{
	struct il_ep_config cfg;
	struct il_ep_stats st;
	char err[256];
	char *end;

	il_ep_config_init(&cfg);
	if (argc > 1) {
		unsigned long port = strtoul(argv[1], &end, 10);

		if (*end != '\0' || port == 0 || port > 65535) {
			fprintf(stderr, "il-loopback: PORT must be 1..65535, not '%s'\n", argv[1]);
			return 2;
		}
		cfg.port = (uint16_t)port;
	}
	const char *group_addr = argc > 2 ? argv[2] : "239.1.1.1";
	cfg.member_id = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 0) : 7;
	cfg.tx_ifname = "lo";
	cfg.rx_ifname = "lo";
	cfg.join_retry_ms = 20; /* a few JOINs in the time we wait */

	printf("libinterlink %s\n", il_ep_version());
	struct il_ep *ep = il_ep_open(&cfg, err, sizeof(err));
	if (ep == NULL) {
		fprintf(stderr, "il-loopback: %s\n", err);
		return 1;
	}
	int rc = il_ep_join(ep, 1, group_addr, IL_EP_SENDER | IL_EP_RECEIVER, NULL, NULL);
	if (rc != 0) {
		fprintf(stderr, "il-loopback: join %s: %s\n", group_addr, strerror(-rc));
		il_ep_close(ep);
		return 2;
	}
	/* Without an appliance no VIEW comes: the message waits in the queue. */
	il_ep_send(ep, 1, "hello", 5);
	for (int i = 0; i < 100; i++) {
		il_ep_poll(ep, 10000);
		il_ep_get_stats(ep, &st);
		if (st.join_tx >= 3)
			break;
	}
	printf("member %u: %lu JOINs sent to %s:%u on lo, member of a view: %s, "
	       "%lu message(s) pending\n",
	       il_ep_member_id(ep), (unsigned long)st.join_tx, group_addr, cfg.port,
	       il_ep_is_member(ep, 1) ? "yes" : "no", (unsigned long)il_ep_pending(ep, 1));
	il_ep_leave(ep, 1);
	il_ep_close(ep);
	return st.join_tx > 0 ? 0 : 1;
}
