/* SPDX-License-Identifier: BSD-3-Clause
 * Quiescent-state tracking for poll-mode threads, and the guard it buys.
 *
 * DPDK 22.11's memif PMD handles a peer's disconnect in the EAL interrupt
 * thread: it clears its "connected" flag and then unmaps the shared
 * regions at once, while a poll-mode thread may be in the middle of a
 * burst on them (the rx/tx path checks the flag only on entry). The
 * appliance used to die of that when a peer went away. Every poll-mode
 * thread now announces a quiescent point once per loop iteration (no
 * burst in progress), and munmap() called from any other thread first
 * waits, bounded, until every online poller has passed one: bursts started
 * before the flag was cleared are over, later ones see it. Setup and
 * teardown, when no poller is online, pay nothing.
 */
#ifndef INTERLINK_QUIESCE_H
#define INTERLINK_QUIESCE_H

#include <stdatomic.h>
#include <stdint.h>

#define IL_QS_MAX 64

struct il_qs_slot {
	_Atomic uint64_t seq;
	_Atomic int online;
	char pad[64 - sizeof(uint64_t) - sizeof(int)];
};

extern struct il_qs_slot il_qs_slots[IL_QS_MAX];
extern _Thread_local int il_qs_self; /* slot + 1 of this thread; 0: not a poller */

/* Called by a poll-mode thread before its loop, with a slot of its own. */
void il_qs_online(unsigned slot);
/* Called when it leaves its loop. */
void il_qs_offline(unsigned slot);

/* Once per loop iteration, outside any burst. A full barrier, so the next
 * burst's check of a PMD's flags cannot be hoisted above it. */
static inline void il_qs_point(unsigned slot)
{
	atomic_fetch_add_explicit(&il_qs_slots[slot].seq, 1, memory_order_seq_cst);
}

/* Wait until every online poller (other than the caller) has passed a
 * quiescent point after this call began; at most timeout_us. Returns 0,
 * or -1 if it gave up. */
int il_qs_wait(uint64_t timeout_us);

/* Grace waits that ran, and those that timed out. */
uint64_t il_qs_waits(void);
uint64_t il_qs_timeouts(void);

#endif
