/* SPDX-License-Identifier: BSD-3-Clause
 * The control process's etcd thread (docs/ha.md, section 5): it owns the
 * il_coord handle, which blocks for up to its deadline on every call, so
 * the io_uring loop never calls etcd itself. The loop queues requests
 * (reads, transactions); the thread runs them one at a time, in order,
 * keeps the lease alive (every TTL/3) and hands the results back through
 * a queue and an eventfd the loop has a READ on.
 */
#ifndef INTERLINK_CONTROL_HA_COORD_H
#define INTERLINK_CONTROL_HA_COORD_H

#include <stdbool.h>
#include <stdint.h>

#include <interlink/coord.h>

#define HC_MAX_OPS 280 /* a view per group (IL_MAX_GROUPS) and the epoch record */

enum hc_kind {
	HC_READ_ALL, /* every key under the prefix, at one revision */
	HC_GET,      /* one key */
	HC_TXN,
	HC_PUT,      /* one key, with our lease or without */
	HC_RESIGN,   /* delete a key if it is attached to our lease */
	HC_LEASE,    /* result only: the lease was lost and granted again */
};

struct hc_op {
	enum il_coord_optype type;
	char *key;
	char *value;
	size_t len;
	bool prefix;
	bool my_lease; /* PUT: attach to the thread's lease */
};

struct hc_req {
	uint64_t id;
	enum hc_kind kind;
	unsigned tag;          /* the caller's: what this request is for */
	bool urgent;           /* runs before every request that is not */
	char *key;             /* READ_ALL: the prefix; GET, PUT, RESIGN: the key */
	char *value;           /* PUT */
	size_t len;
	bool my_lease;
	/* TXN: compares (a key's mod or create revision) and both branches. */
	unsigned n_cmp;
	struct il_coord_cmp cmp[2];
	char *cmp_key[2];
	unsigned n_then, n_else;
	struct hc_op then[HC_MAX_OPS];
	struct hc_op other[2];
	/* A compare that failed after an attempt whose answer was lost: the
	 * attempt was ours if check_key holds exactly check_value. */
	char *check_key, *check_value;
	struct hc_req *next;
};

struct hc_res {
	uint64_t id;
	enum hc_kind kind;
	unsigned tag;
	int rc;                  /* IL_COORD_* */
	bool succeeded;          /* TXN: the compares held (or our lost attempt did) */
	bool ambiguous;
	int64_t rev;             /* the store's revision */
	struct il_coord_kv *kvs; /* READ_ALL, GET, TXN's GETs */
	unsigned n_kvs;
	int64_t lease;           /* HC_LEASE: the new one */
	double ms;               /* how long it took */
	char err[192];
	struct hc_res *next;
};

struct ha_coord;

/* Starts the thread, which grants the lease (ttl_s) first. */
struct ha_coord *hc_open(const struct il_coord_cfg *cfg, int64_t ttl_s, char *err, size_t errlen);
void hc_close(struct ha_coord *hc);
int hc_fd(const struct ha_coord *hc);
struct hc_req *hc_req_new(enum hc_kind kind, unsigned tag);
/* Takes the request (and its strings: every char * is freed with it). */
uint64_t hc_submit(struct ha_coord *hc, struct hc_req *r);
/* A result, or NULL; free it with hc_res_free. */
struct hc_res *hc_next(struct ha_coord *hc);
void hc_res_free(struct hc_res *r);
/* The lease the thread keeps (0: none yet). */
int64_t hc_lease(const struct ha_coord *hc);
/* Whether the last call reached etcd. */
bool hc_reachable(const struct ha_coord *hc);
void hc_stats(const struct ha_coord *hc, struct il_coord_stats *st, uint64_t *calls,
	      uint64_t *failed, double *last_ms);

#endif
