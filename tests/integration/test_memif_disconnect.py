"""memif clients that connect and leave while the appliance's worker polls. DPDK 22.11's
memif PMD unmaps the shared rings from its interrupt thread as soon as a peer goes, while
a worker may be mid-burst on them; the appliance holds such unmaps until its workers have
reported a quiescent state (RCU QSBR), so it outlives every client, and its summary says
how many unmaps it held. A connect had a race of its own, closed by the link gate (both in
include/interlink/memif_guard.h). And pktgen does not outlive an appliance that went away by
more than --link-loss seconds."""
import re
import subprocess
import sys
import time

from harness import MemifRig

CLIENTS = 3
COUNT = 5000


def test_clients_come_and_go_and_the_appliance_outlives_them(tmp_path):
    rig = MemifRig(tmp_path)
    with rig:
        for i in range(CLIENTS):
            # Count check: every client's frames come back, whatever the sequence numbers
            # the clients before it used up. Losses (a client descheduled for longer than
            # its ring holds) do not matter here; surviving the disconnect does.
            rc, log, res = rig.run_pktgen("--check", "count", "--count", str(COUNT),
                                          "--rate", "50000", "--quiet")
            assert res is not None and res["sent_msgs"] == COUNT, log
            assert rig.app.poll() is None, (f"the appliance died after client {i + 1} left: " +
                                            rig.app_log.read_text())
        summary = rig.stop_appliance()
    assert summary is not None and summary["messages_ordered"] == CLIENTS * COUNT
    text = rig.app_log.read_text()
    held = re.search(r"peer disconnects\s+(\d+) unmaps held .*\((\d+) gave up", text)
    assert held, text
    assert int(held.group(1)) >= 1 and int(held.group(2)) == 0, held.group(0)


SESSIONS = 20


def test_clients_connect_to_two_queues_while_a_worker_shares_its_cpu(tmp_path):
    """The connect race (include/interlink/memif_guard.h): a burst reads its ring's region
    before it checks that the peer is connected, and a server's region is not mapped until
    the connect is done. A worker that lost its CPU between the two while a client connected
    touched NULL plus the ring's offset: a segfault in librte_net_memif (at 0x4084) on any
    queue but the first. Two shards (two queue pairs per port); shard 1's worker shares CPU 0
    with pktgen and two more busy processes, so it loses its CPU often. Before the link gate,
    this test killed the appliance in 3 runs of 4 (16 clients each, 2026-11-27; the CI run
    before saw it once in test_shards). Every client must come and go with the appliance
    alive."""
    from test_shards import ShardRig
    hogs = [subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", "while True: pass"])
            for _ in range(2)]
    try:
        with ShardRig(tmp_path) as rig:
            for i in range(SESSIONS):
                rc, log, res = rig.run_pktgen("--check", "count", "--count", "2000", "--rate",
                                              "20000", "--groups", "4", "--tx-queue",
                                              str(i % 2), "--link-loss", "2", "--quiet")
                assert rig.app.poll() is None, (f"the appliance died with client {i + 1}: " +
                                                rig.app_log.read_text())
                # Survival is the point: with the CPU this busy a frame can come back after
                # pktgen's 100 ms of quiet (count check: lost, exit status 1), but the links
                # must hold (no exit status 2) and every message must have been sent.
                assert rc in (0, 1) and res is not None and res["sent_msgs"] == 2000, log
                assert res["rx_data"] > 0 and not res["link_lost"], log
            summary = rig.stop_appliance()
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert summary is not None and summary["messages_ordered"] == SESSIONS * 2000


def test_pktgen_stops_when_the_appliance_goes_away(tmp_path):
    """The appliance killed in the middle of a run: pktgen does not wait for ever on a link
    that is gone (before: it sent into the down port until killed, silent with --quiet). It
    stops --link-loss seconds later, says which link, fails the run with exit status 2 and
    still writes its summary."""
    rig = MemifRig(tmp_path)
    with rig:
        gen = rig.start_pktgen("--check", "count", "--count", "1000000", "--rate", "20000",
                               "--link-loss", "1", "--quiet")
        time.sleep(3)
        assert gen[0].poll() is None, gen[2].read_text()
        rig.app_killed = True
        rig.app.kill()
        rig.app.wait()
        t0 = time.monotonic()
        rc, log, res = rig.wait_pktgen(gen, timeout=30)
        took = time.monotonic() - t0
    assert rc == 2, (rc, log)
    assert took < 10, took
    assert re.search(r"the (tx|rx) link has been down for 1 s: run stopped", log), log
    assert res is not None and res["link_lost"] in ("tx", "rx") and not res["pass"], res
    assert 0 < res["sent_msgs"] < 1000000
