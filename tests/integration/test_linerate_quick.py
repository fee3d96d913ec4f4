"""A smoke run of the line-rate harness (scripts/bench-linerate.sh --quick): one short point
of each kind runs end to end, produces its report and plots, and leaves no process, network
namespace, veth pair or DPDK runtime directory behind. No rate is asserted here: the figures
belong in docs/benchmarks.md."""
import json
import os
import subprocess
from pathlib import Path

from conftest import BUILD, ROOT


def namespaces():
    p = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return {l.split()[0] for l in p.stdout.splitlines() if l.startswith("ilk")}


def links():
    p = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True)
    return {l.split(":")[1].strip().split("@")[0] for l in p.stdout.splitlines()
            if ": ilk" in l}


def dpdk_dirs():
    d = Path("/var/run/dpdk")
    return {p.name for p in d.iterdir() if p.name.startswith("lr")} if d.exists() else set()


def test_quick_harness_runs_and_cleans_up(tmp_path):
    before = (namespaces(), links(), dpdk_dirs())
    env = dict(os.environ, IL_BUILD=str(BUILD))
    p = subprocess.run([str(ROOT / "scripts" / "bench-linerate.sh"), "--quick",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=240,
                       env=env)
    log = p.stdout + p.stderr
    assert p.returncode == 0, log
    res = json.loads((tmp_path / "linerate.json").read_text())
    assert res["quick"]
    # every kind of point ran and measured something
    assert res["generator"][0]["mpps"] > 0
    row = res["sizes"][0]
    assert row["case"] == {"mode": "raw", "frame": 64}
    for dut in ("appliance", "ceiling"):
        assert row[dut]["mfr_mpps"] > 0, log
        assert "ndr_mpps" in row[dut] and "pdr_mpps" in row[dut]
    assert res["kernel"]["mfr_mpps"] > 0, log
    assert res["senders"][0]["case"]["senders"] == 8
    assert res["receivers"][0]["case"]["receivers"] == 8
    assert set(res["sweep"]) == {"appliance", "ceiling", "kernel"}
    for pts in res["sweep"].values():
        assert pts[0]["latency"]["samples"] > 0
    # the appliance's output is sequenced frames, so its trials count stamped DATA
    assert any(t["dut"] == "appliance" and t["rx_data"] > 0 for t in res["trials"])
    # the report and the plots (written beside the results, not into docs/, in quick mode)
    text = (tmp_path / "linerate-section.md").read_text()
    assert text.startswith("## Line rate (issue 3)") and "### Against the targets" in text
    for png in ("linerate-latency.png", "linerate-throughput.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # nothing left behind
    assert (namespaces(), links(), dpdk_dirs()) == before
    assert "lrgen" not in subprocess.run(["ps", "-eo", "args"], capture_output=True,
                                         text=True).stdout
