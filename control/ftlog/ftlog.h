/* SPDX-License-Identifier: BSD-3-Clause
 * interlink-ftlog: the FT-TCP logger (docs/ft-tcp.md).
 */
#ifndef INTERLINK_FTLOG_H
#define INTERLINK_FTLOG_H

#include <stdbool.h>
#include <stdint.h>

#include "ftcp_proto.h"

#define FTL_MAX_CONNS 4096
#define FTL_MAX_SESS 64

enum ftl_durability { FTL_NONE, FTL_GROUP, FTL_SYNC };

enum ftl_cstate {
	FC_LIVE = 1,    /* server alive (or not yet claimed after a restart) */
	FC_CRASHED,     /* its shim session ended: FD_CRASH sent */
	FC_FROZEN,      /* the data plane stopped logging it (FR_CRASHED seen) */
	FC_RECOVERING,  /* FD_RECOVER sent, replay file ready, waiting for accept */
};

struct ftl_conn {
	bool used;
	bool have_syn, have_synack, have_ack, closed;
	uint8_t state;
	int fd;
	int owner; /* session index, -1: none */
	struct ftc_key key;
	uint64_t off;       /* bytes written to the file */
	uint32_t client_isn, server_isn;
	uint32_t contig;    /* lowest instream seq not logged (logical) */
	uint32_t contig_durable;
	uint32_t contig_sent;
	bool isns_durable, isns_sent;
	uint32_t max_ack;   /* highest client ack seen (client-visible space) */
	/* Logged ranges past contig (sorted, disjoint, growing as needed): a
	 * bounded list would lose track under heavy loss and hold stable_seq
	 * below what TCP acks, which stalls the client to one segment per RTO. */
	uint32_t n_holes, cap_holes;
	uint32_t *hole_s, *hole_e;
	uint64_t read_total;  /* bytes of all logged reads */
	uint32_t reads;       /* read records logged (logical) */
	uint32_t reads_durable;
	uint64_t read_total_durable;
	uint32_t reads_acked; /* acknowledged to the shim */
	uint64_t claim_deadline_ns; /* after a logger restart */
	/* bytes appended this iteration, not yet written */
	uint8_t *wbuf;
	uint32_t wlen, wcap;
	bool dirty_sync;      /* written, not yet fsynced */
};

struct ftl_stats {
	uint64_t records, bytes_logged, data_bytes, writes, fsyncs, acks_down, reads_logged,
		crashes, recoveries, compactions, ring_wakeups, down_full, replay_bytes,
		replay_us_last;
};

struct ftl {
	const char *dir;
	int durability;
	uint32_t group_ms;
	uint32_t delay_us;
	int verbose;
	struct ftl_conn conns[FTL_MAX_CONNS];
	struct ftl_stats st;
};

/* logstore.c */
struct ftl_conn *ftl_conn_find(struct ftl *l, const struct ftc_key *k);
struct ftl_conn *ftl_conn_new(struct ftl *l, const struct ftc_key *k);
void ftl_conn_free(struct ftl *l, struct ftl_conn *c);
int ftl_apply(struct ftl *l, struct ftl_conn *c, const struct ftc_rec *r, bool append);
int ftl_append_raw(struct ftl_conn *c, const struct ftc_rec *r);
int ftl_open_file(struct ftl *l, struct ftl_conn *c, bool truncate);
void ftl_path(const struct ftl *l, const struct ftc_key *k, const char *ext, char *buf,
	      size_t len);
int ftl_load_dir(struct ftl *l, uint64_t claim_deadline_ns);
/* Build the replay file; fills the SYN's ISN and server_seq for the data plane. */
int ftl_make_replay(struct ftl *l, struct ftl_conn *c, char *path, size_t plen,
		    uint32_t *fab_isn, uint32_t *server_seq);
uint64_t ftl_now_ns(void);

#endif
