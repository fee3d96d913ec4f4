/* SPDX-License-Identifier: BSD-3-Clause
 *
 * il_coord: the control process's client of etcd v3 (docs/ha.md), through
 * etcd's HTTP/JSON gateway (etcd 3.4: /v3/kv/range, /v3/kv/txn,
 * /v3/kv/put, /v3/kv/deleterange, /v3/lease/grant, /v3/lease/keepalive,
 * /v3/lease/revoke, /v3/watch), with libcurl and jansson.
 *
 * For the control process only: every call but the watch's blocks for up
 * to the configured deadline, so nothing on the data plane's fast path may
 * call it. A handle (struct il_coord) is used by one thread at a time; a
 * watch runs on a thread of its own and hands its events over through a
 * queue and an eventfd, so an io_uring or poll loop can wait on it.
 *
 * Several endpoints: a call goes to the endpoint that answered last; when
 * it does not answer (connection refused or reset, timeout) or answers that
 * it cannot serve (no leader, leader changed, request timed out), the call
 * is tried on the next endpoint, until one answers or the call's deadline
 * passes. Reads are linearizable (they go through the cluster's leader),
 * so a member cut off from the majority never answers one: a minority
 * partition cannot read stale state and cannot commit.
 *
 * Return codes: IL_COORD_OK (0); IL_COORD_FAILED (1): the call was
 * answered but did not do it (a compare failed, the key is absent, the
 * lease is gone, someone else leads); negative: no answer or an error,
 * il_coord_strerror() says which endpoint said what.
 */
#ifndef INTERLINK_COORD_H
#define INTERLINK_COORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IL_COORD_MAX_ENDPOINTS 8

enum {
	IL_COORD_OK = 0,
	IL_COORD_FAILED = 1,     /* answered: compare failed / absent / lease gone / not ours */
	IL_COORD_EUNAVAIL = -1,  /* no endpoint answered within the deadline (no quorum?) */
	IL_COORD_EPROTO = -2,    /* an answer that is not etcd's JSON */
	IL_COORD_EINVAL = -3,    /* bad arguments */
	IL_COORD_ENOMEM = -4,
	IL_COORD_EREJECTED = -5, /* etcd refused the request (e.g. too many operations) */
};

struct il_coord_cfg {
	/* Comma-separated base URLs, e.g.
	 * "http://10.0.0.1:2379,http://10.0.0.2:2379,http://10.0.0.3:2379". */
	const char *endpoints;
	unsigned connect_ms; /* TCP connect to one endpoint (default 100) */
	unsigned attempt_ms; /* one request to one endpoint (default 500) */
	unsigned deadline_ms; /* one call, all endpoints and retries (default 2000) */
};

/* Defaults above; endpoints NULL. */
void il_coord_cfg_init(struct il_coord_cfg *cfg);

struct il_coord;

/* NULL on a bad configuration (err says which value). Connects lazily. */
struct il_coord *il_coord_open(const struct il_coord_cfg *cfg, char *err, size_t errlen);
void il_coord_close(struct il_coord *c);

/* The last failure, e.g. "http://127.0.0.1:2379: etcdserver: no leader". */
const char *il_coord_strerror(const struct il_coord *c);
/* The endpoint the next call goes to first. */
const char *il_coord_endpoint(const struct il_coord *c);

struct il_coord_stats {
	uint64_t calls;      /* API calls */
	uint64_t requests;   /* HTTP requests sent (retries included) */
	uint64_t failovers;  /* moves to another endpoint */
	uint64_t ambiguous;  /* attempts that may have been applied although no
			      * answer came (a txn retried after one) */
	uint64_t unavailable; /* calls that ended with IL_COORD_EUNAVAIL */
};
void il_coord_get_stats(const struct il_coord *c, struct il_coord_stats *st);

/* One key as etcd keeps it. key and value are NUL-terminated copies (the
 * terminator is not counted in the lengths); values may hold any bytes. */
struct il_coord_kv {
	char *key;
	size_t key_len;
	char *value;
	size_t value_len;
	int64_t create_rev; /* 0: the key does not exist */
	int64_t mod_rev;
	int64_t version;
	int64_t lease;      /* 0: none */
};
void il_coord_kv_free(struct il_coord_kv *kv);
void il_coord_kvs_free(struct il_coord_kv *kvs, unsigned n);

/* Linearizable read of one key: OK (kv filled), FAILED (absent: kv zeroed).
 * rev (may be NULL): the store's revision at the read. */
int il_coord_get(struct il_coord *c, const char *key, struct il_coord_kv *kv, int64_t *rev);
/* Every key that starts with prefix, in key order, at one revision. */
int il_coord_get_prefix(struct il_coord *c, const char *prefix, struct il_coord_kv **kvs,
			unsigned *n, int64_t *rev);
int il_coord_put(struct il_coord *c, const char *key, const void *val, size_t len, int64_t lease,
		 int64_t *rev);
/* OK: deleted; FAILED: there was nothing to delete. */
int il_coord_delete(struct il_coord *c, const char *key, int64_t *rev);

/* Transactions: if every compare holds, the `then` operations, else the
 * `otherwise` ones, atomically. */
enum il_coord_target {
	IL_COORD_VERSION, /* number of puts since creation; 0: absent */
	IL_COORD_CREATE,  /* revision of its creation; 0: absent */
	IL_COORD_MOD,     /* revision of its last change */
	IL_COORD_VALUE,
	IL_COORD_LEASE,   /* the lease it is attached to; 0: none */
};
enum il_coord_relation { IL_COORD_EQ, IL_COORD_NE, IL_COORD_LT, IL_COORD_GT };

struct il_coord_cmp {
	const char *key;
	enum il_coord_target target;
	enum il_coord_relation rel;
	int64_t num;       /* VERSION, CREATE, MOD, LEASE */
	const void *value; /* VALUE */
	size_t value_len;
};

enum il_coord_optype { IL_COORD_OP_PUT, IL_COORD_OP_DELETE, IL_COORD_OP_GET };

struct il_coord_op {
	enum il_coord_optype type;
	const char *key;
	bool prefix;       /* DELETE, GET: every key starting with key */
	const void *value; /* PUT */
	size_t value_len;
	int64_t lease;     /* PUT: attach to this lease (0: none) */
};

struct il_coord_txn_res {
	bool succeeded;          /* the compares held: `then` ran */
	bool ambiguous;          /* an earlier attempt may have been applied */
	int64_t rev;             /* the store's revision after the txn */
	unsigned n_kvs;          /* what the GETs of the branch that ran returned, */
	struct il_coord_kv *kvs; /* in order (an absent key adds nothing) */
};
void il_coord_txn_res_free(struct il_coord_txn_res *res);

/* OK: answered (res->succeeded says which branch ran), or an error. A txn
 * is retried on another endpoint only when the first one's failure left
 * its outcome unknown; res->ambiguous then says so: a compare that fails
 * may have failed because our own earlier attempt was applied. */
int il_coord_txn(struct il_coord *c, const struct il_coord_cmp *cmp, unsigned n_cmp,
		 const struct il_coord_op *then, unsigned n_then, const struct il_coord_op *otherwise,
		 unsigned n_otherwise, struct il_coord_txn_res *res);

/* Compare-and-swap: put key = val (attached to lease, 0: none) only if the
 * key's mod revision is expect_mod (0: only if the key does not exist).
 * OK: written, *rev the new revision. FAILED: not written; cur (may be
 * NULL) gets the key as it is (absent: zeroed). When an earlier attempt's
 * outcome was unknown and the key now holds exactly val, that attempt
 * was ours: OK (so values written by CAS should be unique, e.g. name the
 * writer and a counter). */
int il_coord_cas(struct il_coord *c, const char *key, int64_t expect_mod, const void *val,
		 size_t len, int64_t lease, int64_t *rev, struct il_coord_kv *cur);

/* Leases. TTLs are whole seconds; etcd raises a TTL below its minimum
 * (1.5 election timeouts, rounded up to a second) to that minimum, and
 * *granted says what it gave. */
int il_coord_lease_grant(struct il_coord *c, int64_t ttl_s, int64_t *id, int64_t *granted);
/* OK: renewed, *ttl_left (may be NULL) the TTL it has again; FAILED: the
 * lease is gone (expired or revoked): whatever was attached is deleted. */
int il_coord_lease_keepalive(struct il_coord *c, int64_t id, int64_t *ttl_left);
/* OK: revoked (its keys deleted); FAILED: it was not there. */
int il_coord_lease_revoke(struct il_coord *c, int64_t id);

/* Leadership: the leader is whoever holds `key`, which is attached to the
 * leader's lease and so exists only while that lease lives.
 * il_coord_campaign(): create key = val with our lease if the key does not
 * exist. OK: we lead (also when the key is already attached to our lease;
 * *rev the key's create revision, a fencing number that grows with every
 * new leader). FAILED: someone else leads; holder (may be NULL) gets the
 * key. Wait for a DELETE of the key (a watch) and campaign again. */
int il_coord_campaign(struct il_coord *c, const char *key, const void *val, size_t len,
		      int64_t lease, int64_t *rev, struct il_coord_kv *holder);
/* Delete key if it is attached to lease. OK: deleted; FAILED: not ours. */
int il_coord_resign(struct il_coord *c, const char *key, int64_t lease);

/* Watches. A thread of the watch's own keeps a watch stream open on one
 * endpoint; when the stream breaks (endpoint gone, or it lost its leader:
 * the stream asks etcd to cancel it then) it reconnects to the next
 * endpoint and resumes from the revision after the last event it passed
 * on, so no event is lost or repeated. Events queue up (unbounded: the
 * caller must keep draining); the eventfd is readable while any wait. */
struct il_coord_watch;

enum il_coord_ev_type {
	IL_COORD_EV_PUT,
	IL_COORD_EV_DELETE,
	/* The watch could not resume where it was (etcd compacted that
	 * history): events were missed. Read the keys again and go on. */
	IL_COORD_EV_RESET,
};

struct il_coord_event {
	enum il_coord_ev_type type;
	int64_t rev;           /* the revision of the change */
	struct il_coord_kv kv; /* DELETE: key and mod_rev only */
};
void il_coord_event_free(struct il_coord_event *ev);

/* Watch key (prefix: every key that starts with it) from revision
 * start_rev (0: from now on). NULL on error (err says why). */
struct il_coord_watch *il_coord_watch_open(const struct il_coord_cfg *cfg, const char *key,
					   bool prefix, int64_t start_rev, char *err,
					   size_t errlen);
/* An eventfd (EFD_NONBLOCK), readable while events wait; the caller only
 * polls it (reading it is harmless: il_coord_watch_next re-arms it). */
int il_coord_watch_fd(const struct il_coord_watch *w);
/* Non-blocking: OK (one event, free it), FAILED (none waiting). */
int il_coord_watch_next(struct il_coord_watch *w, struct il_coord_event *ev);
/* Blocking for at most timeout_ms: OK or FAILED (timed out). */
int il_coord_watch_wait(struct il_coord_watch *w, struct il_coord_event *ev, unsigned timeout_ms);
/* Whether the stream is open now (and since when the last event came). */
bool il_coord_watch_connected(const struct il_coord_watch *w);
/* Reconnections so far (the first connection not counted). */
uint64_t il_coord_watch_reconnects(const struct il_coord_watch *w);
void il_coord_watch_close(struct il_coord_watch *w);

#ifdef __cplusplus
}
#endif

#endif /* INTERLINK_COORD_H */
