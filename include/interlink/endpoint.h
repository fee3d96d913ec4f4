/* SPDX-License-Identifier: BSD-3-Clause
 *
 * libinterlink: the host library for ordinary Linux hosts (docs/libinterlink.md).
 *
 * A host is dual-homed, as in the thesis: it sends on its TX interface
 * (into the appliance's "in" port) and receives the group's multicast on
 * its RX interface (from the appliance's "out" port). Two kernel UDP
 * sockets, driven by one io_uring. Single-threaded: every call on one
 * endpoint must come from the same thread; callbacks run inside
 * il_ep_poll() and may call il_ep_send().
 *
 *   struct il_ep_config cfg;
 *   il_ep_config_init(&cfg);
 *   cfg.tx_ifname = "tx0"; cfg.rx_ifname = "rx0"; cfg.member_id = 7;
 *   struct il_ep *ep = il_ep_open(&cfg, err, sizeof(err));
 *   il_ep_join(ep, 1, "239.1.1.1", IL_EP_SENDER | IL_EP_RECEIVER, &cbs, app);
 *   for (;;) { il_ep_send(ep, 1, buf, len); il_ep_poll(ep, 1000); }
 */
#ifndef INTERLINK_ENDPOINT_H
#define INTERLINK_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IL_EP_SENDER 0x1u   /* = IL_ROLE_SENDER on the wire */
#define IL_EP_RECEIVER 0x2u /* = IL_ROLE_RECEIVER */
/* Groups one endpoint may be in at once (il_ep_join: -ENOSPC past it).
 * Each receiving group holds its own window of rx_window slots: many
 * groups want a smaller rx_window. */
#define IL_EP_MAX_GROUPS 128

struct il_ep;

struct il_ep_config {
	const char *tx_ifname;  /* interface towards the appliance's "in" port */
	const char *rx_ifname;  /* interface on its "out" port (group multicast) */
	uint32_t member_id;     /* unique in the group (0: the TX IPv4 address) */
	uint32_t incarnation;   /* 0: from the clock, so every start differs. A new
				 * incarnation numbers its messages from 1 again: it
				 * must differ from the previous run's */
	uint16_t port;          /* Interlink UDP port (7400) */
	uint16_t mtu;           /* of the TX path; frames never exceed it (1500) */
	unsigned ack_every;     /* cumulative ACK after this many messages (64) */
	unsigned ack_us;        /* ... or after this long with something new (500) */
	unsigned hb_ms;         /* HEARTBEAT interval (20) */
	unsigned join_retry_ms; /* JOIN again until a VIEW names us (50) */
	unsigned nak_delay_us;  /* a gap older than this is NAKed (300) */
	unsigned nak_retry_us;  /* and NAKed again this often (3000) */
	uint32_t rx_window;     /* messages held between UTO and the newest (65536, 2^k) */
	size_t max_deferred;    /* bytes of deferred messages a sender queues (8 MiB) */
	bool wait_credit;       /* senders wait for the first CREDIT (true) */
	unsigned rx_depth;      /* receives kept posted on the ring (64) */
	unsigned tx_depth;      /* sends in flight before falling back to sendto (256) */
	unsigned tfrc_rtt_ms;   /* RTT the receiver's loss-event estimator assumes (100):
				 * losses within one RTT of an event's start are
				 * part of it (thesis 4.3.2) */
	unsigned resend_ms;     /* senders: our oldest message not known stable for this
				 * long: send again from it (1000; 0: never). The
				 * appliance's resume notice is the fast path. */
	/* Ricochet lateral error correction (docs/libinterlink.md, "LEC"); a
	 * group turns it on with il_ep_lec(). */
	unsigned lec_r;            /* frames per repair, 2..32 (8) */
	double lec_c;              /* repairs per frame per group, (0, 64] (5) */
	unsigned lec_stagger;      /* instances per repair bin, 1..64 (1) */
	uint32_t lec_store_msgs;   /* frames the decoder holds or awaits (4096) */
	uint32_t lec_store_repairs; /* repairs kept until usable (1024) */
	unsigned lec_nak_delay_us; /* LEC groups: a gap is NAKed after this long (100000) */
	unsigned lec_nak_retry_us; /* and again this often (50000) */
	/* Tests and measurements: called with every datagram the RX socket
	 * receives, before anything else; returning true drops it as if the
	 * host had lost it (NULL: none). */
	bool (*rx_filter)(void *arg, const uint8_t *d, size_t len);
	void *rx_filter_arg;
	/* Measurements: count the time spent in LEC's calls (lec_ns); two
	 * readings of the monotonic clock per LEC call (false) */
	bool lec_cpu_stats;
};

/* One delivered message. data points into the library's buffer: valid
 * during the callback only. */
struct il_ep_msg {
	uint16_t group;
	uint32_t epoch;      /* the sequencer incarnation global_seq belongs to */
	uint32_t sender;
	uint64_t sender_seq;
	uint64_t global_seq;
	const void *data;
	uint16_t len;
	uint8_t via;         /* how its frame reached us: IL_EP_VIA_* */
	uint64_t rx_ns;      /* when (CLOCK_MONOTONIC) its frame arrived or was rebuilt */
};

#define IL_EP_VIA_DATA 0 /* the frame as first sent */
#define IL_EP_VIA_NAK 1  /* a retransmission that filled a gap we knew of */
#define IL_EP_VIA_LEC 2  /* rebuilt from LEC repairs */

enum il_ep_view_event {
	IL_EP_VIEW_JOINED,   /* a VIEW named us: delivery starts at start_seq */
	IL_EP_VIEW_CHANGED,  /* a new view that still names us */
	IL_EP_VIEW_EXCLUDED, /* a VIEW without us: we rejoin (the same incarnation:
			      * our messages keep their numbering); what was not
			      * yet U-delivered is gone, the next JOINED says
			      * where the stream starts again */
	IL_EP_VIEW_NEW_EPOCH, /* the sequencer restarted: everything below the old
			       * epoch's final watermark was U-delivered, global
			       * sequences start again at start_seq (1); messages
			       * not stable are re-sent by their senders */
};

struct il_ep_view {
	uint16_t group;
	uint32_t epoch;
	enum il_ep_view_event event;
	uint32_t view_id;
	uint64_t start_seq;   /* the view's first global sequence (Fast-Join) */
	uint16_t n_members;
	const uint32_t *members;
	uint16_t n_senders;
	const uint32_t *sender_ids;   /* each sender's next FIFO sequence at */
	const uint64_t *sender_next;  /* the view's start, */
	const uint32_t *sender_inc;   /* in this incarnation (0: not known) */
};

struct il_ep_callbacks {
	/* Preliminary order: every message in global order, gap-free, on arrival. */
	void (*po)(void *user, const struct il_ep_msg *m);
	/* Uniform total order: the same messages, once every live receiver holds them. */
	void (*uto)(void *user, const struct il_ep_msg *m);
	/* Membership changes that concern us (optional). */
	void (*view)(void *user, const struct il_ep_view *v);
	/* Sequences the appliance no longer holds (UNAVAIL): skipped (optional). */
	void (*lost)(void *user, uint16_t group, uint64_t first, uint64_t last);
};

struct il_ep_stats {
	uint64_t data_rx, data_dup, msgs_po, msgs_uto, stable_rx, view_rx, credit_rx, unavail_rx;
	uint64_t unavail_msgs, rx_overflow, rx_bad, epochs, finals, lost_stable, fifo_dup;
	uint64_t data_tx, msgs_tx, msgs_deferred, msgs_packed, ack_tx, nak_tx, hb_tx, join_tx;
	uint64_t tx_sync, tx_fail, resent;
	/* senders: resume notices acted on (frames lost before the sequencer)
	 * and the messages they sent again; resend timeouts and theirs */
	uint64_t resume_rx, resent_resume, resend_timeouts, resent_timeout;
	/* senders: VIEWs and CREDITs for a previous incarnation of our id, ignored */
	uint64_t view_stale, credit_stale;
	/* datagrams the config's rx_filter dropped */
	uint64_t rx_filtered;
	/* DATA frames that filled a gap we knew of (NAK repairs, ours or another
	 * receiver's) and those LEC rebuilt, with their messages */
	uint64_t nak_filled, nak_filled_msgs, lec_recovered, lec_recovered_msgs;
	/* LEC repairs: datagrams sent, failed, not sent for want of the
	 * target's address; received, and dropped as malformed */
	uint64_t lec_tx, lec_tx_fail, lec_tx_noaddr, lec_rx, lec_rx_bad;
	/* frames rebuilt that were not the stamped DATA frame their id named
	 * (a peer's corrupt or forged repair): dropped */
	uint64_t lec_rebuilt_bad;
	/* with lec_cpu_stats: nanoseconds spent in LEC's calls (encoding,
	 * decoding, building and queueing repairs; the kernel's sends not),
	 * calls in which the thread was descheduled (over 200 us) left out
	 * and counted in lec_slow */
	uint64_t lec_ns, lec_slow;
	/* a pair of appliances (docs/ha.md): frames of an epoch older than the
	 * newest seen, ignored; EPOCH_REPORTs sent; old-epoch repairs taken
	 * below a cut; cuts this receiver could not complete (it rejoined as a
	 * new incarnation rather than deliver a different prefix) */
	uint64_t stale_epoch_frames, epoch_reports, cut_repairs, cut_incomplete;
};

void il_ep_config_init(struct il_ep_config *cfg);

/* Opens the two sockets and the ring. NULL on failure, err says why. */
struct il_ep *il_ep_open(const struct il_ep_config *cfg, char *err, size_t errlen);
void il_ep_close(struct il_ep *ep);

/* Joins group `group` (multicast address `mcast`, dotted quad). JOINs are
 * repeated until a VIEW names us; then the callbacks start. 0 or -errno. */
int il_ep_join(struct il_ep *ep, uint16_t group, const char *mcast, uint32_t roles,
	       const struct il_ep_callbacks *cb, void *user);
/* Sends LEAVE and forgets the group (deferred messages are dropped:
 * il_ep_pending() tells when there are none). */
int il_ep_leave(struct il_ep *ep, uint16_t group);

/* Sends one message (1..mtu-72 bytes). It goes out at once when the credit
 * window has room and nothing waits before it; otherwise it is deferred and
 * later packed with other deferred messages into MTU-sized frames.
 * 0, -EMSGSIZE, -EAGAIN (deferred queue full: poll and retry), -ENOENT. */
int il_ep_send(struct il_ep *ep, uint16_t group, const void *msg, size_t len);

/* Messages of ours not yet known to be stable (deferred, in flight or
 * unstable): 0 means everything we sent is held by every receiver. */
uint64_t il_ep_pending(const struct il_ep *ep, uint16_t group);
/* True once a VIEW named us in `group`. */
bool il_ep_is_member(const struct il_ep *ep, uint16_t group);
/* The next global sequence to U-deliver (every one below was delivered
 * or was before our start): a replica's position in the total order. */
uint64_t il_ep_uto_next(const struct il_ep *ep, uint16_t group);

/* One event-loop step: submit, wait up to timeout_us for something,
 * handle it, run timers (ACK, NAK, HEARTBEAT, JOIN), deliver. Returns
 * the number of completions handled or -errno. */
int il_ep_poll(struct il_ep *ep, unsigned timeout_us);
/* il_ep_poll until *stop becomes true. */
int il_ep_run(struct il_ep *ep, volatile bool *stop);
/* The io_uring fd: readable when il_ep_poll has completions to handle
 * (for an outer epoll). Timers still need il_ep_poll every few ms. */
int il_ep_fd(const struct il_ep *ep);

void il_ep_get_stats(const struct il_ep *ep, struct il_ep_stats *st);

/* The TCP-friendly rate of a group (WAN groups, docs/libinterlink.md). */
struct il_ep_tfrc {
	uint32_t rate_kbps;    /* sender: the rate of the latest CREDIT; 0: no limit */
	uint64_t tx_bytes;     /* sender: DATA bytes sent (Interlink header + body) */
	uint64_t paced;        /* sender: times a frame had to wait for the rate */
	double loss_p;         /* receiver: the loss-event rate it reports in ACKs */
	uint64_t loss_events;  /* receiver: loss events seen */
	uint64_t lost;         /* receiver: messages found missing (gaps) */
	uint64_t received;     /* receiver: messages the estimator counted */
};
/* 0, or -ENOENT. */
int il_ep_tfrc_stats(const struct il_ep *ep, uint16_t group, struct il_ep_tfrc *out);
uint32_t il_ep_member_id(const struct il_ep *ep);

/* ---- lateral error correction (Ricochet; docs/libinterlink.md, "LEC") ---- */
#define IL_EP_LEC_OFF 0
#define IL_EP_LEC_PEERS 1     /* receiver-side: repairs to and from the group's members */
#define IL_EP_LEC_APPLIANCE 2 /* decode the repairs the appliance's `lec` stage sends */
#define IL_EP_LEC_BOTH 3

/* Turns LEC on or off for a group we joined as a receiver, at any time
 * (views arriving later are applied as they come). c: repairs per frame
 * for IL_EP_LEC_PEERS (<= 0: cfg.lec_c). 0, -ENOENT, -EINVAL (mode, c,
 * not a receiver, the LEC config), -ENOMEM. */
int il_ep_lec(struct il_ep *ep, uint16_t group, unsigned mode, double c);
/* Where repairs to member_id go (IPv4, dotted quad; port: cfg.port).
 * Without one, a member id is read as its IPv4 address, which is what
 * the library's default member id is. 0, -EINVAL, -ENOSPC. */
int il_ep_lec_peer(struct il_ep *ep, uint32_t member_id, const char *ipv4);

/* LEC counters (docs/lec.md, "Counters"), zero while no group uses LEC. */
struct il_ep_lec {
	uint64_t data_new, data_dup, data_unprotected; /* frames handed to LEC */
	uint64_t bin_adds, xor_ops, copy_ops;          /* encoding work */
	uint64_t repairs_sent, repair_targets, repairs_skipped;
	uint64_t repairs_in, rep_recovered, rep_stored, rep_useless, rep_stale, rep_foreign,
		rep_bad, rep_inconsistent;             /* repairs received, by result */
	uint64_t recovered, recovered_immediate, recovered_cascade, recovered_pair;
	uint64_t recover_xor_ops;
	uint64_t evict_msgs, evict_repairs, unrecoverable; /* bounded stores */
	uint32_t msgs_live, msgs_hwm, repairs_live, repairs_hwm;
	uint64_t applies, apply_fail;
	uint32_t regions, bins;                        /* in force */
};
int il_ep_lec_stats(const struct il_ep *ep, struct il_ep_lec *out);

/* Authenticated control traffic (docs/libinterlink.md): with the keys of
 * key_file (the appliance's key file format: "<key id> <64 hex digits>"
 * lines; mode 0600 or stricter), every JOIN, LEAVE, ACK, HEARTBEAT and NAK
 * goes out signed with key key_id (0: the file's first key), and STABLE,
 * VIEW, CREDIT and UNAVAIL frames are taken only with a valid MAC and a
 * counter not seen before: others are dropped and counted. Call it after
 * il_ep_open and before the first il_ep_join. 0, or -errno with err. */
int il_ep_set_auth(struct il_ep *ep, const char *key_file, uint32_t key_id, char *err,
		   size_t errlen);

struct il_ep_auth_stats {
	uint64_t signed_tx;   /* control messages we signed */
	uint64_t verified_rx; /* STABLE, VIEW, CREDIT, UNAVAIL taken */
	uint64_t bad_mac;     /* dropped: no MAC, an unknown key or a wrong MAC */
	uint64_t replay;      /* dropped: a counter seen before (or too old) */
};
/* All zero while authentication is off. */
void il_ep_get_auth_stats(const struct il_ep *ep, struct il_ep_auth_stats *st);

/* The library's version, "MAJOR.MINOR.PATCH", the same as its package's and
 * pkg-config's: what a program was actually loaded with. */
const char *il_ep_version(void);

#ifdef __cplusplus
}
#endif
#endif /* INTERLINK_ENDPOINT_H */
