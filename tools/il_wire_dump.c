/* SPDX-License-Identifier: BSD-3-Clause
 * Prints the wire format as include/interlink/wire.h defines it, as JSON,
 * for the contract test that holds the header, docs/wire-format.md and
 * the Scapy layer to one another.
 */
#include <stddef.h>
#include <stdio.h>

#include <interlink/wire.h>

#define FIELD(s, f, last)                                                                     \
	printf("    {\"name\": \"%s\", \"offset\": %zu, \"size\": %zu}%s\n", #f,               \
	       offsetof(struct s, f), sizeof(((struct s *)0)->f), last ? "" : ",")

int main(void)
{
	printf("{\n  \"version\": %d,\n  \"udp_port\": %d,\n", IL_VERSION, IL_UDP_PORT_DEFAULT);
	printf("  \"header_len\": %u,\n  \"msg_header_len\": %u,\n  \"range_len\": %u,\n",
	       IL_HDR_LEN, IL_MSG_HDR_LEN, IL_RANGE_LEN);
	printf("  \"max_msgs_per_frame\": %u,\n  \"nak_max_span\": %u,\n", IL_MAX_MSGS_PER_FRAME,
	       IL_NAK_MAX_SPAN);
	printf("  \"ack_len\": %u,\n  \"ack_tfrc_len\": %u,\n  \"ack_ppm_max\": %u,\n", IL_ACK_LEN,
	       IL_ACK_TFRC_LEN, IL_ACK_PPM_MAX);
	printf("  \"header\": [\n");
	FIELD(il_hdr, version, 0);
	FIELD(il_hdr, type, 0);
	FIELD(il_hdr, hdr_len, 0);
	FIELD(il_hdr, flags, 0);
	FIELD(il_hdr, group_id, 0);
	FIELD(il_hdr, msg_count, 0);
	FIELD(il_hdr, sender_id, 0);
	FIELD(il_hdr, epoch, 0);
	FIELD(il_hdr, sender_seq, 0);
	FIELD(il_hdr, global_seq, 0);
	FIELD(il_hdr, stable_seq, 1);
	printf("  ],\n  \"msg\": [\n");
	FIELD(il_msg, len, 0);
	FIELD(il_msg, msg_flags, 1);
	printf("  ],\n  \"range\": [\n");
	FIELD(il_range, first_seq, 0);
	FIELD(il_range, last_seq, 1);
	printf("  ],\n  \"ack\": [\n");
	FIELD(il_ack, view_id, 0);
	FIELD(il_ack, buffer_free, 1);
	printf("  ],\n  \"ack_tfrc\": [\n");
	FIELD(il_ack_tfrc, view_id, 0);
	FIELD(il_ack_tfrc, buffer_free, 0);
	FIELD(il_ack_tfrc, echo_seq, 0);
	FIELD(il_ack_tfrc, delta_us, 0);
	FIELD(il_ack_tfrc, loss_ppm, 1);
	printf("  ],\n  \"stable\": [\n");
	FIELD(il_stable, view_id, 0);
	FIELD(il_stable, reserved, 1);
	printf("  ],\n  \"member\": [\n");
	FIELD(il_member_msg, roles, 0);
	FIELD(il_member_msg, incarnation, 1);
	printf("  ],\n  \"view\": [\n");
	FIELD(il_view, view_id, 0);
	FIELD(il_view, n_members, 0);
	FIELD(il_view, n_senders, 1);
	printf("  ],\n  \"view_member\": [\n");
	FIELD(il_view_member, member_id, 0);
	FIELD(il_view_member, roles, 1);
	printf("  ],\n  \"view_sender\": [\n");
	FIELD(il_view_sender, sender_id, 0);
	FIELD(il_view_sender, incarnation, 0);
	FIELD(il_view_sender, next_sender_seq, 1);
	printf("  ],\n  \"credit\": [\n");
	FIELD(il_credit, limit_seq, 0);
	FIELD(il_credit, window, 0);
	FIELD(il_credit, rate_kbps, 1);
	printf("  ],\n  \"roles\": {\"SENDER\": %u, \"RECEIVER\": %u},\n", IL_ROLE_SENDER,
	       IL_ROLE_RECEIVER);
	printf("  \"types\": {\n");
	for (unsigned t = 1; t < IL_T_COUNT; t++)
		printf("    \"%s\": %u%s\n", il_type_name(t), t, t + 1 < IL_T_COUNT ? "," : "");
	printf("  },\n  \"flags\": {\"STAMPED\": %d, \"RETRANS\": %d, \"STABLE_VALID\": %d, "
	       "\"RAW\": %d, \"FIFO_START\": %d}\n}\n",
	       IL_F_STAMPED, IL_F_RETRANS, IL_F_STABLE_VALID, IL_F_RAW, IL_F_FIFO_START);
	return 0;
}
