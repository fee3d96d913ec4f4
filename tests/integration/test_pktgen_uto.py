"""interlink-pktgen --uto (issue 5): pktgen's emulated senders and receivers speak the
appliance's UTO control protocol. The appliance runs configs/uto.yaml with its ports over
net_memif, interlink-control --window W beside it; 2 senders and 2 receivers in 2 groups
JOIN, wait for their VIEWs, receivers ACK and send HEARTBEATs, senders obey CREDIT.

Asserted: every message delivered in one order at both receivers (pktgen's own check), the
control process's watermark of each group reached the last sequence (its management socket),
and no sender ever had more than W messages not known stable (pktgen's count from the
watermark and receiver 0's deliveries)."""
import pytest

from harness import CONTROL, MemifRig, UtoMemifRig

WINDOW = 256
COUNT = 200000
RATE = 400000  # frames/s in all: half a second, long enough for heartbeats

pytestmark = pytest.mark.skipif(not CONTROL.exists(), reason="interlink-control not built")


def test_pktgen_uto_members_credit_and_stability(tmp_path):
    """2 senders, 2 receivers, 2 groups, --window 256: complete, in order, every message
    stable at the control process, never more than W unstable per sender."""
    with UtoMemifRig(tmp_path, ["--window", str(WINDOW), "--exclude-ms", "5000"]) as rig:
        rc, log, res = rig.run_pktgen("--uto", "--senders", "2", "--receivers", "2",
                                      "--groups", "2", "--count", str(COUNT), "--rate",
                                      str(RATE), "--quiet",
                                      timeout=60)
        groups = rig.groups()
        ctl_status = rig.status()
        app = rig.stop_appliance()
    assert app is not None, "the appliance died: " + log
    assert res is not None, log
    assert rc == 0 and res["pass"], log
    assert res["delivered"] == res["expected"] == 2 * COUNT, log
    assert res["disagreements"] == 0 and res["fifo_violations"] == 0, log
    assert res["unrecoverable"] == 0, log
    u = res["uto"]
    assert u["views"] >= 2 and u["acks"] > 0 and u["heartbeats"] > 0, u
    assert u["credits"] > 0 and 0 < u["credit_window"] <= WINDOW, u
    assert 0 < u["max_unstable"] <= WINDOW, u
    assert u["exclusions"] == 0 and u["ctl_tx_fail"] == 0, u
    assert u["all_stable"], u
    sent = u["group_sent"]
    assert sum(sent) == COUNT, u
    # The control process saw both receivers' ACKs up to the last message of each group
    # (the watermark is exclusive: every sequence below it is held by every receiver).
    for gi, gid in enumerate((1, 2)):
        assert groups.get(gid, {}).get("watermark", 0) >= sent[gi] + 1, (groups, sent)
        assert u["watermark"][gi] >= sent[gi] + 1, u
    assert ctl_status.get("dp_incarnation", 0) >= 1, ctl_status
    seq, ctrl = app["stages"]["seq"], app["stages"]["ctrl"]
    assert seq.get("drop_history_full_unstable", 0) == 0, seq
    assert ctrl.get("drop_stale_epoch", 0) == 0 and ctrl.get("drop_ack_future", 0) == 0, ctrl
    assert ctrl.get("drop_bad_body", 0) == 0, ctrl


def test_pktgen_uto_no_view_is_a_clear_error(tmp_path):
    """Without interlink-control nobody answers a JOIN: pktgen says which VIEW is missing."""
    with MemifRig(tmp_path, app_sets=()) as rig:
        rc, log, res = rig.run_pktgen("--uto", "--senders", "1", "--receivers", "1",
                                      "--groups", "1", "--count", "10", "--view-wait", "1",
                                      "--quiet", timeout=30)
    assert rc == 2, log
    assert "no VIEW of group 1 names receiver 0" in log, log


def test_pktgen_uto_with_authenticated_control_traffic(tmp_path):
    """The appliance requires MACs on its control and nak stages (auth.keys): pktgen's members
    with --auth-keys sign what they send, check what the appliance signs, and get the whole
    service; without the key their JOINs are dropped and no VIEW ever comes."""
    keys = tmp_path / "keys"
    keys.write_text("7 " + bytes(range(0x40, 0x60)).hex() + "\n")
    keys.chmod(0o600)
    sets = [f"stages.ctrl.auth.keys={keys}", f"stages.nak.auth.keys={keys}"]
    with UtoMemifRig(tmp_path, ["--window", str(WINDOW), "--exclude-ms", "5000"], sets) as rig:
        rc, log, res = rig.run_pktgen("--uto", "--senders", "2", "--receivers", "2",
                                      "--groups", "2", "--count", "50000", "--rate",
                                      str(RATE), "--quiet", "--auth-keys", str(keys),
                                      timeout=60)
        app = rig.stop_appliance()
    assert app is not None, "the appliance died: " + log
    assert rc == 0 and res["pass"] and res["delivered"] == 2 * 50000, log
    assert res["uto"]["all_stable"] and res["uto"]["views"] >= 2, res["uto"]
    assert res["auth_signed"] > 0 and res["auth_bad_mac"] == res["auth_replay"] == 0, res
    ctrl = app["stages"]["ctrl"]
    assert ctrl["drop_bad_mac"] == 0 and ctrl["drop_replay"] == 0 and ctrl["up_join"] >= 4, ctrl
    # Without the key: no member gets in.
    d = tmp_path / "nokey"
    d.mkdir()
    with UtoMemifRig(d, ["--window", str(WINDOW)], sets) as rig:
        rc, log, res = rig.run_pktgen("--uto", "--senders", "1", "--receivers", "1",
                                      "--groups", "1", "--count", "100", "--view-wait", "2",
                                      "--quiet", timeout=60)
        app = rig.stop_appliance()
    assert rc != 0, log
    if app is not None:
        assert app["stages"]["ctrl"]["drop_bad_mac"] >= 2, app["stages"]["ctrl"]
