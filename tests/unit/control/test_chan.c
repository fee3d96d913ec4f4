/* SPDX-License-Identifier: BSD-3-Clause
 * Channel rings in one process: order, batches, wraparound, full ring,
 * the sleeping-consumer wake-up, incarnations, attach errors, and the
 * eventfd hand-over over the wake socket.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <sys/socket.h>

#include <interlink/chan.h>

#include "testutil.h"

struct fx {
	struct tu t;
	struct il_chan *dp, *ctl;
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	tu_init(&f->t, "chan");
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	il_chan_close(f->dp);
	il_chan_close(f->ctl);
	tu_cleanup(&f->t);
	free(f);
	return 0;
}

static void open_pair(struct fx *f, uint32_t up, uint32_t down)
{
	struct il_chan_params p = { .up_slots = up, .down_slots = down };
	char err[256];

	assert_int_equal(il_chan_open(f->t.chan, IL_CHAN_CONTROL, &p, &f->ctl, err, sizeof(err)),
			 0);
	assert_int_equal(il_chan_open(f->t.chan, IL_CHAN_DATAPLANE, NULL, &f->dp, err, sizeof(err)),
			 0);
}

static void mk(struct il_cmsg *m, uint64_t seq)
{
	memset(m, 0, sizeof(*m));
	m->type = IL_CM_PRIVATE;
	m->len = 56;
	m->group = (uint16_t)seq;
	for (unsigned i = 0; i < 7; i++)
		m->u.u64[i] = seq * 0x9e3779b97f4a7c15ull + i;
}

static void check(const struct il_cmsg *m, uint64_t seq)
{
	struct il_cmsg want;

	mk(&want, seq);
	assert_memory_equal(m, &want, sizeof(want));
}

static void test_order_and_batches(void **state)
{
	struct fx *f = *state;
	struct il_cmsg in[100], out[100];
	uint64_t sent = 0, got = 0;

	open_pair(f, 256, 64);
	/* Bursts of every size from 1 to 100, drained in other sizes. */
	for (unsigned b = 1; b <= 100; b++) {
		for (unsigned i = 0; i < b; i++)
			mk(&in[i], sent + i);
		assert_int_equal(il_chan_send_burst(f->dp, in, b), b);
		sent += b;
		while (got < sent) {
			unsigned want = (unsigned)(got % 37) + 1;
			unsigned n = il_chan_recv_burst(f->ctl, out, want);

			assert_true(n >= 1 && n <= want);
			for (unsigned i = 0; i < n; i++)
				check(&out[i], got + i);
			got += n;
		}
		assert_int_equal(il_chan_recv_burst(f->ctl, out, 100), 0);
	}
	/* Down direction works the same way. */
	mk(&in[0], 7);
	assert_int_equal(il_chan_send_burst(f->ctl, in, 1), 1);
	assert_int_equal(il_chan_recv_burst(f->dp, out, 100), 1);
	check(&out[0], 7);
}

static void test_wraparound(void **state)
{
	struct fx *f = *state;
	struct il_cmsg in[8], out[8];
	uint64_t sent = 0, got = 0;

	open_pair(f, 8, 8);
	/* Odd burst sizes on an 8-slot ring: every start offset and every
	 * split point of a copy across the end gets exercised. */
	for (unsigned round = 0; round < 10000; round++) {
		unsigned b = round % 7 + 1, n;

		for (unsigned i = 0; i < b; i++)
			mk(&in[i], sent + i);
		n = il_chan_send_burst(f->dp, in, b);
		assert_int_equal(n, b);
		sent += n;
		n = il_chan_recv_burst(f->ctl, out, (round * 3) % 8 + 1);
		for (unsigned i = 0; i < n; i++)
			check(&out[i], got + i);
		got += n;
		/* Keep the ring below full so that every send fits. */
		while (sent - got > 1) {
			n = il_chan_recv_burst(f->ctl, out, 8);
			for (unsigned i = 0; i < n; i++)
				check(&out[i], got + i);
			got += n;
		}
	}
	assert_true(sent > 30000);
}

static void test_full_ring(void **state)
{
	struct fx *f = *state;
	struct il_cmsg in[40], out[40];
	struct il_chan_ring_stats st;

	open_pair(f, 32, 2);
	for (unsigned i = 0; i < 40; i++)
		mk(&in[i], i);
	assert_int_equal(il_chan_tx_free(f->dp), 32);
	/* 40 offered, 32 fit: the first 32, the rest counted, no waiting. */
	assert_int_equal(il_chan_send_burst(f->dp, in, 40), 32);
	assert_int_equal(il_chan_tx_free(f->dp), 0);
	assert_int_equal(il_chan_send_burst(f->dp, in, 3), 0);
	il_chan_stats(f->ctl, true, &st);
	assert_int_equal(st.drops, 8 + 3);
	assert_int_equal(st.enqueued, 32);
	assert_int_equal(il_chan_rx_pending(f->ctl), 32);
	assert_int_equal(il_chan_recv_burst(f->ctl, out, 40), 32);
	for (unsigned i = 0; i < 32; i++)
		check(&out[i], i);
	/* Space again after draining. */
	assert_int_equal(il_chan_send_burst(f->dp, in, 5), 5);
	il_chan_stats(f->dp, true, &st);
	assert_int_equal(st.dequeued, 32);
	assert_int_equal(st.enqueued, 37);
	/* The down ring's 2 slots are independent. */
	assert_int_equal(il_chan_send_burst(f->ctl, in, 3), 2);
}

static uint64_t efd_pending(int efd)
{
	uint64_t v = 0;

	if (read(efd, &v, sizeof(v)) != (ssize_t)sizeof(v))
		return 0;
	return v;
}

static void test_wakeup_protocol(void **state)
{
	struct fx *f = *state;
	struct il_cmsg m[4];
	struct il_chan_ring_stats st;
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	assert_true(efd >= 0);
	open_pair(f, 64, 64);
	il_chan_set_wake_fd(f->dp, efd);
	mk(&m[0], 0);
	mk(&m[1], 1);

	/* Consumer busy (not sleeping): no eventfd write at all. */
	assert_int_equal(il_chan_send_burst(f->dp, m, 2), 2);
	assert_int_equal(efd_pending(efd), 0);
	/* Cannot sleep with messages waiting. */
	assert_false(il_chan_sleep_prepare(f->ctl));
	assert_int_equal(il_chan_recv_burst(f->ctl, m, 4), 2);
	/* Empty: may sleep; the next burst writes exactly once... */
	assert_true(il_chan_sleep_prepare(f->ctl));
	assert_int_equal(il_chan_send_burst(f->dp, m, 2), 2);
	assert_int_equal(il_chan_send_burst(f->dp, m, 1), 1);
	assert_int_equal(efd_pending(efd), 1);
	/* ...and a refused burst writes nothing. */
	il_chan_sleep_end(f->ctl);
	assert_int_equal(il_chan_recv_burst(f->ctl, m, 4), 3);
	assert_true(il_chan_sleep_prepare(f->ctl));
	assert_int_equal(il_chan_send_burst(f->dp, m, 0), 0);
	assert_int_equal(efd_pending(efd), 0);
	il_chan_stats(f->ctl, true, &st);
	assert_int_equal(st.wakeups, 1);
	assert_int_equal(st.sleeps, 3);
	/* Without a wake fd the producer never looks at the flag. */
	il_chan_set_wake_fd(f->dp, -1);
	assert_int_equal(il_chan_send_burst(f->dp, m, 1), 1);
	il_chan_stats(f->ctl, true, &st);
	assert_int_equal(st.wakeups, 1);
}

/* The wake-up rate limit: a consumer woken rarely is woken at once; one
 * woken less than the interval ago is woken at the interval's end (by the
 * producer's flush), at once when 64 messages wait or the limit is lifted.
 * The interval is long (400 ms) so that a descheduled test cannot pass it
 * by accident. */
static void test_wakeup_interval(void **state)
{
	struct fx *f = *state;
	struct il_cmsg m[64];
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	assert_true(efd >= 0);
	open_pair(f, 128, 64);
	il_chan_set_wake_fd(f->dp, efd);
	il_chan_set_wake_interval(f->dp, 400000000ull);
	for (int i = 0; i < 64; i++)
		mk(&m[i], (uint32_t)i);

	/* Nothing pending: a flush decides nothing. */
	assert_false(il_chan_wake_flush(f->dp));
	/* No wake-up for a while: at once. */
	assert_true(il_chan_sleep_prepare(f->ctl));
	assert_int_equal(il_chan_send_burst(f->dp, m, 2), 2);
	assert_int_equal(efd_pending(efd), 1);
	il_chan_sleep_end(f->ctl);
	assert_int_equal(il_chan_recv_burst(f->ctl, m, 64), 2);
	/* Asleep again within the interval: the next two bursts wait. */
	assert_true(il_chan_sleep_prepare(f->ctl));
	assert_int_equal(il_chan_send_burst(f->dp, m, 2), 2);
	assert_int_equal(il_chan_send_burst(f->dp, m, 1), 1);
	assert_false(il_chan_wake_flush(f->dp)); /* not due yet */
	assert_int_equal(efd_pending(efd), 0);
	usleep(450000);
	assert_true(il_chan_wake_flush(f->dp));
	assert_int_equal(efd_pending(efd), 1); /* one wake-up for both bursts */
	assert_false(il_chan_wake_flush(f->dp));
	il_chan_sleep_end(f->ctl);
	assert_int_equal(il_chan_recv_burst(f->ctl, m, 64), 3);

	/* 64 waiting: woken at once, interval or not. */
	assert_true(il_chan_sleep_prepare(f->ctl));
	assert_int_equal(il_chan_send_burst(f->dp, m, 10), 10);
	assert_int_equal(efd_pending(efd), 0);
	assert_int_equal(il_chan_send_burst(f->dp, m, 54), 54);
	assert_int_equal(efd_pending(efd), 1);
	il_chan_sleep_end(f->ctl);
	assert_int_equal(il_chan_recv_burst(f->ctl, m, 64), 64);

	/* Lifting the limit delivers a pending wake-up at once... */
	assert_true(il_chan_sleep_prepare(f->ctl));
	assert_int_equal(il_chan_send_burst(f->dp, m, 1), 1);
	assert_int_equal(efd_pending(efd), 0);
	il_chan_set_wake_interval(f->dp, 0);
	assert_int_equal(efd_pending(efd), 1);
	/* ...and without one every burst to a sleeper wakes it at once. */
	il_chan_sleep_end(f->ctl);
	assert_int_equal(il_chan_recv_burst(f->ctl, m, 64), 1);
	assert_true(il_chan_sleep_prepare(f->ctl));
	assert_int_equal(il_chan_send_burst(f->dp, m, 1), 1);
	assert_int_equal(efd_pending(efd), 1);
	il_chan_set_wake_fd(f->dp, -1);
}

static void test_incarnations_and_flush(void **state)
{
	struct fx *f = *state;
	struct il_chan_params p = { .up_slots = 16, .down_slots = 16 };
	struct il_cmsg m[4];
	uint64_t inc = 0;
	char err[256];

	open_pair(f, 16, 16);
	assert_int_equal(il_chan_side(f->dp), IL_CHAN_DATAPLANE);
	assert_int_equal(il_chan_incarnation(f->ctl), 1);
	assert_int_equal(il_chan_incarnation(f->dp), 1);
	/* The data plane attached after control opened: control notices. */
	assert_true(il_chan_peer_restarted(f->ctl, &inc));
	assert_int_equal(inc, 1);
	assert_false(il_chan_peer_restarted(f->ctl, &inc));
	assert_false(il_chan_peer_restarted(f->dp, &inc));
	assert_int_equal(il_chan_peer_incarnation(f->dp), 1);

	/* Messages queued for the control process... */
	mk(&m[0], 1);
	mk(&m[1], 2);
	assert_int_equal(il_chan_send_burst(f->dp, m, 2), 2);
	/* ...which restarts: incarnation 2, the stale messages are gone. */
	il_chan_close(f->ctl);
	f->ctl = NULL;
	assert_int_equal(il_chan_open(f->t.chan, IL_CHAN_CONTROL, &p, &f->ctl, err, sizeof(err)),
			 0);
	assert_int_equal(il_chan_incarnation(f->ctl), 2);
	assert_int_equal(il_chan_rx_pending(f->ctl), 0);
	assert_true(il_chan_peer_restarted(f->dp, &inc));
	assert_int_equal(inc, 2);
	/* The data plane answers with HELLO; control reads it first. */
	assert_int_equal(il_chan_send_hello(f->dp, 42), 1);
	assert_int_equal(il_chan_recv_burst(f->ctl, m, 4), 1);
	assert_int_equal(m[0].type, IL_CM_HELLO);
	assert_int_equal(m[0].u.hello.side, IL_CHAN_DATAPLANE);
	assert_int_equal(m[0].u.hello.epoch, 42);
	assert_int_equal(m[0].u.hello.incarnation, 1);
	assert_int_equal(m[0].u.hello.peer_incarnation, 2);
	assert_int_equal(m[0].u.hello.shard, 0);
	assert_int_equal(m[0].u.hello.n_shards, 0);
	assert_string_equal(il_cm_type_name(m[0].type), "hello");
	/* A sharded data plane's channel names its shard and the count. */
	il_chan_set_shard(f->dp, 3, 4);
	assert_int_equal(il_chan_send_hello(f->dp, 42), 1);
	assert_int_equal(il_chan_recv_burst(f->ctl, m, 4), 1);
	assert_int_equal(m[0].u.hello.shard, 3);
	assert_int_equal(m[0].u.hello.n_shards, 4);
}

static void test_shard_path(void **state)
{
	char buf[32];

	(void)state;
	assert_int_equal(il_chan_shard_path("/dev/shm/x", 7, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/dev/shm/x.7");
	/* 23 bytes + ".1" does not fit in 24 */
	assert_int_equal(il_chan_shard_path("/dev/shm/abcdefghijklmn", 1, buf, 24), -1);
	assert_int_equal(il_chan_shard_path("/dev/shm/abcdefghijklmn", 1, buf, 26), 0);
}

static void test_open_errors(void **state)
{
	struct fx *f = *state;
	struct il_chan_params bad = { .up_slots = 100, .down_slots = 16 };
	struct il_chan_params p = { .up_slots = 16, .down_slots = 16 };
	struct il_chan_params other = { .up_slots = 32, .down_slots = 16 };
	struct il_chan *x = NULL;
	char err[256];
	int fd;

	/* Attach-only to a missing file. */
	assert_int_equal(il_chan_open(f->t.chan, IL_CHAN_DATAPLANE, NULL, &x, err, sizeof(err)), -1);
	assert_non_null(strstr(err, f->t.chan));
	/* Sizes must be powers of two. */
	assert_int_equal(il_chan_open(f->t.chan, IL_CHAN_CONTROL, &bad, &x, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "power of two"));
	/* One process per side. */
	assert_int_equal(il_chan_open(f->t.chan, IL_CHAN_CONTROL, &p, &f->ctl, err, sizeof(err)), 0);
	assert_int_equal(il_chan_open(f->t.chan, IL_CHAN_CONTROL, &p, &x, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "already attached"));
	/* Existing file of other sizes. */
	assert_int_equal(il_chan_open(f->t.chan, IL_CHAN_DATAPLANE, &other, &x, err, sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "exists with 16 up / 16 down"));
	il_chan_close(f->ctl);
	f->ctl = NULL;
	/* Not a channel at all. */
	unlink(f->t.chan);
	fd = open(f->t.chan, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 4096), 0);
	close(fd);
	assert_int_equal(il_chan_open(f->t.chan, IL_CHAN_DATAPLANE, NULL, &x, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "bad magic"));
	assert_null(x);
}

static void test_wake_fd_passing(void **state)
{
	struct fx *f = *state;
	const char *sock = tu_extra(&f->t, ".sock");
	char err[256];
	int lfd, efd, conn, status;
	uint64_t v = 0;
	pid_t pid;

	efd = eventfd(0, EFD_CLOEXEC);
	assert_true(efd >= 0);
	lfd = il_chan_wake_listen(sock, err, sizeof(err));
	assert_true(lfd >= 0);
	pid = tu_fork(&f->t);
	assert_true(pid >= 0);
	if (pid == 0) {
		/* The data plane: fetch the fd, check the incarnation, wake. */
		uint64_t inc = 0, one = 5;
		int fd = il_chan_wake_fetch(sock, &inc, err, sizeof(err));

		if (fd < 0 || inc != 77)
			_exit(1);
		_exit(write(fd, &one, sizeof(one)) == sizeof(one) ? 0 : 2);
	}
	conn = accept(lfd, NULL, NULL);
	assert_true(conn >= 0);
	assert_int_equal(il_chan_wake_serve(conn, efd, 77), 0);
	close(conn);
	status = tu_wait(&f->t, pid, 5000);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(read(efd, &v, sizeof(v)), sizeof(v));
	assert_int_equal(v, 5);
	close(lfd);
	close(efd);
	/* Nobody listening: a clear error, no hang. */
	unlink(sock);
	assert_int_equal(il_chan_wake_fetch(sock, NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot connect"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_order_and_batches, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_wraparound, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_full_ring, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_wakeup_protocol, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_wakeup_interval, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_incarnations_and_flush, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_open_errors, fx_setup, fx_teardown),
		cmocka_unit_test(test_shard_path),
		cmocka_unit_test_setup_teardown(test_wake_fd_passing, fx_setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
