/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Group membership as the control process knows it: per group, the live
 * receivers (from JOIN/LEAVE forwarded by the data plane), when each was
 * last heard from, and the group's stability state.
 *
 * Today a receiver is live from its JOIN to its LEAVE. Later work adds
 * views (view_id is already counted), heartbeats timing out into
 * suspicion and eviction (last_heard_ns is already kept) and the
 * (P, U) view change; the stability rule does not change: the watermark
 * is the minimum over the current view.
 */
#ifndef INTERLINK_CONTROL_MEMBERSHIP_H
#define INTERLINK_CONTROL_MEMBERSHIP_H

#include <stdbool.h>
#include <stdint.h>

#include <interlink/chan.h>

#include "stability.h"

#define IL_MSHIP_GROUPS 65536u

struct il_member {
	uint32_t id;
	uint64_t joined_ns;
	uint64_t last_heard_ns;
};

struct il_mgroup {
	uint16_t id;
	uint64_t view_id; /* bumps on every change of the live set */
	unsigned n, cap;
	struct il_member *m;
	struct il_stab stab;
	uint64_t published; /* watermark last handed to the data plane */
	bool pending;       /* on the pending list */
};

struct il_mship_stats {
	uint64_t joins, leaves, heartbeats, acks;
	uint64_t acks_stale, acks_unknown;
	uint64_t wrong_epoch; /* messages of another epoch, ignored */
	uint64_t unknown_member; /* LEAVE/HEARTBEAT from a non-member */
	uint64_t published;   /* watermark messages handed out */
	uint64_t nomem;
};

struct il_mship {
	uint32_t epoch;
	struct il_mgroup **by_id; /* IL_MSHIP_GROUPS entries */
	uint16_t *groups;         /* ids of allocated groups */
	unsigned n_groups;
	uint16_t *pending;        /* groups whose watermark may need publishing */
	unsigned n_pending;
	struct il_mship_stats st;
};

int il_mship_init(struct il_mship *m, uint32_t epoch);
void il_mship_free(struct il_mship *m);
/* Data plane restarted or changed epoch: forget everything. */
void il_mship_reset(struct il_mship *m, uint32_t epoch);

/* Apply one up-ring message (JOIN, LEAVE, HEARTBEAT, ACK); other types
 * return -1 untouched. now_ns stamps liveness. Returns 0 applied, 1
 * ignored (counted). */
int il_mship_apply(struct il_mship *m, const struct il_cmsg *msg, uint64_t now_ns);

/* Fill out[] with IL_CM_WATERMARK messages for groups whose watermark
 * moved past what was published; returns the count (<= max). Call
 * il_mship_published() with the messages the ring accepted: the others
 * stay pending and come out again next time, with the then-latest value
 * (a full ring coalesces updates rather than losing them). */
unsigned il_mship_collect(struct il_mship *m, struct il_cmsg *out, unsigned max);
void il_mship_published(struct il_mship *m, const struct il_cmsg *msgs, unsigned n);

const struct il_mgroup *il_mship_group(const struct il_mship *m, uint16_t id);

#endif
