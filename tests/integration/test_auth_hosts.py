"""libinterlink's side of authenticated control traffic, through the real binaries: the
appliance (configs/uto.yaml) with auth.keys on its control and nak stages, interlink-control,
and il-kvstore hosts in namespaces (the rig of test_kvstore.py) with --auth-keys.

The signed hosts get the whole service (views, credits, stability: every PUT applied by every
replica, the same state). Then frames of our own go from switch B to the hosts, as if from the
appliance: a VIEW that leaves the replicas out and a STABLE that raises the watermark far, each
unsigned and under another key, and the appliance's own STABLE frames sniffed earlier, sent
again. Each host drops and counts them (auth_bad_mac, auth_replay in its status) and stays a
member that applies what comes next; a STABLE the test signs with the right key is taken (so
the check can fail). A host without the key never joins: its JOINs are the appliance's
drop_bad_mac.

Counts and generous timeouts only: the machine has 2 shared cores."""
import json
import os
import subprocess
import time

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.sendrecv import AsyncSniffer, sendp

from interlink_scapy import ILStable, ILView, ILViewMember, Interlink, il_auth_seal
from test_auth import CTL_TOOL, KEY, KEY_ID, write_keys
from test_kvstore import CTL, HostsRig, status

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths)")

N_REPLICAS, N_WRITERS, PUTS, KEYS = 2, 2, 6000, 1000
F_STAMPED, F_STABLE_VALID = 0x01, 0x04


class AuthHostsRig(HostsRig):
    def __init__(self, tmp, n_hosts):
        self.keys = write_keys(tmp)
        super().__init__(tmp, n_hosts, CTL, [f"stages.ctrl.auth.keys={self.keys}",
                                             f"stages.nak.auth.keys={self.keys}"])
        self.counter = int(time.time() * 1e9) + (1 << 40)  # above the appliance's

    def ctrl(self, stage="ctrl"):
        p = subprocess.run([str(CTL_TOOL), "-a", self.prefix, "show", stage],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    def to_hosts(self, payload):
        """A frame from switch B's side to the group, as the appliance's "out" port sends."""
        f = (Ether(src="02:00:00:00:22:01", dst="01:00:5e:01:01:01") /
             IP(src="10.0.255.1", dst=self.mcast) / UDP(sport=7400, dport=self.port) /
             Raw(payload))
        sendp(f, iface=f"{self.tag}B", verbose=False)

    def sign(self, il, key=KEY):
        self.counter += 1
        return il_auth_seal(bytes(il), key, KEY_ID, self.counter)


def test_signed_hosts_get_everything_and_drop_forged_frames(tmp_path):
    with AuthHostsRig(tmp_path, N_REPLICAS + N_WRITERS + 1) as rig:
        rst = {r: tmp_path / f"replica{r}.json" for r in range(1, N_REPLICAS + 1)}
        auth = ["--auth-keys", str(rig.keys)]

        def logs():
            return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}"
                             for p in sorted(tmp_path.glob("*.log")))

        for r in rst:
            peers = [a for q in rst if q != r for a in ("--peer", f"{rig.tx_ip(q)}:7500")]
            rig.kv(f"replica{r}", r, "replica", "--id", str(rig.id_base + 100 + r),
                   "--keys", str(KEYS), "--listen", f"{rig.tx_ip(r)}:7500", *peers,
                   "--status", str(rst[r]), *auth)
        rig.wait_for(lambda: all(status(rst[r]).get("ready") for r in rst), 60,
                     "the signed replicas to join")
        # The appliance's frames towards host 1, sniffed for the replay below.
        sn = AsyncSniffer(iface=f"{rig.tag}r1", store=True,
                          lfilter=lambda p: UDP in p and p[UDP].dport == rig.port)
        sn.start()
        time.sleep(0.5)
        per = PUTS // N_WRITERS

        def writers(first, count, seed):
            return [rig.kv(f"writer{w}", N_REPLICAS + w, "writer", "--id",
                           str(rig.id_base + w), "--count", str(count), "--keys", str(KEYS),
                           "--seed", str(seed), "--rate", "3000",
                           "--status", str(tmp_path / f"writer{w}.json"), *auth)
                    for w in range(first, first + N_WRITERS)]

        for w, p in enumerate(writers(1, per, 7), 1):
            assert p.wait(timeout=120) == 0, f"writer {w}\n" + logs()
        rig.wait_for(lambda: all(status(rst[r]).get("applied") == PUTS for r in rst), 60,
                     "every replica to apply every PUT")
        pkts = sn.stop()
        s = {r: status(rst[r]) for r in rst}
        assert len({s[r]["hash"] for r in rst}) == 1, s
        for r in rst:
            assert s[r]["auth_signed_tx"] > 0 and s[r]["auth_verified_rx"] > 0, s[r]
            assert s[r]["auth_bad_mac"] == 0 and s[r]["auth_replay"] == 0, s[r]
        c = rig.ctrl()
        assert c["drop_bad_mac"] == 0 and c["drop_replay"] == 0, c
        assert c["up_join"] >= N_REPLICAS + N_WRITERS and c["up_ack"] > 0, c
        stables = [bytes(p[UDP].payload) for p in pkts
                   if len(bytes(p[UDP].payload)) >= 68 and bytes(p[UDP].payload)[1] == 5]
        assert stables, "no STABLE of the appliance sniffed"
        assert all(b[3] & 0x20 and b[2] == 68 for b in stables)
        epoch = int.from_bytes(stables[-1][12:16], "big")

        # Forged: a VIEW without the replicas (they would take it as their exclusion), and a
        # STABLE far ahead (a watermark nobody holds), unsigned and under another key.
        view = Interlink(type=9, group_id=rig.group, epoch=epoch, global_seq=1) / ILView(
            view_id=999, members=[ILViewMember(member_id=rig.id_base + 1, roles=1)])
        stable = Interlink(type=5, group_id=rig.group, epoch=epoch,
                           flags=F_STAMPED | F_STABLE_VALID, global_seq=1 << 40,
                           stable_seq=1 << 40) / ILStable(view_id=999)
        for il in (view, stable):
            rig.to_hosts(bytes(il))
            rig.to_hosts(rig.sign(il, key=bytes(32)))
        rig.wait_for(lambda: all(status(rst[r]).get("auth_bad_mac", 0) >= 4 for r in rst), 30,
                     "4 forged frames dropped by each replica")
        # The appliance's own STABLE frames again: replays.
        for b in stables[-10:]:
            rig.to_hosts(b)
        rig.wait_for(lambda: all(status(rst[r]).get("auth_replay", 0) >= min(10, len(stables))
                                 for r in rst), 30, "the replayed STABLEs dropped")
        # Signed with the right key, a STABLE that says what is already true is taken. (Under
        # a sender_id of its own: our counter is far above the appliance's, and under the
        # appliance's sender_id 0 it would push that window past every STABLE still to come.
        # A key holder can do that; keys separate trusted hosts from the rest.)
        before = {r: status(rst[r])["auth_verified_rx"] for r in rst}
        rig.to_hosts(rig.sign(Interlink(type=5, group_id=rig.group, epoch=epoch,
                                        sender_id=0x7777, flags=F_STAMPED | F_STABLE_VALID,
                                        global_seq=1, stable_seq=1) / ILStable(view_id=1)))
        rig.wait_for(lambda: all(status(rst[r]).get("auth_verified_rx", 0) > before[r]
                                 for r in rst), 30, "the signed STABLE taken")
        # Nothing forged took effect: still members, no state transfer (an exclusion would
        # have made them fetch their state again), and what comes next is applied.
        for w, p in enumerate(writers(1, 500, 8), 1):
            assert p.wait(timeout=120) == 0, f"writer {w} (second run)\n" + logs()
        try:
            rig.wait_for(lambda: all(status(rst[r]).get("applied") == PUTS + 1000
                                     for r in rst), 60, "the second run applied")
        except AssertionError:
            raise AssertionError(json.dumps([status(rst[r]) for r in rst]) + "\n" + logs())
        s = {r: status(rst[r]) for r in rst}
        assert len({s[r]["hash"] for r in rst}) == 1, s
        for r in rst:
            assert s[r]["member"] and s[r]["transfers"] == 0, s[r]

        # Without the key a host never joins: its JOINs are dropped.
        bad = rig.ctrl()["drop_bad_mac"]
        host = N_REPLICAS + N_WRITERS + 1
        p = rig.kv("unsigned", host, "replica", "--id", str(rig.id_base + 200), "--keys",
                   str(KEYS), "--listen", f"{rig.tx_ip(host)}:7500",
                   "--status", str(tmp_path / "unsigned.json"))
        rig.wait_for(lambda: rig.ctrl()["drop_bad_mac"] >= bad + 3, 30,
                     "the unsigned host's JOINs dropped")
        time.sleep(1.0)
        assert not status(tmp_path / "unsigned.json").get("member"), logs()
        p.kill()
