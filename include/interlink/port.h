/* SPDX-License-Identifier: BSD-3-Clause
 * The port layer (drivers/): any DPDK device, a PCI NIC or a vdev string,
 * set up the same way for every binary of the project.
 */
#ifndef INTERLINK_PORT_H
#define INTERLINK_PORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <rte_mempool.h>

#ifndef IL_DEVARGS_LEN
#define IL_DEVARGS_LEN 256
#endif

struct il_port;

/* The link gate of one poll loop over its memif ports (memif_guard.h):
 * no burst on a port whose link it last read down. */
struct il_link_gate {
	uint32_t ports;         /* bit p: app port p is a memif port */
	uint32_t down;          /* bit p: its link was down at the last reading */
	uint64_t unmaps_seen;   /* il_guard_unmaps at the last reading */
};

bool il_port_is_vdev(const char *device);
/* The device name DPDK registers ("net_memif0", "0000:03:00.0"). */
int il_port_dev_name(const char *device, char *out, size_t len);
/* Resolve the DPDK port id of a probed device. */
int il_port_lookup(struct il_port *p, char *err, size_t errlen);
/* Configure and set up the port's queues: receive queue q takes its mbufs
 * from pools[q] (pools[0] for a queue beyond n_pools). */
int il_port_setup(struct il_port *p, struct rte_mempool *const *pools, unsigned n_pools,
		  uint16_t frame_max, char *err, size_t errlen);
int il_port_start(struct il_port *p, char *err, size_t errlen);
void il_port_stop(struct il_port *p);
bool il_port_link_up(const struct il_port *p);
/* Frames the kernel dropped before a net_af_packet port's ring (its ring
 * was full), since the port started; 0 for other devices. */
uint64_t il_port_kernel_drops(uint16_t port_id);
/* Wait up to timeout_ms for the link; true if up. */
bool il_port_wait_link(uint16_t port_id, unsigned timeout_ms);

#endif
