/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Group membership as the control process knows it: per group, the live
 * receivers (from JOIN/LEAVE forwarded by the data plane), when each was
 * last heard from, and the group's stability state.
 *
 * A member is in the view from its JOIN until its LEAVE or its exclusion.
 * Two failure detectors (thesis 2.6): a member not heard from (HEARTBEAT,
 * ACK or JOIN) for suspect_ns is suspected, which costs nothing but a
 * counter and a flag; one not heard from for exclude_ns is excluded,
 * which is a view change. Every change of the member set bumps view_id
 * and queues a VIEW for the data plane; the watermark is the minimum over
 * the receivers of the current view. A JOIN with a new incarnation from
 * a member (it restarted, or it was excluded wrongly and rejoins) starts
 * it afresh at its join point.
 */
#ifndef INTERLINK_CONTROL_MEMBERSHIP_H
#define INTERLINK_CONTROL_MEMBERSHIP_H

#include <stdbool.h>
#include <stdint.h>

#include <interlink/chan.h>
#include <interlink/tfrc.h>

#include "stability.h"

#define IL_MSHIP_GROUPS 65536u

struct il_member {
	uint32_t id;
	uint32_t roles;       /* IL_ROLE_*; a JOIN without roles is a receiver */
	uint32_t incarnation;
	uint32_t buffer_free; /* from its last ACK; UINT32_MAX: no limit */
	bool reported;        /* an ACK (with buffer_free) has come */
	bool fresh;           /* joined since the last VIEW was handed out */
	bool suspected;
	uint64_t joined_ns;
	uint64_t last_heard_ns;
	/* WAN groups (thesis ch. 4): this receiver's smoothed RTT, from the
	 * data plane's samples, and the loss-event rate it reports. */
	struct il_tfrc_rtt rtt;
	uint32_t loss_ppm;
};

struct il_mgroup {
	uint16_t id;
	uint64_t view_id; /* bumps on every change of the live set */
	unsigned n, cap;
	struct il_member *m;
	struct il_stab stab;
	uint64_t published; /* watermark last handed to the data plane */
	bool pending;       /* on the pending list */
	/* Views and credits for the data plane (il_mship_collect_views). */
	bool view_due;
	uint16_t view_reason;    /* enum il_view_reason of the latest change */
	uint64_t view_start;     /* min join point of the view's joiners; 0: none */
	uint32_t window;         /* current credit window */
	uint32_t window_sent;    /* last one handed out; UINT32_MAX: never */
	/* WAN groups: the TCP-friendly rate (eq. 4.1, slowest receiver). */
	uint32_t s_bytes;        /* packet size s; 0: not a WAN group (yet) */
	uint32_t rate_kbps;      /* current rate; 0: no limit */
	uint32_t rate_sent;      /* last one handed out */
	/* TFRC slow start (4.3.4) while no receiver reports a loss event. */
	bool slow_start;
	uint32_t ss_kbps;        /* its current rate */
	uint64_t ss_at_ns;       /* when it last doubled (or started) */
	uint64_t ss_wm;          /* the watermark then */
	uint32_t final_epoch;    /* final watermark of a dead data plane ... */
	uint64_t final_wm;
	bool final_due;          /* ... still to hand out */
	/* A pair (cfg.commit_views): a receiver left the minimum in a view
	 * change not yet handed out (removal_due) or handed out but not yet
	 * committed to etcd (commit_wait); the watermark is held back until it
	 * is. Joiners hold nothing back: counting them only lowers it. */
	bool removal_due, commit_wait;
	/* A member retried its JOIN though the view naming it went down, or
	 * an excluded one is heard: the VIEW was lost on its way. The view in
	 * force goes again, unchanged (IL_CMF_REPEAT), not within
	 * IL_MSHIP_REPEAT_NS of the group's last view or repeat. */
	bool view_sent;          /* a view of this group went down */
	bool repeat_due;
	uint64_t sent_ns;        /* when the last view (or repeat) went */
};

#define IL_MSHIP_REPEAT_NS 20000000ull

struct il_mship_cfg {
	uint64_t suspect_ns; /* fast detector: suspect after this silence (0: off) */
	uint64_t exclude_ns; /* slow detector: exclude after this silence (0: off) */
	uint32_t window;     /* credit window per sender (0: no flow control) */
	/* A pair (docs/ha.md): every view change is committed to etcd before
	 * its VIEW goes down, and a group's watermark is not published while
	 * a receiver's removal waits for that (so no watermark ever counts
	 * without a receiver that the committed view still has). */
	bool commit_views;
};

struct il_mship_stats {
	uint64_t joins, leaves, heartbeats, acks;
	uint64_t acks_stale, acks_unknown;
	uint64_t wrong_epoch; /* messages of another epoch, ignored */
	uint64_t unknown_member; /* LEAVE/HEARTBEAT from a non-member */
	uint64_t published;   /* watermark messages handed out */
	uint64_t nomem;
	uint64_t suspicions, false_suspicions, exclusions, rejoins;
	uint64_t views, credits, resyncs, epochs;
	uint64_t view_repeats; /* views sent again (a retried JOIN, an excluded member heard) */
	uint32_t last_excluded;       /* member id of the latest exclusion */
	uint64_t last_excluded_quiet; /* how long it had been silent, ns */
};

struct il_mship {
	uint32_t epoch;
	struct il_mship_cfg cfg;
	struct il_mgroup **by_id; /* IL_MSHIP_GROUPS entries */
	uint16_t *groups;         /* ids of allocated groups */
	unsigned n_groups;
	uint16_t *pending;        /* groups whose watermark may need publishing */
	unsigned n_pending;
	bool views_due;           /* some group has a view or final watermark due */
	struct il_mship_stats st;
};

int il_mship_init(struct il_mship *m, uint32_t epoch);
void il_mship_free(struct il_mship *m);
/* Forget everything (a data plane this process has not talked to). */
void il_mship_reset(struct il_mship *m, uint32_t epoch);
/* The data plane restarted with a new epoch: keep the members, hand out
 * the final watermark of the old epoch (every live receiver holds what is
 * below it), restart stability at 0 and announce a new view starting at
 * global sequence 1. */
void il_mship_new_epoch(struct il_mship *m, uint32_t epoch, uint64_t now_ns);

/* Failure detection; call on every housekeeping tick, and only while the
 * data plane is alive (members cannot be heard through a dead one). */
void il_mship_tick(struct il_mship *m, uint64_t now_ns);
/* The data plane was silent (down or stalled) for pause_ns: that much of
 * each member's silence is not held against it. */
void il_mship_grace(struct il_mship *m, uint64_t pause_ns, uint64_t now_ns);

/* Apply one up-ring message (JOIN, LEAVE, HEARTBEAT, ACK, RESYNC); other types
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

/* VIEW (+ VIEW_MEMBERS), CREDIT and final-watermark messages that are
 * due, as many as fit in max (a view is never cut); they count as handed
 * out, so pass the free room of the down ring (the only producer). */
unsigned il_mship_collect_views(struct il_mship *m, struct il_cmsg *out, unsigned max,
				uint64_t now_ns);

const struct il_mgroup *il_mship_group(const struct il_mship *m, uint16_t id);

/* A pair (docs/ha.md): the views handed out by il_mship_collect_views
 * since the last call are committed; their groups' watermarks may go. */
void il_mship_views_committed(struct il_mship *m);

/* A pair's takeover: epoch `epoch` starts with the members of the last
 * committed views of `prev` (less the receivers that did not report),
 * every receiver at 0; each group's first view of the new epoch and the
 * final watermark of `prev` (its cut) are handed out together. */
struct il_mship_seed {
	uint16_t group;
	uint64_t view_id;   /* of the committed view it continues */
	bool has_cut;
	uint64_t cut;       /* the final watermark of prev in this group */
	unsigned n;
	const struct il_mship_seed_member {
		uint32_t id, roles, incarnation;
	} *m;
};
void il_mship_takeover(struct il_mship *m, uint32_t epoch, uint32_t prev,
		       const struct il_mship_seed *seeds, unsigned n_seeds, uint64_t now_ns);

/* The TCP-friendly rate of a WAN group (thesis 4.3.3: the slowest
 * receiver governs): the minimum over its live receivers of eq. 4.1 with
 * s = g->s_bytes, each receiver's smoothed RTT and reported p, in kbit/s
 * rounded down, at least 1. Receivers without an RTT sample or without a
 * loss event (p = 0: eq. 4.1 gives no limit) do not count; 0 when none
 * does, or the group is not WAN: no rate limit. */
uint32_t il_mship_wan_rate(const struct il_mgroup *g);
/* Whether a new rate is worth a CREDIT: into or out of 0, or a change of
 * more than 1/16 (so that RTT noise does not cost a CREDIT per ACK). */
bool il_mship_rate_moved(uint32_t sent, uint32_t now);
/* The rate to hand out now (kbit/s, 0: no limit): il_mship_wan_rate when
 * some receiver limits it; while none reports a loss event, TFRC's slow
 * start (4.3.4): from max(4 s / RTT, the last rate), every RTT (the
 * largest SRTT of the receivers) doubled but to no more than twice what
 * the slowest receiver got in that RTT (from the watermark's progress, s
 * bytes per message), and never below s / RTT. 0 while no receiver has an
 * RTT sample (the window alone holds senders back) or not WAN. */
uint32_t il_mship_wan_update(struct il_mgroup *g, uint64_t now_ns);
/* The EWMA weight of RTT samples (TCP's SRTT weight). */
#define IL_MSHIP_RTT_WEIGHT 0.125

#endif
