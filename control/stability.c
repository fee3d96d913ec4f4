/* SPDX-License-Identifier: BSD-3-Clause
 * Stability watermark: min over live receivers' cumulative ACKs.
 */
#include <stdlib.h>
#include <string.h>

#include "stability.h"

void il_stab_init(struct il_stab *s, uint16_t group, uint32_t epoch)
{
	memset(s, 0, sizeof(*s));
	s->group = group;
	s->epoch = epoch;
}

void il_stab_free(struct il_stab *s)
{
	free(s->rcv);
	s->rcv = NULL;
	s->n = s->cap = 0;
}

void il_stab_reset(struct il_stab *s, uint32_t epoch)
{
	s->n = 0;
	s->epoch = epoch;
	s->watermark = 0;
}

static int find(const struct il_stab *s, uint32_t id)
{
	for (unsigned i = 0; i < s->n; i++)
		if (s->rcv[i].id == id)
			return (int)i;
	return -1;
}

int il_stab_add(struct il_stab *s, uint32_t id, uint64_t start_seq)
{
	if (find(s, id) >= 0)
		return 1;
	if (s->n == s->cap) {
		unsigned cap = s->cap ? 2 * s->cap : 8;
		struct il_stab_rcv *r = realloc(s->rcv, cap * sizeof(*r));

		if (r == NULL)
			return -1;
		s->rcv = r;
		s->cap = cap;
	}
	/* A joiner is not responsible for what was stable before it came:
	 * starting it below the watermark would drag the minimum backwards. */
	s->rcv[s->n].id = id;
	s->rcv[s->n].cum = start_seq > s->watermark ? start_seq : s->watermark;
	s->n++;
	return 0;
}

bool il_stab_remove(struct il_stab *s, uint32_t id)
{
	int i = find(s, id);

	if (i < 0)
		return false;
	s->rcv[i] = s->rcv[--s->n];
	return true;
}

int il_stab_ack(struct il_stab *s, uint32_t id, uint64_t cum)
{
	int i = find(s, id);

	if (i < 0) {
		s->acks_unknown++;
		return -1;
	}
	/* ACKs may be reordered on the way (several data-plane queues, UDP):
	 * a cumulative ACK below the last one carries no news. */
	if (cum < s->rcv[i].cum) {
		s->acks_stale++;
		return 1;
	}
	s->rcv[i].cum = cum;
	s->acks++;
	return 0;
}

bool il_stab_get(const struct il_stab *s, uint32_t id, uint64_t *cum)
{
	int i = find(s, id);

	if (i < 0)
		return false;
	*cum = s->rcv[i].cum;
	return true;
}

bool il_stab_update(struct il_stab *s)
{
	uint64_t min = UINT64_MAX;

	if (s->n == 0)
		return false;
	for (unsigned i = 0; i < s->n; i++)
		if (s->rcv[i].cum < min)
			min = s->rcv[i].cum;
	if (min <= s->watermark)
		return false;
	s->watermark = min;
	s->advances++;
	return true;
}
