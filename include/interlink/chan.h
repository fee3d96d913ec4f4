/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The data-plane <-> control-process channel.
 *
 * Two lockless single-producer/single-consumer rings of fixed-size
 * (64-byte) messages in a shared-memory file (by default under /dev/shm)
 * that both processes map (the rings and the file are the shared-memory
 * ring library's: include/interlink/shm_ring.h, shm_file.h):
 *
 *   up   ring: data plane -> control process (ACKs, JOIN/LEAVE, ...)
 *   down ring: control process -> data plane (watermarks, credits, ...)
 *
 * Beside the rings the file holds one incarnation counter per side,
 * bumped on every attach, so that a side
 * that restarts is noticed by the other (see docs/control.md, "Restart
 * and resynchronisation").
 *
 * Data-plane rules: il_chan_send_burst() and il_chan_recv_burst() never
 * block, never allocate and make no syscall, except one eventfd write per
 * call when (and only when) the consumer announced it is about to sleep.
 * A full ring makes il_chan_send_burst() return fewer than asked; the
 * shortfall is counted in the ring's shared drop counter and the caller
 * moves on.
 *
 * Wake-up: the consumer of the up ring (the control process) sleeps on an
 * eventfd. The data plane gets that eventfd from the control process over
 * a unix stream socket (SCM_RIGHTS): il_chan_wake_fetch().
 */
#ifndef INTERLINK_CHAN_H
#define INTERLINK_CHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IL_CHAN_MAGIC 0x314e414843324c49ULL /* "IL2CHAN1" little-endian */
#define IL_CHAN_LAYOUT_VERSION 7u
#define IL_CHAN_MSG_SIZE 64u
#define IL_CHAN_PATH_DEFAULT "/dev/shm/interlink-chan"
#define IL_CHAN_UP_SLOTS_DEFAULT 16384u
#define IL_CHAN_DOWN_SLOTS_DEFAULT 4096u
#define IL_CHAN_MIN_SLOTS 2u
#define IL_CHAN_MAX_SLOTS (1u << 24)

/* Which end of the channel a handle is. */
enum il_chan_side {
	IL_CHAN_DATAPLANE = 0, /* produces up, consumes down */
	IL_CHAN_CONTROL = 1,   /* produces down, consumes up */
};

/* Message kinds. Numbers are part of the layout version: change one and
 * IL_CHAN_LAYOUT_VERSION must move. Later work adds credit grants,
 * FT-TCP log copies, view changes... */
enum il_cm_type {
	IL_CM_NONE = 0,
	IL_CM_HELLO = 1,     /* both ways: a side (re)attached */
	IL_CM_ACK = 2,       /* up: a receiver's cumulative ACK */
	IL_CM_HEARTBEAT = 3, /* up: a receiver is alive */
	IL_CM_JOIN = 4,      /* up: a receiver joins a group */
	IL_CM_LEAVE = 5,     /* up: a receiver leaves a group */
	IL_CM_WATERMARK = 6, /* down: a group's stability watermark moved */
	IL_CM_VIEW = 7,      /* down: a new view; members follow in chunks */
	IL_CM_VIEW_MEMBERS = 8, /* down: up to IL_CM_VIEW_CHUNK members of a view */
	IL_CM_CREDIT = 9,    /* down: a group's flow-control window */
	IL_CM_RESYNC = 10,   /* up: a group's state, after a control restart */
	IL_CM_ALIVE = 11,    /* up: the data plane's own heartbeat (every 10 ms);
			      * with an ha stage it carries il_cm_alive */
	/* An active/standby pair (docs/ha.md). */
	IL_CM_ROLE = 12,     /* down: the data plane's role and epoch */
	IL_CM_AUTHORITY = 13, /* down: the active may stamp and forward until */
	IL_CM_QUIESCE = 14,  /* down: stop (or go on) stamping new DATA: a hand-over */
	IL_CM_EPOCH_REPORT = 15, /* up: a receiver's EPOCH_REPORT */
	IL_CM_SHADOW = 16,   /* up: a group's shadow run of the previous epoch */
	IL_CM_SUPERSEDED = 17, /* up: an active saw a newer epoch on "out" */
	IL_CM_QUIESCED = 18, /* up: a group's next sequence once quiesced */
	IL_CM_TYPE_COUNT,
	/* 0x8000..0xffff: private to tests and experiments. */
	IL_CM_PRIVATE = 0x8000,
};

/* Sequence numbers in this channel are exclusive bounds ("next
 * expected", as in TCP): cum_seq = S means the receiver holds every global
 * sequence number below S of its group and epoch, so 0 means "nothing"
 * and no sentinel is needed. stable_seq has the same meaning over every
 * live receiver. */

struct il_cm_hello {
	uint32_t side;        /* enum il_chan_side of the sender */
	uint32_t epoch;       /* data plane: sequencer epoch; control: 0 */
	uint64_t incarnation; /* sender's incarnation (>= 1) */
	uint64_t peer_incarnation; /* the receiver's incarnation as the sender saw it */
	/* A sharded data plane (docs/scaling.md 1.5) talks over one channel per
	 * shard: the shard this channel belongs to and how many there are
	 * (0 and 0: not sharded, one channel). Control: 0 and 0. */
	uint16_t shard;
	uint16_t n_shards;
	uint32_t reserved;
};

struct il_cm_ack {
	uint32_t receiver; /* receiving host id (wire: sender_id of the ACK) */
	uint32_t epoch;
	uint64_t cum_seq;  /* exclusive, see above */
	uint64_t rx_ns;    /* arrival time at the data plane (CLOCK_MONOTONIC) */
	uint32_t view_id;  /* the view the receiver is in (wire ACK body) */
	uint32_t buffer_free; /* messages it can still buffer; UINT32_MAX: no limit */
	/* WAN groups (s_bytes != 0) only, else zero: the TCP-friendly rate. */
	uint64_t rtt_ns;   /* RTT sample the data plane took from this ACK
			    * (Fig. 4.3: rx_ns - T_out(echo_seq) - delta); 0: none */
	uint32_t loss_ppm; /* the receiver's loss-event rate p x 10^6 */
	uint32_t s_bytes;  /* the group's packet size s for eq. 4.1; 0: not WAN */
};

/* JOIN, LEAVE and HEARTBEAT. */
struct il_cm_member {
	uint32_t receiver; /* the member (wire: sender_id), receiver or sender */
	uint32_t epoch;
	uint64_t seq;   /* JOIN: first seq the member is responsible for (the
			 * group's next global sequence when the JOIN passed
			 * the sequencer); RESYNC JOIN: its last cumulative ACK */
	uint64_t rx_ns;
	uint32_t roles;       /* IL_ROLE_* of the wire MEMBER body */
	uint32_t incarnation; /* the member's own incarnation */
};

/* il_cmsg.flags of an up JOIN: re-sent state after a control restart
 * (a member of view resync.view_id, not a view change). */
#define IL_CMF_RESYNC 0x1u
/* il_cmsg.flags of a down IL_CM_VIEW: send the view in force again,
 * unchanged (a member retried its JOIN: the VIEW naming it was lost). Only
 * view_id is read; no IL_CM_VIEW_MEMBERS follow. */
#define IL_CMF_REPEAT 0x2u

struct il_cm_watermark {
	uint32_t epoch;      /* may name an older epoch: the final watermark of
			      * a data-plane incarnation that died */
	uint32_t receivers;  /* live receivers the minimum was taken over */
	uint64_t stable_seq; /* exclusive, see above; never decreases in an epoch */
	uint32_t view_id;    /* the view it was computed in */
};

/* A view: IL_CM_VIEW, then ceil(n_members / IL_CM_VIEW_CHUNK)
 * IL_CM_VIEW_MEMBERS in the same burst (the control process checks the
 * ring has room for all of them first, so a view is never cut). */
struct il_cm_view {
	uint32_t epoch;
	uint32_t view_id;
	uint64_t start_seq; /* first global seq of the view (Fast-Join start);
			     * 0: the data plane's next sequence when it
			     * multicasts the VIEW */
	uint16_t n_members;
	uint16_t reason;    /* enum il_view_reason, for counters and logs */
	uint32_t window;    /* current credit window (0: no flow control) */
};

enum il_view_reason { IL_VR_JOIN = 1, IL_VR_LEAVE, IL_VR_EXCLUDE, IL_VR_EPOCH };

#define IL_CM_VIEW_CHUNK 6u
struct il_cm_view_members {
	uint32_t view_id;
	uint16_t index; /* of the first member in this chunk */
	uint16_t count;
	struct {
		uint32_t id;
		uint32_t roles;
	} m[IL_CM_VIEW_CHUNK];
};

/* Down: every sender of the group may have at most `window` messages
 * that are not yet stable (0: flow control off). The data plane turns it
 * into per-sender limits, since it knows which frames are stable. */
struct il_cm_credit {
	uint32_t epoch;
	uint32_t window;
	uint32_t rate_kbps; /* WAN groups: eq. 4.1 for the slowest live receiver
			     * (kbit/s, at least 1); 0: no rate limit */
};

/* Up, after the data plane saw a new control incarnation: one per group,
 * then a RESYNC JOIN and an ACK per member (docs/control.md, rule 5). */
struct il_cm_resync {
	uint32_t epoch;
	uint32_t view_id;
	uint64_t stable_seq; /* the watermark the data plane applies */
	uint32_t window;
	uint32_t n_members;
};

/* An active/standby pair (docs/ha.md). The data plane's role: */
enum il_ha_role {
	IL_HA_STANDBY = 1, /* consume both ports, forward and send nothing, keep a shadow */
	IL_HA_ACTIVE = 2,  /* stamp and forward in `epoch` while the authority lasts */
};

struct il_cm_role {
	uint32_t role;       /* enum il_ha_role */
	uint32_t epoch;      /* ACTIVE: the epoch it owns (committed in etcd) */
	uint32_t prev_epoch; /* ACTIVE: the epoch whose cut it establishes (its
			      * shadow serves NAKs of it); 0: none */
	uint32_t reserved;
	uint64_t authority_until_ns; /* CLOCK_MONOTONIC */
};

struct il_cm_authority {
	uint32_t epoch;      /* ignored unless the data plane's own */
	uint32_t reserved;
	uint64_t until_ns;   /* CLOCK_MONOTONIC: stamp and forward no later */
};

struct il_cm_quiesce {
	uint32_t epoch;
	uint32_t on;         /* 1: refuse new DATA; 0: stamp again */
};

/* Up: a receiver's EPOCH_REPORT (wire type 14), as the data plane got it. */
struct il_cm_epoch_report {
	uint32_t receiver;
	uint32_t epoch;      /* the epoch reported on */
	uint32_t new_epoch;  /* the newer one it answers */
	uint32_t view_id;
	uint64_t cum;        /* exclusive: it holds every seq below, in `epoch` */
	uint64_t stable_seen;
	uint64_t high;
	uint64_t rx_ns;
};

/* Up, at ROLE active: per group, what the shadow holds of `epoch` (the
 * previous one): every frame of [lo, hi) without a gap; frames = held. */
struct il_cm_shadow {
	uint32_t epoch;
	uint32_t reserved;
	uint64_t lo, hi;
	uint64_t frames;
	uint64_t stable;     /* the highest watermark seen published in `epoch` */
};

struct il_cm_superseded {
	uint32_t own_epoch;
	uint32_t epoch_seen;
};

struct il_cm_quiesced {
	uint32_t epoch;
	uint32_t reserved;
	uint64_t next;       /* the group's next global sequence: nothing at or
			      * above it will be stamped in `epoch` */
};

/* IL_CM_ALIVE's payload when the data plane has an ha stage (all zero
 * otherwise). Times are CLOCK_MONOTONIC ns, 0: never. */
struct il_cm_alive {
	uint64_t last_peer_frame_ns; /* last frame on "out" stamped by another appliance */
	uint64_t last_host_in_ns;    /* last frame from a host on "in" */
	uint64_t tx_out;             /* frames sent on "out" so far (the active's proof) */
	uint32_t peer_epoch;         /* the epoch of that last frame */
	uint32_t epoch;              /* its own epoch (0: standby) */
	uint8_t ha;                  /* 1: the payload is filled in */
	uint8_t role;                /* enum il_ha_role */
	uint8_t ports_up;            /* every port has its link */
	uint8_t authority_ok;        /* active: the authority has not run out */
	uint8_t superseded;          /* active: a newer epoch was seen on "out" */
	uint8_t quiescing;
	uint8_t reserved[2];
	/* when the data plane wrote it (CLOCK_MONOTONIC): a receiver tells a
	 * report of a data plane that ran from one that was away (absent from
	 * older data planes: len says) */
	uint64_t sent_ns;
};

#define IL_CM_PAYLOAD_SIZE (IL_CHAN_MSG_SIZE - 8u)

struct il_cmsg {
	uint16_t type;  /* enum il_cm_type */
	uint16_t len;   /* payload bytes in use */
	uint16_t group; /* group id, 0 where not applicable */
	uint16_t flags; /* IL_CMF_*, zero where none applies */
	union {
		struct il_cm_hello hello;
		struct il_cm_ack ack;
		struct il_cm_member member; /* JOIN, LEAVE, HEARTBEAT */
		struct il_cm_watermark wm;
		struct il_cm_view view;
		struct il_cm_view_members vm;
		struct il_cm_credit credit;
		struct il_cm_resync resync;
		struct il_cm_role role;
		struct il_cm_authority auth;
		struct il_cm_quiesce quiesce;
		struct il_cm_epoch_report report;
		struct il_cm_shadow shadow;
		struct il_cm_superseded superseded;
		struct il_cm_quiesced quiesced;
		struct il_cm_alive alive;
		uint64_t u64[IL_CM_PAYLOAD_SIZE / 8];
		uint8_t raw[IL_CM_PAYLOAD_SIZE];
	} u;
};
_Static_assert(sizeof(struct il_cmsg) == IL_CHAN_MSG_SIZE, "il_cmsg must fill one slot");

struct il_chan_params {
	uint32_t up_slots;   /* power of two, IL_CHAN_MIN_SLOTS..IL_CHAN_MAX_SLOTS */
	uint32_t down_slots; /* idem */
};

/* Counters of one ring, as kept in shared memory (either side reads). */
struct il_chan_ring_stats {
	uint64_t enqueued; /* messages ever published (the producer index) */
	uint64_t dequeued; /* messages ever consumed (the consumer index) */
	uint64_t drops;    /* messages refused because the ring was full */
	uint64_t wakeups;  /* eventfd writes by the producer */
	uint64_t sleeps;   /* times the consumer announced it would sleep
			    * (il_chan_sleep_prepare calls, withdrawn or not) */
	uint32_t slots;
};

struct il_chan;

/* Open the channel file at path as `side`.
 * - params == NULL: attach only; the file must exist.
 * - params != NULL: create the file if absent (atomically: a fully
 *   initialised temporary file is linked into place, so a racing peer
 *   never maps a half-built header); if present, its sizes must equal
 *   params.
 * Either way: bump this side's incarnation, discard what is queued on the
 * ring this side consumes (it was meant for the previous incarnation; the
 * peer re-sends state when it sees the new incarnation) and clear that
 * ring's sleeping flag. Fails if a live process already holds this side.
 * Returns 0, or -1 with a message in err. */
int il_chan_open(const char *path, enum il_chan_side side, const struct il_chan_params *params,
		 struct il_chan **out, char *err, size_t errlen);

/* Unmap and forget; the file stays (the peer may still use it). Closes
 * the wake fd the handle owns. */
void il_chan_close(struct il_chan *ch);

/* Remove the channel file (both sides gone for good, or tests). */
int il_chan_unlink(const char *path);

/* Fast path. */

/* Enqueue up to n messages on this side's outgoing ring, in order.
 * Returns how many went in (the first ones); the rest are counted as
 * drops. Writes the wake fd at most once, only if the consumer is
 * sleeping. */
unsigned il_chan_send_burst(struct il_chan *ch, const struct il_cmsg *msgs, unsigned n);

/* Dequeue up to n messages from this side's incoming ring. */
unsigned il_chan_recv_burst(struct il_chan *ch, struct il_cmsg *msgs, unsigned n);

/* Messages waiting on the incoming ring / free slots on the outgoing one. */
unsigned il_chan_rx_pending(const struct il_chan *ch);
unsigned il_chan_tx_free(const struct il_chan *ch);

/* Wake-up rate limit, for a producer that polls (the data plane): with an
 * interval of ns > 0, a sleeping consumer is woken at most once per ns. A
 * burst sent sooner after the last wake-up does not wake it; the wake-up
 * waits for the interval's end and is done by il_chan_wake_flush(), which
 * the producer calls on every poll (or at once when 64 messages wait). A
 * consumer woken rarely is still woken at once. 0: every burst to a
 * sleeping consumer wakes it. il_chan_wake_flush() returns true when a
 * pending wake-up was due (done, or the consumer was found awake). */
void il_chan_set_wake_interval(struct il_chan *ch, uint64_t ns);
bool il_chan_wake_flush(struct il_chan *ch);

/* Sleeping consumer (the control process; a data-plane service thread
 * could use the same on the down ring).
 * il_chan_sleep_prepare(): announce the intention to sleep, then look at
 * the ring again. Returns true if the caller may block on its eventfd (the
 * producer is then bound to write it after its next enqueue); false if
 * messages arrived meanwhile (the announcement is withdrawn; drain
 * again). After waking, for whatever reason, call il_chan_sleep_end(). */
bool il_chan_sleep_prepare(struct il_chan *ch);
void il_chan_sleep_end(struct il_chan *ch);

/* The eventfd to write when the consumer of the outgoing ring sleeps.
 * The handle takes ownership (closes the previous one and on close).
 * -1: none (wake-ups skipped, e.g. while the control process is down). */
void il_chan_set_wake_fd(struct il_chan *ch, int fd);
int il_chan_wake_fd(const struct il_chan *ch);

/* Incarnations and resynchronisation. */
enum il_chan_side il_chan_side(const struct il_chan *ch);
uint64_t il_chan_incarnation(const struct il_chan *ch); /* this side's */
/* The peer's current incarnation in the header (0: never attached). */
uint64_t il_chan_peer_incarnation(const struct il_chan *ch);
/* True while a live process holds the peer's side (a kill(pid, 0): a
 * syscall, so not for a fast-path lcore). */
bool il_chan_peer_alive(const struct il_chan *ch);
/* True once per peer (re)attach since this handle last looked; *inc gets
 * the new incarnation. One relaxed load when nothing changed: cheap
 * enough for a data-plane housekeeping poll. */
bool il_chan_peer_restarted(struct il_chan *ch, uint64_t *inc);
/* Send IL_CM_HELLO (side, epoch, incarnations, and the shard set by
 * il_chan_set_shard). Returns 1 if enqueued. */
unsigned il_chan_send_hello(struct il_chan *ch, uint32_t epoch);
/* A sharded data plane's channel of shard `shard` of `n`: said in HELLO. */
void il_chan_set_shard(struct il_chan *ch, uint16_t shard, uint16_t n);
/* "<path>.<shard>": shard `shard`'s channel when the data plane runs
 * shards (docs/scaling.md 1.5). -1 if it does not fit in len. */
int il_chan_shard_path(const char *chan_path, unsigned shard, char *buf, size_t len);

/* Shared counters of the up or down ring and the layout. */
void il_chan_stats(const struct il_chan *ch, bool up, struct il_chan_ring_stats *st);

/* Wake-fd passing over a unix stream socket with SCM_RIGHTS.
 * Control process: listen (a stale socket file is replaced), then for
 * each accepted connection il_chan_wake_serve() sends the eventfd plus its
 * incarnation and the caller closes the connection.
 * Data plane: il_chan_wake_fetch() connects, receives the fd (blocking,
 * local, bounded by a 1 s receive timeout) and returns it; *inc (if not
 * NULL) gets the serving incarnation. Slow path: call it at start-up and
 * when il_chan_peer_restarted() reports a new control incarnation, from a
 * housekeeping thread, not from a fast-path lcore. */
int il_chan_wake_listen(const char *sock_path, char *err, size_t errlen);
int il_chan_wake_serve(int conn_fd, int event_fd, uint64_t incarnation);
int il_chan_wake_fetch(const char *sock_path, uint64_t *inc, char *err, size_t errlen);

/* "<path>.sock": the default wake socket beside a channel file. */
int il_chan_default_sock_path(const char *chan_path, char *buf, size_t len);

const char *il_cm_type_name(uint16_t type);

#endif
