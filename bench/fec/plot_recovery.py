#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Plot FEC recovery against loss (docs/fec.md, "Measured").

Reads the CSV printed by the recovery test and draws the paper's Fig. 8
comparison for (7,2) and (8,3): measured layered interleaving, its
closed-form lower bound, measured Reed-Solomon and RS's closed form.
With --bursts it also draws Fig. 13 and 14 from `--csv-bursts` output.

    build/tests/unit/fec/test_fec_recovery --csv > /tmp/fec-curves.csv
    build/tests/unit/fec/test_fec_recovery --csv-bursts > /tmp/fec-bursts.csv
    /usr/bin/python3 bench/fec/plot_recovery.py /tmp/fec-curves.csv \\
        --bursts /tmp/fec-bursts.csv --out docs/fec-recovery.png \\
        --bursts-out docs/fec-bursts.png

Needs matplotlib (Debian: python3-matplotlib, for /usr/bin/python3).
"""
import argparse
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def plot_curves(rows, out, title_note):
    series = defaultdict(list)
    for r in rows:
        key = (int(r["r"]), int(r["c"]))
        series[key].append(r)
    keys = sorted(series)
    fig, axes = plt.subplots(2, len(keys), figsize=(6 * len(keys), 8.5), squeeze=False)
    for col, (r, c) in enumerate(keys):
        pts = series[(r, c)]
        xor = sorted((float(p["p"]), p) for p in pts if p["code"] == "xor")
        rs = sorted((float(p["p"]), p) for p in pts if p["code"] == "rs")
        iv = xor[0][1]["interleaves"] if xor else ""
        lines = [
            (xor, "measured", "o-", "C0", f"layered I=({iv.replace(' ', ',')}), measured"),
            (xor, "closed_form", "--", "C0", "layered, closed-form lower bound"),
            (rs, "measured", "s-", "C3", "Reed-Solomon, measured"),
            (rs, "closed_form", ":", "C3", "Reed-Solomon, closed form"),
        ]
        for row, yscale in ((0, "linear"), (1, "log")):
            ax = axes[row][col]
            for data, field, style, color, label in lines:
                xs = [100 * p for p, _ in data]
                if yscale == "linear":
                    ys = [100 * float(d[field]) for _, d in data]
                else:
                    # Unrecovered fraction; a perfect run has none to plot.
                    left = [(100 * p, 100 * (1 - float(d[field])))
                            for p, d in data if float(d[field]) < 1]
                    xs = [x for x, _ in left]
                    ys = [y for _, y in left]
                ax.plot(xs, ys, style, color=color, label=label, markersize=4)
            ax.set_xscale("log")
            ax.set_yscale(yscale)
            ax.set_xlabel("loss rate (%), every link packet")
            if yscale == "linear":
                ax.set_ylabel("lost packets recovered (%)")
                ax.set_title(f"r={r}, c={c}: recovery (Maelstrom Fig. 8)")
                ax.set_ylim(60, 100.5)
                ax.legend(fontsize=8, loc="lower left")
            else:
                ax.set_ylabel("lost packets not recovered (%)")
                ax.set_title(f"r={r}, c={c}: what is left")
            ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(title_note, fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def plot_bursts(rows, out, title_note):
    fig, axes = plt.subplots(1, 3, figsize=(17, 5))
    f13 = defaultdict(list)
    f14 = defaultdict(list)
    for r in rows:
        if r["figure"] == "13":
            f13[r["interleaves"]].append((float(r["p"]), float(r["measured"])))
        else:
            f14[(r["interleaves"], r["delay"])].append(
                (int(r["burst"]), float(r["measured"]), float(r["lat_mean"])))
    ax = axes[0]
    for iv, pts in sorted(f13.items()):
        pts.sort()
        ax.plot([100 * p for p, _ in pts], [100 * m for _, m in pts], "o-",
                label=f"I=({iv.replace(' ', ',')})")
    ax.set_xscale("log")
    ax.set_xlabel("loss rate (%), bursts of 5")
    ax.set_ylabel("lost packets recovered (%)")
    ax.set_title("r=8, c=3: relatively prime interleaves (Fig. 13)")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    for (iv, delay), pts in sorted(f14.items()):
        pts.sort()
        label = f"I=({iv.replace(' ', ',')}){', delayed XOR' if delay == '1' else ''}"
        style = "s--" if delay == "1" else "o-"
        axes[1].plot([b for b, _, _ in pts], [100 * m for _, m, _ in pts], style, label=label)
        axes[2].plot([b for b, _, _ in pts], [lat for _, _, lat in pts], style, label=label)
    axes[1].set_xlabel("burst length (link packets), 0.1% loss")
    axes[1].set_ylabel("lost packets recovered (%)")
    axes[1].set_title("r=8, c=3: recovery against burst length (Fig. 14)")
    axes[2].set_xlabel("burst length (link packets), 0.1% loss")
    axes[2].set_ylabel("mean recovery latency (data packets)")
    axes[2].set_title("recovery latency (Fig. 14, bottom)")
    for ax in axes[1:]:
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
    fig.suptitle(title_note, fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("curves", help="CSV from test_fec_recovery --csv")
    ap.add_argument("--out", default="docs/fec-recovery.png")
    ap.add_argument("--bursts", help="CSV from test_fec_recovery --csv-bursts")
    ap.add_argument("--bursts-out", default="docs/fec-bursts.png")
    ap.add_argument("--note", default="Interlink FEC codec, simulated lossy link, "
                    "10^6 packets per point")
    args = ap.parse_args()
    plot_curves(read_rows(args.curves), args.out, args.note)
    if args.bursts:
        plot_bursts(read_rows(args.bursts), args.bursts_out, args.note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
