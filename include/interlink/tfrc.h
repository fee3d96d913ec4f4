/* SPDX-License-Identifier: BSD-3-Clause
 *
 * TCP-friendly rate for many-to-many groups (Shnayderman 2006, ch. 4;
 * the TCP model of Padhye et al.): the equation, the sender delegate's
 * RTT estimator (Fig. 4.3) and the receiver delegate's loss-event rate
 * estimator (section 4.3.2). Pure computation, no I/O, no allocation
 * after init: usable by the control process and the data plane alike.
 *
 * Times are nanoseconds on any monotonic clock; each estimator only ever
 * subtracts times taken on one host (the RTT estimator needs no clock
 * synchronisation: Delta is measured at the receiver and subtracted).
 */
#ifndef INTERLINK_TFRC_H
#define INTERLINK_TFRC_H

#include <stdbool.h>
#include <stdint.h>

/* Eq. 4.1 with b = 2 packets per ACK and RTO = 4 RTT:
 *
 *   T = s / (RTT sqrt(2bp/3) + RTO min(1, sqrt(27bp/8)) p (1 + 32 p^2))
 *
 * s_bits: mean packet size in bits; rtt_s: seconds; p: loss-event rate in
 * [0, 1]. Returns bits/s; +infinity when p == 0 (no loss event seen: the
 * rate is not limited by this receiver and slow start applies, 4.3.4);
 * NaN for rtt_s <= 0, s_bits <= 0 or p outside [0, 1]. */
double il_tfrc_rate(double s_bits, double rtt_s, double p);
/* The general form, for tests and experiments. */
double il_tfrc_rate_ex(double s_bits, double rtt_s, double p, double b, double rto_s);

#define IL_TFRC_B 2.0
#define IL_TFRC_RTO_FACTOR 4.0

/* RTT estimation at the sender's delegate (Fig. 4.3).
 * SD records T_out when it forwards packet `seq` of a group; each RD
 * acknowledges it with Delta = T_ack - T_arr (its own hold time); SD, at
 * T_now, takes  RTT = (T_now - T_out) - Delta  for that RD.
 * A packet sent twice (a retransmission reuses its sequence number) gives
 * an ambiguous sample and is excluded.
 *
 * struct il_tfrc_sendlog: T_out per seq of one group, shared by all RDs;
 * a direct-mapped table of 2^k entries indexed by seq, so recording is
 * O(1) and an ACK for a seq overwritten since gives no sample.
 * struct il_tfrc_rtt: one RD's smoothed RTT. */
struct il_tfrc_sendlog_slot {
	uint64_t seq;
	uint64_t t_out;
	uint8_t state; /* 0 empty, 1 sent once, 2 retransmitted */
};

struct il_tfrc_sendlog {
	struct il_tfrc_sendlog_slot *slot;
	uint32_t mask;
	uint64_t excluded; /* ACKs that gave no sample */
};

/* table: caller-provided, mask + 1 slots, mask = 2^k - 1, zeroed here. */
void il_tfrc_sendlog_init(struct il_tfrc_sendlog *lg, struct il_tfrc_sendlog_slot *table,
			  uint32_t mask);
void il_tfrc_sent(struct il_tfrc_sendlog *lg, uint64_t seq, uint64_t t_out_ns);
/* (T_now - T_out) - Delta in ns, or -1 when the seq is unknown, was
 * retransmitted, or the arithmetic gives a negative RTT. */
int64_t il_tfrc_rtt_from_ack(struct il_tfrc_sendlog *lg, uint64_t seq, uint64_t t_now_ns,
			     uint64_t delta_ns);
/* The bare Fig. 4.3 arithmetic; -1 if negative. */
int64_t il_tfrc_rtt_sample(uint64_t t_out_ns, uint64_t t_now_ns, uint64_t delta_ns);

struct il_tfrc_rtt {
	double weight;  /* EWMA weight of a new sample, (0, 1] */
	double srtt_ns; /* 0 until the first sample */
	double last_ns;
	uint64_t samples;
};

/* The thesis smooths the RTT with a weighted average without giving the
 * weight; 0.125, as TCP's SRTT, is a sensible default. */
void il_tfrc_rtt_init(struct il_tfrc_rtt *r, double weight);
/* Fold a sample (ignored if < 0); returns the smoothed RTT in ns. */
double il_tfrc_rtt_update(struct il_tfrc_rtt *r, int64_t sample_ns);

/* Loss-event rate at the receiver's delegate (section 4.3.2).
 * One estimator per <RD, SD, group>: all flows from one sending LAN are
 * merged into one meta-flow; each flow keeps its own sequence tracking
 * (struct il_tfrc_flow, owned by the caller).
 *  - A gap in a flow's sequence numbers is a loss; a lost packet's
 *    nominal arrival time is interpolated between its neighbours'.
 *  - A loss starts a loss event unless it falls within RTT of the start
 *    of the current one (then it is part of it and ignored).
 *  - The interval between events starting at T1 and T2 counts the
 *    packets of all flows arriving in [T1 + RTT, T2) (TFRC counts the
 *    first RTT too; the thesis, following the model, does not).
 *  - Eq. 4.2: I_mean = I_past/2 + I_sample/2. At a new event I_mean is
 *    computed with the finished interval and becomes I_past; in between,
 *    I_mean is only updated while I_sample >= I_past (so it cannot fall
 *    right after an event, and grows during a long loss-free stretch).
 *  - p = 1 / I_mean; 0 before the first loss event.
 * The first interval (before any loss event) has no I_past: at the first
 * event, I_mean = the packets received before it (at least 1). */
struct il_tfrc_flow {
	uint64_t next_seq; /* next expected */
	uint64_t last_ns;  /* arrival of the highest seq so far */
	bool started;
};

/* Counted arrivals remembered so that a loss detected late (its nominal
 * time interpolated before arrivals of other flows already counted) can
 * take those arrivals back out of the finished interval. */
#define IL_TFRC_RECENT 64

struct il_tfrc_loss {
	uint64_t rtt_ns;      /* from the sender's delegate; > 0 */
	bool in_history;      /* at least one loss event seen */
	uint64_t event_ns;    /* T1: start of the current loss event */
	double i_sample;      /* packets counted since the end of the last event */
	double i_past;
	double i_mean;
	uint64_t events;      /* loss events */
	uint64_t lost;        /* lost packets (all, in or out of events) */
	uint64_t received;
	uint64_t late;        /* arrived below next_seq: reordered or duplicate */
	uint64_t recent[IL_TFRC_RECENT]; /* times of the last counted arrivals */
	unsigned n_recent, recent_pos;
};

void il_tfrc_flow_init(struct il_tfrc_flow *f);
void il_tfrc_loss_init(struct il_tfrc_loss *l, uint64_t rtt_ns);
void il_tfrc_loss_set_rtt(struct il_tfrc_loss *l, uint64_t rtt_ns);
/* A packet of flow f with sequence number seq arrived at t_ns (t_ns
 * non-decreasing across calls). Returns how many loss events it started
 * (0 or 1). */
unsigned il_tfrc_loss_rx(struct il_tfrc_loss *l, struct il_tfrc_flow *f, uint64_t seq,
			 uint64_t t_ns);
double il_tfrc_loss_p(const struct il_tfrc_loss *l);
/* The acceptable receiving rate this RD reports (bits/s, +inf if p = 0). */
double il_tfrc_loss_rate(const struct il_tfrc_loss *l, double s_bits);

/* Max-min fair split of a group's rate among its senders (section 4.3.3).
 *
 * The sender delegate (here the appliance) must not let a group's senders
 * together exceed the TCP-friendly rate: it divides it max-min fairly
 * (water-filling). No sender gets more than it asks for while another that
 * asks for more gets less than it; what no sender asks for is spread evenly
 * over all of them, so that each can show that it wants more. Rates in
 * kbit/s. n <= IL_TFRC_SPLIT_MAX; demand IL_TFRC_DEMAND_ANY: as much as it
 * can get. Every share is at least 1 (0 would mean "no limit" on the wire),
 * so with a rate below n kbit/s the shares may sum to up to rate + n.
 * rate 0 (no limit): all 0. */
#define IL_TFRC_SPLIT_MAX 256
#define IL_TFRC_DEMAND_ANY UINT32_MAX
void il_tfrc_split(uint32_t rate_kbps, unsigned n, const uint32_t *demand_kbps,
		   uint32_t *share_kbps);
/* What a sender asks for next, from the share it had and the rate it used
 * meanwhile (measured at the delegate): a sender that used at least 7/8 of
 * its share was held back by it and asks for twice as much (the thesis'
 * doubling); one that used less asks for what it used plus a quarter. At
 * least floor_kbps. No share yet (a new sender): IL_TFRC_DEMAND_ANY. */
uint32_t il_tfrc_demand(uint32_t share_kbps, uint32_t used_kbps, uint32_t floor_kbps);

#endif
