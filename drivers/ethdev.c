/* SPDX-License-Identifier: BSD-3-Clause */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/socket.h>

#include <rte_ethdev.h>
#include <rte_errno.h>

#include <interlink/app.h>
#include <interlink/err.h>
#include <interlink/port.h>

bool il_port_is_vdev(const char *device)
{
	return strncmp(device, "net_", 4) == 0;
}

static bool is_pci(const char *s)
{
	/* [dddd:]bb:dd.f */
	unsigned colons = 0, dots = 0;
	for (const char *c = s; *c; c++) {
		if (*c == ':')
			colons++;
		else if (*c == '.')
			dots++;
		else if (!isxdigit((unsigned char)*c))
			return false;
	}
	return (colons == 1 || colons == 2) && dots == 1;
}

int il_port_dev_name(const char *device, char *out, size_t len)
{
	size_t n = strcspn(device, ",");
	if (n == 0 || n >= len)
		return -1;
	memcpy(out, device, n);
	out[n] = 0;
	if (il_port_is_vdev(out))
		return 0;
	return is_pci(out) ? 0 : -1;
}

int il_port_lookup(struct il_port *p, char *err, size_t errlen)
{
	uint16_t id;
	if (rte_eth_dev_get_port_by_name(p->dev_name, &id) != 0) {
		/* PCI devices may register under a canonical name. */
		RTE_ETH_FOREACH_DEV(id) {
			char name[RTE_ETH_NAME_MAX_LEN];
			if (rte_eth_dev_get_name_by_port(id, name) == 0 && strstr(name, p->dev_name)) {
				p->port_id = id;
				return 0;
			}
		}
		return ERR("config: key 'ports.%s.device': device '%s' did not probe (is the "
			   "driver available and the argument string right? see the EAL messages "
			   "above)", p->name, p->dev_name);
	}
	p->port_id = id;
	return 0;
}

int il_port_setup(struct il_port *p, struct rte_mempool *const *pools, unsigned n_pools,
		  uint16_t frame_max, char *err, size_t errlen)
{
	struct rte_eth_conf conf;
	struct rte_eth_dev_info info;
	int rc;

	memset(&conf, 0, sizeof(conf));
	rc = rte_eth_dev_info_get(p->port_id, &info);
	if (rc)
		return ERR("port '%s': cannot read device info: %s", p->name, rte_strerror(-rc));
	if (frame_max > RTE_ETHER_MAX_LEN) {
		conf.rxmode.mtu = frame_max - RTE_ETHER_HDR_LEN;
		if (info.max_mtu < conf.rxmode.mtu)
			return ERR("config: key 'mtu': port '%s' supports at most MTU %u",
				   p->name, info.max_mtu);
	}
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
	if (p->n_txq > info.max_tx_queues)
		return ERR("port '%s' has %u tx queues; the pipeline places %u lcores on it",
			   p->name, info.max_tx_queues, p->n_txq);
	uint16_t n_rxq = p->n_rxq ? p->n_rxq : 1;
	if (n_rxq > info.max_rx_queues)
		return ERR("config: key 'ports.%s.queues': %u receive queues; the device has at "
			   "most %u", p->name, n_rxq, info.max_rx_queues);
	rc = rte_eth_dev_configure(p->port_id, n_rxq, p->n_txq, &conf);
	if (rc)
		return ERR("port '%s': configure failed: %s", p->name, rte_strerror(-rc));
	uint16_t rxd = p->rx_desc, txd = p->tx_desc;
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(p->port_id, &rxd, &txd);
	if (rc)
		return ERR("port '%s': descriptor counts rejected: %s", p->name, rte_strerror(-rc));
	int sock = rte_eth_dev_socket_id(p->port_id);
	if (sock < 0)
		sock = 0;
	for (uint16_t q = 0; q < n_rxq; q++) {
		rc = rte_eth_rx_queue_setup(p->port_id, q, rxd, (unsigned)sock, NULL,
					    pools[q < n_pools ? q : 0]);
		if (rc)
			return ERR("port '%s': rx queue %u setup failed: %s", p->name, q,
				   rte_strerror(-rc));
	}
	for (uint16_t q = 0; q < p->n_txq; q++) {
		rc = rte_eth_tx_queue_setup(p->port_id, q, txd, (unsigned)sock, NULL);
		if (rc)
			return ERR("port '%s': tx queue %u setup failed: %s", p->name, q,
				   rte_strerror(-rc));
	}
	struct rte_ether_addr mac;
	if (rte_eth_macaddr_get(p->port_id, &mac) == 0)
		memcpy(p->mac, mac.addr_bytes, 6);
	return 0;
}

/* The kernel side of net_af_packet ports: DPDK 22.11's PMD does not report
 * the frames the kernel dropped because the ring was full (imissed stays 0),
 * so the sockets it opened on the port's interface are found in
 * /proc/self/fd and asked (PACKET_STATISTICS, which also resets them). */
#define KSOCK_MAX 8
static struct {
	int fd[KSOCK_MAX];
	unsigned n;
	uint64_t drops;
} ksock[RTE_MAX_ETHPORTS];

static void ksock_find(const struct il_port *p)
{
	const char *s = strstr(p->device, "iface=");
	char ifn[IF_NAMESIZE] = "";
	unsigned idx;
	DIR *d;
	struct dirent *e;

	if (!s || p->port_id >= RTE_MAX_ETHPORTS)
		return;
	s += 6;
	size_t n = strcspn(s, ",");
	if (n == 0 || n >= sizeof(ifn))
		return;
	memcpy(ifn, s, n);
	ifn[n] = '\0';
	idx = if_nametoindex(ifn);
	d = idx ? opendir("/proc/self/fd") : NULL;
	if (!d)
		return;
	ksock[p->port_id].n = 0;
	while ((e = readdir(d)) != NULL) {
		struct sockaddr_ll sll;
		socklen_t l = sizeof(sll);
		int fd = atoi(e->d_name);

		if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd == dirfd(d))
			continue;
		if (getsockname(fd, (struct sockaddr *)&sll, &l) == 0 &&
		    sll.sll_family == AF_PACKET && (unsigned)sll.sll_ifindex == idx &&
		    ksock[p->port_id].n < KSOCK_MAX)
			ksock[p->port_id].fd[ksock[p->port_id].n++] = fd;
	}
	closedir(d);
}

uint64_t il_port_kernel_drops(uint16_t port_id)
{
	if (port_id >= RTE_MAX_ETHPORTS)
		return 0;
	for (unsigned i = 0; i < ksock[port_id].n; i++) {
		struct tpacket_stats st;
		socklen_t l = sizeof(st);

		if (getsockopt(ksock[port_id].fd[i], SOL_PACKET, PACKET_STATISTICS, &st, &l) == 0)
			__atomic_add_fetch(&ksock[port_id].drops, st.tp_drops, __ATOMIC_RELAXED);
	}
	return __atomic_load_n(&ksock[port_id].drops, __ATOMIC_RELAXED);
}

int il_port_start(struct il_port *p, char *err, size_t errlen)
{
	int rc = rte_eth_dev_start(p->port_id);
	if (rc)
		return ERR("port '%s': start failed: %s", p->name, rte_strerror(-rc));
	/* A bump in the wire sees every frame; some vdevs lack the knob. */
	if (p->promisc) {
		rte_eth_promiscuous_enable(p->port_id);
		rte_eth_allmulticast_enable(p->port_id);
	}
	/* net_af_packet opens its socket for every interface and sets up its
	 * ring before binding it to its own, so frames of other interfaces can
	 * be waiting in the ring: discard them before any worker runs. */
	if (!strncmp(p->dev_name, "net_af_packet", 13)) {
		struct rte_mbuf *junk[32];
		unsigned total = 0;
		uint16_t n;
		do {
			n = rte_eth_rx_burst(p->port_id, 0, junk, 32);
			rte_pktmbuf_free_bulk(junk, n);
			total += n;
		} while (n && total < 65536);
		if (total)
			fprintf(stderr, "interlink: port '%s': discarded %u frames received before "
				"the port was bound to its interface\n", p->name, total);
		ksock_find(p);
		il_port_kernel_drops(p->port_id); /* from here on */
		ksock[p->port_id].drops = 0;
	}
	return 0;
}

void il_port_stop(struct il_port *p)
{
	rte_eth_dev_stop(p->port_id);
	rte_eth_dev_close(p->port_id);
}

bool il_port_link_up(const struct il_port *p)
{
	struct rte_eth_link link;
	if (rte_eth_link_get_nowait(p->port_id, &link))
		return false;
	return link.link_status == RTE_ETH_LINK_UP;
}

bool il_port_wait_link(uint16_t port_id, unsigned timeout_ms)
{
	for (unsigned t = 0; t <= timeout_ms; t += 10) {
		struct rte_eth_link link;
		if (rte_eth_link_get_nowait(port_id, &link) == 0 &&
		    link.link_status == RTE_ETH_LINK_UP)
			return true;
		usleep(10000);
	}
	return false;
}
