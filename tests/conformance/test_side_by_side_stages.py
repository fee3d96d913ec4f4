"""Appliances side by side (docs/scaling.md 2.1), stage by stage, through the real `interlink`
binary over net_pcap ports: the `igmp` stage's reports and what it keeps from switch A, and
classify's `other` and `unknown_control` keys. The default config's groups: 1 (239.1.1.1),
2 (239.1.1.2) and raw group 100 (239.1.1.100, raw.dst the same)."""
from scapy.contrib.igmp import IGMP
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw

from interlink_scapy import Interlink, il_data

PIPE = ("pipeline=[{lcore: 1, chains: [{rx: in, stages: [igmp, classify, seq, nak], tx: out}, "
        "{rx: out, stages: [igmp, classify, nak], tx: in}]}]")
IGMP_SETS = ["stages.igmp={type: igmp, port: in}", PIPE]


def ctl_frame(group, t=3):
    """An Interlink control frame (STABLE by default) of a group."""
    return (Ether(dst="01:00:5e:01:01:%02x" % (group & 0x7F)) /
            IP(src="192.0.2.9", dst="239.1.1.%d" % group) / UDP(sport=7400, dport=7400) /
            Interlink(type=t, group_id=group, sender_id=0, epoch=1))


def data(group=1, sseq=1):
    return (Ether(dst="01:00:5e:01:01:01") / IP(src="10.0.0.1", dst="239.1.1.%d" % group) /
            UDP(sport=5000, dport=7400) / il_data(group, 1, sseq, [b"m"]))


def igmp_frame(t, group="0.0.0.0"):
    return (Ether(src="02:00:00:00:00:09", dst="01:00:5e:00:00:01") /
            IP(src="10.9.9.9", dst="224.0.0.1", ttl=1) / IGMP(type=t, gaddr=group))


def reports(frames):
    return [p for p in frames if IGMP in p and p[IGMP].type == 0x16]


def test_igmp_reports_every_group_address_well_formed(run_pcap):
    r = run_pcap([data()], sets=IGMP_SETS)
    rep = reports(r.back)
    # One round at start: the three group addresses (group 100's raw.dst is its address).
    assert sorted(p[IGMP].gaddr for p in rep) == ["239.1.1.1", "239.1.1.100", "239.1.1.2"]
    for p in rep:
        ip = p[IP]
        assert ip.dst == p[IGMP].gaddr and ip.src == "192.0.2.1" and ip.ttl == 1, p.summary()
        assert bytes(ip.options[0]) == b"\x94\x04\x00\x00", ip.options  # Router Alert
        b = bytes(p)
        mac = "01:00:5e:%02x:%02x:%02x" % tuple(int(x) & m for x, m in
                                                 zip(ip.dst.split(".")[1:], (0x7F, 255, 255)))
        assert p[Ether].dst == mac
        # Both checksums as Scapy computes them from scratch.
        q = Ether(b)
        del q[IP].chksum
        del q[IGMP].chksum
        q = Ether(bytes(q))
        assert q[IP].chksum == ip.chksum and q[IGMP].chksum == p[IGMP].chksum
    assert r.summary["stages"]["igmp"]["reports"] == 3


def test_igmp_leaves_every_group_address_when_the_appliance_stops(run_pcap):
    r = run_pcap([data()], sets=IGMP_SETS)
    igmp = [p for p in r.back if IGMP in p]
    leaves = [p for p in igmp if p[IGMP].type == 0x17]
    # After the reports, the last frames sent on "in": a leave per reported address, to all
    # routers (RFC 2236, 3), from the appliance, TTL 1, Router Alert, both checksums right.
    assert sorted(p[IGMP].gaddr for p in leaves) == ["239.1.1.1", "239.1.1.100", "239.1.1.2"]
    assert [p[IGMP].type for p in igmp][-3:] == [0x17] * 3
    for p in leaves:
        ip = p[IP]
        assert ip.dst == "224.0.0.2" and ip.src == "192.0.2.1" and ip.ttl == 1, p.summary()
        assert p[Ether].dst == "01:00:5e:00:00:02"
        assert bytes(ip.options[0]) == b"\x94\x04\x00\x00"
        q = Ether(bytes(p))
        del q[IP].chksum
        del q[IGMP].chksum
        q = Ether(bytes(q))
        assert q[IP].chksum == ip.chksum and q[IGMP].chksum == p[IGMP].chksum
    assert r.summary["stages"]["igmp"]["leaves"] == 3


def test_igmp_answers_a_query_and_keeps_reports_from_the_other_side(run_pcap):
    # A general query from switch A, after the first round (two bursts of frames later): a
    # second round. A host's report and leave from switch B: not forwarded to switch A;
    # other IGMP (a query from B) passes.
    r = run_pcap([data(sseq=i) for i in range(1, 81)] + [igmp_frame(0x11)],
                 frames_out_side=[igmp_frame(0x16, "239.5.5.5"), igmp_frame(0x17, "239.5.5.5"),
                                  igmp_frame(0x11)],
                 sets=IGMP_SETS)
    ig = r.summary["stages"]["igmp"]
    assert ig["queries"] == 1 and ig["reports"] == 6, ig
    assert ig["drop_foreign_reports"] == 2, ig
    assert [p[IGMP].gaddr for p in r.back if IGMP in p and p[IGMP].type in (0x16, 0x17)
            and p[IGMP].gaddr == "239.5.5.5"] == []
    assert len(reports(r.back)) == 6
    assert len([p for p in r.back if IGMP in p and p[IGMP].type == 0x11]) == 1
    # The query from switch A went on to switch B.
    assert len([p for p in r.out if IGMP in p and p[IGMP].type == 0x11]) == 1


def test_classify_other_and_unknown_control_drop(run_pcap):
    frames = [data(), ctl_frame(7), ctl_frame(1),
              Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(pdst="10.0.0.2"),
              Ether() / IP(dst="10.0.0.2") / UDP(dport=9999) / Raw(b"x")]
    # Defaults: everything but the DATA and the known group's control passes too.
    r = run_pcap(frames)
    assert len(r.out) == 5
    r = run_pcap(frames, sets=["stages.classify={type: classify, other: drop, "
                               "unknown_control: drop}"])
    kinds = [(p[Interlink].type, p[Interlink].group_id) for p in r.out if Interlink in p]
    assert kinds == [(1, 1), (3, 1)], kinds
    assert len(r.out) == 2
    c = r.summary["stages"]["classify"]
    assert c["drop_other"] == 2 and c["drop_unknown_group"] == 1, c


def test_side_by_side_config_errors(run_pcap):
    r = run_pcap([], sets=["stages.classify={type: classify, other: maybe}"], expect_rc=2)
    assert "'stages.classify.other': 'maybe' is not forward or drop" in r.log
    r = run_pcap([], sets=["stages.classify={type: classify, unknown_control: keep}"],
                 expect_rc=2)
    assert "'stages.classify.unknown_control': 'keep' is not pass or drop" in r.log
    r = run_pcap([], sets=["stages.igmp={type: igmp, port: nowhere}", PIPE], expect_rc=2)
    assert "'stages.igmp.port': 'nowhere' is not a configured port" in r.log
    r = run_pcap([], sets=["stages.igmp={type: igmp, interval_ms: 5}", PIPE], expect_rc=2)
    assert "stages.igmp.interval_ms" in r.log
