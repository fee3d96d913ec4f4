#!/usr/bin/python3
"""docs/lec-repair-lcore-2026-11-28.png from bench_lec_stage's JSON output (docs/lec.md, "A repair
lcore"): the forwarding lcore's rate without LEC, with the lec stage on it, and with a repair
lcore, per number of groups; and each side's cycles per packet.

  /usr/bin/python3 bench/lec/plot_repair_lcore.py OUT.png RESULTS.json [RESULTS.json ...]"""
import json
import statistics
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

GROUPS = {0: 1, 1: 16, 2: 128}


def medians(files):
    got = {}
    for f in files:
        for b in json.load(open(f))["benchmarks"]:
            if b.get("aggregate_name") != "median":
                continue
            name = b["run_name"].replace("/manual_time", "")
            got.setdefault(name, []).append(b)
    return got


def value(got, prefix, key):
    v = [b[key] for n, bs in got.items() if n.startswith(prefix) for b in bs if key in b]
    return statistics.median(v) if v else 0


def main():
    out, files = sys.argv[1], sys.argv[2:]
    got = medians(files)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    x = list(range(3))
    w = 0.27
    for k, (lec, label) in enumerate([(0, "no LEC"), (3, "lec on the forwarding lcore"),
                                      (4, "lec with a repair lcore")]):
        y = [value(got, f"BM_Forward/layout:{li}/lec:{lec}", "fwd_mpps") for li in x]
        a.bar([i + (k - 1) * w for i in x], y, w, label=label)
    a.set_xticks(x, [f"{GROUPS[i]} group{'s' if GROUPS[i] > 1 else ''}" for i in x])
    a.set_ylabel("Mpps forwarded by one lcore (1 KB frames)")
    a.set_title("Forwarding with appliance-side LEC at (8, 5)")
    a.legend(fontsize=8)
    inl = [value(got, f"BM_LecStage/layout:{li}/size:1024/chained:1/plan:2", "lec_cyc") for li in x]
    front = [value(got, f"BM_LecRepairLcore/layout:{li}", "lec_cyc") for li in x]
    svc = [value(got, f"BM_LecRepairLcore/layout:{li}", "svc_cyc") for li in x]
    b.bar([i - w for i in x], inl, w, label="lec stage, one lcore")
    b.bar(x, front, w, label="repair lcore: the forwarding lcore's part")
    b.bar([i + w for i in x], svc, w, label="repair lcore: its own part")
    b.axhline(30e-9 * 2.3e9, color="k", ls="--", lw=0.8, label="30 ns at 2.3 GHz")
    b.set_xticks(x, [f"{GROUPS[i]}" for i in x])
    b.set_xlabel("groups")
    b.set_ylabel("TSC cycles per data packet")
    b.set_title("Where LEC's cycles go")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
