#!/usr/bin/python3
"""The line-rate benchmark of issue 3, in one command.

The generator (interlink-pktgen, CPU 0) drives a device under test (CPU 1) over two net_memif
links, or over veth pairs for the kernel baseline:

  appliance   the interlink binary, default pipeline (classify -> sequencer -> nak)
  ceiling     dpdk-testpmd --forward-mode=io on the same wiring: what memif and one core allow
  kernel      bench/linerate/kseq.c: the same raw-mode sequencing job with recvmmsg/sendmmsg,
              in a network namespace joined to pktgen's net_af_packet ports by veth pairs

For each case: the maximum forwarding rate (offered as fast as the generator goes) and the
no-drop rate (the largest offered rate with zero frames lost over a trial, found by search as
FD.io CSIT's MLRsearch does: start at the maximum forwarding rate, widen downwards until a trial
passes, then bisect). Then an offered-load sweep with latency percentiles, plotted as latency
against throughput.

  ./scripts/bench-linerate.sh            # full run (~15 min), writes docs/benchmarks.md
  ./scripts/bench-linerate.sh --quick    # one short point of each kind (smoke test)
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TESTPMD = shutil.which("dpdk-testpmd") or "/usr/bin/dpdk-testpmd"
GEN_CPU, DUT_CPU = "0", "1"
NICE = []
PDR_LOSS = 0.005  # CSIT's partial drop rate: loss ratio of at most 0.5%
MEMIF_RSIZE = 12  # 4096-entry memif rings, the depth of a typical NIC rx ring


def log(msg):
    print(msg, flush=True)


def rm_prefix(prefix):
    shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)


def wait_for(paths, proc, what, timeout=20):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if all(Path(p).exists() for p in paths):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not come up in {timeout} s")


class Dut:
    """A device under test: start(), the generator's ports, stop()."""
    name = "?"
    modes = ("raw", "native")

    def __init__(self, tmp):
        self.tmp = Path(tmp)
        self.tag = uuid.uuid4().hex[:8]
        self.proc = None
        self.logf = None

    def alive(self):
        return self.proc is None or self.proc.poll() is None

    def stop_proc(self, sig=signal.SIGINT, timeout=20):
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.send_signal(sig)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.logf:
            self.logf.close()
            self.logf = None

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        # The generator (a memif client) leaves before the device (the server).
        if getattr(self, "before_stop", None):
            self.before_stop()
        self.stop()


class MemifDut(Dut):
    def __init__(self, tmp):
        super().__init__(tmp)
        self.sock_in = self.tmp / f"{self.name}-{self.tag}-in.sock"
        self.sock_out = self.tmp / f"{self.name}-{self.tag}-out.sock"

    def gen_ports(self):
        common = f"socket-abstract=no,rsize={MEMIF_RSIZE}"
        return (f"net_memif0,role=client,socket={self.sock_in},{common}",
                f"net_memif1,role=client,socket={self.sock_out},{common}")


class Appliance(MemifDut):
    name = "appliance"

    def start(self):
        self.prefix = f"lrapp{self.tag}"
        for sock in (self.sock_in, self.sock_out):
            sock.unlink(missing_ok=True)
        self.logf = open(self.tmp / f"appliance-{self.tag}.log", "w")
        cmd = NICE + ["taskset", "-c", DUT_CPU, str(BUILD / "dataplane" / "interlink"),
               "--set", "status_interval_ms=0",
               "--set", f"name={self.prefix}",
               "--set", f"ports.in.device=net_memif0,role=server,socket={self.sock_in},"
                        "socket-abstract=no",
               "--set", f"ports.out.device=net_memif1,role=server,socket={self.sock_out},"
                        "socket-abstract=no",
               "--set", 'eal=[--no-huge, -m, "1024", --lcores, "0@1,1@1", '
                        '--log-level, "lib.eal:error"]']
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT)
        wait_for([self.sock_in, self.sock_out], self.proc, "the appliance")
        # The socket exists from the probe on, but a memif client that connects before the
        # port is started is turned away and does not retry: wait for the banner, printed
        # once the ports are started.
        logp = self.tmp / f"appliance-{self.tag}.log"
        t0 = time.time()
        while f"interlink: {self.prefix} epoch" not in logp.read_text():
            if self.proc.poll() is not None or time.time() - t0 > 30:
                raise RuntimeError("the appliance did not start: " + logp.read_text())
            time.sleep(0.05)

    def stop(self):
        self.stop_proc()
        rm_prefix(getattr(self, "prefix", "-"))


class Testpmd(MemifDut):
    """dpdk-testpmd io forwarding between the same two memif server ports: the ceiling."""
    name = "ceiling"

    def start(self, fwd="io"):
        self.fwd = fwd
        self.prefix = f"lrtp{self.tag}"
        for sock in (self.sock_in, self.sock_out):
            sock.unlink(missing_ok=True)
        self.logf = open(self.tmp / f"testpmd-{self.tag}.log", "w")
        cmd = NICE + ["stdbuf", "-oL", "taskset", "-c", DUT_CPU, TESTPMD, "--no-huge", "-m", "1024",
               "--file-prefix", self.prefix, "--no-pci", "--lcores", "0@1,1@1",
               "--log-level", "lib.eal:error",
               "--vdev", f"net_memif0,role=server,socket={self.sock_in},socket-abstract=no",
               "--vdev", f"net_memif1,role=server,socket={self.sock_out},socket-abstract=no",
               "--", f"--forward-mode={fwd}", "--auto-start", "--total-num-mbufs=32768",
               "--disable-link-check"]
        # Non-interactive testpmd forwards until Enter (or EOF) on stdin; line-buffered so
        # that "Press enter to exit" says it is forwarding.
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=self.logf,
                                     stderr=subprocess.STDOUT)
        t0 = time.time()
        while "Press enter to exit" not in (self.tmp / f"testpmd-{self.tag}.log").read_text():
            if self.proc.poll() is not None or time.time() - t0 > 20:
                raise RuntimeError("testpmd did not start: " +
                                   (self.tmp / f"testpmd-{self.tag}.log").read_text())
            time.sleep(0.05)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.stdin.write(b"\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=20)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                pass
        self.stop_proc()
        rm_prefix(getattr(self, "prefix", "-"))


class RxOnly(Testpmd):
    """testpmd rxonly on the far end of one memif link: the generator alone, over memif."""
    name = "rxonly"
    modes = ("raw",)

    def start(self):
        super().start(fwd="rxonly")

    def gen_ports(self):
        tx, _ = super().gen_ports()
        return tx, tx


class Null(Dut):
    """net_null: the generator alone, nothing but its own work."""
    name = "null"
    modes = ("raw", "native")

    def start(self):
        pass

    def stop(self):
        pass

    def gen_ports(self):
        return "net_null0,no-rx=1", "net_null0,no-rx=1"


def sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


class Kernel(Dut):
    """kseq in a network namespace; pktgen's af_packet ports on the root ends of two veth
    pairs: A carries raw UDP in, B carries the sequenced frames out."""
    name = "kernel"
    modes = ("raw",)

    def start(self):
        t = self.tag[:6]
        self.ns = f"ilk{t}"
        self.a0, self.a1, self.b0, self.b1 = f"ilka{t}", f"ilkA{t}", f"ilkb{t}", f"ilkB{t}"
        sh("ip", "netns", "add", self.ns)
        sh("ip", "link", "add", self.a0, "type", "veth", "peer", "name", self.a1, "netns", self.ns)
        sh("ip", "link", "add", self.b0, "type", "veth", "peer", "name", self.b1, "netns", self.ns)
        nse = ["ip", "netns", "exec", self.ns]
        for dev in (self.a0, self.b0):
            sh("sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1", check=False)
            sh("ethtool", "-K", dev, "tx", "off", "rx", "off", "gso", "off", "gro", "off",
               "tso", "off", check=False)
            sh("ip", "link", "set", dev, "up")
        for dev, addr in ((self.a1, "10.0.0.254/8"), (self.b1, "10.255.0.1/24")):
            sh(*nse, "sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1", check=False)
            sh(*nse, "ethtool", "-K", dev, "tx", "off", "rx", "off", "gso", "off", "gro", "off",
               "tso", "off", check=False)
            sh(*nse, "ip", "addr", "add", addr, "dev", dev)
            sh(*nse, "ip", "link", "set", dev, "up")
        sh(*nse, "ip", "link", "set", "lo", "up")
        for key in ("all", "default", self.a1):
            sh(*nse, "sysctl", "-qw", f"net.ipv4.conf.{key}.rp_filter=0", check=False)
        self.json = self.tmp / f"kseq-{self.tag}.json"
        self.logf = open(self.tmp / f"kseq-{self.tag}.log", "w")
        self.proc = subprocess.Popen(
            [*nse, *NICE, "taskset", "-c", DUT_CPU, str(KSEQ), "--in-addr", "10.0.0.254",
             "--out-addr", "10.255.0.1", "--json", str(self.json)],
            stdout=self.logf, stderr=subprocess.STDOUT)
        time.sleep(0.3)
        if self.proc.poll() is not None:
            raise RuntimeError("kseq exited: " + (self.tmp / f"kseq-{self.tag}.log").read_text())

    def stop(self):
        self.stop_proc(signal.SIGTERM)
        ns = getattr(self, "ns", None)
        if ns:
            sh("ip", "netns", "del", ns, check=False)
            for dev in (self.a0, self.b0):  # gone with their peers; make sure
                sh("ip", "link", "del", dev, check=False)

    def gen_ports(self):
        opts = "qpairs=1,blocksz=4096,framesz=2048,framecnt=4096"
        return (f"net_af_packet0,iface={self.a0},{opts}", f"net_af_packet1,iface={self.b0},{opts}")


class GenError(Exception):
    pass


class Generator:
    """interlink-pktgen --serve: one process and one connection for all the trials of one
    device and frame size (a memif client reconnecting for every trial costs seconds and,
    with DPDK 22.11, sometimes the server)."""

    def __init__(self, tmp, dut, case, nice):
        tx, rx = dut.gen_ports()
        self.prefix = f"lrgen{uuid.uuid4().hex[:8]}"
        self.err = open(Path(tmp) / f"{self.prefix}.log", "w")
        self.errp = Path(tmp) / f"{self.prefix}.log"
        cmd = ["taskset", "-c", GEN_CPU, str(BUILD / "pktgen" / "interlink-pktgen"),
               "--serve", "--tx", tx, "--rx", rx, "--mode", case["mode"],
               "--frame", str(case["frame"]), "--groups", "1", "--senders", "8",
               "--receivers", "8", "--tx-drop", "--drain-timeout", "1", "--link-wait", "30",
               # A generator that lost its CPU does not make up with a burst the device
               # would never see from a wire: what it could not send is not offered, and
               # the offered rate that counts is the one achieved.
               "--catch-up-us", "200",
               "--", "--file-prefix", self.prefix, "--lcores", "0", "--no-huge", "-m", "1024",
               "--log-level", "lib.eal:error"]
        if nice:
            cmd = ["nice", "-n", str(nice)] + cmd
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, text=True, bufsize=1)
        self.fd, self.buf = self.p.stdout.fileno(), b""
        line = self.readline(60)
        if line.strip() != "READY":
            self.close()
            raise GenError(f"generator did not start: {line}{self.errp.read_text()}")

    def readline(self, timeout):
        # select() on the raw descriptor with our own buffer: a buffered reader may hold
        # the next lines already, and select() would not say so.
        import select
        deadline = time.time() + timeout
        while b"\n" not in self.buf:
            r, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.time()))
            if not r:
                raise GenError("generator timed out: " + self.errp.read_text())
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise GenError(f"generator exited ({self.p.poll()}): " + self.errp.read_text())
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode() + "\n"

    def trial(self, rate, secs, senders, receivers):
        try:
            self.p.stdin.write(f"trial {int(rate)} {secs} {senders} {receivers}\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            raise GenError("generator gone: " + self.errp.read_text())
        out = []
        t0 = time.time()
        while True:
            line = self.readline(max(1.0, secs + 30 - (time.time() - t0)))
            if line.strip() == "END":
                break
            out.append(line)
        text = "".join(out)
        if text.startswith("ERROR"):
            raise RuntimeError(text)
        return json.loads(text)

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write("quit\n")
                self.p.stdin.flush()
                self.p.wait(timeout=10)
            except (BrokenPipeError, subprocess.TimeoutExpired, ValueError):
                self.p.kill()
                self.p.wait()
        self.err.close()
        rm_prefix(self.prefix)


class Runner:
    def __init__(self, args, tmp):
        self.args = args
        self.tmp = Path(tmp)
        self.trials = []
        self.restarts = {}
        self.n = 0
        self.gen, self.gen_key = None, None

    def gen_for(self, dut, case):
        key = (id(dut), dut.tag, case["mode"], case["frame"])
        if self.gen_key != key:
            self.close_gen()
            self.gen = Generator(self.tmp, dut, case, self.args.nice)
            self.gen_key = key
            dut.before_stop = self.close_gen
        return self.gen

    def close_gen(self):
        if self.gen:
            self.gen.close()
        self.gen, self.gen_key = None, None

    def trial(self, dut, case, rate_pps=0, duration=None):
        """One trial in count mode on the generator serving this device and frame: frames
        that the port refuses are lost, as on a wire."""
        d = duration or self.args.trial
        r = None
        for attempt in range(3):
            if not dut.alive():
                # DPDK 22.11's memif can panic in the interrupt thread when a peer leaves
                # mid-message (docs/interop.md): count it, start the device again.
                log(f"  ({dut.name} exited: restarting it)")
                self.restarts[dut.name] = self.restarts.get(dut.name, 0) + 1
                self.close_gen()
                dut.stop()
                dut.start()
            try:
                g = self.gen_for(dut, case)
                r = g.trial(rate_pps, d, case.get("senders", 1), case.get("receivers", 1))
                break
            except GenError as e:
                log(f"  (generator failed, retrying: {str(e)[-300:]})")
                self.close_gen()
        if r is None:
            raise RuntimeError("the generator failed three times in a row")
        r.update(dut=dut.name, case=dict(case), target_pps=rate_pps, duration=d)
        r["ok"] = r["lost"] == 0 and r["seq_missing"] == 0 and r["rx_data"] > 0
        self.trials.append(r)
        self.n += 1
        lat = r["latency_us"]
        log(f"  [{self.n:3d}] {dut.name:9s} {case['mode']:6s} {case['frame']:>4} B "
            f"S{case.get('senders', 1)} R{case.get('receivers', 1)}  target "
            f"{rate_pps / 1e6 if rate_pps else float('inf'):6.3f}  offered "
            f"{r['offered_mpps']:6.3f}  fwd {r['rx_mpps']:6.3f} Mpps  lost {r['lost']:>8}  "
            f"p50 {lat['p50']:8.1f} p99 {lat['p99']:9.1f} us  {'ok' if r['ok'] else 'LOSS'}")
        return r

    def mfr(self, dut, case, reps=None):
        """The maximum forwarding rate: the median of reps trials offered as fast as the
        generator goes (one trial is at the mercy of whoever else has the CPU)."""
        reps = reps or self.args.reps
        rs = sorted((self.trial(dut, case) for _ in range(reps)), key=lambda r: r["rx_mpps"])
        m = rs[len(rs) // 2]
        m["mfr_all"] = [r["rx_mpps"] for r in rs]
        return m

    def mfr_ndr(self, dut, case, search=True, mfr=None):
        """Maximum forwarding rate, then the no-drop rate (NDR, zero loss) and the partial-drop
        rate (PDR, loss ratio <= 0.5%) found together, as MLRsearch does: every trial narrows
        both intervals; the next trial serves the target whose interval is still widest."""
        mfr = mfr or self.mfr(dut, case)
        out = {"case": case, "dut": dut.name, "mfr_mpps": mfr["rx_mpps"],
               "mfr_trials_mpps": mfr.get("mfr_all", [mfr["rx_mpps"]]),
               "offered_max_mpps": mfr["offered_mpps"], "mfr_gbps": gbps(mfr["rx_mpps"], case),
               "mfr_latency": mfr["latency_us"]}
        if not search:
            return out
        top = max(mfr["offered_mpps"], mfr["rx_mpps"]) * 1e6
        tg = {name: {"tol": tol, "lo": 0.0, "hi": top, "best": None,
                     "width": 0.1 * mfr["rx_mpps"] * 1e6}
              for name, tol in (("ndr", 0.0), ("pdr", PDR_LOSS))}
        rate = mfr["rx_mpps"] * 1e6 * 0.999
        for _ in range(self.args.steps):
            if rate <= 1000:
                break
            r = self.trial(dut, case, rate)
            # On a shared machine one trial is at the mercy of whoever else has the CPU
            # for a few milliseconds: a rate that lost frames is tried again (--retries),
            # and passes if one of its trials loses nothing.
            for _ in range(self.args.retries):
                if r["lost"] == 0 and r["seq_missing"] == 0 and r["rx_data"] > 0:
                    break
                again = self.trial(dut, case, rate)
                if again["lost"] / max(again["offered_frames"], 1) < \
                        r["lost"] / max(r["offered_frames"], 1):
                    r = again
            # The rate tested is what the generator managed to offer, which on a busy
            # machine can fall short of the target.
            tested = min(rate, r["offered_mpps"] * 1e6) if r["offered_mpps"] else rate
            loss = r["lost"] / r["offered_frames"] if r["offered_frames"] else 1.0
            for t in tg.values():
                if r["rx_data"] > 0 and loss <= t["tol"] and r["seq_missing"] <= t["tol"] * \
                        r["offered_frames"]:
                    if tested > t["lo"]:
                        t["lo"], t["best"] = tested, r
                else:
                    t["hi"] = min(t["hi"], tested)
                    if t["lo"] >= t["hi"]:  # a noisy pass above a fail: trust the fail
                        t["lo"], t["best"] = 0.0, None
            open_ = [t for t in tg.values()
                     if not (t["best"] and t["hi"] - t["lo"] <= self.args.precision * t["hi"])]
            if not open_:
                break
            t = open_[0]  # NDR first: it is the lower one, and the PDR search follows it
            if t["best"]:
                rate = (t["lo"] + t["hi"]) / 2
            else:  # widen downwards until a trial passes (MLRsearch's external search)
                rate = max(t["hi"] - t["width"], t["hi"] * 0.05)
                t["width"] *= 2
        # A zero-loss pass is a partial-drop pass too: noise cannot make the PDR the lower.
        if tg["ndr"]["lo"] > tg["pdr"]["lo"]:
            tg["pdr"]["lo"], tg["pdr"]["best"] = tg["ndr"]["lo"], tg["ndr"]["best"]
        for name, t in tg.items():
            out[f"{name}_mpps"] = t["lo"] / 1e6
            out[f"{name}_gbps"] = gbps(t["lo"] / 1e6, case)
            out[f"{name}_latency"] = t["best"]["latency_us"] if t["best"] else None
        return out

    def sweep(self, dut, case, mfr_mpps, fractions):
        pts = []
        for f in fractions:
            r = self.trial(dut, case, mfr_mpps * 1e6 * f)
            pts.append({"fraction": f, "offered_mpps": r["offered_mpps"],
                        "fwd_mpps": r["rx_mpps"], "lost": r["lost"], "latency": r["latency_us"]})
        return pts


def gbps(mpps, case):
    """Wire rate of the frames offered (frame + 20 B of preamble and gap)."""
    return mpps * 1e6 * (case["frame"] + 20) * 8 / 1e9


def machine():
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "load_at_start": os.getloadavg()}


def build_kseq(outdir):
    exe = Path(outdir) / "kseq"
    srcs = [HERE / "kseq.c", ROOT / "lib" / "util" / "json.c"]  # the project's JSON writer
    if not exe.exists() or exe.stat().st_mtime < max(s.stat().st_mtime for s in srcs):
        subprocess.run(["cc", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror",
                        "-I", str(ROOT / "include"), "-o", str(exe)] + [str(s) for s in srcs],
                       check=True)
    return exe


def main():
    global BUILD, KSEQ, NICE
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("IL_BUILD", str(ROOT / "build")))
    ap.add_argument("--quick", action="store_true", help="one short point of each kind")
    ap.add_argument("--trial", type=float, help="seconds per trial (default 1; quick 0.3)")
    ap.add_argument("--steps", type=int, help="search trials per case (default 10; quick 1)")
    ap.add_argument("--reps", type=int,
                    help="trials per maximum forwarding rate, median taken (default 3; quick 1)")
    ap.add_argument("--retries", type=int,
                    help="extra trials at a rate that lost frames before it counts as failed "
                         "(default 2; quick 0)")
    ap.add_argument("--precision", type=float, default=0.03,
                    help="stop the search when (hi - lo) / hi is below this (default 0.03)")
    ap.add_argument("--out", help="results directory (default bench/linerate/results; quick: "
                                  "a temporary directory)")
    ap.add_argument("--docs", action="store_true",
                    help="write the section of docs/benchmarks.md and the plots (default for a "
                         "full run)")
    ap.add_argument("--no-docs", action="store_true")
    ap.add_argument("--skip-kernel", action="store_true")
    ap.add_argument("--nice", type=int, default=0,
                    help="run the generator and the devices at this nice value (default 0: "
                         "a fair share of a shared machine; -10 to push other work aside). "
                         "With the kernel's autogroup scheduling, nice only ranks processes "
                         "of one session, so the run moves to a session of its own and sets "
                         "that session's nice as well")
    a = ap.parse_args()
    if a.trial is None:
        a.trial = 0.3 if a.quick else 1.0
    if a.reps is None:
        a.reps = 1 if a.quick else 5
    if a.retries is None:
        a.retries = 0 if a.quick else 2
    if a.steps is None:
        a.steps = 1 if a.quick else 10
    if a.nice and Path("/proc/self/autogroup").exists():
        if os.getsid(0) != os.getpid():
            # setsid forks when we lead a process group; -w passes the exit status on.
            os.execvp("setsid", ["setsid", "-w", sys.executable, *sys.argv])
        Path("/proc/self/autogroup").write_text(str(a.nice))
    BUILD = Path(a.build).resolve()
    NICE = ["nice", "-n", str(a.nice)] if a.nice else []
    for b in (BUILD / "dataplane" / "interlink", BUILD / "pktgen" / "interlink-pktgen"):
        if not b.exists():
            sys.exit(f"{b} is missing: build first (./scripts/build.sh)")
    if os.geteuid() != 0:
        sys.exit("run as root (memif sockets, network namespaces)")
    out = Path(a.out) if a.out else (Path(tempfile.mkdtemp(prefix="linerate-")) if a.quick
                                      else HERE / "results")
    out.mkdir(parents=True, exist_ok=True)
    write_docs = (a.docs or not a.quick) and not a.no_docs
    KSEQ = build_kseq(out)
    # SIGTERM (a timeout, a CI job cancelled) unwinds like Ctrl-C: every DUT is stopped
    # and every namespace removed by the with blocks.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))

    started = datetime.datetime.now(datetime.timezone.utc)
    res = {"date": started.strftime("%Y-%m-%d %H:%M UTC"), "machine": machine(),
           "command": " ".join(["./scripts/bench-linerate.sh"] +
                               [x for x in sys.argv[1:]
                                if not x.startswith("--build") and x != str(a.build)]),
           "trial_s": a.trial, "quick": a.quick, "reps": a.reps, "retries": a.retries,
           "nice": a.nice}
    tmp = tempfile.mkdtemp(prefix="linerate-run-")
    R = Runner(a, tmp)
    t0 = time.time()
    raw64 = {"mode": "raw", "frame": 64}
    sizes = [raw64] if a.quick else [raw64, {"mode": "native", "frame": 106},
                                     {"mode": "native", "frame": 512},
                                     {"mode": "native", "frame": 1500}]
    fractions = [0.5] if a.quick else [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    try:
        log("== the generator alone (as fast as possible, one core)")
        res["generator"] = []
        with Null(tmp) as d:
            for c in ([raw64] if a.quick else [raw64, {"mode": "native", "frame": 106}]):
                r = R.trial(d, c, duration=max(a.trial, 1.0 if not a.quick else 0.3))
                res["generator"].append({"into": "net_null", "case": c,
                                         "mpps": r["tx_mpps"], "gbps": r["tx_gbps"]})
        if not a.quick:
            with RxOnly(tmp) as d:
                r = R.trial(d, raw64)
                res["generator"].append({"into": "memif to testpmd rxonly", "case": raw64,
                                         "mpps": r["offered_mpps"], "accepted_mpps": r["tx_mpps"],
                                         "gbps": r["tx_gbps"]})

        log("== frame sizes: appliance and ceiling (testpmd io), S1 R1")
        res["sizes"] = []
        for c in sizes:
            row = {"case": c}
            # Maximum rates in pairs, the appliance then the ceiling, one pair after the
            # other: the load of a shared machine drifts over minutes, and a pair sees
            # about the same. The ratio is the median of the pairs' ratios.
            pairs = []
            for _ in range(a.reps):
                with Appliance(tmp) as d:
                    ra = R.trial(d, c)
                with Testpmd(tmp) as d:
                    rc = R.trial(d, c)
                pairs.append((ra, rc))
            meds = {}
            for i, name in ((0, "appliance"), (1, "ceiling")):
                rs = sorted((p[i] for p in pairs), key=lambda r: r["rx_mpps"])
                meds[name] = dict(rs[len(rs) // 2], mfr_all=[r["rx_mpps"] for r in rs])
            ratios = sorted(p[0]["rx_mpps"] / p[1]["rx_mpps"] for p in pairs
                            if p[1]["rx_mpps"] > 0)
            row["paired_max_ratio"] = ratios[len(ratios) // 2] if ratios else 0
            row["paired_max_ratios"] = ratios
            with Appliance(tmp) as d:
                row["appliance"] = R.mfr_ndr(d, c, mfr=meds["appliance"])
            with Testpmd(tmp) as d:
                row["ceiling"] = R.mfr_ndr(d, c, mfr=meds["ceiling"])
            res["sizes"].append(row)
            save(out, res)

        if not a.skip_kernel:
            log("== kernel-socket baseline (kseq, recvmmsg/sendmmsg), 64 B raw")
            with Kernel(tmp) as d:
                # Let the namespace settle (IGMP reports, link-local chatter) first.
                time.sleep(0.2)
                res["kernel"] = R.mfr_ndr(d, raw64)
            save(out, res)

        log("== senders and receivers (appliance, 64 B raw)")
        res["senders"], res["receivers"] = [], []
        with Appliance(tmp) as d:
            for key in ("senders", "receivers"):
                cases = [dict(raw64, **{key: n}) for n in ([8] if a.quick else [1, 4, 8])]
                # Interleaved, so that a busy spell of the machine does not land on one
                # count only; the median of the repetitions is the figure.
                runs = {i: [] for i in range(len(cases))}
                for _ in range(a.reps):
                    for i, c in enumerate(cases):
                        runs[i].append(R.trial(d, c))
                for i, c in enumerate(cases):
                    rs = sorted(runs[i], key=lambda r: r["rx_mpps"])
                    m = rs[len(rs) // 2]
                    m["mfr_all"] = [r["rx_mpps"] for r in rs]
                    res[key].append(R.mfr_ndr(d, c, search=not a.quick, mfr=m))
        save(out, res)

        log("== offered-load sweep with latency (64 B raw)")
        res["sweep"] = {}
        app_mfr = res["sizes"][0]["appliance"]["mfr_mpps"]
        with Appliance(tmp) as d:
            res["sweep"]["appliance"] = R.sweep(d, raw64, app_mfr, fractions)
        with Testpmd(tmp) as d:
            res["sweep"]["ceiling"] = R.sweep(d, raw64, res["sizes"][0]["ceiling"]["mfr_mpps"],
                                              fractions)
        if not a.skip_kernel:
            with Kernel(tmp) as d:
                res["sweep"]["kernel"] = R.sweep(d, raw64, res["kernel"]["mfr_mpps"], fractions)
    except KeyboardInterrupt:
        log("interrupted: devices stopped, namespaces removed")
        shutil.rmtree(tmp, ignore_errors=True)
        raise SystemExit(130)
    except Exception:
        keep = out / "failed-run-logs"
        shutil.rmtree(keep, ignore_errors=True)
        shutil.copytree(tmp, keep, ignore=shutil.ignore_patterns("*.sock"))
        shutil.rmtree(tmp, ignore_errors=True)
        log(f"failed: the devices' logs are in {keep}")
        raise
    shutil.rmtree(tmp, ignore_errors=True)
    res["elapsed_s"] = round(time.time() - t0, 1)
    res["trials"] = R.trials
    res["dut_restarts"] = R.restarts
    save(out, res)
    log(f"== done in {res['elapsed_s']:.0f} s: {out / 'linerate.json'}")
    sys.path.insert(0, str(HERE))
    import report
    report.write(res, out, ROOT / "docs" if write_docs else out, write_docs)
    return 0


def save(out, res):
    (out / "linerate.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    sys.exit(main())
