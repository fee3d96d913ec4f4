/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Stability watermark of one group: the minimum, over the group's live
 * receivers, of their cumulative ACKs. Every global sequence number below
 * the watermark is held by every live receiver, so the appliance may
 * forget it and senders may count it as delivered (uniform total order).
 *
 * Rules (docs/control.md, "Watermark"):
 *  - a receiver's cumulative ACK never decreases (an older ACK arriving
 *    late is ignored);
 *  - the watermark never decreases within an epoch: a receiver that joins
 *    starts at max(its start seq, current watermark), and a recomputed
 *    minimum below the watermark (impossible while the above holds) is
 *    not published;
 *  - a receiver leaving (or, later, evicted by the failure detector) is
 *    no longer in the minimum, which may then advance;
 *  - with no live receiver the watermark stays where it is: the control
 *    process does not know how far the sequencer has stamped.
 *
 * Pure logic, no I/O: the data plane may link it too.
 */
#ifndef INTERLINK_CONTROL_STABILITY_H
#define INTERLINK_CONTROL_STABILITY_H

#include <stdbool.h>
#include <stdint.h>

struct il_stab_rcv {
	uint32_t id;
	uint64_t cum; /* exclusive: holds every seq below cum */
};

struct il_stab {
	uint16_t group;
	uint32_t epoch;
	uint64_t watermark; /* exclusive, like cum */
	unsigned n, cap;
	struct il_stab_rcv *rcv; /* live receivers, unordered */
	/* Counters. */
	uint64_t acks;       /* accepted */
	uint64_t acks_stale; /* lower than what the receiver already acked */
	uint64_t acks_unknown; /* from a receiver not in the live set */
	uint64_t advances;   /* times the watermark moved */
};

void il_stab_init(struct il_stab *s, uint16_t group, uint32_t epoch);
void il_stab_free(struct il_stab *s);
/* Forget every receiver and start a new epoch at watermark 0. */
void il_stab_reset(struct il_stab *s, uint32_t epoch);

/* Returns 0 added, 1 already live (no change), -1 out of memory. */
int il_stab_add(struct il_stab *s, uint32_t id, uint64_t start_seq);
/* Returns true if the receiver was live. */
bool il_stab_remove(struct il_stab *s, uint32_t id);
/* Returns 0 accepted, 1 stale (ignored), -1 unknown receiver (ignored). */
int il_stab_ack(struct il_stab *s, uint32_t id, uint64_t cum);
/* The receiver's cumulative ACK, or false if not live. */
bool il_stab_get(const struct il_stab *s, uint32_t id, uint64_t *cum);

/* Recompute the minimum; returns true if the watermark advanced. Cost is
 * O(live receivers): call it once per batch of ACKs, not per ACK. */
bool il_stab_update(struct il_stab *s);

#endif
