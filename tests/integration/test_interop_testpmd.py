"""dpdk-testpmd drives the appliance in raw mode, with the exact command lines of
docs/interop.md: testpmd (txonly packets, sent with `start tx_first`) owns a memif socket,
the appliance's port "in" connects to it as a client, and interlink-pktgen listens on the
appliance's port "out" and checks that every frame comes out sequenced, in order."""
import json
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from conftest import INTERLINK, PKTGEN

TESTPMD = shutil.which("dpdk-testpmd")
BURSTS = 20  # x 32 packets: less than a memif ring, so none is dropped at the sender


def wait_file(path, proc, what, text=None, timeout=30):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if path.exists() and (text is None or text in path.read_text()):
            return
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited with {proc.returncode}")
        time.sleep(0.05)
    raise AssertionError(f"{what} not ready after {timeout} s")


@pytest.mark.skipif(TESTPMD is None, reason="dpdk-testpmd is not installed (dpdk-dev)")
def test_testpmd_txonly_raw_udp_is_sequenced(tmp_path):
    one_run(tmp_path)


def one_run(tmp_path):
    tag = uuid.uuid4().hex[:8]
    tp_sock, out_sock = tmp_path / "testpmd.sock", tmp_path / "out.sock"
    tp_log, app_log, pg_log = tmp_path / "testpmd.log", tmp_path / "app.log", tmp_path / "pg.log"
    app_json, pg_json = tmp_path / "app.json", tmp_path / "pg.json"
    procs = []
    try:
        # 1. testpmd: plain UDP 198.18.0.1:9000 -> 239.1.1.100:9000, 64-byte frames, to the
        #    group's multicast MAC; io forwarding once the first bursts are out.
        tp = subprocess.Popen(
            ["stdbuf", "-oL", "taskset", "-c", "0", TESTPMD, "--no-huge", "-m", "512",
             "--file-prefix", f"tp{tag}", "--no-pci", "--lcores", "0@0,1@0",
             "--log-level", "lib.eal:error",
             "--vdev", f"net_memif0,role=server,socket={tp_sock},socket-abstract=no",
             "--", "-i", "--forward-mode=io", "--eth-peer=0,01:00:5e:01:01:64",
             "--tx-ip=198.18.0.1,239.1.1.100", "--tx-udp=9000,9000", "--txpkts=64",
             "--burst=32", "--total-num-mbufs=8192"],
            stdin=subprocess.PIPE, stdout=open(tp_log, "w"), stderr=subprocess.STDOUT)
        procs.append(tp)
        # A memif client turned away by a port not yet started does not retry: wait until
        # testpmd has started its port (it checks link status right after).
        wait_file(tp_log, tp, "testpmd", text="Checking link statuses")
        # 2. the appliance, default configuration (raw group 100 at 239.1.1.100:9000)
        app = subprocess.Popen(
            ["taskset", "-c", "1", str(INTERLINK), "--json", str(app_json),
             "--set", f"name=app{tag}", "--set", "status_interval_ms=0",
             "--set", f"ports.in.device=net_memif0,role=client,socket={tp_sock},"
                      "socket-abstract=no",
             "--set", f"ports.out.device=net_memif1,role=server,socket={out_sock},"
                      "socket-abstract=no",
             "--set", 'eal=[--no-huge, -m, "1024", --lcores, "0@1,1@1", '
                      '--log-level, "lib.eal:error"]'],
            stdout=open(app_log, "w"), stderr=subprocess.STDOUT)
        procs.append(app)
        wait_file(app_log, app, "the appliance", text=f"interlink: app{tag} epoch")
        # 3. pktgen listens on "out": count, continuity of the global sequence, 2 receivers;
        pg = subprocess.Popen(
            # native: only Interlink DATA counts (raw UDP passed through would be "other");
            # group 100 is the one whose global sequence is checked
            ["taskset", "-c", "0", str(PKTGEN), "--listen", "--duration", "6",
             "--group-base", "100", "--groups", "1", "--receivers", "2", "--tx", "net_null0,no-rx=1",
             "--rx", f"net_memif1,role=client,socket={out_sock},socket-abstract=no",
             "--json", str(pg_json), "--quiet", "--", "--file-prefix", f"pg{tag}",
             "--lcores", "0", "--no-huge", "-m", "256", "--log-level", "lib.eal:error"],
            stdout=open(pg_log, "w"), stderr=subprocess.STDOUT)
        procs.append(pg)
        time.sleep(2)  # both memif links up
        tp.stdin.write(f"start tx_first {BURSTS}\n".encode())
        tp.stdin.flush()
        time.sleep(1)
        tp.stdin.write(b"stop\n")
        tp.stdin.flush()
        pg.wait(timeout=30)
        # Stop the memif clients before the server they are connected to: DPDK 22.11's
        # memif can panic in the interrupt thread when its peer goes away mid-message.
        app.send_signal(signal.SIGINT)
        app.wait(timeout=20)
        tp.stdin.write(b"quit\n")
        tp.stdin.flush()
        tp.wait(timeout=30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for prefix in (f"tp{tag}", f"app{tag}", f"pg{tag}"):
            shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
    logs = "\n".join(f.read_text() for f in (tp_log, app_log, pg_log) if f.exists())
    assert app.returncode in (0, 1), f"the appliance died ({app.returncode}): {logs}"
    assert pg_json.exists() and app_json.exists(), logs
    res, summ = json.loads(pg_json.read_text()), json.loads(app_json.read_text())
    sent = BURSTS * 32
    assert "TX-packets: %d" % sent in tp_log.read_text(), logs
    # every frame testpmd sent was matched by the raw filter and sequenced ...
    assert summ["messages_ordered"] == sent, logs
    assert summ["stages"]["classify"]["raw_matched"] == sent
    # ... and arrived at the listener stamped, group 100, one continuous sequence
    assert res["rx_data"] == sent and res["rx_other"] == 0, logs
    assert res["seq_missing"] == 0 and res["seq_reordered"] == 0
    assert pg.returncode == 0 and res["pass"], logs
