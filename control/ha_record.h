/* SPDX-License-Identifier: BSD-3-Clause
 * The pair's keys in etcd (docs/ha.md, section 4), as JSON:
 *
 *   P/epoch     {"epoch": E, "owner": "A", "prev": Ep, "cut": {"<group>": C, ...} | null,
 *                "views": n, "final": {"<group>": C, ...}, "to": "B", "nonce": N}
 *   P/view/<g>  {"epoch": E, "view_id": V, "members": [[id, roles, incarnation], ...]}
 *
 * "final" and "to" are there only once an owner handed its epoch over (T5):
 * the cut of `epoch` itself, committed, and who should take it next.
 */
#ifndef INTERLINK_CONTROL_HA_RECORD_H
#define INTERLINK_CONTROL_HA_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HA_NODE_LEN 16
#define HA_MAX_CUT 256

struct ha_cut {
	unsigned n;
	struct {
		uint16_t group;
		uint64_t seq;
	} g[HA_MAX_CUT];
};

struct ha_record {
	bool exists;
	uint32_t epoch, prev;
	char owner[HA_NODE_LEN + 1];
	bool cut_set;          /* the cut of prev is committed */
	struct ha_cut cut;
	bool final_set;        /* handed over: the cut of epoch itself */
	struct ha_cut final;
	char to[HA_NODE_LEN + 1];
	uint64_t views;        /* bumped by every view commit */
	uint64_t nonce;
	int64_t mod_rev;       /* of P/epoch: what every writer compares */
};

struct ha_member {
	uint32_t id, roles, incarnation;
};

struct ha_view {
	uint16_t group;
	uint32_t epoch;
	uint64_t view_id;
	unsigned n;
	struct ha_member *m;
};

/* 0, or -1 when the JSON is not a record (err says why). */
int ha_record_parse(const char *json, size_t len, struct ha_record *r, char *err, size_t errlen);
/* A malloc'ed string. */
char *ha_record_json(const struct ha_record *r);
/* The cut of group g, or false. */
bool ha_cut_get(const struct ha_cut *c, uint16_t g, uint64_t *seq);
void ha_cut_put(struct ha_cut *c, uint16_t g, uint64_t seq);

int ha_view_parse(const char *json, size_t len, uint16_t group, struct ha_view *v, char *err,
		  size_t errlen);
char *ha_view_json(const struct ha_view *v);
void ha_view_free(struct ha_view *v);

#endif
