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
 */
#ifndef INTERLINK_MEMIF_GUARD_H
#define INTERLINK_MEMIF_GUARD_H

#include <stdatomic.h>
#include <stdint.h>

#include <rte_rcu_qsbr.h>

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

/* Grace periods an unmap waited for, and those that gave up (200 ms). */
uint64_t il_guard_waits(void);
uint64_t il_guard_timeouts(void);

#endif
