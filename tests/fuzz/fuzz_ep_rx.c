/* SPDX-License-Identifier: BSD-3-Clause
 * libFuzzer target: libinterlink's receive path (endpoint/ep_proto.c and
 * the receive window of ep_core.c), in process: a detached endpoint
 * (ep_open_detached: the protocol without sockets or ring) is handed
 * datagrams as its socket would hand them over, its timers run on a clock
 * of the target's, and what it sends goes to a tap.
 *
 * The input is a program (fz.h): raw datagrams, frames built from a few
 * fields (DATA, STABLE, VIEW, CREDIT, UNAVAIL, others' NAKs, with epochs,
 * senders and sequence numbers from small sets so that they meet), time
 * passing, deliveries, sends, a leave and rejoin. The endpoint lives for
 * the whole run; each input joins its groups afresh and leaves them at
 * the end, so inputs do not depend on each other. A second endpoint has
 * authenticated control traffic on (il_ep_set_auth): an input picks one,
 * and its frames come signed with the endpoint's key, another, or none.
 *
 * Checked: P- and U-delivery in strictly increasing global order within a
 * stretch of one view and epoch, every delivered byte readable, the
 * window's order (uto <= po <= uto + window), and every frame the endpoint
 * sends is one the appliance's parser accepts (and, with auth on, every
 * control frame carries a MAC that verifies).
 *
 * LEC (ep_lec.c, Ricochet's repairs between members and from the
 * appliance): an input may turn it on for group 1; LEC_REPAIR frames then
 * come too, some carrying a whole DATA frame (what a repair of one
 * message rebuilds), others input bytes.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <interlink/auth.h>
#include <interlink/parse.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "ep_priv.h"
#include "fz.h"

#define ME 0x0a000007u
#define OTHER 0x0a000008u
#define THIRD 0x0a000009u
#define N_GROUPS 2

static struct il_ep *ep, *ep_plain, *ep_auth;
static uint64_t now;
/* The auth endpoint's key; frames are signed with it, or with OTHER_KEY. */
static const struct il_auth_key KEY = { .id = 7, .key = "fuzz-key-fuzz-key-fuzz-key-fuzz" };
static const struct il_auth_key OTHER_KEY = { .id = 7, .key = "another-key-another-key-another" };
static struct il_auth_keyring ring; /* KEY alone */
static uint64_t sign_ctr;
static const uint16_t group_ids[N_GROUPS] = {1, 2};

struct track {
	bool po_ok, uto_ok;
	uint64_t po_last, uto_last;
	uint32_t epoch;
	uint64_t sum; /* of every delivered byte: they must all be readable */
};
static struct track tr[N_GROUPS];

FZ_HARNESS static struct track *track_of(void *user)
{
	return &tr[(uintptr_t)user];
}

FZ_HARNESS static void deliver_check(struct track *t, const struct il_ep_msg *m, bool uto)
{
	bool *ok = uto ? &t->uto_ok : &t->po_ok;
	uint64_t *last = uto ? &t->uto_last : &t->po_last;

	if (m->epoch != t->epoch) {
		t->epoch = m->epoch;
		t->po_ok = t->uto_ok = false;
	}
	FZ_CHECK(!*ok || m->global_seq > *last, "%s delivery of %lu after %lu",
		 uto ? "U" : "P", (unsigned long)m->global_seq, (unsigned long)*last);
	*ok = true;
	*last = m->global_seq;
	for (unsigned i = 0; i < m->len; i++)
		t->sum += ((const uint8_t *)m->data)[i];
}

FZ_HARNESS static void on_po(void *user, const struct il_ep_msg *m)
{
	deliver_check(track_of(user), m, false);
}

FZ_HARNESS static void on_uto(void *user, const struct il_ep_msg *m)
{
	deliver_check(track_of(user), m, true);
}

FZ_HARNESS static void on_view(void *user, const struct il_ep_view *v)
{
	struct track *t = track_of(user);

	/* A new stretch of the stream: the order restarts. */
	if (v->event != IL_EP_VIEW_CHANGED)
		t->po_ok = t->uto_ok = false;
	for (unsigned i = 0; i < v->n_members; i++)
		t->sum += v->members[i];
	for (unsigned i = 0; i < v->n_senders; i++)
		t->sum += v->sender_ids[i] + v->sender_next[i] + v->sender_inc[i];
}

FZ_HARNESS static void on_lost(void *user, uint16_t group, uint64_t first, uint64_t last)
{
	(void)user;
	(void)group;
	FZ_CHECK(first <= last, "lost %lu..%lu", (unsigned long)first, (unsigned long)last);
}

static const struct il_ep_callbacks cbs = { .po = on_po, .uto = on_uto, .view = on_view,
					    .lost = on_lost };

FZ_HARNESS static void tap(void *arg, const uint8_t *f, size_t len)
{
	struct il_parsed p;

	(void)arg;
	FZ_CHECK(len <= ep->max_frame, "a frame of %zu bytes", len);
	enum il_verdict v = il_parse_payload(f, (uint32_t)len, &p);
	FZ_CHECK(v == IL_V_DATA || v == IL_V_NAK || v == IL_V_CONTROL,
		 "the endpoint sent a frame the appliance drops: %s", il_verdict_names[v]);
	if (ep == ep_auth && v != IL_V_DATA && p.type != IL_T_LEC_REPAIR)
		FZ_CHECK(il_auth_verify(&ring, NULL, f, (uint32_t)len) == IL_AUTH_OK,
			 "a control frame went without a valid MAC");
}

FZ_HARNESS int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct il_ep_config cfg;
	char err[256];

	(void)argc;
	(void)argv;
	il_ep_config_init(&cfg);
	cfg.member_id = ME;
	cfg.incarnation = 5;
	cfg.rx_window = 64; /* small: the fuzzer fills it */
	cfg.tx_depth = 8;
	cfg.max_deferred = 1 << 16;
	cfg.lec_r = 4; /* LEC's stores small: made and freed per input */
	cfg.lec_store_msgs = 128; /* the least it takes */
	cfg.mtu = 576;          /* short frames: LEC's store slots are as long */
	cfg.lec_store_repairs = 16;
	ring.n = 1;
	ring.k[0] = KEY;
	ep_plain = ep_open_detached(&cfg, tap, NULL, err, sizeof(err));
	ep_auth = ep_open_detached(&cfg, tap, NULL, err, sizeof(err));
	if (ep_plain == NULL || ep_auth == NULL) {
		fprintf(stderr, "%s\n", err);
		abort();
	}
	/* The key file the endpoint reads, gone once read. */
	char path[64];
	snprintf(path, sizeof(path), "/tmp/fuzz_ep_rx-keys-%d", (int)getpid());
	FILE *f = fopen(path, "w");
	if (f == NULL || chmod(path, 0600) != 0)
		abort();
	fprintf(f, "%u ", KEY.id);
	for (unsigned i = 0; i < IL_AUTH_KEY_LEN; i++)
		fprintf(f, "%02x", KEY.key[i]);
	fprintf(f, "\n");
	fclose(f);
	if (il_ep_set_auth(ep_auth, path, 0, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		abort();
	}
	unlink(path);
	return 0;
}

static const uint32_t epochs[4] = {100, 101, 99, 0};
static const uint32_t senders[4] = {ME, OTHER, THIRD, 0};

/* One Interlink message built from a few fields of the input. */
FZ_HARNESS static size_t build(struct fz *z, uint8_t *f, size_t cap)
{
	static const uint8_t types[8] = {IL_T_DATA, IL_T_DATA, IL_T_STABLE, IL_T_VIEW,
					 IL_T_CREDIT, IL_T_UNAVAIL, IL_T_LEC_REPAIR, IL_T_ACK};
	uint8_t sel = fz_u8(z), fl = fz_u8(z);
	struct il_hdr_fields h = { .type = types[sel & 7],
				   .group_id = (sel & 0x18) == 0x18 ? 9 : group_ids[(sel >> 3) & 1],
				   .epoch = epochs[(sel >> 5) & 3],
				   .sender_id = senders[fl & 3] };
	uint8_t *b, *e = f + cap;

	/* Sequence numbers: small ones meet, a big one now and then. */
	h.sender_seq = fl & 0x04 ? fz_u64(z) : fz_u8(z);
	h.global_seq = fl & 0x08 ? fz_u64(z) : fz_u8(z);
	h.stable_seq = fl & 0x10 ? fz_u64(z) : fz_u8(z);
	h.flags = h.type == IL_T_DATA || h.type == IL_T_STABLE ? IL_F_STAMPED : 0;
	if (fl & 0x20)
		h.flags |= IL_F_STABLE_VALID;
	if (fl & 0x40)
		h.flags |= IL_F_FIFO_START;
	b = f + IL_HDR_LEN;
	switch (h.type) {
	case IL_T_DATA: {
		unsigned n = 1 + fz_u8(z) % 4;

		h.msg_count = (uint16_t)n;
		for (unsigned i = 0; i < n; i++) {
			size_t ml = fz_u8(z) % 24, got;
			const uint8_t *src = fz_bytes(z, ml, &got);

			if (b + IL_MSG_HDR_LEN + ml > e)
				break;
			b = il_rec_put(b, (uint16_t)ml);
			memset(b, 0xa5, ml);
			memcpy(b, src, got);
			b += ml;
		}
		break;
	}
	case IL_T_STABLE:
		b = il_stable_put(b, fz_u8(z));
		break;
	case IL_T_VIEW: {
		unsigned nm = fz_u8(z) % 5, ns = fz_u8(z) % 4;

		b = il_view_put(b, fz_u8(z), (uint16_t)nm, (uint16_t)ns);
		for (unsigned i = 0; i < nm; i++)
			b = il_view_member_put(b, senders[fz_u8(z) & 3], 1 + fz_u8(z) % 3);
		for (unsigned i = 0; i < ns; i++)
			b = il_view_sender_put(b, senders[fz_u8(z) & 3], fz_u8(z) % 7, fz_u8(z));
		break;
	}
	case IL_T_CREDIT:
		b = il_credit_put(b, fz_u8(z) & 1 ? fz_u64(z) : fz_u8(z), fz_u8(z),
				  fz_u8(z) & 1 ? fz_u32(z) : 0);
		break;
	case IL_T_UNAVAIL: {
		uint64_t first = fz_u8(z) & 1 ? fz_u64(z) : fz_u8(z);

		b = il_range_put(b, first, first + fz_u8(z));
		break;
	}
	case IL_T_LEC_REPAIR: {
		/* ids of frames near the stream; the payload a whole DATA frame
		 * of the first (a one-frame repair rebuilds it) or input bytes */
		uint8_t sel2 = fz_u8(z);
		unsigned n = 1 + sel2 % 4;
		uint8_t pay[512];
		size_t pl;
		uint64_t seq0 = fz_u8(z);

		h.sender_id = senders[(sel2 >> 2) & 3];
		h.flags = 0;
		struct il_lec_fields lf = { .count = (uint8_t)n, .rate_r = 4,
					    .origin = (sel2 >> 4) & 1 };
		if (sel2 & 0x20) {
			struct il_hdr_fields d = { .type = IL_T_DATA, .flags = IL_F_STAMPED,
						   .group_id = h.group_id, .epoch = h.epoch,
						   .msg_count = 1, .sender_id = OTHER,
						   .sender_seq = fz_u8(z), .global_seq = seq0 };
			size_t ml = fz_u8(z) % 32;
			uint8_t *r = il_rec_put(il_hdr_put(pay, &d), (uint16_t)ml);

			memset(r, 0x5a, ml);
			pl = (size_t)(r + ml - pay);
		} else {
			size_t got;
			const uint8_t *src = fz_bytes(z, 1 + fz_u8(z) % 64, &got);

			memcpy(pay, src, got);
			pl = got ? got : 1;
			if (!got)
				pay[0] = 0;
		}
		lf.len = (uint16_t)pl;
		lf.len_xor = (uint16_t)(sel2 & 0x40 ? fz_u16(z) : pl);
		if (b + IL_LEC_BODY_LEN + n * IL_LEC_ID_LEN + pl > e)
			break;
		b = il_lec_body_put(b, &lf);
		b = il_lec_id_put(b, h.group_id, h.epoch, seq0);
		for (unsigned i = 1; i < n; i++)
			b = il_lec_id_put(b, h.group_id, h.epoch, fz_u8(z));
		memcpy(b, pay, pl);
		b += pl;
		break;
	}
	default:
		b = il_ack_put(b, fz_u8(z), fz_u32(z));
		break;
	}
	il_hdr_put(f, &h);
	size_t len = (size_t)(b - f);
	/* Signed (DATA never is): with the endpoint's key, or another. */
	if (h.type != IL_T_DATA && (fl & 0x80) && len + IL_AUTH_OPT_LEN <= cap)
		len = il_auth_seal(sel & 0x80 ? &OTHER_KEY : &KEY, ++sign_ctr, f, (uint32_t)len);
	return len;
}

FZ_HARNESS static void rx(const uint8_t *d, size_t len)
{
	/* Exact size: ASan sees a read past the datagram. */
	uint8_t *c = malloc(len ? len : 1);

	if (c == NULL)
		abort();
	memcpy(c, d, len);
#ifdef FZ_TRACE
	if (len >= 40) fprintf(stderr, "  rx type %u flags %x group %u epoch %u sender %x sseq %lu g %lu stable %lu len %zu\n", c[1], c[3], il_get16(c+4), il_get32(c+12), il_get32(c+8), (unsigned long)il_get64(c+16), (unsigned long)il_get64(c+24), (unsigned long)il_get64(c+32), len);
#endif
	ep_rx_datagram(ep, c, len, now);
	free(c);
}

FZ_HARNESS static void check_windows(void)
{
	for (unsigned i = 0; i < ep->n_slots; i++) {
		const struct ep_group *g = &ep->g[i];

		if (!g->used || !(g->roles & IL_EP_RECEIVER))
			continue;
		FZ_CHECK(g->w.uto <= g->w.po && g->w.po - g->w.uto <= (uint64_t)g->w.mask + 1,
			 "window uto %lu po %lu size %u", (unsigned long)g->w.uto,
			 (unsigned long)g->w.po, g->w.mask + 1);
	}
}

FZ_HARNESS static void join_all(uint8_t roles)
{
	/* The second group only when the input asks for it: joining costs. */
	for (unsigned i = 0; i < ((roles & 0x80) ? N_GROUPS : 1u); i++) {
		uint32_t r = (roles >> (2 * i)) & 3;

		if (r == 0)
			r = IL_EP_RECEIVER;
		if (il_ep_join(ep, group_ids[i], i ? "239.1.1.2" : "239.1.1.1", r, &cbs,
			       (void *)(uintptr_t)i) != 0)
			abort();
		struct ep_group *g = ep_group(ep, group_ids[i]);
		/* On the target's clock from here on. */
		g->join_ns = g->hb_ns = now;
	}
}

FZ_HARNESS int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz z = { data, size };
	uint8_t f[EP_FRAME_MAX];

	uint8_t mode = fz_u8(&z);

	ep = mode & 1 ? ep_auth : ep_plain;
	if (ep == ep_auth) {
		il_auth_replay_init(ep->auth_ctl, ep->auth_ctl->mask + 1);
		il_auth_replay_init(ep->auth_nak, ep->auth_nak->mask + 1);
		ep->auth_st = (struct il_ep_auth_stats){ 0 };
	}
	sign_ctr = 0;
	now = 1000000000ull;
	memset(tr, 0, sizeof(tr));
	ep->st = (struct il_ep_stats){ 0 };
	ep->epoch = ep->final_epoch = ep->new_epoch = 0;
	ep->final_wm = ep->await_until = 0;
	ep->awaiting = false;
	ep->cfg.wait_credit = fz_u8(&z) & 1;
	join_all(fz_u8(&z));
	if (mode & 2) { /* LEC on group 1: repairs to and from the other members */
		int rc = il_ep_lec(ep, group_ids[0], mode & 4 ? IL_EP_LEC_APPLIANCE : IL_EP_LEC_BOTH,
				   1 + (mode >> 3) % 4);
		if (rc != 0) {
			fprintf(stderr, "il_ep_lec: %d\n", rc);
			abort();
		}
		il_ep_lec_peer(ep, OTHER, "10.0.0.8");
		il_ep_lec_peer(ep, THIRD, "10.0.0.9");
	}
	for (unsigned ops = 0; z.n > 0 && ops < 256; ops++) {
		uint8_t op = fz_u8(&z);

#ifdef FZ_TRACE
		fprintf(stderr, "op %u\n", op % 8);
#endif
		switch (op % 8) {
		case 0: { /* a datagram as the socket hands it over */
			size_t got;
			const uint8_t *d = fz_chunk(&z, 1500, &got);

			rx(d, got);
			break;
		}
		case 1:
		case 2:
			rx(f, build(&z, f, ep->max_frame));
			break;
		case 3: /* time passes */
			now += (uint64_t)fz_u16(&z) * 1000u;
			ep_timers(ep, now);
			break;
		case 4:
			for (unsigned i = 0; i < ep->n_slots; i++)
				if (ep->g[i].used)
					ep_deliver(ep, &ep->g[i]);
			break;
		case 5: { /* the application sends */
			size_t got;
			const uint8_t *m = fz_chunk(&z, 2000, &got);

			il_ep_send(ep, group_ids[op >> 7], m, got);
			break;
		}
		case 6: /* the final watermark never comes */
			now += EP_FINAL_WAIT_NS + 1;
			ep_epoch_timer(ep, now);
			break;
		default: { /* leave and join again */
			uint16_t id = group_ids[op >> 7];
			struct ep_group *g = ep_group(ep, id);

			if (g == NULL)
				break;
			uint32_t roles = g->roles;

			il_ep_leave(ep, id);
			if (il_ep_join(ep, id, op >> 7 ? "239.1.1.2" : "239.1.1.1", roles, &cbs,
				       (void *)(uintptr_t)(op >> 7)) != 0)
				abort();
			g = ep_group(ep, id);
			g->join_ns = g->hb_ns = now;
			tr[op >> 7].po_ok = tr[op >> 7].uto_ok = false;
			break;
		}
		}
		check_windows();
	}
	for (unsigned i = 0; i < N_GROUPS; i++)
		if (ep_group(ep, group_ids[i]) != NULL)
			il_ep_leave(ep, group_ids[i]);
	ep_lec_free(ep); /* the next input makes its own */
	for (unsigned i = 0; i < ep->n_held; i++)
		free(ep->held[i]);
	free(ep->held);
	ep->held = NULL;
	ep->n_held = ep->cap_held = 0;
	return 0;
}
