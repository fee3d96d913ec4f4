"""Turn linerate.json into the "## Line rate (issue 3)" section of docs/benchmarks.md and
the docs/linerate-*.png plots. Only that section of the file is replaced."""
import re
from pathlib import Path

SECTION = "## Line rate (issue 3)"
LINE_RATE_64 = 14.88  # Mpps, 10 GbE, 64-byte frames


def name(case):
    c = f"{case['frame']} B {case['mode']}"
    if case.get("senders", 1) != 1 or case.get("receivers", 1) != 1:
        c += f", S{case.get('senders', 1)} R{case.get('receivers', 1)}"
    return c


def pct(a, b):
    return f"{100 * a / b:.0f}%" if b else "n/a"


def ratio(a, b):
    return f"{a / b:.1f}x" if b else "n/a"


def trio(r, digits=2):
    f = f"{{:.{digits}f}}"
    return " / ".join(f.format(r[k]) if k in r else "-" for k in ("ndr_mpps", "pdr_mpps", "mfr_mpps"))


def lat(l):
    if not l:
        return "-"
    return f"{l['p50']:.1f} / {l['p99']:.1f} / {l['p999']:.1f}"


def plots(res, docs):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    sw = res.get("sweep", {})
    if sw:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        style = {"appliance": ("tab:blue", "o"), "ceiling": ("tab:gray", "s"),
                 "kernel": ("tab:red", "^")}
        for dut, pts in sw.items():
            col, mk = style.get(dut, ("k", "x"))
            pts = sorted(pts, key=lambda p: p["fwd_mpps"])
            x = [p["fwd_mpps"] for p in pts]
            label = {"ceiling": "testpmd io (ceiling)", "kernel": "kernel sockets (kseq)"}.get(
                dut, "appliance")
            ax.plot(x, [p["latency"]["p50"] for p in pts], marker=mk, color=col,
                    label=f"{label} p50")
            ax.plot(x, [p["latency"]["p99"] for p in pts], marker=mk, color=col, ls="--",
                    label=f"{label} p99", alpha=0.7)
        ax.set_xlabel("throughput (Mpps forwarded, 64 B raw frames in)")
        ax.set_ylabel("latency generator -> DUT -> generator (us)")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title("Latency against throughput (offered-load sweep)")
        fig.tight_layout()
        p = Path(docs) / "linerate-latency.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        files.append(p)
    sizes = res.get("sizes", [])
    if sizes:
        fig, ax = plt.subplots(figsize=(7, 4))
        labels = [name(r["case"]) for r in sizes]
        xs = range(len(sizes))
        w = 0.2
        series = [("appliance NDR", [r["appliance"].get("ndr_mpps", 0) for r in sizes],
                   "tab:blue"),
                  ("appliance max", [r["appliance"]["mfr_mpps"] for r in sizes], "tab:cyan"),
                  ("testpmd io NDR", [r["ceiling"].get("ndr_mpps", 0) for r in sizes],
                   "tab:gray"),
                  ("testpmd io max", [r["ceiling"]["mfr_mpps"] for r in sizes], "silver")]
        for i, (lab, ys, col) in enumerate(series):
            ax.bar([x + (i - 1.5) * w for x in xs], ys, w, label=lab, color=col)
        if res.get("kernel"):
            ax.bar([-0.5], [res["kernel"].get("ndr_mpps", 0)], w, color="tab:red",
                   label="kernel NDR (64 B raw)")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels)
        ax.set_ylabel("Mpps")
        ax.legend(fontsize=7)
        ax.set_title("No-drop and maximum forwarding rates over net_memif, one core each")
        fig.tight_layout()
        p = Path(docs) / "linerate-throughput.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        files.append(p)
    return files


def section(res):
    m = res["machine"]
    L = [SECTION, ""]
    L.append(f"Measured {res['date']} with `{res['command']}` "
             f"({res['elapsed_s']:.0f} s, {len(res['trials'])} trials of {res['trial_s']:g} s) on "
             f"{m['cores']} cores of a {m['cpu']}, kernel {m['kernel']}, shared with other work "
             f"(load average {m['load_at_start'][0]:.1f} at the start). Raw results: "
             f"`bench/linerate/results/linerate.json`.")
    L.append("")
    L.append("""Wiring: `interlink-pktgen` on CPU 0 sends into the device under test on CPU 1 over one
`net_memif` link and receives what comes back over a second (memif rings of 4096 entries, the
depth of a NIC rx ring). Devices: the **appliance** (`interlink`, default pipeline: classify ->
sequencer -> nak), the **ceiling** (`dpdk-testpmd --forward-mode=io` on the same two memif server
ports: what memif and one core allow when nothing is done to a frame), and the **kernel
baseline** (`bench/linerate/kseq.c`: the same raw-mode sequencing job written with UDP sockets,
`recvmmsg`/`sendmmsg` in batches of 64, in a network namespace reached through two veth pairs
from pktgen's `net_af_packet` ports). Trials use `--check count` (every frame counted, the global
sequence checked for continuity, latency from the TX timestamp in each frame) and `--tx-drop`
(a frame the DUT's ring cannot take is lost, as on a wire, not retried).

**Maximum forwarding rate** (max): frames forwarded per second while the generator offers as fast
as it can. **No-drop rate** (NDR): the largest offered rate at which a trial loses nothing, found
as CSIT's MLRsearch does (first trial at the maximum forwarding rate, widen downwards until a
trial passes, then bisect to 3%).

Frame sizes are RFC 2544 sizes, FCS included (a "64 B" frame is 60 bytes handed to the PMD).
A native Interlink frame needs 14 + 20 + 8 + 40 + 4 bytes of headers plus 16 bytes of payload
(timestamp and tag): at least **106 B**, so 64 B frames are measured in **raw mode** (plain UDP to
the raw filter 239.1.1.100:9000; the appliance inserts the header and sends 108 B frames on), and
native mode at 106 B, 512 B and 1500 B (stamped in place, same size out). The ceiling forwards
the same frames unchanged, so at 64 B it moves 44 bytes less per frame than the appliance.""")
    L.append("")
    if res.get("generator"):
        L.append("### The generator alone")
        L.append("")
        L.append("| into | frames | Mpps sent (taken by the port) | Mpps built (taken or refused) | Gbit/s sent (wire) | 10 GbE line rate (14.88 Mpps at 64 B) |")
        L.append("|---|---|---|---|---|---|")
        for g in res["generator"]:
            sent = g.get("accepted_mpps", g["mpps"])
            met = ""
            if g["case"]["frame"] == 64:
                met = ("**met**" if sent >= LINE_RATE_64 else
                       f"missed by {100 * (1 - sent / LINE_RATE_64):.0f}%")
            L.append(f"| {g['into']} | {name(g['case'])} | {sent:.2f} | {g['mpps']:.2f} | {g['gbps']:.2f} | {met} |")
        L.append("")
    if res.get("sizes"):
        L.append("### Appliance against the ceiling (testpmd io), S1 R1")
        L.append("")
        L.append("| frames | appliance NDR / PDR / max Mpps | Gbit/s at max | testpmd io NDR / PDR / max Mpps | appliance / ceiling: NDR, PDR, max (paired) | appliance latency at NDR p50 / p99 / p99.9 us |")
        L.append("|---|---|---|---|---|---|")
        for r in res["sizes"]:
            a, c = r["appliance"], r["ceiling"]
            paired = (f"{100 * r['paired_max_ratio']:.0f}%" if "paired_max_ratio" in r
                      else pct(a["mfr_mpps"], c["mfr_mpps"]))
            L.append(f"| {name(r['case'])} | {trio(a)} | {a.get('mfr_gbps', 0):.2f} | {trio(c)} | "
                     f"{pct(a.get('ndr_mpps', 0), c.get('ndr_mpps', 0))}, "
                     f"{pct(a.get('pdr_mpps', 0), c.get('pdr_mpps', 0))}, "
                     f"**{paired}** | {lat(a.get('ndr_latency'))} |")
        L.append("")
        L.append("Max is the median of the trials offered as fast as the generator goes; the "
                 "appliance / ceiling ratio of max rates is the median over pairs of trials run "
                 "back to back (appliance, then testpmd io), which cancels most of the machine's "
                 "drifting load.")
        L.append("")
        k = res.get("kernel")
        if k:
            a = res["sizes"][0]["appliance"]
            L.append("### Appliance against the kernel-socket baseline (64 B raw, S1 R1)")
            L.append("")
            L.append("| device | NDR / PDR / max Mpps | latency at NDR p50 / p99 / p99.9 us |")
            L.append("|---|---|---|")
            L.append(f"| appliance | {trio(a)} | {lat(a.get('ndr_latency'))} |")
            L.append(f"| kernel (kseq) | {trio(k, 3)} | {lat(k.get('ndr_latency'))} |")
            L.append(f"| **appliance / kernel** | {ratio(a.get('ndr_mpps', 0), k.get('ndr_mpps', 0))} / "
                     f"{ratio(a.get('pdr_mpps', 0), k.get('pdr_mpps', 0))} / "
                     f"{ratio(a['mfr_mpps'], k['mfr_mpps'])} | |")
            L.append("")
        L.append("![throughput](linerate-throughput.png)")
        L.append("")
    for key, label in (("senders", "senders"), ("receivers", "receivers")):
        rows = res.get(key) or []
        if not rows:
            continue
        L.append(f"### {label.capitalize()} (appliance, 64 B raw)")
        L.append("")
        L.append(f"| {label} | NDR / PDR / max Mpps | max vs 1 {label[:-1]} | PDR vs 1 {label[:-1]} |")
        L.append("|---|---|---|---|")
        base = rows[0]["mfr_mpps"]
        for r in rows:
            n = r["case"].get(label, 1)
            pb = rows[0].get("pdr_mpps")
            pv = (f"{100 * (r['pdr_mpps'] / pb - 1):+.1f}%" if pb and "pdr_mpps" in r else "-")
            L.append(f"| {n} | {trio(r)} | {100 * (r['mfr_mpps'] / base - 1):+.1f}% | {pv} |")
        L.append("")
    if res.get("sweep"):
        L.append("### Offered-load sweep (64 B raw): latency against throughput")
        L.append("")
        L.append("| device | offered Mpps | forwarded Mpps | lost | p50 | p90 | p99 | p99.9 | max (us) |")
        L.append("|---|---|---|---|---|---|---|---|---|")
        for dut, pts in res["sweep"].items():
            for p in pts:
                l = p["latency"]
                L.append(f"| {dut} | {p['offered_mpps']:.3f} | {p['fwd_mpps']:.3f} | {p['lost']} | "
                         f"{l['p50']:.1f} | {l['p90']:.1f} | {l['p99']:.1f} | {l['p999']:.1f} | {l['max']:.1f} |")
        L.append("")
        L.append("![latency against throughput](linerate-latency.png)")
        L.append("")
    L.append("### Against the targets")
    L.append("")
    L.extend(verdicts(res))
    L.append("")
    notes = Path(__file__).resolve().parent / "NOTES.md"
    if notes.exists():
        L.append(notes.read_text().strip())
        L.append("")
    return "\n".join(L) + "\n"


def verdicts(res):
    out = []
    gen = [g for g in res.get("generator", []) if g["into"] == "net_null" and g["case"]["frame"] == 64]
    if gen:
        g = gen[0]["mpps"]
        out.append(f"- Generator from one core, 64 B: **{g:.2f} Mpps** into `net_null`: "
                   + ("met (>= 14.88)." if g >= LINE_RATE_64 else
                      f"missed by {100 * (1 - g / LINE_RATE_64):.0f}%."))
    if res.get("sizes"):
        r = res["sizes"][0]
        a, c = r["appliance"], r["ceiling"]
        an, cn = a.get("ndr_mpps", 0), c.get("ndr_mpps", 0)
        am, cm = a["mfr_mpps"], c["mfr_mpps"]
        line = (f"- Appliance at 64 B: NDR **{an:.2f} Mpps**, maximum forwarding rate **{am:.2f} "
                f"Mpps**; " + ("reaches" if an >= LINE_RATE_64 else "does not reach") +
                f" 14.88 Mpps (missed by {100 * (1 - max(an, am) / LINE_RATE_64):.0f}% even "
                "at the maximum rate). ")
        pr = r.get("paired_max_ratio", am / cm if cm else 0)
        if cn >= 0.1 * cm and cn > 0:
            line += (f"Against the ceiling: NDR {pct(an, cn)} of testpmd io's {cn:.2f} Mpps "
                     "(target 80%: " + ("met" if an / cn >= 0.8 else
                                       f"missed by {80 - 100 * an / cn:.0f} points") + ").")
        else:
            line += (f"Against the ceiling the NDR cannot be compared here: testpmd io's own NDR "
                     f"({cn:.2f} Mpps) is {pct(cn, cm)} of its maximum rate, i.e. the zero-loss "
                     f"search measured the machine's scheduling, not the devices. By maximum "
                     f"forwarding rate (median of paired trials) the appliance reaches "
                     f"**{100 * pr:.0f}%** of the ceiling (target 80%: " +
                     ("met" if pr >= 0.8 else f"missed by {80 - 100 * pr:.0f} points")
                     + ").")
        out.append(line)
        k = res.get("kernel")
        if k:
            kn, km = k.get("ndr_mpps", 0), k["mfr_mpps"]
            out.append(f"- Against the kernel-socket baseline at 64 B: NDR {an:.2f} vs {kn:.3f} Mpps "
                       f"= **{ratio(an, kn)}** (target 10x: "
                       + ("met" if kn and an / kn >= 10 else "missed") + f"); maximum forwarding rate "
                       f"{am:.2f} vs {km:.3f} Mpps = **{ratio(am, km)}** (target 10x: "
                       + ("met" if km and am / km >= 10 else "missed") + ").")
    rows = res.get("receivers") or []
    if len(rows) >= 2:
        d = 100 * (1 - rows[-1]["mfr_mpps"] / rows[0]["mfr_mpps"])
        mid = " -> ".join(f"{r['mfr_mpps']:.2f}" for r in rows)
        out.append(f"- Receivers 1 -> {rows[-1]['case']['receivers']}: maximum forwarding rate "
                   f"{mid} Mpps (medians of interleaved trials), a change of {-d:+.1f}% from 1 to "
                   f"{rows[-1]['case']['receivers']} (target: falls by no more than 10%: "
                   + ("met" if d <= 10 else f"missed by {d - 10:.0f} points") + ").")
    return out


def write(res, out, docs, write_docs):
    docs = Path(docs)
    files = plots(res, docs)
    text = section(res)
    (Path(out) / "linerate-section.md").write_text(text)
    print(text)
    if not write_docs:
        return
    bm = docs / "benchmarks.md"
    cur = bm.read_text()
    if SECTION in cur:
        start = cur.index(SECTION)
        nxt = re.search(r"^## ", cur[start + len(SECTION):], re.M)
        end = start + len(SECTION) + nxt.start() if nxt else len(cur)
        cur = cur[:start] + text + ("\n" if nxt else "") + cur[end:]
    elif "## Other benchmarks" in cur:
        i = cur.index("## Other benchmarks")
        cur = cur[:i] + text + "\n" + cur[i:]
    else:
        cur = cur.rstrip("\n") + "\n\n" + text
    bm.write_text(cur)
    print(f"wrote {bm} ({SECTION}) and {', '.join(str(f) for f in files)}")


if __name__ == "__main__":
    # Re-render the section and plots from saved results (after editing NOTES.md):
    #   /usr/bin/python3 bench/linerate/report.py bench/linerate/results/linerate.json
    import json
    import sys
    src = Path(sys.argv[1] if len(sys.argv) > 1 else
               Path(__file__).resolve().parent / "results" / "linerate.json")
    root = Path(__file__).resolve().parents[2]
    write(json.loads(src.read_text()), src.parent, root / "docs", True)
