#!/usr/bin/python3
"""UTO throughput of an active/standby pair against a single appliance (docs/ha.md, "Measured").

The rig of tests/integration/harig.py: two switches (bridges), appliance a on CPU 1 (its
lcores), il-uto-members (2 senders, R receivers, as fast as their credit windows allow) and
the control processes on CPU 0. Three set-ups, runs taken round-robin:

  single   appliance a alone, configs/uto.yaml (no ha stage), interlink-control without HA
  ha-alone appliance a with configs/ha.yaml, active, its standby b not started (the cost of
           the ha stage and of etcd-committed views)
  pair     a active and b standby (CPU 0, sleeping 100 us when its ports are empty), both
           on both switches: b consumes every frame a forwards and every host frame, and
           keeps its shadow

Usage (root): IL_BUILD=build /usr/bin/python3 bench/ha/pair_bench.py [--reps N] [--count N]
       [--receivers R] [--out FILE]
Prints a Markdown table; --out writes the runs as JSON."""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
os.environ.setdefault("IL_BUILD", str(ROOT / "build"))

from harig import PairRig  # noqa: E402

CTL = ["--suspect-ms", "500", "--exclude-ms", "4000", "--window", "256"]
MODES = {"single": dict(nodes=("a",), ha=False), "ha-alone": dict(nodes=("a",), ha=True),
         "pair": dict(nodes=("a", "b"), ha=True)}


def run(mode, receivers, count):
    with tempfile.TemporaryDirectory(prefix="ilpair") as d:
        tmp = Path(d)
        with PairRig(tmp, 0, CTL, members_links=True, **MODES[mode]) as rig:
            if rig.use_ha and rig.active() != "a":
                raise RuntimeError(f"{mode}: a is not the active appliance")
            p = rig.members("--senders", "2", "--receivers", str(receivers), "--count",
                            str(count), "--window", "256", "--need-credit", "--size", "64",
                            "--max-s", "60", "--no-check")
            out, _ = p.communicate(timeout=120)
            res = json.loads(p.json.read_text()) if p.json.exists() else None
            ha_b = rig.ha("b") if mode == "pair" else {}
        if res is None or p.returncode != 0:
            raise RuntimeError(f"{mode}: il-uto-members failed: {out}")
        if mode == "pair" and ha_b.get("role") != "standby":
            raise RuntimeError(f"pair: b is {ha_b.get('role')}, not standby")
        return res["throughput_msgs_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--count", type=int, default=200_000, help="messages per sender")
    ap.add_argument("--receivers", type=int, default=3)
    ap.add_argument("--modes", default="single,ha-alone,pair")
    ap.add_argument("--out")
    a = ap.parse_args()
    modes = a.modes.split(",")
    runs = {m: [] for m in modes}
    t0 = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    for rep in range(a.reps):
        for m in (modes if rep % 2 == 0 else modes[::-1]):
            v = run(m, a.receivers, a.count)
            runs[m].append(v)
            print(f"rep {rep + 1} {m}: {v:.0f} msg/s", flush=True)
    base = statistics.median(runs[modes[0]])
    print(f"\n{a.reps} runs per set-up, 2 senders x {a.count} messages of 64 B, "
          f"{a.receivers} receivers, started {t0}, load average {os.getloadavg()[0]:.1f} at "
          f"the end\n")
    print(f"| set-up | median msg/s | runs | vs {modes[0]} |\n|---|---|---|---|")
    for m in modes:
        med = statistics.median(runs[m])
        print(f"| {m} | {med:.0f} | {', '.join(f'{v:.0f}' for v in runs[m])} | "
              f"{med / base:.3f} |")
    if a.out:
        Path(a.out).write_text(json.dumps({"started": t0, "count": a.count,
                                           "receivers": a.receivers, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
