"""An active/standby pair of appliances (docs/ha.md) on one machine, for the tests.

    host namespaces (one per replica / writer), each dual-homed:
      tx0 10.S.1.i --veth-- bridge <tag>A --+-- <tag>ai1 ==veth== <tag>ai0  appliance a "in"
                                            +-- <tag>bi1 ==veth== <tag>bi0  appliance b "in"
      rx0 10.S.2.i --veth-- bridge <tag>B --+-- <tag>ao1 ==veth== <tag>ao0  appliance a "out"
                                            +-- <tag>bo1 ==veth== <tag>bo0  appliance b "out"

Both appliances run configs/ha.yaml on net_af_packet ports, each with its own
interlink-control (--ha-etcd: a real 3-member etcd cluster on localhost, etcdrig.py; the pair
heartbeat on 127.0.0.1). Appliance a is pinned to CPU 1, b to CPU 0. Everything is named
after a random tag, and __exit__ removes what this rig made (processes it started,
namespaces, links, channel files, the etcd cluster's data) even when a test fails.

Every process the rig starts runs in a session of its own, as systemd runs each service in a
cgroup of its own. This matters on a shared machine: with the kernel's autogroup scheduling
(sched_autogroup_enabled, on here) all processes of one session share one scheduling group,
whose CPU share on each CPU is split by the group's load there; a busy-polling data plane
concentrates the group's load on its own CPU and starves its siblings (the members, the
control process) on the other one against other sessions (docs/ha.md, section 13).
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
import zlib
from pathlib import Path

from conftest import BUILD, INTERLINK, ROOT
from etcdrig import EtcdCluster
from harness import control_mgmt, control_status

CONTROL = BUILD / "control" / "interlink-control"
EXAMPLES = Path(os.environ.get("IL_EXAMPLES_BUILD", BUILD)).resolve() / "examples"
KV = EXAMPLES / "kvstore" / "il-kvstore"
NODES = ("a", "b")
CPU = {"a": "1", "b": "0"}


def sh(*cmd, check=True, timeout=30):
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=timeout)


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def offloads_off(*ns_and_if):
    *ns, ifc = ns_and_if
    subprocess.run([*ns, "ethtool", "-K", ifc, "tx", "off", "rx", "off", "tso", "off", "gso",
                    "off", "gro", "off"], capture_output=True)


class PairRig:
    def __init__(self, tmp: Path, n_hosts, ctl_args=(), ha_args=(), app_sets=(), etcd_n=3,
                 nodes=NODES, ha=True, members_links=False, own_sessions=True,
                 hb_link=False, node_sets=None, snoop_a=False):
        """nodes: the appliances to start; ha False: a single appliance without the pair
        (configs/uto.yaml, no etcd), for comparisons; members_links: a veth pair into each
        bridge for il-uto-members (members()); own_sessions False: the appliances, control
        processes and members in the caller's session (only to show what that does);
        hb_link: each control process in a network namespace of its own (<tag>ca, <tag>cb),
        the pair heartbeat over a veth between the two (hb0, 10.S.4.1 and .2: hb_down() cuts
        it), etcd reached over a bridge in the root namespace (<tag>M, 10.S.3.254);
        node_sets: {node: [--set ...]} after app_sets, for that appliance only; snoop_a:
        switch A snoops IGMP (appliances side by side steered by their reports)."""
        self.nodes, self.use_ha, self.members_links = tuple(nodes), ha, members_links
        self.own = own_sessions
        self.hb_link = hb_link
        self.tmp = tmp
        self.tag = "ilh" + uuid.uuid4().hex[:5]
        self.n_hosts = n_hosts
        self.ctl_args = list(ctl_args)
        self.ha_args = list(ha_args)
        self.app_sets = list(app_sets)
        self.node_sets = {x: list((node_sets or {}).get(x, ())) for x in NODES}
        self.snoop_a = snoop_a
        self.chan = {x: f"/dev/shm/{self.tag}{x}-chan" for x in NODES}
        self.hb = {x: free_port() for x in NODES}
        self.prefix = f"/il-test/{self.tag}/"
        self.group, self.mcast, self.port = 1, "239.1.1.1", 7400
        self.subnet = 150 + zlib.crc32(self.tag.encode()) % 100
        self.id_base = 0x10000 * (1 + zlib.crc32(self.tag.encode()) % 30000)
        # IL_ETCD_DIR: where the etcd members keep their data (e.g. /dev/shm, where an fsync
        # costs nothing); by default the test's own directory.
        edir = os.environ.get("IL_ETCD_DIR")
        self.etcd = EtcdCluster(os.path.join(edir, self.tag) if edir else str(tmp / "etcd"),
                                tag="e" + self.tag[3:])
        self.etcd.own_session = own_sessions
        self.etcd_n = etcd_n
        self.links, self.netns = [], []
        self.ctl = {x: None for x in NODES}
        self.app = {x: None for x in NODES}
        self.n_app = {x: 0 for x in NODES}
        self.prefixes = []
        self.kv_procs = {}
        self.caps = []

    # -- names -------------------------------------------------------------------------
    def ifc(self, x, port, side):
        """port "i" or "o"; side 0: the appliance's end, 1: the switch's end."""
        return f"{self.tag}{x}{port}{side}"

    def ns(self, i):
        return f"{self.tag}h{i}"

    def tx_ip(self, i):
        return f"10.{self.subnet}.1.{i}"

    # -- set-up --------------------------------------------------------------------------
    def links_up(self):
        for side in ("A", "B"):
            br = f"{self.tag}{side}"
            # A snooping Linux bridge floods multicast while no querier is known: switch A
            # is its own querier then (as a data-center switch would be, or a router). It
            # still floods for one query response interval after it becomes one (1 s here,
            # 10 s by default: the members' reports are awaited), so the interval is set
            # first.
            snoop = "1" if side == "A" and self.snoop_a else "0"
            sh("ip", "link", "add", br, "type", "bridge", "mcast_snooping", snoop,
               "mcast_query_response_interval", "100")
            sh("ip", "link", "set", br, "type", "bridge", "mcast_querier", snoop)
            self.links.append(br)
            sh("sysctl", "-qw", f"net.ipv6.conf.{br}.disable_ipv6=1")
            sh("ip", "link", "set", br, "up")
        for x in NODES:
            for port, br in (("i", "A"), ("o", "B")):
                a, b = self.ifc(x, port, 0), self.ifc(x, port, 1)
                sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
                self.links.append(a)
                for i in (a, b):
                    sh("sysctl", "-qw", f"net.ipv6.conf.{i}.disable_ipv6=1")
                    sh("ip", "link", "set", i, "up")
                    offloads_off(i)
                sh("ip", "link", "set", b, "master", f"{self.tag}{br}")
        for i in range(1, self.n_hosts + 1):
            ns = self.ns(i)
            sh("ip", "netns", "add", ns)
            self.netns.append(ns)
            x = ("ip", "netns", "exec", ns)
            sh(*x, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
            for k, v in (("net.ipv4.conf.all.rp_filter", 0), ("net.ipv4.conf.default.rp_filter", 0),
                         ("net.ipv4.conf.all.accept_local", 1),
                         ("net.ipv4.conf.default.accept_local", 1),
                         ("net.ipv4.conf.all.arp_ignore", 1)):
                sh(*x, "sysctl", "-qw", f"{k}={v}")
            for kind, side, net in (("t", "A", 1), ("r", "B", 2)):
                root, inner = f"{self.tag}{kind}{i}", ("tx0" if kind == "t" else "rx0")
                sh("ip", "link", "add", root, "type", "veth", "peer", "name", inner, "netns", ns)
                self.links.append(root)
                sh("sysctl", "-qw", f"net.ipv6.conf.{root}.disable_ipv6=1")
                sh("ip", "link", "set", root, "master", f"{self.tag}{side}")
                sh("ip", "link", "set", root, "up")
                offloads_off(root)
                sh(*x, "ip", "addr", "add", f"10.{self.subnet}.{net}.{i}/24", "dev", inner)
                sh(*x, "ip", "link", "set", inner, "up")
                offloads_off(*x, inner)
                sh(*x, "sysctl", "-qw", f"net.ipv4.conf.{inner}.rp_filter=0")
                sh(*x, "sysctl", "-qw", f"net.ipv4.conf.{inner}.accept_local=1")
            sh(*x, "ip", "link", "set", "lo", "up")
        if self.members_links:
            for end, br in (("m", "A"), ("n", "B")):
                a, b = f"{self.tag}{end}0", f"{self.tag}{end}1"
                sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
                self.links.append(a)
                for i in (a, b):
                    sh("sysctl", "-qw", f"net.ipv6.conf.{i}.disable_ipv6=1")
                    sh("ip", "link", "set", i, "up")
                    offloads_off(i)
                sh("ip", "link", "set", b, "master", f"{self.tag}{br}")

    def ctl_ns(self, x):
        return f"{self.tag}c{x}"

    def mgmt_up(self):
        """hb_link: the management bridge (etcd's extra address) and the control processes'
        namespaces, each on the bridge and on the heartbeat veth between them."""
        br = f"{self.tag}M"
        sh("ip", "link", "add", br, "type", "bridge")
        self.links.append(br)
        sh("sysctl", "-qw", f"net.ipv6.conf.{br}.disable_ipv6=1")
        sh("ip", "addr", "add", f"10.{self.subnet}.3.254/24", "dev", br)
        sh("ip", "link", "set", br, "up")
        self.etcd.extra_host = f"10.{self.subnet}.3.254"
        for n, x in enumerate(NODES, 1):
            ns = self.ctl_ns(x)
            sh("ip", "netns", "add", ns)
            self.netns.append(ns)
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            root = f"{self.tag}M{x}"
            sh("ip", "link", "add", root, "type", "veth", "peer", "name", "m0", "netns", ns)
            self.links.append(root)
            sh("sysctl", "-qw", f"net.ipv6.conf.{root}.disable_ipv6=1")
            sh("ip", "link", "set", root, "master", br)
            sh("ip", "link", "set", root, "up")
            sh("ip", "-n", ns, "addr", "add", f"10.{self.subnet}.3.{n}/24", "dev", "m0")
            sh("ip", "-n", ns, "link", "set", "m0", "up")
        a, b = (self.ctl_ns(x) for x in NODES)
        sh("ip", "-n", a, "link", "add", "hb0", "type", "veth", "peer", "name", "hb0", "netns", b)
        for n, ns in enumerate((a, b), 1):
            sh("ip", "-n", ns, "addr", "add", f"10.{self.subnet}.4.{n}/24", "dev", "hb0")
            sh("ip", "-n", ns, "link", "set", "hb0", "up")

    def hb_down(self, down=True):
        """hb_link: cut the pair heartbeat's link (both ends down), or mend it."""
        for x in NODES:
            sh("ip", "-n", self.ctl_ns(x), "link", "set", "hb0", "down" if down else "up")

    def members(self, *args, cpu="0"):
        """il-uto-members on the members' links (members_links=True); not waited for."""
        members = BUILD / "tools" / "il-uto-members"
        js = self.tmp / f"members-{uuid.uuid4().hex[:6]}.json"
        cmd = ["taskset", "-c", cpu, str(members), "--tx", f"{self.tag}m0",
               "--rx", f"{self.tag}n0", "--json", str(js), "--group", str(self.group),
               "--mcast", self.mcast, "--udp-port", str(self.port), *args]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=self.own)
        p.json = js
        return p

    def start_control(self, x):
        other = "b" if x == "a" else "a"
        log = open(self.tmp / f"control-{x}.log", "a")
        cmd = [str(CONTROL), "--chan", self.chan[x], "-v", *self.ctl_args]
        # IL_HA_CHRT=PRIO: the control processes at real-time priority (SCHED_FIFO), as the
        # deployment guide has them (they sleep in io_uring; the data planes are left alone).
        if os.environ.get("IL_HA_CHRT"):
            cmd = ["chrt", "-f", os.environ["IL_HA_CHRT"], *cmd]
        if self.use_ha and self.hb_link:
            n, m = (1, 2) if x == "a" else (2, 1)
            cmd += ["--ha-etcd", self.etcd.endpoints(host=self.etcd.extra_host), "--ha-node", x,
                    "--ha-prefix", self.prefix,
                    "--ha-listen", f"10.{self.subnet}.4.{n}:{self.hb[x]}",
                    "--ha-peer", f"10.{self.subnet}.4.{m}:{self.hb[other]}", *self.ha_args]
            # `ip netns exec` execs the command: the pid stays the control process's.
            cmd = ["ip", "netns", "exec", self.ctl_ns(x), *cmd]
        elif self.use_ha:
            cmd += ["--ha-etcd", self.etcd.endpoints(), "--ha-node", x,
                    "--ha-prefix", self.prefix, "--ha-listen", f"127.0.0.1:{self.hb[x]}",
                    "--ha-peer", f"127.0.0.1:{self.hb[other]}", *self.ha_args]
        self.ctl[x] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=self.own)

    def start_appliance(self, x, wait=True):
        self.n_app[x] += 1
        prefix = f"{self.tag}{x}{self.n_app[x]}"
        self.prefixes.append(prefix)
        c = CPU[x]
        cfg = "ha.yaml" if self.use_ha else "uto.yaml"
        # taskset: its EAL start-up (it touches all its memory) stays off the other's CPU.
        cmd = ["taskset", "-c", c, str(INTERLINK), "-c", str(ROOT / "configs" / cfg),
               "--json", str(self.tmp / f"app-{x}{self.n_app[x]}.json"),
               "--set", f"name={prefix}",
               "--set", f"ports.in.device=net_af_packet0,iface={self.ifc(x, 'i', 0)},framecnt=4096",
               "--set", f"ports.out.device=net_af_packet1,iface={self.ifc(x, 'o', 0)},framecnt=4096",
               "--set", f"stages.ctrl.chan={self.chan[x]}",
               "--set", f"udp_port={self.port}",
               "--set", f"groups=[{{id: {self.group}, address: {self.mcast}}}]",
               "--set", "status_interval_ms=0",
               "--set", f'eal=[--no-huge, -m, "512", --lcores, "0@{c},1@{c}", --log-level, '
                        '"lib.eal:error"]']
        if self.use_ha:
            cmd += ["--set", "stages.ha.standby_idle_us=100"]
        for s in self.app_sets + self.node_sets[x]:
            cmd += ["--set", s]
        log = self.tmp / f"app-{x}{self.n_app[x]}.log"
        for attempt in range(3):
            self.app[x] = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                           start_new_session=self.own)
            if not wait:
                return
            up = self.dp_up(x)
            self.wait_for(lambda: self.app[x].poll() is not None or up(), 30,
                          f"appliance {x}'s data plane to report to its control process")
            if self.app[x].poll() is None:
                return
            # Seen on this machine (test_control_uto.py too): right after another process
            # left it, the kernel still holds the AF_PACKET fanout group. Not ours: again.
            if "PACKET_FANOUT" not in log.read_text() or attempt == 2:
                raise AssertionError(f"appliance {x} exited:\n{log.read_text()[-2000:]}")
            shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
            time.sleep(1)

    def dp_up(self, x):
        if self.use_ha:
            return lambda: self.ha(x).get("dp_alive") == 1
        return lambda: self.status(x).get("dp_incarnation", 0) >= 1

    def start_node(self, x, wait=True):
        self.start_control(x)
        self.start_appliance(x, wait)

    def mgmt(self, x, cmd, timeout=2.0):
        return control_mgmt(self.chan[x], cmd, self.tmp, timeout)

    def status(self, x):
        return control_status(self.chan[x], self.tmp)

    def ha(self, x):
        """interlink-control's `ha` as {key: int or str}."""
        out = {}
        for line in self.mgmt(x, "ha").splitlines():
            k, _, v = line.partition(" ")
            if k == "takeover":
                out.setdefault("takeovers_list", []).append(v)
                continue
            try:
                out[k] = int(v)
            except ValueError:
                out[k] = v
        return out

    def role(self, x):
        return self.ha(x).get("role")

    def active(self):
        """The node whose control process says it is active, or None."""
        for x in NODES:
            if self.ctl[x] is not None and self.ctl[x].poll() is None and \
                    self.role(x) == "active":
                return x
        return None

    def wait_for(self, cond, timeout, what):
        end = time.time() + timeout
        while time.time() < end:
            if cond():
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}\n" + self.logs(tail=2500))

    def kill(self, x, sig=signal.SIGKILL, what="both"):
        procs = {"both": (self.app[x], self.ctl[x]), "dp": (self.app[x],),
                 "ctl": (self.ctl[x],)}[what]
        for p in procs:
            if p is not None and p.poll() is None:
                p.send_signal(sig)
        if sig == signal.SIGKILL:
            for p in procs:
                if p is not None:
                    p.wait(timeout=20)
            if what in ("both", "dp"):
                self.app[x] = None
            if what in ("both", "ctl"):
                self.ctl[x] = None

    def kv(self, name, host, *args):
        log = open(self.tmp / f"{name}.log", "a")
        p = subprocess.Popen(["ip", "netns", "exec", self.ns(host), str(KV), *args,
                              "--tx", "tx0", "--rx", "rx0"], stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        self.kv_procs[name] = p
        return p

    def capture(self, x):
        """tcpdump of what appliance x sends to switch B (its "out" link, the switch's end):
        every frame it stamps, forwards or re-sends. Headers only."""
        path = self.tmp / f"out-{x}-{len(self.caps)}.pcap"
        p = subprocess.Popen(["tcpdump", "-i", self.ifc(x, "o", 1), "-Q", "in", "-s", "96",
                              "-B", "32768", "-U", "-n", "-w", str(path), "udp"],
                             stdout=subprocess.DEVNULL, stderr=open(self.tmp / "tcpdump.log", "a"))
        self.caps.append((x, p, path))
        return path

    def stop_captures(self):
        time.sleep(0.3)
        for _, p, _ in self.caps:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for _, p, _ in self.caps:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def logs(self, tail=3000):
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-tail:]}"
                         for p in sorted(self.tmp.glob("*.log")))

    # -- context -------------------------------------------------------------------------
    def __enter__(self):
        try:
            if self.hb_link:
                self.mgmt_up()
            if self.use_ha:
                self.etcd.start()
            self.links_up()
            # The first node first: at a cold start it becomes the active one (its T1),
            # then the other comes up as its standby.
            first, rest = self.nodes[:1], self.nodes[1:]
            for group in (first, rest):
                for x in group:
                    self.start_control(x)
                for x in group:
                    self.start_appliance(x)
                if self.use_ha and group:
                    self.wait_for(lambda: self.active() is not None, 30,
                                  "one appliance to be active")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for p in self.kv_procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        self.stop_captures()
        for x in NODES:
            for p in (self.app[x], self.ctl[x]):
                if p is not None and p.poll() is None:
                    p.send_signal(signal.SIGCONT)
                    p.send_signal(signal.SIGINT)
        for x in NODES:
            for p in (self.app[x], self.ctl[x]):
                if p is not None:
                    try:
                        p.wait(timeout=20)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait()
        for pre in self.prefixes:
            shutil.rmtree(f"/var/run/dpdk/{pre}", ignore_errors=True)
        for ln in self.links:
            subprocess.run(["ip", "link", "del", ln], capture_output=True)
        for ns in self.netns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        for x in NODES:
            for suffix in ("", ".sock", ".mgmt"):
                Path(self.chan[x] + suffix).unlink(missing_ok=True)
        if self.use_ha:
            self.etcd.close()


def status(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
