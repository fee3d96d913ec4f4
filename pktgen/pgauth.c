/* SPDX-License-Identifier: BSD-3-Clause
 * interlink-pktgen --auth-keys: authenticated control traffic
 * (docs/operations.md): the emulated members sign their JOIN, LEAVE,
 * HEARTBEAT, ACK and NAK, and take the appliance's STABLE, VIEW, CREDIT
 * and UNAVAIL only with a valid MAC and a fresh counter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_mbuf.h>

#include "pktgen.h"

struct pg_auth {
	struct il_auth_keyring ring;
	const struct il_auth_key *sign;
	uint64_t ctr;
	/* The appliance's control stage and its nak stage count apart. */
	struct il_auth_replay *ctl, *nak;
};

#define PG_AUTH_SLOTS 1024u

int pg_auth_init(struct pg_state *s)
{
	struct pg_auth *a;
	char err[512];

	if (s->c.auth_keys == NULL)
		return 0;
	a = calloc(1, sizeof(*a));
	if (a == NULL || (a->ctl = malloc(il_auth_replay_bytes(PG_AUTH_SLOTS))) == NULL ||
	    (a->nak = malloc(il_auth_replay_bytes(PG_AUTH_SLOTS))) == NULL) {
		fprintf(stderr, "interlink-pktgen: out of memory\n");
		return -1;
	}
	if (il_auth_keys_load(s->c.auth_keys, &a->ring, err, sizeof(err))) {
		fprintf(stderr, "interlink-pktgen: --auth-keys: %s\n", err);
		return -1;
	}
	a->sign = s->c.auth_key_id ? il_auth_key_find(&a->ring, s->c.auth_key_id) : &a->ring.k[0];
	if (a->sign == NULL) {
		fprintf(stderr, "interlink-pktgen: --auth-key-id %u: no such key in '%s'\n",
			s->c.auth_key_id, s->c.auth_keys);
		return -1;
	}
	il_auth_replay_init(a->ctl, PG_AUTH_SLOTS);
	il_auth_replay_init(a->nak, PG_AUTH_SLOTS);
	a->ctr = il_auth_counter_start();
	s->auth = a;
	return 0;
}

void pg_auth_seal(struct pg_state *s, struct rte_mbuf *m)
{
	uint16_t len = rte_pktmbuf_data_len(m);

	if (s->auth == NULL)
		return;
	if (rte_pktmbuf_append(m, IL_AUTH_OPT_LEN) == NULL)
		return; /* no room: it goes unsigned and the appliance drops it */
	il_auth_seal_frame(s->auth->sign, ++s->auth->ctr, rte_pktmbuf_mtod(m, uint8_t *), len);
	s->auth_signed++;
}

bool pg_auth_ok(struct pg_state *s, const uint8_t *msg, uint32_t len)
{
	if (s->auth == NULL)
		return true;
	struct il_auth_replay *r = msg[IL_OFF_TYPE] == IL_T_UNAVAIL ? s->auth->nak : s->auth->ctl;

	switch (il_auth_verify(&s->auth->ring, r, msg, len)) {
	case IL_AUTH_OK:
		return true;
	case IL_AUTH_BAD_MAC:
		s->auth_bad_mac++;
		return false;
	default:
		s->auth_replay++;
		return false;
	}
}
