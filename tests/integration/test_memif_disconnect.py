"""memif clients that connect and leave while the appliance's worker polls. DPDK 22.11's
memif PMD unmaps the shared rings from its interrupt thread as soon as a peer goes, while
a worker may be mid-burst on them; the appliance holds such unmaps until its workers have
reported a quiescent state (RCU QSBR), so it outlives every client, and its summary says
how many unmaps it held."""
import re

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
