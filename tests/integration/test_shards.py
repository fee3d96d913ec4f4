"""Two shards (docs/scaling.md section 1): the appliance with two worker lcores, each owning
two of four groups (shards.assign: config), between memif ports with two queue pairs.
interlink-pktgen sends every frame on one queue, so the shard of that queue hands the other
shard's frames over: every group still has one order with no gap, each group is stamped by
its owner alone, and every stray is counted on both sides."""
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import INTERLINK, ROOT
from harness import MemifRig, UtoMemifRig
from test_telemetry import telemetry

GROUPS = "[" + ", ".join(f"{{id: {g}, address: 239.1.1.{g}, shard: {(g - 1) % 2}}}"
                         for g in (1, 2, 3, 4)) + "]"
OWNER = {1: 0, 2: 1, 3: 0, 4: 1}
EXPORTER = ROOT / "tools" / "monitor" / "interlink-exporter"


# DPDK's default RSS key: what shards.assign: hash and pktgen --tx-queue hash use.
RSS_KEY = bytes.fromhex("6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c"
                        "6a42b3bbbeac01fa")


def toeplitz(data: bytes, key: bytes = RSS_KEY) -> int:
    """The Toeplitz hash, written from its definition (not from the C code under test)."""
    k, klen, h = int.from_bytes(key, "big"), len(key) * 8, 0
    for i in range(len(data) * 8):
        if data[i // 8] & (0x80 >> (i % 8)):
            h ^= (k >> (klen - 32 - i)) & 0xFFFFFFFF
    return h


def shard_by_hash(group, n=2):
    """The queue a NIC with a 128-entry round-robin table picks for 239.1.1.<group>."""
    return (toeplitz(bytes([239, 1, 1, group])) % 128) % n


class ShardRig(MemifRig):
    """MemifRig with two shards: main lcore and shard 0 on CPU 1, shard 1 on CPU 0 (the
    machine has two cores; pktgen shares CPU 0)."""

    def __init__(self, tmp, assign="config"):
        groups = GROUPS if assign == "config" else (
            "[" + ", ".join(f"{{id: {g}, address: 239.1.1.{g}}}" for g in OWNER) + "]")
        super().__init__(tmp, app_cpu="0,1", gen_cpu="0", app_sets=[
            'eal=[--no-huge, -m, "1024", --lcores, "0@1,1@1,2@0", --log-level, "lib.eal:error"]',
            # Deep hand-over rings: on two CPUs shared with other work an owner can lose
            # its CPU for tens of milliseconds (a full ring is a counted loss before the
            # sequencer, which this test must not see).
            f"shards={{lcores: [1, 2], assign: {assign}, handoff_slots: 16384}}",
            f"groups={groups}",
            "ports.in.queues=2", "ports.out.queues=2",
        ])

    def start_appliance(self):
        super().start_appliance()
        # The memif sockets exist from the probe on, but a server port refuses a client
        # until it is started: wait for the start line (starting two shards on busy CPUs
        # can take longer than pktgen's first connection attempt).
        for _ in range(300):
            if " epoch " in self.app_log.read_text():
                return
            if self.app.poll() is not None:
                raise RuntimeError("appliance exited: " + self.app_log.read_text())
            time.sleep(0.1)
        raise RuntimeError("appliance did not start: " + self.app_log.read_text())

    def pktgen_cmd(self, js, *args):
        cmd = super().pktgen_cmd(js, *args)
        i = cmd.index("--json")
        # The shared CPUs can make the memif handshake slow: wait for the links longer.
        return cmd[:i] + ["--queues", "2", "--link-wait", "30"] + cmd[i:]


def per_group_stamped(app):
    """{group: (stage that stamped it, frames stamped)} from each sequencer's state."""
    out = {}
    for name, st in app["stages"].items():
        if name.split("@")[0] != "seq":
            continue
        for g in OWNER:
            key = f"group{g}_next"
            if key in st:
                assert g not in out, f"group {g} has state in two shards"
                out[g] = (name, st[key] - 1)
    return out


def check_one_order_per_group(app, res, log, count):
    assert res is not None, log
    assert res["sent_msgs"] == count
    assert res["delivered"] == res["expected"], log
    assert res["disagreements"] == 0 and res["fifo_violations"] == 0
    assert res["unrecoverable"] == 0
    assert app["messages_ordered"] == count
    stamped = per_group_stamped(app)
    assert sorted(stamped) == [1, 2, 3, 4]
    for g, (stage, frames) in stamped.items():
        assert stage == ("seq" if OWNER[g] == 0 else "seq@1"), (g, stage)
        assert frames > 0
    assert sum(f for _, f in stamped.values()) == count  # one message per frame
    return stamped


@pytest.mark.parametrize("queue", [0, 1])
def test_two_shards_strays_handed_over_one_order_per_group(tmp_path, queue):
    """Every frame on queue `queue`: the other shard's groups are all strays."""
    count = 60000
    with ShardRig(tmp_path) as rig:
        rc, log, res = rig.run_pktgen(
            "--tx-queue", str(queue), "--senders", "4", "--groups", "4", "--receivers", "2",
            "--count", str(count), "--rate", "20000", "--size", "32", "--seed", "5",
            "--quiet")
        tel = telemetry(f"app{rig.tag}", "/interlink/shards")  # while it runs
        scrape = subprocess.run([sys.executable, str(EXPORTER), "--once", "--appliance",
                                 f"app{rig.tag}"], capture_output=True, text=True, timeout=60)
        app = rig.stop_appliance()
    assert rc == 0, log
    stamped = check_one_order_per_group(app, res, log, count)
    sh = {s["shard"]: s for s in app["shards"]}
    other = 1 - queue
    strays = sum(f for g, (_, f) in stamped.items() if OWNER[g] == other)
    # The receivers NAK on the same queue when the shared CPUs make them miss a frame:
    # those NAKs are strays too, answered by the owner's nak stage.
    strays += app["stages"]["nak@1" if other == 1 else "nak"]["naks"]
    # Every frame of the other shard's groups was handed over and taken over: none lost
    # on the way, none counted twice.
    assert sh[queue]["handoff_out"] == strays
    assert sh[other]["handoff_in"] == strays
    assert sh[other]["handoff_out"] == 0 and sh[queue]["handoff_in"] == 0
    assert sh[0]["drop_handoff_full"] == sh[1]["drop_handoff_full"] == 0
    # each shard has its own pool; the strays were copied into the owner's, none failed
    assert sh[0]["drop_handoff_nombuf"] == sh[1]["drop_handoff_nombuf"] == 0
    assert sh[0]["pool_size"] > 0 and sh[1]["pool_size"] > 0, sh
    assert sorted(sh[0]["groups"]) == [1, 3] and sorted(sh[1]["groups"]) == [2, 4]
    # /interlink/shards said the same while it ran (the traffic was over), and the status
    # line counted the strays.
    assert sorted(tel) == ["0", "1"], tel
    for k in (0, 1):
        t = tel[str(k)]
        assert t["lcore"] == k + 1 and sorted(t["groups"]) == sorted(sh[k]["groups"]), tel
        for c in ("handoff_out", "handoff_in", "drop_handoff_full", "drop_handoff_nombuf"):
            assert t[c] == sh[k][c], (k, c, tel, sh)
        assert 0 < t["pool_avail"] <= sh[k]["pool_size"], (k, tel, sh)
    seen = [int(v) for v in re.findall(r" shards 2 strays (\d+)",
                                       rig.app_log.read_text())]
    assert seen and max(seen) <= strays and seen == sorted(seen), seen
    # interlink-exporter's scrape of the same moment: one series per shard and group.
    assert scrape.returncode == 0, scrape.stderr
    m = dict(re.findall(r'^(interlink_(?:shard|group_shard)\S*\{[^}]*\}) (\S+)$', scrape.stdout,
                        re.M))
    for k in (0, 1):
        lab = f'{{shard="{k}",lcore="{k + 1}"}}'
        assert float(m[f"interlink_shard_groups{lab}"]) == 2, m
        for c in ("handoff_out", "handoff_in", "drop_handoff_full", "drop_handoff_nombuf"):
            assert float(m[f"interlink_shard_{c}_total{lab}"]) == tel[str(k)][c], (c, m)
        assert float(m[f"interlink_shard_pool_avail{lab}"]) > 0, m
    for g, owner in OWNER.items():
        assert float(m[f'interlink_group_shard{{group="{g}"}}']) == owner, m


def test_two_shards_by_hash_each_group_on_its_queue_no_strays(tmp_path):
    """shards.assign: hash, and pktgen sending each group (and its NAKs) on the queue of its
    address: the assignment is the Toeplitz hash's, and no frame is a stray."""
    count = 60000
    assert {g: shard_by_hash(g) for g in OWNER} == OWNER  # both shards own groups
    with ShardRig(tmp_path, assign="hash") as rig:
        rc, log, res = rig.run_pktgen(
            "--tx-queue", "hash", "--senders", "4", "--groups", "4", "--receivers", "2",
            "--count", str(count), "--rate", "20000", "--size", "32", "--seed", "5",
            "--quiet")
        app = rig.stop_appliance()
    assert rc == 0, log
    check_one_order_per_group(app, res, log, count)
    sh = {s["shard"]: s for s in app["shards"]}
    assert sorted(sh[0]["groups"]) == [1, 3] and sorted(sh[1]["groups"]) == [2, 4]
    for k in (0, 1):
        assert sh[k]["handoff_out"] == sh[k]["handoff_in"] == sh[k]["drop_handoff_full"] == 0
    # Each shard received its own groups' frames on its own queue.
    assert app["stages"]["classify"]["data"] == app["stages"]["seq"]["stamped_frames"]
    assert app["stages"]["classify@1"]["data"] == app["stages"]["seq@1"]["stamped_frames"]


def test_two_shards_naks_served_by_the_owner(tmp_path):
    """With loss at the receivers: NAKs (sent on queue 0) of shard 1's groups are strays,
    answered from shard 1's history; every gap is repaired, every stray counted."""
    count = 60000
    with ShardRig(tmp_path) as rig:
        rc, log, res = rig.run_pktgen(
            "--tx-queue", "0", "--senders", "4", "--groups", "4", "--receivers", "2",
            "--count", str(count), "--rate", "20000", "--size", "32", "--seed", "9",
            "--loss", "bernoulli:0.002", "--quiet")
        app = rig.stop_appliance()
    assert rc == 0, log
    stamped = check_one_order_per_group(app, res, log, count)
    assert res["gaps"] > 20 and res["gaps_repaired"] == res["gaps"]
    sh = {s["shard"]: s for s in app["shards"]}
    data_strays = sum(f for g, (_, f) in stamped.items() if OWNER[g] == 1)
    naks1 = app["stages"]["nak@1"]["naks"]
    assert naks1 > 0 and app["stages"]["nak"]["naks"] > 0
    assert app["stages"]["nak@1"]["retransmitted_frames"] > 0
    # The strays are the DATA of shard 1's groups and their NAKs, and nothing was lost.
    assert sh[0]["handoff_out"] == sh[1]["handoff_in"]
    assert sh[0]["handoff_out"] == data_strays + naks1
    assert sh[0]["drop_handoff_full"] == 0


def test_shard_config_errors_name_the_key(tmp_path):
    """Checked at start, before any port exists: an lcore EAL does not run."""
    name = f"shbad{uuid.uuid4().hex[:8]}"
    try:
        p = subprocess.run(
            [str(INTERLINK), "--set", f"name={name}", "--set",
             'eal=[--no-huge, -m, "256", --lcores, "0@0,1@0", --log-level, "lib.eal:error"]',
             "--set", "shards={lcores: [1, 2]}",
             "--set", "ports.in.device=net_ring0", "--set", "ports.out.device=net_ring1"],
            capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(f"/var/run/dpdk/{name}", ignore_errors=True)
    assert p.returncode != 0
    assert "'shards.lcores[1]': 2 is not a worker lcore" in p.stderr + p.stdout


def test_list_shards_prints_the_assignment_before_starting(tmp_path):
    """`interlink --list-shards` (docs/scaling.md 1.2): every group's shard and lcore as the
    config and --set give them, the hashed ones equal to the Toeplitz hash written above,
    without EAL (no runtime directory is created)."""
    name = f"shlist{uuid.uuid4().hex[:8]}"
    groups = "[" + ", ".join(f"{{id: {g}, address: 239.1.1.{g}}}" for g in range(1, 9)) + "]"
    base = [str(INTERLINK), "--list-shards", "--set", f"name={name}", "--set",
            f"groups={groups}"]

    def rows(out):
        return {int(m[0]): (int(m[1]), int(m[2]), m[3]) for m in
                re.findall(r"^(\d+)\s+\S+\s+(\d+)\s+(\d+)\s+(hash|config)$", out, re.M)}

    p = subprocess.run(base + ["--set", "shards={lcores: [1, 2]}", "--set",
                               "ports.in.queues=2"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    got = rows(p.stdout)
    assert got == {g: (shard_by_hash(g), (1, 2)[shard_by_hash(g)], "hash") for g in range(1, 9)}
    assert "port in: 2 queues" in p.stdout and "port out: 1 queue, polled by shard 0" in p.stdout
    assert not os.path.exists(f"/var/run/dpdk/{name}")

    # assign: config, one group named, the others by hash; a --set list's keys named by
    # their place in errors.
    p = subprocess.run(base[:-1] + [
        "groups=[{id: 1, address: 239.1.1.1, shard: 1}, {id: 2, address: 239.1.1.2}]",
        "--set", "shards={lcores: [1, 5], assign: config}"],
        capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert rows(p.stdout) == {1: (1, 5, "config"), 2: (shard_by_hash(2), (1, 5)[shard_by_hash(2)],
                                                       "hash")}
    p = subprocess.run(base[:-1] + ["groups=[{id: 1, address: 239.1.1.1, shard: 2}]", "--set",
                                    "shards={lcores: [1, 2], assign: config}"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    assert "'groups[0].shard': 2 is not a shard" in p.stderr, p.stderr

    p = subprocess.run(base, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "no shards" in p.stdout, p.stdout + p.stderr


class UtoShardRig(UtoMemifRig):
    """configs/uto.yaml (classify, sequencer, control, nak) in two shards, each group's
    control frames and views on its owner's channel: interlink-control --shards 2 serves
    /dev/shm/...-chan.0 and .1 (docs/scaling.md 1.5)."""

    def __init__(self, tmp, ctl_args=()):
        super().__init__(tmp, ["--shards", "2", *ctl_args], app_sets=[
            'eal=[--no-huge, -m, "1024", --lcores, "0@1,1@1,2@0", --log-level, "lib.eal:error"]',
            "shards={lcores: [1, 2], assign: config, handoff_slots: 16384}",
            f"groups={GROUPS}", "ports.in.queues=2", "ports.out.queues=2"])
        self.app_cpu = "0,1"

    def pktgen_cmd(self, js, *args):
        cmd = super().pktgen_cmd(js, *args)
        i = cmd.index("--json")
        return cmd[:i] + ["--queues", "2", "--link-wait", "30"] + cmd[i:]

    def stop_appliance(self, check=True):
        try:
            return super().stop_appliance(check)
        finally:
            for k in range(8):  # as many as interlink-control --shards made
                Path(f"{self.chan}.{k}").unlink(missing_ok=True)


@pytest.mark.parametrize("queue", [0, 1])
def test_two_shards_each_with_its_control_channel(tmp_path, queue):
    """UTO in a sharded appliance: pktgen's emulated senders and receivers JOIN, ACK and
    HEARTBEAT in four groups, two per shard, every frame (control frames too) sent on queue
    `queue`, so the other shard's control frames are strays handed to their owner. Each
    shard's control stage talks for its own groups on its own channel; interlink-control
    --shards 2 keeps one membership and sends each group's views, watermarks and credits
    down its owner's channel. Asserted: complete, one order per group (pktgen's check),
    credits obeyed, every message stable at the control process, each group's view and
    watermark held by its owner's control stage alone, both channels used, nothing dropped
    for a wrong owner."""
    window, count = 256, 100000
    with UtoShardRig(tmp_path, ["--window", str(window), "--exclude-ms", "5000"]) as rig:
        rc, log, res = rig.run_pktgen("--uto", "--tx-queue", str(queue), "--senders", "2",
                                      "--receivers", "2", "--groups", "4", "--count",
                                      str(count), "--rate", "200000", "--quiet", timeout=90)
        groups = rig.groups()
        st = rig.status()
        scrape = subprocess.run([sys.executable, str(EXPORTER), "--once", "--appliance",
                                 f"app{rig.tag}", "--chan", rig.chan], capture_output=True,
                                text=True, timeout=60)
        app = rig.stop_appliance()
    ctl_log = (tmp_path / "control.log").read_text()
    assert app is not None, log
    # interlink-exporter: one series per channel.
    assert scrape.returncode == 0, scrape.stderr
    m = dict(re.findall(r'^(interlink_control_\S*\{[^}]*\}) (\S+)$', scrape.stdout, re.M))
    assert float(m['interlink_control_state{key="channels"}']) == 2, m
    for k in (0, 1):
        assert float(m[f'interlink_control_channel_events_total{{channel="{k}",counter="msgs"}}']) > 0
        assert float(m[f'interlink_control_channel_state{{channel="{k}",key="dp_incarnation"}}']) >= 1
    assert rc == 0 and res is not None and res["pass"], log + ctl_log
    assert res["delivered"] == res["expected"] == 2 * count, log
    assert res["disagreements"] == 0 and res["fifo_violations"] == 0, log
    u = res["uto"]
    assert u["views"] >= 4 and u["credits"] > 0 and 0 < u["max_unstable"] <= window, u
    assert u["exclusions"] == 0 and u["all_stable"], u
    for gi, g in enumerate(OWNER):
        assert groups.get(g, {}).get("watermark", 0) >= u["group_sent"][gi] + 1, (groups, u)
    # One control process, two channels, each used by its shard; nobody confused.
    assert st["channels"] == 2 and st["shard_mismatch"] == 0, st
    assert st["chan0_msgs"] > 0 and st["chan1_msgs"] > 0, st
    assert st["chan0_down_enqueued"] > 0 and st["chan1_down_enqueued"] > 0, st
    assert st["chan0_down_drops"] == st["chan1_down_drops"] == 0, st
    stages = app["stages"]
    for name, shard in (("ctrl", 0), ("ctrl@1", 1)):
        c = stages[name]
        assert c["shard"] == shard and c["control_attached"] == 1, c
        assert c["drop_not_owner"] == 0 and c["drop_unknown_group"] == 0, c
        assert c["down_bad"] == 0 and c["up_ack"] > 0 and c["up_join"] >= 2, c
        assert c["views"] >= 2 and c["watermarks"] > 0, c
        # Only its own groups' state: another shard's groups are not reported here.
        own = sorted(g for g, o in OWNER.items() if o == shard)
        assert sorted(int(k[5:].split("_")[0]) for k in c
                      if k.startswith("group") and k.endswith("_watermark")) == own, c
    # The other shard's control frames were handed over (besides its DATA).
    sh = {s["shard"]: s for s in app["shards"]}
    assert sh[1 - queue]["handoff_in"] > u["group_sent"][0] // 2, sh
    assert sh[0]["drop_handoff_full"] == sh[1]["drop_handoff_full"] == 0, sh
    print(f"\nqueue {queue}: {res['delivered']} delivered, views {u['views']}, credits "
          f"{u['credits']}, max unstable {u['max_unstable']}; channel 0: {st['chan0_msgs']} up, "
          f"{st['chan0_down_enqueued']} down; channel 1: {st['chan1_msgs']} up, "
          f"{st['chan1_down_enqueued']} down; handed over {sh[1 - queue]['handoff_in']}")


def test_control_for_a_sharded_appliance_needs_its_shards(tmp_path):
    """interlink-control started with --shards 3 beside a data plane of two shards: each
    shard's HELLO names its shard and the count, and the control process says how to start
    it (--shards 2) and counts the mismatch."""
    rig = UtoShardRig(tmp_path)
    rig.ctl_args = ["--shards", "3"]
    with rig:
        st = {}
        for _ in range(100):
            st = rig.status()
            if st.get("shard_mismatch", 0) >= 2:
                break
            time.sleep(0.1)
        rig.stop_appliance()
    ctl_log = (tmp_path / "control.log").read_text()
    assert st.get("shard_mismatch", 0) >= 2, st
    assert "says it is shard 0 of 2; this process serves 3 channels: start it with " \
           "--shards 2" in ctl_log, ctl_log
