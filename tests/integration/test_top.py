"""interlink-top in a real terminal: tmux (a private server per test) at 80x24 runs it against
the appliance (configs/uto.yaml over net_memif) and interlink-control while pktgen's --uto
members send; capture-pane reads the screen, send-keys presses q.

Asserted: the screen is 80x24 and fills it; it refreshes (the uptime moves); ports and both
groups show a non-zero rate; every member is listed, receivers with their ACK; q quits with
status 0. With no source running it says which are down and why, survives a resize to a
terminal too small and back, and still quits on q. --once prints a plain frame."""
import re
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from conftest import INTERLINK, ROOT
from harness import CONTROL, UtoMemifRig

TOP = ROOT / "tools" / "monitor" / "interlink-top"

pytestmark = [
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed"),
    pytest.mark.skipif(not CONTROL.exists(), reason="interlink-control not built"),
]


class Tmux:
    """A tmux server of our own (-L) with one detached session running `cmd`."""

    def __init__(self, tmp, cmd, width=80, height=24):
        self.sock = f"iltop-{uuid.uuid4().hex[:8]}"
        self.rc_file = tmp / f"{self.sock}.rc"
        shell = " ".join(f"'{a}'" for a in cmd) + f"; echo $? > '{self.rc_file}'"
        self.tmux("new-session", "-d", "-x", str(width), "-y", str(height), "-s", "top",
                  shell)

    def tmux(self, *args):
        return subprocess.run(["tmux", "-L", self.sock, "-f", "/dev/null", *args],
                              capture_output=True, text=True, timeout=20)

    def screen(self):
        out = self.tmux("capture-pane", "-p", "-t", "top").stdout
        return out[:-1].split("\n") if out.endswith("\n") else out.split("\n")

    def wait_for(self, pred, timeout=30):
        """The first screen (lines) for which pred holds; the last one seen on timeout."""
        end, lines = time.time() + timeout, []
        while time.time() < end:
            lines = self.screen()
            if pred(lines):
                return lines
            time.sleep(0.3)
        raise AssertionError("screen never matched:\n" + "\n".join(lines))

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "top", *keys)

    def exit_status(self, timeout=10):
        end = time.time() + timeout
        while time.time() < end:
            if self.rc_file.exists() and self.rc_file.read_text().strip():
                return int(self.rc_file.read_text())
            time.sleep(0.1)
        return None

    def kill(self):
        self.tmux("kill-server")


def row(lines, first):
    """The cells of the first line whose first cell is `first`."""
    for ln in lines:
        cells = ln.split()
        if cells and cells[0] == first:
            return cells
    return None


def rate_nonzero(cell):
    return cell not in ("-", "0") and re.fullmatch(r"[\d.]+[kMG]?", cell) is not None


def test_top_live_view(tmp_path):
    with UtoMemifRig(tmp_path, ["--window", "256", "--exclude-ms", "5000"]) as rig:
        gen = rig.start_pktgen("--uto", "--senders", "2", "--receivers", "2", "--groups",
                               "2", "--count", "2000000", "--rate", "100000", "--quiet")
        t = Tmux(tmp_path, [sys.executable, str(TOP), "--appliance", f"app{rig.tag}",
                            "--chan", rig.chan])
        try:
            def live(lines):
                ports, g1, g2 = row(lines, "in"), row(lines, "1"), row(lines, "2")
                members = [ln for ln in lines if re.match(r"\s*[12]\s+6553[67]\s+R\s+\d+", ln)]
                return (ports is not None and len(ports) >= 3 and rate_nonzero(ports[2])
                        and g1 is not None and rate_nonzero(g1[1])
                        and g2 is not None and rate_nonzero(g2[1]) and len(members) == 4)

            first = t.wait_for(live, timeout=60)
            up0 = re.search(r"up (\S+)", first[0]).group(1)
            later = t.wait_for(lambda ls: re.search(r"up (\S+)", ls[0]) and
                               re.search(r"up (\S+)", ls[0]).group(1) != up0, timeout=10)
            screen = "\n".join(later)
            assert len(later) == 24 and max(len(ln) for ln in later) <= 80, screen
            assert later[0].startswith("interlink-top  app" + rig.tag), screen
            assert "sources: appliance ok  control ok" in screen, screen
            assert later[-1].startswith("q quit"), screen
            for head in ("PORT", "GROUP", "NAKS", "DROPS"):
                assert row(later, head) is not None, (head, screen)
            # The senders are members too, without an ACK.
            senders = [ln for ln in later if re.match(r"\s*[12]\s+[12]\s+S\s+-", ln)]
            assert len(senders) == 4, screen
            t.keys("p")
            t.wait_for(lambda ls: "[paused]" in ls[0], timeout=10)
            t.keys("q")
            assert t.exit_status() == 0, "\n".join(t.screen())
        finally:
            t.kill()
            gen[0].kill()
            rig.wait_pktgen(gen)


def test_top_sources_down_and_small_terminal(tmp_path):
    t = Tmux(tmp_path, [sys.executable, str(TOP), "--appliance", "ilnone-x", "--chan",
                        str(tmp_path / "nochan")])
    try:
        lines = t.wait_for(lambda ls: "sources: appliance DOWN  control DOWN" in ls[1])
        screen = "\n".join(lines)
        assert "appliance: not running (no telemetry socket" in screen, screen
        assert "control: not running (no management socket" in screen, screen
        assert "MEMBERS: no control process" in screen, screen
        t.tmux("resize-window", "-t", "top", "-x", "30", "-y", "6")
        t.wait_for(lambda ls: any("too small" in ln for ln in ls))
        t.tmux("resize-window", "-t", "top", "-x", "80", "-y", "24")
        t.wait_for(lambda ls: "sources: appliance DOWN" in ls[1])
        t.keys("q")
        assert t.exit_status() == 0, "\n".join(t.screen())
    finally:
        t.kill()
    p = subprocess.run([sys.executable, str(TOP), "--once", "--interval", "0.2", "--appliance",
                        "ilnone-x", "--chan", ""], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("interlink-top") and "appliance DOWN" in p.stdout, p.stdout
    assert "control" not in p.stdout.split("\n")[1], p.stdout


def test_top_fec_and_ftcp_sections(tmp_path):
    """The link pair's and the FT-TCP front's own lines, from the real configs with their
    ports on net_null (which receives a stream of dummy frames): FEC encoder and decoder,
    FT-TCP flows and logger lag; no group row for the link pair's placeholder group."""
    tag = uuid.uuid4().hex[:8]
    ring = f"/dev/shm/iltop{tag}-ftring"
    eal = 'eal=[--no-huge, -m, "512", --lcores, "0,1", --log-level, "lib.eal:error"]'
    runs = {"linkpair": ["--set", "ports.lan_a.device=net_null0",
                         "--set", "ports.lan_b.device=net_null1", "--set", "pool_size=32768"],
            "ftcp": ["--set", "ports.client.device=net_null0",
                     "--set", "ports.server.device=net_null1", "--set", f"stages.ftcp.ring={ring}"]}
    procs, frames = {}, {}
    try:
        for cfg, sets in runs.items():
            procs[cfg] = subprocess.Popen(
                [str(INTERLINK), "-c", str(ROOT / "configs" / f"{cfg}.yaml"), "-q", "-d", "60",
                 "--set", f"name=iltop{cfg[:2]}{tag}", "--set", eal, *sets],
                stdout=subprocess.DEVNULL, stderr=open(tmp_path / f"{cfg}.log", "w"))
        for cfg in runs:
            end = time.time() + 30
            while time.time() < end:
                assert procs[cfg].poll() is None, (tmp_path / f"{cfg}.log").read_text()
                p = subprocess.run([sys.executable, str(TOP), "--once", "--interval", "0.5",
                                    "--appliance", f"iltop{cfg[:2]}{tag}", "--chan", ""],
                                   capture_output=True, text=True, timeout=30)
                frames[cfg] = p.stdout
                if "sources: appliance ok" in p.stdout:
                    break
                time.sleep(0.3)
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(timeout=30)
        for cfg in runs:
            shutil.rmtree(f"/var/run/dpdk/iltop{cfg[:2]}{tag}", ignore_errors=True)
        subprocess.run(["rm", "-f", ring])
    lp, ft = frames["linkpair"], frames["ftcp"]
    assert re.search(r"^FEC enc +protected \S+/s \(\d+\)  repairs ", lp, re.M), lp
    assert re.search(r"^FEC dec +recovered \S+/s \(\d+\)  lost ", lp, re.M), lp
    assert re.search(r"^lan_a +up +\S+", lp, re.M) and "GROUP" not in lp, lp
    assert re.search(r"^FT-TCP +segs \S+/s \(\d+\).*flows 0  logger lag 0 B", ft, re.M), ft
    assert "MEMBERS: no control process asked for (--chan)" in ft, ft
