/* SPDX-License-Identifier: BSD-3-Clause
 * interlink-pktgen: emulated senders and receivers of Interlink groups.
 */
#ifndef IL_PKTGEN_H
#define IL_PKTGEN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <interlink/auth.h>
#include <interlink/impair.h>
#include <interlink/wire_msg.h>

#include <interlink/shard.h>

#include "pgutil.h"

#define PG_TXQ_HASH 0xffffu

#define PG_MAX_SENDERS 64
#define PG_MAX_RECEIVERS 16
#define PG_MAX_GROUPS 16
#define PG_BURST 32

/* ---- configuration --------------------------------------------------- */
enum pg_mode { PG_NATIVE, PG_RAW, PG_PCAP };
enum pg_check { PG_CHECK_FULL, PG_CHECK_COUNT };

struct pg_conf {
	const char *tx_dev, *rx_dev;
	const char *auth_keys;      /* --auth-keys: authenticated control traffic */
	uint32_t auth_key_id;
	enum pg_mode mode;
	enum pg_check check;
	unsigned senders, receivers, groups;
	uint16_t group_base;        /* first group id */
	uint32_t group_addr_base;   /* multicast address of group_base (host order) */
	uint16_t il_port;
	uint32_t raw_dst;           /* raw mode: UDP destination (host order) */
	uint16_t raw_port;
	uint64_t count;             /* messages to send in all (0: until duration) */
	double duration;            /* seconds (0: until count) */
	double rate_pps;            /* frames per second in all (0: as fast as possible) */
	double rate_bps;            /* or wire bits per second (frame + FCS + 20) */
	struct pg_sizes msg_sizes;  /* message payload (native) or UDP payload (raw) */
	bool frame_sizes;           /* msg_sizes holds whole frames, FCS included */
	unsigned pack;              /* messages per frame */
	unsigned pack_bytes;        /* pack as many as fit in this IP MTU (0: --pack) */
	bool udp_csum;
	bool tx_drop;               /* what the port refuses is lost, as on a wire */
	unsigned queues;            /* --queues: queue pairs per port (a sharded appliance's) */
	unsigned tx_queue;          /* --tx-queue: the queue frames and NAKs are sent on,
				     * or PG_TXQ_HASH: each group's on its shard's queue */
	struct il_loss_cfg loss;    /* per-receiver loss injected on receive */
	uint64_t seed;
	double nak_timeout_us;
	double drain_timeout_s;     /* after sending: wait this long for repairs */
	unsigned reorder_slots;     /* per receiver per group (power of two) */
	unsigned window;            /* per sender: messages not yet delivered everywhere */
	const char *pcap;           /* replay this capture */
	double speed;               /* replay speed factor (0: as fast as possible) */
	unsigned pcap_loops;
	const char *capture;        /* write a sample of what is received */
	unsigned capture_count;
	bool listen;                /* receive only */
	bool serve;                 /* trials driven from stdin */
	bool rx_lcore;              /* receive on a second lcore (count check) */
	double catch_up_s;          /* pacing: lateness made up (0: the default) */
	double link_wait_s;         /* how long to wait for the links to come up */
	double link_loss_s;         /* a link down this long during a run ends it */
	const char *json;
	bool quiet;
	/* --uto: speak the appliance's UTO control protocol (uto.c) */
	bool uto;
	unsigned ack_every;         /* ACK after this many new messages */
	double ack_us;              /* or after this long with something new */
	double hb_ms;               /* HEARTBEAT interval of every member */
	double view_wait_s;         /* how long to wait for the VIEWs at start */
	double credit_wait_s;       /* then for a first CREDIT per sender */
};

/* ---- --uto: membership and credit state (uto.c) ----------------------- */
struct pg_uto_rec {                 /* a message of a sender, as receiver 0 delivered it */
	uint64_t sseq, gseq;
};

struct pg_uto_snd {                 /* one sender in one group */
	bool member;                /* named in the group's latest VIEW */
	bool credited;              /* a CREDIT came for it */
	uint32_t inc;               /* incarnation: +1 at every rejoin */
	uint64_t limit;             /* may send sender_seq below this */
	uint32_t rate_kbps;         /* 0: no rate limit */
	uint64_t next_tx_tsc;       /* rate_kbps: earliest next frame */
	uint64_t blk_since;         /* waiting for credit since (0: not) */
	uint64_t stable_next;       /* oldest sender_seq not known stable */
	uint64_t max_unstable;      /* the most sent and not known stable */
	struct pg_uto_rec *ring;    /* by sender_seq, PG_UTO_RING slots */
};
#define PG_UTO_RING 16384u

struct pg_uto_rcv {                 /* one receiver in one group */
	bool member;                /* named in the group's latest VIEW */
	bool joined;                /* was named once (its start is set) */
	uint32_t inc;               /* incarnation: +1 at every rejoin */
	uint32_t view_id;
	uint64_t acked;             /* last cumulative ACK sent (exclusive) */
	uint64_t last_ack, last_hb, last_join;
};

struct pg_uto {
	uint32_t epoch, incarnation;
	bool have_epoch, credited, started;
	uint64_t wm[PG_MAX_GROUPS];     /* watermark known from STABLE / DATA */
	uint64_t snd_last_hb[PG_MAX_SENDERS][PG_MAX_GROUPS];
	uint64_t snd_last_join[PG_MAX_SENDERS][PG_MAX_GROUPS];
	struct pg_uto_rcv r[PG_MAX_RECEIVERS][PG_MAX_GROUPS];
	struct pg_uto_snd s[PG_MAX_SENDERS][PG_MAX_GROUPS];
	uint64_t acks_tx, hb_tx, joins_tx, leaves_tx, ctl_tx_fail;
	uint64_t credits_rx, views_rx, stable_rx, resumes_rx, resumed_msgs, exclusions;
	uint64_t stale_epoch;           /* frames of an older epoch than ours, ignored */
	uint64_t blocked_tsc;           /* senders' time waiting for credit, summed */
	uint64_t blocked_stalls;        /* bursts cut short by credit */
	uint32_t credit_window;         /* largest window a CREDIT named */
	uint32_t rate_kbps;             /* last non-zero rate a CREDIT named */
	struct rte_mbuf *q[64];
	unsigned nq;
};

/* ---- per-receiver state ------------------------------------------------ */
struct pg_rgroup {
	uint64_t next;              /* next global seq to deliver */
	uint64_t hi;                /* one past the highest seq received */
	uint64_t delivered;         /* messages delivered in order */
	uint64_t hash;              /* running hash of the delivered order */
	uint64_t gaps;              /* gaps detected */
	uint64_t gaps_repaired;     /* gaps closed by a retransmission */
	uint64_t naks_sent;
	uint64_t dups;              /* frames already delivered */
	uint64_t unrecoverable;     /* messages declared UNAVAIL */
	uint64_t fifo_violations;   /* per-sender seq not consecutive */
	uint64_t overrun;           /* frames beyond the reorder window */
	uint64_t buffered;          /* frames held now */
	uint64_t last_nak_tsc;
	uint64_t gap_open_tsc;      /* 0: no open gap */
	uint64_t *sender_next;      /* [senders + 1]: expected sender seq */
	struct rte_mbuf **slot;     /* reorder ring indexed by first seq */
};

struct pg_receiver {
	unsigned id;
	struct il_loss loss;
	uint64_t injected_drops;
	uint64_t from_sender[PG_MAX_SENDERS + 1]; /* messages delivered, per sender */
	struct pg_rgroup g[PG_MAX_GROUPS];
	struct pg_hist lat;         /* TX-to-delivery latency, TSC ticks */
	uint64_t cnt_next[PG_MAX_GROUPS]; /* count mode: next global seq (0: none yet) */
	uint64_t cnt_missing;       /* count mode: sequences skipped */
	uint64_t cnt_reordered;     /* count mode: sequences going backwards */
};

struct pg_sender {
	unsigned id;
	uint64_t seq[PG_MAX_GROUPS]; /* next sender seq per group */
	uint64_t sent_msgs, sent_frames;
};

struct pg_state {
	struct pg_conf c;
	uint16_t tx_port, rx_port;
	uint16_t rxq_next;          /* pg_rx_burst's first queue next time */
	uint8_t tx_mac[6];
	struct rte_mempool *pool;
	struct pg_sender senders[PG_MAX_SENDERS];
	struct pg_receiver rx[PG_MAX_RECEIVERS];
	uint64_t group_sent[PG_MAX_GROUPS]; /* messages sent per group */
	uint64_t tx_frames, tx_msgs, tx_retry, rx_frames, rx_other, rx_unavail, rx_bad;
	uint64_t tx_refused;        /* --tx-drop: frames the port did not take */
	uint64_t tx_bytes;          /* frame bytes accepted (no FCS) */
	uint64_t rx_data;           /* count mode: frames carrying our payload */
	uint64_t rx_stale;          /* count mode: ours, but sent before this run */
	uint64_t rx_last_tsc;       /* when a frame last arrived */
	struct pg_hist lat_count;   /* count mode: latency of every data frame */
	struct pg_capture cap;
	uint64_t t0;
	struct pg_pcap pc;
	size_t pc_next;             /* replay: next record */
	unsigned pc_loop;
	uint64_t pc_base;           /* replay: TSC of this loop's first record */
	uint64_t naks_tx, naks_tx_fail;
	struct pg_auth *auth;       /* --auth-keys (pgauth.c); NULL: off */
	uint64_t auth_signed, auth_bad_mac, auth_replay;
	uint64_t window_stalls;     /* bursts cut short by the window */
	bool window_off;            /* set once messages were lost for good */
	unsigned next_sender, next_group;
	struct pg_pace pace;
	unsigned next_size;         /* size drawn for the next message (0: none) */
	uint8_t *tpl;               /* per (sender, group) header templates */
	unsigned tpl_len, tpl_stride;
	uint64_t hz;
	volatile bool quit;
	const char *link_lost;      /* the port whose link was lost ("tx"/"rx"), or NULL */
	unsigned rx_lcore;          /* RTE_MAX_LCORE: receive on the main lcore */
	volatile bool rx_stop;
	bool rx_lcore_on;
	struct pg_uto uto;
	bool uto_stable;            /* --uto: every message known stable at the end */
};

/* opts.c: optind, or -1 after printing why */
int pg_parse_args(int argc, char **argv, struct pg_conf *c);
/* sender.c */
int pg_senders_init(struct pg_state *s);
/* Builds up to n frames that the pacer allows now. */
uint16_t pg_build_burst(struct pg_state *s, struct rte_mbuf **pkts, uint16_t n, uint64_t now);
bool pg_sending_over(const struct pg_state *s);
/* Frame length (no FCS) of a frame of msgs messages of size bytes. */
unsigned pg_frame_len(const struct pg_conf *c, unsigned msgs, unsigned size);
/* rxcount.c: count mode, cheap enough for line rate */
void pg_count_burst(struct pg_state *s, struct rte_mbuf **pkts, uint16_t n);
/* receiver.c */
int pg_receivers_init(struct pg_state *s);
/* A frame of ours to group gi's multicast address (NAK, and the --uto
 * control messages): Ethernet, IPv4 (checksummed, TTL 16), UDP from
 * src_ip:src_port to the Interlink port, the Interlink header h with the
 * group's id, then room for body bytes. Returns the body, for the caller
 * to fill, and the mbuf in *mp, or NULL when no mbuf could be had (the
 * caller counts it). */
uint8_t *pg_ctl_frame(struct pg_state *s, struct rte_mbuf **mp, unsigned gi,
		      struct il_hdr_fields h, uint32_t src_ip, uint16_t src_port, unsigned body);
void pg_receive_burst(struct pg_state *s, struct rte_mbuf **pkts, uint16_t n);
/* Re-NAK stalled gaps and, once sending is over, missing tails. */
void pg_receivers_tick(struct pg_state *s, bool sending_done);
bool pg_receivers_complete(const struct pg_state *s);

/* uto.c: the --uto protocol. */
int pg_uto_init(struct pg_state *s);
/* JOIN every member; 0 once every VIEW named them all, else -1 after
 * printing what was missing. */
int pg_uto_join(struct pg_state *s);
/* ACK, HEARTBEAT and re-JOIN timers; sends what is queued. */
void pg_uto_poll(struct pg_state *s, uint64_t now);
/* A VIEW, CREDIT or STABLE frame of group gi (true: it was one). */
bool pg_uto_on_control(struct pg_state *s, unsigned gi, const uint8_t *h, unsigned type,
		       unsigned hdr_len, unsigned body_len, uint64_t now);
/* A stamped DATA frame of group gi arrived (its watermark). */
void pg_uto_on_data(struct pg_state *s, unsigned gi, const uint8_t *h);
/* Receiver 0 delivered message sseq of sender id at gseq. */
void pg_uto_delivered(struct pg_state *s, unsigned gi, uint32_t id, uint64_t sseq,
		      uint64_t gseq);
/* How many of msgs the sender may send now in group gi (0: it waits). */
unsigned pg_uto_allow(struct pg_state *s, struct pg_sender *snd, unsigned gi, unsigned msgs,
		      uint64_t now);
void pg_uto_sent(struct pg_state *s, struct pg_sender *snd, unsigned gi, unsigned len,
		 uint64_t now);
/* After the run: final ACKs, wait up to secs for every group's watermark
 * to pass its last message; then LEAVE. Returns whether all is stable. */
bool pg_uto_finish(struct pg_state *s, double secs);
uint64_t pg_uto_max_unstable(const struct pg_state *s);

/* pgauth.c: --auth-keys. pg_auth_seal signs a control frame just built
 * (the mbuf grows by the AUTH option); pg_auth_ok says whether one of the
 * appliance's may be taken (counted when not). Both do nothing when off. */
int pg_auth_init(struct pg_state *s);
void pg_auth_seal(struct pg_state *s, struct rte_mbuf *m);
bool pg_auth_ok(struct pg_state *s, const uint8_t *msg, uint32_t len);

/* The queue a frame goes out on: --tx-queue, or with --tx-queue hash the
 * queue of its destination as a sharded appliance assigns it (shard.h). */
static inline uint16_t pg_txq_of(const struct pg_state *s, const struct rte_mbuf *m)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);

	if (s->c.tx_queue != PG_TXQ_HASH)
		return (uint16_t)s->c.tx_queue;
	if (m->data_len < 34 || f[12] != 0x08 || f[13] != 0x00)
		return 0; /* not IPv4: any queue */
	uint32_t dst = (uint32_t)f[30] << 24 | (uint32_t)f[31] << 16 | (uint32_t)f[32] << 8 | f[33];
	return il_shard_of_addr(dst, (uint16_t)s->c.queues);
}

/* A burst from every receive queue of the rx port (--queues): a group's
 * frames come through one queue, so its order is kept. */
static inline uint16_t pg_rx_burst(struct pg_state *s, struct rte_mbuf **rx, uint16_t n)
{
	uint16_t got = 0, nq = (uint16_t)s->c.queues;

	/* Start one queue further each call: a busy queue starves none. */
	s->rxq_next = (uint16_t)((s->rxq_next + 1) % nq);
	for (uint16_t i = 0; i < nq && got < n; i++)
		got = (uint16_t)(got + rte_eth_rx_burst(s->rx_port, (uint16_t)((s->rxq_next + i) % nq),
							rx + got, (uint16_t)(n - got)));
	return got;
}

#endif
