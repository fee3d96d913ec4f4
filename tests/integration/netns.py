"""Two Linux hosts in network namespaces, joined through the appliance (a shared test rig).

    namespace <tag>A            root namespace                    namespace <tag>B
    eth0 10.N.0.1/24 ==veth== <tag>a  [appliance: net_af_packet   <tag>b ==veth== eth0 10.N.0.2/24
                                        ports on <tag>a, <tag>b]

The appliance owns the root ends of the two veth pairs (net_af_packet0,iface=<tag>a and
net_af_packet1,iface=<tag>b, see .devices()); the hosts share one subnet, so ARP crosses the
appliance like everything else. Offloads are off on every veth end (the af_packet PMD sees
real frames: no TSO/GSO super-frames, real checksums), IPv6 is off on the root ends (no stray
router solicitations), each host's eth0 sends at most at its NIC rate (nic_rate, 1 Gbit/s by
default, a token-bucket qdisc), and the hosts get TCP buffers big enough to fill a
100 ms x 1 Gbit/s path. The congestion control is set explicitly: this kernel's namespaces default to BBR,
which ignores loss, and only reno and bbr are allowed outside the root namespace; Reno is
also what the Maelstrom paper's hosts ran (Linux 2.6.20).

Use it as a context manager; everything it made (namespaces, veths, processes it started) is
removed on exit, also when the body raises:

    with HostPair(tag) as hp:
        hp.echo(count=3)
        hp.iperf3(seconds=5, parallel=8)

Processes started with .popen() are killed on exit.
"""
import json
import os
import signal
import subprocess
import time
import uuid
import zlib


def sh(*cmd, check=True, timeout=30):
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=timeout)


class HostPair:
    def __init__(self, tag=None, subnet=None, cc="reno", tcp_mem_max=64 << 20, nic_rate="1gbit"):
        self.tag = tag or ("mx" + uuid.uuid4().hex[:6])
        # A subnet of its own per rig, so rigs of parallel tests never share addresses.
        n = subnet if subnet is not None else 100 + zlib.crc32(self.tag.encode()) % 100
        self.ip_a, self.ip_b = f"10.{n}.0.1", f"10.{n}.0.2"
        self.ns_a, self.ns_b = f"{self.tag}A", f"{self.tag}B"
        self.if_a, self.if_b = f"{self.tag}a", f"{self.tag}b"
        self.cc, self.tcp_mem_max, self.nic_rate = cc, tcp_mem_max, nic_rate
        self.procs = []
        self.made_ns, self.made_if = [], []

    # -- set-up and tear-down -------------------------------------------------------
    def up(self):
        for ns, ifr, ip in ((self.ns_a, self.if_a, self.ip_a), (self.ns_b, self.if_b, self.ip_b)):
            sh("ip", "netns", "add", ns)
            self.made_ns.append(ns)
            sh("ip", "link", "add", ifr, "type", "veth", "peer", "name", "eth0", "netns", ns)
            self.made_if.append(ifr)
            sh("sysctl", "-qw", f"net.ipv6.conf.{ifr}.disable_ipv6=1", check=False)
            sh("ip", "link", "set", ifr, "up")
            sh("ethtool", "-K", ifr, "tx", "off", "tso", "off", "gso", "off", "gro", "off",
               "rx", "off", check=False)
            x = ("ip", "netns", "exec", ns)
            sh(*x, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", check=False)
            sh(*x, "ip", "addr", "add", f"{ip}/24", "dev", "eth0")
            sh(*x, "ip", "link", "set", "eth0", "up")
            sh(*x, "ip", "link", "set", "lo", "up")
            sh(*x, "ethtool", "-K", "eth0", "tx", "off", "tso", "off", "gso", "off", "gro", "off",
               "rx", "off", check=False)
            if self.nic_rate:
                # The host's NIC: a veth sends as fast as the CPU goes, a NIC at its line
                # rate. Without this a TCP burst floods the appliance's rx ring faster
                # than any 1 Gbit/s host could (sch_tbf; this kernel has no fq or netem).
                sh(*x, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", self.nic_rate,
                   "burst", "64kb", "latency", "20ms")
            m = self.tcp_mem_max
            for k, v in (("net.ipv4.tcp_rmem", f"4096 131072 {m}"),
                         ("net.ipv4.tcp_wmem", f"4096 65536 {m}"),
                         ("net.ipv4.tcp_congestion_control", self.cc),
                         # Every run starts from scratch, not from cached metrics.
                         ("net.ipv4.tcp_no_metrics_save", "1")):
                sh(*x, "sysctl", "-qw", f"{k}={v}")
        return self

    def down(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    p.kill()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        self.procs.clear()
        for ns in self.made_ns:
            sh("ip", "netns", "del", ns, check=False)
        for ifr in self.made_if:
            sh("ip", "link", "del", ifr, check=False)
        self.made_ns, self.made_if = [], []

    def __enter__(self):
        try:
            return self.up()
        except BaseException:
            self.down()
            raise

    def __exit__(self, *exc):
        self.down()

    # -- helpers ----------------------------------------------------------------------
    def devices(self, framecnt=16384):
        """net_af_packet device strings for the appliance's two ports (A side, B side)."""
        return (f"net_af_packet0,iface={self.if_a},framecnt={framecnt}",
                f"net_af_packet1,iface={self.if_b},framecnt={framecnt}")

    def ns(self, side):
        return self.ns_a if side == "A" else self.ns_b

    def run(self, side, *cmd, check=True, timeout=60):
        return sh("ip", "netns", "exec", self.ns(side), *cmd, check=check, timeout=timeout)

    def popen(self, side, *cmd, **kw):
        """A process in a namespace, in its own process group; killed on exit."""
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.STDOUT)
        p = subprocess.Popen(["ip", "netns", "exec", self.ns(side), *cmd], text=True,
                             start_new_session=True, **kw)
        self.procs.append(p)
        return p

    ECHO_SRV = ("import socket\n"
                "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                "s.bind(('{ip}',{port}));print('ready',flush=True)\n"
                "while True:\n"
                "  b,a=s.recvfrom(2048);s.sendto(b,a)\n")
    ECHO_CLI = ("import socket,sys,time\n"
                "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(1.0)\n"
                "ok=0;end=time.time()+{timeout}\n"
                "while ok<{count} and time.time()<end:\n"
                "  s.sendto(b'x'*{size},('{ip}',{port}))\n"
                "  try:\n"
                "    b,_=s.recvfrom(2048);ok+=len(b)=={size}\n"
                "  except socket.timeout:\n"
                "    pass\n"
                "print(ok);sys.exit(ok<{count})\n")

    def echo(self, count=3, size=1000, port=5300, timeout=30):
        """UDP echo from A to B until `count` replies come back (there is no ping on these
        machines; the appliance may still be starting, and the link may be lossy). Returns
        the replies."""
        srv = self.popen("B", "/usr/bin/python3", "-c",
                         self.ECHO_SRV.format(ip=self.ip_b, port=port))
        try:
            assert srv.stdout.readline().strip() == "ready", "echo server did not start"
            r = self.run("A", "/usr/bin/python3", "-c",
                         self.ECHO_CLI.format(ip=self.ip_b, port=port, count=count, size=size,
                                              timeout=timeout),
                         check=False, timeout=timeout + 10)
        finally:
            os.killpg(srv.pid, signal.SIGKILL)
            srv.wait()
        if r.returncode != 0:
            raise AssertionError(f"no UDP echo through the appliance in {timeout} s: "
                                 f"{r.stdout}{r.stderr}")
        return int(r.stdout.split()[-1])

    def iperf3(self, seconds=5, parallel=8, port=5201, omit=0, extra=(), cpu=None,
               timeout_extra=60):
        """iperf3 TCP from A (client) to B (server); returns the client's JSON report
        (end.sum_received is what B got). cpu: taskset list for both ends."""
        pin = ["taskset", "-c", cpu] if cpu is not None else []
        srv = self.popen("B", *pin, "iperf3", "-s", "-1", "-p", str(port), "-B", self.ip_b)
        # The server listens within a few ms; wait until it does.
        end = time.time() + 10
        while time.time() < end:
            r = self.run("B", "ss", "-Hltn", f"sport = :{port}", check=False)
            if str(port) in r.stdout:
                break
            time.sleep(0.05)
        cmd = [*pin, "iperf3", "-c", self.ip_b, "-p", str(port), "-t", str(seconds),
               "-P", str(parallel), "-J", *(["-O", str(omit)] if omit else []), *extra]
        try:
            r = self.run("A", *cmd, check=False, timeout=seconds + omit + timeout_extra)
        finally:
            if srv.poll() is None:
                try:
                    srv.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    os.killpg(srv.pid, signal.SIGKILL)
                    srv.wait()
        try:
            rep = json.loads(r.stdout)
        except json.JSONDecodeError:
            raise AssertionError(f"iperf3 failed ({r.returncode}): {r.stdout[-2000:]}"
                                 f"{r.stderr[-2000:]}")
        if "error" in rep:
            raise AssertionError(f"iperf3: {rep['error']}")
        return rep


def iperf3_gbps(rep):
    """Receiver-side throughput of an iperf3 JSON report, Gbit/s."""
    return rep["end"]["sum_received"]["bits_per_second"] / 1e9


def iperf3_retransmits(rep):
    return rep["end"]["sum_sent"].get("retransmits", 0)
