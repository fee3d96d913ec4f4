"""Devices under test. Each one is started, offers the generator its ports (gen_ports, for
interlink-pktgen; in_sock for the testpmd generator), counts what it forwarded (fwd_count, where
it can) and stops. Two wirings:

  memif   the device's "in" is a net_memif server socket; its "out" is another memif server
          read by interlink-pktgen (out="memif") or by a testpmd rxonly sink on a CPU of its
          own (out="sink", --sink-cpu), or a net_null port inside the device (out="null"): the
          frame is freed where a NIC would free it once sent, and no third process needs a CPU
  veth    a network namespace with two veth pairs: A carries raw UDP in, B the sequenced frames
          out; interlink-pktgen's net_af_packet ports sit on the root ends, the device on the
          namespace's ends (the appliance through its own net_af_packet ports, or a kernel
          sequencer)
"""
import signal
import subprocess
import time
import uuid
from pathlib import Path

from common import (TESTPMD, Cfg, log_has, no_huge, port_ids, port_stats, rm_prefix, sh,
                    telemetry, wait_for)

MEMIF_RSIZE = 12  # 4096-entry memif rings, the depth of a typical NIC rx ring
AFP_OPTS = "qpairs=1,blocksz=4096,framesz=2048,framecnt=4096"


class Dut:
    name = "?"
    modes = ("raw", "native")
    stamps = True  # a sequencer: raw frames leave 44 bytes longer
    prefix = None
    out_dev = None  # the DPDK device name of the output port, for fwd_count()

    def __init__(self, tmp, out="memif"):
        self.tmp = Path(tmp)
        self.out = out
        self.tag = uuid.uuid4().hex[:8]
        self.proc = None
        self.logf = None
        self.logp = None
        self.before_stop = None
        self._out_port = None

    def alive(self):
        return self.proc is None or self.proc.poll() is None

    def open_log(self, what):
        self.logp = self.tmp / f"{what}-{self.tag}.log"
        self.logf = open(self.logp, "w")
        return self.logf

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

    def fwd_count(self):
        """Frames the device has sent on its output port so far (DPDK devices: their ethdev
        counters through the telemetry socket)."""
        if self._out_port is None:
            self._out_port = port_ids(self.prefix)[self.out_dev]
        return port_stats(self.prefix, self._out_port)["opackets"]

    def stage_cycles(self):
        return None

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        # Every memif client leaves before the device (the server) does: DPDK 22.11's memif
        # can panic in the interrupt thread when the server goes first.
        if self.before_stop:
            self.before_stop()
        self.stop()


class MemifDut(Dut):
    def __init__(self, tmp, out="memif"):
        super().__init__(tmp, out)
        self.in_sock = self.tmp / f"{self.name}-{self.tag}-in.sock"
        self.out_sock = self.tmp / f"{self.name}-{self.tag}-out.sock"

    def devices(self):
        memif = "socket-abstract=no"
        dev_in = f"net_memif0,role=server,socket={self.in_sock},{memif}"
        if self.out == "null":
            self.out_dev = "net_null1"
            return dev_in, "net_null1,no-rx=1"
        self.out_dev = "net_memif1"
        return dev_in, f"net_memif1,role=server,socket={self.out_sock},{memif}"

    def gen_ports(self):
        common = f"socket-abstract=no,rsize={MEMIF_RSIZE}"
        return (f"net_memif0,role=client,socket={self.in_sock},{common}",
                f"net_memif1,role=client,socket={self.out_sock},{common}")


class Appliance(MemifDut):
    """The interlink binary, default pipeline (classify -> sequencer -> nak)."""
    name = "appliance"
    extra_args = ()  # more --set options (bench/linerate/profile.py)

    def start(self):
        self.prefix = f"lrapp{self.tag}"
        for sock in (self.in_sock, self.out_sock):
            sock.unlink(missing_ok=True)
        dev_in, dev_out = self.devices()
        self.proc = subprocess.Popen(
            Cfg.nice + ["taskset", "-c", Cfg.dut_cpu, str(Cfg.build / "dataplane" / "interlink"),
                        *appliance_args(self.prefix, dev_in, dev_out), *self.extra_args],
            stdout=self.open_log("appliance"), stderr=subprocess.STDOUT)
        # The socket exists from the probe on, but a memif client that connects before the
        # port is started is turned away and does not retry: wait for the banner, printed
        # once the ports are started.
        wait_for(lambda: log_has(self.logp, f"interlink: {self.prefix} epoch"), self.proc,
                 "the appliance", logp=self.logp)

    def stage_cycles(self):
        """{stage: (frames in, busy TSC cycles)} from the appliance's own counters."""
        try:
            st = telemetry(self.prefix, "/interlink/stats")
        except (OSError, ValueError, KeyError):
            return None
        out = {}
        for name, c in (st.get("stages") or st).items():
            if isinstance(c, dict) and "pkts_in" in c and "cycles" in c:
                out[name] = (c["pkts_in"], c["cycles"])
        return out or None

    def stop(self):
        self.stop_proc()
        rm_prefix(self.prefix or "-")


FEC_CONFIG = """
name: {prefix}
status_interval_ms: 0
mtu: 1500
eal: [--no-huge, -m, "1024", --lcores, "0@{cpu},1@{cpu}", --log-level, "lib.eal:error"]
ports:
  in: {{ device: "{dev_in}" }}
  out: {{ device: "{dev_out}" }}
groups: [{{ id: 1, address: 239.1.1.1 }}]
stages:
  enc: {{ type: fec_enc, local_ip: 192.0.2.1, peer_ip: 192.0.2.2, link_id: 1 }}
  link: {{ type: impair }}
  dec: {{ type: fec_dec, local_ip: 192.0.2.2, peer_ip: 192.0.2.1, link_id: 1, hold: {hold} }}
pipeline:
  - lcore: 1
    chains: [{{ rx: in, stages: {stages}, tx: out }}]
"""


class FecPair(Appliance):
    """Both ends of a FEC link pair in one appliance (fec_enc -> impair, passing everything ->
    fec_dec, on one lcore: configs/linkpair.yaml without its shaper, loss and delay), or the
    same appliance forwarding with no stage at all (plain=True): the link pair against plain
    forwarding (docs/fec.md, "Forwarding rate"). hold: how the decoder keeps packets."""
    stamps = False

    def __init__(self, tmp, out="null", plain=False, hold="ref"):
        self.name = "plain" if plain else f"linkpair-{hold}"
        super().__init__(tmp, out)
        self.plain, self.hold = plain, hold

    def start(self):
        self.prefix = f"lrfec{self.tag}"
        for sock in (self.in_sock, self.out_sock):
            sock.unlink(missing_ok=True)
        dev_in, dev_out = self.devices()
        cfg = self.tmp / f"{self.prefix}.yaml"
        cfg.write_text(FEC_CONFIG.format(prefix=self.prefix, cpu=Cfg.dut_cpu, dev_in=dev_in,
                                         dev_out=dev_out, hold=self.hold,
                                         stages="[]" if self.plain else "[enc, link, dec]"))
        self.proc = subprocess.Popen(
            Cfg.nice + ["taskset", "-c", Cfg.dut_cpu, str(Cfg.build / "dataplane" / "interlink"),
                        "-c", str(cfg)],
            stdout=self.open_log(self.name), stderr=subprocess.STDOUT)
        wait_for(lambda: log_has(self.logp, f"interlink: {self.prefix} epoch"), self.proc,
                 self.name, logp=self.logp)


def appliance_args(prefix, dev_in, dev_out):
    return ["--set", "status_interval_ms=0", "--set", f"name={prefix}",
            "--set", f"ports.in.device={dev_in}", "--set", f"ports.out.device={dev_out}",
            "--set", 'eal=[{1}-m, "1024", --lcores, "0@{0},1@{0}", '
                     '--log-level, "lib.eal:error"]'.format(Cfg.dut_cpu,
                                                             "" if Cfg.huge else "--no-huge, ")]


class Testpmd(MemifDut):
    """dpdk-testpmd --forward-mode=io between the same two ports: the ceiling, what the
    wiring and one core allow when nothing is done to a frame."""
    name = "ceiling"
    stamps = False

    def start(self, fwd="io"):
        self.prefix = f"lrtp{self.tag}"
        for sock in (self.in_sock, self.out_sock):
            sock.unlink(missing_ok=True)
        dev_in, dev_out = self.devices()
        cmd = Cfg.nice + ["stdbuf", "-oL", "taskset", "-c", Cfg.dut_cpu, TESTPMD, *no_huge(),
                          "-m", "1024", "--file-prefix", self.prefix, "--no-pci",
                          "--lcores", f"0@{Cfg.dut_cpu},1@{Cfg.dut_cpu}",
                          "--log-level", "lib.eal:error", "--vdev", dev_in, "--vdev", dev_out,
                          "--", f"--forward-mode={fwd}", "--auto-start",
                          "--total-num-mbufs=32768", "--disable-link-check"]
        # Non-interactive testpmd forwards until Enter (or EOF) on stdin; line-buffered so
        # that "Press enter to exit" says it is forwarding.
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=self.open_log("testpmd"),
                                     stderr=subprocess.STDOUT)
        wait_for(lambda: log_has(self.logp, "Press enter to exit"), self.proc, "testpmd",
                 logp=self.logp)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.stdin.write(b"\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=20)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                pass
        self.stop_proc()
        rm_prefix(self.prefix or "-")


class RxOnly(Testpmd):
    """testpmd rxonly on the far end of one memif link: what a generator puts into memif."""
    name = "rxonly"

    def start(self):
        super().start(fwd="rxonly")

    def fwd_count(self):
        """What it took off the ring: rxonly forwards nothing."""
        if self._out_port is None:
            self._out_port = port_ids(self.prefix)["net_memif0"]
        return port_stats(self.prefix, self._out_port)["ipackets"]

    def gen_ports(self):
        tx, _ = super().gen_ports()
        return tx, tx


class Sink:
    """testpmd rxonly as a memif client of a device's "out" socket, on a CPU of its own
    (--sink-cpu): the device's output taken off its ring as a receiving host would."""

    def __init__(self, tmp, sock):
        self.tag = uuid.uuid4().hex[:8]
        self.prefix = f"lrsk{self.tag}"
        self.logp = Path(tmp) / f"sink-{self.tag}.log"
        self.proc = subprocess.Popen(
            Cfg.nice + ["stdbuf", "-oL", "taskset", "-c", Cfg.sink_cpu, TESTPMD, "--no-huge",
                        "-m", "512", "--file-prefix", self.prefix, "--no-pci",
                        "--lcores", f"0@{Cfg.sink_cpu},1@{Cfg.sink_cpu}",
                        "--log-level", "lib.eal:error",
                        "--vdev", f"net_memif0,role=client,socket={sock},socket-abstract=no,"
                                  f"rsize={MEMIF_RSIZE}",
                        "--", "--forward-mode=rxonly", "--auto-start",
                        "--total-num-mbufs=16384", "--disable-link-check"],
            stdin=subprocess.PIPE, stdout=open(self.logp, "w"), stderr=subprocess.STDOUT)
        wait_for(lambda: log_has(self.logp, "Press enter to exit"), self.proc, "the sink",
                 logp=self.logp)

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(b"\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=20)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        rm_prefix(self.prefix)


class Null(Dut):
    """net_null: the generator alone, nothing but its own work."""
    name = "null"
    stamps = False

    def start(self):
        pass

    def stop(self):
        pass

    def gen_ports(self):
        return "net_null0,no-rx=1", "net_null0,no-rx=1"


class VethDut(Dut):
    """The veth wiring: a namespace of its own, two veth pairs, offloads off (a rewritten
    frame keeps a checksum the receiver can check), IPv6 off (no neighbour chatter)."""
    modes = ("raw",)

    def start(self):
        t = self.tag[:6]
        self.ns = f"ilk{t}"
        self.a0, self.a1, self.b0, self.b1 = f"ilka{t}", f"ilkA{t}", f"ilkb{t}", f"ilkB{t}"
        sh("ip", "netns", "add", self.ns)
        self.nse = ["ip", "netns", "exec", self.ns]
        sh("ip", "link", "add", self.a0, "type", "veth", "peer", "name", self.a1, "netns", self.ns)
        sh("ip", "link", "add", self.b0, "type", "veth", "peer", "name", self.b1, "netns", self.ns)
        off = ["tx", "off", "rx", "off", "gso", "off", "gro", "off", "tso", "off"]
        for dev in (self.a0, self.b0):
            sh("sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1", check=False)
            sh("ethtool", "-K", dev, *off, check=False)
            sh("ip", "link", "set", dev, "up")
        for dev, addr in ((self.a1, "10.0.0.254/8"), (self.b1, "10.255.0.1/24")):
            sh(*self.nse, "sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1", check=False)
            sh(*self.nse, "ethtool", "-K", dev, *off, check=False)
            sh(*self.nse, "ip", "addr", "add", addr, "dev", dev)
            sh(*self.nse, "ip", "link", "set", dev, "up")
        sh(*self.nse, "ip", "link", "set", "lo", "up")
        for key in ("all", "default", self.a1):
            sh(*self.nse, "sysctl", "-qw", f"net.ipv4.conf.{key}.rp_filter=0", check=False)
        # A veth has no receive CPU of its own: the receiving side's kernel work (the IP
        # stack, the copy into a packet socket's ring) would run on the sender's CPU. Receive
        # packet steering puts it where a NIC's interrupt would: frames into the device on
        # the device's CPU, frames back to the generator on the generator's CPU.
        rps = "echo {:x} > /sys/class/net/{}/queues/rx-0/rps_cpus"
        sh(*self.nse, "sh", "-c", rps.format(1 << int(Cfg.dut_cpu), self.a1))
        sh("sh", "-c", rps.format(1 << int(Cfg.gen_cpu), self.b0))
        self.start_device()

    def start_device(self):
        raise NotImplementedError

    def stop(self):
        self.stop_device()
        ns = getattr(self, "ns", None)
        if ns:
            sh("ip", "netns", "del", ns, check=False)
            for dev in (self.a0, self.b0):  # gone with their peers; make sure
                sh("ip", "link", "del", dev, check=False)

    def stop_device(self):
        self.stop_proc(signal.SIGTERM)

    def gen_ports(self):
        return (f"net_af_packet0,iface={self.a0},{AFP_OPTS}",
                f"net_af_packet1,iface={self.b0},{AFP_OPTS}")

    def started(self, what):
        time.sleep(0.3)
        if self.proc.poll() is not None:
            raise RuntimeError(f"{what} exited: " + self.logp.read_text())


class KernelSockets(VethDut):
    """kseq: the raw-mode job with UDP sockets (recvmmsg/sendmmsg in batches of 64)."""
    name = "kseq"

    def start_device(self):
        self.proc = subprocess.Popen(
            [*self.nse, *Cfg.nice, "taskset", "-c", Cfg.dut_cpu, str(Cfg.kseq),
             "--in-addr", "10.0.0.254", "--out-addr", "10.255.0.1"],
            stdout=self.open_log("kseq"), stderr=subprocess.STDOUT)
        self.started("kseq")


class KernelPacket(VethDut):
    """afpseq: the raw-mode job on one AF_PACKET socket with mmap'ed TPACKET rings."""
    name = "afpseq"

    def start_device(self):
        self.proc = subprocess.Popen(
            [*self.nse, *Cfg.nice, "taskset", "-c", Cfg.dut_cpu, str(Cfg.afpseq),
             "--in", self.a1, "--out", self.b1],
            stdout=self.open_log("afpseq"), stderr=subprocess.STDOUT)
        self.started("afpseq")


class ApplianceVeth(VethDut):
    """The appliance on the same veth wiring, through DPDK's net_af_packet ports."""
    name = "appliance-afp"

    def start_device(self):
        self.prefix = f"lrav{self.tag}"
        self.proc = subprocess.Popen(
            [*self.nse, *Cfg.nice, "taskset", "-c", Cfg.dut_cpu,
             str(Cfg.build / "dataplane" / "interlink"),
             *appliance_args(self.prefix, f"net_af_packet0,iface={self.a1},{AFP_OPTS}",
                             f"net_af_packet1,iface={self.b1},{AFP_OPTS}")],
            stdout=self.open_log("appliance-afp"), stderr=subprocess.STDOUT)
        wait_for(lambda: log_has(self.logp, f"interlink: {self.prefix} epoch"), self.proc,
                 "the appliance (af_packet)", logp=self.logp)

    def stop_device(self):
        self.stop_proc()
        rm_prefix(self.prefix or "-")
