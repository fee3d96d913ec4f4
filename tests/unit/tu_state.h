/* SPDX-License-Identifier: BSD-3-Clause
 * Unit-test helper: collect what a stage's state() reports.
 */
#ifndef TU_STATE_H
#define TU_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <interlink/stage.h>

#define TU_STATE_MAX 4096

struct tu_state {
	struct il_state_sink sink; /* first: the callback gets its address */
	unsigned n;
	int group[TU_STATE_MAX];
	char key[TU_STATE_MAX][48];
	uint64_t val[TU_STATE_MAX];
};

static void tu_state_put(struct il_state_sink *sink, int group, const char *key, uint64_t val)
{
	struct tu_state *c = (struct tu_state *)sink;

	if (c->n == TU_STATE_MAX)
		return;
	c->group[c->n] = group;
	snprintf(c->key[c->n], sizeof(c->key[0]), "%s", key);
	c->val[c->n++] = val;
}

/* Run st's state() into c (c is large: give it static storage). */
static inline void tu_state_collect(const struct il_stage *st, struct tu_state *c)
{
	c->sink.put = tu_state_put;
	c->n = 0;
	st->type->state(st, &c->sink);
}

/* The value reported for (group, key); false if none was. */
static inline bool tu_state_get(const struct tu_state *c, int group, const char *key,
				uint64_t *val)
{
	for (unsigned i = 0; i < c->n; i++)
		if (c->group[i] == group && !strcmp(c->key[i], key)) {
			*val = c->val[i];
			return true;
		}
	return false;
}

#endif
