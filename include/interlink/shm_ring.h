/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The single-producer/single-consumer ring that two processes share
 * through a mapped file: the control channel (include/interlink/chan.h)
 * and the FT-TCP rings (include/interlink/ftcp_ring.h) are built on it.
 * No DPDK, no liburing, no syscalls in here.
 *
 * In shared memory a ring is a 256-byte header and `bytes` bytes of data
 * (a power of two). Indices are free-running 64-bit byte counts: head is
 * what the producer published, tail what the consumer released; the fill
 * level is head - tail. Each word has one writer; the producer's and the
 * consumer's words sit 128 bytes apart (x86 fetches cache lines in
 * adjacent pairs, so 64 bytes of separation would still ping-pong).
 *
 * Each process keeps a small private view of its end (struct il_shm_prod
 * or il_shm_cons): its own index, and the other end's index as last seen,
 * reloaded only when the cached value says the ring is full (producer) or
 * empty (consumer), so the other side's cache line moves about once per
 * burst rather than once per message.
 *
 * Two ways to fill a ring, one per ring:
 *  - fixed-size messages of `unit` bytes (a power of two dividing
 *    `bytes`): il_shm_send() / il_shm_recv() copy bursts of them;
 *  - records of any length, a multiple of IL_SHM_REC_ALIGN, whose first
 *    32-bit word is that length (header included): il_shm_reserve() hands
 *    out contiguous room in place (a record never wraps: the end of the
 *    ring is filled by a pad word and the record starts at offset 0),
 *    il_shm_publish() makes what was reserved visible, il_shm_rec_next()
 *    and il_shm_release() read it in place on the other side.
 *
 * Sleep and wake-up (one protocol for every ring): a consumer that found
 * the ring empty may announce that it is going to sleep
 * (il_shm_sleep_prepare(): sleep_gen becomes odd), then must look at the
 * ring again; the producer, after publishing, checks whether a sleep was
 * announced that it has not answered yet (il_shm_wake_due()) and if so
 * rings the consumer's doorbell (an eventfd, a datagram: the caller's
 * business). A full fence on each side between its own store and its load
 * of the other's word means at least one of them sees the other: no lost
 * wake-up. Answering a sleep is recorded in the producer's own word
 * (woke_gen), so the producer never writes the consumer's cache line and
 * rings at most once per announced sleep. docs/architecture.md explains
 * why this protocol was kept.
 */
#ifndef INTERLINK_SHM_RING_H
#define INTERLINK_SHM_RING_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define IL_SHM_GUARD 128u

/* Record rings: lengths are multiples of this; a length word with
 * IL_SHM_REC_PAD set is the ring's own padding up to its end. */
#define IL_SHM_REC_ALIGN 8u
#define IL_SHM_REC_PAD 0x80000000u

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "shared-memory atomics must be lock-free");

/* A ring as it lies in the shared file. */
struct il_shm_ring {
	struct {
		alignas(IL_SHM_GUARD) _Atomic uint64_t head; /* bytes published */
		_Atomic uint64_t drops;    /* enqueues refused: the ring was full */
		_Atomic uint64_t wakeups;  /* announced sleeps answered with a doorbell */
		_Atomic uint64_t woke_gen; /* the last sleep_gen answered */
	} prod;
	struct {
		alignas(IL_SHM_GUARD) _Atomic uint64_t tail; /* bytes released */
		_Atomic uint64_t sleep_gen; /* odd: the consumer sleeps or is about to */
	} cons;
	alignas(IL_SHM_GUARD) unsigned char data[];
};

_Static_assert(sizeof(struct il_shm_ring) == 2 * IL_SHM_GUARD, "ring header layout");

/* One process's end of a ring. */
struct il_shm_prod {
	struct il_shm_ring *r;
	uint64_t head;        /* own index: reserved records included */
	uint64_t cached_tail; /* the consumer's index when last looked */
	uint32_t size;        /* data bytes, power of two */
	uint32_t shift;       /* log2(unit) */
};

struct il_shm_cons {
	struct il_shm_ring *r;
	uint64_t tail;        /* own index: records taken but not released included */
	uint64_t cached_head; /* the producer's index when last looked */
	uint32_t size;
	uint32_t shift;
};

/* Counters and indices of one ring (either side may read them). */
struct il_shm_ring_stats {
	uint64_t head, tail; /* bytes */
	uint64_t drops, wakeups;
	uint64_t sleeps;     /* sleep announcements, withdrawn or not */
};

/* Take the producer or consumer end of a ring of `bytes` data bytes made
 * of `unit`-byte messages (IL_SHM_REC_ALIGN for a record ring); both are
 * powers of two. The producer carries on from the published head. The
 * consumer carries on from the released tail, or with discard drops what
 * is queued (it was meant for a previous incarnation); either way a sleep
 * its predecessor announced and never ended is ended. */
void il_shm_prod_attach(struct il_shm_prod *p, struct il_shm_ring *r, uint32_t bytes,
			uint32_t unit);
void il_shm_cons_attach(struct il_shm_cons *c, struct il_shm_ring *r, uint32_t bytes,
			uint32_t unit, bool discard);

void il_shm_ring_stats(const struct il_shm_ring *r, struct il_shm_ring_stats *st);

/* Consumer: announce a sleep, then look again. True: the ring is empty and
 * the producer will ring the doorbell after its next publish; block. False:
 * something arrived meanwhile (the announcement is withdrawn); drain again.
 * Call it with everything taken released. After waking, for whatever
 * reason, call il_shm_sleep_end(). */
bool il_shm_sleep_prepare(struct il_shm_cons *c);
void il_shm_sleep_end(struct il_shm_cons *c);

/* ---- fast path --------------------------------------------------------- */

static inline void il_shm_count_drops(struct il_shm_prod *p, uint64_t n)
{
	/* Single writer: a relaxed load and store, no read-modify-write. */
	atomic_store_explicit(&p->r->prod.drops,
			      atomic_load_explicit(&p->r->prod.drops, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

/* Producer, after publishing: true when the consumer announced a sleep
 * this producer has not answered yet; the caller then rings its doorbell.
 * One fence per call: call it once per burst, not per message. */
static inline bool il_shm_wake_due(struct il_shm_prod *p)
{
	struct il_shm_ring *r = p->r;
	uint64_t g;

	/* Store(head) before load(sleep_gen), against the consumer's
	 * store(sleep_gen) before load(head): a release store followed by
	 * a load may be reordered, a full fence forbids it. */
	atomic_thread_fence(memory_order_seq_cst);
	g = atomic_load_explicit(&r->cons.sleep_gen, memory_order_relaxed);
	if (!(g & 1) || g == atomic_load_explicit(&r->prod.woke_gen, memory_order_relaxed))
		return false;
	atomic_store_explicit(&r->prod.woke_gen, g, memory_order_relaxed);
	atomic_store_explicit(&r->prod.wakeups,
			      atomic_load_explicit(&r->prod.wakeups, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	return true;
}

/* Free room in messages (producer) and messages waiting (consumer). */
static inline unsigned il_shm_free(const struct il_shm_prod *p)
{
	uint64_t tail = atomic_load_explicit(&p->r->cons.tail, memory_order_acquire);

	return (unsigned)((p->size - (p->head - tail)) >> p->shift);
}

static inline unsigned il_shm_pending(const struct il_shm_cons *c)
{
	uint64_t n = atomic_load_explicit(&c->r->prod.head, memory_order_acquire) - c->tail;

	return n > c->size ? 0 : (unsigned)(n >> c->shift);
}

/* Enqueue up to n fixed-size messages, in order, and publish them.
 * Returns how many went in (the first ones); the rest are counted as
 * drops. */
static inline unsigned il_shm_send(struct il_shm_prod *p, const void *msgs, unsigned n)
{
	struct il_shm_ring *r = p->r;
	uint64_t want = (uint64_t)n << p->shift;
	uint64_t room = p->size - (p->head - p->cached_tail);
	uint64_t bytes;
	uint32_t off, part;

	if (room < want) {
		/* Acquire: the consumer finished reading the room it freed. */
		p->cached_tail = atomic_load_explicit(&r->cons.tail, memory_order_acquire);
		room = p->size - (p->head - p->cached_tail);
	}
	bytes = want < room ? want : room;
	if (bytes > 0) {
		off = (uint32_t)(p->head & (p->size - 1));
		part = p->size - off < bytes ? p->size - off : (uint32_t)bytes;
		memcpy(r->data + off, msgs, part);
		if (bytes > part)
			memcpy(r->data, (const unsigned char *)msgs + part, bytes - part);
		p->head += bytes;
		/* Release: the data is written before the consumer can see it. */
		atomic_store_explicit(&r->prod.head, p->head, memory_order_release);
	}
	if (bytes < want)
		il_shm_count_drops(p, (want - bytes) >> p->shift);
	return (unsigned)(bytes >> p->shift);
}

/* Dequeue up to n fixed-size messages and release their room. */
static inline unsigned il_shm_recv(struct il_shm_cons *c, void *msgs, unsigned n)
{
	struct il_shm_ring *r = c->r;
	uint64_t want = (uint64_t)n << c->shift;
	uint64_t avail = c->cached_head - c->tail;
	uint64_t bytes;
	uint32_t off, part;

	if (avail < want) {
		/* Acquire: pairs with the producer's release of head. */
		c->cached_head = atomic_load_explicit(&r->prod.head, memory_order_acquire);
		avail = c->cached_head - c->tail;
		if (avail > c->size) {
			/* Only a corrupt or foreign head gets here: never read
			 * outside the ring; resynchronise at the producer. */
			c->tail = c->cached_head;
			atomic_store_explicit(&r->cons.tail, c->tail, memory_order_release);
			return 0;
		}
	}
	bytes = want < avail ? want : avail & ~(((uint64_t)1 << c->shift) - 1);
	if (bytes == 0)
		return 0;
	off = (uint32_t)(c->tail & (c->size - 1));
	part = c->size - off < bytes ? c->size - off : (uint32_t)bytes;
	memcpy(msgs, r->data + off, part);
	if (bytes > part)
		memcpy((unsigned char *)msgs + part, r->data, bytes - part);
	c->tail += bytes;
	/* Release: the reads are done before the producer may overwrite. */
	atomic_store_explicit(&r->cons.tail, c->tail, memory_order_release);
	return (unsigned)(bytes >> c->shift);
}

/* Record ring, producer: contiguous room for a record of len bytes (a
 * multiple of IL_SHM_REC_ALIGN, at most the ring's size), or NULL when the
 * ring is full (counted as a drop). The caller writes the record, length
 * word first, and publishes it with the rest of its burst. */
static inline void *il_shm_reserve(struct il_shm_prod *p, uint32_t len)
{
	uint32_t off = (uint32_t)(p->head & (p->size - 1));
	uint32_t room_end = p->size - off, need = len;

	if (room_end < len)
		need += room_end; /* the end is padded, the record starts at 0 */
	if (p->head + need - p->cached_tail > p->size) {
		p->cached_tail = atomic_load_explicit(&p->r->cons.tail, memory_order_acquire);
		if (p->head + need - p->cached_tail > p->size) {
			il_shm_count_drops(p, 1);
			return NULL;
		}
	}
	if (room_end < len) {
		uint32_t pad = IL_SHM_REC_PAD | room_end;

		memcpy(p->r->data + off, &pad, sizeof(pad));
		p->head += room_end;
		off = 0;
	}
	p->head += len;
	return p->r->data + off;
}

/* Make every record reserved so far visible to the consumer. */
static inline void il_shm_publish(struct il_shm_prod *p)
{
	atomic_store_explicit(&p->r->prod.head, p->head, memory_order_release);
}

/* Record ring, consumer: the next record in place. Returns 1 with *rec and
 * *len set (the record stays valid until il_shm_release()), 0 when the ring
 * is empty, -1 when a length word cannot be right (a corrupt or foreign
 * producer): everything up to the producer's head is then skipped and *len
 * is the bad word. *rec is NULL unless 1 is returned. */
static inline int il_shm_rec_next(struct il_shm_cons *c, const void **rec, uint32_t *len)
{
	uint32_t off, room_end, l;
	uint64_t avail;

	for (;;) {
		if (c->tail == c->cached_head) {
			c->cached_head = atomic_load_explicit(&c->r->prod.head,
							      memory_order_acquire);
			if (c->tail == c->cached_head) {
				*rec = NULL;
				return 0;
			}
		}
		off = (uint32_t)(c->tail & (c->size - 1));
		room_end = c->size - off;
		avail = c->cached_head - c->tail;
		memcpy(&l, c->r->data + off, sizeof(l));
		/* A record lies within what was published and before the end
		 * (the pad word, with its high bit, fails the first test). */
		if (l <= room_end && l <= avail && l >= sizeof(l) && l % IL_SHM_REC_ALIGN == 0) {
			*rec = c->r->data + off;
			*len = l;
			c->tail += l;
			return 1;
		}
		if (l == (IL_SHM_REC_PAD | room_end) && avail >= room_end) {
			c->tail += room_end;
			continue;
		}
		*rec = NULL;
		*len = l;
		c->tail = c->cached_head;
		return -1;
	}
}

/* Give the room of every record taken back to the producer. */
static inline void il_shm_release(struct il_shm_cons *c)
{
	atomic_store_explicit(&c->r->cons.tail, c->tail, memory_order_release);
}

#endif
