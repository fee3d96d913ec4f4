"""A NAK storm from a spoofing host through the real `interlink` binary (net_pcap ports): many
NAKs for one range, NAKs for ranges the history no longer holds, NAKs from many spoofed
addresses and member ids. Frames out per NAK frame in must stay under the bound that
docs/operations.md states ("NAK budgets and the amplification bound"), computed here from the
same parameters and the run's duration."""
import random

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from interlink_scapy import Interlink, il_nak

from test_appliance import MC, data_frame, mcast_mac

T_DATA, T_UNAVAIL = 1, 3

# The nak stage's defaults (docs/operations.md); the storm below sets none of them, so the
# bound is the one every deployment gets out of the box.
DEFAULTS = dict(repair_interval_us=2000, requesters=1024, requester_rate_pps=100000,
                requester_burst=1024, unavail_rate_pps=1000, unavail_burst=64)


def nak_from(ip, member, group, first, last):
    return (Ether(dst=mcast_mac(MC[group])) / IP(src=ip, dst=MC[group]) /
            UDP(sport=6000, dport=7400) / il_nak(group, member, first, last))


def sends_within(t_s, interval_us):
    """How often one requester may be answered one range in t_s seconds: once, then again
    after each hold, the hold doubling with each answer up to 64 intervals."""
    n, t, k = 1, 0.0, 0
    while True:
        t += interval_us * 1e-6 * (1 << min(k, 6))
        if t > t_s:
            return n
        n += 1
        k += 1


def repairs(r, n_data):
    """Frames the appliance made or re-sent in answer to NAKs: everything on "out" after the
    originals (retransmissions and UNAVAIL), counted from the capture, not its counters."""
    assert all(p[Interlink].type == T_DATA for p in r.out[:n_data])
    rest = r.out[n_data:]
    un = sum(1 for p in rest if p[Interlink].type == T_UNAVAIL)
    return len(rest), un


def test_nak_storm_from_a_spoofing_host_stays_under_the_amplification_bound(run_pcap):
    d = DEFAULTS
    n_data, history = 200, 64
    data = [data_frame(1, 1, i + 1, [b"m%d" % i]) for i in range(n_data)]
    low = n_data - history + 1                     # oldest sequence still held: 137
    rng = random.Random(10)

    # (a) one broken receiver asks for the same 8 frames again and again.
    a = [nak_from("10.1.0.5", 5, 1, 190, 197) for _ in range(2000)]
    # (b) one receiver asks for ranges long evicted (each answer would be an UNAVAIL).
    b = []
    for i in range(3000):
        first = 1 + i % 100
        b.append(nak_from("10.1.0.6", 6, 1, first, first + 5))
    # (c) a spoofer: 1500 made-up addresses and member ids, each asking twice for one frame.
    c = []
    for j in range(1500):
        ip = "10.%d.%d.%d" % (2 + j // 65536, (j // 256) % 256, j % 256)
        member = rng.randrange(1, 1 << 32)
        seq = low + 3 + j % 50
        c += [nak_from(ip, member, 1, seq, seq)] * 2
    storm = a + b + c
    r = run_pcap(data + storm, sets=[f"stages.seq.history={history}"])

    out, un = repairs(r, n_data)
    n_in = len(storm)
    t = r.summary["elapsed_s"]   # the whole run: an upper bound on the storm's duration
    bound_a = 8 * sends_within(t, d["repair_interval_us"])
    bound_b = min(len(b), d["unavail_burst"] + d["unavail_rate_pps"] * t,
                  d["requester_burst"] + d["requester_rate_pps"] * t)
    bound_c = len(c) // 2        # one frame per identity: its second ask is within the hold
    bound = bound_a + bound_b + bound_c
    ratio = out / n_in
    print(f"storm: {n_in} NAK frames in, {out} frames out ({un} UNAVAIL) in {t:.3f} s: "
          f"{ratio:.3f} per NAK frame, bound {bound:.0f} ({bound / n_in:.3f})")
    assert out <= bound, (f"{out} frames out for {n_in} NAK frames in ({ratio:.2f} per NAK), "
                          f"over the bound {bound:.0f} ({bound / n_in:.2f} per NAK)")
    assert ratio < 0.5

    s = r.summary["stages"]["nak"]
    assert s["naks"] == n_in
    assert s["retransmitted_frames"] + s["unavail_sent"] == out
    assert s["suppressed_frames"] > 0 and s["unavail_limited"] > 0
    # The broken receiver is named in a warning (and counted).
    assert s["repeat_requesters"] >= 1
    assert "receiver 10.1.0.5 (member id 5," in r.log, r.log


def test_spoofed_identities_earn_no_budget(run_pcap):
    """A table of 8 slots (one set), 4 frames per requester: 1000 spoofed identities each asking
    for 8 frames get no more than the 8 slots plus the shared overflow slot can give, because
    a slot is handed to a new identity only once it is worth no more than a fresh one."""
    n_data = 100
    data = [data_frame(1, 1, i + 1, [b"x"]) for i in range(n_data)]
    storm = [nak_from("10.9.%d.%d" % (j // 256, j % 256), 0x20000 + j, 1, 10, 17)
             for j in range(1000)]
    sets = ["stages.nak.requesters=8", "stages.nak.requester_burst=4",
            "stages.nak.requester_rate_pps=1"]
    r = run_pcap(data + storm, sets=sets)
    out, _ = repairs(r, n_data)
    t = r.summary["elapsed_s"]
    bound = (8 + 1) * (4 + 1 * t)
    print(f"spoofed: {len(storm)} NAK frames in, {out} frames out, bound {bound:.1f}")
    assert out <= bound
    s = r.summary["stages"]["nak"]
    assert s["requester_overflow"] > 0 and s["requester_limited"] > 0


@pytest.mark.parametrize("sets, msg", [
    (["stages.nak.requesters=100"], "key 'stages.nak.requesters': 100 is not a power of two"),
    (["stages.nak.requesters=4"], "key 'stages.nak.requesters'"),
    (["stages.nak.repair_interval_us=0"], "key 'stages.nak.repair_interval_us'"),
    (["stages.nak.requester_burst=0"], "key 'stages.nak.requester_burst'"),
    (["stages.nak.unavail_rate_pps=x"], "key 'stages.nak.unavail_rate_pps'"),
    (["stages.nak.repeat_log_after=0"], "key 'stages.nak.repeat_log_after'"),
])
def test_budget_config_errors_name_the_key(run_pcap, sets, msg):
    r = run_pcap([], sets=sets, expect_rc=2)
    assert msg in r.log, r.log
