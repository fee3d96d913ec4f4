/* SPDX-License-Identifier: BSD-3-Clause
 * The ha stage's state (docs/ha.md), shared with the control stage (which
 * owns the channel and hands it ROLE, AUTHORITY and QUIESCE) and the nak
 * stage (which serves NAKs of the previous epoch from the shadow). All
 * three run on one lcore, so none of this needs a lock.
 */
#ifndef IL_STAGE_HA_H
#define IL_STAGE_HA_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <rte_mbuf.h>

#include <interlink/app.h>
#include <interlink/chan.h>

#define IL_HA_MAX_ADDRS 8
#define IL_HA_GARPS 3

enum {
	HA_C_STANDBY_IN,       /* frames consumed on "in" while standby */
	HA_C_STANDBY_OUT,      /* ... on "out" */
	HA_C_SHADOW_FRAMES,    /* DATA frames of another appliance kept */
	HA_C_SHADOW_EVICTED,   /* let go unstable because the shadow was full */
	HA_C_SHADOW_DUP,       /* seen again (retransmissions), not kept twice */
	HA_C_SHADOW_GAPS,      /* frames the shadow missed (a gap before the next) */
	HA_C_DROP_NO_AUTHORITY, /* active, but the authority ran out */
	HA_C_DROP_SUPERSEDED,  /* active, but a newer epoch was seen */
	HA_C_DROP_QUIESCE,     /* new DATA refused during a hand-over */
	HA_C_OUT_FOREIGN,      /* appliance frames on "out" (another's), not forwarded */
	HA_C_OUT_STALE,        /* ... of an older epoch (a fenced active's) */
	HA_C_SUPERSEDED,       /* times a newer epoch fenced this active */
	HA_C_ROLES,            /* ROLE messages applied */
	HA_C_ROLE_REFUSED,     /* ROLE active for an epoch not after one this data plane owned */
	HA_C_ARP_REPLIES,
	HA_C_GARPS,
	HA_C_TX_MUTED,         /* frames the pipeline did not send (this lcore) */
	HA_C_COUNT
};

struct il_ha_ent {
	struct rte_mbuf *m;
	uint64_t first;
	uint32_t count;
};

/* Per group: the other appliance's stamped DATA frames of one epoch, in
 * global order, from its last watermark on (only unstable frames), as
 * references. Appended only past its end, so ordered by first. */
struct il_ha_shadow {
	struct il_ha_ent *ring;
	uint32_t head, n;
	uint64_t end;    /* one past the last frame kept (0: none yet) */
	uint64_t stable; /* the highest watermark seen */
};

struct ctrl;

struct il_ha {
	struct il_app *app;
	struct il_stage *st;
	char ctrl_name[IL_NAME_LEN];
	struct il_stage *ctrl_st;
	struct ctrl *ctrl;
	struct il_seq *seq;
	uint16_t in, out;       /* app port indices */
	uint16_t in_pid, out_pid; /* DPDK port ids */
	uint64_t hz;

	uint32_t role;          /* enum il_ha_role */
	uint32_t epoch, prev;   /* active: the epoch owned, and the one it cuts */
	uint32_t max_owned;     /* the newest epoch this data plane was active in */
	uint64_t auth_tsc;      /* active: stamp and forward until */
	bool superseded, told_superseded;
	uint32_t seen_epoch;    /* the newer epoch that superseded it */
	bool quiescing;

	/* The shadow: frames of shadow_epoch, per group. */
	uint32_t shadow_epoch;
	uint32_t depth, mask;
	struct il_ha_shadow *sh;
	uint16_t n_victims;
	struct rte_mbuf *victims[IL_BURST_CAP];

	/* What the control process judges the other appliance and this one by. */
	uint64_t last_peer_tsc;
	uint32_t peer_epoch;
	uint64_t last_host_tsc;

	/* Addresses answered for (ARP) and claimed at takeover (gratuitous ARP). */
	uint32_t addr[IL_HA_MAX_ADDRS];
	unsigned n_addr;
	unsigned garps;         /* per takeover, per address and port */
	uint64_t garp_at[IL_HA_GARPS];
	unsigned garp_next;

	/* A standby with nothing to do sleeps this long between empty polls
	 * (0: never): it forwards nothing, and the active it watches may share
	 * its CPU (docs/ha.md, "Measured"). */
	uint32_t idle_us;
	uint64_t last_pkt_tsc;

	/* Link state of every port, polled by a helper thread (a syscall). */
	pthread_t helper;
	bool helper_ok;
	atomic_bool stop;
	atomic_bool ports_up;
};

/* The ha stage of this appliance, if any (the control and nak stages look
 * it up at bind). */
struct il_ha *il_ha_find(struct il_app *app);

/* A ROLE, AUTHORITY or QUIESCE message from the control process (the
 * control stage drains the channel). st is the control stage. */
void il_ha_down(struct il_ha *ha, const struct il_cmsg *m);
/* IL_CM_ALIVE's payload. */
void il_ha_alive(const struct il_ha *ha, struct il_cm_alive *a);
/* Whether a frame of epoch e may be stamped, sent or counted on: the
 * active's own epoch while its authority lasts. */
static inline bool il_ha_active(const struct il_ha *ha)
{
	return ha->role == IL_HA_ACTIVE && !ha->superseded;
}

/* The shadow, for the nak stage: NAKs of the previous epoch while this
 * appliance is active. */
static inline bool il_ha_shadow_serves(const struct il_ha *ha, uint32_t epoch)
{
	return il_ha_active(ha) && ha->prev != 0 && epoch == ha->prev &&
	       ha->shadow_epoch == ha->prev;
}
static inline const struct il_ha_shadow *il_ha_shadow_of(const struct il_ha *ha, unsigned gi)
{
	return &ha->sh[gi];
}
static inline const struct il_ha_ent *il_ha_shadow_at(const struct il_ha *ha, unsigned gi,
						      uint32_t idx)
{
	const struct il_ha_shadow *s = &ha->sh[gi];
	return &s->ring[(s->head - s->n + idx) & ha->mask];
}
/* Oldest sequence held (the end when nothing is). */
static inline uint64_t il_ha_shadow_low(const struct il_ha *ha, unsigned gi)
{
	const struct il_ha_shadow *s = &ha->sh[gi];
	return s->n ? il_ha_shadow_at(ha, gi, 0)->first : s->end;
}
/* Index of the first held frame whose range ends after seq. */
static inline uint32_t il_ha_shadow_find(const struct il_ha *ha, unsigned gi, uint64_t seq)
{
	uint32_t lo = 0, hi = ha->sh[gi].n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct il_ha_ent *e = il_ha_shadow_at(ha, gi, mid);

		if (e->first + e->count <= seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

#endif
