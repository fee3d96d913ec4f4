/* SPDX-License-Identifier: BSD-3-Clause
 * Authenticated control traffic in a stage (docs/operations.md): the
 * stage's `auth` map (keys, replay_senders, sign_key_id), the check of a
 * received message and the signing of one the stage makes. The control
 * stage checks ACK, JOIN, LEAVE and HEARTBEAT and signs STABLE, VIEW and
 * CREDIT; the nak stage checks NAKs and signs UNAVAIL.
 */
#ifndef IL_STAGE_AUTH_H
#define IL_STAGE_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rte_mbuf.h>

#include <interlink/app.h>
#include <interlink/auth.h>
#include <interlink/config.h>
#include <interlink/stage.h>

struct il_stage_auth {
	struct il_auth_keyring *keys;   /* NULL: auth is off */
	struct il_auth_replay *replay;  /* per sender_id windows */
	const struct il_auth_key *sign; /* what the stage's own frames are signed with */
	uint64_t ctr;                   /* their counter, from the realtime clock at start */
};

/* Reads the stage's `auth` map (absent: off). 0, or -1 with err naming
 * the key. */
int il_stage_auth_create(const struct il_cfg *stage_cfg, struct il_stage_auth *a, char *err,
			 size_t errlen);
void il_stage_auth_free(struct il_stage_auth *a);

/* The Interlink message of a classified frame: IL_AUTH_OK, or a reason
 * to drop it. */
static inline enum il_auth_verdict il_stage_auth_check(struct il_stage_auth *a,
						       struct rte_mbuf *m)
{
	const struct il_meta *mt = il_meta(m);
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);

	return il_auth_verify(a->keys, a->replay, f + mt->il_off,
			      il_get16(f + mt->l4_off + 4) - 8u);
}

/* Room a frame of the stage's own needs for the AUTH option. */
static inline uint16_t il_stage_auth_room(const struct il_stage_auth *a)
{
	return a->sign != NULL ? IL_AUTH_OPT_LEN : 0;
}

/* Signs a frame of the stage's own, built unsigned in an mbuf that has
 * il_stage_auth_room() bytes more at its end; before its UDP checksum. */
static inline void il_stage_auth_sign(struct il_stage_auth *a, struct rte_mbuf *m)
{
	if (a->sign != NULL)
		il_auth_seal_frame(a->sign, ++a->ctr, rte_pktmbuf_mtod(m, uint8_t *),
				   rte_pktmbuf_data_len(m) - IL_AUTH_OPT_LEN);
}

#endif
