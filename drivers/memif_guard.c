/* SPDX-License-Identifier: BSD-3-Clause
 * See include/interlink/memif_guard.h for why this exists.
 */
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <rte_common.h>
#include <rte_ethdev.h>

#include <interlink/memif_guard.h>

#define GRACE_TIMEOUT_US 200000u

struct rte_rcu_qsbr *_Atomic il_guard_qsv;
/* Set in a poller thread while it is online: it never waits for itself. */
static _Thread_local bool self_online;
static _Atomic uint64_t waits, timeouts;
_Atomic uint64_t il_guard_unmaps;

static bool memif_probed(void)
{
	uint16_t pid;

	RTE_ETH_FOREACH_DEV(pid) {
		struct rte_eth_dev_info info;

		if (rte_eth_dev_info_get(pid, &info) == 0 && info.driver_name != NULL &&
		    strcmp(info.driver_name, "net_memif") == 0)
			return true;
	}
	return false;
}

int il_guard_arm(void)
{
	struct rte_rcu_qsbr *v;
	size_t sz;

	if (atomic_load(&il_guard_qsv) != NULL)
		return 1;
	if (!memif_probed())
		return 0;
	sz = RTE_ALIGN_CEIL(rte_rcu_qsbr_get_memsize(IL_GUARD_MAX_POLLERS), RTE_CACHE_LINE_SIZE);
	v = aligned_alloc(RTE_CACHE_LINE_SIZE, sz);
	if (v == NULL || rte_rcu_qsbr_init(v, IL_GUARD_MAX_POLLERS) != 0) {
		free(v);
		return -1;
	}
	/* Never freed: an unmap on another thread may still be reading it at
	 * exit, and it is a few kilobytes for the life of the process. */
	atomic_store(&il_guard_qsv, v);
	return 1;
}

void il_guard_online(unsigned slot)
{
	struct rte_rcu_qsbr *v = atomic_load(&il_guard_qsv);

	if (v == NULL || slot >= IL_GUARD_MAX_POLLERS)
		return;
	self_online = true;
	rte_rcu_qsbr_thread_register(v, slot);
	rte_rcu_qsbr_thread_online(v, slot);
}

void il_guard_offline(unsigned slot)
{
	struct rte_rcu_qsbr *v = atomic_load(&il_guard_qsv);

	if (v == NULL || slot >= IL_GUARD_MAX_POLLERS)
		return;
	rte_rcu_qsbr_thread_offline(v, slot);
	rte_rcu_qsbr_thread_unregister(v, slot);
	self_online = false;
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Wait for a grace period, at most GRACE_TIMEOUT_US. */
static void grace_period(struct rte_rcu_qsbr *v)
{
	uint64_t t, deadline;

	/* First of all: a poller that reports a quiescent state after the
	 * grace period starts reads its links again at its next iteration. */
	atomic_fetch_add_explicit(&il_guard_unmaps, 1, memory_order_release);
	/* No poller registered (set-up, teardown): nothing to wait for. A
	 * poller registers and goes online before its first burst. */
	if (__atomic_load_n(&v->num_threads, __ATOMIC_ACQUIRE) == 0)
		return;
	atomic_fetch_add(&waits, 1);
	t = rte_rcu_qsbr_start(v);
	deadline = now_us() + GRACE_TIMEOUT_US;
	while (!rte_rcu_qsbr_check(v, t, false)) {
		if (now_us() > deadline) {
			atomic_fetch_add(&timeouts, 1);
			return;
		}
		sched_yield();
	}
}

void il_guard_gate_init(struct il_link_gate *g, uint32_t memif_ports)
{
	g->ports = memif_ports;
	g->down = memif_ports;
	g->unmaps_seen = atomic_load(&il_guard_unmaps);
}

uint32_t il_guard_links_read(struct il_link_gate *g, const uint16_t *port_id)
{
	uint32_t down = 0, was = g->down;

	/* First the unmap count, then the links: an unmap after this reading
	 * is seen at the next iteration. */
	g->unmaps_seen = atomic_load_explicit(&il_guard_unmaps, memory_order_acquire);
	for (uint32_t m = g->ports; m != 0; m &= m - 1) {
		unsigned p = (unsigned)__builtin_ctz(m);
		struct rte_eth_link link;

		/* memif's link_update does nothing in a primary process: this is
		 * a read of the status memif_connect() writes last. */
		if (rte_eth_link_get_nowait(port_id[p], &link) != 0 ||
		    link.link_status != RTE_ETH_LINK_UP)
			down |= 1u << p;
	}
	/* Keep the burst's loads after the link's. */
	atomic_thread_fence(memory_order_acquire);
	g->down = down;
	return down & ~was;
}

uint64_t il_guard_waits(void)
{
	return atomic_load(&waits);
}

uint64_t il_guard_timeouts(void)
{
	return atomic_load(&timeouts);
}

/* The interposed munmap: the binaries that link this file export it
 * (-Wl,--export-dynamic-symbol=munmap), so the PMDs EAL loads at run time
 * bind to it. Unarmed, or called by a poller for itself, it is the plain
 * system call. */
int munmap(void *addr, size_t len)
{
	struct rte_rcu_qsbr *v = atomic_load_explicit(&il_guard_qsv, memory_order_acquire);

	if (v != NULL && !self_online)
		grace_period(v);
	return (int)syscall(SYS_munmap, addr, len);
}
