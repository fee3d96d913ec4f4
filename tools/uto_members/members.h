/* SPDX-License-Identifier: BSD-3-Clause
 * il-uto-members: what members.c (the protocol and the main loop) and
 * members_report.c (command line, percentiles, the JSON report) share.
 */
#ifndef IL_UTO_MEMBERS_H
#define IL_UTO_MEMBERS_H

#include <stdbool.h>
#include <stdint.h>

#define MAXR 16
#define MAXS 16
#define MAXEV 32
#define RING (1u << 21) /* global sequences remembered (power of two) */
#define HB 20000        /* latency histogram buckets of 10 us: 200 ms */
#define H 42            /* Interlink header offset */

struct msgrec {
	uint64_t g;     /* global sequence (0: none) */
	uint32_t sender;
	uint64_t sseq;
	uint64_t sent_ns;
	uint64_t po_ns; /* first PO delivery (all receivers share the clock) */
};

enum rstate { R_IDLE, R_JOINING, R_MEMBER, R_DEAD, R_SILENT };

struct rcv {
	uint32_t id, inc;
	enum rstate st;
	uint64_t start, po, uto; /* start point; next to PO/UTO-deliver */
	uint64_t hi;             /* highest sequence held + 1 */
	uint8_t *have;           /* RING bits */
	uint32_t view;
	uint64_t last_ack_ns, last_hb_ns, last_join_ns, last_nak_ns, acked;
	uint64_t po_n, uto_n, buffer_drops, rejoins, excluded_at_ns, joined_ns;
	uint64_t gap_ns, gap_po;
	uint8_t *got[MAXS];      /* per sender and sender_seq: epoch number (1, 2, ...)
				  * it was U-delivered in; 0: not yet */
	uint64_t redelivered;    /* U-delivered again in a later epoch: must not be */
	bool whole;              /* a member from the start, never excluded */
	uint64_t dup_skipped;    /* stamped twice (re-sent): delivered once */
	uint64_t killed_ns;      /* --kill: when */
	double excluded_after_s; /* from its death to the VIEW without it */
	/* The sender entries of the VIEW it joined by (Fast-Join check). */
	unsigned n_fj;
	uint32_t fj_sender[MAXS];
	uint64_t fj_next[MAXS];
};

struct snd {
	uint32_t id;
	bool member;
	uint64_t next;     /* next sender_seq to send */
	uint64_t limit;    /* credit: may send below this (0: none seen) */
	uint64_t stable_next, max_unstable;
	uint64_t *gseq;    /* sender_seq -> global sequence */
	uint64_t last_join_ns;
	uint64_t unseen, unseen_ns; /* first sender_seq not yet seen stamped */
	uint64_t resent, rewound;
	uint64_t resend_at; /* next sender_seq to re-send in this round */
};

enum evk { EV_KILL, EV_LATE, EV_SILENT };
struct ev {
	enum evk k;
	unsigned r;
	double at, until;
	bool done;
};

struct opts {
	const char *tx_if, *rx_if, *json;
	uint16_t group, udp_port;
	uint32_t mcast;
	unsigned ns, nr, size, ack_every, ack_us, hb_ms, nak_us, resend_ms;
	uint64_t count, buffer, window;
	double rate, max_s, settle_s;
	bool need_credit, no_check;
	/* --auth-keys: sign every control message with key auth_key_id */
	const char *auth_keys;
	uint32_t auth_key_id;
	struct ev ev[MAXEV];
	unsigned n_ev;
};

struct counters {
	uint64_t data_rx, data_dup, stable_rx, view_rx, credit_rx, unavail_rx;
	uint64_t ack_tx, hb_tx, join_tx, nak_tx, data_tx, data_frames_tx, send_fail;
	uint64_t disagreements, uniform_violations, restamped, epochs, max_g;
	uint64_t max_gap_ns; /* longest time between two loop iterations */
	uint64_t lost_stable, finals;
	uint64_t stale_epoch; /* frames of an epoch older than the newest seen (docs/ha.md) */
	uint64_t auth_bad_mac, auth_replay; /* --auth-keys: appliance frames refused */
	uint64_t loops, waits, rx_calls, tx_calls, frames_tx; /* the emulator's own cost */
};

extern struct opts o;
extern struct counters c;
extern struct rcv R[MAXR];
extern struct snd S[MAXS];
extern struct msgrec *msgs; /* RING entries, by global sequence */
extern uint32_t epoch;
extern uint64_t stable;
extern uint64_t lat_po[HB], lat_uto[HB], lat_diff[HB];

/* members_report.c */
void parse(int argc, char **argv);
void hist(uint64_t *h, uint64_t ns);
void report(double elapsed, double t_first, double t_last);

#endif
