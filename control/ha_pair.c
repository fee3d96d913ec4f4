/* SPDX-License-Identifier: BSD-3-Clause
 * The pair heartbeat's datagram (ha_pair.h).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <interlink/wire.h>

#include "ha_pair.h"

void hb_encode(const struct hb_msg *m, uint8_t *b)
{
	memset(b, 0, HB_LEN);
	il_put32(b, HB_MAGIC);
	il_put16(b + 4, HB_VERSION);
	il_put16(b + 6, m->flags);
	memcpy(b + 8, m->node, strnlen(m->node, 16));
	il_put32(b + 24, m->epoch);
	b[28] = m->role;
	il_put64(b + 32, (uint64_t)m->rev);
	il_put64(b + 40, m->counter);
	il_put64(b + 48, m->sent_ns);
	il_put64(b + 56, m->echo_ns);
}

int hb_decode(const uint8_t *b, size_t len, struct hb_msg *m)
{
	if (len < HB_LEN || il_get32(b) != HB_MAGIC || il_get16(b + 4) != HB_VERSION)
		return -1;
	memset(m, 0, sizeof(*m));
	m->flags = il_get16(b + 6);
	memcpy(m->node, b + 8, 16);
	m->node[16] = '\0';
	m->epoch = il_get32(b + 24);
	m->role = b[28];
	m->rev = (int64_t)il_get64(b + 32);
	m->counter = il_get64(b + 40);
	m->sent_ns = il_get64(b + 48);
	m->echo_ns = il_get64(b + 56);
	return 0;
}

int hb_addr(const char *s, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	char *end;

	if (colon == NULL || (size_t)(colon - s) >= sizeof(host) || colon == s)
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (*end != '\0' || port == 0 || port > 65535 || colon[1] == '\0')
		return -1;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

int hb_socket(const struct sockaddr_in *listen)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -1;
	if (bind(fd, (const struct sockaddr *)listen, sizeof(*listen)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

const char *hb_role_name(unsigned role)
{
	switch (role) {
	case HB_STANDBY: return "standby";
	case HB_ACTIVE_CUT: return "active/cut";
	case HB_ACTIVE_SERVING: return "active";
	case HB_QUIESCING: return "quiescing";
	default: return "none";
	}
}
