/* SPDX-License-Identifier: BSD-3-Clause
 *
 * An in-process LEC network for the tests: n nodes, each in `degree`
 * groups picked at random out of `groups` (the paper's n * d = g * s),
 * one LEC instance per node. Messages go to a random group, one at a
 * time; every member decides with its own loss model (independent across
 * nodes) whether it receives each data message and each repair sent to
 * it. Every recovered message is checked byte for byte, and every node
 * records what it delivered so a second delivery of any id is caught.
 */
#ifndef IL_LEC_SIM_H
#define IL_LEC_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include <interlink/impair.h>
#include <interlink/lec.h>

struct lsim_cfg {
	uint32_t nodes, groups, degree;
	uint64_t msgs;
	uint32_t min_len, max_len;  /* payload lengths, uniform */
	struct il_loss_cfg loss;    /* per node, on data and repairs */
	struct il_lec_cfg lec;      /* r, c, stagger, stores, xor_impl */
	uint32_t tail;              /* losses among the last `tail` messages
	                             * are not counted (their bins have not
	                             * fired yet) */
	uint64_t msg_ns;            /* virtual time per message */
	uint64_t seed;
	/* Appliance-side LEC (docs/lec.md, the lec stage): the nodes send no
	 * repairs (decode only); an observer that receives every message
	 * without loss repairs them with app_lec (plan, layers), each group
	 * at the peers' rate, c_G = |G| min(c, |G| - 1), as the stage's
	 * `rate: peers`. Its repairs reach each target with the target's own
	 * loss, as a repair to the group's address does. */
	bool appliance;
	struct il_lec_cfg app_lec;
	/* phase 0: everything allocated; phase 1: about to free */
	void (*hook)(int phase, void *arg);
	void *hook_arg;
};

struct lsim_res {
	uint64_t receipts;  /* (node, message) pairs that should arrive */
	uint64_t lost;      /* of which lost, counted ones */
	uint64_t recovered; /* of the counted losses, recovered by LEC */
	uint64_t recovered_all;
	uint64_t bad;       /* recovered bytes or length wrong */
	uint64_t double_delivery; /* an id delivered twice by one node */
	uint64_t queue_overflow;  /* repairs the harness could not hold */
	uint64_t repairs_sent, repair_copies, repair_copies_lost;
	/* recovery latency: data messages sent to the node (in any of its
	 * groups) from the loss to the recovery, the loss's own included */
	double lat_mean, lat_p50, lat_p90;
	double xors_per_msg;   /* encoding: two-input XORs per message held
	                        * (received or recovered) */
	double copies_per_msg; /* payload copies into empty bins, likewise */
	struct il_lec_stats sum; /* counters summed over nodes (live/hwm: max) */
	size_t footprint;        /* one node */
};

void lsim_cfg_defaults(struct lsim_cfg *sc);
/* 0, or -1 with a message on stderr (bad configuration). */
int lsim_run(const struct lsim_cfg *sc, struct lsim_res *res);

/* Deterministic payload of (group, seq). */
void lsim_payload(uint8_t *buf, uint16_t group, uint64_t seq, uint32_t len);

#endif /* IL_LEC_SIM_H */
