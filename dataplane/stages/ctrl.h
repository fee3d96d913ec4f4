/* SPDX-License-Identifier: BSD-3-Clause
 * The control stage's state, shared by ctrl.c (the stage: channel, up
 * path, housekeeping) and ctrl_out.c (what it sends to the group: STABLE,
 * VIEW and CREDIT frames, and the per-sender credit bookkeeping).
 */
#ifndef IL_STAGE_CTRL_H
#define IL_STAGE_CTRL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <interlink/chan.h>
#include <interlink/tfrc.h>

#include "seq.h"
#include "stage_auth.h"

#define CTL_MAX_MEMBERS 64
#define CTL_MAX_SENDERS 64
#define DOWN_BURST 64
/* WAN groups: T_out of the last 4096 stamped frames (by global seq). */
#define CTL_SENDLOG_SLOTS 4096u

enum {
	CT_C_UP_ACK,
	CT_C_UP_JOIN,
	CT_C_UP_LEAVE,
	CT_C_UP_HEARTBEAT,
	CT_C_DROP_CHAN_FULL,
	CT_C_DROP_UNKNOWN_GROUP,
	CT_C_DROP_BAD_BODY,
	CT_C_DROP_STALE_EPOCH,
	CT_C_DROP_ACK_FUTURE,
	CT_C_DOWN_MSGS,
	CT_C_WATERMARKS,
	CT_C_VIEWS,
	CT_C_CREDIT_WINDOWS,
	CT_C_TX_STABLE,
	CT_C_TX_VIEW,
	CT_C_TX_CREDIT,
	CT_C_DROP_TX_NO_MBUF,
	CT_C_MEMBER_TABLE_FULL,
	CT_C_SENDER_TABLE_FULL,
	CT_C_CONTROL_RESTARTS,
	CT_C_RESYNC_MSGS,
	CT_C_DOWN_BAD,
	CT_C_RTT_SAMPLES,
	CT_C_RTT_NO_SAMPLE,
	CT_C_TX_RESUME,
	CT_C_TX_RATE,
	CT_C_RATE_SPLITS,
	CT_C_DROP_BAD_MAC,
	CT_C_DROP_REPLAY,
	CT_C_UP_EPOCH_REPORT,
	CT_C_DROP_NOT_OWNER,
	CT_C_TX_VIEW_REPEAT,
	CT_C_VIEW_REPEAT_STALE,
	CT_C_TX_CREDIT_REPEAT,
	CT_C_TX_CREDIT_DUP,
	CT_C_EMIT_DEFERRED,
	CT_C_COUNT
};

struct cmember {
	uint32_t id, roles, incarnation, buffer_free;
	uint64_t cum; /* last cumulative ACK seen (exclusive) */
};

struct il_ha;

struct csender {
	uint32_t id;
	uint64_t from_seq;    /* its incarnation's frames start at this global seq */
	uint64_t stable_next; /* its sender_seq after its last stable message */
	uint64_t limit_sent;  /* limit of the last CREDIT frame */
	/* WAN groups (max-min split of the rate, docs/control.md 12): */
	uint64_t bytes;       /* UDP payload bytes that became stable since the last split */
	uint32_t share_kbps;  /* its part of the group's rate; 0: none yet */
	uint32_t share_sent;  /* the share in its last CREDIT frame */
	/* A grant lost on its way to a sender with nothing in flight would
	 * leave it waiting for ever: sent again on its HEARTBEATs
	 * (ctrl_credit_heartbeat). */
	uint64_t granted[4];  /* the last limits granted (ring): a sender with
			       * nothing in flight is waiting only at one */
	uint8_t granted_i;
	uint64_t rep_limit;   /* the limit the repeats below are of */
	uint64_t rep_tsc;     /* not again before this */
	uint8_t repeats;      /* of rep_limit so far */
};

struct cgroup {
	bool active;        /* has a view or a watermark: send STABLE */
	uint32_t view_id;
	uint64_t view_start;
	uint32_t window;    /* 0: no flow control */
	uint32_t rate_kbps; /* WAN groups: the TCP-friendly rate; 0: none */
	uint64_t split_at;  /* tsc of the last split of the rate among senders */
	uint16_t n_split;   /* senders in it */
	/* WAN groups: when each stamped frame left (RTT samples, Fig. 4.3). */
	struct il_tfrc_sendlog log;
	struct il_tfrc_sendlog_slot *log_slots; /* NULL: not a WAN group */
	uint64_t wm;
	uint64_t walked;    /* credits: history walked up to this seq */
	uint64_t last_frames; /* seq group's stamped_frames at the last tick */
	uint16_t n_members, n_senders;
	uint16_t n_receivers; /* members of the view with IL_ROLE_RECEIVER */
	struct cmember m[CTL_MAX_MEMBERS];
	struct csender s[CTL_MAX_SENDERS];
	/* The view being received (IL_CM_VIEW, then IL_CM_VIEW_MEMBERS). */
	bool pend;
	struct il_cm_view pv;
	uint16_t pend_got;
	struct { uint32_t id, roles; } pm[CTL_MAX_MEMBERS];
	/* Final watermark of a dead data-plane incarnation, repeated. */
	uint32_t final_epoch;
	uint64_t final_wm;
	unsigned final_left;
};

struct ctrl {
	char seq_name[IL_NAME_LEN];
	char chan_path[256];      /* this instance's channel (a shard's: "<chan>.<k>") */
	char chan_base[256];      /* the configured chan (what interlink-control is told) */
	int shard;                /* its shard, -1: not sharded */
	char sock_path[108];
	struct il_app *app;
	struct il_seq *seq;
	struct il_chan *ch;
	uint16_t tx;
	struct cgroup *g;
	uint64_t stable_tsc, drain_tsc, house_tsc;
	uint64_t resume_tsc; /* the same resume point is told at most this often */
	uint64_t split_tsc;  /* WAN groups: the rate is split among senders this often */
	uint64_t next_stable, next_drain, next_house;
	uint64_t last_call, max_gap; /* longest pause between two calls (tsc) */
	bool hello_due, snapshot_due;
	/* Wake-fd fetching is a blocking syscall: a helper thread does it. */
	pthread_t helper;
	bool helper_ok;
	atomic_bool stop, need_fetch;
	atomic_int new_fd;
	/* interlink-control attached? Watched by the helper thread, which
	 * warns on stderr while it is not (after a grace, then rate-limited). */
	atomic_bool control_attached;
	/* auth.keys set: every ACK, JOIN, LEAVE and HEARTBEAT must carry a
	 * valid MAC and a fresh counter; STABLE, VIEW and CREDIT go out signed. */
	struct il_stage_auth auth;
	atomic_uint_fast64_t control_absent_warnings;
	/* One appliance of a pair (docs/ha.md): its ha stage, which this stage
	 * hands ROLE, AUTHORITY and QUIESCE; NULL otherwise. */
	struct il_ha *ha;
	/* A poll may emit at most 2 * IL_BURST_CAP frames (il_emit_room):
	 * down messages taken off the channel but not applied for want of
	 * room, and a stable tick cut short at group tick_gi, go on in the
	 * next poll instead of being dropped as tx_full. */
	struct il_cmsg held[DOWN_BURST];
	unsigned n_held, i_held;
	unsigned tick_gi;
	bool tick_busy;
};

/* The most one down message may emit: a VIEW or STABLE, a grant to every
 * sender, a final STABLE (a stable tick checks its own group's need). */
#define CTRL_EMIT_RESERVE (3u + CTL_MAX_SENDERS)

static inline bool ctrl_room(const struct il_stage *st, unsigned need)
{
	return st->io == NULL || il_emit_room(st) >= need;
}

/* ctrl.c: the view in force of configured group gi, for a stage on the
 * same lcore (lec): its id (0: none yet) and up to max members with their
 * roles; returns how many members were copied. */
uint16_t ctrl_view_get(const struct il_stage *st, unsigned gi, uint32_t *view_id, uint32_t *ids,
		       uint32_t *roles, uint16_t max);

/* ctrl_out.c */
void ctrl_send_stable(struct il_stage *st, struct ctrl *c, unsigned gi, uint32_t epoch,
		      uint64_t wm);
void ctrl_credits_advance(struct il_stage *st, struct ctrl *c, unsigned gi);
void ctrl_credits_all(struct il_stage *st, struct ctrl *c, unsigned gi, bool only_grown);
void ctrl_view_install(struct il_stage *st, struct ctrl *c, unsigned gi);
void ctrl_view_send(struct il_stage *st, struct ctrl *c, unsigned gi);
void ctrl_credit_heartbeat(struct il_stage *st, struct ctrl *c, unsigned gi, uint32_t sender,
			   uint64_t now_tsc);
void ctrl_send_resumes(struct il_stage *st, struct ctrl *c, uint64_t now_tsc);
void ctrl_new_incarnations(struct il_stage *st, struct ctrl *c);
void ctrl_rate_split(struct il_stage *st, struct ctrl *c, unsigned gi, uint64_t now_tsc);
void ctrl_rate_rescale(struct cgroup *g, uint32_t old_kbps);
/* ctrl.c, for the ha stage: a new epoch owned (every group starts afresh
 * and is told of it), or none (standby: nothing to send). */
void ctrl_epoch_restart(struct il_stage *st, struct ctrl *c);
void ctrl_epoch_idle(struct ctrl *c);

#endif
