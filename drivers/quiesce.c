/* SPDX-License-Identifier: BSD-3-Clause
 * See include/interlink/quiesce.h for why this exists.
 */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <interlink/quiesce.h>

struct il_qs_slot il_qs_slots[IL_QS_MAX];
_Thread_local int il_qs_self;
static _Atomic int n_online;
static _Atomic uint64_t waits, timeouts;

void il_qs_online(unsigned slot)
{
	if (slot >= IL_QS_MAX)
		return;
	il_qs_self = (int)slot + 1;
	atomic_store(&il_qs_slots[slot].online, 1);
	atomic_fetch_add(&n_online, 1);
}

void il_qs_offline(unsigned slot)
{
	if (slot >= IL_QS_MAX)
		return;
	atomic_store(&il_qs_slots[slot].online, 0);
	atomic_fetch_sub(&n_online, 1);
	il_qs_self = 0;
}

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int il_qs_wait(uint64_t timeout_us)
{
	uint64_t snap[IL_QS_MAX];
	int any = 0;

	if (atomic_load(&n_online) == 0)
		return 0;
	atomic_thread_fence(memory_order_seq_cst);
	for (unsigned i = 0; i < IL_QS_MAX; i++) {
		snap[i] = atomic_load(&il_qs_slots[i].seq);
		any |= atomic_load(&il_qs_slots[i].online) && (int)i + 1 != il_qs_self;
	}
	if (!any)
		return 0;
	atomic_fetch_add(&waits, 1);
	uint64_t deadline = now_us() + timeout_us;
	for (unsigned i = 0; i < IL_QS_MAX; i++) {
		if ((int)i + 1 == il_qs_self)
			continue;
		while (atomic_load(&il_qs_slots[i].online) &&
		       atomic_load(&il_qs_slots[i].seq) == snap[i]) {
			if (now_us() > deadline) {
				atomic_fetch_add(&timeouts, 1);
				return -1;
			}
			sched_yield();
		}
	}
	return 0;
}

uint64_t il_qs_waits(void)
{
	return atomic_load(&waits);
}

uint64_t il_qs_timeouts(void)
{
	return atomic_load(&timeouts);
}

/* The interposed munmap: the binaries that link this file export it
 * (-Wl,--export-dynamic-symbol=munmap), so the PMDs EAL loads at run time
 * bind to it. A poller unmapping for itself needs no grace period. */
int munmap(void *addr, size_t len)
{
	if (!il_qs_self)
		il_qs_wait(200000);
	return (int)syscall(SYS_munmap, addr, len);
}
