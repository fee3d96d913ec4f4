/* SPDX-License-Identifier: BSD-3-Clause
 * libFuzzer target: the frame parser must never read out of bounds, and
 * whatever it accepts must be internally consistent; the Interlink layer
 * alone (il_parse_payload) must agree with it, and the input read as a
 * bare UDP payload must be judged without reading out of bounds either.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <interlink/parse.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct il_parsed p;
	/* Copy into an exact-size heap buffer so ASan sees any overread. */
	uint8_t *f = malloc(size ? size : 1);
	if (!f)
		return 0;
	memcpy(f, data, size);
	enum il_verdict v = il_parse_frame(f, (uint32_t)size, IL_UDP_PORT_DEFAULT, &p);
	if (v >= IL_V_COUNT)
		abort();
	if (v == IL_V_DATA || v == IL_V_NAK || v == IL_V_CONTROL) {
		if (p.il_off + p.payload_len > size || p.hdr_len < IL_HDR_LEN ||
		    p.hdr_len > p.payload_len)
			abort();
		if (v == IL_V_DATA && il_check_packing(f + p.il_off + p.hdr_len,
						       p.payload_len - p.hdr_len, p.msg_count))
			abort();
		/* An ACK body of either form, read as the control stage does. */
		struct il_ack_body a;
		if (v == IL_V_CONTROL && p.type == IL_T_ACK &&
		    il_ack_get(f + p.il_off + p.hdr_len, p.payload_len - p.hdr_len, &a) == 0 &&
		    (a.loss_ppm > IL_ACK_PPM_MAX ||
		     a.tfrc != (p.payload_len - p.hdr_len >= IL_ACK_TFRC_LEN)))
			abort();
	}
	/* The Interlink layer of a frame to the Interlink port, alone (the
	 * verdicts from IL_V_DROP_VERSION on are that layer's). */
	if (v == IL_V_DATA || v == IL_V_NAK || v == IL_V_CONTROL || v >= IL_V_DROP_VERSION) {
		struct il_parsed q;

		if (il_parse_payload(f + p.il_off, p.payload_len, &q) != v)
			abort();
	}
	/* The whole input as a UDP payload (what a kernel socket delivers). */
	struct il_parsed q;
	enum il_verdict w = il_parse_payload(f, (uint32_t)size, &q);
	if (w >= IL_V_COUNT || ((w == IL_V_DATA || w == IL_V_NAK || w == IL_V_CONTROL) &&
				(q.payload_len != size || q.hdr_len > size)))
		abort();
	free(f);
	return 0;
}
