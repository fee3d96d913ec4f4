/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Data-plane <-> control channel: two shared-memory rings (the up ring and
 * the down ring of 64-byte messages) in one file, each side's incarnation,
 * and the hand-over of the control process's eventfd. The rings, their
 * memory ordering and the sleep/wake handshake are the shared-memory ring
 * library's (include/interlink/shm_ring.h); this file adds the channel's
 * rules: one process per side, a restarted side's incoming ring flushed,
 * the eventfd as doorbell and its rate limit. docs/control.md.
 */
#include <errno.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <interlink/chan.h>
#include <interlink/err.h>
#include <interlink/shm_file.h>

enum { RING_UP = 0, RING_DOWN = 1 };

/* The channel's own area of the file: one per side, written only by that
 * side. */
struct chan_side {
	alignas(IL_SHM_GUARD) _Atomic uint64_t incarnation;
	_Atomic int32_t pid;
	_Atomic uint64_t attach_ns;
};

struct il_chan {
	struct il_shm_file f;
	struct chan_side *sides; /* [2], in the file */
	enum il_chan_side side;
	struct il_shm_prod tx;
	struct il_shm_cons rx;
	int wake_fd;
	uint64_t incarnation;
	uint64_t peer_seen;
	uint16_t shard, n_shards; /* said in HELLO */
	/* Wake-up rate limit (il_chan_set_wake_interval): a sleeping consumer
	 * is woken at most once per wake_ival_ns; a message sent sooner after
	 * the last wake-up waits for the interval's end (il_chan_wake_flush),
	 * or until WAKE_BATCH messages wait. */
	uint64_t wake_ival_ns;
	uint64_t wake_last_ns;
	uint64_t wake_due_ns;
	bool wake_pending;
};

#define WAKE_BATCH 64u

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool slots_ok(uint32_t n)
{
	return n >= IL_CHAN_MIN_SLOTS && n <= IL_CHAN_MAX_SLOTS && (n & (n - 1)) == 0;
}

static void chan_spec(struct il_shm_spec *s, uint32_t up, uint32_t down)
{
	uint64_t magic = IL_CHAN_MAGIC;

	memset(s, 0, sizeof(*s));
	s->what = "channel";
	memcpy(s->magic, &magic, sizeof(s->magic));
	s->version = IL_CHAN_LAYOUT_VERSION;
	s->n_rings = 2;
	s->ring[RING_UP] = (struct il_shm_geom){ up * IL_CHAN_MSG_SIZE, IL_CHAN_MSG_SIZE };
	s->ring[RING_DOWN] = (struct il_shm_geom){ down * IL_CHAN_MSG_SIZE, IL_CHAN_MSG_SIZE };
	s->user_bytes = 2 * sizeof(struct chan_side);
}

static uint32_t slots_of(const struct il_chan *ch, int ring)
{
	return ch->f.geom[ring].bytes / IL_CHAN_MSG_SIZE;
}

static bool pid_alive(int32_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* Claim this side: a CAS on the pid slot, so two processes racing for the
 * same side cannot both get it (SPSC needs exactly one of each). A slot
 * left by a dead process (crash) is taken over. */
static int side_claim(struct il_chan *ch, const char *path, char *err, size_t errlen)
{
	struct chan_side *s = &ch->sides[ch->side];
	int32_t self = (int32_t)getpid();
	int32_t cur = atomic_load(&s->pid);

	for (;;) {
		if (cur == self || pid_alive(cur)) {
			il_err(err, errlen, "%s: the %s side is already attached by pid %d", path,
			       ch->side == IL_CHAN_DATAPLANE ? "data-plane" : "control",
			       (int)cur);
			return -1;
		}
		if (atomic_compare_exchange_strong(&s->pid, &cur, self))
			return 0;
	}
}

int il_chan_open(const char *path, enum il_chan_side side, const struct il_chan_params *params,
		 struct il_chan **out, char *err, size_t errlen)
{
	struct il_shm_spec spec;
	struct il_chan *ch;
	struct chan_side *me;
	int tx, rx;

	*out = NULL;
	if (side != IL_CHAN_DATAPLANE && side != IL_CHAN_CONTROL) {
		il_err(err, errlen, "bad channel side %d", (int)side);
		return -1;
	}
	if (params != NULL && (!slots_ok(params->up_slots) || !slots_ok(params->down_slots))) {
		il_err(err, errlen,
		       "ring sizes %u/%u: each must be a power of two from %u to %u",
		       params->up_slots, params->down_slots, IL_CHAN_MIN_SLOTS, IL_CHAN_MAX_SLOTS);
		return -1;
	}
	ch = calloc(1, sizeof(*ch));
	if (ch == NULL) {
		il_err(err, errlen, "out of memory");
		return -1;
	}
	ch->side = side;
	ch->wake_fd = -1;
	chan_spec(&spec, params ? params->up_slots : 0, params ? params->down_slots : 0);
	if (il_shm_file_open(path, &spec, params != NULL, &ch->f, err, errlen) != 0)
		goto fail;
	if (!slots_ok(slots_of(ch, RING_UP)) || !slots_ok(slots_of(ch, RING_DOWN))) {
		il_err(err, errlen, "%s: corrupt header (ring sizes %u/%u)", path,
		       slots_of(ch, RING_UP), slots_of(ch, RING_DOWN));
		goto fail;
	}
	if (params != NULL && (slots_of(ch, RING_UP) != params->up_slots ||
			       slots_of(ch, RING_DOWN) != params->down_slots)) {
		il_err(err, errlen,
		       "%s: exists with %u up / %u down slots, %u / %u asked; remove it or ask for its sizes",
		       path, slots_of(ch, RING_UP), slots_of(ch, RING_DOWN), params->up_slots,
		       params->down_slots);
		goto fail;
	}
	ch->sides = ch->f.user;
	if (side_claim(ch, path, err, errlen) != 0)
		goto fail;

	tx = side == IL_CHAN_DATAPLANE ? RING_UP : RING_DOWN;
	rx = !tx;
	il_shm_prod_attach(&ch->tx, ch->f.ring[tx], ch->f.geom[tx].bytes, IL_CHAN_MSG_SIZE);
	/* What waits on our incoming ring was addressed to our previous
	 * incarnation; the peer re-sends what matters once it sees the new one. */
	il_shm_cons_attach(&ch->rx, ch->f.ring[rx], ch->f.geom[rx].bytes, IL_CHAN_MSG_SIZE, true);

	me = &ch->sides[side];
	atomic_store_explicit(&me->attach_ns, now_ns(CLOCK_REALTIME), memory_order_relaxed);
	ch->incarnation = atomic_fetch_add(&me->incarnation, 1) + 1;
	ch->peer_seen = il_chan_peer_incarnation(ch);
	*out = ch;
	return 0;
fail:
	il_shm_file_close(&ch->f);
	free(ch);
	return -1;
}

void il_chan_close(struct il_chan *ch)
{
	int32_t self = (int32_t)getpid();

	if (ch == NULL)
		return;
	atomic_compare_exchange_strong(&ch->sides[ch->side].pid, &self, 0);
	if (ch->wake_fd >= 0)
		close(ch->wake_fd);
	il_shm_file_close(&ch->f);
	free(ch);
}

int il_chan_unlink(const char *path)
{
	return unlink(path);
}

/* The consumer sleeps (or is about to): wake it. True if it was woken. */
static bool wake_if_sleeping(struct il_chan *ch)
{
	uint64_t one = 1;

	if (!il_shm_wake_due(&ch->tx))
		return false;
	/* eventfd writes do not block short of 2^64-2 pending. */
	(void)!write(ch->wake_fd, &one, sizeof(one));
	return true;
}

unsigned il_chan_send_burst(struct il_chan *ch, const struct il_cmsg *msgs, unsigned n)
{
	unsigned k = il_shm_send(&ch->tx, msgs, n);

	if (k > 0 && ch->wake_fd >= 0) {
		if (ch->wake_ival_ns == 0) {
			wake_if_sleeping(ch);
		} else if (!ch->wake_pending) {
			uint64_t now = now_ns(CLOCK_MONOTONIC);

			if (now - ch->wake_last_ns >= ch->wake_ival_ns) {
				if (wake_if_sleeping(ch))
					ch->wake_last_ns = now;
			} else {
				ch->wake_pending = true;
				ch->wake_due_ns = ch->wake_last_ns + ch->wake_ival_ns;
			}
		} else if ((ch->tx.size >> ch->tx.shift) - il_shm_free(&ch->tx) >= WAKE_BATCH) {
			ch->wake_pending = false;
			if (wake_if_sleeping(ch))
				ch->wake_last_ns = now_ns(CLOCK_MONOTONIC);
		}
	}
	return k;
}

void il_chan_set_wake_interval(struct il_chan *ch, uint64_t ns)
{
	ch->wake_ival_ns = ns;
	if (ns == 0 && ch->wake_pending) {
		ch->wake_pending = false;
		if (ch->wake_fd >= 0)
			wake_if_sleeping(ch);
	}
}

bool il_chan_wake_flush(struct il_chan *ch)
{
	if (!ch->wake_pending)
		return false;
	uint64_t now = now_ns(CLOCK_MONOTONIC);
	if (now < ch->wake_due_ns)
		return false;
	ch->wake_pending = false;
	if (ch->wake_fd >= 0 && wake_if_sleeping(ch))
		ch->wake_last_ns = now;
	return true;
}

unsigned il_chan_recv_burst(struct il_chan *ch, struct il_cmsg *msgs, unsigned n)
{
	return il_shm_recv(&ch->rx, msgs, n);
}

unsigned il_chan_rx_pending(const struct il_chan *ch)
{
	return il_shm_pending(&ch->rx);
}

unsigned il_chan_tx_free(const struct il_chan *ch)
{
	return il_shm_free(&ch->tx);
}

bool il_chan_sleep_prepare(struct il_chan *ch)
{
	return il_shm_sleep_prepare(&ch->rx);
}

void il_chan_sleep_end(struct il_chan *ch)
{
	il_shm_sleep_end(&ch->rx);
}

void il_chan_set_wake_fd(struct il_chan *ch, int fd)
{
	if (ch->wake_fd >= 0 && ch->wake_fd != fd)
		close(ch->wake_fd);
	ch->wake_fd = fd;
}

int il_chan_wake_fd(const struct il_chan *ch)
{
	return ch->wake_fd;
}

enum il_chan_side il_chan_side(const struct il_chan *ch)
{
	return ch->side;
}

uint64_t il_chan_incarnation(const struct il_chan *ch)
{
	return ch->incarnation;
}

uint64_t il_chan_peer_incarnation(const struct il_chan *ch)
{
	return atomic_load_explicit(&ch->sides[!ch->side].incarnation, memory_order_acquire);
}

bool il_chan_peer_alive(const struct il_chan *ch)
{
	return pid_alive(atomic_load_explicit(&ch->sides[!ch->side].pid, memory_order_relaxed));
}

bool il_chan_peer_restarted(struct il_chan *ch, uint64_t *inc)
{
	uint64_t cur = atomic_load_explicit(&ch->sides[!ch->side].incarnation,
					    memory_order_relaxed);

	if (cur == ch->peer_seen)
		return false;
	atomic_thread_fence(memory_order_acquire);
	ch->peer_seen = cur;
	if (inc != NULL)
		*inc = cur;
	return true;
}

unsigned il_chan_send_hello(struct il_chan *ch, uint32_t epoch)
{
	struct il_cmsg m;

	memset(&m, 0, sizeof(m));
	m.type = IL_CM_HELLO;
	m.len = sizeof(m.u.hello);
	m.u.hello.side = ch->side;
	m.u.hello.epoch = epoch;
	m.u.hello.incarnation = ch->incarnation;
	m.u.hello.peer_incarnation = ch->peer_seen;
	m.u.hello.shard = ch->shard;
	m.u.hello.n_shards = ch->n_shards;
	return il_chan_send_burst(ch, &m, 1);
}

void il_chan_set_shard(struct il_chan *ch, uint16_t shard, uint16_t n)
{
	ch->shard = shard;
	ch->n_shards = n;
}

int il_chan_shard_path(const char *chan_path, unsigned shard, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s.%u", chan_path, shard);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

void il_chan_stats(const struct il_chan *ch, bool up, struct il_chan_ring_stats *st)
{
	int ring = up ? RING_UP : RING_DOWN;
	struct il_shm_ring_stats s;

	il_shm_ring_stats(ch->f.ring[ring], &s);
	st->enqueued = s.head / IL_CHAN_MSG_SIZE;
	st->dequeued = s.tail / IL_CHAN_MSG_SIZE;
	st->drops = s.drops;
	st->wakeups = s.wakeups;
	st->sleeps = s.sleeps;
	st->slots = slots_of(ch, ring);
}

static int sock_addr(const char *path, struct sockaddr_un *sa, char *err, size_t errlen)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path)) {
		il_err(err, errlen, "%s: socket path longer than %zu bytes", path,
		       sizeof(sa->sun_path) - 1);
		return -1;
	}
	strcpy(sa->sun_path, path);
	return 0;
}

int il_chan_wake_listen(const char *sock_path, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd;

	if (sock_addr(sock_path, &sa, err, errlen) != 0)
		return -1;
	/* A socket file left by a crashed control process would make bind
	 * fail; anything that is not a socket is not ours to delete. */
	if (lstat(sock_path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			il_err(err, errlen, "%s: exists and is not a socket", sock_path);
			return -1;
		}
		unlink(sock_path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		il_err(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 16) != 0) {
		il_err(err, errlen, "%s: cannot listen: %s", sock_path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

int il_chan_wake_serve(int conn_fd, int event_fd, uint64_t incarnation)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = &incarnation, .iov_len = sizeof(incarnation) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;

	memset(&u, 0, sizeof(u));
	mh.msg_control = u.buf;
	mh.msg_controllen = sizeof(u.buf);
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &event_fd, sizeof(int));
	return sendmsg(conn_fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(incarnation)
		       ? 0
		       : -1;
}

int il_chan_wake_fetch(const char *sock_path, uint64_t *inc, char *err, size_t errlen)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct timeval tv = { .tv_sec = 1 };
	struct sockaddr_un sa;
	uint64_t got = 0;
	struct iovec iov = { .iov_base = &got, .iov_len = sizeof(got) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;
	int fd, efd = -1;
	ssize_t n;

	if (sock_addr(sock_path, &sa, err, errlen) != 0)
		return -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		il_err(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		il_err(err, errlen, "%s: cannot connect: %s", sock_path, strerror(errno));
		close(fd);
		return -1;
	}
	memset(&u, 0, sizeof(u));
	mh.msg_control = u.buf;
	mh.msg_controllen = sizeof(u.buf);
	n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	close(fd);
	c = CMSG_FIRSTHDR(&mh);
	if (n == (ssize_t)sizeof(got) && c != NULL && c->cmsg_level == SOL_SOCKET &&
	    c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&efd, CMSG_DATA(c), sizeof(int));
	if (efd < 0) {
		il_err(err, errlen, "%s: no eventfd received (%s)", sock_path,
		       n < 0 ? strerror(errno) : "short or malformed reply");
		return -1;
	}
	if (inc != NULL)
		*inc = got;
	return efd;
}

int il_chan_default_sock_path(const char *chan_path, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s.sock", chan_path);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

const char *il_cm_type_name(uint16_t type)
{
	static const char *const names[IL_CM_TYPE_COUNT] = {
		[IL_CM_NONE] = "none",	       [IL_CM_HELLO] = "hello",
		[IL_CM_ACK] = "ack",	       [IL_CM_HEARTBEAT] = "heartbeat",
		[IL_CM_JOIN] = "join",	       [IL_CM_LEAVE] = "leave",
		[IL_CM_WATERMARK] = "watermark", [IL_CM_VIEW] = "view",
		[IL_CM_VIEW_MEMBERS] = "view_members", [IL_CM_CREDIT] = "credit",
		[IL_CM_RESYNC] = "resync", [IL_CM_ALIVE] = "alive",
		[IL_CM_ROLE] = "role", [IL_CM_AUTHORITY] = "authority",
		[IL_CM_QUIESCE] = "quiesce", [IL_CM_EPOCH_REPORT] = "epoch_report",
		[IL_CM_SHADOW] = "shadow", [IL_CM_SUPERSEDED] = "superseded",
		[IL_CM_QUIESCED] = "quiesced",
	};

	if (type < IL_CM_TYPE_COUNT)
		return names[type];
	return type >= IL_CM_PRIVATE ? "private" : "unknown";
}
