/* SPDX-License-Identifier: BSD-3-Clause
 * libFuzzer target: interlink-control's handling of what the data plane
 * hands it (control/membership.c and stability.c, as control/loop.c drives
 * them): ACK, JOIN, LEAVE, HEARTBEAT and RESYNC messages of the channel,
 * whose fields come from the members' frames (ids, roles, incarnations,
 * cumulative ACKs, buffer room, loss rates) or from a data plane that
 * restarted, interleaved with the loop's own calls: failure-detection
 * ticks, pauses, watermark and view collection (with a down ring that
 * takes only part of a batch), new epochs and resets.
 *
 * The input is a program: one op byte, then the op's fields (fz.h). Group
 * ids, member ids and epochs come from small sets so that messages meet.
 * One membership table lives for the whole run (its 65536-group index is
 * allocated once); each input starts from an empty one and frees what it
 * made, so inputs do not depend on each other.
 *
 * Checked: a group's published watermark never goes down within an epoch;
 * a WATERMARK is only collected above what was published; a view is never
 * cut (VIEW, then every member in chunks of at most IL_CM_VIEW_CHUNK with
 * consecutive indexes); collection never returns more than it was allowed.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <interlink/chan.h>
#include <interlink/wire.h>

#include "fz.h"
#include "membership.h"

static struct il_mship ms;

FZ_HARNESS int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (il_mship_init(&ms, 0) != 0)
		abort();
	return 0;
}

#define N_GROUPS 4
/* The watermark last collected per group of our set, and its epoch. */
static uint64_t last_wm[N_GROUPS];
static uint32_t last_wm_epoch[N_GROUPS];
static bool last_wm_set[N_GROUPS];

FZ_HARNESS static uint16_t group_of(uint8_t b)
{
	static const uint16_t ids[N_GROUPS] = {1, 2, 777, 65535};

	return ids[b % N_GROUPS];
}

FZ_HARNESS static unsigned group_slot(uint16_t id)
{
	return id == 1 ? 0 : id == 2 ? 1 : id == 777 ? 2 : 3;
}

FZ_HARNESS static void check_views(const struct il_cmsg *out, unsigned n, unsigned max)
{
	FZ_CHECK(n <= max, "%u messages for room %u", n, max);
	for (unsigned i = 0; i < n;) {
		const struct il_cmsg *m = &out[i++];

		if (m->type != IL_CM_VIEW) {
			FZ_CHECK(m->type == IL_CM_CREDIT || m->type == IL_CM_WATERMARK,
				 "type %u among views", m->type);
			continue;
		}
		const struct il_mgroup *g = il_mship_group(&ms, m->group);
		FZ_CHECK(g != NULL, "a view of group %u that does not exist", m->group);
		if (m->flags & IL_CMF_REPEAT) {
			/* The view in force again: its id only, no members follow. */
			FZ_CHECK(m->u.view.view_id == (uint32_t)g->view_id,
				 "repeat of view %u, in force %lu", m->u.view.view_id,
				 (unsigned long)g->view_id);
			FZ_CHECK(i == n || out[i].type != IL_CM_VIEW_MEMBERS ||
					 out[i].group != m->group,
				 "members after a repeat of group %u", m->group);
			continue;
		}
		unsigned got = 0;
		while (got < m->u.view.n_members) {
			FZ_CHECK(i < n, "view of %u members cut after %u", m->u.view.n_members, got);
			const struct il_cmsg *c = &out[i++];

			FZ_CHECK(c->type == IL_CM_VIEW_MEMBERS && c->group == m->group &&
					 c->u.vm.view_id == m->u.view.view_id &&
					 c->u.vm.index == got && c->u.vm.count >= 1 &&
					 c->u.vm.count <= IL_CM_VIEW_CHUNK,
				 "view chunk at %u", got);
			got += c->u.vm.count;
		}
		FZ_CHECK(got == m->u.view.n_members, "view of %u members carries %u",
			 m->u.view.n_members, got);
	}
}

FZ_HARNESS static void collect(struct fz *z)
{
	struct il_cmsg out[64];
	unsigned max = 1 + fz_u8(z) % 64;
	unsigned n = il_mship_collect(&ms, out, max);

	FZ_CHECK(n <= max, "collect %u for %u", n, max);
	for (unsigned i = 0; i < n; i++) {
		const struct il_mgroup *g = il_mship_group(&ms, out[i].group);

		FZ_CHECK(out[i].type == IL_CM_WATERMARK && g != NULL, "collect type %u",
			 out[i].type);
		FZ_CHECK(out[i].u.wm.stable_seq > g->published, "watermark %lu not above %lu",
			 (unsigned long)out[i].u.wm.stable_seq, (unsigned long)g->published);
		FZ_CHECK(out[i].u.wm.epoch == ms.epoch, "watermark of epoch %u in %u",
			 out[i].u.wm.epoch, ms.epoch);
	}
	/* The down ring took only the first k. */
	unsigned k = n ? fz_u8(z) % (n + 1) : 0;
	for (unsigned i = 0; i < k; i++) {
		unsigned s = group_slot(out[i].group);

		if (last_wm_set[s] && last_wm_epoch[s] == ms.epoch)
			FZ_CHECK(out[i].u.wm.stable_seq >= last_wm[s],
				 "group %u watermark went down: %lu after %lu", out[i].group,
				 (unsigned long)out[i].u.wm.stable_seq, (unsigned long)last_wm[s]);
		last_wm[s] = out[i].u.wm.stable_seq;
		last_wm_epoch[s] = ms.epoch;
		last_wm_set[s] = true;
	}
	il_mship_published(&ms, out, k);
}

FZ_HARNESS int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz z = { data, size };
	uint64_t now = 1000000000ull;

	il_mship_reset(&ms, 1);
	ms.cfg = (struct il_mship_cfg){ .suspect_ns = 20000000ull * (1 + fz_u8(&z) % 4),
					.exclude_ns = fz_u8(&z) & 1 ? 200000000ull : 0,
					.window = fz_u8(&z) & 1 ? 256 : 0 };
	ms.st = (struct il_mship_stats){ 0 };
	memset(last_wm_set, 0, sizeof(last_wm_set));
	for (unsigned ops = 0; z.n > 0 && ops < 512; ops++) {
		uint8_t op = fz_u8(&z);
		struct il_cmsg m;

		memset(&m, 0, sizeof(m));
		switch (op % 12) {
		case 0: /* JOIN */
		case 1: /* LEAVE */
		case 2: /* HEARTBEAT */
			m.type = op % 12 == 0 ? IL_CM_JOIN : op % 12 == 1 ? IL_CM_LEAVE
									 : IL_CM_HEARTBEAT;
			m.group = group_of(op >> 4);
			m.flags = (op >> 6) & IL_CMF_RESYNC;
			m.u.member.receiver = 100 + fz_u8(&z) % 16;
			m.u.member.epoch = fz_u8(&z) % 8 ? ms.epoch : ms.epoch + 1;
			m.u.member.seq = fz_u16(&z);
			m.u.member.rx_ns = fz_u8(&z) & 1 ? now - fz_u16(&z) : 0;
			m.u.member.roles = fz_u8(&z) % 4;
			m.u.member.incarnation = fz_u8(&z) % 3;
			goto apply;
		case 3: /* ACK */
			m.type = IL_CM_ACK;
			m.group = group_of(op >> 4);
			m.u.ack.receiver = 100 + fz_u8(&z) % 16;
			m.u.ack.epoch = fz_u8(&z) % 8 ? ms.epoch : ms.epoch - 1;
			m.u.ack.cum_seq = fz_u8(&z) & 1 ? fz_u64(&z) : fz_u16(&z);
			m.u.ack.rx_ns = fz_u8(&z) & 1 ? now - fz_u16(&z) : 0;
			m.u.ack.view_id = fz_u8(&z);
			m.u.ack.buffer_free = fz_u8(&z) & 1 ? UINT32_MAX : fz_u16(&z);
			if (op & 0x80) { /* a WAN group */
				m.u.ack.s_bytes = fz_u16(&z);
				m.u.ack.rtt_ns = fz_u64(&z);
				m.u.ack.loss_ppm = fz_u32(&z);
			}
			goto apply;
		case 4: /* RESYNC (a control restart: the data plane's state) */
			m.type = IL_CM_RESYNC;
			m.group = group_of(op >> 4);
			m.u.resync.epoch = ms.epoch;
			m.u.resync.view_id = fz_u8(&z);
			m.u.resync.stable_seq = fz_u16(&z);
			m.u.resync.window = fz_u16(&z);
			m.u.resync.n_members = fz_u8(&z);
			goto apply;
		case 5: { /* a message as the ring holds it, any bytes */
			size_t got;
			const uint8_t *b = fz_bytes(&z, sizeof(m), &got);

			memcpy(&m, b, got);
			goto apply;
		}
		case 6: /* the housekeeping tick, some time later */
			now += (uint64_t)fz_u16(&z) * 10000u;
			il_mship_tick(&ms, now);
			break;
		case 7: { /* the data plane was silent for a while */
			uint64_t pause = (uint64_t)fz_u16(&z) * 10000u;

			now += pause;
			il_mship_grace(&ms, pause, now);
			break;
		}
		case 8:
			collect(&z);
			break;
		case 9: {
			struct il_cmsg out[96];
			unsigned max = fz_u8(&z) % 96;

			now += fz_u16(&z);
			unsigned n = il_mship_collect_views(&ms, out, max, now);
			check_views(out, n, max);
			break;
		}
		case 10: /* a data plane restarted: new epoch, members kept */
			il_mship_new_epoch(&ms, ms.epoch + 1 + fz_u8(&z) % 2, now);
			break;
		default: /* a data plane this process never talked to */
			il_mship_reset(&ms, fz_u8(&z) % 4);
			memset(last_wm_set, 0, sizeof(last_wm_set));
			break;
		}
		continue;
apply:
		/* As loop.c: liveness from the data plane's arrival stamp. */
		{
			uint64_t t = m.u.ack.rx_ns != 0 && m.u.ack.rx_ns <= now ? m.u.ack.rx_ns : now;
			int rc = il_mship_apply(&ms, &m, t);

			FZ_CHECK(rc >= -1 && rc <= 1, "apply returned %d", rc);
		}
	}
	il_mship_reset(&ms, 0);
	return 0;
}
