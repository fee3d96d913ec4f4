"""The appliance's command line and runtime control, through the real binaries: --version
everywhere, DPDK's argument order, command-line EAL options over the config's,
--print-config, checks before EAL, the status line and summary, the warning when no
interlink-control holds the control stage's channel, and interlink-ctl."""
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml

from conftest import BUILD, INTERLINK, ROOT
from harness import CONTROL, MemifRig

CTL = BUILD / "tools" / "monitor" / "interlink-ctl"
MESON_VERSION = re.search(r"version:\s*'([^']+)'", (ROOT / "meson.build").read_text()).group(1)
EAL_QUIET = ["--log-level", "lib.eal:error"]


def ctl(name, *args, timeout=30):
    p = subprocess.run([str(CTL), "-a", name, *args], capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def memif_sets(tmp, tag):
    return ["--set", f"name=cli{tag}",
            "--set", f"ports.in.device=net_memif0,role=server,socket={tmp}/in.sock,"
                     "socket-abstract=no",
            "--set", f"ports.out.device=net_memif1,role=server,socket={tmp}/out.sock,"
                     "socket-abstract=no"]


def stop(proc, sig, timeout):
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def cleanup(tag):
    shutil.rmtree(f"/var/run/dpdk/cli{tag}", ignore_errors=True)


# ---- no EAL: --version, --print-config, checks before EAL ---------------------------------

@pytest.mark.parametrize("binary,name", [
    ("dataplane/interlink", "interlink"),
    ("control/interlink-control", "interlink-control"),
    ("pktgen/interlink-pktgen", "interlink-pktgen"),
    ("tools/il-wire-dump", "il-wire-dump"),
    ("lib/coord/il-coord", "il-coord"),
    ("examples/kvstore/il-kvstore", "il-kvstore"),
    ("tools/monitor/interlink-ctl", "interlink-ctl"),
    ("tools/monitor/interlink-top", "interlink-top"),
    ("tools/monitor/interlink-exporter", "interlink-exporter"),
])
def test_version(binary, name):
    """Every binary we ship says its name and the meson project version."""
    p = subprocess.run([str(BUILD / binary), "--version"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[:2] == [name, MESON_VERSION], p.stdout


def test_print_config_is_effective(tmp_path):
    """--print-config shows the file after --set, with the defaults filled in and marked,
    and what it prints loads back into the same configuration."""
    cfg = tmp_path / "my.yaml"
    shutil.copy(ROOT / "configs" / "sequencer.yaml", cfg)
    p = subprocess.run([str(INTERLINK), "-c", str(cfg), "--set", "stages.seq.history=65536",
                        "--set", "mtu=9000", "--print-config"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    doc = yaml.safe_load(p.stdout)
    assert doc["stages"]["seq"]["history"] == 65536
    assert doc["mtu"] == 9000
    # Defaults the file does not state: a port's descriptors, a group's UDP port.
    assert doc["ports"]["in"]["rx_desc"] == 1024
    assert doc["groups"][0]["port"] == 7400
    assert re.search(r"rx_desc: 1024  # default", p.stdout)
    again = tmp_path / "printed.yaml"
    again.write_text(p.stdout)
    q = subprocess.run([str(INTERLINK), "-c", str(again), "--print-config"],
                       capture_output=True, text=True, timeout=30)
    assert q.returncode == 0, q.stderr
    assert yaml.safe_load(q.stdout) == doc


def test_pipeline_errors_come_before_eal(tmp_path):
    """A pipeline naming a stage that does not exist is reported by its key before EAL
    probes the ports (here a device that cannot be probed at all)."""
    tag = uuid.uuid4().hex[:8]
    p = subprocess.run([str(INTERLINK), "-q", "-d", "1",
                        "--set", f"name=cli{tag}",
                        "--set", "ports.in.device=net_af_packet0,iface=nosuch" + tag[:4],
                        "--set", "pipeline.0.chains.0.stages.1=seqq"],
                       capture_output=True, text=True, timeout=60)
    cleanup(tag)
    assert p.returncode == 2
    assert "pipeline[0].chains[0].stages[1]': 'seqq' is not a stage" in p.stderr, p.stderr
    assert "EAL" not in p.stderr, p.stderr


def test_eal_options_on_the_command_line_override_the_config():
    """`interlink -l 0-1 ... -- OPTIONS`: -l replaces the config's --lcores (no EAL usage
    dump for two lcore options), --lcores replaces them too, and the old order still
    works with a note."""
    def pc(*argv):
        p = subprocess.run([str(INTERLINK), *argv], capture_output=True, text=True,
                           timeout=30)
        assert p.returncode == 0, p.stderr
        return yaml.safe_load(p.stdout)["eal"], p.stderr

    eal, _ = pc("-l", "0-1", "-m", "512", "--", "--print-config")
    assert [str(x) for x in eal] == ["--no-huge", "-l", "0-1", "-m", "512"]
    eal, _ = pc("--lcores", "0@0,1@0,2@0", "--file-prefix=x", "--", "--print-config")
    assert [str(x) for x in eal] == ["--no-huge", "-m", "1024", "--lcores", "0@0,1@0,2@0",
                                     "--file-prefix=x"]
    eal, err = pc("--print-config", "--", "-l", "0-1")
    assert [str(x) for x in eal] == ["--no-huge", "-m", "1024", "-l", "0-1"]
    assert "old order" in err


# ---- EAL runs (busy polling: under the shared lock) ---------------------------------------

def test_eal_first_runs(tmp_path):
    """The appliance runs with EAL options first and its own after "--": the command
    line's --lcores wins over the config's, so a pipeline on lcore 2 starts."""
    tag = uuid.uuid4().hex[:8]
    try:
        p = subprocess.run([str(INTERLINK), "--no-huge", "-m", "512",
                            "--lcores", "0@0,1@0,2@0", *EAL_QUIET, "--",
                            *memif_sets(tmp_path, tag), "--set", "pipeline.0.lcore=2",
                            "-d", "1", "-q", "--json", str(tmp_path / "s.json")],
                           capture_output=True, text=True, timeout=60)
    finally:
        cleanup(tag)
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads((tmp_path / "s.json").read_text())["name"] == f"cli{tag}"


def test_status_line_low_rate_piped(tmp_path):
    """At 2000 pps the status line says kpps (not 0.00 Mpps), one line each when piped,
    and the summary's rate is over the traffic, not over the idle start-up."""
    rig = MemifRig(tmp_path, app_sets=["status_interval_ms=500"])
    with rig:
        time.sleep(4)  # idle start-up the rate must not average over
        rc, out, js = rig.run_pktgen("--count", "6000", "--rate", "2000", "--senders", "1",
                                     "--receivers", "1", "--groups", "1", timeout=120)
        assert rc == 0, out
        time.sleep(1)
    summary = rig.stop_appliance()
    log = rig.app_log.read_text()
    status = [ln for ln in log.splitlines() if ln.startswith("[")]
    assert len(status) >= 8, log
    assert "\r" not in log
    assert "0.00 Mpps" not in log
    busy = [ln for ln in status if re.search(r"in rx 1\.\d k?pps|in rx 2\.\d kpps", ln)]
    assert busy, log
    m = re.search(r"messages ordered\s+(\d+) in (\d+) frames \(([\d.]+) kpps", log)
    assert m, log
    # 6000 frames at 2000 pps: about 2 kpps over ~3 s of traffic; an average over the
    # whole run (4 s idle first) would be below 1.2 kpps.
    assert 1.5 <= float(m.group(3)) <= 2.6, m.group(0)
    assert summary["traffic_s"] < summary["elapsed_s"] - 3, summary


def test_status_line_in_place_on_a_terminal(tmp_path):
    """On a terminal the status line is rewritten in place (carriage return, no newline)."""
    tag = uuid.uuid4().hex[:8]
    master, slave = pty.openpty()
    p = subprocess.Popen([str(INTERLINK), *memif_sets(tmp_path, tag),
                          "--set", "status_interval_ms=300", "-d", "3"],
                         stdout=slave, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    os.close(slave)
    out = b""
    try:
        end = time.time() + 60
        while time.time() < end:
            r, _, _ = select.select([master], [], [], 1)
            if r:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            elif p.poll() is not None:
                break
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(master)
        cleanup(tag)
    text = out.decode(errors="replace")
    head, _, _ = text.partition("==== interlink summary")
    lines = re.findall(r"\r\[\s*[\d.]+s\][^\r\n]*", head)
    assert len(lines) >= 4, text
    # All the status updates share one terminal line: no newline between them.
    first = head.index(lines[0])
    assert "\n" not in head[first:].rstrip("\r\n"), repr(head[first:])


def test_control_stage_without_control_process(tmp_path):
    """configs/uto.yaml with no interlink-control: a warning on stderr after the grace,
    rate-limited, control_attached 0 in telemetry; once it attaches, a line says so and
    control_attached is 1. The control stage's cycles per packet leave out its idle polls."""
    tag = uuid.uuid4().hex[:8]
    chan = f"/dev/shm/cli{tag}-chan"
    log = tmp_path / "app.log"
    app = subprocess.Popen(["taskset", "-c", "1", str(INTERLINK), "-c",
                            str(ROOT / "configs" / "uto.yaml"), *memif_sets(tmp_path, tag),
                            "--set", f"stages.ctrl.chan={chan}",
                            "--set", "status_interval_ms=0",
                            "--json", str(tmp_path / "s.json")],
                           stdout=open(log, "w"), stderr=subprocess.STDOUT)
    ctl_proc = None
    try:
        end = time.time() + 60
        while "no interlink-control attached" not in log.read_text() and time.time() < end:
            assert app.poll() is None, log.read_text()
            time.sleep(0.2)
        text = log.read_text()
        assert f"no interlink-control attached to {chan}" in text, text
        assert f"interlink-control --chan {chan}" in text
        rc, out, err = ctl(f"cli{tag}", "show", "ctrl")
        assert rc == 0, err
        st = json.loads(out)
        assert st["control_attached"] == 0 and st["control_absent_warnings"] >= 1, st
        time.sleep(3)
        # Rate-limited: still one warning (the next is due 30 s after the first).
        assert log.read_text().count("no interlink-control attached") == 1, log.read_text()
        ctl_proc = subprocess.Popen([str(CONTROL), "--chan", chan],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.time() + 30
        while "interlink-control attached" not in log.read_text().replace(
                "no interlink-control attached", "") and time.time() < end:
            time.sleep(0.2)
        rc, out, err = ctl(f"cli{tag}", "show", "ctrl")
        assert json.loads(out)["control_attached"] == 1, out
    finally:
        stop(app, signal.SIGINT, 30)
        if ctl_proc is not None:
            stop(ctl_proc, signal.SIGTERM, 10)
        cleanup(tag)
        for suffix in ("", ".sock", ".mgmt"):
            Path(chan + suffix).unlink(missing_ok=True)
    s = json.loads((tmp_path / "s.json").read_text())["stages"]["ctrl"]
    # It polled for seconds with no packets: all of that is poll_cycles.
    assert s["poll_cycles"] > 0
    assert s["pkts_in"] == 0 and s["cycles"] == 0, s


def test_runtime_commands(tmp_path):
    """interlink-ctl: a NAK budget and an impairment's loss change while traffic flows,
    bad values are refused naming the key, and reset zeroes the counters."""
    rig = MemifRig(tmp_path, app_sets=[
        "stages.imp={type: impair}",
        "pipeline.0.chains.0.stages=[classify, imp, seq, nak]",
        "status_interval_ms=0"])
    name = None
    with rig:
        name = f"app{rig.tag}"
        gen = ["--senders", "1", "--receivers", "1", "--groups", "1", "--rate", "20000"]
        rc, out, _ = rig.run_pktgen("--count", "2000", *gen)
        assert rc == 0, out
        rc, out, err = ctl(name, "set", "nak", "rate_pps=5000", "burst=64")
        assert rc == 0, err
        st = json.loads(ctl(name, "show", "nak")[1])
        assert (st["rate_pps"], st["burst"]) == (5000, 64), st
        rc, _, err = ctl(name, "set", "nak", "rate_pps=0")
        assert rc == 1 and "stages.nak.rate_pps" in err and "1..1000000000" in err, err
        rc, _, err = ctl(name, "set", "imp", "delay_us=5")
        assert rc == 1 and "without a delay line" in err, err
        rc, _, err = ctl(name, "set", "classify", "x=1")
        assert rc == 1 and "no parameters that change at run time" in err, err
        before = json.loads(ctl(name, "show", "seq")[1])["stamped_msgs"]
        assert before == 2000
        rc, _, err = ctl(name, "set", "imp", "loss=bernoulli", "p=1")
        assert rc == 0, err
        # Everything is lost on the way in now: nothing more is ordered.
        started = rig.start_pktgen("--count", "500", "--drain-timeout", "1", *gen)
        rig.wait_pktgen(started)
        imp = json.loads(ctl(name, "show", "imp")[1])
        assert imp["lost"] >= 500, imp
        assert json.loads(ctl(name, "show", "seq")[1])["stamped_msgs"] == before
        rc, out, err = ctl(name, "reset")
        assert rc == 0, err
        stats = json.loads(ctl(name, "show")[1])
        assert stats["seq"]["stamped_msgs"] == 0 and stats["imp"]["lost"] == 0, stats
        assert stats["seq"]["pkts_in"] == 0, stats
    assert name and not Path(f"/var/run/dpdk/{name}").exists()


def _ftlog_control(tmp_path, *extra, user=None):
    """interlink-control with the FT-TCP logger alone (no data plane), files in tmp_path."""
    cmd = [str(CONTROL), "--chan", str(tmp_path / "ctl.chan"), "--mgmt", "none",
           "--ftcp-ring", str(tmp_path / "ft.ring"), "--ftcp-sock", str(tmp_path / "ft.sock"),
           "--ftcp-dir", str(tmp_path / "log"), *extra]
    if user:
        cmd = ["setpriv", f"--reuid={user}", "--regid=nogroup", "--clear-groups",
               "--inh-caps=-all", *cmd]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_ftcp_rt_priority_runs_the_logger_thread_alone_at_sched_fifo(tmp_path):
    """--ftcp-rt-priority N (docs/ft-tcp.md): the thread named ftlog runs at SCHED_FIFO N, the
    process's other threads at the normal policy; without the privilege, a clear error and
    exit 2 (not a logger silently at the normal policy)."""
    (tmp_path / "log").mkdir()
    p = _ftlog_control(tmp_path, "--ftcp-rt-priority", "7")
    try:
        policies = {}
        for _ in range(100):
            for t in os.listdir(f"/proc/{p.pid}/task"):
                name = open(f"/proc/{p.pid}/task/{t}/comm").read().strip()
                # /proc/PID/task/TID/stat: field 40 is rt_priority, 41 the policy (1: FIFO).
                f = open(f"/proc/{p.pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()
                policies[name] = (int(f[39 - 2]), int(f[40 - 2]))
            if "ftlog" in policies:
                break
            time.sleep(0.05)
        assert policies.get("ftlog") == (7, 1), policies
        assert all(v == (0, 0) for k, v in policies.items() if k != "ftlog"), policies
    finally:
        p.terminate()
        out = p.communicate(timeout=30)[0]
    assert p.returncode == 0, out
    # durability none (the default): it runs, and says what that costs
    assert "warning: --ftcp-rt-priority with --ftcp-durability none" in out, out
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "log").mkdir()
    p = _ftlog_control(tmp_path / "g", "--ftcp-rt-priority", "7", "--ftcp-durability", "group")
    time.sleep(0.5)
    p.terminate()
    out = p.communicate(timeout=30)[0]
    assert p.returncode == 0 and "warning" not in out, out

    # As an unprivileged user (pytest's directory is root's alone: one nobody can write).
    nob = Path(f"/tmp/il-rt-{uuid.uuid4().hex[:8]}")
    try:
        (nob / "log").mkdir(parents=True)
        for d in (nob, nob / "log"):
            os.chmod(d, 0o777)
        p = _ftlog_control(nob, "--ftcp-rt-priority", "7", user="nobody")
        out = p.communicate(timeout=30)[0]
    finally:
        shutil.rmtree(nob, ignore_errors=True)
    assert p.returncode == 2, out
    assert "--ftcp-rt-priority 7: SCHED_FIFO is not permitted" in out, out
    p = subprocess.run([str(CONTROL), "--ftcp-rt-priority", "100"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 2 and "--ftcp-rt-priority" in p.stderr, p.stderr
