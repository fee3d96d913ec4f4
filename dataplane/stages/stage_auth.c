/* SPDX-License-Identifier: BSD-3-Clause
 * A stage's `auth` map (stage_auth.h).
 */
#include <string.h>

#include <rte_malloc.h>

#include <interlink/err.h>

#include "stage_auth.h"

int il_stage_auth_create(const struct il_cfg *p, struct il_stage_auth *a, char *err,
			 size_t errlen)
{
	static const char *const keys[] = {"keys", "replay_senders", "sign_key_id", NULL};
	const struct il_cfg *n = il_cfg_get(p, "auth");
	const char *path;
	uint64_t senders, sign_id;
	char kerr[512];

	memset(a, 0, sizeof(*a));
	if (n == NULL)
		return 0;
	if (il_cfg_kind(n) != IL_CFG_MAP)
		return ERR("config: key '%s' must be a map: {keys: FILE, replay_senders: N, "
			   "sign_key_id: ID}", il_cfg_path(n));
	if (il_cfg_check_keys(n, keys, err, errlen) ||
	    il_cfg_str(n, "keys", NULL, &path, err, errlen) ||
	    il_cfg_u64(n, "replay_senders", 1024, 16, 1u << 20, &senders, err, errlen) ||
	    il_cfg_u64(n, "sign_key_id", 0, 0, UINT32_MAX, &sign_id, err, errlen))
		return -1;
	if (path == NULL || path[0] == '\0')
		return ERR("config: key '%s.keys' is missing: the key file (lines '<key id> "
			   "<64 hex digits>', mode 0600)", il_cfg_path(n));
	if (senders & (senders - 1))
		return ERR("config: key '%s.replay_senders': %lu is not a power of two",
			   il_cfg_path(n), senders);
	a->keys = rte_zmalloc("il_auth_keys", sizeof(*a->keys), RTE_CACHE_LINE_SIZE);
	a->replay = rte_zmalloc("il_auth_replay", il_auth_replay_bytes((uint32_t)senders),
				RTE_CACHE_LINE_SIZE);
	if (a->keys == NULL || a->replay == NULL)
		return ERR("config: key '%s': out of memory", il_cfg_path(n));
	if (il_auth_keys_load(path, a->keys, kerr, sizeof(kerr)))
		return ERR("config: key '%s.keys': %s", il_cfg_path(n), kerr);
	il_auth_replay_init(a->replay, (uint32_t)senders);
	a->sign = il_cfg_get(n, "sign_key_id") == NULL ? &a->keys->k[0] :
		  il_auth_key_find(a->keys, (uint32_t)sign_id);
	if (a->sign == NULL)
		return ERR("config: key '%s.sign_key_id': %lu is not a key id of '%s'",
			   il_cfg_path(n), sign_id, path);
	a->ctr = il_auth_counter_start();
	return 0;
}

void il_stage_auth_free(struct il_stage_auth *a)
{
	if (a->keys != NULL)
		memset(a->keys, 0, sizeof(*a->keys));
	rte_free(a->keys);
	rte_free(a->replay);
	memset(a, 0, sizeof(*a));
}
