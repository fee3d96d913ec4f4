/* SPDX-License-Identifier: BSD-3-Clause
 * FT-TCP stage: the flows that have something due, kept in the order it
 * falls due, so the stage's timer tick touches only those and never walks
 * the flow table (up to 2^20 flows).
 *
 *  - closing: removed linger_ms after they closed;
 *  - syn: recovering, the fabricated SYN re-sent if unanswered for syn_rto;
 *  - crash: recovering, the FR_CRASHED record still to be queued (the
 *    logger's ring was full).
 *
 * Every flow of a list waits the same delay, so appending on the event
 * keeps the list sorted by deadline: a tick pops from the head and stops
 * at the first flow not yet due. The lists are doubly linked through the
 * flow array (positions, FTL_NIL at the ends), so a flow that leaves its
 * state early (answered, reopened, deleted) is unlinked in O(1).
 */
#ifndef INTERLINK_STAGE_FTCP_TIMER_H
#define INTERLINK_STAGE_FTCP_TIMER_H

#include "ftcp.h"

/* Closing and syn exclude each other (by state): they share a slot;
 * crash may overlap with syn. */
static const uint8_t ftl_slot[FTL_COUNT] = {[FTL_CLOSING] = 0, [FTL_SYN] = 0, [FTL_CRASH] = 1};

static inline struct ftcp_link *ftl_link(struct ftcp *f, int32_t pos, unsigned slot)
{
	return &f->flows[pos].link[slot];
}

static inline void ftl_init(struct ftcp *f)
{
	for (unsigned i = 0; i < FTL_COUNT; i++) {
		f->due[i].head = f->due[i].tail = FTL_NIL;
		f->due[i].len = 0;
	}
}

static inline void ftl_unlink(struct ftcp *f, int32_t pos, unsigned slot)
{
	struct ftcp_link *k = ftl_link(f, pos, slot);
	struct ftcp_list *l;

	if (k->list == 0)
		return;
	l = &f->due[k->list - 1];
	if (k->prev == FTL_NIL)
		l->head = k->next;
	else
		ftl_link(f, k->prev, slot)->next = k->next;
	if (k->next == FTL_NIL)
		l->tail = k->prev;
	else
		ftl_link(f, k->next, slot)->prev = k->prev;
	l->len--;
	k->list = 0;
}

/* Append the flow at pos to list id (moving it from wherever its slot had
 * it): its deadline, now + the list's delay, is the latest of the list. */
static inline void ftl_append(struct ftcp *f, int32_t pos, unsigned id)
{
	unsigned slot = ftl_slot[id];
	struct ftcp_link *k = ftl_link(f, pos, slot);
	struct ftcp_list *l = &f->due[id];

	ftl_unlink(f, pos, slot);
	k->list = (uint8_t)(id + 1);
	k->next = FTL_NIL;
	k->prev = l->tail;
	if (l->tail == FTL_NIL)
		l->head = pos;
	else
		ftl_link(f, l->tail, slot)->next = pos;
	l->tail = pos;
	l->len++;
}

static inline void ftl_unlink_all(struct ftcp *f, int32_t pos)
{
	for (unsigned s = 0; s < FTL_SLOTS; s++)
		ftl_unlink(f, pos, s);
}

#endif
