/* SPDX-License-Identifier: BSD-3-Clause
 * The shared-memory ring's slow path: attaching an end, the consumer's
 * sleep announcement, counters. The fast path is inline in the header.
 */
#include <interlink/shm_ring.h>

static uint32_t log2_u32(uint32_t v)
{
	return (uint32_t)__builtin_ctz(v);
}

void il_shm_prod_attach(struct il_shm_prod *p, struct il_shm_ring *r, uint32_t bytes,
			uint32_t unit)
{
	p->r = r;
	p->size = bytes;
	p->shift = log2_u32(unit);
	p->head = atomic_load_explicit(&r->prod.head, memory_order_relaxed);
	p->cached_tail = atomic_load_explicit(&r->cons.tail, memory_order_acquire);
}

void il_shm_cons_attach(struct il_shm_cons *c, struct il_shm_ring *r, uint32_t bytes,
			uint32_t unit, bool discard)
{
	uint64_t g = atomic_load_explicit(&r->cons.sleep_gen, memory_order_relaxed);

	c->r = r;
	c->size = bytes;
	c->shift = log2_u32(unit);
	c->cached_head = atomic_load_explicit(&r->prod.head, memory_order_acquire);
	c->tail = atomic_load_explicit(&r->cons.tail, memory_order_relaxed);
	if (discard || c->cached_head - c->tail > bytes) {
		c->tail = c->cached_head;
		atomic_store_explicit(&r->cons.tail, c->tail, memory_order_release);
	}
	/* A predecessor that died asleep left the generation odd: our first
	 * announcement would make it even and no wake-up would ever come. */
	if (g & 1)
		atomic_store_explicit(&r->cons.sleep_gen, g + 1, memory_order_relaxed);
}

void il_shm_ring_stats(const struct il_shm_ring *r, struct il_shm_ring_stats *st)
{
	st->head = atomic_load_explicit(&r->prod.head, memory_order_relaxed);
	st->tail = atomic_load_explicit(&r->cons.tail, memory_order_relaxed);
	st->drops = atomic_load_explicit(&r->prod.drops, memory_order_relaxed);
	st->wakeups = atomic_load_explicit(&r->prod.wakeups, memory_order_relaxed);
	/* Every announcement makes the generation odd once. */
	st->sleeps = (atomic_load_explicit(&r->cons.sleep_gen, memory_order_relaxed) + 1) / 2;
}

bool il_shm_sleep_prepare(struct il_shm_cons *c)
{
	struct il_shm_ring *r = c->r;
	uint64_t g = atomic_load_explicit(&r->cons.sleep_gen, memory_order_relaxed);
	uint64_t head;

	if (g & 1)
		g++; /* an announcement never ended: end it first */
	atomic_store_explicit(&r->cons.sleep_gen, g + 1, memory_order_relaxed);
	/* The other half of the fence pair in il_shm_wake_due(). */
	atomic_thread_fence(memory_order_seq_cst);
	head = atomic_load_explicit(&r->prod.head, memory_order_relaxed);
	if (head != c->tail) {
		atomic_store_explicit(&r->cons.sleep_gen, g + 2, memory_order_relaxed);
		return false;
	}
	return true;
}

void il_shm_sleep_end(struct il_shm_cons *c)
{
	uint64_t g = atomic_load_explicit(&c->r->cons.sleep_gen, memory_order_relaxed);

	if (g & 1)
		atomic_store_explicit(&c->r->cons.sleep_gen, g + 1, memory_order_relaxed);
}
