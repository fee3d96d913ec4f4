/* SPDX-License-Identifier: BSD-3-Clause
 * The pure parts of libinterlink: no sockets, no clock of their own, so
 * the unit tests drive them directly (tests/unit/endpoint/).
 *
 *   ep_q      deferred messages as DATA records, packed into frames
 *   ep_credit the sender's window: what CREDIT grants allow
 *   ep_rxw    receive window by global sequence: gap detection, NAK timing
 *   ep_ack    when a cumulative ACK is due (every K messages or T us)
 */
#ifndef IL_EP_CORE_H
#define IL_EP_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <interlink/tbucket.h>

/* ---- deferred messages ------------------------------------------------ */
/* Records exactly as they go on the wire (u16 len, u16 flags, payload), so
 * packing is one memcpy of a span from the head. */
struct ep_q {
	uint8_t *buf;
	size_t head, tail, cap, max;
	uint64_t n; /* messages queued */
};

void ep_q_init(struct ep_q *q, size_t max_bytes);
void ep_q_free(struct ep_q *q);
/* 0, or -EAGAIN when the queue would exceed its maximum. */
int ep_q_push(struct ep_q *q, const void *msg, uint16_t len);
/* Records already in wire form (bypasses the maximum: what was sent is
 * bounded by the credit window). */
int ep_q_append(struct ep_q *q, const uint8_t *recs, size_t bytes, uint64_t n);
/* The longest run of whole records at the head that fits `room` bytes and
 * at most max_msgs messages: its bytes (0: none), *n its messages. */
size_t ep_q_span(const struct ep_q *q, size_t room, uint64_t max_msgs, uint16_t *n);
/* The first record (NULL for a queue that never held one: no arithmetic
 * on a NULL pointer, which C leaves undefined even with an offset of 0). */
static inline const uint8_t *ep_q_head(const struct ep_q *q)
{
	return q->buf != NULL ? q->buf + q->head : NULL;
}
void ep_q_pop(struct ep_q *q, size_t bytes, uint16_t n);

/* Go-back-N: `sent` holds the records of sender_seq *sent_base .. *next - 1
 * (sent, not known stable); `from` is where the appliance wants us to go
 * on. The records from `from` on move, in order, to the front of the
 * deferred queue `q`, `sent` keeps the ones before, *next becomes `from`.
 * Returns the messages moved (0: nothing to do, `from` outside the range;
 * -ENOMEM). */
int64_t ep_go_back(struct ep_q *q, struct ep_q *sent, uint64_t sent_base, uint64_t *next,
		   uint64_t from);

/* ---- credit window ----------------------------------------------------- */
struct ep_credit {
	uint64_t next;   /* next sender_seq to use (starts at 1) */
	uint64_t limit;  /* may send sender_seq below this */
	uint32_t window; /* the window behind the last grant */
	bool seen;       /* a CREDIT arrived */
	bool wait;       /* nothing may go before the first CREDIT */
};

void ep_credit_init(struct ep_credit *c, bool wait);
/* Messages that may go now. */
uint64_t ep_credit_room(const struct ep_credit *c);
/* A grant: limits only grow (a reordered older CREDIT changes nothing).
 * One that would make stable more than we ever sent (limit - window >
 * next) was not meant for us (a previous incarnation's) and is refused:
 * returns false. */
bool ep_credit_grant(struct ep_credit *c, uint64_t limit, uint32_t window);
/* Our messages not yet known stable: the grant says limit - window are. */
uint64_t ep_credit_unstable(const struct ep_credit *c);

/* ---- rate pacing (WAN groups: CREDIT's rate_kbps) ---------------------- */
/* The project's token bucket in bytes, refilled at rate_kbps (1 kbit/s =
 * 125 B/s), on a clock in nanoseconds. Depth: 5 ms at the rate, at least
 * min_depth (two frames, so a frame of any size can always go eventually).
 * It starts full; rate 0: no limit. */
struct ep_pace {
	uint32_t rate_kbps;
	struct il_tbucket tb;
	uint64_t waited;      /* refusals: times a frame had to wait for tokens */
};

#define EP_PACE_DEPTH_NS 5000000ull

void ep_pace_init(struct ep_pace *p);
/* A new rate (from a CREDIT): tokens carried over, capped at the new depth. */
void ep_pace_set(struct ep_pace *p, uint32_t rate_kbps, size_t min_depth, uint64_t now);
/* May `bytes` go now? If so they are taken. */
bool ep_pace_take(struct ep_pace *p, size_t bytes, uint64_t now);
/* Nanoseconds until `bytes` may go (0: now). */
uint64_t ep_pace_wait_ns(const struct ep_pace *p, size_t bytes, uint64_t now);

/* ---- receive window ---------------------------------------------------- */
enum { EP_S_EMPTY = 0, EP_S_MSG, EP_S_HOLE };

struct ep_frame; /* a received datagram, shared by the messages in it */

struct ep_slot {
	struct ep_frame *fr;
	const uint8_t *data;
	uint64_t sender_seq;
	uint32_t sender;
	uint16_t len;
	uint8_t state;
	bool fifo_start; /* its sender's new incarnation starts here (IL_F_FIFO_START) */
	uint8_t via;     /* IL_EP_VIA_*: how its frame reached us */
	uint64_t rx_ns;  /* when */
};

/* A run of missing sequences with its own NAK timers: NAKed `delay`
 * after it was found, then every `retry` while any of it is missing. */
#define EP_GAPS 64
struct ep_gap {
	uint64_t first, last; /* inclusive */
	uint64_t disc_ns;     /* found missing */
	uint64_t nak_ns;      /* last NAKed; 0: not yet */
};

struct ep_rxw {
	struct ep_slot *s;
	uint32_t mask;
	uint64_t uto; /* next to U-deliver */
	uint64_t po;  /* next to P-deliver */
	uint64_t hi;  /* one past the highest sequence known to exist */
	uint64_t stable;
	/* gaps: the runs found missing below `scanned`, in sequence order */
	uint64_t scanned;
	unsigned ngap;
	struct ep_gap gap[EP_GAPS];
};

int ep_rxw_init(struct ep_rxw *w, uint32_t size);
void ep_rxw_free(struct ep_rxw *w);
/* Restart at `start` (a view's start): everything held is forgotten; the
 * caller releases frames first (ep_rxw_slot over [uto, hi)). */
void ep_rxw_reset(struct ep_rxw *w, uint64_t start);
static inline struct ep_slot *ep_rxw_slot(struct ep_rxw *w, uint64_t g)
{
	return &w->s[g & w->mask];
}
/* Where a message with global sequence g goes: NULL when it is old
 * (already P-delivered, or a duplicate: *dup set) or beyond the window
 * (*overflow set). */
struct ep_slot *ep_rxw_place(struct ep_rxw *w, uint64_t g, bool *dup, bool *overflow);
/* The group's next sequence (from DATA or STABLE): a tail we miss. */
static inline void ep_rxw_seen(struct ep_rxw *w, uint64_t next)
{
	if (next > w->hi)
		w->hi = next;
}
/* Messages that fit before the window is full (ACK buffer_free). */
uint64_t ep_rxw_free_msgs(const struct ep_rxw *w);
/* Whether to NAK now, and which range. Every gap has its own timers
 * (Ricochet's: the first NAK delay_ns after the gap was found, then every
 * retry_ns while any of it is missing), so gaps behind the first are not
 * held up by it. A gap is found by the first call after a later sequence
 * arrived (or a STABLE told of a lost tail). The range is a run of
 * missing sequences, at most max_span long; call again until false, each
 * due run is reported once per call round. */
bool ep_rxw_nak_due(struct ep_rxw *w, uint64_t now, uint64_t delay_ns, uint64_t retry_ns,
		    uint64_t max_span, uint64_t *first, uint64_t *last);
/* Nanoseconds until a NAK is due (0: now; UINT64_MAX: no gap known). */
uint64_t ep_rxw_nak_wait(const struct ep_rxw *w, uint64_t now, uint64_t delay_ns,
			 uint64_t retry_ns);
/* UNAVAIL [first, last]: those sequences will never come; they become
 * holes that delivery skips. Returns how many were marked. */
uint64_t ep_rxw_unavail(struct ep_rxw *w, uint64_t first, uint64_t last);

/* ---- ACK batching ------------------------------------------------------ */
struct ep_ack {
	uint64_t acked;   /* cumulative value last sent */
	uint64_t last_ns; /* when */
	bool sent;        /* one went since the view started */
};

/* Due after `every` new messages, or after `us` with something new, or
 * every `idle_ns` regardless (so buffer_free reaches the control process). */
bool ep_ack_due(const struct ep_ack *a, uint64_t po, uint64_t now, unsigned every,
		uint64_t interval_ns, uint64_t idle_ns);
static inline void ep_ack_sent(struct ep_ack *a, uint64_t po, uint64_t now)
{
	a->acked = po;
	a->last_ns = now;
	a->sent = true;
}

#endif
