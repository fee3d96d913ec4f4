/* SPDX-License-Identifier: BSD-3-Clause
 * The sequencer's per-sender FIFO in a group with a control stage
 * (docs/control.md, "Sender FIFO"): a real appliance (EAL --no-huge,
 * net_ring ports, the real classify, sequencer, control and nak stages)
 * driven burst by burst. A frame lost before the sequencer makes the
 * next ones of its sender refused and the sender told where to resume
 * (a CREDIT whose header sender_seq is the point); a re-sent frame that
 * was stamped is never stamped twice.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <rte_eal.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include <interlink/app.h>
#include <interlink/chan.h>
#include <interlink/wire.h>
#include <interlink/wire_msg.h>

#include "seq.h"
#include "tu_frame.h"

static struct il_app app;
static struct il_stage *cl, *sq, *ct, *nk;
static char chan_path[64];

static struct rte_mbuf *frame(uint8_t type, uint16_t group, uint32_t sender, uint64_t sseq,
			      uint64_t base, unsigned n)
{
	unsigned body = type == IL_T_DATA ? n * (IL_MSG_HDR_LEN + 8) : IL_MEMBER_MSG_LEN;
	unsigned plen = IL_HDR_LEN + body;
	uint8_t *h = NULL;
	struct rte_mbuf *m = tu_udp_frame(app.pool, 0x0a000000u + (sender & 0xffff),
					  0xef010100u + group, 7400, plen, &h);
	assert_non_null(m);
	if (type == IL_T_DATA) {
		/* stable_seq: the sender's oldest unstable */
		h = il_hdr_put(h, &(struct il_hdr_fields){ .type = type, .group_id = group,
							   .msg_count = (uint16_t)n,
							   .sender_id = sender, .sender_seq = sseq,
							   .stable_seq = base });
		for (unsigned i = 0; i < n; i++)
			h = il_rec_put(h, 8) + 8;
	} else {
		h = il_hdr_put(h, &(struct il_hdr_fields){ .type = type, .group_id = group,
							   .sender_id = sender });
		il_member_put(h, IL_ROLE_SENDER, (uint32_t)base); /* incarnation */
	}
	return m;
}

static struct rte_mbuf *data(uint32_t sender, uint64_t sseq, unsigned n)
{
	return frame(IL_T_DATA, 1, sender, sseq, 0, n);
}

static uint64_t ctr(const struct il_stage *st, const char *name)
{
	for (unsigned i = 0; i < st->type->n_counters; i++)
		if (!strcmp(st->type->counter_names[i], name))
			return st->ctr[i];
	fail_msg("no counter %s in %s", name, st->name);
	return 0;
}

/* Resume notices emitted so far: CREDIT frames with a sender_seq, as
 * (sender, point, limit_seq); every emitted frame is released. */
struct notice {
	uint32_t sender;
	uint64_t resume, limit;
};

static unsigned take_notices(struct notice *out, unsigned max)
{
	struct il_lcore_io *io = ct->io;
	unsigned k = 0;

	for (uint16_t i = 0; i < io->n_defer; i++) {
		const uint8_t *h = rte_pktmbuf_mtod(io->defer[i], const uint8_t *) + 42;

		if (h[IL_OFF_TYPE] == IL_T_CREDIT && il_get64(h + IL_OFF_SENDER_SEQ) && k < max)
			out[k++] = (struct notice){ il_get32(h + IL_OFF_SENDER_ID),
						    il_get64(h + IL_OFF_SENDER_SEQ),
						    il_get64(h + IL_HDR_LEN) };
		rte_pktmbuf_free(io->defer[i]);
	}
	io->n_defer = 0;
	return k;
}

/* Flags of the DATA frames of the last run(). */
static uint8_t out_flags[8];

/* One burst through the "in" chain; the sender_seqs of the DATA frames
 * that came out stamped, in order. */
static unsigned run(struct rte_mbuf **p, uint16_t n, uint64_t *sseq_out)
{
	n = cl->type->process(cl, p, n);
	n = sq->type->process(sq, p, n);
	n = ct->type->process(ct, p, n);
	n = nk->type->process(nk, p, n);
	unsigned k = 0;
	for (uint16_t i = 0; i < n; i++) {
		const uint8_t *h = rte_pktmbuf_mtod(p[i], const uint8_t *) + 42;
		if (h[IL_OFF_TYPE] == IL_T_DATA) {
			assert_true(h[IL_OFF_FLAGS] & IL_F_STAMPED);
			if (k < 8)
				out_flags[k] = h[IL_OFF_FLAGS];
			sseq_out[k++] = il_get64(h + IL_OFF_SENDER_SEQ);
		}
		rte_pktmbuf_free(p[i]);
	}
	return k;
}

static void test_gap_refused_and_resume_told_once(void **state)
{
	(void)state;
	struct rte_mbuf *p[16];
	uint64_t out[16];
	struct notice nt[8];
	uint64_t gap0 = ctr(sq, "drop_fifo_gap"), dup0 = ctr(sq, "drop_fifo_dup");

	/* The first frame is learned from (no base given); 2 is lost. */
	p[0] = data(101, 1, 1);
	p[1] = data(101, 3, 1);
	p[2] = data(101, 4, 1);
	assert_int_equal(run(p, 3, out), 1);
	assert_int_equal(out[0], 1);
	assert_int_equal(ctr(sq, "drop_fifo_gap") - gap0, 2);
	assert_int_equal(take_notices(nt, 8), 1);
	assert_int_equal(nt[0].sender, 101);
	assert_int_equal(nt[0].resume, 2);
	assert_int_equal(nt[0].limit, 0); /* no window yet: no grant in it */
	/* Still in flight: refused, and told no more within the interval. */
	p[0] = data(101, 5, 1);
	assert_int_equal(run(p, 1, out), 0);
	assert_int_equal(take_notices(nt, 8), 0);
	/* The sender goes back: 2.. are stamped, in order; a packed frame
	 * of three moves the next by three. */
	p[0] = data(101, 2, 1);
	p[1] = data(101, 3, 2);
	p[2] = data(101, 5, 3);
	p[3] = data(101, 8, 1);
	assert_int_equal(run(p, 4, out), 4);
	assert_int_equal(out[0], 2);
	assert_int_equal(out[1], 3);
	assert_int_equal(out[2], 5);
	assert_int_equal(out[3], 8);
	/* A re-sent frame that was stamped: dropped, no notice. */
	p[0] = data(101, 5, 3);
	p[1] = data(101, 8, 1);
	assert_int_equal(run(p, 2, out), 0);
	assert_int_equal(ctr(sq, "drop_fifo_dup") - dup0, 2);
	assert_int_equal(take_notices(nt, 8), 0);
	/* Re-packed across the next (8..10 while 9 is next): refused, and
	 * the sender told to go on from exactly 9. */
	p[0] = data(101, 8, 3);
	assert_int_equal(run(p, 1, out), 0);
	assert_int_equal(take_notices(nt, 8), 1);
	assert_int_equal(nt[0].resume, 9);
	p[0] = data(101, 9, 1);
	assert_int_equal(run(p, 1, out), 1);
}

static void test_senders_and_groups_are_apart(void **state)
{
	(void)state;
	struct rte_mbuf *p[8];
	uint64_t out[8];
	struct notice nt[8];

	/* Sender 202's gap does not hold back 203, nor group 2's 202. */
	p[0] = data(202, 10, 1);
	p[1] = data(203, 1, 1);
	p[2] = data(202, 12, 1);
	p[3] = data(203, 2, 1);
	p[4] = frame(IL_T_DATA, 2, 202, 40, 0, 1);
	p[5] = frame(IL_T_DATA, 2, 202, 41, 0, 1);
	assert_int_equal(run(p, 6, out), 5);
	assert_int_equal(take_notices(nt, 8), 1);
	assert_int_equal(nt[0].sender, 202);
	assert_int_equal(nt[0].resume, 11);
	/* sender_seq 0: the sender does not number its frames: not checked. */
	p[0] = data(204, 0, 1);
	p[1] = data(204, 0, 1);
	assert_int_equal(run(p, 2, out), 2);
}

static void test_first_frame_lost_is_noticed_by_its_base(void **state)
{
	(void)state;
	struct rte_mbuf *p[4];
	uint64_t out[4];
	struct notice nt[4];

	/* A libinterlink sender's stable_seq says its oldest unstable is 1:
	 * a first frame 3 means 1 and 2 were lost. */
	p[0] = frame(IL_T_DATA, 1, 301, 3, 1, 1);
	assert_int_equal(run(p, 1, out), 0);
	assert_int_equal(take_notices(nt, 4), 1);
	assert_int_equal(nt[0].resume, 1);
	p[0] = frame(IL_T_DATA, 1, 301, 1, 1, 2);
	p[1] = frame(IL_T_DATA, 1, 301, 3, 1, 1);
	assert_int_equal(run(p, 2, out), 2);
	/* A base above the frame's own sender_seq is nonsense: ignored. */
	p[0] = frame(IL_T_DATA, 1, 302, 5, 9, 1);
	assert_int_equal(run(p, 1, out), 1);
}

static void test_new_incarnation_learns_afresh(void **state)
{
	(void)state;
	struct rte_mbuf *p[4];
	uint64_t out[4];
	struct notice nt[4];
	uint64_t r0 = ctr(sq, "fifo_resets");

	/* The first JOIN of a sender: its first stamped frame starts its
	 * FIFO at every receiver (FIFO_START), the next one does not. */
	p[0] = frame(IL_T_JOIN, 1, 401, 0, 7, 0);
	p[1] = data(401, 1, 1);
	p[2] = data(401, 2, 1);
	assert_int_equal(run(p, 3, out), 2);
	assert_true(out_flags[0] & IL_F_FIFO_START);
	assert_false(out_flags[1] & IL_F_FIFO_START);
	/* The same incarnation again (a JOIN retried, or a sender that
	 * rejoins after an exclusion): nothing changes. */
	p[0] = frame(IL_T_JOIN, 1, 401, 0, 7, 0);
	assert_int_equal(run(p, 1, out), 0);
	p[0] = data(401, 1, 1);
	assert_int_equal(run(p, 1, out), 0);
	p[0] = data(401, 3, 1);
	assert_int_equal(run(p, 1, out), 1);
	assert_false(out_flags[0] & IL_F_FIFO_START);
	assert_int_equal(ctr(sq, "fifo_resets") - r0, 0);
	/* Restarted: a new incarnation numbers from 1 again, and its first
	 * stamped frame is marked (even when it came after a lost one). */
	p[0] = frame(IL_T_JOIN, 1, 401, 0, 8, 0);
	assert_int_equal(run(p, 1, out), 0);
	assert_int_equal(ctr(sq, "fifo_resets") - r0, 1);
	p[0] = frame(IL_T_DATA, 1, 401, 2, 1, 1); /* 1 was lost: refused, told */
	assert_int_equal(run(p, 1, out), 0);
	p[0] = data(401, 1, 1);
	p[1] = data(401, 2, 1);
	assert_int_equal(run(p, 2, out), 2);
	assert_int_equal(out[0], 1);
	assert_true(out_flags[0] & IL_F_FIFO_START);
	assert_false(out_flags[1] & IL_F_FIFO_START);
	take_notices(nt, 4);
}

static void test_resume_repeated_after_the_interval(void **state)
{
	(void)state;
	struct rte_mbuf *p[2];
	uint64_t out[2];
	struct notice nt[4];

	p[0] = data(501, 1, 1);
	p[1] = data(501, 3, 1);
	assert_int_equal(run(p, 2, out), 1);
	assert_int_equal(take_notices(nt, 4), 1);
	/* The notice (or the re-sent frame) was lost: after the interval
	 * (100 ms here: long enough that no step of the other tests, under
	 * sanitizers on a loaded machine, takes it) the next refused frame
	 * brings it again. */
	usleep(150000);
	p[0] = data(501, 4, 1);
	assert_int_equal(run(p, 1, out), 0);
	assert_int_equal(take_notices(nt, 4), 1);
	assert_int_equal(nt[0].resume, 2);
	assert_int_equal(ctr(ct, "tx_resume") >= 2, 1);
}

/* A message of the control process to group 1, zeroed but for its type. */
static struct il_cmsg cmsg(uint16_t type, uint16_t len)
{
	struct il_cmsg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.group = 1;
	m.len = len;
	return m;
}

/* With a window (the control process's CREDIT over the channel), a
 * resume notice repeats the sender's last grant: it never grants more
 * than the STABLEs behind it allow. */
static void test_resume_repeats_the_last_grant(void **state)
{
	(void)state;
	struct rte_mbuf *p[2];
	uint64_t out[2];
	struct notice nt[8];
	struct il_chan *ch;
	char err[256];
	struct il_cmsg m;

	/* Before any grant: the notice grants nothing. */
	p[0] = data(601, 1, 1);
	p[1] = data(601, 3, 1);
	assert_int_equal(run(p, 2, out), 1);
	assert_int_equal(take_notices(nt, 8), 1);
	assert_int_equal(nt[0].limit, 0);
	/* The control process hands out a window of 64: every sender the
	 * stage knows gets its grant, 601's is 1 + 64 (nothing stable). */
	uint64_t credits = ctr(ct, "tx_credit");
	assert_int_equal(il_chan_open(chan_path, IL_CHAN_CONTROL, NULL, &ch, err, sizeof(err)), 0);
	m = cmsg(IL_CM_CREDIT, sizeof(m.u.credit));
	m.u.credit.epoch = 78;
	m.u.credit.window = 64;
	assert_int_equal(il_chan_send_burst(ch, &m, 1), 1);
	usleep(1000); /* the stage drains the channel every 20 us */
	assert_int_equal(run(p, 0, out), 0);
	assert_true(ctr(ct, "tx_credit") > credits);
	take_notices(nt, 8);
	usleep(150000);
	/* Still refused, the interval is over: told again, with that grant. */
	p[0] = data(601, 4, 1);
	assert_int_equal(run(p, 1, out), 0);
	assert_int_equal(take_notices(nt, 8), 1);
	assert_int_equal(nt[0].sender, 601);
	assert_int_equal(nt[0].resume, 2);
	assert_int_equal(nt[0].limit, 65);
	il_chan_close(ch);
}

/* The grants and VIEW entries the stage emitted since the last call:
 * sender's last grant (0: none), and its VIEW entry (incarnation, next). */
static uint64_t take_grant(uint32_t sender, uint32_t *view_inc, uint64_t *view_next)
{
	struct il_lcore_io *io = ct->io;
	uint64_t limit = 0;

	for (uint16_t i = 0; i < io->n_defer; i++) {
		const uint8_t *h = rte_pktmbuf_mtod(io->defer[i], const uint8_t *) + 42;
		const uint8_t *b = h + IL_HDR_LEN;

		if (h[IL_OFF_TYPE] == IL_T_CREDIT && il_get64(h + IL_OFF_SENDER_SEQ) == 0 &&
		    il_get32(h + IL_OFF_SENDER_ID) == sender)
			limit = il_get64(b);
		if (h[IL_OFF_TYPE] == IL_T_VIEW && view_inc != NULL) {
			const uint8_t *e = b + IL_VIEW_LEN + il_get16(b + 4) * IL_VIEW_MEMBER_LEN;

			for (uint16_t k = 0; k < il_get16(b + 6); k++, e += IL_VIEW_SENDER_LEN)
				if (il_get32(e) == sender) {
					*view_inc = il_get32(e + 4);
					*view_next = il_get64(e + 8);
				}
		}
		rte_pktmbuf_free(io->defer[i]);
	}
	io->n_defer = 0;
	return limit;
}

static void down(struct il_chan *ch, const struct il_cmsg *m)
{
	uint64_t out[1];

	assert_int_equal(il_chan_send_burst(ch, m, 1), 1);
	usleep(1000); /* the stage drains the channel every 20 us */
	assert_int_equal(run(NULL, 0, out), 0);
}

/* A restarted sender's credits start afresh: its old incarnation's
 * stable messages do not count for the new one (which would be granted,
 * and told stable, what its predecessor sent), and the VIEW names the
 * incarnation its entry is about. */
static void test_new_incarnation_restarts_credits(void **state)
{
	(void)state;
	struct rte_mbuf *p[32];
	uint64_t out[32];
	struct il_chan *ch;
	char err[256];
	struct il_cmsg m;
	struct il_seq *seq = sq->ctx;
	uint32_t inc = 0;
	uint64_t next = 0;

	assert_int_equal(il_chan_open(chan_path, IL_CHAN_CONTROL, NULL, &ch, err, sizeof(err)), 0);
	p[0] = frame(IL_T_JOIN, 1, 701, 0, 1, 0);
	for (unsigned i = 1; i <= 20; i++)
		p[i] = data(701, i, 1);
	assert_int_equal(run(p, 21, out), 20);
	/* All of it stable (the control process's watermark): 701's window
	 * slides to 21 + 64. */
	m = cmsg(IL_CM_WATERMARK, sizeof(m.u.wm));
	m.u.wm.epoch = 78;
	m.u.wm.stable_seq = seq->groups[0].next;
	down(ch, &m);
	assert_int_equal(take_grant(701, NULL, NULL), 21 + 64);
	/* 701 restarts: 5 frames of the new incarnation, then they are stable. */
	p[0] = frame(IL_T_JOIN, 1, 701, 0, 2, 0);
	for (unsigned i = 1; i <= 5; i++)
		p[i] = data(701, i, 1);
	assert_int_equal(run(p, 6, out), 5);
	take_grant(701, NULL, NULL);
	m.u.wm.stable_seq = seq->groups[0].next;
	down(ch, &m);
	assert_int_equal(take_grant(701, NULL, NULL), 6 + 64);
	/* A VIEW (from the control process) names 701: incarnation 2, next 6. */
	m = cmsg(IL_CM_VIEW, sizeof(m.u.view));
	m.u.view = (struct il_cm_view){ .epoch = 78, .view_id = 9, .n_members = 1, .window = 64 };
	assert_int_equal(il_chan_send_burst(ch, &m, 1), 1);
	m = cmsg(IL_CM_VIEW_MEMBERS, sizeof(m.u.vm));
	m.u.vm.view_id = 9;
	m.u.vm.count = 1;
	m.u.vm.m[0].id = 701;
	m.u.vm.m[0].roles = IL_ROLE_SENDER;
	down(ch, &m);
	take_grant(701, &inc, &next);
	assert_int_equal(inc, 2);
	assert_int_equal(next, 6);
	il_chan_close(ch);
	seq->groups[0].stable = UINT64_MAX / 2;
}

int main(int argc, char **argv)
{
	char err[512], cfg_text[2048];
	(void)argc;
	char *eal[] = {argv[0], "--no-huge", "-m", "256", "--no-pci", "--lcores", "0,1",
		       "--file-prefix", "il-fifo-test", "--log-level", "lib.eal:error",
		       "--vdev", "net_ring0", "--vdev", "net_ring1", NULL};
	if (rte_eal_init(15, eal) < 0) {
		fprintf(stderr, "EAL init failed\n");
		return 1;
	}
	snprintf(chan_path, sizeof(chan_path), "/dev/shm/il-fifo-test-%d", (int)getpid());
	snprintf(cfg_text, sizeof(cfg_text),
		 "name: fifotest\n"
		 "epoch: 78\n"
		 "ports:\n"
		 "  in: { device: net_ring0 }\n"
		 "  out: { device: net_ring1 }\n"
		 "groups:\n"
		 "  - { id: 1, address: 239.1.1.1 }\n"
		 "  - { id: 2, address: 239.1.1.2 }\n"
		 "stages:\n"
		 "  classify: { type: classify }\n"
		 "  seq: { type: sequencer, history: 64 }\n"
		 "  ctrl: { type: control, sequencer: seq, tx: out, chan: %s,\n"
		 "          resume_interval_us: 100000 }\n"
		 "  nak: { type: nak, sequencer: seq, tx: out }\n"
		 "pipeline:\n"
		 "  - lcore: 1\n"
		 "    chains:\n"
		 "      - { rx: in, stages: [classify, seq, ctrl, nak], tx: out }\n",
		 chan_path);
	struct il_cfg *cfg = il_cfg_load_string(cfg_text, "test", err, sizeof(err));
	if (!cfg || il_app_configure(&app, cfg, err, sizeof(err)) ||
	    il_app_start(&app, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		unlink(chan_path);
		return 1;
	}
	cl = il_app_stage(&app, "classify");
	sq = il_app_stage(&app, "seq");
	ct = il_app_stage(&app, "ctrl");
	nk = il_app_stage(&app, "nak");
	/* No control process here: make every stamped frame stable at once,
	 * so the history never refuses (that is another test's business). */
	struct il_seq *seq = sq->ctx;
	for (unsigned g = 0; g < app.n_groups; g++)
		seq->groups[g].stable = UINT64_MAX / 2;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gap_refused_and_resume_told_once),
		cmocka_unit_test(test_senders_and_groups_are_apart),
		cmocka_unit_test(test_first_frame_lost_is_noticed_by_its_base),
		cmocka_unit_test(test_new_incarnation_learns_afresh),
		cmocka_unit_test(test_resume_repeated_after_the_interval),
		cmocka_unit_test(test_resume_repeats_the_last_grant),
		cmocka_unit_test(test_new_incarnation_restarts_credits),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	il_app_stop(&app);
	il_cfg_free(cfg);
	unlink(chan_path);
	char sock[80];
	snprintf(sock, sizeof(sock), "%s.sock", chan_path);
	unlink(sock);
	rte_eal_cleanup();
	return rc;
}
