/* SPDX-License-Identifier: BSD-3-Clause
 * libinterlink: a group member on an ordinary Linux host (docs/libinterlink.md).
 *
 * Two kernel UDP sockets on two interfaces, as the thesis' dual-homed
 * hosts: everything we send (DATA, ACK, NAK, JOIN, LEAVE, HEARTBEAT) goes
 * to the group's multicast address out of the TX interface, into the
 * appliance's "in" port; everything we receive (stamped DATA, STABLE,
 * VIEW, CREDIT, UNAVAIL) is the group's multicast on the RX interface.
 * One io_uring carries both: receives stay posted, sends complete
 * asynchronously from a fixed pool of frame buffers.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <interlink/endpoint.h>
#include <interlink/err.h>
#include <interlink/wire.h>

#include "ep_core.h"
#include "ep_priv.h"

uint64_t ep_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* IL_EP_VERSION comes from the build (the project's version). */
const char *il_ep_version(void)
{
	return IL_EP_VERSION;
}

void il_ep_config_init(struct il_ep_config *cfg)
{
	*cfg = (struct il_ep_config){
		.port = IL_UDP_PORT_DEFAULT, .mtu = 1500, .ack_every = 64, .ack_us = 500,
		.hb_ms = 20, .join_retry_ms = 50, .nak_delay_us = 300, .nak_retry_us = 3000,
		.rx_window = 65536, .max_deferred = 8u << 20, .wait_credit = true,
		.rx_depth = 64, .tx_depth = 256, .tfrc_rtt_ms = 100,
		.resend_ms = 1000,
		/* Ricochet's defaults: (8, 5); NAKs 100 ms after discovery,
		 * then every 50 ms (section 5.1) */
		.lec_r = 8, .lec_c = 5.0, .lec_stagger = 1, .lec_store_msgs = 4096,
		.lec_store_repairs = 1024, .lec_nak_delay_us = 100000, .lec_nak_retry_us = 50000,
	};
}

static int if_ipv4(const char *name, struct in_addr *a)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc;

	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	rc = ioctl(fd, SIOCGIFADDR, &ifr);
	if (rc == 0)
		*a = ((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr;
	else
		rc = -errno;
	close(fd);
	return rc;
}

static void set_buf(int fd, int force_opt, int opt, int bytes)
{
	/* FORCE ignores rmem_max/wmem_max (root); otherwise take what we get. */
	if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)) != 0)
		setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

static int open_sockets(struct il_ep *ep, char *err, size_t errlen)
{
	const struct il_ep_config *c = &ep->cfg;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int one = 1, zero = 0, ttl = 16, pmtu = IP_PMTUDISC_DO;

	ep->tx_ifindex = (int)if_nametoindex(c->tx_ifname);
	ep->rx_ifindex = (int)if_nametoindex(c->rx_ifname);
	if (ep->tx_ifindex == 0 || ep->rx_ifindex == 0) {
		il_err(err, errlen, "libinterlink: interface '%s' not found",
		       ep->tx_ifindex == 0 ? c->tx_ifname : c->rx_ifname);
		return -ENODEV;
	}
	int rc = if_ipv4(c->tx_ifname, &ep->tx_addr);
	if (rc) {
		il_err(err, errlen, "libinterlink: tx interface '%s' has no IPv4 address: %s",
		       c->tx_ifname, strerror(-rc));
		return rc;
	}
	ep->txfd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ep->rxfd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (ep->txfd < 0 || ep->rxfd < 0) {
		il_err(err, errlen, "libinterlink: socket: %s", strerror(errno));
		return -errno;
	}
	struct ip_mreqn mif = { .imr_ifindex = ep->tx_ifindex };
	sa.sin_addr = ep->tx_addr;
	/* Loopback off: our own DATA must come back only through the
	 * appliance, stamped, in the group's order (thesis 3.4.3). */
	if (bind(ep->txfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    setsockopt(ep->txfd, IPPROTO_IP, IP_MULTICAST_IF, &mif, sizeof(mif)) != 0 ||
	    setsockopt(ep->txfd, IPPROTO_IP, IP_MULTICAST_LOOP, &zero, sizeof(zero)) != 0 ||
	    setsockopt(ep->txfd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof(ttl)) != 0 ||
	    setsockopt(ep->txfd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) != 0) {
		il_err(err, errlen, "libinterlink: tx socket on '%s': %s", c->tx_ifname,
		       strerror(errno));
		return -errno;
	}
	set_buf(ep->txfd, SO_SNDBUFFORCE, SO_SNDBUF, 4 << 20);
	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	sa.sin_port = htons(c->port);
	/* Several members may share a host (a namespace): each gets a copy. */
	if (setsockopt(ep->rxfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    setsockopt(ep->rxfd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof(zero)) != 0 ||
	    bind(ep->rxfd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		il_err(err, errlen, "libinterlink: rx socket on port %u: %s", c->port,
		       strerror(errno));
		return -errno;
	}
	set_buf(ep->rxfd, SO_RCVBUFFORCE, SO_RCVBUF, 32 << 20);
	return 0;
}

static int post_recv(struct il_ep *ep, unsigned i)
{
	struct io_uring_sqe *sqe = ep_sqe(ep);

	if (sqe == NULL)
		return -EBUSY;
	io_uring_prep_recv(sqe, ep->rxfd, ep->rx[i], EP_RXBUF, 0);
	io_uring_sqe_set_data64(sqe, EP_UD_RX | i);
	return 0;
}

struct io_uring_sqe *ep_sqe(struct il_ep *ep)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ep->ring);

	if (sqe == NULL) {
		io_uring_submit(&ep->ring);
		sqe = io_uring_get_sqe(&ep->ring);
	}
	return sqe;
}

/* What every endpoint has, with its I/O or without: the config checked,
 * its incarnation, the frame size and the send buffers. */
static struct il_ep *ep_alloc(const struct il_ep_config *cfg, char *err, size_t errlen)
{
	struct il_ep *ep = calloc(1, sizeof(*ep));

	if (ep == NULL) {
		il_err(err, errlen, "libinterlink: out of memory");
		return NULL;
	}
	ep->cfg = *cfg;
	ep->txfd = ep->rxfd = -1;
	if (cfg->mtu < 576 || cfg->mtu > 9000 || cfg->rx_depth == 0 || cfg->rx_depth > 1024 ||
	    cfg->tx_depth == 0 || cfg->tx_depth > 4096 || cfg->ack_every == 0 ||
	    cfg->rx_window < 2 || (cfg->rx_window & (cfg->rx_window - 1))) {
		il_err(err, errlen, "libinterlink: bad config (mtu 576..9000, rx_depth 1..1024, "
		       "tx_depth 1..4096, ack_every >= 1, rx_window a power of two)");
		goto fail;
	}
	ep->member_id = cfg->member_id;
	if (cfg->incarnation)
		ep->incarnation = cfg->incarnation;
	else {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ep->incarnation = (uint32_t)((uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000) | 1;
	}
	/* IPv4 20 + UDP 8: what the Interlink header and body may use. */
	ep->max_frame = (size_t)cfg->mtu - 28;
	if (ep->max_frame > EP_FRAME_MAX)
		ep->max_frame = EP_FRAME_MAX;
	ep->tx = calloc(cfg->tx_depth, sizeof(*ep->tx));
	ep->tx_free = calloc(cfg->tx_depth, sizeof(*ep->tx_free));
	if (ep->tx == NULL || ep->tx_free == NULL) {
		il_err(err, errlen, "libinterlink: out of memory");
		goto fail;
	}
	for (unsigned i = 0; i < cfg->tx_depth; i++)
		ep->tx_free[ep->n_tx_free++] = cfg->tx_depth - 1 - i;
	return ep;
fail:
	il_ep_close(ep);
	return NULL;
}

struct il_ep *il_ep_open(const struct il_ep_config *cfg, char *err, size_t errlen)
{
	struct il_ep *ep;

	if (cfg->tx_ifname == NULL || cfg->rx_ifname == NULL) {
		il_err(err, errlen, "libinterlink: tx_ifname and rx_ifname are required");
		return NULL;
	}
	ep = ep_alloc(cfg, err, errlen);
	if (ep == NULL)
		return NULL;
	if (open_sockets(ep, err, errlen))
		goto fail;
	if (ep->member_id == 0)
		ep->member_id = ntohl(ep->tx_addr.s_addr);
	int rc = io_uring_queue_init(cfg->rx_depth + cfg->tx_depth + 32, &ep->ring, 0);
	if (rc < 0) {
		il_err(err, errlen, "libinterlink: io_uring_queue_init: %s", strerror(-rc));
		goto fail;
	}
	ep->ring_ok = true;
	ep->rx = calloc(cfg->rx_depth, sizeof(*ep->rx));
	if (ep->rx == NULL) {
		il_err(err, errlen, "libinterlink: out of memory");
		goto fail;
	}
	for (unsigned i = 0; i < cfg->rx_depth; i++)
		post_recv(ep, i);
	io_uring_submit(&ep->ring);
	return ep;
fail:
	il_ep_close(ep);
	return NULL;
}

struct il_ep *ep_open_detached(const struct il_ep_config *cfg, ep_tx_tap tap, void *arg,
			       char *err, size_t errlen)
{
	struct il_ep *ep;

	if (cfg->member_id == 0 || tap == NULL) {
		il_err(err, errlen, "libinterlink: a detached endpoint needs a member id and a tap");
		return NULL;
	}
	ep = ep_alloc(cfg, err, errlen);
	if (ep != NULL) {
		ep->tx_tap = tap;
		ep->tx_tap_arg = arg;
	}
	return ep;
}

void il_ep_close(struct il_ep *ep)
{
	if (ep == NULL)
		return;
	for (unsigned i = 0; i < ep->n_slots; i++)
		if (ep->g[i].used)
			il_ep_leave(ep, ep->g[i].id);
	if (ep->ring_ok) {
		/* Sends still queued go out before the sockets close. */
		io_uring_submit(&ep->ring);
		io_uring_queue_exit(&ep->ring);
	}
	if (ep->txfd >= 0)
		close(ep->txfd);
	if (ep->rxfd >= 0)
		close(ep->rxfd);
	for (unsigned i = 0; i < ep->n_held; i++)
		free(ep->held[i]);
	free(ep->held);
	ep_auth_free(ep);
	ep_lec_free(ep);
	free(ep->rx);
	free(ep->tx);
	free(ep->tx_free);
	free(ep);
}

struct ep_group *ep_group(struct il_ep *ep, uint16_t id)
{
	unsigned k = ep->gslot[id];

	return k ? &ep->g[k - 1] : NULL;
}

int il_ep_join(struct il_ep *ep, uint16_t group, const char *mcast, uint32_t roles,
	       const struct il_ep_callbacks *cb, void *user)
{
	struct ep_group *g = NULL;
	struct in_addr a;

	if (ep_group(ep, group) != NULL)
		return -EEXIST;
	if (inet_pton(AF_INET, mcast, &a) != 1 || !IN_MULTICAST(ntohl(a.s_addr)) ||
	    roles == 0 || (roles & ~(IL_EP_SENDER | IL_EP_RECEIVER)))
		return -EINVAL;
	unsigned slot = 0;
	for (; slot < IL_EP_MAX_GROUPS && g == NULL; slot++)
		if (!ep->g[slot].used)
			g = &ep->g[slot];
	if (g == NULL)
		return -ENOSPC;
	memset(g, 0, sizeof(*g));
	if (roles & IL_EP_RECEIVER) {
		struct ip_mreqn mr = { .imr_multiaddr = a, .imr_ifindex = ep->rx_ifindex };
		int rc = ep_rxw_init(&g->w, ep->cfg.rx_window);

		if (rc)
			return rc;
		if (ep->rxfd >= 0 &&
		    setsockopt(ep->rxfd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr)) != 0) {
			rc = -errno;
			ep_rxw_free(&g->w);
			return rc;
		}
	} else {
		/* A sender learns of VIEW and CREDIT on the group address too. */
		struct ip_mreqn mr = { .imr_multiaddr = a, .imr_ifindex = ep->rx_ifindex };

		if (ep->rxfd >= 0 &&
		    setsockopt(ep->rxfd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr)) != 0)
			return -errno;
	}
	g->used = true;
	g->id = group;
	ep->gslot[group] = (uint8_t)slot; /* the slot's index + 1 */
	if (slot > ep->n_slots)
		ep->n_slots = slot;
	g->roles = roles;
	g->dst = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(ep->cfg.port),
				       .sin_addr = a };
	if (cb != NULL)
		g->cb = *cb;
	g->user = user;
	g->st = EP_G_JOINING;
	ep_credit_init(&g->cr, ep->cfg.wait_credit);
	ep_pace_init(&g->pace);
	g->tx_bytes = 0;
	il_tfrc_loss_init(&g->loss, (uint64_t)(ep->cfg.tfrc_rtt_ms ? ep->cfg.tfrc_rtt_ms : 1) *
				    1000000u);
	il_tfrc_flow_init(&g->flow);
	g->echo_seq = g->echo_ns = 0;
	ep_q_init(&g->q, ep->cfg.max_deferred);
	ep_q_init(&g->sent, SIZE_MAX);
	ep_timers(ep, ep_now_ns()); /* the first JOIN goes now */
	if (ep->ring_ok)
		io_uring_submit(&ep->ring);
	return 0;
}

int il_ep_tfrc_stats(const struct il_ep *ep, uint16_t group, struct il_ep_tfrc *out)
{
	const struct ep_group *g = ep_group((struct il_ep *)ep, group);

	if (g == NULL)
		return -ENOENT;
	*out = (struct il_ep_tfrc){ .rate_kbps = g->pace.rate_kbps, .tx_bytes = g->tx_bytes,
				    .paced = g->pace.waited, .loss_p = il_tfrc_loss_p(&g->loss),
				    .loss_events = g->loss.events, .lost = g->loss.lost,
				    .received = g->loss.received };
	return 0;
}

void ep_release_held(struct ep_group *g)
{
	uint64_t end = g->w.hi;

	if (!(g->roles & IL_EP_RECEIVER))
		return;
	/* Frames are held in the window only. A tail the group announced
	 * beyond it (a STABLE's next sequence, which may be anything) has no
	 * slots to walk: 2^62 of them would take practically forever. */
	if (end - g->w.uto > (uint64_t)g->w.mask + 1)
		end = g->w.uto + g->w.mask + 1;
	for (uint64_t s = g->w.uto; s < end; s++) {
		struct ep_slot *sl = ep_rxw_slot(&g->w, s);

		if (sl->state == EP_S_MSG)
			ep_frame_put(sl->fr);
		sl->state = EP_S_EMPTY;
	}
}

int il_ep_leave(struct il_ep *ep, uint16_t group)
{
	struct ep_group *g = ep_group(ep, group);

	if (g == NULL)
		return -ENOENT;
	ep_send_member(ep, g, IL_T_LEAVE);
	if (ep->ring_ok)
		io_uring_submit(&ep->ring);
	struct ip_mreqn mr = { .imr_multiaddr = g->dst.sin_addr, .imr_ifindex = ep->rx_ifindex };
	if (ep->rxfd >= 0)
		setsockopt(ep->rxfd, IPPROTO_IP, IP_DROP_MEMBERSHIP, &mr, sizeof(mr));
	ep_lec_gone(ep, g);
	ep_release_held(g);
	if (g->roles & IL_EP_RECEIVER)
		ep_rxw_free(&g->w);
	ep_q_free(&g->q);
	ep_q_free(&g->sent);
	g->used = false;
	ep->gslot[group] = 0;
	while (ep->n_slots > 0 && !ep->g[ep->n_slots - 1].used)
		ep->n_slots--;
	return 0;
}

bool il_ep_is_member(const struct il_ep *ep, uint16_t group)
{
	const struct ep_group *g = ep_group((struct il_ep *)ep, group);

	return g != NULL && g->st == EP_G_MEMBER;
}

uint64_t il_ep_uto_next(const struct il_ep *ep, uint16_t group)
{
	const struct ep_group *g = ep_group((struct il_ep *)ep, group);

	return g != NULL && (g->roles & IL_EP_RECEIVER) ? g->w.uto : 0;
}

uint64_t il_ep_pending(const struct il_ep *ep, uint16_t group)
{
	const struct ep_group *g = ep_group((struct il_ep *)ep, group);

	if (g == NULL)
		return 0;
	/* Without credits we cannot know what is stable: only the queue. */
	return g->q.n + (g->cr.seen ? ep_credit_unstable(&g->cr) : 0);
}

int il_ep_fd(const struct il_ep *ep)
{
	return ep->ring.ring_fd;
}

void il_ep_get_stats(const struct il_ep *ep, struct il_ep_stats *st)
{
	*st = ep->st;
}

uint32_t il_ep_member_id(const struct il_ep *ep)
{
	return ep->member_id;
}

static void handle_cqe(struct il_ep *ep, const struct io_uring_cqe *cqe, uint64_t now)
{
	uint64_t ud = io_uring_cqe_get_data64(cqe);
	unsigned i = (unsigned)(ud & 0xffffffffu);

	switch (ud & EP_UD_KIND) {
	case EP_UD_RX:
		if (cqe->res > 0 && ep->cfg.rx_filter &&
		    ep->cfg.rx_filter(ep->cfg.rx_filter_arg, ep->rx[i], (size_t)cqe->res))
			ep->st.rx_filtered++;
		else if (cqe->res > 0)
			ep_rx_datagram(ep, ep->rx[i], (size_t)cqe->res, now);
		post_recv(ep, i);
		break;
	case EP_UD_TX:
		if (cqe->res < 0)
			ep->st.tx_fail++;
		ep->tx_free[ep->n_tx_free++] = i;
		break;
	default:
		break;
	}
}

/* How long we may sleep before a timer is due. */
static uint64_t sleep_budget_ns(struct il_ep *ep, uint64_t max_ns)
{
	const struct il_ep_config *c = &ep->cfg;
	uint64_t t = max_ns, hb = (uint64_t)c->hb_ms * 1000000u;

	if (hb < t)
		t = hb;
	for (unsigned i = 0; i < ep->n_slots; i++) {
		const struct ep_group *g = &ep->g[i];

		if (!g->used)
			continue;
		if (g->st == EP_G_JOINING && (uint64_t)c->join_retry_ms * 1000000u < t)
			t = (uint64_t)c->join_retry_ms * 1000000u;
		if (g->st != EP_G_MEMBER)
			continue;
		if ((g->roles & IL_EP_RECEIVER) && g->w.po != g->ack.acked &&
		    (uint64_t)c->ack_us * 1000u < t)
			t = (uint64_t)c->ack_us * 1000u;
		if ((g->roles & IL_EP_RECEIVER) && g->w.po < g->w.hi) {
			/* a gap's next NAK is due when its timers say, not a
			 * whole delay from now (LEC groups wait 100 ms) */
			uint64_t d = ep_rxw_nak_wait(&g->w, ep_now_ns(), ep_nak_delay_ns(ep, g),
						     ep_nak_retry_ns(ep, g));

			if (d < t)
				t = d;
		}
		if (g->q.n > 0 && g->pace.rate_kbps) {
			/* Paced: wake when the next frame's tokens are there
			 * (a full frame's worth: the queue packs to the MTU). */
			uint64_t w = ep_pace_wait_ns(&g->pace, ep->max_frame, ep_now_ns());

			if (w < 50000u)
				w = 50000u;
			if (w < t)
				t = w;
		}
	}
	return t;
}

/* Everything that completed so far, handled; then what became deliverable
 * (always: the timers may have made messages deliverable too, a gap given
 * up or a cut settled). */
static unsigned drain_cq(struct il_ep *ep, uint64_t now, bool always)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	io_uring_for_each_cqe(&ep->ring, head, cqe) {
		handle_cqe(ep, cqe, now);
		n++;
	}
	io_uring_cq_advance(&ep->ring, n);
	if (n || always)
		for (unsigned i = 0; i < ep->n_slots; i++)
			if (ep->g[i].used)
				ep_deliver(ep, &ep->g[i]);
	return n;
}

int il_ep_poll(struct il_ep *ep, unsigned timeout_us)
{
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts;
	uint64_t now = ep_now_ns();
	unsigned n;
	int rc;

	/* What arrived while we were away (descheduled, or busy in the
	 * application) goes before the timers: a VIEW, a repair or a missing
	 * frame already here must not be answered by a JOIN retry or a NAK. */
	n = drain_cq(ep, now, false);
	ep_timers(ep, now);
	uint64_t wait = n ? 0 : sleep_budget_ns(ep, (uint64_t)timeout_us * 1000u);
	ts.tv_sec = (long long)(wait / 1000000000u);
	ts.tv_nsec = (long long)(wait % 1000000000u);
	rc = io_uring_submit_and_wait_timeout(&ep->ring, &cqe, n ? 0 : 1, &ts, NULL);
	if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
		return rc;
	now = ep_now_ns();
	n += drain_cq(ep, now, true);
	ep_timers(ep, now);
	io_uring_submit(&ep->ring); /* receives re-armed, sends queued */
	return (int)n;
}

int il_ep_run(struct il_ep *ep, volatile bool *stop)
{
	while (!*stop) {
		int rc = il_ep_poll(ep, 10000);

		if (rc < 0)
			return rc;
	}
	return 0;
}
