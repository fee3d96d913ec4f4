/* SPDX-License-Identifier: BSD-3-Clause
 * The FT-TCP logger (docs/ft-tcp.md), a thread of interlink-control.
 */
#ifndef INTERLINK_FTLOG_H
#define INTERLINK_FTLOG_H

#include <stdbool.h>
#include <stdint.h>

#include <interlink/ftcp_proto.h>

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
	uint8_t replay;       /* FTL_RP_*: the replay file of a recovery */
	int replay_waiter;    /* session waiting in accept() for it, -1: none */
	uint64_t recover_ns;  /* when FD_RECOVER went down */
	bool claimed;         /* recovering: the restarted server accepted it */
	uint32_t live_pos;    /* index in ftl.live */
};

enum { FTL_RP_NONE, FTL_RP_BUILDING, FTL_RP_READY, FTL_RP_FAILED };

struct ftl_stats {
	uint64_t records, bytes_logged, data_bytes, writes, fsyncs, acks_down, reads_logged,
		crashes, recoveries, compactions, ring_wakeups, down_full, replay_bytes,
		replay_us_last, replay_failures;
	/* Mass recovery: fabricated connections are let into a listener's
	 * accept queue a few at a time (recover_paced: a recovery waited for
	 * one of those slots); the ones given up, by reason. */
	uint64_t recover_paced, recover_abandoned_timeout, recover_abandoned_replay,
		recover_client_closed, replay_files_removed;
	/* Rounds that synced, and those of them `group` started before its
	 * interval's end because a shim or the stage waited for them. */
	uint64_t sync_rounds, sync_early;
};

struct ftl {
	const char *dir;
	int durability;
	uint32_t group_ms;
	uint32_t delay_us;
	int verbose;
	struct ftl_conn conns[FTL_MAX_CONNS];
	/* Indexes of the used conns, so every pass of the loop costs the
	 * connections there are, not the table's size. */
	uint16_t live[FTL_MAX_CONNS];
	uint32_t n_live;
	struct ftl_stats st;
};

/* Every used connection, last to first (the body may free the current one). */
#define FTL_FOR_EACH_LIVE(l, c)                                                   \
	for (uint32_t _k = (l)->n_live; _k-- > 0 && ((c) = &(l)->conns[(l)->live[_k]], 1);)

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
/* One log file's image: its complete records applied to the connection of
 * its first record's key (*cp; NULL when there is none or no room).
 * Returns the bytes of complete records (a torn tail is not counted). */
size_t ftl_load_image(struct ftl *l, const uint8_t *buf, size_t len, struct ftl_conn **cp);
/* Recovery. The SYN's ISN and server_seq come from the connection's state
 * at once (ftl_replay_params); the replay file (logged reads and instream
 * bytes, ftc_replay_hdr) is built from the log by ftl_replay_build, which
 * is thread-safe and runs in a worker (prepare and done run in the loop).
 * ftl_make_replay does all three in line. */
struct ftl_replay {
	struct ftc_key key;
	char log_path[512], replay_path[512];
	uint64_t log_len;    /* bytes of the log written when it was prepared */
	uint32_t base;       /* client ISN + 1 */
	uint32_t data_len;   /* durable contiguous instream bytes */
	uint32_t nmax;       /* reads to take at most */
	uint64_t out_skip;
	/* results */
	int rc;
	uint32_t n_reads;
	uint64_t read_total;
	uint64_t build_us;
};
/* What a replay file holds (struct ftc_replay_hdr): the logged read
 * lengths and the log extents that cover the job's data_len bytes. */
struct ftl_replay_plan {
	uint32_t *lens, n_reads;
	struct ftc_replay_ext *ext;
	uint32_t n_ext;
	uint64_t read_total;
};
void ftl_replay_params(const struct ftl_conn *c, uint32_t *fab_isn, uint32_t *server_seq);
void ftl_replay_prepare(const struct ftl *l, const struct ftl_conn *c, struct ftl_replay *j);
int ftl_replay_build(struct ftl_replay *j);
/* ftl_replay_build's work on a log image of len bytes, in memory: 0 and
 * the plan (free it with ftl_replay_plan_free), or -1 when the logged
 * bytes do not cover the job's data_len. */
int ftl_replay_plan(const uint8_t *buf, size_t len, const struct ftl_replay *j,
		    struct ftl_replay_plan *p);
void ftl_replay_plan_free(struct ftl_replay_plan *p);
void ftl_replay_done(struct ftl *l, struct ftl_conn *c, const struct ftl_replay *j);
int ftl_make_replay(struct ftl *l, struct ftl_conn *c, char *path, size_t plen,
		    uint32_t *fab_isn, uint32_t *server_seq);
uint64_t ftl_now_ns(void);

/* ftlog.c: the logger's loop, run by interlink-control on a thread. */
struct ftlog_opts {
	const char *ring;   /* the up/down ring shared with the ftcp stage */
	const char *sock;   /* unix stream socket the shims connect to */
	const char *dir;    /* one log file per connection */
	const char *stats;  /* JSON counters, rewritten every 200 ms (NULL: none) */
	const char *trace;  /* every FD_STABLE published, appended (tests; NULL: none) */
	int durability;     /* enum ftl_durability */
	uint32_t group_ms;  /* FTL_GROUP: fsync period */
	uint32_t delay_us;  /* injected delay before every publication (tests) */
	int verbose;
};
struct ftlog;
/* Opens the ring, the sockets and the logs of a previous run; NULL with a
 * message in err on failure. The loop ends when stop_fd becomes readable. */
struct ftlog *ftlog_open(const struct ftlog_opts *o, int stop_fd, char *err, size_t errlen);
int ftlog_run(struct ftlog *L);
void ftlog_close(struct ftlog *L);

#endif
