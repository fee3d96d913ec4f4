/* SPDX-License-Identifier: BSD-3-Clause
 * One control process of an active/standby pair (docs/ha.md): the role
 * state machine, detection of a dead or cut-off active, the takeover with
 * its cut, the planned hand-over, fencing, and the authority it gives its
 * data plane. The loop (loop.c) calls in; etcd is reached only through
 * the etcd thread (ha_coord.c), so nothing here blocks.
 */
#ifndef INTERLINK_CONTROL_HA_H
#define INTERLINK_CONTROL_HA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <interlink/chan.h>

#include "control.h"
#include "membership.h"

struct ha;

struct ha *ha_open(const struct ctl_opts *o, struct il_chan *ch, struct il_mship *ms, char *err,
		   size_t errlen);
void ha_close(struct ha *h);

/* Descriptors the loop keeps an operation on: the etcd thread's results
 * (READ), the watch (POLL_ADD, -1 until it is open) and the heartbeat
 * socket (RECVMSG). */
int ha_result_fd(const struct ha *h);
int ha_watch_fd(const struct ha *h);
int ha_hb_fd(const struct ha *h);
/* How often ha_tick wants to run, in ms. */
unsigned ha_tick_ms(const struct ha *h);

void ha_on_results(struct ha *h);
void ha_on_watch(struct ha *h);
void ha_on_heartbeat(struct ha *h, const void *buf, size_t len);
void ha_tick(struct ha *h);

/* An up-ring message only a pair uses (ALIVE, EPOCH_REPORT, SHADOW,
 * SUPERSEDED, QUIESCED): true when taken. */
bool ha_dispatch(struct ha *h, const struct il_cmsg *m, uint64_t now_ns);
/* The data plane (re)attached: a new incarnation never gets the epoch
 * its predecessor owned. */
void ha_dp_hello(struct ha *h, uint64_t incarnation);
/* Whether the membership runs (this process owns an epoch whose views it
 * may change). */
bool ha_serving(const struct ha *h);
/* Views, credits and watermarks for the data plane, with every view
 * change committed to etcd first (replaces the loop's own publication
 * while a pair runs). */
void ha_publish(struct ha *h);
/* Lines for `status` (numbers only: the exporter reads them). */
size_t ha_status(struct ha *h, char *reply, size_t len);
/* Management commands "ha" and "handover"; 0 if not one of them. */
size_t ha_mgmt(struct ha *h, const char *cmd, char *reply, size_t len);

#endif
