/* SPDX-License-Identifier: BSD-3-Clause
 * Authenticated control messages (include/interlink/auth.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include <interlink/auth.h>
#include <interlink/frame.h>

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#define KERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

int il_auth_keys_load(const char *path, struct il_auth_keyring *kr, char *err, size_t errlen)
{
	struct stat sb;
	char line[512];
	unsigned ln = 0;
	int fd;
	FILE *f;

	memset(kr, 0, sizeof(*kr));
	if (sodium_init() < 0)
		return KERR("auth: libsodium could not initialise");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return KERR("auth key file '%s': %s", path, strerror(errno));
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return KERR("auth key file '%s': not a regular file", path);
	}
	if (sb.st_mode & 077) {
		close(fd);
		return KERR("auth key file '%s': mode %04o lets others read or change the keys; "
			    "allowed: 0600 or stricter (chmod 600 '%s')", path,
			    (unsigned)(sb.st_mode & 07777), path);
	}
	f = fdopen(fd, "r");
	if (f == NULL) {
		close(fd);
		return KERR("auth key file '%s': %s", path, strerror(errno));
	}
	while (fgets(line, sizeof(line), f)) {
		char *s = line, *e;
		unsigned long id;

		ln++;
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '#' || *s == '\n' || *s == '\r' || *s == '\0')
			continue;
		errno = 0;
		id = strtoul(s, &e, 10);
		if (e == s || errno || id > UINT32_MAX || (*e != ' ' && *e != '\t'))
			goto bad;
		while (*e == ' ' || *e == '\t')
			e++;
		if (kr->n == IL_AUTH_MAX_KEYS) {
			fclose(f);
			return KERR("auth key file '%s' line %u: more than %u keys", path, ln,
				    IL_AUTH_MAX_KEYS);
		}
		if (il_auth_key_find(kr, (uint32_t)id)) {
			fclose(f);
			return KERR("auth key file '%s' line %u: key id %lu given twice", path, ln,
				    id);
		}
		struct il_auth_key *k = &kr->k[kr->n];
		for (unsigned i = 0; i < IL_AUTH_KEY_LEN; i++) {
			int hi = hexval(e[2 * i]), lo = hi < 0 ? -1 : hexval(e[2 * i + 1]);
			if (hi < 0 || lo < 0)
				goto bad;
			k->key[i] = (uint8_t)(hi << 4 | lo);
		}
		e += 2 * IL_AUTH_KEY_LEN;
		while (*e == ' ' || *e == '\t' || *e == '\r' || *e == '\n')
			e++;
		if (*e != '\0' && *e != '#')
			goto bad;
		k->id = (uint32_t)id;
		kr->n++;
		continue;
bad:
		fclose(f);
		sodium_memzero(kr, sizeof(*kr));
		return KERR("auth key file '%s' line %u: expected '<key id> <%u hex digits>' "
			    "(key id a decimal number up to 4294967295)", path, ln,
			    2 * IL_AUTH_KEY_LEN);
	}
	fclose(f);
	sodium_memzero(line, sizeof(line));
	if (kr->n == 0)
		return KERR("auth key file '%s': no keys in it", path);
	return 0;
}

const struct il_auth_key *il_auth_key_find(const struct il_auth_keyring *kr, uint32_t id)
{
	for (unsigned i = 0; i < kr->n; i++)
		if (kr->k[i].id == id)
			return &kr->k[i];
	return NULL;
}

uint64_t il_auth_counter_start(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The MAC of a message whose header carries the AUTH option. */
static void mac_of(const struct il_auth_key *k, const uint8_t *msg, uint32_t len,
		   uint8_t out[IL_AUTH_MAC_LEN])
{
	crypto_generichash_state st;
	uint32_t hl = msg[IL_OFF_HDR_LEN];

	crypto_generichash_init(&st, k->key, IL_AUTH_KEY_LEN, IL_AUTH_MAC_LEN);
	crypto_generichash_update(&st, msg, IL_OFF_AUTH_MAC);
	crypto_generichash_update(&st, msg + hl, len - hl);
	crypto_generichash_final(&st, out, IL_AUTH_MAC_LEN);
}

void il_auth_sign(const struct il_auth_key *k, uint64_t counter, uint8_t *msg, uint32_t len)
{
	il_put32(msg + IL_OFF_AUTH_KEY_ID, k->id);
	il_put64(msg + IL_OFF_AUTH_COUNTER, counter);
	mac_of(k, msg, len, msg + IL_OFF_AUTH_MAC);
}

uint32_t il_auth_seal(const struct il_auth_key *k, uint64_t counter, uint8_t *msg, uint32_t len)
{
	memmove(msg + IL_AUTH_HDR_LEN, msg + IL_HDR_LEN, len - IL_HDR_LEN);
	msg[IL_OFF_HDR_LEN] = IL_AUTH_HDR_LEN;
	msg[IL_OFF_FLAGS] |= IL_F_AUTH;
	len += IL_AUTH_OPT_LEN;
	il_auth_sign(k, counter, msg, len);
	return len;
}

uint32_t il_auth_seal_frame(const struct il_auth_key *k, uint64_t counter, uint8_t *f,
			    uint32_t len)
{
	uint8_t *ip = f + IL_ETH_HLEN;
	uint16_t had_csum = il_get16(ip + IL_IPV4_HLEN + 6);
	uint32_t plen = il_auth_seal(k, counter, f + IL_UDP_HDRS_LEN, len - IL_UDP_HDRS_LEN);

	il_udp_frame_set_len(f, (uint16_t)plen);
	if (had_csum)
		il_udp_csum_set(ip);
	return IL_UDP_HDRS_LEN + plen;
}

void il_auth_replay_init(struct il_auth_replay *r, uint32_t slots)
{
	memset(r, 0, il_auth_replay_bytes(slots));
	r->mask = slots - 1;
}

/* The sender's window, a new one if it has none (NULL: the table is 3/4
 * full, so that probes stay short; an attacker with a valid key could fill
 * it, but one with a valid key is trusted anyway). */
static struct il_auth_win *win_of(struct il_auth_replay *r, uint32_t sender)
{
	uint32_t i = (sender * 2654435761u) & r->mask;

	for (;; i = (i + 1) & r->mask) {
		struct il_auth_win *w = &r->w[i];
		if (w->used && w->sender == sender)
			return w;
		if (!w->used) {
			if (r->n_used >= (r->mask + 1) / 4 * 3)
				return NULL;
			w->used = 1;
			w->sender = sender;
			r->n_used++;
			return w;
		}
	}
}

static enum il_auth_verdict replay_check(struct il_auth_replay *r, uint32_t sender,
					 uint64_t ctr)
{
	struct il_auth_win *w = win_of(r, sender);

	if (w == NULL || ctr == 0)
		return IL_AUTH_REPLAY;
	if (ctr > w->top) {
		uint64_t d = ctr - w->top;
		w->bits = d >= IL_AUTH_WINDOW ? 1 : (w->bits << d) | 1;
		w->top = ctr;
		return IL_AUTH_OK;
	}
	uint64_t back = w->top - ctr;
	if (back >= IL_AUTH_WINDOW || (w->bits >> back) & 1)
		return IL_AUTH_REPLAY;
	w->bits |= 1ull << back;
	return IL_AUTH_OK;
}

enum il_auth_verdict il_auth_verify(const struct il_auth_keyring *kr, struct il_auth_replay *r,
				    const uint8_t *msg, uint32_t len)
{
	uint8_t mac[IL_AUTH_MAC_LEN];
	const struct il_auth_key *k;

	/* The length first: a message shorter than the option is refused
	 * before any byte of it is read. */
	if (len < IL_AUTH_HDR_LEN || !(msg[IL_OFF_FLAGS] & IL_F_AUTH) ||
	    msg[IL_OFF_HDR_LEN] < IL_AUTH_HDR_LEN || msg[IL_OFF_HDR_LEN] > len)
		return IL_AUTH_BAD_MAC;
	k = il_auth_key_find(kr, il_get32(msg + IL_OFF_AUTH_KEY_ID));
	if (k == NULL)
		return IL_AUTH_BAD_MAC;
	mac_of(k, msg, len, mac);
	if (crypto_verify_16(mac, msg + IL_OFF_AUTH_MAC) != 0)
		return IL_AUTH_BAD_MAC;
	if (r == NULL)
		return IL_AUTH_OK;
	return replay_check(r, il_get32(msg + IL_OFF_SENDER_ID),
			    il_get64(msg + IL_OFF_AUTH_COUNTER));
}
