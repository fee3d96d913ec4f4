"""Several processes over net_memif: senders, the appliance, receivers. One order, no gap left."""
from harness import MemifRig


def test_million_messages_one_order_every_gap_repaired(tmp_path):
    with MemifRig(tmp_path) as rig:
        rc, log, res = rig.run_pktgen(
            "--senders", "4", "--groups", "2", "--receivers", "3",
            "--count", "1000000", "--rate", "400000", "--size", "32",
            "--loss", "bernoulli:0.001", "--seed", "11", "--quiet")
        app = rig.stop_appliance()
    assert res is not None, log
    assert rc == 0, log
    assert res["sent_msgs"] == 1_000_000
    assert res["delivered"] == res["expected"] == 3 * 1_000_000
    assert res["disagreements"] == 0 and res["fifo_violations"] == 0
    assert res["unrecoverable"] == 0
    # 0.1% injected loss at each of 3 receivers: ~3000 losses, all repaired.
    assert 2000 < res["injected_losses"] < 4000
    assert res["gaps"] > 100 and res["gaps_repaired"] == res["gaps"]
    assert app["messages_ordered"] == 1_000_000
    assert app["stages"]["nak"]["naks"] >= res["gaps"]
    assert app["stages"]["nak"]["retransmitted_frames"] >= res["injected_losses"] * 0.9
    assert app["stages"]["nak"]["unavail_sent"] == 0


def test_packed_messages_and_history_overrun_answered(tmp_path):
    """A tiny history: some repairs come too late and are answered UNAVAIL; the
    receivers still agree, and say exactly what they could not get."""
    with MemifRig(tmp_path, app_sets=["stages.seq.history=8"]) as rig:
        rc, log, res = rig.run_pktgen(
            "--senders", "4", "--groups", "2", "--receivers", "3",
            "--count", "200000", "--pack", "8", "--size", "20", "--rate", "100000",
            "--loss", "bernoulli:0.01", "--nak-timeout-us", "2000", "--quiet")
        app = rig.stop_appliance()
    assert res is not None, log
    assert app["stages"]["nak"]["unavail_sent"] > 0
    assert res["unrecoverable"] > 0 and rc == 1, "pktgen must fail when messages are lost"
    assert res["fifo_violations"] == 0
    assert app["messages_ordered"] == 200000
