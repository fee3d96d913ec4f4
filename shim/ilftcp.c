/* SPDX-License-Identifier: BSD-3-Clause
 *
 * libilftcp.so: the FT-TCP north-side wrapper as an LD_PRELOAD library for
 * an unmodified, dynamically linked server (docs/ft-tcp.md).
 *
 *  - every read on a protected connection sends its length to the logger;
 *  - a write waits until every earlier read length is acknowledged, so the
 *    client never learns more than the log could rebuild (Sec. III);
 *  - listen() tells the logger the server (re)started: the logger has the
 *    appliance fabricate a SYN for each crashed connection of that port,
 *    paced by the listen backlog the shim reports (with ILFTCP_READY=wait,
 *    not at listen() but when the server first blocks waiting for events);
 *  - accept() of such a connection replays it: the logger hands over the
 *    replay file as descriptors (it holds a copy of the logged bytes; the
 *    server may run as another user than the logger), reads are served
 *    from it with the logged lengths, then the remaining logged bytes (G2), then
 *    the socket; meanwhile the connection is readable to epoll/poll/select
 *    (ilftcp_poll.c); writes of bytes the client already has are discarded
 *    and reported as done (G4/G5);
 *  - close()/shutdown() and exit announce themselves, so the appliance lets
 *    that FIN through; a SIGKILLed process announces nothing, its logger
 *    socket closes, and the appliance drops the kernel's FIN/RST;
 *  - a forked child (nginx's workers) opens a logger session of its own:
 *    the connections it accepts are its own, those it inherited are not.
 *
 * Protocol with the logger: 32-byte messages (ftcp_proto.h) on a unix
 * stream socket ($ILFTCP_SOCK). Thread-safe with one mutex; the logger
 * socket uses the real libc calls, never the wrappers.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "ilftcp.h"

struct pfd *ilf_fds[ILF_MAX_FD];
pthread_mutex_t ilf_mu = PTHREAD_MUTEX_INITIALIZER;
_Atomic int ilf_replaying;
struct ilf_real ilf_r;

static int lg = -1;
/* The protected descriptors, so a scan costs the connections there are. */
static int plist[4096];
static unsigned n_plist;
static struct {
	uint16_t port, backlog;
} listens[16];
static unsigned n_listen;
/* Descriptors that came with logger messages (SCM_RIGHTS), in order. */
static int lg_fds[8];
static unsigned n_lg_fds;

/* ILFTCP_TIMING=1: recovery milestones on stderr (CLOCK_MONOTONIC, ns),
 * for scripts/bench-ftcp.sh. */
static bool timing;
/* ILFTCP_REPLAY=merge: one replayed read returns as many of the logged
 * reads as fit (see shim_init). */
static bool replay_merge;

static void mark(const char *what, const struct pfd *p, uint64_t bytes)
{
	struct timespec ts;

	if (!timing)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	fprintf(stderr, "ilftcp-timing %s %llu port %u bytes %llu\n", what,
		(unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec,
		p ? ntohs(p->key.cport) : 0, (unsigned long long)bytes);
}

void ilf_resolve(void)
{
#define R(fn) ilf_r.fn = (__typeof__(ilf_r.fn))dlsym(RTLD_NEXT, #fn)
	R(read);
	R(recv);
	R(recvfrom);
	R(readv);
	R(recvmsg);
	R(write);
	R(send);
	R(sendto);
	R(writev);
	R(sendmsg);
	R(sendfile);
	R(splice);
	R(accept);
	R(accept4);
	R(close);
	R(listen);
	R(shutdown);
	R(epoll_ctl);
	R(epoll_wait);
	R(epoll_pwait);
	R(epoll_pwait2);
	R(poll);
	R(ppoll);
	R(select);
	R(pselect);
#undef R
}

void ilf_die(const char *what)
{
	fprintf(stderr, "ilftcp: %s: %s\n", what, strerror(errno));
	_exit(70);
}

void ilf_refuse(const char *call)
{
	fprintf(stderr,
		"ilftcp: %s() on a protected connection is not supported: the shim cannot "
		"log or replay it; stopping rather than running unprotected "
		"(docs/ft-tcp.md, \"What the shim covers\")\n",
		call);
	_exit(70);
}

/* ---- the logger socket -------------------------------------------------- */

static bool lg_put(const void *m, size_t len)
{
	const uint8_t *p = m;
	while (len) {
		ssize_t n = REAL(send)(lg, p, len, MSG_NOSIGNAL);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return false;
		}
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/* recvmsg, keeping the descriptors a message carries (a plain recv would
 * have the kernel close them). */
static ssize_t lg_recv(void *buf, size_t len, int flags)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * 4)];
	} cb;
	struct iovec v = {.iov_base = buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = cb.b,
			    .msg_controllen = sizeof(cb.b)};
	ssize_t n = REAL(recvmsg)(lg, &mh, flags | MSG_CMSG_CLOEXEC);

	for (struct cmsghdr *c = n >= 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		unsigned k = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (unsigned i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (n_lg_fds < 8)
				lg_fds[n_lg_fds++] = fd;
			else
				REAL(close)(fd);
		}
	}
	return n;
}

static int lg_take_fd(void)
{
	if (!n_lg_fds)
		return -1;
	int fd = lg_fds[0];
	memmove(lg_fds, lg_fds + 1, (--n_lg_fds) * sizeof(int));
	return fd;
}

/* What came from the logger and is not yet taken: one recvmsg takes every
 * message waiting (a pass's read acknowledgements come in one send), not
 * one system call per message. A message that carries descriptors ends
 * what one recvmsg returns, so they are queued in order with it. */
static uint8_t lg_rx[8192];
static uint32_t lg_rx_have, lg_rx_off;

static void lg_rx_reset(void)
{
	lg_rx_have = lg_rx_off = 0;
}

static bool lg_get(void *m, size_t len, bool block)
{
	while (lg_rx_have - lg_rx_off < len) {
		uint32_t part = lg_rx_have - lg_rx_off;
		memmove(lg_rx, lg_rx + lg_rx_off, part);
		lg_rx_have = part;
		lg_rx_off = 0;
		ssize_t n = lg_recv(lg_rx + part, sizeof(lg_rx) - part, block || part ? 0 : MSG_DONTWAIT);
		if (n == 0)
			return false;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN && !part && !block) {
				errno = EAGAIN;
				return false;
			}
			return false;
		}
		lg_rx_have += (uint32_t)n;
	}
	memcpy(m, lg_rx + lg_rx_off, len);
	lg_rx_off += (uint32_t)len;
	return true;
}

static void plist_del(int fd)
{
	for (unsigned i = 0; i < n_plist; i++)
		if (plist[i] == fd) {
			plist[i] = plist[--n_plist];
			return;
		}
}

static struct pfd *by_key(const struct ftc_key *k)
{
	for (unsigned i = 0; i < n_plist; i++) {
		struct pfd *p = ilf_p(plist[i]);
		if (p && !memcmp(&p->key, k, sizeof(*k)))
			return p;
	}
	return NULL;
}

static void lg_reconnect(void);

/* Read one message; READ_ACKs are applied here and not returned. */
static bool lg_next(struct ftc_shim_msg *m, bool block)
{
	for (;;) {
		if (lg < 0 || !lg_get(m, sizeof(*m), block)) {
			if (!block && errno == EAGAIN)
				return false;
			lg_reconnect();
			if (!block)
				return false;
			continue;
		}
		if (m->type == FS_READ_ACK) {
			struct pfd *p = by_key(&m->key);
			if (p && ftc_seq_lt(p->reads_acked, m->a))
				p->reads_acked = m->a;
			if (!block)
				continue; /* drain everything that is there */
		}
		return true;
	}
}

static void drain_acks(void)
{
	struct ftc_shim_msg m;
	while (lg >= 0 && lg_next(&m, false))
		; /* a non-ack here would be a protocol slip: ignore it */
}

/* Taken at load: a server may clear its environment later (nginx's
 * workers keep only what its `env` directives list). */
static char sock_path[108];

static int lg_connect(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock_path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		if (fd >= 0)
			REAL(close)(fd);
		return -1;
	}
	return fd;
}

_Atomic bool ilf_ready = true;

static void say_hello(void)
{
	struct ftc_shim_msg h = {.type = FS_HELLO, .a = (uint32_t)getpid()};
	lg_put(&h, sizeof(h));
	for (unsigned i = 0; i < n_listen && atomic_load(&ilf_ready); i++) {
		struct ftc_shim_msg l = {.type = FS_LISTEN, .a = listens[i].port,
					 .b = listens[i].backlog};
		lg_put(&l, sizeof(l));
	}
}

static struct ftc_shim_msg wait_type(uint16_t type);

/* Read lengths not yet sent to the logger. They leave together when an
 * output commit needs them (a write, a close) or the batch is full, so a
 * server that reads from many connections and then writes to them (an
 * event loop's pass) costs the logger one round trip per pass, not one per
 * read. A length that never left (the server died first) had no output
 * depend on it: replay serves its bytes with fresh lengths (G2). */
static struct ftc_shim_msg rpend[256];
static unsigned n_rpend;

static void flush_reads(bool drain)
{
	if (!n_rpend)
		return;
	bool ok = lg >= 0 && lg_put(rpend, n_rpend * sizeof(rpend[0]));
	n_rpend = 0;
	if (!ok)
		lg_reconnect(); /* re-sends every length not acknowledged */
	else if (drain)
		drain_acks();
}

/* The logger restarted: say hello again, re-claim every protected
 * connection and re-send the read lengths it has not acknowledged. */
static void lg_reconnect(void)
{
	n_rpend = 0; /* all re-sent below */
	if (lg >= 0)
		REAL(close)(lg);
	lg = -1;
	lg_rx_reset();
	for (int i = 0; i < 400 && lg < 0; i++) {
		lg = lg_connect();
		if (lg < 0)
			usleep(25000);
	}
	if (lg < 0)
		ilf_die("logger unreachable for 10 s");
	say_hello();
	for (unsigned i = 0; i < n_plist; i++) {
		struct pfd *p = ilf_p(plist[i]);
		if (!p)
			continue;
		struct ftc_shim_msg c = {.type = FS_ACCEPTED, .key = p->key, .a = 1,
					 .b = p->reads_acked};
		lg_put(&c, sizeof(c));
		wait_type(FS_CONN);
		for (uint32_t r = p->reads_acked; r != p->reads_sent; r++) {
			struct ftc_shim_msg m = {.type = FS_READ, .key = p->key,
						 .a = p->lens[r % ILF_UNACKED], .b = r};
			lg_put(&m, sizeof(m));
		}
	}
}

static struct ftc_shim_msg wait_type(uint16_t type)
{
	struct ftc_shim_msg m;
	do {
		lg_next(&m, true);
	} while (m.type != type);
	return m;
}

/* fork(): the child must not speak on its parent's session (their
 * messages and replies would interleave). It opens its own; connections
 * it inherited stay its parent's (a child that exits must not announce
 * their close, nor may its death be taken for theirs). */
static void fork_prepare(void)
{
	pthread_mutex_lock(&ilf_mu);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&ilf_mu);
}

static void fork_child(void)
{
	pthread_mutex_init(&ilf_mu, NULL);
	for (unsigned i = 0; i < n_plist; i++) {
		struct pfd *p = ilf_p(plist[i]);
		if (p) {
			ilf_replay_end(p);
			p->peer_fin = false;
			p->prot = false;
		}
	}
	n_plist = 0;
	atomic_store(&ilf_replaying, 0);
	n_rpend = 0;
	while (n_lg_fds)
		REAL(close)(lg_take_fd());
	lg_rx_reset(); /* the parent's */
	if (lg < 0)
		return;
	REAL(close)(lg);
	lg = lg_connect();
	if (lg < 0) {
		fprintf(stderr, "ilftcp: logger socket unreachable after fork: "
				"connections of pid %d unprotected\n", (int)getpid());
		return;
	}
	say_hello();
}

/*
 * ILFTCP_READY=wait: a server that listens before it can serve (redis
 * loading its append-only file answers -LOADING meanwhile, and a replayed
 * request must get the answer the crashed server gave) is taken to be
 * ready when it first blocks waiting for events. Its listens are announced
 * then, and the logger starts its recoveries only after that.
 */
void ilf_ready_now(void)
{
	pthread_mutex_lock(&ilf_mu);
	if (!atomic_load(&ilf_ready)) {
		atomic_store(&ilf_ready, true);
		mark("ready", NULL, 0);
		for (unsigned i = 0; i < n_listen && lg >= 0; i++) {
			struct ftc_shim_msg l = {.type = FS_LISTEN, .a = listens[i].port,
						 .b = listens[i].backlog};
			lg_put(&l, sizeof(l));
		}
	}
	pthread_mutex_unlock(&ilf_mu);
}

__attribute__((constructor)) static void shim_init(void)
{
	ilf_resolve();
	timing = getenv("ILFTCP_TIMING") && *getenv("ILFTCP_TIMING") == '1';
	mark("start", NULL, 0);
	const char *rd = getenv("ILFTCP_READY");
	if (rd && *rd && strcmp(rd, "listen") != 0) {
		if (strcmp(rd, "wait") != 0) {
			fprintf(stderr, "ilftcp: ILFTCP_READY=%s: expected listen (the default: "
					"recover once the server listens) or wait (once it first "
					"waits for events)\n", rd);
			_exit(2);
		}
		atomic_store(&ilf_ready, false);
	}
	/*
	 * ILFTCP_REPLAY=merge: a replayed read returns as many of the crashed
	 * server's reads as fit in the caller's buffer, instead of one read
	 * per read it made. The bytes are the same; what changes is how they
	 * are cut, which only a server whose output depends on the cut would
	 * notice (TCP promises no cut; a divergence would be caught by the
	 * output check and reset). What it buys: a server that syncs once per
	 * pass of its event loop (redis with appendfsync always) replays a
	 * long connection in few passes instead of one per request.
	 */
	const char *rm = getenv("ILFTCP_REPLAY");
	if (rm && *rm && strcmp(rm, "exact") != 0) {
		if (strcmp(rm, "merge") != 0) {
			fprintf(stderr, "ilftcp: ILFTCP_REPLAY=%s: expected exact (the default: one "
					"replayed read per read the crashed server made) or merge "
					"(as many as fit)\n", rm);
			_exit(2);
		}
		replay_merge = true;
	}
	const char *sp = getenv("ILFTCP_SOCK");
	snprintf(sock_path, sizeof(sock_path), "%s", sp && *sp ? sp : FTC_LOGGER_SOCK_DEF);
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	lg = lg_connect();
	if (lg < 0) {
		fprintf(stderr, "ilftcp: logger socket unreachable: connections unprotected\n");
		return;
	}
	say_hello();
}

void ilf_announce_close(struct pfd *p)
{
	if (p->announced || lg < 0)
		return;
	struct ftc_shim_msg m = {.type = FS_CLOSE, .key = p->key};
	/* Every read logged first: output that follows them may be the FIN. */
	flush_reads(false);
	while (p->reads_acked != p->reads_sent)
		lg_next(&m, true);
	m.type = FS_CLOSE;
	m.key = p->key;
	lg_put(&m, sizeof(m));
	wait_type(FS_CLOSE_OK);
	p->announced = true;
}

__attribute__((destructor)) static void shim_fini(void)
{
	pthread_mutex_lock(&ilf_mu);
	for (unsigned i = 0; i < n_plist; i++)
		if (ilf_p(plist[i]))
			ilf_announce_close(ilf_fds[plist[i]]);
	pthread_mutex_unlock(&ilf_mu);
}

/* ---- reads and writes (the calls are in ilftcp_io.c) --------------------- */

void ilf_log_read(struct pfd *p, size_t n)
{
	if (lg < 0 || !n)
		return;
	if (p->reads_sent - p->reads_acked >= ILF_UNACKED) {
		flush_reads(false);
		while (p->reads_sent - p->reads_acked >= ILF_UNACKED) {
			struct ftc_shim_msg m;
			lg_next(&m, true);
		}
	}
	p->lens[p->reads_sent % ILF_UNACKED] = (uint32_t)n;
	rpend[n_rpend++] = (struct ftc_shim_msg){.type = FS_READ, .key = p->key,
						 .a = (uint32_t)n, .b = p->reads_sent++};
	if (n_rpend == sizeof(rpend) / sizeof(rpend[0]))
		flush_reads(true); /* acks that came meanwhile are taken, none waited for */
}

/* How much of what the client already has the restarted server still
 * owes (FS_OWED): once its replay is read, a deterministic server writes
 * it all again before it waits for anything new from the client; the
 * logger resets the connection if that stops progressing. */
static void tell_owed(struct pfd *p)
{
	struct ftc_shim_msg m = {.type = FS_OWED, .key = p->key, .a = (uint32_t)p->out_skip,
				 .b = (uint32_t)(p->out_skip >> 32)};

	p->owed_last = p->out_skip;
	if (lg >= 0)
		lg_put(&m, sizeof(m));
}

size_t ilf_tail_overlap(const struct pfd *p, uint64_t pos, size_t n, size_t *at)
{
	if (!p->tail_len || !n)
		return 0;
	uint64_t t0 = p->tail_end - p->tail_len;
	uint64_t lo = pos > t0 ? pos : t0;
	uint64_t hi = pos + n < p->tail_end ? pos + n : p->tail_end;
	if (lo >= hi)
		return 0;
	*at = (size_t)(lo - pos);
	return (size_t)(hi - lo);
}

bool ilf_tail_match(struct pfd *p, uint64_t pos, const uint8_t *b, size_t n)
{
	uint64_t t0 = p->tail_end - p->tail_len;

	if (!memcmp(b, p->tail + (pos - t0), n))
		return true;
	for (size_t i = 0; i < n; i++)
		if (b[i] != p->tail[pos - t0 + i]) {
			pos += i;
			break;
		}
	p->diverged = true;
	mark("diverged", p, pos);
	struct ftc_shim_msg m = {.type = FS_OWED, .flags = FTC_OWED_DIVERGED, .key = p->key,
				 .a = (uint32_t)pos, .b = (uint32_t)(pos >> 32)};
	if (lg >= 0)
		lg_put(&m, sizeof(m));
	return false;
}

/* Output commit: no write before every earlier read length is logged.
 * Returns how many leading bytes to discard (already at the client). */
size_t ilf_before_write(struct pfd *p, size_t n)
{
	struct ftc_shim_msg m;
	size_t skip;

	flush_reads(false); /* the wait below takes the acknowledgements */
	while (lg >= 0 && p->reads_acked != p->reads_sent)
		lg_next(&m, true);
	skip = p->out_skip < n ? (size_t)p->out_skip : n;
	p->out_skip -= skip;
	if (p->owed_told && (!p->out_skip || p->owed_last - p->out_skip >= ILF_OWED_STEP)) {
		tell_owed(p);
		p->owed_told = p->out_skip != 0;
		if (!p->owed_told && p->held && !p->rearm) {
			p->rearm = true;
			atomic_fetch_add(&ilf_replaying, 1);
			mark("rearm", p, 0);
		}
		p->held = p->held && p->owed_told;
	}
	return skip;
}

/* The output owed (above) came from the replayed reads alone: a server
 * that re-executes them writes it before it needs anything new. Until it
 * has, new client bytes stay in the socket: given to a server whose
 * replies differ (a diverged re-execution), their replies would go out
 * cut to fit where the client's stream is, a corrupt stream no check
 * would catch; held, the logger resets the connection at its deadline.
 * A non-blocking read is refused (EAGAIN); a blocking one waits for the
 * output (another thread's write) or the socket's error. */
int ilf_hold_input(struct pfd *p, int fd, int flags)
{
	pthread_mutex_lock(&ilf_mu);
	if (p->rearm) { /* the report it was for is this read */
		p->rearm = false;
		atomic_fetch_sub(&ilf_replaying, 1);
	}
	bool owed = p->owed_told;
	pthread_mutex_unlock(&ilf_mu);
	if (!owed)
		return 0;
	bool nonblock = (flags & MSG_DONTWAIT) || (fcntl(fd, F_GETFL) & O_NONBLOCK);
	for (;;) {
		struct pollfd q = {.fd = fd, .events = POLLIN};
		if (REAL(poll)(&q, 1, 0) > 0 && (q.revents & (POLLERR | POLLHUP)))
			return 0; /* reset (the logger's deadline): the read says so */
		pthread_mutex_lock(&ilf_mu);
		owed = p->owed_told;
		if (owed && nonblock && !p->held) {
			p->held = true;
			mark("held", p, p->out_skip);
		}
		pthread_mutex_unlock(&ilf_mu);
		if (!owed)
			return 0;
		if (nonblock) {
			errno = EAGAIN;
			return -1;
		}
		REAL(poll)(&q, 1, 10);
	}
}

void ilf_replay_end(struct pfd *p)
{
	if (p->rp.log_fd < 0)
		return;
	/* how many reads it took, beside how many the crashed server made */
	mark("replay_done", p, p->replay_calls);
	mark("replay_logged_reads", p, p->rp.n_reads);
	if (p->out_skip) {
		tell_owed(p);
		p->owed_told = true;
	}
	REAL(close)(p->rp.log_fd);
	p->rp.log_fd = -1;
	ilf_replay_release(&p->rp);
	if (!p->peer_fin) /* else still readable (at its end) until closed */
		atomic_fetch_sub(&ilf_replaying, 1);
}

/* Serve up to n bytes from the replay; -1 when replay is over (0, the end
 * of the stream, when the client had closed its side). With peek
 * (MSG_PEEK) the bytes stay: nothing is consumed or logged. */
ssize_t ilf_replay_read(struct pfd *p, void *buf, size_t n, bool peek)
{
	const char *why = "";
	bool fresh;
	ssize_t got;

	if (p->rp.log_fd < 0)
		return p->peer_fin ? 0 : -1; /* the client's FIN: end of stream */
	if (!p->rp.log_left) {
		ilf_replay_end(p);
		return p->peer_fin ? 0 : -1;
	}
	got = ilf_replay_next(&p->rp, buf, n, peek, &fresh, &why);
	if (got < 0)
		ilf_die(why);
	/* Merged: the next logged reads too, while they fit (never past the
	 * logged reads into the bytes that get fresh lengths, G2). */
	while (replay_merge && !peek && !fresh && (size_t)got < n && p->rp.log_left &&
	       p->rp.next_read < p->rp.n_reads) {
		ssize_t more = ilf_replay_next(&p->rp, (uint8_t *)buf + got, n - (size_t)got, false,
					       &fresh, &why);
		if (more < 0)
			ilf_die(why);
		got += more;
		if (more == 0 || fresh)
			break;
	}
	if (fresh)
		ilf_log_read(p, (size_t)got); /* a new read of logged bytes (G2) */
	if (!peek && got > 0)
		p->replay_calls++;
	if (!p->rp.log_left)
		ilf_replay_end(p);
	return got;
}

/* ---- accept, listen, close --------------------------------------------- */

/* The connection's IPv4 addresses, also from an IPv6 socket that carries
 * IPv4 (a dual-stack listener: ::ffff:a.b.c.d). A native IPv6 connection
 * is not protected (the appliance passes IPv6 through untouched). */
static bool v4_of(const struct sockaddr_storage *ss, uint32_t *ip, uint16_t *port)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
		*ip = a->sin_addr.s_addr;
		*port = a->sin_port;
		return true;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
		if (!IN6_IS_ADDR_V4MAPPED(&a->sin6_addr))
			return false;
		memcpy(ip, a->sin6_addr.s6_addr + 12, 4);
		*port = a->sin6_port;
		return true;
	}
	return false;
}

/* The logger's FS_REPLAY: the replay file and the file its extents point
 * into (the replay file again, since the shared log) come as descriptors,
 * so a server that dropped its privileges needs no access to the logger's
 * directory. */
static bool take_replay(struct pfd *p)
{
	struct ftc_shim_msg h = wait_type(FS_REPLAY);
	int rf = h.a ? lg_take_fd() : -1, lf = h.a ? lg_take_fd() : -1;
	const char *why = "";

	if (h.a == 0 || rf < 0 || lf < 0) {
		if (rf >= 0)
			REAL(close)(rf);
		if (lf >= 0)
			REAL(close)(lf);
		return false;
	}
	/* Every size in the file is checked against the file and the log
	 * before a byte is served (ilftcp_replay.c). */
	if (ilf_replay_load(&p->rp, rf, lf, &p->out_skip, &why))
		ilf_die(why);
	p->out_pos = 0;
	p->tail_end = p->rp.tail_end;
	p->tail_len = p->rp.tail_len;
	memcpy(p->tail, p->rp.tail, p->tail_len);
	p->diverged = false;
	REAL(close)(rf);
	/* Logged reads are already acknowledged. */
	p->reads_sent = p->reads_acked = p->rp.n_reads;
	p->peer_fin = h.flags & FTC_REPLAY_PEER_FIN;
	atomic_fetch_add(&ilf_replaying, 1);
	mark("recovered_accept", p, p->rp.log_left);
	if (!p->rp.log_left)
		ilf_replay_end(p);
	return true;
}

static void on_accept(int fd)
{
	struct sockaddr_storage me, peer;
	socklen_t ml = sizeof(me), pl = sizeof(peer);
	struct ftc_shim_msg m = {.type = FS_ACCEPTED};

	if (fd < 0 || lg < 0)
		return;
	if (fd >= ILF_MAX_FD) {
		/* Left unprotected, its FIN would never be announced. */
		fprintf(stderr, "ilftcp: accepted descriptor %d is above the shim's limit (%d): "
				"stopping rather than running unprotected\n", fd, ILF_MAX_FD);
		_exit(70);
	}
	uint32_t sip, cip;
	uint16_t sport, cport;
	if (getsockname(fd, (struct sockaddr *)&me, &ml) ||
	    getpeername(fd, (struct sockaddr *)&peer, &pl) || !v4_of(&me, &sip, &sport) ||
	    !v4_of(&peer, &cip, &cport))
		return;
	m.key.sip = sip;
	m.key.cip = cip;
	m.key.sport = sport;
	m.key.cport = cport;
	pthread_mutex_lock(&ilf_mu);
	lg_put(&m, sizeof(m));
	struct ftc_shim_msg r = wait_type(FS_CONN);
	if (r.a && n_plist == sizeof(plist) / sizeof(plist[0])) {
		fprintf(stderr, "ilftcp: more than %u protected connections: pid %d stops\n",
			n_plist, (int)getpid());
		_exit(70);
	}
	if (r.a) {
		struct pfd *p = ilf_fds[fd];
		if (!p)
			p = ilf_fds[fd] = malloc(sizeof(*p));
		if (!p)
			ilf_die("malloc");
		memset(p, 0, sizeof(*p));
		p->rp.log_fd = -1;
		p->prot = true;
		p->key = m.key;
		plist_del(fd);
		plist[n_plist++] = fd;
		if (r.b) {
			/* The fabricated handshake is done (accept returned); the
			 * logger may still be building the replay file. */
			mark("handshake_accepted", p, 0);
			if (!take_replay(p)) {
				/* The logger gave the connection up (its log names
				 * why) and has the appliance reset the client; the
				 * server sees the connection end. */
				fprintf(stderr, "ilftcp: no replay for a recovered connection: "
						"it is closed\n");
				p->prot = false;
				plist_del(fd);
				REAL(shutdown)(fd, SHUT_RDWR);
			}
		}
	}
	pthread_mutex_unlock(&ilf_mu);
}

/* Whether an accept on s may block (the first one makes a server of
 * blocking accepts ready). */
static bool accept_blocks(int s)
{
	int fl = fcntl(s, F_GETFL);

	return fl >= 0 && !(fl & O_NONBLOCK);
}

int accept4(int s, struct sockaddr *a, socklen_t *al, int flags)
{
	if (!atomic_load_explicit(&ilf_ready, memory_order_relaxed))
		ilf_waits(accept_blocks(s));
	int fd = REAL(accept4)(s, a, al, flags);
	on_accept(fd);
	return fd;
}

int accept(int s, struct sockaddr *a, socklen_t *al)
{
	if (!atomic_load_explicit(&ilf_ready, memory_order_relaxed))
		ilf_waits(accept_blocks(s));
	int fd = REAL(accept)(s, a, al);
	on_accept(fd);
	return fd;
}

int listen(int s, int backlog)
{
	struct sockaddr_storage me;
	socklen_t ml = sizeof(me);
	int rc = REAL(listen)(s, backlog), v6only = 0;
	socklen_t ol = sizeof(v6only);
	uint16_t port;

	if (rc || lg < 0 || getsockname(s, (struct sockaddr *)&me, &ml))
		return rc;
	if (me.ss_family == AF_INET) {
		port = ((struct sockaddr_in *)&me)->sin_port;
	} else if (me.ss_family == AF_INET6) {
		/* Dual-stack (::, or ::ffff:a.b.c.d) accepts IPv4: it counts.
		 * An IPv6-only socket never accepts a protected connection. */
		if (getsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &ol) == 0 && v6only)
			return rc;
		port = ((struct sockaddr_in6 *)&me)->sin6_port;
	} else {
		return rc;
	}
	pthread_mutex_lock(&ilf_mu);
	/* The backlog paces recovery: the logger never has more fabricated
	 * connections waiting in the accept queue than it holds. */
	uint16_t bl = backlog <= 0 ? 1 : backlog > 65535 ? 65535 : (uint16_t)backlog;
	if (n_listen < 16) {
		listens[n_listen].port = ntohs(port);
		listens[n_listen++].backlog = bl;
	}
	struct ftc_shim_msg m = {.type = FS_LISTEN, .a = ntohs(port), .b = bl};
	mark("listen", NULL, 0); /* the application's own start-up ends here */
	if (atomic_load(&ilf_ready))
		lg_put(&m, sizeof(m)); /* else ilf_ready_now() announces it */
	pthread_mutex_unlock(&ilf_mu);
	return rc;
}

int shutdown(int fd, int how)
{
	struct pfd *p = ilf_p(fd);

	if (p && how != SHUT_RD) {
		pthread_mutex_lock(&ilf_mu);
		ilf_announce_close(p);
		pthread_mutex_unlock(&ilf_mu);
	}
	return REAL(shutdown)(fd, how);
}

int close(int fd)
{
	struct pfd *p = ilf_p(fd);

	if (p) {
		pthread_mutex_lock(&ilf_mu);
		ilf_announce_close(p);
		ilf_replay_end(p);
		if (p->peer_fin) {
			p->peer_fin = false;
			atomic_fetch_sub(&ilf_replaying, 1);
		}
		if (p->rearm) {
			p->rearm = false;
			atomic_fetch_sub(&ilf_replaying, 1);
		}
		p->owed_told = p->held = false;
		p->prot = false;
		plist_del(fd);
		pthread_mutex_unlock(&ilf_mu);
	}
	ilf_poll_forget(fd);
	return REAL(close)(fd);
}
