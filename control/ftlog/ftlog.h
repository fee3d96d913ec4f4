/* SPDX-License-Identifier: BSD-3-Clause
 * The FT-TCP logger (docs/ft-tcp.md), a thread of interlink-control.
 */
#ifndef INTERLINK_FTLOG_H
#define INTERLINK_FTLOG_H

#include <stdbool.h>
#include <stdint.h>

#include <interlink/ftcp_proto.h>

#define FTL_MAX_CONNS 4096
/* The index over conns[]: twice as many buckets, so a probe meets an empty
 * one within a few steps. */
#define FTL_IDX_SIZE (2 * FTL_MAX_CONNS)
/* A read record's flags value meaning "keep only the first aux reads":
 * written when recovery drops reads whose bytes were never logged. */
#define FTL_READ_TRUNC 0xff
#define FTL_MAX_SESS 64

enum ftl_durability { FTL_NONE, FTL_GROUP, FTL_SYNC };

enum ftl_cstate {
	FC_LIVE = 1,    /* server alive (or not yet claimed after a restart) */
	FC_CRASHED,     /* its shim session ended: FD_CRASH sent */
	FC_FROZEN,      /* the data plane stopped logging it (FR_CRASHED seen) */
	FC_RECOVERING,  /* FD_RECOVER sent, replay file ready, waiting for accept */
};

/* A stretch of the shared log that holds records of one connection: from
 * its first record in one segment to the end of its last one there
 * (global log positions; other connections' records may lie between). */
struct ftl_span {
	uint64_t start, end;
	uint64_t bytes; /* this connection's record bytes in it */
};

struct ftl_conn {
	bool used;
	bool have_syn, have_synack, have_ack, closed;
	uint8_t state;
	int owner; /* session index, -1: none */
	struct ftc_key key;
	uint32_t client_isn, server_isn;
	uint32_t contig;    /* lowest instream seq not logged (logical) */
	uint32_t contig_durable;
	uint32_t contig_sent;
	bool isns_durable, isns_sent;
	uint32_t max_ack;   /* highest client ack seen (client-visible space) */
	bool have_fin;      /* a client FIN is logged, taking sequence number fin_seq */
	uint32_t fin_seq;
	bool replay_fin;    /* the replay built ends at that FIN (FTC_REPLAY_PEER_FIN) */
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
	/* Where its records are in the shared log: one span per segment it
	 * has records in, oldest first. */
	struct ftl_span *spans;
	uint32_t n_spans, cap_spans;
	uint64_t log_bytes;   /* its record bytes in the log */
	uint64_t log_end;     /* end of its last record (global position) */
	uint8_t replay;       /* FTL_RP_*: the replay file of a recovery */
	int replay_waiter;    /* session waiting in accept() for it, -1: none */
	uint64_t recover_ns;  /* when FD_RECOVER went down */
	bool claimed;         /* recovering: the restarted server accepted it */
	uint32_t live_pos;    /* index in ftl.live */
	/* Recovered: output the client had that the restarted server has not
	 * yet written again, its replay read (FS_OWED); reset at the deadline. */
	uint64_t owed, owed_deadline_ns;
	uint64_t differs_at; /* 1 + the output position the shim saw differ, 0: none */
	/* The server's last output before its crash (FR_CRASHED): the
	 * out_tail_len bytes ending at client-visible seq out_tail_end. */
	uint32_t out_tail_end;
	uint8_t out_tail_len;
	uint8_t out_tail[FTC_OUT_TAIL];
};

enum { FTL_RP_NONE, FTL_RP_BUILDING, FTL_RP_READY, FTL_RP_FAILED };

/* One segment file of the shared log, <dir>/ftlog-<start, 16 hex digits>.seg. */
struct ftl_seg {
	uint64_t start;      /* global position of its first byte */
	uint64_t len;        /* bytes written to it */
	int fd;
	uint32_t refs;       /* connections with a span in it, replay builds reading it */
	uint64_t live_bytes; /* record bytes of those connections */
	uint64_t free_at;    /* refs fell to 0: removed once the log is durable up to here */
	uint64_t file_len;   /* the file's size: len, or past it zeros written ahead */
	bool dirty;          /* written since its last fdatasync */
	bool checked;        /* format version 2 on: records carry their CRC, so the
			      * head may be written over zeros written ahead */
};

struct ftl_stats {
	uint64_t records, bytes_logged, data_bytes, writes, fsyncs, acks_down, reads_logged,
		crashes, recoveries, compactions, ring_wakeups, down_full, replay_bytes,
		replay_us_last, replay_failures;
	/* Mass recovery: fabricated connections are let into a listener's
	 * accept queue a few at a time (recover_paced: a recovery waited for
	 * one of those slots); the ones given up, by reason. */
	uint64_t recover_paced, recover_abandoned_timeout, recover_abandoned_replay,
		recover_abandoned_diverged,
		recover_client_closed, replay_files_removed;
	/* Rounds that synced, and those of them `group` started before its
	 * interval's end because a shim or the stage waited for them. */
	uint64_t sync_rounds, sync_early;
	uint64_t sync_us; /* time spent in the rounds' fdatasyncs */
	/* The shared log: segments started and removed, connections copied
	 * forward out of old segments (and their bytes), legacy
	 * per-connection logs imported at start. */
	uint64_t segments_created, segments_removed, relocations, relocated_bytes,
		legacy_imported;
	/* Zeros written ahead of the head (group, sync: a round then writes
	 * over blocks the file already has, so its fdatasync commits no
	 * metadata), and records a load found whose CRC did not match. */
	uint64_t zero_ahead_bytes, crc_mismatches;
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
	/* Open addressing by key over conns[]: a bucket holds a slot's index
	 * + 1, 0 is empty (a zeroed struct ftl is an empty index); removal
	 * shifts the entries after it back, so a lookup stops at the first
	 * empty bucket. A slot never moves: its pointer stays valid. */
	uint16_t idx[FTL_IDX_SIZE];
	/* The shared log: segments oldest first (the last one is the head,
	 * where records are appended), and the records appended since the
	 * last commit, which go at the head's end in one write. */
	struct ftl_seg *segs;
	uint32_t n_segs, cap_segs;
	uint64_t seg_bytes;   /* a head this long is sealed and a new one started */
	uint64_t reloc_max;   /* connections with at most this many log bytes are
			       * copied forward out of old segments (0: never) */
	uint8_t *wbuf;
	uint32_t wlen, wcap;
	uint64_t written;     /* global end of what is written */
	uint64_t durable;     /* global end of what is durable (by mode) */
	bool log_failed;      /* a segment could not be created: see stderr */
	struct ftl_stats st;
};

/* Every used connection, last to first (the body may free the current one). */
#define FTL_FOR_EACH_LIVE(l, c)                                                   \
	for (uint32_t _k = (l)->n_live; _k-- > 0 && ((c) = &(l)->conns[(l)->live[_k]], 1);)

/* logstore.c: connections and their state */
struct ftl_conn *ftl_conn_find(struct ftl *l, const struct ftc_key *k);
struct ftl_conn *ftl_conn_new(struct ftl *l, const struct ftc_key *k);
void ftl_conn_free(struct ftl *l, struct ftl_conn *c);
/* Everything of c's that is logged is durable (a round that synced, a
 * restart that loaded the log): its durable marks catch up. */
void ftl_conn_durable(struct ftl_conn *c);
/* Apply one record to the connection's state; with append, also append it
 * to the log (live records; a restart applies what it reads). */
int ftl_apply(struct ftl *l, struct ftl_conn *c, const struct ftc_rec *r, bool append);
/* A restart: rebuild every connection from the log's segments (a torn
 * tail cut off); legacy per-connection logs are imported. Returns the
 * connections rebuilt, -1 on error. */
int ftl_load_dir(struct ftl *l, uint64_t claim_deadline_ns);
/* seglog.c: one segment's image in memory (what ftl_load_dir does with
 * each segment file, callable on its own: tests, the fuzzer): its FR_SEG
 * header, then its whole records (a torn tail or a torn copy is not
 * counted) applied as a restart applies them, only those of key k (NULL:
 * every connection's). The segment is entered in l->segs (without a
 * descriptor) when it is newer than the last one there, so the spans of
 * its connections are tracked. *cp (if not NULL): k's connection after it,
 * NULL when there is none. Returns the bytes of whole records, 0 when the
 * image does not begin with a segment header. */
size_t ftl_load_image(struct ftl *l, const uint8_t *buf, size_t len, const struct ftc_key *k,
		      struct ftl_conn **cp);
uint64_t ftl_now_ns(void);
void ftl_path(const struct ftl *l, const struct ftc_key *k, const char *ext, char *buf,
	      size_t len);
/* The last record of a connection ended ("closed" or abandoned): a
 * tombstone in the log, then the connection is freed. */
void ftl_conn_end(struct ftl *l, struct ftl_conn *c, uint8_t why);
/* Every connection freed and the log closed (the end of a logger). */
void ftl_free_all(struct ftl *l);

/* seglog.c: the shared log */
#define FTL_SEG_BYTES_DEF (64ull << 20)
/* group and sync: the head's file is kept at least FTL_ZERO_LOW bytes of
 * zeros past its records, extended FTL_ZERO_AHEAD at a time. */
#define FTL_ZERO_AHEAD (1u << 20)
#define FTL_ZERO_LOW (256u << 10)
/* CRC-32C (Castagnoli) of len bytes, from crc (0 to start). */
uint32_t ftl_crc32c(uint32_t crc, const void *buf, size_t len);
/* A record's crc field for the log: CRC-32C of its len bytes with the
 * field zero. */
void ftl_rec_seal(struct ftc_rec *r);
bool ftl_rec_crc_ok(const struct ftc_rec *r);
/* Keep the head's zeros ahead of its records (group, sync; called after a
 * round): FTL_ZERO_AHEAD more once fewer than FTL_ZERO_LOW are left, their
 * writeback started at once so the next round's fdatasync finds them
 * written. */
void ftl_log_zero_ahead(struct ftl *l);
/* Open the head for appending (a new segment when there is none). */
int ftl_log_open(struct ftl *l);
void ftl_log_close(struct ftl *l);
/* Write the buffer at the head's end in line (with sync, and fdatasync
 * every segment written): the loader's import, tests. The loop's commit
 * does the same through io_uring. */
int ftl_log_write_sync(struct ftl *l, bool sync);
/* Append a record (a copy) for connection c (NULL: the log's own). */
int ftl_log_append(struct ftl *l, struct ftl_conn *c, const struct ftc_rec *r);
/* Note that c has a record of len bytes at global position pos. */
void ftl_log_track(struct ftl *l, struct ftl_conn *c, uint64_t pos, uint32_t len);
/* Give up c's spans (it is freed or copied forward). */
void ftl_log_release(struct ftl *l, struct ftl_conn *c);
struct ftl_seg *ftl_seg_of(struct ftl *l, uint64_t pos);
void ftl_seg_path(const struct ftl *l, uint64_t start, char *buf, size_t len);
void ftl_seg_pin(struct ftl *l, uint64_t start);
void ftl_seg_unpin(struct ftl *l, uint64_t start);
/* After a commit: the written records are durable up to `durable`; seal
 * a full head, remove segments nobody needs, copy small long-lived
 * connections out of old segments. */
void ftl_log_after_commit(struct ftl *l);
int ftl_log_relocate(struct ftl *l, struct ftl_conn *c);
/* Walk the complete records in buf[0, len). */
#define FTL_FOR_EACH_REC(buf_, blen_, r)                                                   \
	for (size_t _o = 0;                                                                 \
	     _o + sizeof(struct ftc_rec) <= (blen_) &&                                      \
	     ((r) = (const struct ftc_rec *)((buf_) + _o))->len >= sizeof(struct ftc_rec) && \
	     (r)->len % FTC_REC_ALIGN == 0 && _o + (r)->len <= (blen_) &&                   \
	     sizeof(struct ftc_rec) + (r)->plen <= (r)->len;                                \
	     _o += (r)->len)

/* replay.c: recovery. The SYN's ISN and server_seq come from the
 * connection's state at once (ftl_replay_params); the replay file (logged
 * reads and a copy of the logged instream bytes, ftc_replay_hdr) is built
 * from the log by ftl_replay_build, which is thread-safe and runs in a
 * worker (prepare and done run in the loop; prepare pins the segments the
 * build reads, done unpins them). ftl_make_replay does all three in line. */
struct ftl_replay {
	struct ftc_key key;
	char replay_path[512];
	char dir[400];
	struct ftl_span *spans; /* the connection's, copied */
	uint32_t n_spans;
	uint64_t *seg_start;    /* each span's segment */
	uint64_t log_end;       /* records from here on were not written when prepared */
	uint32_t base;          /* client ISN + 1 */
	uint32_t data_len;      /* durable contiguous instream bytes */
	bool fin;               /* the client's FIN follows them: data_len leaves it out */
	uint32_t nmax;          /* reads to take at most */
	uint64_t out_skip;
	uint64_t tail_end; /* ftc_replay_hdr's */
	uint32_t tail_len;
	uint8_t tail[FTC_OUT_TAIL];
	/* results */
	int rc;
	uint32_t n_reads;
	uint64_t read_total;
	uint64_t build_us;
};
/* What a replay file holds (struct ftc_replay_hdr): the logged read
 * lengths and the extents of the log (global positions) that give the
 * job's data_len bytes in stream order, which the file then carries.
 * Built in three steps, so the replay build (over the mapped spans of its
 * segments) and the fuzzer (over a segment image) share them: init, add
 * each span of the connection's records in log order, finish. */
struct ftc_replay_cand;
struct ftl_replay_plan {
	uint32_t *lens, n_reads, nmax;
	struct ftc_replay_ext *ext;
	uint32_t n_ext;
	uint64_t read_total;
	/* while it is built: the DATA records' parts of the stream */
	struct ftc_replay_cand *cs;
	uint32_t nc, ncap;
};
/* log_bytes: the bytes of log the spans will hold. The read table is sized
 * by j->nmax but never larger than the read records that many bytes can
 * hold: a damaged read count (a truncation record's) must not size it. */
int ftl_replay_plan_init(struct ftl_replay_plan *p, const struct ftl_replay *j,
			 uint64_t log_bytes);
/* The records of j->key among the whole records of buf[0, len), which lies
 * at global position pos. -1: out of memory. */
int ftl_replay_plan_add(struct ftl_replay_plan *p, const struct ftl_replay *j,
			const uint8_t *buf, size_t len, uint64_t pos);
/* 0 and the plan, or -1 (the plan freed) when the logged bytes do not
 * cover the job's data_len. */
int ftl_replay_plan_finish(struct ftl_replay_plan *p, const struct ftl_replay *j);
void ftl_replay_plan_free(struct ftl_replay_plan *p);
/* The three on one image of len bytes at position 0 (tests). */
int ftl_replay_plan(const uint8_t *buf, size_t len, const struct ftl_replay *j,
		    struct ftl_replay_plan *p);
void ftl_replay_params(const struct ftl_conn *c, uint32_t *fab_isn, uint32_t *server_seq);
int ftl_replay_prepare(struct ftl *l, const struct ftl_conn *c, struct ftl_replay *j);
int ftl_replay_build(struct ftl_replay *j);
void ftl_replay_done(struct ftl *l, struct ftl_conn *c, struct ftl_replay *j);
int ftl_make_replay(struct ftl *l, struct ftl_conn *c, char *path, size_t plen,
		    uint32_t *fab_isn, uint32_t *server_seq);

/* ftlog.c: the logger's loop, run by interlink-control on a thread. */
struct ftlog_opts {
	const char *ring;   /* the up/down ring shared with the ftcp stage */
	const char *sock;   /* unix stream socket the shims connect to */
	const char *dir;    /* the log's segments, the replay files */
	const char *stats;  /* JSON counters, rewritten every 200 ms (NULL: none) */
	const char *trace;  /* every FD_STABLE published, appended (tests; NULL: none) */
	int durability;     /* enum ftl_durability */
	uint32_t group_ms;  /* FTL_GROUP: fsync period */
	uint32_t delay_us;  /* injected delay before every publication (tests) */
	uint32_t catchup_ms; /* a replayed server's owed output, in time (0: 5000) */
	uint64_t seg_bytes; /* segment size (0: FTL_SEG_BYTES_DEF) */
	int verbose;
};
struct ftlog;
/* Opens the ring, the sockets and the logs of a previous run; NULL with a
 * message in err on failure. The loop ends when stop_fd becomes readable. */
struct ftlog *ftlog_open(const struct ftlog_opts *o, int stop_fd, char *err, size_t errlen);
int ftlog_run(struct ftlog *L);
void ftlog_close(struct ftlog *L);

#endif
