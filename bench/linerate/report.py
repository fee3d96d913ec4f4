"""Turn linerate.json into the "## Line rate" section of docs/benchmarks.md and the
docs/linerate-*.png plots. Only that section of the file is replaced.

  /usr/bin/python3 bench/linerate/report.py [bench/linerate/results/linerate.json]

re-renders them from saved results (after editing NOTES.md)."""
import re
from pathlib import Path

import frames
import tpgen

SECTION = "## Line rate"
TARGETS = {("raw", 64): 0.75, ("native", 106): 0.9}  # appliance / testpmd io
STYLE = {"appliance": ("tab:blue", "o"), "ceiling": ("tab:gray", "s"),
         "appliance-afp": ("tab:cyan", "D"), "afpseq": ("tab:orange", "v"),
         "kseq": ("tab:red", "^")}
LABEL = {"appliance": "appliance (memif)", "ceiling": "testpmd io (memif)",
         "appliance-afp": "appliance (af_packet, veth)",
         "afpseq": "afpseq (AF_PACKET rings, veth)", "kseq": "kseq (UDP sockets, veth)"}


def name(case):
    c = f"{case['frame']} B {case['mode']}"
    if case.get("senders", 1) != 1 or case.get("receivers", 1) != 1:
        c += f", S{case.get('senders', 1)} R{case.get('receivers', 1)}"
    return c


def inout(case):
    o = frames.out_frame(case)
    return f"{case['frame']} B {case['mode']}" + (f" (out {o} B)" if o != case["frame"] else "")


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


def bound(r):
    return "device" if r.get("saturated") else "**generator**"


def pair_ratio(p):
    if p["n_valid"]:
        lo, hi = p["ratio_valid_range"]
        ge = ">= " if p["valid_lower"] else ""
        return f"**{ge}{100 * p['ratio_valid_median']:.0f}%** ({100 * lo:.0f}-{100 * hi:.0f}%)"
    if p["ratio_upper_bound"] is not None:
        return f"invalid; at most {100 * p['ratio_upper_bound']:.0f}%"
    return "invalid; no bound"


def one_ratio(r):
    return {"exact": f"{100 * r['ratio']:.0f}%",
            "lower": f">= {100 * r['ratio']:.0f}%",
            "upper": f"invalid; <= {100 * r['ratio']:.0f}%",
            "none": "invalid; no bound"}[r["bound"]]


def pktgen_table(title, rows, digits, extra=None, extra_of=None):
    """Devices measured with interlink-pktgen: its offered rate beside their rates."""
    L = [f"### {title}", "",
         "| device | offered max Mpps | NDR / PDR / max Mpps | bound by | latency at NDR "
         "p50 / p99 / p99.9 us |" + (f" {extra} |" if extra else ""),
         "|---|---|---|---|---|" + ("---|" if extra else "")]
    for n, r in rows.items():
        L.append(f"| {n} | {r['offered_max_mpps']:.{digits}f} | {trio(r, digits)} | {bound(r)} | "
                 f"{lat(r.get('ndr_latency'))} |" + (f" {extra_of(n, r)} |" if extra else ""))
    return L + [""]


def plots(res, docs):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    sw = res.get("sweep", {})
    if sw:
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        for dut, pts in sw.items():
            col, mk = STYLE.get(dut, ("k", "x"))
            pts = sorted(pts, key=lambda p: p["fwd_mpps"])
            x = [p["fwd_mpps"] for p in pts]
            ax.plot(x, [p["latency"]["p50"] for p in pts], marker=mk, color=col,
                    label=f"{LABEL.get(dut, dut)} p50")
            ax.plot(x, [p["latency"]["p99"] for p in pts], marker=mk, color=col, ls="--",
                    label=f"{LABEL.get(dut, dut)} p99", alpha=0.7)
        ax.set_xlabel("throughput (Mpps forwarded, 64 B raw frames in)")
        ax.set_ylabel("latency generator -> device -> generator (us)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6)
        ax.set_title("Latency against throughput (interlink-pktgen, offered-load sweep)")
        fig.tight_layout()
        p = Path(docs) / "linerate-latency.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        files.append(p)
    paired = res.get("paired", [])
    if paired:
        veth = res.get("veth") or {}
        fig, axes = plt.subplots(1, 2 if veth else 1, figsize=(11 if veth else 7, 4.2),
                                 squeeze=False, gridspec_kw={"width_ratios": [2, 1]} if veth
                                 else None)
        ax = axes[0][0]
        xs = range(len(paired))
        # Every session, not medians: on a shared machine the generator's own rate swings
        # from one session to the next, and a median of generator-bound sessions means little.
        for di, (dut, col) in enumerate((("appliance", "tab:blue"), ("ceiling", "dimgray"))):
            for x, p in zip(xs, paired):
                for j, r in enumerate(p["pairs"]):
                    w = r[dut]
                    px = x + (di - 0.5) * 0.4 + (j - (len(p["pairs"]) - 1) / 2) * 0.08
                    ax.vlines(px, w["fwd_mpps"], w["offered_mpps"], color=col, lw=1, alpha=0.6)
                    ax.plot([px], [w["fwd_mpps"]], "o", color=col, ms=6,
                            mfc=col if w["saturated"] else "white")
            ax.plot([], [], "o", color=col, label=f"{LABEL[dut]}: forwarded (device set the rate)")
            ax.plot([], [], "o", color=col, mfc="white", label=f"{LABEL[dut]}: forwarded "
                                                               "(generator set the rate)")
        ax.vlines([], 0, 0, color="k", lw=1, label="line up to the generator's offered rate")
        for x, p in zip(xs, paired):
            txt = (f"{100 * p['ratio_valid_median']:.0f}%" if p["n_valid"] else
                   f"invalid, <= {100 * p['ratio_upper_bound']:.0f}%"
                   if p["ratio_upper_bound"] is not None else "invalid")
            top = max(max(r[d]["offered_mpps"] for d in ("appliance", "ceiling"))
                      for r in p["pairs"])
            ax.annotate(txt, (x, top * 1.04), ha="center", fontsize=8)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([name(p["case"]) for p in paired], fontsize=8)
        ax.set_ylabel("Mpps")
        ax.legend(fontsize=6, loc="upper right")
        ax.set_ylim(bottom=0)
        ax.set_title("Maximum forwarding rate per session, testpmd generator\n(ratio appliance "
                     "/ testpmd io; invalid where testpmd io took all offered)", fontsize=9)
        if veth:
            ax = axes[0][1]
            names = list(veth)
            ax.bar(range(len(names)), [veth[n]["mfr_mpps"] for n in names],
                   color=[STYLE.get(n, ("k",))[0] for n in names], label="max")
            ax.bar(range(len(names)), [veth[n].get("ndr_mpps", 0) for n in names], 0.4,
                   color="k", alpha=0.5, label="no-drop")
            ax.set_xticks(range(len(names)))
            ax.set_xticklabels(names, fontsize=8)
            ax.set_ylabel("Mpps")
            ax.legend(fontsize=7)
            ax.set_title("Same job on veth pairs, 64 B raw\n(interlink-pktgen)", fontsize=9)
        fig.tight_layout()
        p = Path(docs) / "linerate-throughput.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        files.append(p)
    return files


WIRING = """Devices under test, on CPU {dut} while the generators run on CPU {gen}:

- **appliance**: `interlink`, default pipeline (classify -> sequencer -> nak);
- **ceiling**: `dpdk-testpmd --forward-mode=io` on the same ports: what the wiring and one core
  allow when nothing is done to a frame;
- on two veth pairs into a network namespace (raw UDP in on one, sequenced frames out on the
  other), the same raw-mode job three ways: **appliance-afp** (the appliance through DPDK's
  `net_af_packet` ports), **afpseq** (`bench/linerate/afpseq.c`: one AF_PACKET socket with
  mmap'ed TPACKET_V2 receive and transmit rings, batches of 64, one `sendto()` per batch, qdisc
  bypassed: the kernel path at its best short of XDP) and **kseq** (`bench/linerate/kseq.c`: UDP
  sockets, `recvmmsg`/`sendmmsg` in batches of 64).

Generators:

- **testpmd** (saturating, transmit only): `dpdk-testpmd --forward-mode=txonly` for raw UDP
  (`--txpkts` = frame - 4, UDP checksum 0), `--forward-mode=io` from a `net_pcap` port replaying
  one native frame from memory for native frames (txonly cannot write an Interlink header). It
  writes into the device's `in` memif ring as fast as the ring takes frames and counts what the
  ring refuses: **offered** = taken + refused. The device's own port counters (DPDK telemetry)
  give **forwarded**. The device's output goes to {paired_out}.
  Where a device forwards more than {keep:.0f}% of what was offered, the generator set the rate
  (**generator-bound**): a ratio whose ceiling trial is generator-bound is **invalid** (the true
  ceiling is higher, so the ratio shown is an upper bound).
- **interlink-pktgen** (checking): sends and receives on one core, counts every frame, checks the
  global sequence for continuity and takes latency from a TX timestamp in each frame (`--check
  count`, `--tx-drop`: a frame the device's ring cannot take is lost, as on a wire). It cannot
  saturate a device as cheap as testpmd io; it gives the no-drop rates (NDR: zero loss; PDR: at
  most 0.5% lost; found as FD.io CSIT's MLRsearch does), latency, and the veth devices, which it
  does saturate.

Frame sizes are RFC 2544 sizes, FCS included (a 64 B frame is 60 bytes handed to the PMD);
Gbit/s count 20 more bytes per frame (preamble, start delimiter, inter-frame gap). Raw mode: 64 B
of plain UDP (Ethernet 14 + IPv4 20 + UDP 8 + 18 B payload + FCS 4) to the raw filter
239.1.1.100:9000; the appliance inserts the 40-byte header and a 4-byte message record and sends
**108 B** frames on. Native mode: at least 14 + 20 + 8 + 40 + 4 + 16 (a sender's timestamp and
tag) + 4 = **106 B**, stamped in place, same size out. testpmd io forwards every frame
unchanged, so at 64 B raw it moves 44 bytes less per frame than the appliance."""


def section(res):
    m = res["machine"]
    L = [SECTION, ""]
    L.append(f"Measured {res['date']} with `{res['command']}` ({res['elapsed_s']:.0f} s) on "
             f"{m['cores']} cores of a {m['cpu']}, kernel {m['kernel']}, shared with other "
             f"work (load average {m['load_at_start'][0]:.1f} at the start). Raw results: "
             f"`bench/linerate/results/linerate.json`.")
    if res.get("quick"):
        L.append("")
        L.append("**A quick run**: one short pair per kind, a smoke test of the harness. Its "
                 "figures are not measurements and it gives no verdicts.")
    L.append("")
    po = ("a memif ring read by testpmd rxonly on a CPU of its own"
          if res.get("paired_out", "").startswith("memif") else
          "`net_null` inside the device (the frame is freed where a NIC frees it once sent; "
          "on two cores there is no third CPU for a process that reads a ring)")
    L.append(WIRING.format(dut=res["cpus"]["device"], gen=res["cpus"]["generator"],
                           paired_out=po, keep=100 * (1 - res["margin"])))
    L.append("")
    gens = res.get("generator") or []
    if gens:
        L.append("### The generators alone")
        L.append("")
        L.append("| generator | frames | into | offered Mpps | taken Mpps |")
        L.append("|---|---|---|---|---|")
        for g in gens:
            L.append(f"| {g['generator']} | {name(g['case'])} | {g['into']} | "
                     f"{g['offered_mpps']:.2f} | {g['taken_mpps']:.2f} |")
        L.append("")
    paired = res.get("paired") or []
    if paired:
        L.append("### Appliance against the ceiling (testpmd generator)")
        L.append("")
        L.append(f"Per frame size, {res['pairs']} pair(s) of sessions (appliance, then testpmd "
                 f"io), each the median of {res['windows']} window(s) of {res['window_s']:g} s; "
                 "the ratio is the median over the valid pairs (range in brackets).")
        L.append("")
        L.append("| frames | appliance: offered / forwarded Mpps (medians) | Gbit/s out | "
                 "testpmd io: offered / forwarded Mpps (medians) | appliance / testpmd io | "
                 "valid pairs | appliance cycles per frame by stage |")
        L.append("|---|---|---|---|---|---|---|")
        for p in paired:
            a, c = p["appliance"], p["ceiling"]
            cyc = ", ".join(f"{k} {v:.0f}" for k, v in (a.get("cycles_per_frame") or {}).items())
            L.append(f"| {inout(p['case'])} | {a['offered_mpps']:.2f} / {a['fwd_mpps']:.2f} | "
                     f"{frames.wire_gbps(a['fwd_mpps'], p['out_frame']):.2f} | "
                     f"{c['offered_mpps']:.2f} / {c['fwd_mpps']:.2f} | {pair_ratio(p)} | "
                     f"{p['n_valid']} of {p['n_pairs']} | {cyc or '-'} |")
        L.append("")
        L.append("Every pair, with the generator's offered rate beside each figure:")
        L.append("")
        L.append("| frames | pair | appliance offered / forwarded (refused) | bound by | "
                 "testpmd io offered / forwarded (refused) | bound by | ratio |")
        L.append("|---|---|---|---|---|---|---|")
        for p in paired:
            for i, r in enumerate(p["pairs"]):
                a, c = r["appliance"], r["ceiling"]
                L.append(f"| {name(p['case'])} | {i + 1} | {a['offered_mpps']:.2f} / "
                         f"{a['fwd_mpps']:.2f} ({100 * a['refused']:.0f}%) | {bound(a)} | "
                         f"{c['offered_mpps']:.2f} / {c['fwd_mpps']:.2f} "
                         f"({100 * c['refused']:.0f}%) | {bound(c)} | {one_ratio(r)} |")
        L.append("")
        L.append("![throughput](linerate-throughput.png)")
        L.append("")
    fec = res.get("fec") or []
    if fec:
        L.append("### The FEC link pair against plain forwarding (testpmd generator, 1500 B)")
        L.append("")
        L.append("Both ends of a link pair in one appliance (`fec_enc -> impair -> fec_dec`, "
                 "the impairment passing everything) against the same appliance forwarding "
                 "with no stage, in alternating sessions; the decoder keeps received packets "
                 "by reference (`hold: ref`, the default) or copies them (`hold: copy`).")
        L.append("")
        L.append("| decoder | pair | link pair offered / forwarded (refused) | bound by | "
                 "plain offered / forwarded (refused) | bound by | link pair / plain | "
                 "cycles per frame by stage |")
        L.append("|---|---|---|---|---|---|---|---|")
        for p in fec:
            for i, r in enumerate(p["pairs"]):
                a, c = r["appliance"], r["ceiling"]
                cyc = ", ".join(f"{k} {v:.0f}" for k, v in
                                (a.get("cycles_per_frame") or {}).items())
                L.append(f"| {p.get('hold', '?')} | {i + 1} | {a['offered_mpps']:.2f} / "
                         f"{a['fwd_mpps']:.2f} ({100 * a['refused']:.0f}%) | {bound(a)} | "
                         f"{c['offered_mpps']:.2f} / {c['fwd_mpps']:.2f} "
                         f"({100 * c['refused']:.0f}%) | {bound(c)} | {one_ratio(r)} | "
                         f"{cyc or '-'} |")
        L.append("")
    veth = res.get("veth") or {}
    if veth:
        base = veth.get("appliance-afp", {}).get("mfr_mpps", 0)
        L.extend(pktgen_table(
            "The same job on veth pairs: the appliance and the kernel baselines "
            "(interlink-pktgen, 64 B raw)", veth, 3, "appliance-afp / device (max)",
            lambda n, r: ratio(base, r["mfr_mpps"]) if n != "appliance-afp" else "-"))
    if res.get("memif"):
        L.extend(pktgen_table("Over memif with a receiver that checks every frame "
                              "(interlink-pktgen, 64 B raw)", res["memif"], 2))
    for key in ("senders", "receivers"):
        rows = res.get(key) or []
        if not rows:
            continue
        L.append(f"### {key.capitalize()} (appliance over memif, 64 B raw, interlink-pktgen)")
        L.append("")
        L.append(f"| {key} | offered max Mpps | max Mpps | max vs 1 {key[:-1]} |")
        L.append("|---|---|---|---|")
        base = rows[0]["mfr_mpps"]
        for r in rows:
            L.append(f"| {r['case'].get(key, 1)} | {r['offered_max_mpps']:.2f} | "
                     f"{r['mfr_mpps']:.2f} | {100 * (r['mfr_mpps'] / base - 1):+.1f}% |")
        L.append("")
    if res.get("sweep"):
        L.append("### Offered-load sweep (64 B raw, interlink-pktgen): latency against "
                 "throughput")
        L.append("")
        L.append("| device | offered Mpps | forwarded Mpps | lost | p50 | p90 | p99 | p99.9 | "
                 "max (us) |")
        L.append("|---|---|---|---|---|---|---|---|---|")
        for dut, pts in res["sweep"].items():
            for p in pts:
                l = p["latency"]
                L.append(f"| {dut} | {p['offered_mpps']:.3f} | {p['fwd_mpps']:.3f} | "
                         f"{p['lost']} | {l['p50']:.1f} | {l['p90']:.1f} | {l['p99']:.1f} | "
                         f"{l['p999']:.1f} | {l['max']:.1f} |")
        L.append("")
        L.append("![latency against throughput](linerate-latency.png)")
        L.append("")
    L.append("### Against the targets")
    L.append("")
    L.extend(verdicts(res))
    L.append("")
    notes = Path(__file__).resolve().parent / "NOTES.md"
    if notes.exists() and not res.get("quick"):
        L.append(notes.read_text().strip())
        L.append("")
    return "\n".join(L) + "\n"


def verdicts(res):
    if res.get("quick"):
        return ["None from a quick run: one short pair cannot tell a device's rate from the "
                "machine's noise. Run the full harness for verdicts."]
    out = []
    for p in res.get("paired") or []:
        key = (p["case"]["mode"], p["case"]["frame"])
        tgt = TARGETS.get(key)
        a, c = p["appliance"], p["ceiling"]
        head = (f"- {name(p['case'])}: appliance {a['fwd_mpps']:.2f} Mpps forwarded of "
                f"{a['offered_mpps']:.2f} offered; testpmd io {c['fwd_mpps']:.2f} of "
                f"{c['offered_mpps']:.2f}. ")
        if not p["n_valid"]:
            ub = p["ratio_upper_bound"]
            line = head + ("**No valid ratio**: in every pair testpmd io forwarded what the "
                           "generator offered, so the generator, not the ceiling, was measured")
            if ub is None:
                out.append(line + "; nothing bounds the ratio" +
                           (f": the target ({100 * tgt:.0f}%) cannot be judged here." if tgt
                            else "."))
            elif tgt and ub < tgt:
                out.append(line + f". Where the appliance set its own rate the ratio is at most "
                           f"**{100 * ub:.0f}%**, below the target ({100 * tgt:.0f}%) whatever "
                           "the true ceiling: **missed**.")
            else:
                out.append(line + f"; the ratio is at most {100 * ub:.0f}%" +
                           (f": the target ({100 * tgt:.0f}%) cannot be judged here." if tgt
                            else "."))
            continue
        r = p["ratio_valid_median"]
        line = head + (f"Ratio **{'at least ' if p['valid_lower'] else ''}{100 * r:.0f}%** over "
                       f"{p['n_valid']} valid pair(s)")
        if tgt:
            line += (f" (target {100 * tgt:.0f}%: " +
                     ("met" if r >= tgt else f"missed by {100 * (tgt - r):.0f} points") + ")")
        out.append(line + ".")
    for p in res.get("fec") or []:
        a, c = p["appliance"], p["ceiling"]
        head = (f"- FEC link pair (decoder `hold: {p.get('hold')}`), 1500 B: "
                f"{a['fwd_mpps']:.2f} Mpps forwarded of {a['offered_mpps']:.2f} offered; "
                f"plain forwarding {c['fwd_mpps']:.2f} of {c['offered_mpps']:.2f}. ")
        if not p["n_valid"]:
            ub = p["ratio_upper_bound"]
            out.append(head + "**No valid ratio** (plain forwarding took all that was offered)" +
                       (f"; where the link pair set its own rate the ratio is at most "
                        f"{100 * ub:.0f}%" if ub is not None else "") +
                       " (target 80%: cannot be judged here).")
            continue
        r = p["ratio_valid_median"]
        out.append(head + f"Ratio **{'at least ' if p['valid_lower'] else ''}{100 * r:.0f}%** "
                   f"over {p['n_valid']} valid pair(s) (target 80%: " +
                   ("met" if r >= 0.8 else f"missed by {100 * (0.8 - r):.0f} points") + ").")
    veth = res.get("veth") or {}
    if "appliance-afp" in veth:
        b = veth["appliance-afp"]
        for n in ("afpseq", "kseq"):
            if n in veth:
                k = veth[n]
                out.append(f"- On the same veth wiring, the appliance against {n}: maximum rate "
                           f"{b['mfr_mpps']:.3f} vs {k['mfr_mpps']:.3f} Mpps = "
                           f"**{ratio(b['mfr_mpps'], k['mfr_mpps'])}**, NDR "
                           f"{b.get('ndr_mpps', 0):.3f} vs {k.get('ndr_mpps', 0):.3f} Mpps"
                           + ("" if k.get("saturated") else
                              f" ({n} forwarded all pktgen offered: its rate is a lower bound)")
                           + ".")
    rows = res.get("receivers") or []
    if len(rows) >= 2:
        d = 100 * (1 - rows[-1]["mfr_mpps"] / rows[0]["mfr_mpps"])
        mid = " -> ".join(f"{r['mfr_mpps']:.2f}" for r in rows)
        out.append(f"- Receivers 1 -> {rows[-1]['case']['receivers']}: maximum forwarding rate "
                   f"{mid} Mpps, a change of {-d:+.1f}% (target: falls by no more than 10%: "
                   + ("met" if d <= 10 else f"missed by {d - 10:.0f} points") + ").")
    return out


def write(res, out, docs, write_docs):
    # Summaries again from the pairs: results saved by an earlier version render by today's
    # rules.
    res["paired"] = [tpgen.summarize(p["case"], p["pairs"]) for p in res.get("paired") or []]
    res["fec"] = [dict(tpgen.summarize(p["case"], p["pairs"]), hold=p.get("hold"))
                  for p in res.get("fec") or []]
    docs = Path(docs)
    files = plots(res, docs)
    text = section(res)
    (Path(out) / "linerate-section.md").write_text(text)
    print(text)
    if not write_docs:
        return
    bm = docs / "benchmarks.md"
    cur = bm.read_text()
    m = re.search("^" + re.escape(SECTION) + "$", cur, re.M)
    if m:
        nxt = re.search(r"^## ", cur[m.end():], re.M)
        end = m.end() + nxt.start() if nxt else len(cur)
        cur = cur[:m.start()] + text + ("\n" if nxt else "") + cur[end:]
    elif "## Other benchmarks" in cur:
        i = cur.index("## Other benchmarks")
        cur = cur[:i] + text + "\n" + cur[i:]
    else:
        cur = cur.rstrip("\n") + "\n\n" + text
    bm.write_text(cur)
    print(f"wrote {bm} ({SECTION}) and {', '.join(str(f) for f in files)}")


if __name__ == "__main__":
    import json
    import sys
    src = Path(sys.argv[1] if len(sys.argv) > 1 else
               Path(__file__).resolve().parent / "results" / "linerate.json")
    root = Path(__file__).resolve().parents[2]
    write(json.loads(src.read_text()), src.parent, root / "docs", True)
