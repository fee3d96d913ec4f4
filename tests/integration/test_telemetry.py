"""The appliance's telemetry endpoints answer while it runs, also through the documented
dpdk-telemetry.py commands; SIGTERM stops it cleanly."""
import json
import re
import signal
import socket
import subprocess
import time

from conftest import ROOT
from harness import MemifRig


def telemetry(prefix, cmd):
    path = f"/var/run/dpdk/{prefix}/dpdk_telemetry.v2"
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.settimeout(5)
        s.connect(path)
        json.loads(s.recv(16384).decode())  # greeting: version, pid, max_output_len
        s.send(cmd.encode())
        return json.loads(s.recv(1 << 20).decode())[cmd.split(",")[0]]


def test_telemetry_and_sigterm(tmp_path):
    rig = MemifRig(tmp_path)
    with rig:
        rc, log, res = rig.run_pktgen("--count", "20000", "--rate", "100000", "--quiet")
        assert rc == 0, log
        prefix = f"app{rig.tag}"
        info = telemetry(prefix, "/interlink/info")
        assert info["name"] == prefix and info["groups"] == 3 and info["epoch"] > 0
        stats = telemetry(prefix, "/interlink/stats")
        assert stats["seq"]["stamped_msgs"] == 20000
        assert stats["seq"]["group1_next"] + stats["seq"]["group2_next"] == 20000 + 2
        assert stats["classify"]["data"] == 20000
        # One group's state in every stage that keeps some.
        g1 = telemetry(prefix, "/interlink/group,1")
        assert g1["id"] == 1 and g1["seq"]["next"] == stats["seq"]["group1_next"]
        assert telemetry(prefix, "/interlink/group,4242") is None  # no such group
        ports = telemetry(prefix, "/interlink/ports")
        assert ports["in"]["rx_packets"] >= 20000
        assert ports["out"]["tx_packets"] >= 20000
        # The layout: stage types, which stats keys are counters, the group ids.
        assert telemetry(prefix, "/interlink/stages") == {
            "classify": "classify", "seq": "sequencer", "nak": "nak"}
        counters = telemetry(prefix, "/interlink/counters")
        assert set(counters) == set(stats)
        for stage, names in counters.items():
            assert names[:2] == ["pkts_in", "cycles"] and len(set(names)) == len(names)
            assert set(names) <= set(stats[stage]), stage
        assert "stamped_msgs" in counters["seq"] and "naks" in counters["nak"]
        # State is not a counter.
        assert "group1_next" in stats["seq"] and "group1_next" not in counters["seq"]
        assert telemetry(prefix, "/interlink/groups") == [1, 2, 100]
        # SIGTERM: a clean stop with the summary written.
        rig.app.send_signal(signal.SIGTERM)
        assert rig.app.wait(timeout=20) == 0
        summary = json.loads(rig.app_json.read_text())
        assert summary["messages_ordered"] == 20000
        assert "interlink summary" in rig.app_log.read_text()


def documented_telemetry_commands():
    """The non-interactive dpdk-telemetry.py commands of operations.md and the README."""
    ops = (ROOT / "docs" / "operations.md").read_text()
    block = ops[ops.index("## Telemetry"):].split("```\n", 1)[1].split("```", 1)[0]
    cmds = [line.split("#")[0].strip() for line in block.splitlines()]
    cmds = [c for c in cmds if c.startswith("echo ")]
    readme = (ROOT / "README.md").read_text()
    cmds += [c.replace("-f interlink", "-f NAME")
             for c in re.findall(r"`(echo /interlink/\S+ \| dpdk-telemetry.py -f interlink)`", readme)]
    assert len(cmds) == 2, cmds
    return cmds


def test_documented_dpdk_telemetry_command(tmp_path):
    """`dpdk-telemetry.py -f` takes the file prefix (the config's name): the commands exactly as
    the docs print them, with the name filled in, answer with the appliance's counters."""
    cmds = documented_telemetry_commands()
    with MemifRig(tmp_path) as rig:
        rc, log, res = rig.run_pktgen("--count", "5000", "--rate", "100000", "--quiet")
        assert rc == 0, log
        prefix = f"app{rig.tag}"
        for cmd in cmds:
            p = subprocess.run(["bash", "-c", cmd.replace("NAME", prefix)], capture_output=True,
                               text=True, timeout=60)
            assert p.returncode == 0, p.stdout + p.stderr
            key = cmd.split()[1]
            answer = json.loads(p.stdout.strip().splitlines()[-1])[key]
            assert answer["seq"]["stamped_msgs"] == 5000, answer
