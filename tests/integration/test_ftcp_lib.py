"""FT-TCP rig and applications (no tests here; test_ftcp.py has them).

Topology: two network namespaces (client, server), each joined by a veth
pair to the root namespace, whose ends are the appliance's two
net_af_packet ports. The appliance bridges them (ARP passes through), so
client 10.77.0.1 and server 10.77.0.2 share one subnet. With backup=True
the server side is a Linux bridge (switch B) with two server hosts on it:
the primary, and a backup that holds the server's address on a link that
is down until fail_over() brings it up (its gratuitous ARP, arp_notify). interlink-control
runs in the root namespace with its FT-TCP logger thread (--ftcp-dir); the server runs under LD_PRELOAD=libilftcp.so and
reaches the logger's unix socket through the shared filesystem.

Run as a program, this file is also the server and client applications:
  server --mode sink|source|echo --port P      (deterministic, threaded)
  client --mode ... --host H --port P --bytes N --seed S [--rate B/s]
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
BUILD = Path(os.environ.get("IL_BUILD", ROOT / "build")).resolve()
INTERLINK = BUILD / "dataplane" / "interlink"
CONTROL = BUILD / "control" / "interlink-control"
SHIM = BUILD / "shim" / "libilftcp.so"
EVSERVER = BUILD / "tests" / "integration" / "ftcp_evserver"
PY = "/usr/bin/python3"
CLIENT_IP, SERVER_IP, PORT = "10.77.0.1", "10.77.0.2", 5001
V6 = {CLIENT_IP: "fd77::1", SERVER_IP: "fd77::2"}


def crash_seed():
    """The seed a crash test draws its timings from: IL_TEST_SEED when set (to run a failure
    again: every such test prints its seed), else a random one."""
    env = os.environ.get("IL_TEST_SEED")
    return int(env) if env else random.randrange(1 << 30)


def sh(*cmd, check=True):
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def payload(seed, n):
    return random.Random(seed).randbytes(n)


class Rig:
    """Namespaces, appliance, logger, server; everything torn down in stop()."""

    def __init__(self, tmp: Path, strategy="lazy", durability="none", logger_args=(),
                 server_mode="sink", app_sets=(), server_env=None, backup=False,
                 server_cmd=None, ipv6=False, trace=True):
        self.tmp = tmp
        self.tag = uuid.uuid4().hex[:6]
        self.ns_c, self.ns_s = f"ftc{self.tag}", f"fts{self.tag}"
        self.if_c, self.if_s = f"fc{self.tag}", f"fs{self.tag}"
        # backup=True: bridge, its port towards the appliance, primary's and backup's links
        self.backup, self.ns_b, self.br = backup, f"ftb{self.tag}", f"fbr{self.tag}"
        self.if_sb, self.if_p, self.if_q = f"fx{self.tag}", f"fp{self.tag}", f"fq{self.tag}"
        self.server_ns = self.ns_s
        self.ring = f"/dev/shm/ilft-{self.tag}"
        self.sock = str(tmp / "ftlog.sock")
        self.logdir = tmp / "logs"
        self.strategy, self.durability = strategy, durability
        self.logger_args = list(logger_args)
        self.server_mode = server_mode
        self.app_sets = list(app_sets)
        self.server_env = dict(server_env or {})
        self.app = self.logger = self.server = self.cap = self.scap = None
        self.app_json = tmp / "appliance.json"
        self.logger_stats = tmp / "ftlog.json"
        self.procs = []
        self.server_starts = 0
        # server_cmd: a stock server's argv (nginx, redis-server, python3 -m http.server)
        # instead of this file's test server; ipv6: the hosts get IPv6 addresses too.
        self.server_cmd = list(server_cmd) if server_cmd else None
        self.ipv6 = ipv6
        # trace: the logger appends every stable_seq it publishes (the capture checks
        # need it); benchmarks go without (a line and a write per publication).
        self.trace = trace

    # -- network --------------------------------------------------------
    def net_up(self):
        if self.backup:
            self.net_up_backup()
            return
        self.host(self.ns_c, self.if_c, CLIENT_IP)
        self.host(self.ns_s, self.if_s, SERVER_IP)

    @staticmethod
    def no_offload(*cmd_prefix_and_if):
        # TCP through an AF_PACKET port needs real checksums and MTU-sized frames.
        sh(*cmd_prefix_and_if[:-1], "ethtool", "-K", cmd_prefix_and_if[-1], "tx", "off", "tso",
           "off", "gso", "off", "gro", "off", check=False)

    def host(self, ns, ifr, ip, bridge=None, up=True):
        """Namespace ns with eth0 (address ip, up unless up=False), joined by a veth pair to
        ifr in the root namespace (in `bridge` if given)."""
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", ifr, "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("sysctl", "-qw", f"net.ipv6.conf.{ifr}.disable_ipv6=1", check=False)
        if bridge:
            sh("ip", "link", "set", ifr, "master", bridge)
        sh("ip", "link", "set", ifr, "up")
        self.no_offload(ifr)
        sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
        if self.ipv6:  # fd77::1 (client), fd77::2 (server): native IPv6 the appliance passes
            sh("ip", "-n", ns, "addr", "add", V6[ip] + "/64", "dev", "eth0", "nodad")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        if up:
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
        self.no_offload("ip", "netns", "exec", ns, "eth0")

    def net_up_backup(self):
        """Client as usual; on the server side a bridge with the appliance's port, the
        primary (up) and the backup (same address, link down)."""
        self.host(self.ns_c, self.if_c, CLIENT_IP)
        sh("ip", "link", "add", self.br, "type", "bridge")
        sh("ip", "link", "set", self.br, "up")
        sh("ip", "link", "add", self.if_s, "type", "veth", "peer", "name", self.if_sb)
        for x in (self.if_s, self.if_sb, self.br):
            sh("sysctl", "-qw", f"net.ipv6.conf.{x}.disable_ipv6=1", check=False)
        sh("ip", "link", "set", self.if_sb, "master", self.br)
        for x in (self.if_s, self.if_sb):
            sh("ip", "link", "set", x, "up")
            self.no_offload(x)
        self.host(self.ns_s, self.if_p, SERVER_IP, bridge=self.br)
        self.host(self.ns_b, self.if_q, SERVER_IP, bridge=self.br, up=False)
        # The backup announces itself (a gratuitous ARP) when its link comes up.
        for k in ("all", "default", "eth0"):
            sh("ip", "netns", "exec", self.ns_b, "sysctl", "-qw",
               f"net.ipv4.conf.{k}.arp_notify=1")

    def pin_client_arp(self):
        """The client keeps the primary's MAC for the server's address whatever ARP says (a
        permanent neighbour entry: a client that ignores gratuitous ARP, or whose router
        does): after a fail-over only the appliance can get its segments to the backup."""
        mac = sh("ip", "netns", "exec", self.ns_s, "cat",
                 "/sys/class/net/eth0/address").stdout.strip()
        sh("ip", "-n", self.ns_c, "neigh", "replace", SERVER_IP, "lladdr", mac, "nud",
           "permanent", "dev", "eth0")

    def fail_over(self):
        """The primary host dies (its link goes first, so nothing it sends as it dies gets
        out), the backup comes up with the server's address and starts the server."""
        sh("ip", "link", "del", self.if_p)
        self.kill_server()
        sh("ip", "-n", self.ns_b, "link", "set", "eth0", "up")
        # Its own announcement may go before the link carries frames (veth): say it again.
        sh("ip", "netns", "exec", self.ns_b, PY, __file__, "garp", "--host", SERVER_IP)
        self.server_ns = self.ns_b
        self.start_server()

    def net_down(self):
        for ns in (self.ns_c, self.ns_s, self.ns_b):
            sh("ip", "netns", "del", ns, check=False)
        for ifr in (self.if_c, self.if_s, self.if_p, self.if_q, self.br):
            sh("ip", "link", "del", ifr, check=False)

    # -- processes ------------------------------------------------------
    def start_logger(self, extra=()):
        """interlink-control with the FT-TCP logger; its channel to a UTO
        data plane goes unused here (files in tmp, no management socket).
        logger_args and extra are logger options without the --ftcp- prefix."""
        # FTLOG_NICE (benchmarks): the logger's latency is the client's ack
        # latency; a deployment gives it a core of its own.
        nice = ["nice", "-n", os.environ["FTLOG_NICE"]] if os.environ.get("FTLOG_NICE") else []
        opts = []
        for a in [*self.logger_args, *extra]:
            opts.append("--ftcp-" + a[2:] if a.startswith("--") else a)
        # FTLOG_RT (benchmarks): --ftcp-rt-priority, the logger thread at SCHED_FIFO.
        if os.environ.get("FTLOG_RT"):
            opts += ["--ftcp-rt-priority", os.environ["FTLOG_RT"]]
        self.logger = subprocess.Popen(
            [*nice, str(CONTROL), "--chan", str(self.tmp / "ctl.chan"), "--mgmt", "none",
             "--ftcp-ring", self.ring, "--ftcp-sock", self.sock,
             "--ftcp-dir", str(self.logdir), "--ftcp-durability", self.durability,
             "--ftcp-stats", str(self.logger_stats), "-v",
             *(["--ftcp-trace", str(self.tmp / "stable.trace")] if self.trace else []), *opts],
            stdout=open(self.tmp / "ftlog.log", "a"), stderr=subprocess.STDOUT)
        self.procs.append(self.logger)
        for _ in range(200):
            if os.path.exists(self.sock):
                return
            if self.logger.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError("logger did not start: " + (self.tmp / "ftlog.log").read_text())

    def stop_logger(self, sig=signal.SIGTERM):
        if self.logger and self.logger.poll() is None:
            self.logger.send_signal(sig)
            self.logger.wait(timeout=10)
        if os.path.exists(self.sock):
            os.unlink(self.sock)

    def start_appliance(self):
        cmd = [str(INTERLINK), "-c", str(ROOT / "configs" / "ftcp.yaml"), "-q",
               "--json", str(self.app_json),
               "--set", f"name=ftcp{self.tag}",
               "--set", f"ports.client.device=net_af_packet0,iface={self.if_c},framecnt=16384",
               "--set", f"ports.server.device=net_af_packet1,iface={self.if_s},framecnt=16384",
               "--set", f"stages.ftcp.ring={self.ring}",
               "--set", f"stages.ftcp.strategy={self.strategy}",
               "--set", 'eal=[--no-huge, -m, "512", --lcores, "0,1", --log-level, "lib.eal:error"]']
        for x in self.app_sets:
            cmd += ["--set", x]
        self.app = subprocess.Popen(cmd, stdout=open(self.tmp / "appliance.log", "w"),
                                    stderr=subprocess.STDOUT)
        self.procs.append(self.app)
        time.sleep(1.0)
        if self.app.poll() is not None:
            raise RuntimeError("appliance exited: " + (self.tmp / "appliance.log").read_text())

    def stop_appliance(self):
        """SIGINT, then the JSON summary. An appliance that died of a signal before it was
        stopped (a crash) fails the test here, with its log."""
        rc = self.app.poll() if self.app else None
        if self.app and rc is None:
            self.app.send_signal(signal.SIGINT)
            try:
                self.app.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.app.kill()
                self.app.wait()
        shutil.rmtree(f"/var/run/dpdk/ftcp{self.tag}", ignore_errors=True)
        if rc is not None and rc < 0:
            raise AssertionError(f"the appliance died of signal {-rc} before it was stopped; "
                                 "its log:\n" +
                                 (self.tmp / "appliance.log").read_text()[-3000:])
        if self.app_json.exists():
            return json.loads(self.app_json.read_text())
        return None

    def start_server(self):
        self.server_starts += 1
        env = dict(os.environ, LD_PRELOAD=str(SHIM), ILFTCP_SOCK=self.sock, **self.server_env)
        argv = self.server_cmd or [PY, __file__, "server", "--mode", self.server_mode,
                                   "--port", str(PORT)]
        # A session of its own: kill_server() kills the whole group with one signal.
        self.server = subprocess.Popen(
            ["ip", "netns", "exec", self.server_ns, *argv],
            env=env, stdout=open(self.tmp / f"server{self.server_starts}.log", "w"),
            stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(self.server)
        for _ in range(200):
            r = sh("ip", "netns", "exec", self.server_ns, "ss", "-Hltn", f"sport = :{PORT}",
                   check=False)
            if str(PORT) in r.stdout:
                return
            if self.server.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError("server did not listen: " +
                           (self.tmp / f"server{self.server_starts}.log").read_text())

    def wait_established(self, n, timeout=20):
        """Until the server holds n established connections (clients are
        Python processes: slow to start on a loaded machine)."""
        end = time.time() + timeout
        while time.time() < end:
            r = sh("ip", "netns", "exec", self.server_ns, "ss", "-Htn", "state", "established",
                   f"sport = :{PORT}", check=False)
            if len([x for x in r.stdout.splitlines() if x.strip()]) >= n:
                return
            time.sleep(0.02)
        raise RuntimeError(f"{n} connections not established in {timeout} s")

    def server_pids(self):
        """The server process and its descendants (nginx's master and workers)."""
        pids, todo = [], [self.server.pid]
        while todo:
            p = todo.pop()
            pids.append(p)
            try:
                kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
            except OSError:
                kids = []
            todo += [int(k) for k in kids]
        return pids

    def kill_server(self):
        # `ip netns exec` execs the program, so the pid is the server's own; a
        # multi-process server (nginx) dies whole, master and workers at once (its
        # process group), and any descendant that left the group after them.
        pids = self.server_pids()
        try:
            os.killpg(self.server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.server.wait()

    def start_capture(self):
        self.pcap = self.tmp / "client.pcap"
        # Inside the client's namespace: the af_packet PMD bypasses the
        # qdisc, so a capture on the root-side veth misses what it sends.
        self.cap = subprocess.Popen(["ip", "netns", "exec", self.ns_c, "tcpdump", "-i", "eth0",
                                     "-s", "0", "-B", "32768", "-U", "-w", str(self.pcap), "tcp"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(self.cap)
        # The server's side too, headers only: not checked, kept for the post-mortem
        # of a failure (what the server's TCP sent, before the appliance rewrote it).
        self.scap = subprocess.Popen(["ip", "netns", "exec", self.server_ns, "tcpdump", "-i",
                                      "eth0", "-s", "128", "-B", "32768", "-U", "-w",
                                      str(self.tmp / "server.pcap"), "tcp"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(self.scap)
        time.sleep(0.5)

    def stop_capture(self):
        if self.cap and self.cap.poll() is None:
            time.sleep(0.3)
            for c in (self.cap, self.scap):
                if c.poll() is None:
                    c.send_signal(signal.SIGINT)
                    c.wait(timeout=10)

    def client(self, *args, timeout=60, stdin=None):
        return subprocess.Popen(["ip", "netns", "exec", self.ns_c, PY, __file__, "client",
                                 "--host", SERVER_IP, "--port", str(PORT), *args],
                                stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    def wait_path(self, timeout=30):
        """Until the client reaches the server through the appliance (its
        ports take a while to come up on a loaded machine)."""
        # A UDP datagram to a closed port: the ICMP error coming back proves
        # the path (and leaves no TCP state behind, unlike a probe connect).
        probe = ("import socket,sys\n"
                 "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.settimeout(1)\n"
                 f"s.connect(('{SERVER_IP}', 9)); s.send(b'x')\n"
                 "try: s.recv(1)\n"
                 "except ConnectionRefusedError: sys.exit(0)\n"
                 "except OSError: sys.exit(1)\n"
                 "sys.exit(1)\n")
        end = time.time() + timeout
        while time.time() < end:
            if sh("ip", "netns", "exec", self.ns_c, PY, "-c", probe,
                  check=False).returncode == 0:
                return
            if self.app.poll() is not None:
                break
        raise RuntimeError("no path client -> appliance -> server: " +
                           (self.tmp / "appliance.log").read_text())

    def __enter__(self):
        try:
            self.net_up()
            self.start_logger()
            self.start_appliance()
            self.start_server()
            self.wait_path()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        if self.server and self.server.poll() is None:
            self.kill_server()  # its workers too: they outlive a killed master
        for p in reversed(self.procs):
            if p.poll() is None:
                p.kill()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        shutil.rmtree(f"/var/run/dpdk/ftcp{self.tag}", ignore_errors=True)
        self.net_down()
        for p in (self.ring, self.ring + ".wake"):
            if os.path.exists(p):
                os.unlink(p)

    def __exit__(self, *exc):
        self.stop()


# ---- capture checks -------------------------------------------------------
def load_trace(path):
    """{client port: [(realtime, stable_seq)]} as the logger published them."""
    tr = {}
    if not Path(path).exists():
        return tr
    for line in Path(path).read_text().split("\n"):
        if line.strip():
            cport, stable, t = line.split()
            tr.setdefault(int(cport), []).append((float(t), int(stable)))
    return tr


def check_capture(pcap, server_ip=SERVER_IP, port=PORT, trace=None):
    """Invariants on every segment the client saw from the server side:
    valid checksums, ack never regresses, the right edge of non-zero windows
    never moves left, no RST, FIN only at one sequence number. Returns a
    dict of findings (empty lists mean fine)."""
    from scapy.all import IP, TCP, rdpcap
    import bisect
    tr = {}
    for cport, pubs in (load_trace(trace) if trace else {}).items():
        pubs.sort()
        base, m, maxes = pubs[0][1], None, []
        for _, v in pubs:
            if m is None or ((v - base) & 0xffffffff) > ((m - base) & 0xffffffff):
                m = v
            maxes.append(m)
        tr[cport] = {"t": [x[0] for x in pubs], "max": maxes}
    out = {"bad_csum": [], "ack_regress": [], "edge_left": [], "rst": [], "fin_seqs": set(),
           "above_stable": [], "checked_vs_stable": 0,
           "segments": 0, "acks": 0, "zero_windows": 0}
    flows = {}
    for p in rdpcap(str(pcap)):
        if IP not in p or TCP not in p:
            continue
        ip, t = p[IP], p[TCP]
        if ip.src != server_ip or t.sport != port:
            continue
        out["segments"] += 1
        raw = bytes(ip)
        # Full recomputation against what was on the wire.
        chk_ip, chk_tcp = ip.chksum, t.chksum
        q = IP(raw)
        del q.chksum
        del q[TCP].chksum
        q = IP(bytes(q))
        if len(raw) >= ip.len and (q.chksum != chk_ip or q[TCP].chksum != chk_tcp):
            out["bad_csum"].append(t.seq)
        f = flows.setdefault(t.dport, {"ack": None, "edge": None, "ws": 0})
        if t.flags & 0x02:  # SYN-ACK: window scale as the client will use it
            for o in t.options:
                if o[0] == "WScale":
                    f["ws"] = o[1]
        if t.flags & 0x04:
            out["rst"].append(t.seq)
        if t.flags & 0x01:
            out["fin_seqs"].add((t.dport, t.seq + len(t.payload)))
        if t.flags & 0x10:
            out["acks"] += 1
            a = t.ack
            pub = tr.get(t.dport)
            if pub is not None:
                # The data plane can only use a stable_seq the logger has
                # already published: the highest one published before this
                # segment was captured bounds its ack.
                i = bisect.bisect_right(pub["t"], float(p.time))
                bound = pub["max"][i - 1] if i else None
                out["checked_vs_stable"] += 1
                if bound is None or 0 < ((a - bound) & 0xffffffff) < 0x80000000:
                    out["above_stable"].append((a, bound))
            if f["ack"] is not None and ((a - f["ack"]) & 0xffffffff) > 0x7fffffff:
                out["ack_regress"].append((f["ack"], a))
            f["ack"] = a if f["ack"] is None or ((a - f["ack"]) & 0xffffffff) < 0x7fffffff else f["ack"]
            win = t.window << (0 if t.flags & 0x02 else f["ws"])
            if win == 0:
                out["zero_windows"] += 1  # recovery's closed window: shrinks on purpose
                continue
            edge = (a + win) & 0xffffffff
            if f["edge"] is not None and ((edge - f["edge"]) & 0xffffffff) > 0x7fffffff:
                out["edge_left"].append((f["edge"], edge))
            else:
                f["edge"] = edge
    out["fin_seqs"] = sorted(out["fin_seqs"])
    return out


# ---- applications -----------------------------------------------------------
def recv_exact(c, n):
    b = bytearray()
    while len(b) < n:
        d = c.recv(min(65536, n - len(b)))
        if not d:
            raise EOFError
        b += d
    return bytes(b)


def serve_conn(c, mode, reply_delay=0):
    try:
        if mode == "sink":
            h, total = hashlib.sha256(), 0
            while True:
                d = c.recv(65536)
                if not d:
                    break
                h.update(d)
                total += len(d)
            time.sleep(reply_delay)
            c.sendall(f"{h.hexdigest()} {total}\n".encode())
        elif mode == "source":
            n, seed = struct.unpack("!QQ", recv_exact(c, 16))
            data = payload(seed, n)
            # IL_SOURCE_RATE (bytes/s): a server that takes its time over each write.
            rate, t0 = float(os.environ.get("IL_SOURCE_RATE", 0)), time.monotonic()
            for o in range(0, n, 65536):
                c.sendall(data[o:o + 65536])
                if rate and (ahead := (o + 65536) / rate - (time.monotonic() - t0)) > 0:
                    time.sleep(ahead)
        elif mode == "echo":
            while True:
                try:
                    (n,) = struct.unpack("!I", recv_exact(c, 4))
                except EOFError:
                    break
                body = recv_exact(c, n)
                c.sendall(hashlib.sha256(body).digest() + body[::-1])
    finally:
        c.close()


def server_main(a):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", a.port))
    s.listen(64)
    print("listening", flush=True)
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve_conn, args=(c, a.mode, a.reply_delay), daemon=True).start()


def client_main(a):
    t0 = time.time()
    c = socket.create_connection((a.host, a.port), timeout=a.timeout)
    res = {"mode": a.mode, "ok": False}
    chunk = 16384
    pace = chunk / a.rate if a.rate else 0
    if a.mode == "sink":
        # One 1 MiB block repeated: cheap for 1 GB benchmark transfers.
        block, h, sent = payload(a.seed, 1 << 20), hashlib.sha256(), 0
        while sent < a.bytes:
            n = min(chunk if pace else len(block), a.bytes - sent)
            o = sent % len(block)
            piece = block[o:o + n]
            c.sendall(piece)
            h.update(piece)
            sent += len(piece)
            if pace:
                time.sleep(pace)
        res["sent_at"] = time.time() - t0
        if a.hold:
            time.sleep(a.hold)
        c.shutdown(socket.SHUT_WR)
        reply = b""
        while not reply.endswith(b"\n"):
            d = c.recv(100)
            if not d:
                break
            reply += d
        digest, total = reply.decode().split()
        res.update(ok=digest == h.hexdigest() and int(total) == sent, got=int(total))
    elif a.mode == "source":
        c.sendall(struct.pack("!QQ", a.bytes, a.seed))
        h, total = hashlib.sha256(), 0
        while True:
            d = c.recv(chunk)
            if not d:
                break
            h.update(d)
            total += len(d)
            if pace:
                time.sleep(pace)
        res.update(ok=h.hexdigest() == hashlib.sha256(payload(a.seed, a.bytes)).hexdigest(),
                   got=total)
    elif a.mode in ("echo", "mirror"):
        # echo: the reply is the request's SHA-256 and the request reversed;
        # mirror (ftcp_evserver): the request reversed only.
        digest = a.mode == "echo"
        r = random.Random(a.seed)
        ok, sent, rounds = True, 0, 0
        while sent < a.bytes and (a.go_after is None or rounds < a.go_after):
            body = r.randbytes(r.randint(1, 20000))
            c.sendall(struct.pack("!I", len(body)) + body)
            back = recv_exact(c, (32 if digest else 0) + len(body))
            ok &= back == (hashlib.sha256(body).digest() if digest else b"") + body[::-1]
            sent += len(body)
            rounds += 1
            if pace:
                time.sleep(len(body) / a.rate)
        if a.go_after is not None:
            # Two requests in flight: one now, the other when a line comes on stdin
            # (the test says when), then both replies.
            bodies = [r.randbytes(r.randint(1, 20000)) for _ in range(2)]
            c.sendall(struct.pack("!I", len(bodies[0])) + bodies[0])
            print(json.dumps({"sent_request": rounds + 1}), flush=True)
            sys.stdin.readline()
            c.sendall(struct.pack("!I", len(bodies[1])) + bodies[1])
            for body in bodies:
                back = recv_exact(c, (32 if digest else 0) + len(body))
                ok &= back == (hashlib.sha256(body).digest() if digest else b"") + body[::-1]
                sent += len(body)
        c.shutdown(socket.SHUT_WR)
        ok &= c.recv(1) == b""
        res.update(ok=ok, got=sent)
    c.close()
    res["seconds"] = time.time() - t0
    print(json.dumps(res), flush=True)
    return 0 if res["ok"] else 1


def garp_main(a):
    """Gratuitous ARP for a.host from interface a.iface (what `arping -U` sends; iputils'
    arping is not installed here): three ARP requests naming our own address, 50 ms apart."""
    mac = Path(f"/sys/class/net/{a.iface}/address").read_text().strip()
    hw = bytes.fromhex(mac.replace(":", ""))
    ip = socket.inet_aton(a.host)
    frame = (b"\xff" * 6 + hw + b"\x08\x06" +
             struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + hw + ip + b"\x00" * 6 + ip)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((a.iface, 0))
    for _ in range(3):
        s.send(frame)
        time.sleep(0.05)
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["server", "client", "garp"])
    ap.add_argument("--iface", default="eth0", help="garp: the interface")
    ap.add_argument("--mode", choices=["sink", "source", "echo", "mirror"], default="sink")
    ap.add_argument("--host", default=SERVER_IP)
    ap.add_argument("--port", type=int, default=PORT)
    ap.add_argument("--bytes", type=int, default=4 << 20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=float, default=0)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--hold", type=float, default=0, help="sink: seconds to wait before closing")
    ap.add_argument("--go-after", type=int, default=None,
                    help="echo, mirror: after N rounds, send one request, wait for a line on "
                         "stdin, send another, then read both replies and close")
    ap.add_argument("--reply-delay", type=float, default=0,
                    help="server, sink: seconds between the client's end of stream and the reply")
    a = ap.parse_args()
    sys.exit({"server": server_main, "client": client_main, "garp": garp_main}[a.role](a))
