/* SPDX-License-Identifier: BSD-3-Clause
 * The memif link gate (include/interlink/memif_guard.h): a poll loop makes
 * no burst on a memif port whose link it last read down, reads the link
 * again after an unmap (a peer left) and at every iteration while it is
 * down, and counts what it did not send. Real net_memif ports: a server
 * and a client of it in this process (EAL --no-huge), two queue pairs each
 * (the second queue's ring is the one a burst during a connect touched at
 * NULL plus its offset).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include <interlink/memif_guard.h>
#include <interlink/stage.h>

static struct rte_mempool *pool;
static uint16_t srv, cli; /* DPDK port ids */
static char sock_path[64];

#define SRV_BIT 1u /* the server is app port 0 of the gate */

static void setup_port(uint16_t port)
{
	struct rte_eth_conf conf;

	memset(&conf, 0, sizeof(conf));
	assert_int_equal(rte_eth_dev_configure(port, 2, 2, &conf), 0);
	for (uint16_t q = 0; q < 2; q++) {
		assert_int_equal(rte_eth_rx_queue_setup(port, q, 1024, 0, NULL, pool), 0);
		assert_int_equal(rte_eth_tx_queue_setup(port, q, 1024, 0, NULL), 0);
	}
}

static bool link_is(uint16_t port, bool up, unsigned timeout_ms)
{
	for (unsigned t = 0; t <= timeout_ms; t += 5) {
		struct rte_eth_link link;
		if (rte_eth_link_get_nowait(port, &link) == 0 &&
		    (link.link_status == RTE_ETH_LINK_UP) == up)
			return true;
		usleep(5000);
	}
	return false;
}

static uint64_t unmaps(void)
{
	return atomic_load(&il_guard_unmaps);
}

/* One frame through the server's queue 1 (client tx queue 1 -> server rx
 * queue 1), read only through the gate: true if it arrived. */
static bool frame_through_queue1(struct il_link_gate *g, const uint16_t *ids)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(pool), *got[4];
	uint32_t went;

	assert_non_null(m);
	memset(rte_pktmbuf_append(m, 64), 0xab, 64);
	if (rte_eth_tx_burst(cli, 1, &m, 1) != 1) {
		rte_pktmbuf_free(m);
		return false;
	}
	for (unsigned i = 0; i < 2000; i++) {
		if (il_guard_links(g, ids, &went) & SRV_BIT) {
			usleep(1000);
			continue;
		}
		uint16_t n = rte_eth_rx_burst(srv, 1, got, 4);
		if (n) {
			rte_pktmbuf_free_bulk(got, n);
			return true;
		}
		usleep(1000);
	}
	return false;
}

/* One iteration's reading: the ports down and those that just went. */
static void expect_gate(struct il_link_gate *g, const uint16_t *ids, uint32_t down,
			uint32_t went)
{
	uint32_t w;

	assert_int_equal(il_guard_links(g, ids, &w), down);
	assert_int_equal(w, went);
}

/* Start or stop the client and wait until both ends agree. */
static void client(bool up)
{
	assert_int_equal(up ? rte_eth_dev_start(cli) : rte_eth_dev_stop(cli), 0);
	assert_true(link_is(srv, up, 10000));
	if (up)
		assert_true(link_is(cli, true, 10000));
}

/* The whole life of a connection, in order: no peer, connect, traffic,
 * disconnect, connect again. */
static void test_gate_follows_the_peer(void **state)
{
	(void)state;
	struct il_link_gate g;
	const uint16_t ids[1] = {srv};

	/* No peer yet: the gate starts closed and stays so; nothing "went" down. */
	il_guard_gate_init(&g, SRV_BIT);
	expect_gate(&g, ids, SRV_BIT, 0);

	/* The client connects: once the server's link is up, the gate opens. */
	client(true);
	expect_gate(&g, ids, 0, 0);
	assert_int_equal(g.unmaps_seen, unmaps());
	assert_true(frame_through_queue1(&g, ids));

	/* The client leaves: the server unmaps its rings (the guard counts it)
	 * and the gate, told by the count, reads the link down, "went" once. */
	uint64_t before = unmaps();
	struct il_link_gate stale = g; /* read up, before the unmap */
	client(false);
	assert_true(unmaps() > before);
	expect_gate(&g, ids, SRV_BIT, SRV_BIT);
	expect_gate(&g, ids, SRV_BIT, 0);

	/* Up at the last reading and no unmap since, the gate keeps that
	 * reading (one load per iteration): a gate told of no unmap does not
	 * see the link go, which is why every disconnect must count one. */
	stale.unmaps_seen = unmaps();
	expect_gate(&stale, ids, 0, 0);

	/* And back. */
	client(true);
	expect_gate(&g, ids, 0, 0);
	assert_true(frame_through_queue1(&g, ids));
	client(false);
}

/* A loop without memif ports has nothing to gate: open, nothing read. */
static void test_gate_without_memif_ports_is_open(void **state)
{
	(void)state;
	struct il_link_gate g;
	const uint16_t ids[1] = {srv};

	il_guard_gate_init(&g, 0);
	expect_gate(&g, ids, 0, 0);
}

/* What a loop would send on a port whose link is down is freed and
 * counted in tx_link_down (queued, not sent), directly or in a burst. */
static void test_tx_on_a_down_link_is_counted_not_sent(void **state)
{
	(void)state;
	struct il_lcore_io io;
	struct rte_mbuf *m[8];
	unsigned avail = rte_mempool_avail_count(pool);

	memset(&io, 0, sizeof(io));
	io.port_id[0] = srv;
	io.txq[0] = 0;
	io.txb[0] = rte_zmalloc("txb", RTE_ETH_TX_BUFFER_SIZE(32), 0);
	assert_non_null(io.txb[0]);
	rte_eth_tx_buffer_init(io.txb[0], 32);
	io.link_down = SRV_BIT;
	assert_int_equal(rte_pktmbuf_alloc_bulk(pool, m, 8), 0);
	il_tx(&io, 0, m[0]);
	il_tx_burst(&io, 0, m + 1, 7);
	assert_int_equal(io.tx_queued[0], 8);
	assert_int_equal(io.tx_link_down[0], 8);
	assert_int_equal(io.tx_dropped[0], 0);
	assert_int_equal(io.txb[0]->length, 0);
	assert_int_equal(rte_mempool_avail_count(pool), avail);
	rte_free(io.txb[0]);
}

int main(int argc, char **argv)
{
	(void)argc;
	char dir[] = "/tmp/il-memif-gate-XXXXXX";
	char srv_arg[160], cli_arg[160];

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(sock_path, sizeof(sock_path), "%s/s.sock", dir);
	snprintf(srv_arg, sizeof(srv_arg),
		 "net_memif0,role=server,socket=%s,socket-abstract=no", sock_path);
	snprintf(cli_arg, sizeof(cli_arg),
		 "net_memif1,role=client,socket=%s,socket-abstract=no", sock_path);
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "memifgate%d", (int)getpid());
	char *eal[] = {argv[0], "--no-huge", "-m", "256", "--no-pci", "--lcores", "0",
		       "--file-prefix", prefix, "--log-level", "lib.eal:error",
		       "--vdev", srv_arg, "--vdev", cli_arg, NULL};
	if (rte_eal_init(15, eal) < 0) {
		fprintf(stderr, "EAL init failed\n");
		return 1;
	}
	pool = rte_pktmbuf_pool_create("gate_pool", 8192, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
				       (int)rte_socket_id());
	if (!pool || rte_eth_dev_get_port_by_name("net_memif0", &srv) ||
	    rte_eth_dev_get_port_by_name("net_memif1", &cli)) {
		fprintf(stderr, "set-up failed\n");
		return 1;
	}
	if (il_guard_arm() != 1) {
		fprintf(stderr, "the guard did not arm with memif ports\n");
		return 1;
	}
	setup_port(srv);
	setup_port(cli);
	/* The server first: a client turned away by a port not yet started
	 * does not retry. */
	if (rte_eth_dev_start(srv)) {
		fprintf(stderr, "server start failed\n");
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gate_without_memif_ports_is_open),
		cmocka_unit_test(test_tx_on_a_down_link_is_counted_not_sent),
		cmocka_unit_test(test_gate_follows_the_peer),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	rte_eth_dev_stop(srv);
	rte_eth_dev_close(cli);
	rte_eth_dev_close(srv);
	rte_eal_cleanup();
	unlink(sock_path);
	rmdir(dir);
	return rc;
}
