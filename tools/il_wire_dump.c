/* SPDX-License-Identifier: BSD-3-Clause
 * Prints the wire format as include/interlink/wire.h defines it, as JSON,
 * for the contract test that holds the header, docs/wire-format.md and
 * the Scapy layer to one another.
 */
#include <stddef.h>
#include <stdio.h>

#include <interlink/json.h>
#include <interlink/wire.h>

static void field(struct il_json *j, const char *name, size_t offset, size_t size)
{
	il_json_obj(j, NULL);
	il_json_str(j, "name", name);
	il_json_u64(j, "offset", offset);
	il_json_u64(j, "size", size);
	il_json_end(j);
}

#define FIELD(j, s, f) field(j, #f, offsetof(struct s, f), sizeof(((struct s *)0)->f))

int main(void)
{
	struct il_json js, *j = &js;

	il_json_begin(j, stdout, 2);
	il_json_obj(j, NULL);
	il_json_i64(j, "version", IL_VERSION);
	il_json_i64(j, "udp_port", IL_UDP_PORT_DEFAULT);
	il_json_u64(j, "header_len", IL_HDR_LEN);
	il_json_u64(j, "msg_header_len", IL_MSG_HDR_LEN);
	il_json_u64(j, "range_len", IL_RANGE_LEN);
	il_json_u64(j, "max_msgs_per_frame", IL_MAX_MSGS_PER_FRAME);
	il_json_u64(j, "nak_max_span", IL_NAK_MAX_SPAN);
	il_json_u64(j, "ack_len", IL_ACK_LEN);
	il_json_u64(j, "ack_tfrc_len", IL_ACK_TFRC_LEN);
	il_json_u64(j, "ack_ppm_max", IL_ACK_PPM_MAX);
	il_json_arr(j, "header");
	FIELD(j, il_hdr, version);
	FIELD(j, il_hdr, type);
	FIELD(j, il_hdr, hdr_len);
	FIELD(j, il_hdr, flags);
	FIELD(j, il_hdr, group_id);
	FIELD(j, il_hdr, msg_count);
	FIELD(j, il_hdr, sender_id);
	FIELD(j, il_hdr, epoch);
	FIELD(j, il_hdr, sender_seq);
	FIELD(j, il_hdr, global_seq);
	FIELD(j, il_hdr, stable_seq);
	il_json_end(j);
	il_json_arr(j, "msg");
	FIELD(j, il_msg, len);
	FIELD(j, il_msg, msg_flags);
	il_json_end(j);
	il_json_arr(j, "range");
	FIELD(j, il_range, first_seq);
	FIELD(j, il_range, last_seq);
	il_json_end(j);
	il_json_arr(j, "ack");
	FIELD(j, il_ack, view_id);
	FIELD(j, il_ack, buffer_free);
	il_json_end(j);
	il_json_arr(j, "ack_tfrc");
	FIELD(j, il_ack_tfrc, view_id);
	FIELD(j, il_ack_tfrc, buffer_free);
	FIELD(j, il_ack_tfrc, echo_seq);
	FIELD(j, il_ack_tfrc, delta_us);
	FIELD(j, il_ack_tfrc, loss_ppm);
	il_json_end(j);
	il_json_arr(j, "stable");
	FIELD(j, il_stable, view_id);
	FIELD(j, il_stable, reserved);
	il_json_end(j);
	il_json_arr(j, "member");
	FIELD(j, il_member_msg, roles);
	FIELD(j, il_member_msg, incarnation);
	il_json_end(j);
	il_json_arr(j, "view");
	FIELD(j, il_view, view_id);
	FIELD(j, il_view, n_members);
	FIELD(j, il_view, n_senders);
	il_json_end(j);
	il_json_arr(j, "view_member");
	FIELD(j, il_view_member, member_id);
	FIELD(j, il_view_member, roles);
	il_json_end(j);
	il_json_arr(j, "view_sender");
	FIELD(j, il_view_sender, sender_id);
	FIELD(j, il_view_sender, reserved);
	FIELD(j, il_view_sender, next_sender_seq);
	il_json_end(j);
	il_json_arr(j, "credit");
	FIELD(j, il_credit, limit_seq);
	FIELD(j, il_credit, window);
	FIELD(j, il_credit, rate_kbps);
	il_json_end(j);
	il_json_obj(j, "roles");
	il_json_u64(j, "SENDER", IL_ROLE_SENDER);
	il_json_u64(j, "RECEIVER", IL_ROLE_RECEIVER);
	il_json_end(j);
	il_json_obj(j, "types");
	for (unsigned t = 1; t < IL_T_COUNT; t++)
		il_json_u64(j, il_type_name(t), t);
	il_json_end(j);
	il_json_obj(j, "flags");
	il_json_i64(j, "STAMPED", IL_F_STAMPED);
	il_json_i64(j, "RETRANS", IL_F_RETRANS);
	il_json_i64(j, "STABLE_VALID", IL_F_STABLE_VALID);
	il_json_i64(j, "RAW", IL_F_RAW);
	il_json_end(j);
	il_json_end(j);
	return il_json_finish(j) ? 1 : 0;
}
