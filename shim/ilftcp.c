/* SPDX-License-Identifier: BSD-3-Clause
 *
 * libilftcp.so: the FT-TCP north-side wrapper as an LD_PRELOAD library for
 * an unmodified, dynamically linked server (docs/ft-tcp.md).
 *
 *  - every read on a protected connection sends its length to the logger;
 *  - a write waits until every earlier read length is acknowledged, so the
 *    client never learns more than the log could rebuild (Sec. III);
 *  - listen() tells the logger the server (re)started: the logger has the
 *    appliance fabricate a SYN for each crashed connection of that port;
 *  - accept() of such a connection replays it: reads are served from the
 *    log with the logged lengths, then the remaining logged bytes (G2),
 *    then the socket; writes of bytes the client already has are
 *    discarded and reported as done (G4/G5);
 *  - close()/shutdown() and exit announce themselves, so the appliance lets
 *    that FIN through; a SIGKILLed process announces nothing, its logger
 *    socket closes, and the appliance drops the kernel's FIN/RST.
 *
 * Protocol with the logger: 32-byte messages (ftcp_proto.h) on a unix
 * stream socket ($ILFTCP_SOCK). Thread-safe with one mutex; the logger
 * socket uses the real libc calls, never the wrappers.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <interlink/ftcp_proto.h>

#define MAX_FD 4096
#define UNACKED 4096 /* read lengths kept for re-sending after a logger restart */

struct pfd {
	bool prot, announced;
	struct ftc_key key;
	uint32_t reads_sent, reads_acked;
	uint32_t lens[UNACKED]; /* by read index % UNACKED */
	/* replay: the connection's log file, read at the replay file's extents */
	int rfd;
	struct ftc_replay_ext *ext;
	uint32_t n_ext, ei, epos; /* extent being served, bytes of it served */
	uint8_t *rb;              /* read-ahead of the log: [rb_off, rb_off + rb_len) */
	uint64_t rb_off;
	uint32_t rb_len;
	uint32_t n_reads, next_read;
	uint32_t *rlens;
	uint32_t part;       /* bytes of rlens[next_read] already served */
	uint64_t log_left;   /* logged instream bytes not served yet */
	uint64_t out_skip;   /* outstream bytes to discard */
};

static struct pfd *fds[MAX_FD];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int lg = -1;
static uint16_t listen_ports[16];
static unsigned n_listen;

/* ILFTCP_TIMING=1: recovery milestones on stderr (CLOCK_MONOTONIC, ns),
 * for scripts/bench-ftcp.sh. */
static bool timing;

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


static ssize_t (*r_read)(int, void *, size_t);
static ssize_t (*r_recv)(int, void *, size_t, int);
static ssize_t (*r_recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
static ssize_t (*r_readv)(int, const struct iovec *, int);
static ssize_t (*r_write)(int, const void *, size_t);
static ssize_t (*r_send)(int, const void *, size_t, int);
static ssize_t (*r_sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
static ssize_t (*r_writev)(int, const struct iovec *, int);
static int (*r_accept)(int, struct sockaddr *, socklen_t *);
static int (*r_accept4)(int, struct sockaddr *, socklen_t *, int);
static int (*r_close)(int);
static int (*r_listen)(int, int);
static int (*r_shutdown)(int, int);

static void resolve(void)
{
	r_read = dlsym(RTLD_NEXT, "read");
	r_recv = dlsym(RTLD_NEXT, "recv");
	r_recvfrom = dlsym(RTLD_NEXT, "recvfrom");
	r_readv = dlsym(RTLD_NEXT, "readv");
	r_write = dlsym(RTLD_NEXT, "write");
	r_send = dlsym(RTLD_NEXT, "send");
	r_sendto = dlsym(RTLD_NEXT, "sendto");
	r_writev = dlsym(RTLD_NEXT, "writev");
	r_accept = dlsym(RTLD_NEXT, "accept");
	r_accept4 = dlsym(RTLD_NEXT, "accept4");
	r_close = dlsym(RTLD_NEXT, "close");
	r_listen = dlsym(RTLD_NEXT, "listen");
	r_shutdown = dlsym(RTLD_NEXT, "shutdown");
}

static struct pfd *P(int fd)
{
	return fd >= 0 && fd < MAX_FD && fds[fd] && fds[fd]->prot ? fds[fd] : NULL;
}

static void die(const char *what)
{
	/* Protection cannot be kept: better to stop than to let the client
	 * see output the log cannot rebuild. */
	fprintf(stderr, "ilftcp: %s: %s\n", what, strerror(errno));
	_exit(70);
}

/* ---- the logger socket -------------------------------------------------- */

static bool lg_put(const void *m, size_t len)
{
	const uint8_t *p = m;
	while (len) {
		ssize_t n = r_send(lg, p, len, MSG_NOSIGNAL);
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

static bool lg_get(void *m, size_t len, bool block)
{
	uint8_t *p = m;
	size_t got = 0;
	while (got < len) {
		ssize_t n = r_recv(lg, p + got, len - got, block || got ? 0 : MSG_DONTWAIT);
		if (n == 0)
			return false;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN && !got && !block) {
				errno = EAGAIN;
				return false;
			}
			return false;
		}
		got += (size_t)n;
	}
	return true;
}

static struct pfd *by_key(const struct ftc_key *k)
{
	for (int i = 0; i < MAX_FD; i++)
		if (fds[i] && fds[i]->prot && !memcmp(&fds[i]->key, k, sizeof(*k)))
			return fds[i];
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

static int lg_connect(void)
{
	const char *path = getenv("ILFTCP_SOCK");
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path ? path : FTC_LOGGER_SOCK_DEF);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		if (fd >= 0)
			r_close(fd);
		return -1;
	}
	return fd;
}

static struct ftc_shim_msg wait_type(uint16_t type);

/* The logger restarted: say hello again, re-claim every protected
 * connection and re-send the read lengths it has not acknowledged. */
static void lg_reconnect(void)
{
	if (lg >= 0)
		r_close(lg);
	lg = -1;
	for (int i = 0; i < 400 && lg < 0; i++) {
		lg = lg_connect();
		if (lg < 0)
			usleep(25000);
	}
	if (lg < 0)
		die("logger unreachable for 10 s");
	struct ftc_shim_msg h = {.type = FS_HELLO, .a = (uint32_t)getpid()};
	lg_put(&h, sizeof(h));
	for (unsigned i = 0; i < n_listen; i++) {
		struct ftc_shim_msg l = {.type = FS_LISTEN, .a = listen_ports[i]};
		lg_put(&l, sizeof(l));
	}
	for (int fd = 0; fd < MAX_FD; fd++) {
		struct pfd *p = P(fd);
		if (!p)
			continue;
		struct ftc_shim_msg c = {.type = FS_ACCEPTED, .key = p->key, .a = 1,
					 .b = p->reads_acked};
		lg_put(&c, sizeof(c));
		wait_type(FS_CONN);
		for (uint32_t r = p->reads_acked; r != p->reads_sent; r++) {
			struct ftc_shim_msg m = {.type = FS_READ, .key = p->key,
						 .a = p->lens[r % UNACKED], .b = r};
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

__attribute__((constructor)) static void shim_init(void)
{
	resolve();
	timing = getenv("ILFTCP_TIMING") && *getenv("ILFTCP_TIMING") == '1';
	mark("start", NULL, 0);
	lg = lg_connect();
	if (lg < 0) {
		fprintf(stderr, "ilftcp: logger socket unreachable: connections unprotected\n");
		return;
	}
	struct ftc_shim_msg h = {.type = FS_HELLO, .a = (uint32_t)getpid()};
	lg_put(&h, sizeof(h));
}

static void announce_close(struct pfd *p)
{
	if (p->announced || lg < 0)
		return;
	struct ftc_shim_msg m = {.type = FS_CLOSE, .key = p->key};
	/* Every read logged first: output that follows them may be the FIN. */
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
	pthread_mutex_lock(&mu);
	for (int fd = 0; fd < MAX_FD; fd++)
		if (P(fd))
			announce_close(fds[fd]);
	pthread_mutex_unlock(&mu);
}

/* ---- reads ------------------------------------------------------------- */

static void log_read(struct pfd *p, size_t n)
{
	if (lg < 0)
		return;
	while (p->reads_sent - p->reads_acked >= UNACKED) {
		struct ftc_shim_msg m;
		lg_next(&m, true);
	}
	p->lens[p->reads_sent % UNACKED] = (uint32_t)n;
	struct ftc_shim_msg m = {.type = FS_READ, .key = p->key, .a = (uint32_t)n,
				 .b = p->reads_sent++};
	if (!lg_put(&m, sizeof(m)))
		lg_reconnect();
	drain_acks();
}

static void replay_end(struct pfd *p)
{
	mark("replay_done", p, 0);
	r_close(p->rfd);
	p->rfd = -1;
	free(p->rlens);
	p->rlens = NULL;
	free(p->ext);
	p->ext = NULL;
	free(p->rb);
	p->rb = NULL;
	p->rb_len = 0;
}

#define RB_SIZE (1u << 20)

/* n logged bytes from the log file, across as many extents as it takes. */
static void ext_read(struct pfd *p, uint8_t *buf, size_t n)
{
	while (n) {
		if (p->ei >= p->n_ext)
			die("replay extents end before the logged bytes");
		const struct ftc_replay_ext *e = &p->ext[p->ei];
		uint64_t at = e->log_off + p->epos;
		size_t k = e->len - p->epos;
		if (k > n)
			k = n;
		/* Extents are small (a segment each) and mostly in file order:
		 * read the log a megabyte at a time. */
		if (!p->rb)
			p->rb = malloc(RB_SIZE);
		if (!p->rb)
			die("malloc");
		if (at < p->rb_off || at >= p->rb_off + p->rb_len) {
			ssize_t r = pread(p->rfd, p->rb, RB_SIZE, (off_t)at);
			if (r <= 0)
				die("replay: reading the log");
			p->rb_off = at;
			p->rb_len = (uint32_t)r;
		}
		ssize_t got = (ssize_t)(p->rb_off + p->rb_len - at);
		if ((size_t)got > k)
			got = (ssize_t)k;
		memcpy(buf, p->rb + (at - p->rb_off), (size_t)got);
		buf += got;
		n -= (size_t)got;
		p->epos += (uint32_t)got;
		if (p->epos == e->len) {
			p->ei++;
			p->epos = 0;
		}
	}
}

/* Serve up to n bytes from the replay file; -1 when replay is over. */
static ssize_t replay_read(struct pfd *p, void *buf, size_t n)
{
	size_t want;
	bool logged;

	if (p->rfd < 0)
		return -1;
	if (!p->log_left) {
		replay_end(p);
		return -1;
	}
	if (p->next_read < p->n_reads) {
		want = p->rlens[p->next_read] - p->part;
		logged = true;
	} else {
		want = p->log_left;
		logged = false;
	}
	if (want > n)
		want = n;
	if (want > p->log_left)
		want = p->log_left;
	ssize_t got = (ssize_t)want;
	ext_read(p, buf, want);
	p->log_left -= (uint64_t)got;
	if (logged) {
		p->part += (uint32_t)got;
		if (p->part == p->rlens[p->next_read]) {
			p->part = 0;
			p->next_read++;
		}
	} else {
		log_read(p, (size_t)got); /* a new read of logged bytes (G2) */
	}
	if (!p->log_left)
		replay_end(p);
	return got;
}

static ssize_t after_read(struct pfd *p, ssize_t r)
{
	if (r > 0)
		log_read(p, (size_t)r);
	return r;
}

ssize_t read(int fd, void *buf, size_t n)
{
	struct pfd *p = P(fd);
	ssize_t r;

	if (!p)
		return r_read(fd, buf, n);
	pthread_mutex_lock(&mu);
	r = replay_read(p, buf, n);
	pthread_mutex_unlock(&mu);
	if (r >= 0)
		return r;
	r = r_read(fd, buf, n);
	pthread_mutex_lock(&mu);
	after_read(p, r);
	pthread_mutex_unlock(&mu);
	return r;
}

ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *a, socklen_t *al)
{
	struct pfd *p = P(fd);
	ssize_t r;

	if (!p || (flags & MSG_PEEK))
		return r_recvfrom(fd, buf, n, flags, a, al);
	pthread_mutex_lock(&mu);
	r = replay_read(p, buf, n);
	pthread_mutex_unlock(&mu);
	if (r >= 0)
		return r;
	r = r_recvfrom(fd, buf, n, flags, a, al);
	pthread_mutex_lock(&mu);
	after_read(p, r);
	pthread_mutex_unlock(&mu);
	return r;
}

ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	if (!P(fd) || (flags & MSG_PEEK))
		return r_recv(fd, buf, n, flags);
	return recvfrom(fd, buf, n, flags, NULL, NULL);
}

ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	struct pfd *p = P(fd);
	ssize_t r, tot = 0;

	if (!p)
		return r_readv(fd, iov, cnt);
	pthread_mutex_lock(&mu);
	if (p->rfd >= 0) {
		/* One logged read fills the vector in order, as one read would. */
		for (int i = 0; i < cnt; i++) {
			r = replay_read(p, iov[i].iov_base, iov[i].iov_len);
			if (r < 0)
				break;
			tot += r;
			if ((size_t)r < iov[i].iov_len || p->part == 0)
				break;
		}
		pthread_mutex_unlock(&mu);
		if (tot)
			return tot;
	} else {
		pthread_mutex_unlock(&mu);
	}
	r = r_readv(fd, iov, cnt);
	pthread_mutex_lock(&mu);
	after_read(p, r);
	pthread_mutex_unlock(&mu);
	return r;
}

/* ---- writes ------------------------------------------------------------ */

/* Output commit: no write before every earlier read length is logged.
 * Returns how many leading bytes to discard (already at the client). */
static size_t before_write(struct pfd *p, size_t n)
{
	struct ftc_shim_msg m;
	size_t skip;

	while (lg >= 0 && p->reads_acked != p->reads_sent)
		lg_next(&m, true);
	skip = p->out_skip < n ? (size_t)p->out_skip : n;
	p->out_skip -= skip;
	return skip;
}

ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *a,
	       socklen_t al)
{
	struct pfd *p = P(fd);
	size_t skip;
	ssize_t r;

	if (!p)
		return r_sendto(fd, buf, n, flags, a, al);
	pthread_mutex_lock(&mu);
	skip = before_write(p, n);
	pthread_mutex_unlock(&mu);
	if (skip == n)
		return (ssize_t)n;
	r = r_sendto(fd, (const uint8_t *)buf + skip, n - skip, flags, a, al);
	return r < 0 ? (skip ? (ssize_t)skip : r) : r + (ssize_t)skip;
}

ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	if (!P(fd))
		return r_send(fd, buf, n, flags);
	return sendto(fd, buf, n, flags, NULL, 0);
}

ssize_t write(int fd, const void *buf, size_t n)
{
	if (!P(fd))
		return r_write(fd, buf, n);
	return sendto(fd, buf, n, MSG_NOSIGNAL, NULL, 0);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	struct pfd *p = P(fd);
	struct iovec v[64];
	size_t total = 0, skip;
	int k = 0;
	ssize_t r;

	if (!p || cnt > 64)
		return r_writev(fd, iov, cnt);
	for (int i = 0; i < cnt; i++)
		total += iov[i].iov_len;
	pthread_mutex_lock(&mu);
	skip = before_write(p, total);
	pthread_mutex_unlock(&mu);
	if (skip == total)
		return (ssize_t)total;
	/* Drop the discarded prefix, possibly splitting one element (G4). */
	size_t s = skip;
	for (int i = 0; i < cnt; i++) {
		if (s >= iov[i].iov_len) {
			s -= iov[i].iov_len;
			continue;
		}
		v[k].iov_base = (uint8_t *)iov[i].iov_base + s;
		v[k++].iov_len = iov[i].iov_len - s;
		s = 0;
	}
	r = r_writev(fd, v, k);
	return r < 0 ? (skip ? (ssize_t)skip : r) : r + (ssize_t)skip;
}

/* ---- accept, listen, close --------------------------------------------- */

static void on_accept(int fd)
{
	struct sockaddr_in me, peer;
	socklen_t ml = sizeof(me), pl = sizeof(peer);

	if (fd < 0 || fd >= MAX_FD || lg < 0)
		return;
	if (getsockname(fd, (struct sockaddr *)&me, &ml) ||
	    getpeername(fd, (struct sockaddr *)&peer, &pl) || me.sin_family != AF_INET)
		return;
	pthread_mutex_lock(&mu);
	struct ftc_shim_msg m = {.type = FS_ACCEPTED};
	m.key.cip = peer.sin_addr.s_addr;
	m.key.sip = me.sin_addr.s_addr;
	m.key.cport = peer.sin_port;
	m.key.sport = me.sin_port;
	lg_put(&m, sizeof(m));
	struct ftc_shim_msg r = wait_type(FS_CONN);
	if (r.a) {
		struct pfd *p = fds[fd];
		if (!p)
			p = fds[fd] = malloc(sizeof(*p));
		if (!p)
			die("malloc");
		memset(p, 0, sizeof(*p));
		p->rfd = -1;
		p->prot = true;
		p->key = m.key;
		if (r.b) {
			/* The fabricated handshake is done (accept returned); the
			 * logger may still be building the replay file. */
			mark("handshake_accepted", p, 0);
			struct ftc_shim_msg h = wait_type(FS_REPLAY);
			char path[512];
			struct ftc_replay_hdr rh;
			if (h.a == 0)
				die("the logger could not build the replay file");
			if (h.a >= sizeof(path) || !lg_get(path, h.a, true))
				die("replay path");
			path[h.a] = 0;
			int rf = open(path, O_RDONLY | O_CLOEXEC);
			if (rf < 0 || r_read(rf, &rh, sizeof(rh)) != sizeof(rh) ||
			    memcmp(rh.magic, FTC_REPLAY_MAGIC, 8))
				die("replay file");
			p->n_reads = rh.n_reads;
			p->rlens = malloc(sizeof(uint32_t) * (rh.n_reads + 1));
			if (!p->rlens || r_read(rf, p->rlens, sizeof(uint32_t) * rh.n_reads) !=
						 (ssize_t)(sizeof(uint32_t) * rh.n_reads))
				die("replay lengths");
			p->n_ext = rh.n_ext;
			p->ei = p->epos = 0;
			p->ext = malloc(sizeof(*p->ext) * (rh.n_ext + 1));
			size_t eb = sizeof(*p->ext) * rh.n_ext;
			for (size_t o = 0; p->ext && o < eb;) {
				ssize_t g = r_read(rf, (uint8_t *)p->ext + o, eb - o);
				if (g <= 0)
					die("replay extents");
				o += (size_t)g;
			}
			if (!p->ext)
				die("malloc");
			r_close(rf);
			/* The bytes are in the connection's log: same name, ".log". */
			size_t pl = strlen(path);
			if (pl < 7 || strcmp(path + pl - 7, ".replay") || pl + 1 > sizeof(path))
				die("replay path");
			char logp[sizeof(path)];
			memcpy(logp, path, pl - 7);
			strcpy(logp + pl - 7, ".log");
			p->rfd = open(logp, O_RDONLY | O_CLOEXEC);
			if (p->rfd < 0)
				die("the connection's log");
			p->log_left = rh.data_len;
			p->out_skip = rh.out_skip;
			/* Logged reads are already acknowledged. */
			p->reads_sent = p->reads_acked = rh.n_reads;
			unlink(path);
			mark("recovered_accept", p, rh.data_len);
			if (!p->log_left)
				replay_end(p);
		}
	}
	pthread_mutex_unlock(&mu);
}

int accept4(int s, struct sockaddr *a, socklen_t *al, int flags)
{
	int fd = r_accept4(s, a, al, flags);
	on_accept(fd);
	return fd;
}

int accept(int s, struct sockaddr *a, socklen_t *al)
{
	int fd = r_accept(s, a, al);
	on_accept(fd);
	return fd;
}

int listen(int s, int backlog)
{
	struct sockaddr_in me;
	socklen_t ml = sizeof(me);
	int rc = r_listen(s, backlog);

	if (rc || lg < 0 || getsockname(s, (struct sockaddr *)&me, &ml) || me.sin_family != AF_INET)
		return rc;
	pthread_mutex_lock(&mu);
	if (n_listen < 16)
		listen_ports[n_listen++] = ntohs(me.sin_port);
	struct ftc_shim_msg m = {.type = FS_LISTEN, .a = ntohs(me.sin_port)};
	mark("listen", NULL, 0); /* the application's own start-up ends here */
	lg_put(&m, sizeof(m));
	pthread_mutex_unlock(&mu);
	return rc;
}

int shutdown(int fd, int how)
{
	struct pfd *p = P(fd);

	if (p && how != SHUT_RD) {
		pthread_mutex_lock(&mu);
		announce_close(p);
		pthread_mutex_unlock(&mu);
	}
	return r_shutdown(fd, how);
}

int close(int fd)
{
	struct pfd *p = P(fd);

	if (p) {
		pthread_mutex_lock(&mu);
		announce_close(p);
		if (p->rfd >= 0)
			replay_end(p);
		p->prot = false;
		pthread_mutex_unlock(&mu);
	}
	return r_close(fd);
}
