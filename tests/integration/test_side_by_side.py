"""Two appliances side by side owning different groups (docs/scaling.md 2.1, the static part):
appliance a owns group 1, appliance b owns group 3, both between the same two switches (Linux
bridges), each with its own interlink-control. Switch A snoops IGMP; each appliance's `igmp`
stage reports its own group's address on "in", so the switch delivers each group's traffic
(the hosts' DATA, NAKs, JOINs, ACKs, all sent to the group's address) to its owner alone.
Appliance a forwards what is not Interlink traffic; b drops it (`classify` `other: drop`), so
two paths between the switches make no loop. The replicated store (il-kvstore) runs in both
groups at once, through the real binaries, hosts in network namespaces.

Asserted: in each group every PUT a writer was told was stable is applied exactly once and
every replica ends with the same state; tcpdump on each appliance's "in" link saw its IGMP
reports and not one frame of the other appliance's group; everything b sent into switch A was
its own IGMP reports (it forwards nothing else); b dropped the other traffic it saw, counted;
when b stops, its IGMP leave makes switch A drop b's port from group 3 within seconds."""
import json
import os
import signal
import subprocess
import time

import pytest

from etcdrig import have_etcd  # noqa: F401  (harig imports it too)
from harig import KV, PairRig
from hacheck import pcap_frames
from test_ha import CTL, Store, mac

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths)"),
              pytest.mark.skipif(not KV.exists(), reason=f"{KV} not built")]

GROUPS = {"a": (1, "239.1.1.1"), "b": (3, "239.1.1.3")}
OTHER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
bcast = sys.argv[1].rsplit(".", 1)[0] + ".255"
for _ in range(20):
    s.sendto(b"not interlink", (bcast, 9999))
"""
PIPELINE = ("pipeline=[{lcore: 1, chains: [{rx: in, stages: [igmp, classify, seq, ctrl, nak], "
            "tx: out}, {rx: out, stages: [igmp, classify, nak], tx: in}]}]")


def node_sets(x):
    gid, addr = GROUPS[x]
    # Every appliance drops the others' control frames (forwarding them would loop them
    # between the switches); all but one (a) drop what is not Interlink traffic.
    other = "drop" if x == "b" else "forward"
    return [f"groups=[{{id: {gid}, address: {addr}}}]", "stages.igmp={type: igmp, port: in, interval_ms: 1000}",
            PIPELINE, f"stages.classify={{type: classify, other: {other}, "
                      "unknown_control: drop}"]


def csum_ok(b):
    """The Internet checksum over b (its checksum field included) verifies."""
    b = b + b"\0" * (len(b) % 2)
    s = sum(int.from_bytes(b[i:i + 2], "big") for i in range(0, len(b), 2))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s == 0xFFFF


def mdb_ports(br, addr):
    """The ports a Linux bridge delivers multicast group addr to (its snooping table)."""
    out = subprocess.run(["bridge", "-j", "mdb", "show", "dev", br], capture_output=True,
                         text=True, check=True).stdout
    ports = set()
    for d in json.loads(out or "[]"):
        for e in d.get("mdb", []):
            if e.get("grp") == addr:
                ports.add(e.get("port"))
    return ports


def ip_dst(fr):
    return ".".join(str(b) for b in fr[30:34]) if len(fr) >= 34 and fr[12:14] == b"\x08\x00" \
        else None


def test_two_appliances_own_different_groups(tmp_path):
    with PairRig(tmp_path, 5, CTL, ha=False, snoop_a=True,
                 node_sets={x: node_sets(x) for x in GROUPS}) as rig:
        caps = {}
        for x in GROUPS:
            # What reaches the appliance from switch A, and what it sends into switch A.
            f = tmp_path / f"in-{x}.pcap"
            caps[x] = (f, subprocess.Popen(
                ["tcpdump", "-i", rig.ifc(x, "i", 1), "-U", "-n", "-s", "96", "-w", str(f)],
                stderr=subprocess.DEVNULL))
        stores = {x: Store(rig, tmp_path, n_rep=2, n_wri=1,
                           group=GROUPS[x] if x == "b" else None) for x in GROUPS}
        for s in stores.values():
            s.start_replicas()
        for s in stores.values():
            s.start_writers(6000, 1000)
        finals = {x: s.finish() for x, s in stores.items()}
        totals = {x: stores[x].check(finals[x]) for x in GROUPS}
        for _, p in caps.values():
            p.terminate()
            p.wait(timeout=10)
        sts = {x: rig.status(x) for x in GROUPS}
        # Traffic that is not Interlink's (UDP broadcast on switch A: to both appliances):
        # a forwards it, b drops it.
        subprocess.run(["ip", "netns", "exec", rig.ns(1), "/usr/bin/python3", "-c", OTHER,
                        rig.tx_ip(1)], check=True, timeout=30)
        time.sleep(0.5)
        b_mac = bytes.fromhex(mac(rig.ifc("b", "i", 0)).replace(":", ""))
        # b stops: its IGMP leave makes switch A forget its port for group 3 at once (after
        # the bridge's group-specific queries, about 2 s), not when the membership times
        # out (260 s): a group moved to another appliance reaches only the new owner.
        port_b, addr_b = rig.ifc("b", "i", 1), GROUPS["b"][1]
        assert port_b in mdb_ports(f"{rig.tag}A", addr_b), mdb_ports(f"{rig.tag}A", addr_b)
        rig.app["b"].send_signal(signal.SIGTERM)
        rig.app["b"].wait(timeout=20)
        end = time.time() + 10
        while port_b in mdb_ports(f"{rig.tag}A", addr_b) and time.time() < end:
            time.sleep(0.1)
        left_s = 10 - (end - time.time())
        assert port_b not in mdb_ports(f"{rig.tag}A", addr_b), "switch A still has b's port"
    apps = {x: json.loads((tmp_path / f"app-{x}1.json").read_text()) for x in GROUPS}
    for x, (gid, addr) in GROUPS.items():
        other = GROUPS["b" if x == "a" else "a"][1]
        frames = [fr for _, fr in pcap_frames(caps[x][0])]
        to_me = [fr for fr in frames if ip_dst(fr) == addr]
        # The other group's traffic (its IGMP reports may be flooded to every port).
        to_other = [fr for fr in frames if ip_dst(fr) == other and fr[23] == 17]
        reports = [fr for fr in to_me if fr[23] == 2 and fr[38] == 0x16]
        assert reports, f"no IGMP report of {addr} on {x}'s in link"
        # Well formed: IPv4 with Router Alert, TTL 1, both checksums good (a snooping
        # switch ignores a report whose checksum fails: the group would flood).
        for fr in reports:
            assert fr[14] == 0x46 and fr[22] == 1 and fr[34:38] == b"\x94\x04\0\0", fr[:46].hex()
            assert csum_ok(fr[14:38]) and csum_ok(fr[38:46]), fr[:46].hex()
        assert len(to_me) > len(reports) + 6000, (x, len(to_me))  # its hosts' traffic
        # Switch A delivered not one frame of the other group to this appliance.
        assert to_other == [], (x, len(to_other))
        ig = apps[x]["stages"]["igmp"]
        assert ig["reports"] >= 1 and ig["drop_no_mbuf"] == 0, ig
        assert sts[x]["groups"] == 1, sts[x]
    # b forwards nothing but its own reports into switch A; it dropped the rest, counted.
    b_frames = [fr for _, fr in pcap_frames(caps["b"][0]) if fr[6:12] == b_mac]
    assert b_frames, "b sent nothing into switch A"
    assert all(ip_dst(fr) == GROUPS["b"][1] and fr[23] == 2 for fr in b_frames), \
        [fr[:40].hex() for fr in b_frames if not (ip_dst(fr) == GROUPS["b"][1] and fr[23] == 2)]
    assert apps["b"]["stages"]["classify"]["drop_other"] >= 20, apps["b"]["stages"]["classify"]
    assert apps["a"]["stages"]["classify"]["drop_other"] == 0
    assert apps["a"]["stages"]["classify"]["udp"] >= 20, apps["a"]["stages"]["classify"]
    # The receivers' own membership reports (sent on switch B) were kept from switch A.
    assert apps["a"]["stages"]["igmp"]["drop_foreign_reports"] > 0, apps["a"]["stages"]["igmp"]
    assert apps["b"]["stages"]["igmp"]["leaves"] == 1, apps["b"]["stages"]["igmp"]
    print(f"\ntwo appliances: group 1 by a, group 3 by b; {totals['a']} and {totals['b']} PUTs "
          f"applied once each; reports a {apps['a']['stages']['igmp']['reports']}, b "
          f"{apps['b']['stages']['igmp']['reports']}; b dropped "
          f"{apps['b']['stages']['classify']['drop_other']} other frames, sent only its "
          f"{len(b_frames)} reports into switch A; its leave cleared switch A's entry in "
          f"{left_s:.1f} s")

