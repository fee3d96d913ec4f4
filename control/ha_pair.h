/* SPDX-License-Identifier: BSD-3-Clause
 * The pair heartbeat (docs/ha.md, section 6.6): one 64-byte UDP datagram
 * between the two control processes every --ha-heartbeat-ms, on the
 * management network, in network byte order.
 */
#ifndef INTERLINK_CONTROL_HA_PAIR_H
#define INTERLINK_CONTROL_HA_PAIR_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#define HB_LEN 64
#define HB_MAGIC 0x494c4842u /* "ILHB" */
#define HB_VERSION 1

/* flags */
#define HB_F_DP_ALIVE 0x01     /* its data plane said IL_CM_ALIVE lately */
#define HB_F_PORTS_UP 0x02
#define HB_F_AUTHORITY 0x04    /* active and renewing its data plane's authority */
#define HB_F_ETCD 0x08         /* its last etcd call was answered */
#define HB_F_RESIGNING 0x10    /* it gave up the active role (data plane dead, ports down) */
#define HB_F_TRANSMITTING 0x20 /* its data plane's counter on "out" moved lately */

/* role */
enum { HB_STANDBY = 1, HB_ACTIVE_CUT = 2, HB_ACTIVE_SERVING = 3, HB_QUIESCING = 4 };

struct hb_msg {
	uint16_t flags;
	char node[17];
	uint32_t epoch;   /* the epoch it owns (0: standby) */
	uint8_t role;
	int64_t rev;      /* the mod revision of P/epoch it knows */
	uint64_t counter;
	uint64_t sent_ns; /* its CLOCK_MONOTONIC */
	uint64_t echo_ns; /* the peer's last sent_ns it got (round trips) */
};

void hb_encode(const struct hb_msg *m, uint8_t *b);
/* 0, or -1: not a heartbeat of this version. */
int hb_decode(const uint8_t *b, size_t len, struct hb_msg *m);
/* "ADDR:PORT" (IPv4) into sa; -1 on a bad one. */
int hb_addr(const char *s, struct sockaddr_in *sa);
/* A non-blocking UDP socket bound to listen; -1 (errno). */
int hb_socket(const struct sockaddr_in *listen);
const char *hb_role_name(unsigned role);

#endif
