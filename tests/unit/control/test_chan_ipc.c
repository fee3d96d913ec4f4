/* SPDX-License-Identifier: BSD-3-Clause
 * Channel between two processes:
 *  - 10^7 messages streamed to a consumer that sleeps on the eventfd
 *    whenever the ring is empty: order, content checksum, no loss, no
 *    lost wake-up (a stuck consumer times out), and the rate;
 *  - a stopped consumer: the producer never stalls, drops are counted
 *    exactly, and it wrote the eventfd at most once;
 *  - restarts: the consumer killed and restarted, then the producer; each
 *    side detects the other's new incarnation and resynchronises.
 * Children never call cmocka; they report through exit codes and pipes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <sys/eventfd.h>

#include <interlink/chan.h>

#include "testutil.h"

#define STREAM_MSGS 10000000ull
#define BURST 32

struct fx {
	struct tu t;
	struct il_chan *ch;
	int efd;
	int pipe_fd[2];
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	tu_init(&f->t, "ipc");
	f->efd = -1;
	if (pipe(f->pipe_fd) != 0)
		return -1;
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	tu_cleanup(&f->t); /* children first: they may hold the channel */
	il_chan_close(f->ch);
	if (f->efd >= 0)
		close(f->efd);
	close(f->pipe_fd[0]);
	close(f->pipe_fd[1]);
	free(f);
	return 0;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static void mk(struct il_cmsg *m, uint64_t seq)
{
	m->type = IL_CM_PRIVATE;
	m->len = 56;
	m->group = 0;
	m->flags = 0;
	m->u.u64[0] = seq;
	for (unsigned i = 1; i < 7; i++)
		m->u.u64[i] = mix(seq * 8 + i);
}

/* Order-sensitive running checksum over every byte that went through. */
static uint64_t csum_add(uint64_t c, const struct il_cmsg *m)
{
	const uint64_t *w = (const uint64_t *)m;

	for (unsigned i = 0; i < sizeof(*m) / 8; i++)
		c = (c ^ w[i]) * 0x100000001b3ull;
	return c;
}

static bool valid(const struct il_cmsg *m, uint64_t seq)
{
	struct il_cmsg want;

	mk(&want, seq);
	return memcmp(m, &want, sizeof(want)) == 0;
}

struct report {
	uint64_t received;
	uint64_t csum;
	uint64_t bad;      /* out of order or corrupt */
	uint64_t sleeps;   /* times the consumer blocked on the eventfd */
	uint64_t incarnation;
	uint64_t peer_incarnation;
	uint64_t first_type;
	uint64_t extra;
};

static void send_report(int fd, const struct report *r)
{
	if (!tu_write_all(fd, r, sizeof(*r)))
		_exit(3);
}

/* Consumer child for the stream: control side, sleeps on efd when empty.
 * Exits 4 if a wake-up never comes (5 s), which is how a lost wake-up
 * fails the test instead of hanging it. */
static void stream_consumer(const char *path, int efd, int out, uint64_t total)
{
	struct il_cmsg msgs[BURST];
	struct report r = { 0 };
	struct il_chan *ch;
	char err[256];

	if (il_chan_open(path, IL_CHAN_CONTROL, NULL, &ch, err, sizeof(err)) != 0)
		_exit(2);
	/* Tell the producer we are attached. */
	send_report(out, &r);
	while (r.received < total) {
		unsigned n = il_chan_recv_burst(ch, msgs, BURST);

		if (n == 0) {
			struct pollfd p = { .fd = efd, .events = POLLIN };
			uint64_t v;

			if (!il_chan_sleep_prepare(ch))
				continue;
			r.sleeps++;
			if (poll(&p, 1, 5000) != 1)
				_exit(4);
			if (read(efd, &v, sizeof(v)) != sizeof(v))
				_exit(5);
			il_chan_sleep_end(ch);
			continue;
		}
		for (unsigned i = 0; i < n; i++) {
			if (!valid(&msgs[i], r.received + i))
				r.bad++;
			r.csum = csum_add(r.csum, &msgs[i]);
		}
		r.received += n;
	}
	send_report(out, &r);
	il_chan_close(ch);
	_exit(0);
}

static void test_stream_1e7(void **state)
{
	struct fx *f = *state;
	struct il_chan_params p = { .up_slots = 4096, .down_slots = 64 };
	struct il_cmsg msgs[BURST];
	struct il_chan_ring_stats st;
	struct report r;
	uint64_t sent = 0, csum = 0, refused = 0, t0, t1;
	char err[256];
	int status;
	pid_t pid;

	assert_int_equal(il_chan_open(f->t.chan, IL_CHAN_DATAPLANE, &p, &f->ch, err, sizeof(err)),
			 0);
	f->efd = eventfd(0, EFD_CLOEXEC);
	assert_true(f->efd >= 0);
	pid = tu_fork(&f->t);
	assert_true(pid >= 0);
	if (pid == 0)
		stream_consumer(f->t.chan, f->efd, f->pipe_fd[1], STREAM_MSGS);
	assert_true(tu_read_all(f->pipe_fd[0], &r, sizeof(r), 5000));
	il_chan_set_wake_fd(f->ch, dup(f->efd));

	t0 = tu_now_ns();
	while (sent < STREAM_MSGS) {
		unsigned b = STREAM_MSGS - sent < BURST ? (unsigned)(STREAM_MSGS - sent) : BURST;
		unsigned n;

		for (unsigned i = 0; i < b; i++)
			mk(&msgs[i], sent + i);
		n = il_chan_send_burst(f->ch, msgs, b);
		for (unsigned i = 0; i < n; i++)
			csum = csum_add(csum, &msgs[i]);
		sent += n;
		if (n < b) {
			/* The data plane would count these and move on; here
			 * the producer offers them again to test "no loss when
			 * the consumer keeps up", and lets the consumer run. */
			refused += b - n;
			sched_yield();
		}
	}
	assert_true(tu_read_all(f->pipe_fd[0], &r, sizeof(r), 20000));
	t1 = tu_now_ns();
	status = tu_wait(&f->t, pid, 5000);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(r.received, STREAM_MSGS);
	assert_int_equal(r.bad, 0);
	assert_int_equal(r.csum, csum);
	il_chan_stats(f->ch, true, &st);
	assert_int_equal(st.enqueued, STREAM_MSGS);
	assert_int_equal(st.dequeued, STREAM_MSGS);
	assert_int_equal(st.drops, refused);
	/* At most one eventfd write per announced sleep. */
	assert_true(st.wakeups <= st.sleeps);
	print_message("stream: %llu msgs in %.3f s = %.1f Mmsg/s (%.2f GB/s); consumer slept %llu "
		      "times, producer woke it %llu times; ring-full refusals %llu\n",
		      (unsigned long long)STREAM_MSGS, (double)(t1 - t0) / 1e9,
		      (double)STREAM_MSGS * 1e3 / (double)(t1 - t0),
		      (double)STREAM_MSGS * IL_CHAN_MSG_SIZE / (double)(t1 - t0),
		      (unsigned long long)r.sleeps, (unsigned long long)st.wakeups,
		      (unsigned long long)refused);
}

/* Consumer that attaches, announces sleep, reports, and then waits to be
 * stopped and continued before draining. */
static void stopped_consumer(const char *path, int out, int in)
{
	struct il_cmsg msgs[BURST];
	struct report r = { 0 };
	struct il_chan *ch;
	char err[256], go;

	if (il_chan_open(path, IL_CHAN_CONTROL, NULL, &ch, err, sizeof(err)) != 0)
		_exit(2);
	if (!il_chan_sleep_prepare(ch))
		_exit(6);
	send_report(out, &r);
	if (read(in, &go, 1) != 1)
		_exit(7);
	il_chan_sleep_end(ch);
	for (;;) {
		unsigned n = il_chan_recv_burst(ch, msgs, BURST);

		if (n == 0)
			break;
		for (unsigned i = 0; i < n; i++)
			if (!valid(&msgs[i], r.received + i))
				r.bad++;
		r.received += n;
	}
	send_report(out, &r);
	_exit(0);
}

static void test_stopped_consumer_drops(void **state)
{
	struct fx *f = *state;
	struct il_chan_params p = { .up_slots = 1024, .down_slots = 64 };
	const uint64_t offered = 1000000;
	struct il_cmsg msgs[BURST];
	struct il_chan_ring_stats st;
	struct report r;
	uint64_t sent = 0, t0, dt;
	int go[2], status;
	char err[256];
	pid_t pid;

	assert_int_equal(pipe(go), 0);
	assert_int_equal(il_chan_open(f->t.chan, IL_CHAN_DATAPLANE, &p, &f->ch, err, sizeof(err)),
			 0);
	f->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(f->efd >= 0);
	il_chan_set_wake_fd(f->ch, dup(f->efd));
	pid = tu_fork(&f->t);
	assert_true(pid >= 0);
	if (pid == 0)
		stopped_consumer(f->t.chan, f->pipe_fd[1], go[0]);
	assert_true(tu_read_all(f->pipe_fd[0], &r, sizeof(r), 5000));
	assert_int_equal(kill(pid, SIGSTOP), 0);

	t0 = tu_now_ns();
	for (uint64_t off = 0; off < offered; off += BURST) {
		for (unsigned i = 0; i < BURST; i++)
			mk(&msgs[i], sent + i);
		sent += il_chan_send_burst(f->ch, msgs, BURST);
	}
	dt = tu_now_ns() - t0;
	/* No stall: 10^6 offers against a full ring take microseconds each
	 * at worst; 2 s means something waited. */
	assert_true(dt < 2000000000ull);
	assert_int_equal(sent, 1024);
	il_chan_stats(f->ch, true, &st);
	assert_int_equal(st.drops, offered - 1024);
	/* The consumer announced sleep once: one eventfd write, then none. */
	assert_int_equal(st.wakeups, 1);
	{
		uint64_t v = 0;

		assert_int_equal(read(f->efd, &v, sizeof(v)), sizeof(v));
		assert_int_equal(v, 1);
	}
	print_message("stopped consumer: %llu offered, %llu queued, %llu dropped in %.1f ms "
		      "(%.1f ns per refused burst of %u)\n",
		      (unsigned long long)offered, (unsigned long long)sent,
		      (unsigned long long)st.drops, (double)dt / 1e6,
		      (double)dt / (double)(offered / BURST), BURST);

	assert_int_equal(kill(pid, SIGCONT), 0);
	assert_int_equal(write(go[1], "g", 1), 1);
	assert_true(tu_read_all(f->pipe_fd[0], &r, sizeof(r), 5000));
	status = tu_wait(&f->t, pid, 5000);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(r.received, 1024);
	assert_int_equal(r.bad, 0);
	close(go[0]);
	close(go[1]);
}

/* Restarted consumer: attach (incarnation N), report it, then read: the
 * first message must be the producer's HELLO naming our incarnation;
 * then `count` data messages from 0. */
static void restarted_consumer(const char *path, int out, uint64_t count)
{
	struct il_cmsg m;
	struct report r = { 0 };
	struct il_chan *ch;
	uint64_t end;
	char err[256];

	if (il_chan_open(path, IL_CHAN_CONTROL, NULL, &ch, err, sizeof(err)) != 0)
		_exit(2);
	r.incarnation = il_chan_incarnation(ch);
	r.peer_incarnation = il_chan_peer_incarnation(ch);
	send_report(out, &r);
	end = tu_now_ns() + 5000000000ull;
	while (r.received < count + 1) {
		if (tu_now_ns() > end)
			_exit(4);
		if (il_chan_recv_burst(ch, &m, 1) == 0) {
			usleep(100);
			continue;
		}
		if (r.received == 0) {
			r.first_type = m.type;
			r.extra = m.u.hello.peer_incarnation;
			if (m.u.hello.incarnation != r.peer_incarnation)
				r.bad++;
		} else if (!valid(&m, r.received - 1)) {
			r.bad++;
		}
		r.received++;
	}
	send_report(out, &r);
	_exit(0);
}

static void test_consumer_restart(void **state)
{
	struct fx *f = *state;
	struct il_chan_params p = { .up_slots = 64, .down_slots = 64 };
	struct il_cmsg msgs[BURST];
	struct report r;
	uint64_t inc = 0, end;
	char err[256];
	int status;
	pid_t pid;

	assert_int_equal(il_chan_open(f->t.chan, IL_CHAN_DATAPLANE, &p, &f->ch, err, sizeof(err)),
			 0);
	/* First consumer: attaches, then dies without a goodbye. */
	pid = tu_fork(&f->t);
	if (pid == 0)
		restarted_consumer(f->t.chan, f->pipe_fd[1], 1000000);
	assert_true(tu_read_all(f->pipe_fd[0], &r, sizeof(r), 5000));
	assert_int_equal(r.incarnation, 1);
	assert_true(il_chan_peer_restarted(f->ch, &inc));
	assert_int_equal(inc, 1);
	for (unsigned i = 0; i < BURST; i++)
		mk(&msgs[i], 1000 + i);
	assert_int_equal(il_chan_send_burst(f->ch, msgs, BURST), BURST);
	assert_int_equal(kill(pid, SIGKILL), 0);
	status = tu_wait(&f->t, pid, 5000);
	assert_true(WIFSIGNALED(status));
	/* With the consumer gone the ring fills; the producer goes on. */
	for (int k = 0; k < 4; k++)
		il_chan_send_burst(f->ch, msgs, BURST);
	assert_int_equal(il_chan_tx_free(f->ch), 0);
	assert_false(il_chan_peer_restarted(f->ch, &inc));

	/* Second consumer (pid slot of the dead one is taken over). */
	pid = tu_fork(&f->t);
	if (pid == 0)
		restarted_consumer(f->t.chan, f->pipe_fd[1], 100);
	assert_true(tu_read_all(f->pipe_fd[0], &r, sizeof(r), 5000));
	assert_int_equal(r.incarnation, 2);
	assert_int_equal(r.peer_incarnation, il_chan_incarnation(f->ch));
	/* The producer notices through the header alone... */
	end = tu_now_ns() + 5000000000ull;
	while (!il_chan_peer_restarted(f->ch, &inc))
		assert_true(tu_now_ns() < end);
	assert_int_equal(inc, 2);
	/* ...finds the stale backlog flushed, and resynchronises. */
	assert_int_equal(il_chan_tx_free(f->ch), 64);
	assert_int_equal(il_chan_send_hello(f->ch, 9), 1);
	for (uint64_t s = 0; s < 100;) {
		unsigned b = 100 - s < BURST ? (unsigned)(100 - s) : BURST;

		for (unsigned i = 0; i < b; i++)
			mk(&msgs[i], s + i);
		s += il_chan_send_burst(f->ch, msgs, b);
	}
	assert_true(tu_read_all(f->pipe_fd[0], &r, sizeof(r), 10000));
	status = tu_wait(&f->t, pid, 5000);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(r.first_type, IL_CM_HELLO);
	assert_int_equal(r.extra, 2); /* the HELLO names the new consumer */
	assert_int_equal(r.bad, 0);
	assert_int_equal(r.received, 101);
}

/* Producer child: attach as the data plane, report incarnations, send
 * HELLO then `count` messages from 0 (then linger until killed if
 * count == 0 ... or exit). */
static void producer_child(const char *path, int out, uint64_t count, bool linger)
{
	struct il_cmsg msgs[BURST];
	struct report r = { 0 };
	struct il_chan *ch;
	uint64_t s = 0;
	char err[256];

	if (il_chan_open(path, IL_CHAN_DATAPLANE, NULL, &ch, err, sizeof(err)) != 0)
		_exit(2);
	r.incarnation = il_chan_incarnation(ch);
	r.peer_incarnation = il_chan_peer_incarnation(ch);
	while (il_chan_send_hello(ch, (uint32_t)r.incarnation) == 0)
		usleep(100);
	while (s < count) {
		unsigned b = count - s < BURST ? (unsigned)(count - s) : BURST;

		for (unsigned i = 0; i < b; i++)
			mk(&msgs[i], s + i);
		s += il_chan_send_burst(ch, msgs, b);
	}
	send_report(out, &r);
	if (linger)
		pause();
	il_chan_close(ch);
	_exit(0);
}

static void test_producer_restart(void **state)
{
	struct fx *f = *state;
	struct il_chan_params p = { .up_slots = 256, .down_slots = 64 };
	struct il_cmsg m[BURST];
	struct report r;
	uint64_t inc = 0, got = 0, end;
	bool seen_hello2 = false;
	char err[256];
	int status;
	pid_t pid;

	assert_int_equal(il_chan_open(f->t.chan, IL_CHAN_CONTROL, &p, &f->ch, err, sizeof(err)), 0);
	/* First data plane: HELLO + 50 messages, then killed. */
	pid = tu_fork(&f->t);
	if (pid == 0)
		producer_child(f->t.chan, f->pipe_fd[1], 50, true);
	assert_true(tu_read_all(f->pipe_fd[0], &r, sizeof(r), 5000));
	assert_int_equal(r.incarnation, 1);
	assert_int_equal(r.peer_incarnation, il_chan_incarnation(f->ch));
	assert_int_equal(kill(pid, SIGKILL), 0);
	status = tu_wait(&f->t, pid, 5000);
	assert_true(WIFSIGNALED(status));
	assert_true(il_chan_peer_restarted(f->ch, &inc));
	assert_int_equal(inc, 1);

	/* Second data plane, while the first one's messages are unread. */
	pid = tu_fork(&f->t);
	if (pid == 0)
		producer_child(f->t.chan, f->pipe_fd[1], 70, false);
	assert_true(tu_read_all(f->pipe_fd[0], &r, sizeof(r), 5000));
	assert_int_equal(r.incarnation, 2);
	status = tu_wait(&f->t, pid, 5000);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* Out of band: the header says incarnation 2. */
	assert_true(il_chan_peer_restarted(f->ch, &inc));
	assert_int_equal(inc, 2);
	/* In band: HELLO(1), 50 old messages, HELLO(2), 70 new ones from 0.
	 * The old backlog survives a producer restart (it was valid when
	 * sent); the HELLO tells the consumer where the new incarnation
	 * starts. */
	end = tu_now_ns() + 5000000000ull;
	while (got < 1 + 50 + 1 + 70) {
		unsigned n = il_chan_recv_burst(f->ch, m, BURST);

		assert_true(tu_now_ns() < end);
		for (unsigned i = 0; i < n; i++, got++) {
			if (got == 0 || got == 51) {
				assert_int_equal(m[i].type, IL_CM_HELLO);
				assert_int_equal(m[i].u.hello.side, IL_CHAN_DATAPLANE);
				assert_int_equal(m[i].u.hello.incarnation, got == 0 ? 1 : 2);
				assert_int_equal(m[i].u.hello.peer_incarnation,
						 il_chan_incarnation(f->ch));
				seen_hello2 = got == 51;
			} else {
				assert_true(valid(&m[i], got < 51 ? got - 1 : got - 52));
			}
		}
	}
	assert_true(seen_hello2);
	assert_int_equal(il_chan_recv_burst(f->ch, m, BURST), 0);
}

/* Both sides starting at once, each allowed to create: exactly one file
 * wins (link() is atomic), both map it, nobody sees a half-built header. */
static void test_concurrent_create(void **state)
{
	struct fx *f = *state;
	struct il_chan_params p = { .up_slots = 64, .down_slots = 64 };
	char err[256];

	for (int round = 0; round < 50; round++) {
		struct il_cmsg m;
		int go[2], status;
		uint64_t end;
		pid_t pid;

		unlink(f->t.chan);
		assert_int_equal(pipe(go), 0);
		pid = tu_fork(&f->t);
		assert_true(pid >= 0);
		if (pid == 0) {
			struct il_chan *ch;
			char c;

			if (read(go[0], &c, 1) != 1)
				_exit(7);
			if (il_chan_open(f->t.chan, IL_CHAN_DATAPLANE, &p, &ch, err,
					 sizeof(err)) != 0)
				_exit(2);
			mk(&m, (uint64_t)round);
			_exit(il_chan_send_burst(ch, &m, 1) == 1 ? 0 : 3);
		}
		assert_int_equal(write(go[1], "g", 1), 1);
		assert_int_equal(il_chan_open(f->t.chan, IL_CHAN_CONTROL, &p, &f->ch, err,
					      sizeof(err)),
				 0);
		status = tu_wait(&f->t, pid, 5000);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
		/* Same file: the child's message is here (unless the child
		 * sent before we attached, and our attach flushed it). */
		end = tu_now_ns() + 1000000000ull;
		if (il_chan_recv_burst(f->ch, &m, 1) == 1)
			assert_true(valid(&m, (uint64_t)round));
		else
			assert_int_equal(il_chan_peer_incarnation(f->ch), 1);
		assert_true(tu_now_ns() < end);
		il_chan_close(f->ch);
		f->ch = NULL;
		close(go[0]);
		close(go[1]);
	}
	/* No temporary files left behind. */
	{
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "ls %s.tmp.* >/dev/null 2>&1", f->t.chan);
		assert_int_not_equal(system(cmd), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_stream_1e7, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_stopped_consumer_drops, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_consumer_restart, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_producer_restart, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_create, fx_setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
