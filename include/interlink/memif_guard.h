/* SPDX-License-Identifier: BSD-3-Clause
 * The memif disconnect guard: pollers report quiescent states (DPDK's RCU
 * QSBR), and an unmap from any other thread waits for them.
 *
 * DPDK 22.11's memif PMD handles a peer's disconnect in the EAL interrupt
 * thread: it clears its "connected" flag and then unmaps the shared
 * regions at once, while a poll-mode thread may be in the middle of a
 * burst on them (the rx/tx path checks the flag only on entry). A process
 * used to die of that when a peer went away. Every poll-mode thread
 * reports a quiescent state once per loop iteration (no burst in
 * progress), and munmap() called from any other thread first waits,
 * bounded, for a grace period: every online poller has reported since the
 * unmap began, so bursts started before the flag was cleared are over and
 * later ones see it.
 *
 * The guard is armed only when a net_memif port is probed: without one a
 * poller's report is a load and a predicted branch, and munmap() is the
 * plain system call. Armed, a report is two plain memory accesses (QSBR's
 * token read and counter write), no atomic read-modify-write.
 *
 * The connect has a race of its own. A burst computes its ring's address
 * from the region's mapping before it checks the "connected" flag; while a
 * peer is connecting, a server's region exists but is not mapped yet (its
 * address is NULL), so a poller that reads the address then, loses its CPU
 * until the interrupt thread has mapped the region and set the flag, and
 * then checks the flag, touches NULL plus the ring's offset: the first
 * queue's ring is at offset 0 and the burst's NULL check catches it, any
 * other queue's is not (a segfault in librte_net_memif at 0x4084 with
 * 1024-slot rings). The link status is written after the mapping and the
 * flag, so a poller that has read the link up finds its rings mapped. A
 * poller therefore bursts on a memif port only while it last read the
 * link up (il_guard_links()); it reads it again when an unmap since its
 * last reading says a peer left (every disconnect after a connect unmaps
 * the rings), and at every iteration while a link is down. Up, that is
 * one load per iteration.
 */
#ifndef INTERLINK_MEMIF_GUARD_H
#define INTERLINK_MEMIF_GUARD_H

#include <stdatomic.h>
#include <stdint.h>

#include <rte_rcu_qsbr.h>

#include <interlink/port.h>

#define IL_GUARD_MAX_POLLERS 64

/* The QSBR variable; NULL while the guard is not armed. */
extern struct rte_rcu_qsbr *_Atomic il_guard_qsv;

/* After the ports are probed and before any poller starts: arm the guard
 * if one of them is a net_memif. 1: armed; 0: no memif port, nothing to
 * guard; -1: out of memory. Arming twice is harmless. */
int il_guard_arm(void);

/* Called by a poll-mode thread before its loop, with a slot of its own
 * (< IL_GUARD_MAX_POLLERS), and when it leaves the loop. */
void il_guard_online(unsigned slot);
void il_guard_offline(unsigned slot);

/* Once per loop iteration, outside any burst. */
static inline void il_guard_quiescent(unsigned slot)
{
	struct rte_rcu_qsbr *v = atomic_load_explicit(&il_guard_qsv, memory_order_relaxed);

	if (v != NULL && slot < IL_GUARD_MAX_POLLERS)
		rte_rcu_qsbr_quiescent(v, slot);
}

/* Bumped by every unmap the guard holds, before it waits: a poller that
 * reports a quiescent state after it began sees the new value next. */
extern _Atomic uint64_t il_guard_unmaps;

/* Start with every gated link down: read at the first iteration. */
void il_guard_gate_init(struct il_link_gate *g, uint32_t memif_ports);

/* Read the links again (il_guard_links() does when needed). Returns the
 * ports whose link went down since the last reading. */
uint32_t il_guard_links_read(struct il_link_gate *g, const uint16_t *port_id);

/* Once per iteration, before any burst: the ports whose link is down (no
 * rx or tx burst on them), and in *went_down those that just went. */
static inline uint32_t il_guard_links(struct il_link_gate *g, const uint16_t *port_id,
				      uint32_t *went_down)
{
	*went_down = 0;
	if (g->ports == 0)
		return 0;
	if (g->down != 0 ||
	    atomic_load_explicit(&il_guard_unmaps, memory_order_acquire) != g->unmaps_seen)
		*went_down = il_guard_links_read(g, port_id);
	return g->down;
}

/* Grace periods an unmap waited for, and those that gave up (200 ms). */
uint64_t il_guard_waits(void);
uint64_t il_guard_timeouts(void);

#endif
