/* SPDX-License-Identifier: BSD-3-Clause
 * libinterlink's side of authenticated control traffic (docs/libinterlink.md,
 * docs/wire-format.md "AUTH option"): the keys, our control messages signed
 * with a counter that starts at the realtime clock (a restarted host is not
 * mistaken for a replay of its previous life), the appliance's checked
 * against the keys and a replay window per sender_id.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <interlink/auth.h>
#include <interlink/err.h>
#include <interlink/wire.h>

#include "ep_priv.h"

/* Windows per table: one per sender_id the appliance signs as (STABLE and
 * VIEW: 0; CREDIT: each sender it is for; UNAVAIL: each requester). */
#define EP_AUTH_SLOTS 1024u

int il_ep_set_auth(struct il_ep *ep, const char *key_file, uint32_t key_id, char *err,
		   size_t errlen)
{
	char kerr[512];

	for (unsigned i = 0; i < ep->n_slots; i++)
		if (ep->g[i].used) {
			il_err(err, errlen, "libinterlink: il_ep_set_auth after il_ep_join: the "
			       "JOINs already went unsigned");
			return -EBUSY;
		}
	ep_auth_free(ep);
	ep->auth = calloc(1, sizeof(*ep->auth));
	ep->auth_ctl = malloc(il_auth_replay_bytes(EP_AUTH_SLOTS));
	ep->auth_nak = malloc(il_auth_replay_bytes(EP_AUTH_SLOTS));
	if (ep->auth == NULL || ep->auth_ctl == NULL || ep->auth_nak == NULL) {
		ep_auth_free(ep);
		il_err(err, errlen, "libinterlink: out of memory");
		return -ENOMEM;
	}
	if (il_auth_keys_load(key_file, ep->auth, kerr, sizeof(kerr))) {
		ep_auth_free(ep);
		il_err(err, errlen, "libinterlink: %s", kerr);
		return -EINVAL;
	}
	ep->auth_sign = key_id ? il_auth_key_find(ep->auth, key_id) : &ep->auth->k[0];
	if (ep->auth_sign == NULL) {
		ep_auth_free(ep);
		il_err(err, errlen, "libinterlink: key id %u is not in '%s'", key_id, key_file);
		return -ENOENT;
	}
	il_auth_replay_init(ep->auth_ctl, EP_AUTH_SLOTS);
	il_auth_replay_init(ep->auth_nak, EP_AUTH_SLOTS);
	ep->auth_ctr = il_auth_counter_start();
	return 0;
}

void ep_auth_free(struct il_ep *ep)
{
	if (ep->auth != NULL)
		memset(ep->auth, 0, sizeof(*ep->auth)); /* the keys do not outlive us */
	free(ep->auth);
	free(ep->auth_ctl);
	free(ep->auth_nak);
	ep->auth = NULL;
	ep->auth_ctl = ep->auth_nak = NULL;
	ep->auth_sign = NULL;
}

void il_ep_get_auth_stats(const struct il_ep *ep, struct il_ep_auth_stats *st)
{
	*st = ep->auth_st;
}

size_t ep_auth_seal(struct il_ep *ep, uint8_t *msg, size_t len)
{
	if (ep->auth_sign == NULL)
		return len;
	ep->auth_st.signed_tx++;
	return il_auth_seal(ep->auth_sign, ++ep->auth_ctr, msg, (uint32_t)len);
}

bool ep_auth_ok(struct il_ep *ep, const uint8_t *msg, size_t len)
{
	if (ep->auth == NULL)
		return true;
	struct il_auth_replay *r = msg[IL_OFF_TYPE] == IL_T_UNAVAIL ? ep->auth_nak : ep->auth_ctl;

	switch (il_auth_verify(ep->auth, r, msg, (uint32_t)len)) {
	case IL_AUTH_OK:
		ep->auth_st.verified_rx++;
		return true;
	case IL_AUTH_BAD_MAC:
		ep->auth_st.bad_mac++;
		return false;
	default:
		ep->auth_st.replay++;
		return false;
	}
}
