"""Shared fixtures: where the binaries are, and how to run the appliance on pcap files."""
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("IL_BUILD", ROOT / "build")).resolve()
# The Scapy layers are the package in python/ (pip-installable, docs/scapy-wireshark.md); the
# tests use the tree's copy, installed or not.
sys.path.insert(0, str(ROOT / "python"))

INTERLINK = BUILD / "dataplane" / "interlink"
PKTGEN = BUILD / "pktgen" / "interlink-pktgen"
WIRE_DUMP = BUILD / "tools" / "il-wire-dump"


def pytest_configure(config):
    for b in (INTERLINK, PKTGEN, WIRE_DUMP):
        if not b.exists():
            pytest.exit(f"{b} is missing: build first (meson setup build && ninja -C build)", 2)


@pytest.fixture
def run_pcap(tmp_path):
    """Run the appliance once over pcap ports and return what it sent.

    frames_in go in on port "in", frames_out_side on port "out". The result has
    .out (frames sent on "out"), .back (frames sent on "in"), .summary (the JSON
    summary), .rc and .log.
    """
    from scapy.utils import rdpcap, wrpcap

    class Result:
        pass

    def run(frames_in, frames_out_side=(), sets=(), expect_rc=0, idle_ms=300):
        tag = uuid.uuid4().hex[:8]
        fin, fout = tmp_path / f"in-{tag}.pcap", tmp_path / f"outside-{tag}.pcap"
        tx_in, tx_out = tmp_path / f"tx-in-{tag}.pcap", tmp_path / f"tx-out-{tag}.pcap"
        js = tmp_path / f"summary-{tag}.json"
        wrpcap(str(fin), list(frames_in))
        wrpcap(str(fout), list(frames_out_side))
        cmd = [str(INTERLINK), "-q", "--idle-exit", str(idle_ms), "--json", str(js),
               "--set", f"name=conf{tag}",
               "--set", f"ports.in.device=net_pcap0,rx_pcap={fin},tx_pcap={tx_in}",
               "--set", f"ports.out.device=net_pcap1,rx_pcap={fout},tx_pcap={tx_out}",
               "--set", 'eal=[--no-huge, -m, "256", --lcores, "0,1", --log-level, "lib.eal:error"]']
        for s in sets:
            cmd += ["--set", s]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        finally:
            shutil.rmtree(f"/var/run/dpdk/conf{tag}", ignore_errors=True)
        r = Result()
        r.rc, r.log = p.returncode, p.stdout + p.stderr
        assert p.returncode == expect_rc, r.log
        if expect_rc != 0:
            return r
        r.out = list(rdpcap(str(tx_out))) if tx_out.exists() else []
        r.back = list(rdpcap(str(tx_in))) if tx_in.exists() else []
        r.summary = json.loads(js.read_text())
        return r

    return run
