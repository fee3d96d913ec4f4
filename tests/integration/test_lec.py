"""Ricochet lateral error correction end to end (issue 14; docs/lec.md): libinterlink hosts in
network namespaces, in overlapping groups, each losing what its RX socket gets by a loss model
of its own (uniform, bursty, Markov), through the real appliance and interlink-control. LEC
repairs go host to host (receiver-side), come from the appliance's `lec` stage
(appliance-side), or both; NAKs to the appliance stay the backstop with Ricochet's timers.
Every message of every sender is delivered exactly once, in its sender's order, and every
receiver of a group delivers the same order; recoveries by LEC and by NAK are counted."""
import os

import pytest

from lecrig import LEC_HOST, LecRig, lec_stage_sets
from test_kvstore import CTL

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths)"),
              pytest.mark.skipif(not LEC_HOST.exists(), reason=f"{LEC_HOST} not built")]

# Four hosts, four groups of three: every host is in three groups, every pair of hosts shares
# two, so the regions are {a,b}-style pairs and LEC's composite repairs are exercised.
GROUPS = {"a": [1, 2, 3], "b": [2, 3, 4], "c": [1, 3, 4], "d": [1, 2, 4]}
# Each host's own loss: uniform, bursts of 5, Markov (bursts of 4 on average), uniform.
LOSS = {1: "bernoulli:0.05", 2: "burst:0.04:5", 3: "ge:0.0125:0.25:0:1", 4: "bernoulli:0.02"}


def check_exactly_once_in_order(rig, res, count):
    hashes = {}
    for name, r in res.items():
        assert r is not None, (name, (rig.tmp / f"{name}.log").read_text())
        assert r["done"] and r["rc"] == 0, (name, r)
        for g in r["groups"]:
            assert g["delivered"] == g["expect"] == 3 * count, (name, g)
            assert g["dups"] == 0 and g["gaps"] == 0 and g["bad"] == 0, (name, g)
            hashes.setdefault(g["id"], set()).add(g["order_hash"])
        assert r["ep"]["lec_rebuilt_bad"] == 0 and r["ep"]["lec_rx_bad"] == 0, (name, r["ep"])
    # the same order at every receiver of a group
    assert all(len(h) == 1 for h in hashes.values()), hashes


@pytest.mark.parametrize("mode", ["peers", "appliance", "both", "appliance-members",
                                  "appliance-lcore"])
def test_overlapping_groups_every_message_once_in_order(tmp_path, mode):
    """appliance: the stage's defaults, repairs_to: group (groups of 3 at c = 5: each repair
    is for every receiver of its group, so it goes once to the group's address, where the
    hosts' data arrives); appliance-members: a unicast copy to each receiver instead;
    appliance-lcore: the defaults with the repairs built on a repair lcore (the views reach
    it as notes from the control stage's lcore)."""
    count = 1500
    to_group = mode != "appliance-members"
    lcore = mode == "appliance-lcore"
    mode = mode.split("-")[0]
    app_sets = lec_stage_sets(repairs_to=None if to_group else "members", repair_lcore=lcore) \
        if mode in ("appliance", "both") else []
    with LecRig(tmp_path, 4, GROUPS, CTL, app_sets) as rig:
        exp = {n: len(h) * count for n, h in GROUPS.items()}
        specs = {f"h{i}": (i, dict(lec=mode, loss=LOSS[i], seed=i, count=count, rate=250,
                                   size=256, expect=exp)) for i in range(1, 5)}
        res = rig.run(specs)
    summary = rig.summary()  # written by the appliance as it stopped
    check_exactly_once_in_order(rig, res, count)
    dropped = sum(r["drop_msgs"] for r in res.values())
    lec = sum(r["via_lec"] for r in res.values())
    nak = sum(r["via_nak"] for r in res.values())
    print(f"\n{mode}: {dropped} messages lost by the hosts' models, {lec} recovered by LEC, "
          f"{nak} by NAK")
    for name, r in sorted(res.items()):
        print(f"  {name}: lost {r['drop_msgs']} lec {r['via_lec']} (median "
              f"{r['lec_ms'].get('p50')} ms, {r['lec_pkts'].get('p50')} pkts) nak "
              f"{r['via_nak']} (median {r['nak_ms'].get('p50')} ms) as_data "
              f"{r['recovered_as_data']} lec_tx {r['ep']['lec_tx']} lec_rx {r['ep']['lec_rx']}")
    # Every message lost came back (by LEC, by a NAK of ours, or as another receiver's NAK
    # repair before we knew we missed it), and LEC brought back much of it: with (8, 5) and
    # these group sizes (c capped at 2 per peer, 3 for the appliance), the appliance sends
    # each member half the repairs its peers would.
    as_data = sum(r["recovered_as_data"] for r in res.values())
    assert lec + nak + as_data >= dropped > 0.02 * 3 * 3 * count * 4 / 2
    assert lec >= (0.35 if mode == "appliance" else 0.6) * dropped, (lec, dropped)
    for r in res.values():
        assert r["ep"]["lec_tx_noaddr"] == 0 and r["ep"]["lec_tx_fail"] == 0
        assert r["lec_core"]["rep_inconsistent"] == 0 and r["lec_core"]["rep_bad"] == 0
        if mode in ("peers", "both"):
            assert r["ep"]["lec_tx"] > 0 and r["lec_core"]["regions"] == 3
        else:
            assert r["ep"]["lec_tx"] == 0 and r["ep"]["lec_rx"] > 0
        # LEC's recoveries come back in a few milliseconds, NAK's after its 100 ms timer
        if r["lec_ms"]["n"] > 20 and r["nak_ms"]["n"] > 20:
            assert r["nak_ms"]["p50"] >= 100
    if mode in ("appliance", "both"):
        st = summary["stages"]["lec"]
        print(f"  the lec stage: {st['repair_copies']} copies of {st['repairs']} repairs, "
              f"fan-out by reference: {st['fanout_by_reference']}")
        # (a sender held back by its credit window packs several messages in a frame)
        assert st["protected"] == st["data_frames"] and 0 < st["data_frames"] <= 4 * 3 * count
        # (the regions at the end are those left once the hosts have left their groups)
        assert st["members_known"] == 4 and st["drop_no_addr"] == 0 and st["views"] >= 4
        sent = st["repairs_to_group"] if to_group else st["repair_copies"]
        assert sent > 0.2 * st["protected"] and st["drop_nombuf"] == 0
        if to_group:
            assert st["repair_copies"] == 0 and st["repairs_to_group"] == st["repairs"]
        if lcore:
            # every frame handed over, the views as notes (one per view of each of the 4
            # groups at least), nothing refused either way
            assert st["repair_lcore"] == 2 and st["drop_repair_lcore_busy"] == 0
            assert st["handed_over"] >= st["data_frames"] + 4 * 4
            assert st["repair_lcore_frames"] >= st["handed_over"] + st["views"]
            assert st["drop_repair_back_full"] == 0
        else:
            assert st["handed_over"] == 0


def test_appliance_copies_share_one_message(tmp_path):
    """One group of four, repairs_to: members: each of the appliance's repairs goes to every
    member (c = 5, capped), as Ethernet/IPv4/UDP headers chained to one shared message
    (af_packet sends chained mbufs). The hosts rebuild what they lost from them, every message
    once and in order."""
    count = 1500
    with LecRig(tmp_path, 4, {"a": [1, 2, 3, 4]}, CTL,
                lec_stage_sets(repairs_to="members")) as rig:
        specs = {f"h{i}": (i, dict(lec="appliance", loss="bernoulli:0.05", seed=20 + i,
                                   count=count, rate=300, size=512, expect={"a": 4 * count}))
                 for i in range(1, 5)}
        res = rig.run(specs)
    st = rig.summary()["stages"]["lec"]
    for name, r in res.items():
        assert r is not None and r["done"], name
        g = r["groups"][0]
        assert g["delivered"] == g["expect"] and g["dups"] == 0 and g["gaps"] == 0, (name, g)
        assert r["ep"]["lec_rebuilt_bad"] == 0 and r["ep"]["lec_rx_bad"] == 0
    assert len({r["groups"][0]["order_hash"] for r in res.values()}) == 1
    assert st["fanout_by_reference"] == 1
    assert st["repair_copies"] >= 3 * st["repairs"] > 0
    lec = sum(r["via_lec"] for r in res.values())
    lost = sum(r["drop_msgs"] for r in res.values())
    print(f"\n{st['repairs']} repairs, {st['repair_copies']} copies; {lost} lost, {lec} by LEC")
    assert lec >= 0.5 * lost
