"""Crafted frames through the real `interlink` binary over net_pcap ports; every field of
what comes out is checked."""
import random
import struct

import pytest
from scapy.layers.inet import IP, TCP, UDP, fragment
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Raw

from interlink_scapy import Interlink, il_data, il_nak

MC = {1: "239.1.1.1", 2: "239.1.1.2", 100: "239.1.1.100"}
FLAG_STAMPED, FLAG_RAW = 0x01, 0x08


def mcast_mac(ip):
    b = [int(x) for x in ip.split(".")]
    return "01:00:5e:%02x:%02x:%02x" % (b[1] & 0x7F, b[2], b[3])


def data_frame(group, sender, sseq, msgs, chksum=None, sport=5000):
    udp = UDP(sport=sport, dport=7400)
    if chksum is not None:
        udp.chksum = chksum
    return (Ether(src="02:00:00:00:00:%02x" % sender, dst=mcast_mac(MC[group])) /
            IP(src="10.0.0.%d" % sender, dst=MC[group]) / udp /
            il_data(group, sender, sseq, msgs))


def nak_frame(group, receiver, first, last):
    return (Ether(dst=mcast_mac(MC[group])) / IP(src="10.1.0.%d" % receiver, dst=MC[group]) /
            UDP(sport=6000, dport=7400) / il_nak(group, receiver, first, last))


def udp_ok(pkt):
    """The UDP checksum in pkt is what Scapy computes from scratch (or 0: none)."""
    got = pkt[UDP].chksum
    if got == 0:
        return True
    q = pkt.copy()
    del q[UDP].chksum
    return Ether(bytes(q))[UDP].chksum == got


def ip_ok(pkt):
    q = pkt.copy()
    del q[IP].chksum
    return Ether(bytes(q))[IP].chksum == pkt[IP].chksum


def masked(raw):
    """A stamped frame's bytes with the fields the appliance may change zeroed."""
    b = bytearray(raw)
    h = 42
    b[40:42] = b"\0\0"                 # UDP checksum
    b[h + 3] = 0                       # flags
    b[h + 12:h + 16] = b"\0" * 4       # epoch
    b[h + 24:h + 32] = b"\0" * 8       # global_seq
    return bytes(b)


def ctr(summary, stage, name):
    return summary["stages"][stage][name]


def test_stamping_order_across_interleaved_senders_and_groups(run_pcap):
    rng = random.Random(7)
    frames, sent = [], []
    sseq = {}
    for i in range(60):
        g = rng.choice([1, 2])
        s = rng.randint(1, 4)
        k = rng.randint(1, 5)
        seq = sseq.get((g, s), 1)
        sseq[(g, s)] = seq + k
        msgs = [bytes([rng.randrange(256)]) * rng.randint(0, 40) for _ in range(k)]
        f = data_frame(g, s, seq, msgs, chksum=0 if i % 5 == 0 else None)
        frames.append(f)
        sent.append((g, s, seq, k, bytes(f)))
    r = run_pcap(frames)
    assert len(r.out) == len(frames)
    assert r.back == []
    nxt = {1: 1, 2: 1}
    epoch = r.summary["epoch"]
    for (g, s, seq, k, raw), out in zip(sent, r.out):
        il = out[Interlink]
        assert il.group_id == g and il.sender_id == s and il.sender_seq == seq
        assert il.msg_count == k
        assert il.global_seq == nxt[g], "global sequence must be contiguous per group"
        nxt[g] += k
        assert il.epoch == epoch != 0
        assert int(il.flags) == FLAG_STAMPED
        assert il.stable_seq == 0
        assert masked(bytes(out)) == masked(raw), "only stamped fields may change"
        if Ether(raw)[UDP].chksum == 0:
            assert out[UDP].chksum == 0
        assert udp_ok(out) and ip_ok(out)
    assert ctr(r.summary, "seq", "stamped_frames") == len(frames)
    assert ctr(r.summary, "seq", "stamped_msgs") == sum(x[3] for x in sent)
    assert ctr(r.summary, "seq", "group1_next") == nxt[1]
    assert ctr(r.summary, "seq", "group2_next") == nxt[2]


def test_epoch_from_config_and_a_new_epoch_per_restart(run_pcap):
    f = [data_frame(1, 1, 1, [b"x"])]
    a = run_pcap(f, sets=["epoch=4242"])
    assert a.out[0][Interlink].epoch == 4242
    b = run_pcap(f)
    c = run_pcap(f)
    assert b.out[0][Interlink].epoch != 4242
    assert b.out[0][Interlink].epoch <= c.out[0][Interlink].epoch


def test_summary_json_escapes_the_names_of_the_config(run_pcap):
    """Stage and port names are the config's own strings: quotes, backslashes and control
    characters in them still give a summary that parses, with every name intact."""
    odd = 'odd"stage\\x\ty'
    r = run_pcap([data_frame(1, 1, 1, [b"x"])], sets=[f"stages.{odd}={{type: classify}}"])
    assert r.summary["stages"][odd]["type"] == "classify"
    assert ctr(r.summary, "seq", "stamped_msgs") == 1


def test_summary_has_every_groups_state_for_every_sequencer(run_pcap):
    """Two sequencer instances and 120 groups: the summary holds next, history_low and
    history_frames of every group for each instance, with that instance's own values."""
    ids = range(1, 121)
    groups = ", ".join(f"{{id: {i}, address: 239.1.1.{i}}}" for i in ids)
    sets = [f"groups=[{groups}]", "stages.seq.history=8",
            "stages.seq2={type: sequencer, history: 8}",
            "pipeline.0.chains.1.stages=[classify, seq2, nak]"]
    r = run_pcap([data_frame(100, 1, 1, [b"a"]), data_frame(100, 1, 2, [b"b"])],
                 frames_out_side=[data_frame(2, 2, 1, [b"c"])], sets=sets)
    for stage, stamped in (("seq", {100: 2}), ("seq2", {2: 1})):
        st = r.summary["stages"][stage]
        for i in ids:
            assert st[f"group{i}_next"] == 1 + stamped.get(i, 0), (stage, i)
            assert st[f"group{i}_history_frames"] == stamped.get(i, 0), (stage, i)
            assert st[f"group{i}_history_low"] == 1, (stage, i)


@pytest.mark.parametrize("chksum", [None, 0])
def test_raw_mode_inserts_header_and_fixes_lengths_and_checksums(run_pcap, chksum):
    frames, payloads = [], []
    for i in range(8):
        pay = bytes(random.Random(i).randrange(256) for _ in range(i * 37 % 200))
        u = UDP(sport=1000 + i % 2, dport=9000)
        if chksum is not None:
            u.chksum = chksum
        frames.append(Ether(bytes(Ether(dst=mcast_mac(MC[100])) /
                                  IP(src="192.168.9.%d" % (1 + i % 2), dst=MC[100], id=77 + i) /
                                  u / Raw(pay))))
        payloads.append(pay)
    # An interleaved native frame of another group keeps its own sequence space.
    frames.insert(3, data_frame(1, 1, 1, [b"native"]))
    r = run_pcap(frames)
    outs = [p for p in r.out if p[Interlink].group_id == 100]
    assert len(outs) == 8
    for i, (inp, out, pay) in enumerate(zip([f for f in frames if UDP in f and f[UDP].dport == 9000],
                                            outs, payloads)):
        il = out[Interlink]
        assert int(il.flags) == FLAG_STAMPED | FLAG_RAW
        assert il.global_seq == i + 1
        assert il.msg_count == 1 and il.msgs[0].len == len(pay) and il.msgs[0].data == pay
        assert il.sender_id == int.from_bytes(bytes(map(int, inp[IP].src.split("."))), "big")
        assert il.sender_seq == i // 2 + 1, "per-source FIFO sequence"
        assert out[IP].len == inp[IP].len + 44 and out[UDP].len == inp[UDP].len + 44
        assert out[UDP].dport == 7400 and out[UDP].sport == inp[UDP].sport
        assert out[IP].id == inp[IP].id and out[IP].dst == MC[100]
        assert ip_ok(out)
        if chksum == 0:
            assert out[UDP].chksum == 0
        else:
            assert out[UDP].chksum != 0 and udp_ok(out)
    native = [p for p in r.out if p[Interlink].group_id == 1]
    assert native[0][Interlink].global_seq == 1
    assert ctr(r.summary, "seq", "raw_inserted") == 8
    assert ctr(r.summary, "classify", "raw_matched") == 8


def test_raw_mode_steers_unicast_filter_to_group_multicast(run_pcap):
    f = Ether(dst="02:00:00:00:00:99") / IP(src="10.9.9.9", dst="10.0.0.50") / \
        UDP(sport=4000, dport=9100) / Raw(b"to-the-appliance")
    r = run_pcap([f], sets=["groups.1.raw={dst: 10.0.0.50, port: 9100}"])
    assert len(r.out) == 1
    o = r.out[0]
    assert o[IP].dst == MC[2] and o[Ether].dst == mcast_mac(MC[2])
    assert o[Interlink].group_id == 2 and o[Interlink].msgs[0].data == b"to-the-appliance"
    assert ip_ok(o) and udp_ok(o)


def other_traffic():
    return [
        Ether(dst="ff:ff:ff:ff:ff:ff", src="02:00:00:00:00:01") / ARP(pdst="10.0.0.2"),
        Ether() / IPv6(dst="ff02::1") / UDP(dport=7400) / Raw(b"v6 is not ours"),
        Ether() / IP(dst="10.0.0.2") / TCP(dport=80, flags="S"),
        Ether() / IP(dst="239.1.1.1") / UDP(sport=1, dport=7401) / Raw(b"other port"),
        Ether() / Dot1Q(vlan=5) / ARP(),
        Ether(type=0x88cc) / Raw(b"\x02\x07\x04lldp-ish" + b"\0" * 40),
        Ether() / IP(dst="239.1.1.1", proto=17) / Raw(b"\x00"),  # not-quite UDP, 1 byte
    ] + fragment(Ether() / IP(dst="10.0.0.9") / UDP(dport=5555) / Raw(b"f" * 3000), 1400)[1:]


def test_other_traffic_passes_byte_for_byte_both_ways(run_pcap):
    fwd = other_traffic()
    rev = other_traffic()[::-1]
    # Interlink DATA coming back from switch B's side is not ours to stamp either.
    rev.append(data_frame(1, 9, 1, [b"from the far side"]))
    r = run_pcap(fwd, rev)
    assert [bytes(p) for p in r.out] == [bytes(p) for p in fwd]
    assert [bytes(p) for p in r.back] == [bytes(p) for p in rev]
    assert ctr(r.summary, "seq", "stamped_frames") == 0


def test_nak_retransmits_the_stamped_frames(run_pcap):
    data = [data_frame(1, 1, i + 1, [b"m%d" % i]) for i in range(10)]
    data += [data_frame(2, 2, i + 1, [b"a", b"b"]) for i in range(3)]
    r = run_pcap(data + [nak_frame(1, 5, 3, 5), nak_frame(2, 5, 2, 3)])
    stamped, retx = r.out[:13], r.out[13:]
    # Originals leave before any retransmission of them.
    assert [p[Interlink].sender_seq for p in stamped] == list(range(1, 11)) + [1, 2, 3]
    g1 = [bytes(p) for p in stamped if p[Interlink].group_id == 1]
    g2 = [bytes(p) for p in stamped if p[Interlink].group_id == 2]
    # group 1: seqs 3..5 are three frames; group 2 frames hold seqs [1,2], [3,4], [5,6],
    # so a NAK for 2..3 needs the first two, whole.
    assert [bytes(p) for p in retx] == g1[2:5] + g2[0:2], "retransmission is the stamped frame"
    assert ctr(r.summary, "nak", "naks") == 2
    assert ctr(r.summary, "nak", "retransmitted_frames") == 3 + 2
    assert ctr(r.summary, "nak", "retransmitted_msgs") == 3 + 4


def test_nak_from_the_far_side_is_served_too(run_pcap):
    data = [data_frame(1, 1, i + 1, [b"m%d" % i]) for i in range(5)]
    r = run_pcap(data, [nak_frame(1, 3, 2, 2)], idle_ms=400)
    assert ctr(r.summary, "nak", "naks") == 1
    assert len(r.out) in (5, 6)
    # The NAK may be read before the data exists (nak_future) or after (retransmitted).
    served = ctr(r.summary, "nak", "retransmitted_frames") + ctr(r.summary, "nak", "nak_future")
    assert served == 1


def test_beyond_history_answers_unavail(run_pcap):
    data = [data_frame(1, 1, i + 1, [b"m%d" % i]) for i in range(10)]
    r = run_pcap(data + [nak_frame(1, 9, 1, 8), nak_frame(1, 9, 11, 20)],
                 sets=["stages.seq.history=4"])
    stamped = r.out[:10]
    rest = r.out[10:]
    un = [p for p in rest if p[Interlink].type == 3]
    retx = [p for p in rest if p[Interlink].type == 1]
    assert len(un) == 1
    u = un[0]
    il = u[Interlink]
    assert il.group_id == 1 and il.sender_id == 9 and il.epoch == r.summary["epoch"]
    assert il.global_seq == 7, "oldest sequence still held"
    assert (u.first_seq, u.last_seq) == (1, 6)
    assert u[IP].dst == MC[1] and u[Ether].dst == mcast_mac(MC[1])
    assert u[IP].src == "192.0.2.1" and u[UDP].dport == 7400
    assert ip_ok(u) and udp_ok(u) and u[UDP].chksum != 0
    assert [bytes(p) for p in retx] == [bytes(p) for p in stamped[6:8]]
    s = r.summary["stages"]["nak"]
    assert s["unavail_sent"] == 1 and s["unavail_seqs"] == 6 and s["nak_future"] == 1
    assert r.summary["stages"]["seq"]["history_evicted"] == 6


def test_nak_rate_limit_counts_what_it_holds_back(run_pcap):
    data = [data_frame(1, 1, i + 1, [b"x"]) for i in range(50)]
    r = run_pcap(data + [nak_frame(1, 1, 1, 50)],
                 sets=["stages.nak.burst=10", "stages.nak.rate_pps=1"])
    assert len(r.out) == 60
    assert r.summary["stages"]["nak"]["retransmitted_frames"] == 10
    assert r.summary["stages"]["nak"]["rate_limited_frames"] == 1


def malformed_cases():
    good = bytes(data_frame(1, 1, 1, [b"hello", b"world"]))
    ip_udp = bytes(Ether(dst=mcast_mac(MC[1])) / IP(src="10.0.0.1", dst=MC[1]) /
                   UDP(sport=5000, dport=7400))

    def with_il(il_bytes):
        return Ether(bytes(Ether(dst=mcast_mac(MC[1])) / IP(src="10.0.0.1", dst=MC[1]) /
                           UDP(sport=5000, dport=7400) / Raw(il_bytes)))

    hdr = bytearray(good[42:82])
    body = good[82:]

    def h(**kw):
        b = bytearray(hdr)
        for off, val in kw.get("set", []):
            b[off] = val
        return bytes(b)

    return {
        "drop_short_frame": [Ether(good[:30]), with_il(b"\x01\x01")],
        "drop_bad_version": [with_il(h(set=[(0, 2)]) + body), with_il(h(set=[(0, 0)]) + body)],
        "drop_bad_hdr_len": [with_il(h(set=[(2, 36)]) + body), with_il(h(set=[(2, 42)]) + body),
                             with_il(h(set=[(2, 252)]) + body)],
        "drop_truncated_packing": [with_il(hdr + body[:-1]), with_il(hdr + body[:6]),
                                   with_il(hdr + b"\x00")],
        "drop_bad_packing": [with_il(hdr + body + b"extra"), with_il(h(set=[(7, 0)]) + body)],
        "drop_unknown_type": [with_il(h(set=[(1, 0)]) + body), with_il(h(set=[(1, 15)]) + body),
                              with_il(h(set=[(1, 200)]) + body)],
        "drop_bad_flags": [with_il(h(set=[(3, 0x80)]) + body)],
        "drop_bad_nak": [Ether() / IP() / UDP(dport=7400) / il_nak(1, 1, 9, 3),
                         Ether() / IP() / UDP(dport=7400) / il_nak(1, 1, 0, 3),
                         Ether() / IP() / UDP(dport=7400) / Interlink(type=2, group_id=1)],
        "drop_unknown_group": [data_frame(1, 1, 1, [b"x"]) if False else
                               Ether() / IP(dst="239.9.9.9") / UDP(dport=7400) / il_data(77, 1, 1, [b"?"])],
        "drop_bad_udp_len": [Ether(ip_udp[:38] + b"\x00\x05" + ip_udp[40:] + good[42:])],
        "drop_fragment": [Ether() / IP(dst=MC[1], flags="MF") / UDP(dport=7400) / Raw(good[42:])],
    }


def test_each_malformed_case_is_dropped_and_counted(run_pcap):
    cases = malformed_cases()
    frames = []
    for i, (reason, fs) in enumerate(sorted(cases.items())):
        frames += fs
        frames.append(data_frame(2, 3, i + 1, [b"still fine %d" % i]))
    r = run_pcap(frames)
    # Only the good frames come out, in order, stamped.
    assert [p[Interlink].sender_seq for p in r.out] == list(range(1, len(cases) + 1))
    cl = r.summary["stages"]["classify"]
    for reason, fs in cases.items():
        assert cl[reason] == len(fs), reason
    assert r.summary["stages"]["seq"]["stamped_frames"] == len(cases)


def test_random_garbage_never_crashes(run_pcap):
    rng = random.Random(3)
    frames = []
    base = bytes(data_frame(1, 1, 1, [b"abc"] * 3))
    for i in range(400):
        b = bytearray(base[:rng.randint(1, len(base))])
        for _ in range(rng.randint(1, 6)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        frames.append(Ether(bytes(b)) if len(b) >= 14 else Raw(bytes(b)))
    r = run_pcap([f if isinstance(f, Ether) else Ether(bytes(f).ljust(14, b"\0"))
                  for f in frames])
    total = sum(v for k, v in r.summary["stages"]["classify"].items()
                if k.startswith("drop_") or k in ("pass", "udp", "data", "nak", "control"))
    assert total == len(frames)


@pytest.mark.parametrize("sets, msg", [
    (["bogus=1"], "unknown key 'bogus'"),
    (["udp_port=70000"], "key 'udp_port'"),
    (["groups.0.address=10.1.2.3"], "not a multicast address"),
    (["stages.seq.history=1000"], "power of two"),
    (["stages.seq.type=teleport"], "unknown stage type 'teleport'"),
    (["pipeline.0.lcore=7"], "is not a worker lcore"),
    (["pipeline.0.chains.0.rx=nowhere"], "'nowhere' is not a configured port"),
    (["stages.nak.sequencer=classify"], "is not a sequencer stage"),
    (["ports.in.device=eth0"], "neither a PCI address nor a vdev"),
    (["groups.2.raw={dst: 239.1.1.100}"], "needs both 'dst'"),
    (["mtu=abc"], "expected an integer"),
])
def test_config_errors_name_the_key(run_pcap, sets, msg):
    r = run_pcap([], sets=sets, expect_rc=2)
    assert msg in r.log, r.log
    assert "Segmentation" not in r.log


KINDS = ("pass", "udp", "data", "nak", "control")


def classify_identity(summary):
    """Every frame classify saw is counted once: as a kind or as a drop."""
    cl = summary["stages"]["classify"]
    counted = sum(v for k, v in cl.items() if k in KINDS or k.startswith("drop_"))
    return counted, cl["pkts_in"]


def test_kinds_and_drops_add_up_to_pkts_in(run_pcap):
    # Frames of unknown groups (DATA and NAK) are drops, not also DATA/NAK; frames longer
    # than an mbuf arrive in several segments (net_pcap chains them): plain UDP to another
    # port passes through whole, Interlink is dropped as drop_multiseg.
    big_udp = (Ether(dst="02:00:00:00:00:99") / IP(src="10.0.0.9", dst="10.0.0.10") /
               UDP(sport=4000, dport=9999) / Raw(bytes(range(256)) * 14))
    big_il = data_frame(1, 1, 1, [b"m" * 3500])
    unknown = [Ether() / IP(dst="239.9.9.9") / UDP(dport=7400) / il_data(77, 1, 1, [b"?"]),
               Ether() / IP(dst="239.9.9.9") / UDP(dport=7400) / il_nak(78, 1, 1, 1)]
    frames = ([data_frame(1, 1, 1, [b"a"]), nak_frame(1, 1, 1, 1)] + unknown +
              [big_udp, big_il, Ether() / ARP(), data_frame(2, 2, 1, [b"b"])])
    r = run_pcap(frames)
    cl = r.summary["stages"]["classify"]
    counted, pkts_in = classify_identity(r.summary)
    assert pkts_in == len(frames)
    assert counted == pkts_in, cl
    assert cl["drop_unknown_group"] == 2
    assert cl["data"] == 2 and cl["nak"] == 1, cl
    assert cl["drop_multiseg"] == 1, cl
    assert cl["pass"] == 2, cl  # the ARP and the multi-segment UDP
    big_out = [p for p in r.out if UDP in p and p[UDP].dport == 9999]
    assert len(big_out) == 1 and bytes(big_out[0]) == bytes(big_udp)


@pytest.mark.parametrize("chain, names", [
    ("[classify, fecd, seq, nak]", ["'seq' (sequencer)", "'fecd' (fec_dec)", "'classify'"]),
    ("[seq, nak]", ["'seq' (sequencer)", "classify stage earlier"]),
    ("[nak]", ["'nak' (nak)"]),
])
def test_chain_without_the_tags_a_stage_needs_is_refused(run_pcap, chain, names):
    fecd = "stages.fecd={type: fec_dec, local_ip: 192.0.2.2, peer_ip: 192.0.2.1}"
    r = run_pcap([], sets=[fecd, f"pipeline.0.chains.0.stages={chain}"], expect_rc=2)
    assert "pipeline[0].chains[0].stages" in r.log, r.log
    for n in names:
        assert n in r.log, r.log


def test_fec_dec_before_classify_is_accepted(run_pcap):
    fecd = "stages.fecd={type: fec_dec, local_ip: 192.0.2.2, peer_ip: 192.0.2.1}"
    r = run_pcap([data_frame(1, 1, 1, [b"x"])],
                 sets=[fecd, "pipeline.0.chains.0.stages=[fecd, classify, seq, nak]"])
    assert len(r.out) == 1 and r.out[0][Interlink].flags & FLAG_STAMPED
