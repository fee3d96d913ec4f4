/* SPDX-License-Identifier: BSD-3-Clause
 * interlink-pktgen: emulated senders and receivers of Interlink groups.
 */
#ifndef IL_PKTGEN_H
#define IL_PKTGEN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <rte_mbuf.h>

#include <interlink/impair.h>

#define PG_MAX_SENDERS 64
#define PG_MAX_RECEIVERS 16
#define PG_MAX_GROUPS 16
#define PG_BURST 32

/* ---- latency histogram (log-linear, HDR-style) ----------------------- */
#define HIST_SUB_BITS 5 /* 32 sub-buckets per power of two: <= 3.1% error */
#define HIST_BUCKETS (64 * (1 << HIST_SUB_BITS))
struct pg_hist {
	uint64_t count, max, sum;
	uint64_t b[HIST_BUCKETS];
};
void pg_hist_add(struct pg_hist *h, uint64_t v);
uint64_t pg_hist_quantile(const struct pg_hist *h, double q);
void pg_hist_merge(struct pg_hist *into, const struct pg_hist *from);

/* ---- configuration --------------------------------------------------- */
struct pg_conf {
	const char *tx_dev, *rx_dev;
	unsigned senders, receivers, groups;
	uint16_t group_base;        /* first group id */
	uint32_t group_addr_base;   /* multicast address of group_base (host order) */
	uint16_t il_port;
	uint64_t count;             /* messages to send in all (0: until duration) */
	double duration;            /* seconds (0: until count) */
	double rate_pps;            /* frames per second in all (0: as fast as possible) */
	unsigned msg_size;          /* payload bytes per message (>= 16) */
	unsigned pack;              /* messages per frame */
	bool udp_csum;
	struct il_loss_cfg loss;    /* per-receiver loss injected on receive */
	uint64_t seed;
	double nak_timeout_us;
	double drain_timeout_s;     /* after sending: wait this long for repairs */
	unsigned reorder_slots;     /* per receiver per group (power of two) */
	unsigned window;            /* per sender: messages not yet delivered everywhere */
	const char *json;
	bool quiet;
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
};

struct pg_sender {
	unsigned id;
	uint64_t seq[PG_MAX_GROUPS]; /* next sender seq per group */
	uint64_t sent_msgs, sent_frames;
};

struct pg_state {
	struct pg_conf c;
	uint16_t tx_port, rx_port;
	uint8_t tx_mac[6];
	struct rte_mempool *pool;
	struct pg_sender senders[PG_MAX_SENDERS];
	struct pg_receiver rx[PG_MAX_RECEIVERS];
	uint64_t group_sent[PG_MAX_GROUPS]; /* messages sent per group */
	uint64_t tx_frames, tx_msgs, tx_retry, rx_frames, rx_other, rx_unavail, rx_bad;
	uint64_t naks_tx, naks_tx_fail;
	uint64_t window_stalls;     /* bursts cut short by the window */
	bool window_off;            /* set once messages were lost for good */
	unsigned next_sender, next_group;
	uint64_t hz;
	volatile bool quit;
};

/* sender.c */
uint16_t pg_build_burst(struct pg_state *s, struct rte_mbuf **pkts, uint16_t n);
/* receiver.c */
int pg_receivers_init(struct pg_state *s);
void pg_receive_burst(struct pg_state *s, struct rte_mbuf **pkts, uint16_t n);
/* Re-NAK stalled gaps and, once sending is over, missing tails. */
void pg_receivers_tick(struct pg_state *s, bool sending_done);
bool pg_receivers_complete(const struct pg_state *s);

#endif
