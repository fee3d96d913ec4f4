/* SPDX-License-Identifier: BSD-3-Clause
 * Authenticated control messages (docs/wire-format.md, "AUTH option"):
 * keys from a file, the MAC (keyed BLAKE2b from libsodium, 16 bytes), and
 * a sliding replay window per sender. DPDK-free; the data plane, the
 * generators and the tests link it.
 *
 * Everything that runs per message (sign, verify, the replay check) works
 * on memory the caller set up in advance: no allocation, no lock, no
 * syscall, so the data plane's fast path may call it.
 */
#ifndef INTERLINK_AUTH_H
#define INTERLINK_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include <interlink/wire.h>

#define IL_AUTH_KEY_LEN 32u
#define IL_AUTH_MAX_KEYS 16u
/* Counters this far below a sender's highest are still accepted once. */
#define IL_AUTH_WINDOW 64u

struct il_auth_key {
	uint32_t id;
	uint8_t key[IL_AUTH_KEY_LEN];
};

struct il_auth_keyring {
	unsigned n;
	struct il_auth_key k[IL_AUTH_MAX_KEYS];
};

/* Reads a key file: one key a line, "<id> <64 hex digits>" (id a decimal
 * u32), '#' comments and blank lines skipped, ids unique. The file must
 * be a regular file that neither group nor others may read or write
 * (mode 0600 or stricter). 0, or -1 with a message naming the file and
 * line in err. */
int il_auth_keys_load(const char *path, struct il_auth_keyring *kr, char *err, size_t errlen);

const struct il_auth_key *il_auth_key_find(const struct il_auth_keyring *kr, uint32_t id);

/* The first counter of a process that signs: the realtime clock in
 * nanoseconds, so that a restarted sender's counters start above those of
 * its previous life (as long as the clock does not step back). */
uint64_t il_auth_counter_start(void);

/* Signs the Interlink message at msg (len bytes: the UDP payload), whose
 * header already carries IL_F_AUTH and hdr_len >= IL_AUTH_HDR_LEN: fills
 * key_id, counter and mac. */
void il_auth_sign(const struct il_auth_key *k, uint64_t counter, uint8_t *msg, uint32_t len);

/* Turns an unsigned message (a 40-byte header, body after it) into a
 * signed one in place: moves the body up by IL_AUTH_OPT_LEN (the buffer
 * must have the room), sets IL_F_AUTH and hdr_len, signs. Returns the new
 * length. */
uint32_t il_auth_seal(const struct il_auth_key *k, uint64_t counter, uint8_t *msg,
		      uint32_t len);

/* The same for a whole untagged Ethernet/IPv4/UDP frame (IPv4 without
 * options) of len bytes: also fixes the IPv4 and UDP lengths and the IPv4
 * checksum, and the UDP checksum if the frame had one. New length. */
uint32_t il_auth_seal_frame(const struct il_auth_key *k, uint64_t counter, uint8_t *f,
			    uint32_t len);

/* Per-sender replay state: an open-addressed table of windows the caller
 * allocates (il_auth_replay_bytes(slots), zeroed; slots a power of two). */
struct il_auth_win {
	uint32_t sender;
	uint32_t used;
	uint64_t top;  /* highest counter accepted */
	uint64_t bits; /* bit i: top - i was accepted */
};

struct il_auth_replay {
	uint32_t mask; /* slots - 1 */
	uint32_t n_used;
	struct il_auth_win w[];
};

static inline size_t il_auth_replay_bytes(uint32_t slots)
{
	return sizeof(struct il_auth_replay) + (size_t)slots * sizeof(struct il_auth_win);
}

void il_auth_replay_init(struct il_auth_replay *r, uint32_t slots);

enum il_auth_verdict {
	IL_AUTH_OK = 0,
	IL_AUTH_BAD_MAC, /* no AUTH option, an unknown key id, or a wrong MAC */
	IL_AUTH_REPLAY,  /* a counter seen before or below the window (or no room
			  * for a new sender in the replay table) */
};

/* Checks the message at msg (len bytes, the UDP payload, as the parser
 * accepted it) and, when the MAC is right, the sender's counter against
 * its window, which it then advances. The sender is the header's
 * sender_id; r may be NULL (no replay check). */
enum il_auth_verdict il_auth_verify(const struct il_auth_keyring *kr, struct il_auth_replay *r,
				    const uint8_t *msg, uint32_t len);

#endif /* INTERLINK_AUTH_H */
