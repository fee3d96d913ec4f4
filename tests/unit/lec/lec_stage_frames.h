/* SPDX-License-Identifier: BSD-3-Clause
 * The frames the lec stage's tests feed an appliance (test_lec_stage.c,
 * test_lec_shard.c): an Interlink message to group 239.1.1.<group>, a
 * member's HEARTBEAT from its host (MAC 02:00:00:00:00:<id>, IP
 * 10.0.1.<id>), a VIEW of receivers.
 */
#ifndef IL_TEST_LEC_STAGE_FRAMES_H
#define IL_TEST_LEC_STAGE_FRAMES_H

#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "../tu_frame.h"

/* Headers and the Interlink header; *b: where its body goes. */
static inline struct rte_mbuf *lsf_msg(struct rte_mempool *pool, uint32_t src, uint16_t group,
				       uint8_t type, uint32_t sender, unsigned body, uint8_t **b)
{
	uint8_t *h;
	struct rte_mbuf *m = tu_udp_frame(pool, src, 0xef010100u + group, 7400, IL_HDR_LEN + body,
					  &h);

	assert_non_null(m);
	*b = il_hdr_put(h, &(struct il_hdr_fields){ .type = type, .group_id = group,
						     .sender_id = sender });
	return m;
}

static inline struct rte_mbuf *lsf_heartbeat(struct rte_mempool *pool, uint16_t group, uint32_t id)
{
	uint8_t *b;
	struct rte_mbuf *m = lsf_msg(pool, 0x0a000100u + id, group, IL_T_HEARTBEAT, id,
				     IL_MEMBER_MSG_LEN, &b);
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);

	il_member_put(b, IL_ROLE_RECEIVER, 1);
	memcpy(f + 6, (uint8_t[]){ 2, 0, 0, 0, 0, (uint8_t)id }, 6);
	return m;
}

/* n receivers, and `sender` as a sender alone (it gets no repairs) unless 0. */
static inline struct rte_mbuf *lsf_view(struct rte_mempool *pool, uint16_t group, uint32_t view_id,
					const uint32_t *ids, unsigned n, uint32_t sender)
{
	const unsigned all = n + (sender != 0);
	uint8_t *b;
	struct rte_mbuf *m = lsf_msg(pool, 0xc0000201u, group, IL_T_VIEW, 0,
				     il_view_len((uint16_t)all, 0), &b);

	b = il_view_put(b, view_id, (uint16_t)all, 0);
	for (unsigned i = 0; i < n; i++)
		b = il_view_member_put(b, ids[i], IL_ROLE_RECEIVER);
	if (sender != 0)
		il_view_member_put(b, sender, IL_ROLE_SENDER);
	return m;
}

#endif
