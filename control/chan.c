/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Data-plane <-> control channel: SPSC rings in a shared file.
 * Layout, memory ordering and the wake-up protocol: docs/control.md.
 *
 * No liburing and no DPDK here: the data plane links this file too.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <interlink/chan.h>

/* Producer and consumer indices live two cache lines apart: x86 fetches
 * lines in adjacent pairs, so 64 bytes of separation still ping-pongs. */
#define CHAN_GUARD 128

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "shared-memory atomics must be lock-free");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "shared-memory atomics must be lock-free");

/* The fixed part at offset 0 of the file. Written once by the creator
 * before the file is linked into place; read-only afterwards. */
struct shm_layout {
	uint64_t magic;
	uint32_t version;
	uint32_t msg_size;
	uint32_t up_slots;
	uint32_t down_slots;
	uint64_t up_off;     /* struct shm_ring of the up ring */
	uint64_t down_off;
	uint64_t total_size; /* file size */
	uint64_t created_ns; /* CLOCK_REALTIME, for humans */
};

/* One per side, written only by that side. */
struct shm_side {
	alignas(CHAN_GUARD) _Atomic uint64_t incarnation;
	_Atomic int32_t pid;
	_Atomic uint64_t attach_ns;
};

struct shm_hdr {
	alignas(CHAN_GUARD) struct shm_layout l;
	struct shm_side side[2];
};

struct shm_ring {
	struct {
		alignas(CHAN_GUARD) _Atomic uint64_t head; /* next slot to fill */
		_Atomic uint64_t drops;
		_Atomic uint64_t wakeups;
	} prod;
	struct {
		alignas(CHAN_GUARD) _Atomic uint64_t tail; /* next slot to read */
		_Atomic uint32_t sleeping;
		_Atomic uint64_t sleeps;
	} cons;
	alignas(CHAN_GUARD) struct il_cmsg slots[];
};

_Static_assert(sizeof(struct shm_hdr) == 3 * CHAN_GUARD, "header layout");
_Static_assert(sizeof(struct shm_ring) == 2 * CHAN_GUARD, "ring header layout");

/* This process's view of one ring. */
struct ring_view {
	struct shm_ring *r;
	uint64_t idx;    /* own index: head (producer) or tail (consumer) */
	uint64_t cached; /* last seen index of the other end */
	uint32_t size;
	uint32_t mask;
};

struct il_chan {
	struct shm_hdr *hdr;
	size_t map_len;
	enum il_chan_side side;
	struct ring_view tx;
	struct ring_view rx;
	int wake_fd;
	uint64_t incarnation;
	uint64_t peer_seen;
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

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

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

static uint64_t ring_bytes(uint32_t slots)
{
	return sizeof(struct shm_ring) + (uint64_t)slots * IL_CHAN_MSG_SIZE;
}

static void layout_compute(struct shm_layout *l, uint32_t up, uint32_t down)
{
	memset(l, 0, sizeof(*l));
	l->magic = IL_CHAN_MAGIC;
	l->version = IL_CHAN_LAYOUT_VERSION;
	l->msg_size = IL_CHAN_MSG_SIZE;
	l->up_slots = up;
	l->down_slots = down;
	l->up_off = sizeof(struct shm_hdr);
	l->down_off = l->up_off + ring_bytes(up);
	l->total_size = l->down_off + ring_bytes(down);
}

/* Everything a peer could have got wrong, checked before any pointer
 * derived from the file is used. */
static int layout_check(const struct shm_layout *l, uint64_t file_size, const char *path,
			char *err, size_t errlen)
{
	struct shm_layout want;

	if (l->magic != IL_CHAN_MAGIC) {
		seterr(err, errlen, "%s: not an Interlink channel (bad magic)", path);
		return -1;
	}
	if (l->version != IL_CHAN_LAYOUT_VERSION || l->msg_size != IL_CHAN_MSG_SIZE) {
		seterr(err, errlen,
		       "%s: channel layout version %u, message size %u; this build speaks version %u, size %u",
		       path, l->version, l->msg_size, IL_CHAN_LAYOUT_VERSION, IL_CHAN_MSG_SIZE);
		return -1;
	}
	if (!slots_ok(l->up_slots) || !slots_ok(l->down_slots)) {
		seterr(err, errlen, "%s: corrupt header (ring sizes %u/%u)", path, l->up_slots,
		       l->down_slots);
		return -1;
	}
	layout_compute(&want, l->up_slots, l->down_slots);
	if (l->up_off != want.up_off || l->down_off != want.down_off ||
	    l->total_size != want.total_size || file_size != want.total_size) {
		seterr(err, errlen, "%s: corrupt header (offsets or size disagree with ring sizes)",
		       path);
		return -1;
	}
	return 0;
}

/* Build the file under a private name and link() it into place: link
 * fails on an existing name, so exactly one creator wins and nobody maps a
 * half-written header. Returns 0 created, 1 someone else was first, -1. */
static int chan_create(const char *path, const struct il_chan_params *p, char *err,
		       size_t errlen)
{
	static _Atomic unsigned counter;
	struct shm_layout l;
	char tmp[PATH_MAX];
	void *map;
	int fd, rc;

	layout_compute(&l, p->up_slots, p->down_slots);
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%u", path, (int)getpid(),
		     atomic_fetch_add(&counter, 1)) >= (int)sizeof(tmp)) {
		seterr(err, errlen, "%s: path too long", path);
		return -1;
	}
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		seterr(err, errlen, "%s: cannot create the channel (as %s): %s", path, tmp,
		       strerror(errno));
		return -1;
	}
	if (ftruncate(fd, (off_t)l.total_size) != 0) {
		seterr(err, errlen, "%s: cannot size to %llu bytes: %s", tmp,
		       (unsigned long long)l.total_size, strerror(errno));
		goto fail;
	}
	map = mmap(NULL, l.total_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		seterr(err, errlen, "%s: mmap: %s", tmp, strerror(errno));
		goto fail;
	}
	/* ftruncate zero-filled everything: indices, counters, flags. */
	l.created_ns = now_ns(CLOCK_REALTIME);
	memcpy(map, &l, sizeof(l));
	munmap(map, l.total_size);
	close(fd);
	rc = link(tmp, path);
	if (rc != 0 && errno != EEXIST) {
		seterr(err, errlen, "%s: cannot link into place: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	unlink(tmp);
	return rc == 0 ? 0 : 1;
fail:
	close(fd);
	unlink(tmp);
	return -1;
}

static int chan_map(const char *path, struct il_chan *ch, char *err, size_t errlen)
{
	struct stat st;
	void *map;
	int fd;

	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		seterr(err, errlen, "%s: cannot open channel: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(struct shm_hdr)) {
		seterr(err, errlen, "%s: not an Interlink channel (too short)", path);
		close(fd);
		return -1;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		seterr(err, errlen, "%s: mmap: %s", path, strerror(errno));
		return -1;
	}
	ch->hdr = map;
	ch->map_len = (size_t)st.st_size;
	if (layout_check(&ch->hdr->l, (uint64_t)st.st_size, path, err, errlen) != 0) {
		munmap(map, ch->map_len);
		ch->hdr = NULL;
		return -1;
	}
	return 0;
}

static struct shm_ring *ring_at(struct il_chan *ch, bool up)
{
	return (struct shm_ring *)((char *)ch->hdr + (up ? ch->hdr->l.up_off : ch->hdr->l.down_off));
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
	struct shm_side *s = &ch->hdr->side[ch->side];
	int32_t self = (int32_t)getpid();
	int32_t cur = atomic_load(&s->pid);

	for (;;) {
		if (cur == self || pid_alive(cur)) {
			seterr(err, errlen, "%s: the %s side is already attached by pid %d", path,
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
	struct il_chan *ch;
	struct shm_side *me;
	struct shm_ring *tx, *rx;
	bool up_tx;

	*out = NULL;
	if (side != IL_CHAN_DATAPLANE && side != IL_CHAN_CONTROL) {
		seterr(err, errlen, "bad channel side %d", (int)side);
		return -1;
	}
	if (params != NULL && (!slots_ok(params->up_slots) || !slots_ok(params->down_slots))) {
		seterr(err, errlen,
		       "ring sizes %u/%u: each must be a power of two from %u to %u",
		       params->up_slots, params->down_slots, IL_CHAN_MIN_SLOTS, IL_CHAN_MAX_SLOTS);
		return -1;
	}
	ch = calloc(1, sizeof(*ch));
	if (ch == NULL) {
		seterr(err, errlen, "out of memory");
		return -1;
	}
	ch->side = side;
	ch->wake_fd = -1;
	if (params != NULL && access(path, F_OK) != 0) {
		if (chan_create(path, params, err, errlen) < 0)
			goto fail;
	}
	if (chan_map(path, ch, err, errlen) != 0)
		goto fail;
	if (params != NULL && (ch->hdr->l.up_slots != params->up_slots ||
			       ch->hdr->l.down_slots != params->down_slots)) {
		seterr(err, errlen,
		       "%s: exists with %u up / %u down slots, %u / %u asked; remove it or ask for its sizes",
		       path, ch->hdr->l.up_slots, ch->hdr->l.down_slots, params->up_slots,
		       params->down_slots);
		goto fail;
	}
	if (side_claim(ch, path, err, errlen) != 0)
		goto fail;

	up_tx = side == IL_CHAN_DATAPLANE;
	tx = ring_at(ch, up_tx);
	rx = ring_at(ch, !up_tx);
	ch->tx.r = tx;
	ch->tx.size = up_tx ? ch->hdr->l.up_slots : ch->hdr->l.down_slots;
	ch->tx.mask = ch->tx.size - 1;
	ch->tx.idx = atomic_load_explicit(&tx->prod.head, memory_order_relaxed);
	ch->tx.cached = atomic_load_explicit(&tx->cons.tail, memory_order_acquire);
	ch->rx.r = rx;
	ch->rx.size = up_tx ? ch->hdr->l.down_slots : ch->hdr->l.up_slots;
	ch->rx.mask = ch->rx.size - 1;

	/* What waits on our incoming ring was addressed to our previous
	 * incarnation; the peer re-sends what matters once it sees the new one. */
	ch->rx.cached = atomic_load_explicit(&rx->prod.head, memory_order_acquire);
	ch->rx.idx = ch->rx.cached;
	atomic_store_explicit(&rx->cons.tail, ch->rx.idx, memory_order_release);
	atomic_store_explicit(&rx->cons.sleeping, 0, memory_order_relaxed);

	me = &ch->hdr->side[side];
	atomic_store_explicit(&me->attach_ns, now_ns(CLOCK_REALTIME), memory_order_relaxed);
	ch->incarnation = atomic_fetch_add(&me->incarnation, 1) + 1;
	ch->peer_seen = il_chan_peer_incarnation(ch);
	*out = ch;
	return 0;
fail:
	if (ch->hdr != NULL)
		munmap(ch->hdr, ch->map_len);
	free(ch);
	return -1;
}

void il_chan_close(struct il_chan *ch)
{
	int32_t self = (int32_t)getpid();

	if (ch == NULL)
		return;
	atomic_compare_exchange_strong(&ch->hdr->side[ch->side].pid, &self, 0);
	if (ch->wake_fd >= 0)
		close(ch->wake_fd);
	munmap(ch->hdr, ch->map_len);
	free(ch);
}

int il_chan_unlink(const char *path)
{
	return unlink(path);
}

/* The consumer sleeps (or is about to): wake it. True if it was woken. */
static bool wake_if_sleeping(struct il_chan *ch)
{
	struct shm_ring *r = ch->tx.r;

	/* Store(head) then load(sleeping), against the consumer's
	 * store(sleeping) then load(head): only a full fence on both
	 * sides stops both loads from missing the other's store (the
	 * lost wake-up). One fence per burst, not per message. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&r->cons.sleeping, memory_order_relaxed) &&
	    atomic_exchange_explicit(&r->cons.sleeping, 0, memory_order_acq_rel)) {
		uint64_t one = 1;

		/* eventfd writes do not block short of 2^64-2 pending. */
		if (write(ch->wake_fd, &one, sizeof(one)) == (ssize_t)sizeof(one))
			atomic_store_explicit(
				&r->prod.wakeups,
				atomic_load_explicit(&r->prod.wakeups, memory_order_relaxed) + 1,
				memory_order_relaxed);
		return true;
	}
	return false;
}

unsigned il_chan_send_burst(struct il_chan *ch, const struct il_cmsg *msgs, unsigned n)
{
	struct ring_view *v = &ch->tx;
	struct shm_ring *r = v->r;
	uint64_t head = v->idx;
	uint64_t room = v->size - (head - v->cached);
	unsigned k, first, part;

	if (room < n) {
		/* Acquire: the consumer finished reading the slots it freed. */
		v->cached = atomic_load_explicit(&r->cons.tail, memory_order_acquire);
		room = v->size - (head - v->cached);
	}
	k = n < room ? n : (unsigned)room;
	if (k > 0) {
		first = (unsigned)(head & v->mask);
		part = v->size - first < k ? v->size - first : k;
		memcpy(&r->slots[first], msgs, (size_t)part * sizeof(*msgs));
		memcpy(&r->slots[0], msgs + part, (size_t)(k - part) * sizeof(*msgs));
		v->idx = head + k;
		/* Release: the slots are written before the consumer can see them. */
		atomic_store_explicit(&r->prod.head, v->idx, memory_order_release);
	}
	if (k < n) {
		/* Single writer: no read-modify-write needed. */
		atomic_store_explicit(&r->prod.drops,
				      atomic_load_explicit(&r->prod.drops, memory_order_relaxed) +
					      (n - k),
				      memory_order_relaxed);
	}
	if (k > 0 && ch->wake_fd >= 0) {
		if (ch->wake_ival_ns == 0) {
			wake_if_sleeping(ch);
		} else if (!ch->wake_pending) {
			uint64_t now = mono_ns();

			if (now - ch->wake_last_ns >= ch->wake_ival_ns) {
				if (wake_if_sleeping(ch))
					ch->wake_last_ns = now;
			} else {
				ch->wake_pending = true;
				ch->wake_due_ns = ch->wake_last_ns + ch->wake_ival_ns;
			}
		} else if (v->idx - atomic_load_explicit(&r->cons.tail, memory_order_relaxed) >=
			   WAKE_BATCH) {
			ch->wake_pending = false;
			if (wake_if_sleeping(ch))
				ch->wake_last_ns = mono_ns();
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
	uint64_t now = mono_ns();
	if (now < ch->wake_due_ns)
		return false;
	ch->wake_pending = false;
	if (ch->wake_fd >= 0 && wake_if_sleeping(ch))
		ch->wake_last_ns = now;
	return true;
}

unsigned il_chan_recv_burst(struct il_chan *ch, struct il_cmsg *msgs, unsigned n)
{
	struct ring_view *v = &ch->rx;
	struct shm_ring *r = v->r;
	uint64_t tail = v->idx;
	uint64_t avail = v->cached - tail;
	unsigned k, first, part;

	if (avail < n) {
		/* Acquire: pairs with the producer's release of head. */
		v->cached = atomic_load_explicit(&r->prod.head, memory_order_acquire);
		avail = v->cached - tail;
		if (avail > v->size) {
			/* Only a corrupt or foreign head gets here: never read
			 * outside the ring; resynchronise at the producer. */
			v->idx = v->cached;
			atomic_store_explicit(&r->cons.tail, v->idx, memory_order_release);
			return 0;
		}
	}
	k = n < avail ? n : (unsigned)avail;
	if (k == 0)
		return 0;
	first = (unsigned)(tail & v->mask);
	part = v->size - first < k ? v->size - first : k;
	memcpy(msgs, &r->slots[first], (size_t)part * sizeof(*msgs));
	memcpy(msgs + part, &r->slots[0], (size_t)(k - part) * sizeof(*msgs));
	v->idx = tail + k;
	/* Release: our reads of the slots complete before the producer may
	 * overwrite them. */
	atomic_store_explicit(&r->cons.tail, v->idx, memory_order_release);
	return k;
}

unsigned il_chan_rx_pending(const struct il_chan *ch)
{
	uint64_t head = atomic_load_explicit(&ch->rx.r->prod.head, memory_order_acquire);
	uint64_t n = head - ch->rx.idx;

	return n > ch->rx.size ? 0 : (unsigned)n;
}

unsigned il_chan_tx_free(const struct il_chan *ch)
{
	uint64_t tail = atomic_load_explicit(&ch->tx.r->cons.tail, memory_order_acquire);

	return ch->tx.size - (unsigned)(ch->tx.idx - tail);
}

bool il_chan_sleep_prepare(struct il_chan *ch)
{
	struct shm_ring *r = ch->rx.r;
	uint64_t head;

	/* Counted per announcement, withdrawn or not: the producer may have
	 * seen it either way, so wakeups <= sleeps always holds. */
	atomic_store_explicit(&r->cons.sleeps,
			      atomic_load_explicit(&r->cons.sleeps, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	atomic_store_explicit(&r->cons.sleeping, 1, memory_order_relaxed);
	/* The other half of the fence pair in il_chan_send_burst(). */
	atomic_thread_fence(memory_order_seq_cst);
	head = atomic_load_explicit(&r->prod.head, memory_order_relaxed);
	if (head != ch->rx.idx) {
		atomic_store_explicit(&r->cons.sleeping, 0, memory_order_relaxed);
		return false;
	}
	return true;
}

void il_chan_sleep_end(struct il_chan *ch)
{
	atomic_store_explicit(&ch->rx.r->cons.sleeping, 0, memory_order_relaxed);
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
	return atomic_load_explicit(&ch->hdr->side[!ch->side].incarnation, memory_order_acquire);
}

bool il_chan_peer_alive(const struct il_chan *ch)
{
	return pid_alive(atomic_load_explicit(&ch->hdr->side[!ch->side].pid, memory_order_relaxed));
}

bool il_chan_peer_restarted(struct il_chan *ch, uint64_t *inc)
{
	uint64_t cur = atomic_load_explicit(&ch->hdr->side[!ch->side].incarnation,
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
	return il_chan_send_burst(ch, &m, 1);
}

void il_chan_stats(const struct il_chan *ch, bool up, struct il_chan_ring_stats *st)
{
	const struct shm_ring *r = ring_at((struct il_chan *)ch, up);

	st->enqueued = atomic_load_explicit(&r->prod.head, memory_order_relaxed);
	st->dequeued = atomic_load_explicit(&r->cons.tail, memory_order_relaxed);
	st->drops = atomic_load_explicit(&r->prod.drops, memory_order_relaxed);
	st->wakeups = atomic_load_explicit(&r->prod.wakeups, memory_order_relaxed);
	st->sleeps = atomic_load_explicit(&r->cons.sleeps, memory_order_relaxed);
	st->slots = up ? ch->hdr->l.up_slots : ch->hdr->l.down_slots;
}

static int sock_addr(const char *path, struct sockaddr_un *sa, char *err, size_t errlen)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path)) {
		seterr(err, errlen, "%s: socket path longer than %zu bytes", path,
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
			seterr(err, errlen, "%s: exists and is not a socket", sock_path);
			return -1;
		}
		unlink(sock_path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		seterr(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 16) != 0) {
		seterr(err, errlen, "%s: cannot listen: %s", sock_path, strerror(errno));
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
		seterr(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		seterr(err, errlen, "%s: cannot connect: %s", sock_path, strerror(errno));
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
		seterr(err, errlen, "%s: no eventfd received (%s)", sock_path,
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
	};

	if (type < IL_CM_TYPE_COUNT)
		return names[type];
	return type >= IL_CM_PRIVATE ? "private" : "unknown";
}
