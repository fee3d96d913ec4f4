"""No process dies of a log write: the appliance, the control process and the generator each
run with their stdout (or stderr) a pipe whose reader goes away after the first line, as in
`interlink ... | head -1`. Each must go on with its work, write its JSON summary, and exit as
it would have (the control process removing its socket files), instead of dying of SIGPIPE."""
import json
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

from conftest import BUILD, INTERLINK, PKTGEN

CONTROL = BUILD / "control" / "interlink-control"
EAL = 'eal=[--no-huge, -m, "256", --lcores, "0,1", --log-level, "lib.eal:error"]'


def hang_up_after_first_line(cmd, dpdk_prefix, timeout=60):
    """Run cmd with its stdout a pipe; read one line, then close our end, so that its next
    write gets EPIPE; wait for it. Returns (first line, exit status, stderr)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = p.stdout.readline()
        p.stdout.close()
        _, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        shutil.rmtree(f"/var/run/dpdk/{dpdk_prefix}", ignore_errors=True)
    return first, p.returncode, err


def test_appliance_keeps_forwarding_when_stdout_closes(tmp_path):
    """`interlink | head -1`: status lines every 100 ms into a pipe closed after the first.
    The appliance forwards (net_null ports: frames as fast as it takes them) for its whole
    --duration, writes the JSON, prints a note on stderr and exits 0. Before, the second
    status line killed it (exit 141 in a shell) with no summary and no JSON."""
    tag = uuid.uuid4().hex[:8]
    js = tmp_path / "app.json"
    cmd = [str(INTERLINK), "-d", "3", "--json", str(js), "--set", f"name=pipe{tag}",
           "--set", "ports.in.device=net_null0", "--set", "ports.out.device=net_null1",
           "--set", "status_interval_ms=100", "--set", EAL]
    t0 = time.time()
    first, rc, err = hang_up_after_first_line(cmd, f"pipe{tag}")
    assert first.startswith("interlink:"), first
    assert rc == 0, f"rc {rc} (killed by a signal if negative): {err}"
    assert time.time() - t0 >= 2.5, "it stopped long before its --duration"
    s = json.loads(js.read_text())
    assert s["elapsed_s"] >= 2.9, s["elapsed_s"]
    # It kept forwarding: everything received went out, and a lot was received.
    assert s["ports"]["in"]["rx"] > 100_000 and s["ports"]["out"]["tx"] > 100_000, s["ports"]
    assert "status lines stop, forwarding goes on" in err, err


def test_control_process_survives_a_closed_stderr_and_removes_its_sockets(tmp_path):
    """interlink-control -v logs to stderr; its reader goes away after the first line. SIGTERM
    then makes it log "shutting down" into the closed pipe: it must still stop cleanly (exit
    0) and remove its wake and management sockets. So must SIGHUP (the terminal going away).
    Before, the log line killed it with both socket files left behind."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        chan = f"/dev/shm/ilpipe-{uuid.uuid4().hex[:8]}-chan"
        files = [Path(chan + s) for s in (".sock", ".mgmt")]
        p = subprocess.Popen([str(CONTROL), "--chan", chan, "-v"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        try:
            first = p.stderr.readline()  # then nobody reads: its next log line gets EPIPE
            p.stderr.close()
            assert "channel" in first, first
            assert all(f.exists() for f in files), files
            p.send_signal(sig)
            rc = p.wait(timeout=20)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            leftover = [f for f in files if f.exists()]
            for f in [Path(chan), *files]:
                f.unlink(missing_ok=True)
        assert rc == 0 and leftover == [], \
            f"{sig.name}: rc {rc} (killed by a signal if negative), socket files left: {leftover}"


def test_pktgen_writes_its_json_when_stdout_closes(tmp_path):
    """`interlink-pktgen ... | head -1`: its status lines (one a second) go to a pipe closed
    after the first. It sends for its whole --duration and writes its JSON summary."""
    tag = uuid.uuid4().hex[:8]
    js = tmp_path / "pg.json"
    cmd = ["taskset", "-c", "0", str(PKTGEN), "--tx", "net_null0,no-rx=1", "--json", str(js),
           "--mode", "raw", "--frame", "64", "--check", "count", "--count", "0",
           "--duration", "3", "--rate", "100000",
           "--", "--file-prefix", f"pg{tag}", "--lcores", "0", "-m", "256", "--no-huge",
           "--log-level", "lib.eal:error"]
    _, rc, err = hang_up_after_first_line(cmd, f"pg{tag}")
    assert rc >= 0, f"killed by signal {-rc}: {err}"
    res = json.loads(js.read_text())
    assert res["send_s"] >= 2.9 and res["sent_frames"] >= 0.9 * 100_000 * 2.9, res
