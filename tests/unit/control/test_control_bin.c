/* SPDX-License-Identifier: BSD-3-Clause
 * interlink-control end to end, this test playing the data plane:
 * command-line errors, ACK aggregation into published watermarks over the
 * channel with eventfd wake-ups, the management socket, idleness (no busy
 * polling), clean shutdown on SIGTERM, and both sides restarting.
 *
 * argv[1]: the interlink-control executable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <interlink/chan.h>

#include "testutil.h"

static const char *ctl_exe;

struct fx {
	struct tu t;
	const char *sock, *mgmt;
	pid_t ctl;
	struct il_chan *dp;
	int mfd;
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	tu_init(&f->t, "ctlbin");
	f->sock = tu_extra(&f->t, ".sock");
	f->mgmt = tu_extra(&f->t, ".mgmt");
	f->mfd = -1;
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	tu_cleanup(&f->t);
	il_chan_close(f->dp);
	if (f->mfd >= 0)
		close(f->mfd);
	free(f);
	return 0;
}

/* Run the binary to completion, capturing stdout and stderr in memfds
 * (read after exit: no pipe juggling, no deadlock on a full pipe). */
static int run_capture(const char *const *args, char *out, size_t outlen, char *err,
		       size_t errlen)
{
	struct tu t = { 0 };
	int fo, fe, status;
	char *argv[16];
	unsigned n = 0;
	ssize_t k;
	pid_t pid;

	argv[n++] = (char *)ctl_exe;
	for (; *args != NULL && n < 15; args++)
		argv[n++] = (char *)*args;
	argv[n] = NULL;
	fo = memfd_create("ctl-stdout", 0);
	fe = memfd_create("ctl-stderr", 0);
	assert_true(fo >= 0 && fe >= 0);
	pid = tu_fork(&t);
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fo, 1);
		dup2(fe, 2);
		execv(ctl_exe, argv);
		_exit(127);
	}
	status = tu_wait(&t, pid, 5000);
	k = pread(fo, out, outlen - 1, 0);
	out[k > 0 ? k : 0] = '\0';
	k = pread(fe, err, errlen - 1, 0);
	err[k > 0 ? k : 0] = '\0';
	close(fo);
	close(fe);
	assert_true(status != -1);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void expect_usage_error(const char *const *args, const char *needle)
{
	char out[4096], err[4096];

	assert_int_equal(run_capture(args, out, sizeof(out), err, sizeof(err)), 2);
	if (strstr(err, needle) == NULL)
		print_message("stderr '%s' does not name '%s'\n", err, needle);
	assert_non_null(strstr(err, needle));
}

static void test_command_line(void **state)
{
	char out[8192], err[4096];

	(void)state;
	assert_int_equal(run_capture((const char *[]){ "--help", NULL }, out, sizeof(out), err,
				     sizeof(err)),
			 0);
	assert_non_null(strstr(out, "Usage: interlink-control"));
	assert_non_null(strstr(out, "--chan"));
	assert_non_null(strstr(out, "--up-slots"));
	assert_int_equal(run_capture((const char *[]){ "--version", NULL }, out, sizeof(out), err,
				     sizeof(err)),
			 0);
	assert_non_null(strstr(out, "channel layout"));
	expect_usage_error((const char *[]){ "--up-slots", "3", NULL }, "--up-slots: '3'");
	expect_usage_error((const char *[]){ "--down-slots", "1x", NULL }, "--down-slots");
	expect_usage_error((const char *[]){ "--up-slots", "33554432", NULL }, "power of two");
	expect_usage_error((const char *[]){ "--tick-ms", "0", NULL }, "--tick-ms: '0'");
	expect_usage_error((const char *[]){ "--tick-ms", NULL }, "'--tick-ms' needs a value");
	expect_usage_error((const char *[]){ "--bogus", NULL }, "unknown option '--bogus'");
	expect_usage_error((const char *[]){ "-x", NULL }, "unknown option '-x'");
	expect_usage_error((const char *[]){ "stray", NULL }, "unexpected argument 'stray'");
	expect_usage_error((const char *[]){ "--chan", "", NULL }, "--chan");
	expect_usage_error((const char *[]){ "--shards", "9", NULL }, "--shards: '9'");
	expect_usage_error((const char *[]){ "--shards", "2", "--ha-etcd", "http://127.0.0.1:2379",
					     "--ha-node", "a", "--ha-listen", "127.0.0.1:1",
					     "--ha-peer", "127.0.0.1:2", NULL },
			   "--shards: '2' cannot be combined with --ha-etcd");
	/* A run-time failure names the option too: exit 1. */
	assert_int_equal(run_capture((const char *[]){ "--chan", "/nonexistent-dir/x", NULL }, out,
				     sizeof(out), err, sizeof(err)),
			 1);
	assert_non_null(strstr(err, "--chan"));
}

static pid_t start_control_args(struct fx *f, const char *up, const char *extra)
{
	char *argv[] = { (char *)ctl_exe, "--chan", f->t.chan, "--tick-ms", "20",
			 "--up-slots", (char *)up, "--down-slots", "256", "-v", (char *)extra,
			 NULL };
	pid_t pid = tu_fork(&f->t);

	assert_true(pid >= 0);
	if (pid == 0) {
		execv(ctl_exe, argv);
		_exit(127);
	}
	f->ctl = pid;
	return pid;
}

static pid_t start_control(struct fx *f)
{
	return start_control_args(f, "1024", NULL);
}

/* Attach as the data plane once the control process has created the
 * channel, and fetch its eventfd. */
static void attach_dp(struct fx *f, uint64_t want_ctl_inc)
{
	uint64_t end = tu_now_ns() + 5000000000ull, inc = 0;
	char err[256];
	int efd = -1;

	while (f->dp == NULL) {
		assert_true(tu_now_ns() < end);
		if (il_chan_open(f->t.chan, IL_CHAN_DATAPLANE, NULL, &f->dp, err, sizeof(err)) != 0)
			usleep(2000);
	}
	while (il_chan_peer_incarnation(f->dp) < want_ctl_inc) {
		assert_true(tu_now_ns() < end);
		usleep(2000);
	}
	il_chan_peer_restarted(f->dp, NULL);
	/* The socket follows the incarnation bump: retry until served. */
	while ((efd = il_chan_wake_fetch(f->sock, &inc, err, sizeof(err))) < 0 ||
	       inc < want_ctl_inc) {
		if (efd >= 0)
			close(efd);
		assert_true(tu_now_ns() < end);
		usleep(2000);
	}
	assert_int_equal(inc, il_chan_peer_incarnation(f->dp));
	il_chan_set_wake_fd(f->dp, efd);
}

static void send1(struct fx *f, uint16_t type, uint16_t group, uint32_t rcv, uint32_t epoch,
		  uint64_t seq)
{
	struct il_cmsg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.group = group;
	if (type == IL_CM_ACK) {
		m.len = sizeof(m.u.ack);
		m.u.ack.receiver = rcv;
		m.u.ack.epoch = epoch;
		m.u.ack.cum_seq = seq;
	} else {
		m.len = sizeof(m.u.member);
		m.u.member.receiver = rcv;
		m.u.member.epoch = epoch;
		m.u.member.seq = seq;
	}
	assert_int_equal(il_chan_send_burst(f->dp, &m, 1), 1);
}

/* Next down message of `type` within timeout_ms (others are skipped);
 * false on timeout. */
static bool recv_type(struct fx *f, uint16_t type, struct il_cmsg *m, unsigned timeout_ms)
{
	uint64_t start = tu_now_ns(), end = start + (uint64_t)timeout_ms * 1000000ull, now;

	while ((now = tu_now_ns()) < end) {
		if (il_chan_recv_burst(f->dp, m, 1) == 1) {
			if (m->type == type)
				return true;
			continue;
		}
		/* Spin for the first 5 ms, as a poll-mode data plane would, so
		 * the measured round trip is the control process's. */
		if (now - start > 5000000ull)
			usleep(100);
	}
	return false;
}

static void expect_wm(struct fx *f, uint16_t group, uint64_t stable, uint32_t rcvs,
		      uint32_t epoch)
{
	struct il_cmsg m;

	assert_true(recv_type(f, IL_CM_WATERMARK, &m, 3000));
	assert_int_equal(m.group, group);
	assert_int_equal(m.u.wm.stable_seq, stable);
	assert_int_equal(m.u.wm.receivers, rcvs);
	assert_int_equal(m.u.wm.epoch, epoch);
}

static void mgmt(struct fx *f, const char *cmd, char *reply, size_t len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct pollfd p;
	ssize_t n;

	if (f->mfd < 0) {
		f->mfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		assert_true(f->mfd >= 0);
		/* Autobind an abstract address so the reply can find us. */
		assert_int_equal(bind(f->mfd, (struct sockaddr *)&sa, sizeof(sa_family_t)), 0);
	}
	strcpy(sa.sun_path, f->mgmt);
	assert_int_equal(sendto(f->mfd, cmd, strlen(cmd), 0, (struct sockaddr *)&sa, sizeof(sa)),
			 (ssize_t)strlen(cmd));
	p = (struct pollfd){ .fd = f->mfd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 3000), 1);
	n = recv(f->mfd, reply, len - 1, 0);
	assert_true(n > 0);
	reply[n] = '\0';
}

/* Wait until the management socket exists (the process is up). */
static void mgmt_wait(struct fx *f)
{
	uint64_t end = tu_now_ns() + 5000000000ull;
	struct stat st;

	while (lstat(f->mgmt, &st) != 0) {
		assert_true(tu_now_ns() < end);
		usleep(2000);
	}
}

static uint64_t stat_u64(const char *status, const char *key)
{
	char k[64];
	const char *p;

	snprintf(k, sizeof(k), "\n%s ", key);
	p = strstr(status, k);
	assert_non_null(p);
	return strtoull(p + strlen(k), NULL, 10);
}

/* utime + stime of a process, in clock ticks. */
static uint64_t cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fp = fopen(path, "r");
	assert_non_null(fp);
	assert_non_null(fgets(buf, sizeof(buf), fp));
	fclose(fp);
	p = strrchr(buf, ')');
	assert_non_null(p);
	/* Fields after the name: state is field 3; utime 14, stime 15. */
	assert_int_equal(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
				&st),
			 2);
	return ut + st;
}

static void stop_control(struct fx *f)
{
	struct stat st;
	int status;

	assert_int_equal(kill(f->ctl, SIGTERM), 0);
	status = tu_wait(&f->t, f->ctl, 3000);
	assert_true(status != -1);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* Its sockets are gone; the channel stays for the data plane. */
	assert_int_not_equal(lstat(f->sock, &st), 0);
	assert_int_not_equal(lstat(f->mgmt, &st), 0);
	assert_int_equal(lstat(f->t.chan, &st), 0);
}

/* The line of `reply` that starts with `start`, copied into line. */
static void line_of(const char *reply, const char *start, char *line, size_t len)
{
	const char *p = reply;
	size_t n;

	while (strncmp(p, start, strlen(start)) != 0) {
		p = strchr(p, '\n');
		assert_non_null(p);
		p++;
	}
	n = strcspn(p, "\n");
	assert_true(n < len);
	memcpy(line, p, n);
	line[n] = '\0';
}

static void test_watermarks_end_to_end(void **state)
{
	struct fx *f = *state;
	char reply[8192], line[256];
	struct il_cmsg m;
	uint64_t t0, lat_ns, cpu0, cpu1;

	start_control(f);
	attach_dp(f, 1);
	assert_int_equal(il_chan_send_hello(f->dp, 7), 1);
	/* The control process answers with its own HELLO naming us (its
	 * start-up HELLO may come first if we attached before it went out). */
	do {
		assert_true(recv_type(f, IL_CM_HELLO, &m, 3000));
		assert_int_equal(m.u.hello.side, IL_CHAN_CONTROL);
		assert_int_equal(m.u.hello.incarnation, 1);
	} while (m.u.hello.peer_incarnation != il_chan_incarnation(f->dp));

	/* Two receivers of group 3: the watermark is the slower one. */
	send1(f, IL_CM_JOIN, 3, 1, 7, 0);
	send1(f, IL_CM_JOIN, 3, 2, 7, 0);
	send1(f, IL_CM_ACK, 3, 1, 7, 10);
	send1(f, IL_CM_ACK, 3, 2, 7, 5);
	expect_wm(f, 3, 5, 2, 7);
	/* Per member: its ACK and how far it is behind the leading receiver
	 * (receiver 2 holds the watermark back by 5). */
	mgmt(f, "members", reply, sizeof(reply));
	line_of(reply, "member 1 group 3 ", line, sizeof(line));
	assert_non_null(strstr(line, " roles 2 "));
	assert_non_null(strstr(line, " suspected 0 "));
	assert_non_null(strstr(line, " acked 10 lag 0"));
	line_of(reply, "member 2 group 3 ", line, sizeof(line));
	assert_non_null(strstr(line, " acked 5 lag 5"));
	/* Let it go to sleep, then time one ACK-to-watermark round trip
	 * through the eventfd wake-up. */
	usleep(50000);
	t0 = tu_now_ns();
	send1(f, IL_CM_ACK, 3, 2, 7, 20);
	expect_wm(f, 3, 10, 2, 7);
	lat_ns = tu_now_ns() - t0;
	/* The slow receiver leaves: the watermark jumps to the other. */
	send1(f, IL_CM_LEAVE, 3, 1, 7, 0);
	expect_wm(f, 3, 20, 1, 7);
	/* Stale and foreign-epoch ACKs move nothing. */
	send1(f, IL_CM_ACK, 3, 2, 7, 15);
	send1(f, IL_CM_ACK, 3, 2, 6, 99);
	assert_false(recv_type(f, IL_CM_WATERMARK, &m, 200));

	mgmt(f, "groups", reply, sizeof(reply));
	assert_non_null(strstr(reply, "group 3 receivers 1 watermark 20 published 20"));
	mgmt(f, "members", reply, sizeof(reply));
	assert_null(strstr(reply, "member 1 "));
	line_of(reply, "member 2 group 3 ", line, sizeof(line));
	assert_non_null(strstr(line, " acked 20 lag 0"));
	mgmt(f, "status", reply + 1, sizeof(reply) - 1);
	reply[0] = '\n';
	assert_int_equal(stat_u64(reply, "dp_epoch"), 7);
	assert_int_equal(stat_u64(reply, "acks_stale"), 1);
	assert_int_equal(stat_u64(reply, "wrong_epoch"), 1);
	assert_int_equal(stat_u64(reply, "watermarks_published"), 3);
	assert_int_equal(stat_u64(reply, "up_drops"), 0);
	/* It slept between messages and was woken through the eventfd. */
	assert_true(stat_u64(reply, "up_sleeps") > 0);
	assert_true(stat_u64(reply, "up_wakeups") > 0);
	mgmt(f, "ping", reply, sizeof(reply));
	assert_string_equal(reply, "pong\n");
	mgmt(f, "frobnicate", reply, sizeof(reply));
	assert_non_null(strstr(reply, "error: unknown command 'frobnicate'"));

	/* Idle with a 20 ms tick: no busy polling (a spinning loop would
	 * burn ~100 ticks in a second). */
	cpu0 = cpu_ticks(f->ctl);
	usleep(1000000);
	cpu1 = cpu_ticks(f->ctl);
	print_message("ACK -> watermark round trip via eventfd wake-up: %.1f us; "
		      "idle CPU over 1 s: %llu ticks\n",
		      (double)lat_ns / 1e3, (unsigned long long)(cpu1 - cpu0));
	assert_true(cpu1 - cpu0 <= 10);
	stop_control(f);
}

static void test_restarts(void **state)
{
	struct fx *f = *state;
	struct il_cmsg m;
	uint64_t end, inc;
	char err[256], reply[8192];
	int status;

	start_control(f);
	attach_dp(f, 1);
	assert_int_equal(il_chan_send_hello(f->dp, 1), 1);
	send1(f, IL_CM_JOIN, 9, 5, 1, 0);
	send1(f, IL_CM_ACK, 9, 5, 1, 40);
	expect_wm(f, 9, 40, 1, 1);

	/* The control process dies without cleaning up... */
	assert_int_equal(kill(f->ctl, SIGKILL), 0);
	status = tu_wait(&f->t, f->ctl, 3000);
	assert_true(WIFSIGNALED(status));
	/* ...the data plane goes on (ACKs pile up, nobody reads)... */
	send1(f, IL_CM_ACK, 9, 5, 1, 45);
	/* ...and a new one starts over the stale socket file. */
	start_control(f);
	end = tu_now_ns() + 5000000000ull;
	while (!il_chan_peer_restarted(f->dp, &inc))
		assert_true(tu_now_ns() < end);
	assert_int_equal(inc, 2);
	/* The data plane's resync: the new eventfd, HELLO, then its state
	 * (the backlog was flushed by the new control process). */
	for (int efd = -1; efd < 0;) {
		assert_true(tu_now_ns() < end);
		efd = il_chan_wake_fetch(f->sock, &inc, err, sizeof(err));
		if (efd >= 0 && inc != 2) {
			close(efd);
			efd = -1;
		}
		if (efd >= 0)
			il_chan_set_wake_fd(f->dp, efd);
		else
			usleep(2000);
	}
	assert_int_equal(il_chan_send_hello(f->dp, 1), 1);
	assert_true(recv_type(f, IL_CM_HELLO, &m, 3000));
	assert_int_equal(m.u.hello.incarnation, 2);
	assert_int_equal(m.u.hello.peer_incarnation, 1);
	send1(f, IL_CM_JOIN, 9, 5, 1, 0);
	send1(f, IL_CM_ACK, 9, 5, 1, 50);
	expect_wm(f, 9, 50, 1, 1);

	/* Now the data plane restarts, with a new epoch: the control
	 * process keeps the members, hands out the old epoch's final
	 * watermark and restarts stability in the new one at its HELLO. */
	il_chan_close(f->dp);
	f->dp = NULL;
	assert_int_equal(il_chan_open(f->t.chan, IL_CHAN_DATAPLANE, NULL, &f->dp, err, sizeof(err)),
			 0);
	assert_int_equal(il_chan_incarnation(f->dp), 2);
	assert_int_equal(il_chan_send_hello(f->dp, 2), 1);
	assert_true(recv_type(f, IL_CM_HELLO, &m, 3000));
	assert_int_equal(m.u.hello.peer_incarnation, 2);
	assert_true(recv_type(f, IL_CM_WATERMARK, &m, 3000));
	assert_int_equal(m.u.wm.epoch, 1);
	assert_int_equal(m.u.wm.stable_seq, 50);
	assert_true(recv_type(f, IL_CM_VIEW, &m, 3000));
	assert_int_equal(m.u.view.epoch, 2);
	assert_int_equal(m.u.view.start_seq, 1);
	assert_int_equal(m.u.view.n_members, 1);
	mgmt(f, "groups", reply, sizeof(reply));
	assert_string_equal(reply, "group 9 receivers 1 watermark 0 published 0 view 2 members 1 "
				   "suspected 0 window 0\n");
	/* Without the eventfd it still gets through, on the tick. */
	send1(f, IL_CM_JOIN, 9, 5, 2, 0);
	send1(f, IL_CM_ACK, 9, 5, 2, 3);
	expect_wm(f, 9, 3, 1, 2);
	mgmt(f, "status", reply + 1, sizeof(reply) - 1);
	reply[0] = '\n';
	assert_int_equal(stat_u64(reply, "dp_restarts"), 1);
	assert_int_equal(stat_u64(reply, "dp_epoch"), 2);
	stop_control(f);
}

static void test_recreate(void **state)
{
	struct fx *f = *state;
	char out[4096], err[4096], reply[256];
	uint64_t end;
	struct stat st;

	start_control(f);
	mgmt_wait(f);
	stop_control(f);
	/* The file stays with 1024 up slots; asking for 64 is refused... */
	assert_int_equal(run_capture((const char *[]){ "--chan", f->t.chan, "--up-slots", "64",
						       "--mgmt", "none", NULL },
				     out, sizeof(out), err, sizeof(err)),
			 1);
	assert_non_null(strstr(err, "--chan"));
	assert_non_null(strstr(err, "exists with 1024 up / 256 down slots"));
	/* ...unless --recreate says to replace it. */
	start_control_args(f, "64", "--recreate");
	mgmt_wait(f);
	mgmt(f, "ping", reply, sizeof(reply));
	assert_int_equal(stat(f->t.chan, &st), 0);
	end = tu_now_ns() + 3000000000ull;
	while (st.st_size > 64 * 1024) {
		assert_true(tu_now_ns() < end);
		usleep(1000);
		assert_int_equal(stat(f->t.chan, &st), 0);
	}
	stop_control(f);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_command_line),
		cmocka_unit_test_setup_teardown(test_watermarks_end_to_end, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_restarts, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_recreate, fx_setup, fx_teardown),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: %s PATH-TO-interlink-control\n", argv[0]);
		return 2;
	}
	ctl_exe = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
