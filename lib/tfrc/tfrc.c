/* SPDX-License-Identifier: BSD-3-Clause
 * TCP-friendly rate (Shnayderman 2006, ch. 4): Eq. 4.1, the RTT estimator
 * of Fig. 4.3 and the loss-event estimator of section 4.3.2.
 */
#include <math.h>
#include <string.h>

#include <interlink/tfrc.h>

double il_tfrc_rate_ex(double s_bits, double rtt_s, double p, double b, double rto_s)
{
	double den;

	if (!(s_bits > 0) || !(rtt_s > 0) || !(p >= 0 && p <= 1) || !(b > 0) || !(rto_s >= 0))
		return NAN;
	if (p == 0)
		return INFINITY;
	den = rtt_s * sqrt(2 * b * p / 3) +
	      rto_s * fmin(1.0, sqrt(27 * b * p / 8)) * p * (1 + 32 * p * p);
	return s_bits / den;
}

double il_tfrc_rate(double s_bits, double rtt_s, double p)
{
	return il_tfrc_rate_ex(s_bits, rtt_s, p, IL_TFRC_B, IL_TFRC_RTO_FACTOR * rtt_s);
}

void il_tfrc_sendlog_init(struct il_tfrc_sendlog *lg, struct il_tfrc_sendlog_slot *table,
			  uint32_t mask)
{
	lg->slot = table;
	lg->mask = mask;
	lg->excluded = 0;
	memset(table, 0, ((size_t)mask + 1) * sizeof(*table));
}

void il_tfrc_sent(struct il_tfrc_sendlog *lg, uint64_t seq, uint64_t t_out_ns)
{
	struct il_tfrc_sendlog_slot *s = &lg->slot[seq & lg->mask];

	if (s->state != 0 && s->seq == seq) {
		/* Same seq again: a retransmission. Which copy an ACK answers
		 * is unknowable, so the seq gives no sample at all. */
		s->state = 2;
		return;
	}
	s->seq = seq;
	s->t_out = t_out_ns;
	s->state = 1;
}

int64_t il_tfrc_rtt_sample(uint64_t t_out_ns, uint64_t t_now_ns, uint64_t delta_ns)
{
	if (t_now_ns < t_out_ns || t_now_ns - t_out_ns < delta_ns ||
	    t_now_ns - t_out_ns - delta_ns > (uint64_t)INT64_MAX)
		return -1;
	return (int64_t)(t_now_ns - t_out_ns - delta_ns);
}

int64_t il_tfrc_rtt_from_ack(struct il_tfrc_sendlog *lg, uint64_t seq, uint64_t t_now_ns,
			     uint64_t delta_ns)
{
	const struct il_tfrc_sendlog_slot *s = &lg->slot[seq & lg->mask];
	int64_t rtt;

	if (s->state != 1 || s->seq != seq) {
		lg->excluded++;
		return -1;
	}
	rtt = il_tfrc_rtt_sample(s->t_out, t_now_ns, delta_ns);
	if (rtt < 0)
		lg->excluded++;
	return rtt;
}

void il_tfrc_rtt_init(struct il_tfrc_rtt *r, double weight)
{
	memset(r, 0, sizeof(*r));
	r->weight = weight > 0 && weight <= 1 ? weight : 0.125;
}

double il_tfrc_rtt_update(struct il_tfrc_rtt *r, int64_t sample_ns)
{
	if (sample_ns < 0)
		return r->srtt_ns;
	r->last_ns = (double)sample_ns;
	if (r->samples++ == 0)
		r->srtt_ns = r->last_ns;
	else
		r->srtt_ns += r->weight * (r->last_ns - r->srtt_ns);
	return r->srtt_ns;
}

void il_tfrc_flow_init(struct il_tfrc_flow *f)
{
	memset(f, 0, sizeof(*f));
}

void il_tfrc_loss_init(struct il_tfrc_loss *l, uint64_t rtt_ns)
{
	memset(l, 0, sizeof(*l));
	l->rtt_ns = rtt_ns;
}

void il_tfrc_loss_set_rtt(struct il_tfrc_loss *l, uint64_t rtt_ns)
{
	l->rtt_ns = rtt_ns;
}

static void loss_event(struct il_tfrc_loss *l, uint64_t t)
{
	/* Arrivals (of other flows) at or after the event's nominal start
	 * were counted before the gap that reveals it was seen; they belong
	 * to the new event's first RTT, which is not counted. */
	while (l->n_recent > 0) {
		unsigned last = (l->recent_pos + IL_TFRC_RECENT - 1) % IL_TFRC_RECENT;

		if (l->recent[last] < t)
			break;
		l->recent_pos = last;
		l->n_recent--;
		l->i_sample -= 1;
	}
	l->n_recent = 0;
	if (!l->in_history) {
		/* No I_past yet: the packets before the first loss are the
		 * best (only) estimate of the interval. */
		l->i_mean = l->i_sample;
		l->in_history = true;
	} else {
		l->i_mean = 0.5 * l->i_past + 0.5 * l->i_sample; /* Eq. 4.2 */
	}
	if (l->i_mean < 1)
		l->i_mean = 1; /* p <= 1 */
	l->i_past = l->i_mean;
	l->i_sample = 0;
	l->event_ns = t;
	l->events++;
}

static bool in_event(const struct il_tfrc_loss *l, uint64_t t)
{
	return l->in_history && t < l->event_ns + l->rtt_ns;
}

static void count_arrival(struct il_tfrc_loss *l, uint64_t t)
{
	l->received++;
	/* Arrivals within RTT of an event's start belong to the event. */
	if (in_event(l, t))
		return;
	l->i_sample += 1;
	l->recent[l->recent_pos] = t;
	l->recent_pos = (l->recent_pos + 1) % IL_TFRC_RECENT;
	if (l->n_recent < IL_TFRC_RECENT)
		l->n_recent++;
	/* Right after an event I_sample < I_past would drag I_mean down
	 * for no reason: update only once the loss-free run is longer than
	 * the average (or at the next event). */
	if (l->in_history && l->i_sample >= l->i_past)
		l->i_mean = 0.5 * l->i_past + 0.5 * l->i_sample;
}

unsigned il_tfrc_loss_rx(struct il_tfrc_loss *l, struct il_tfrc_flow *f, uint64_t seq,
			 uint64_t t)
{
	unsigned events = 0;

	if (!f->started) {
		f->started = true;
	} else if (seq < f->next_seq) {
		/* Reordered or duplicated: already counted as lost; rare on a
		 * fixed path (the thesis ignores it). */
		l->late++;
		return 0;
	} else if (seq > f->next_seq) {
		/* Lost packets next_seq..seq-1; the j-th (0-based) of `gap`
		 * gets the nominal time last + (t - last) * (j + 1) / (gap + 1). */
		uint64_t gap = seq - f->next_seq;
		double span = t > f->last_ns ? (double)(t - f->last_ns) : 0.0;
		double step = span / (double)(gap + 1);
		uint64_t j = 0;

		l->lost += gap;
		while (j < gap) {
			uint64_t tj = f->last_ns + (uint64_t)(step * (double)(j + 1));
			double jn;

			if (!in_event(l, tj)) {
				loss_event(l, tj);
				events++;
			}
			/* Skip to the first lost packet outside this event:
			 * O(events), not O(gap), for a long outage. */
			if (step <= 0)
				break;
			jn = ceil((double)(l->event_ns + l->rtt_ns - f->last_ns) / step) - 1;
			if (jn >= (double)gap)
				break;
			j = jn > (double)(j + 1) ? (uint64_t)jn : j + 1;
		}
	}
	f->next_seq = seq + 1;
	f->last_ns = t;
	count_arrival(l, t);
	return events;
}

double il_tfrc_loss_p(const struct il_tfrc_loss *l)
{
	return l->in_history ? 1.0 / l->i_mean : 0.0;
}

double il_tfrc_loss_rate(const struct il_tfrc_loss *l, double s_bits)
{
	return il_tfrc_rate(s_bits, (double)l->rtt_ns * 1e-9, il_tfrc_loss_p(l));
}

void il_tfrc_split(uint32_t rate, unsigned n, const uint32_t *demand, uint32_t *share)
{
	bool done[IL_TFRC_SPLIT_MAX];
	uint64_t left = rate;
	unsigned open = n;

	if (n > IL_TFRC_SPLIT_MAX)
		n = open = IL_TFRC_SPLIT_MAX;
	for (unsigned i = 0; i < n; i++) {
		share[i] = 0;
		done[i] = rate == 0;
	}
	if (rate == 0 || n == 0)
		return;
	/* Water-filling: at each level (what is left over the senders still
	 * open), those asking for no more than the level get what they ask;
	 * when none does, the open ones share what is left evenly. */
	while (open > 0) {
		uint64_t level = left / open;
		bool any = false;

		for (unsigned i = 0; i < n; i++)
			if (!done[i] && demand[i] <= level) {
				share[i] = demand[i];
				left -= demand[i];
				done[i] = true;
				open--;
				any = true;
			}
		if (any)
			continue;
		for (unsigned i = 0, k = 0; i < n; i++)
			if (!done[i]) {
				/* the remainder to the first ones, one each */
				share[i] = (uint32_t)(level + (k++ < left % open ? 1 : 0));
				done[i] = true;
			}
		left = 0;
		open = 0;
	}
	/* Every demand met: spread the rest evenly. */
	for (unsigned i = 0; i < n; i++) {
		uint64_t x = share[i] + left / n + (i < left % n ? 1 : 0);

		share[i] = x == 0 ? 1 : (uint32_t)x;
	}
}

uint32_t il_tfrc_demand(uint32_t share, uint32_t used, uint32_t floor)
{
	uint64_t d;

	if (share == 0)
		return IL_TFRC_DEMAND_ANY;
	if ((uint64_t)used * 8 >= (uint64_t)share * 7)
		d = 2ull * share;
	else
		d = (uint64_t)used + used / 4;
	if (d < floor)
		d = floor;
	return d >= IL_TFRC_DEMAND_ANY ? IL_TFRC_DEMAND_ANY - 1 : (uint32_t)d;
}
