"""afpseq, the AF_PACKET kernel baseline of the line-rate benchmark, does the appliance's raw-mode
job: the same frames sent through afpseq and through the appliance (on net_af_packet ports) on the
same veth wiring come out with the same Interlink header (but the epoch), the same lengths, valid
checksums, one global sequence and a FIFO sequence per source; a frame that would exceed the MTU
is dropped; other traffic passes through unchanged."""
import sys
import time

from conftest import BUILD, ROOT

sys.path.insert(0, str(ROOT / "bench" / "linerate"))


def frames_in():
    from scapy.all import IP, UDP, Ether, Raw
    out = []
    for i in range(12):
        f = (Ether(dst="01:00:5e:01:01:64", src="02:00:00:00:00:01") /
             IP(src=f"198.18.0.{1 + i % 3}", dst="239.1.1.100") /
             UDP(sport=9000 + i % 2, dport=9000) / Raw(bytes([i]) * (18 + 7 * i)))
        if i % 4 == 3:
            f[UDP].chksum = 0  # no UDP checksum: it must stay 0
        out.append(f)
    # too big once 44 bytes are inserted (1500-byte MTU): dropped
    out.append(Ether(dst="01:00:5e:01:01:64") / IP(src="198.18.0.9", dst="239.1.1.100") /
               UDP(sport=9000, dport=9000) / Raw(b"x" * 1440))
    # not the raw filter's port: passes through as it is
    out.append(Ether(dst="01:00:5e:01:01:64") / IP(src="198.18.0.9", dst="239.1.1.100") /
               UDP(sport=9000, dport=9001) / Raw(b"other"))
    return out


def through(cls, tmp):
    """Send the frames into one device on the veth wiring; what comes out on the other side."""
    from scapy.all import AsyncSniffer, sendp
    with cls(tmp) as d:
        time.sleep(0.5)
        sn = AsyncSniffer(iface=d.b0, filter="udp")
        sn.start()
        time.sleep(0.5)
        sendp(frames_in(), iface=d.a0, verbose=False)
        t0 = time.time()
        while len(sn.results or []) < 13 and time.time() - t0 < 10:
            time.sleep(0.1)
        time.sleep(0.3)
        got = sn.stop()
    return [bytes(p) for p in got]


def check(frames, name):
    from scapy.all import IP, UDP, Ether
    from interlink_scapy import Interlink
    sent = [Ether(bytes(f)) for f in frames_in()]  # built: lengths and checksums filled
    stamped = [Ether(f) for f in frames if Interlink in Ether(f)]
    others = [Ether(f) for f in frames if Interlink not in Ether(f)]
    assert len(stamped) == 12, f"{name}: {len(stamped)} stamped frames of 12"
    assert [bytes(o[UDP].payload) for o in others] == [b"other"], name
    fifo = {}
    for i, (s, o) in enumerate(zip(sent, stamped)):
        il = o[Interlink]
        key = (s[IP].src, s[UDP].sport)
        fifo[key] = fifo.get(key, 0) + 1
        assert (il.version, il.type, il.hdr_len, int(il.flags)) == (1, 1, 40, 0x09), name
        assert (il.group_id, il.msg_count, il.global_seq, il.stable_seq) == (100, 1, i + 1, 0)
        assert il.sender_id == int.from_bytes(bytes(map(int, s[IP].src.split("."))), "big")
        assert il.sender_seq == fifo[key], (name, i)
        assert il.msgs[0].len == len(s[UDP].payload)
        assert bytes(il.msgs[0].data) == bytes(s[UDP].payload)
        assert o[IP].len == s[IP].len + 44 and o[UDP].len == s[UDP].len + 44
        assert (o[IP].dst, o[UDP].dport, o[UDP].sport) == ("239.1.1.100", 7400, s[UDP].sport)
        ip = o[IP].copy()
        del ip.chksum
        assert IP(bytes(ip)).chksum == o[IP].chksum, name
        if s[UDP].chksum == 0:
            assert o[UDP].chksum == 0, name
        else:
            c = o.copy()
            del c[UDP].chksum
            assert Ether(bytes(c))[UDP].chksum == o[UDP].chksum, (name, i)
    return stamped


def header(f):
    from interlink_scapy import Interlink
    h = bytes(f[Interlink])[:40]
    return h[:12] + h[16:]  # all but the epoch


def test_afpseq_does_the_appliances_raw_mode_job(tmp_path):
    import duts
    import run
    from common import Cfg
    Cfg.build = BUILD
    Cfg.afpseq = run.build_tool("afpseq", tmp_path)
    a = check(through(duts.KernelPacket, tmp_path), "afpseq")
    b = check(through(duts.ApplianceVeth, tmp_path), "appliance")
    assert [header(x) for x in a] == [header(x) for x in b]
