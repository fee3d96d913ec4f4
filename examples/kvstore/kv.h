/* SPDX-License-Identifier: BSD-3-Clause
 * il-kvstore: what kvstore.c (options, writer) and replica.c share.
 */
#ifndef IL_KV_H
#define IL_KV_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include <interlink/endpoint.h>
#include <interlink/wire.h>

#define KV_MAX_PEERS 8
/* PUT: u32 key, u64 value, big-endian. Values are never 0 (0: unset). */
#define KV_PUT_LEN 12

struct opts {
	const char *tx, *rx, *mcast, *status, *log;
	const char *auth_keys; /* --auth-keys: authenticated control traffic */
	uint32_t auth_key_id;
	uint32_t id, keys;
	uint16_t group;
	uint64_t count, seed, rate; /* rate: PUTs/s per writer, 0 = credits only */
	uint64_t bursts;            /* rate: in this many bursts a second (default 10) */
	struct sockaddr_in listen, peers[KV_MAX_PEERS];
	unsigned n_peers;
	bool has_listen, recover;
};

extern struct opts kv_opts;

static inline void kv_put_encode(uint8_t *b, uint32_t key, uint64_t value)
{
	il_put32(b, key);
	il_put64(b + 4, value);
}

int kv_replica(struct il_ep *ep, volatile bool *stop);

/* The auth counters (all zero without --auth-keys) into a status file. */
struct il_json;
void kv_auth_status(struct il_json *j, const struct il_ep *ep);

#endif
