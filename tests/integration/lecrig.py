"""Hosts in overlapping groups with Ricochet LEC (docs/lec.md), for test_lec.py and the
measurements of bench/lec/lec_e2e.py: the rig of test_kvstore.py (one namespace per host,
dual-homed on two bridges around the appliance, interlink-control beside it), with groups,
addresses and a UDP port of its own, and one il-lec-host per host.

    host namespaces, each: tx0 10.S.1.i --bridge A-- appliance "in"  (repairs host to host
                           rx0 10.S.2.i --bridge B-- appliance "out"  go over bridge A too)
"""
import json
import subprocess
import time
import uuid
from pathlib import Path

from conftest import BUILD
from test_kvstore import HostsRig

LEC_HOST = BUILD / "tools" / "il-lec-host"

# The appliance's lec stage (appliance-side LEC): after the sequencer (the frames as stamped)
# and before the control stage (it learns members' addresses from their JOINs, HEARTBEATs
# and ACKs, which the control stage consumes); views from the control stage.
def lec_stage_sets(r=8, c=5.0, stagger=1, groups=None, plan=None, rate=None, flush_us=None,
                   repairs_to=None, layer_stride=None, repair_lcore=False):
    g = f", groups: [{', '.join(str(x) for x in groups)}]" if groups else ""
    g += f", repairs_to: {repairs_to}" if repairs_to else ""
    g += f", plan: {plan}" if plan else ""
    g += f", rate: {rate}" if rate else ""
    g += f", flush_us: {flush_us}" if flush_us is not None else ""
    g += f", layer_stride: {str(layer_stride).lower()}" if layer_stride is not None else ""
    # repair_lcore: the bins, XOR and repairs on lcore 2 (docs/lec.md, "A repair lcore"),
    # sharing CPU 0 with the main lcore, which sleeps between status lines
    g += ", repair_lcore: 2" if repair_lcore else ""
    eal = ['eal=[--no-huge, -m, "1024", --lcores, "0@0,1@1,2@0", --log-level, '
           '"lib.eal:error"]'] if repair_lcore else []
    return [f"stages.lec={{type: lec, control: ctrl, tx: in, r: {r}, c: {c}, "
            f"stagger: {stagger}{g}}}",
            "pipeline=[{lcore: 1, chains: [{rx: in, stages: [classify, seq, lec, ctrl, nak], "
            "tx: out}, {rx: out, stages: [classify, nak], tx: in}]}]", *eal]


class LecRig(HostsRig):
    """groups: {name: [host numbers]}; the appliance gets one group per name."""

    def __init__(self, tmp: Path, n_hosts, groups, ctl_args=(), app_sets=()):
        r = uuid.uuid4().int
        self.gids = {}
        self.maddr = {}
        base = 1000 + r % 50000
        for k, name in enumerate(sorted(groups)):
            self.gids[name] = base + k
            self.maddr[name] = (f"239.{100 + (r >> 8) % 100}."
                                f"{((r >> 16) % 200 + k // 250) + 1}.{k % 250 + 1}")
        self.groups = groups
        lst = ", ".join(f"{{id: {self.gids[n]}, address: {self.maddr[n]}}}" for n in sorted(groups))
        # a history of 4096 frames per group: enough for the NAK backstop here, and the pool
        # stays small with many groups
        super().__init__(tmp, n_hosts, ctl_args,
                         [f"groups=[{lst}]", "stages.seq.history=4096", *app_sets])
        # HostsRig speaks group 1 on port 7400 (il-hello, il-kvstore); these hosts can use
        # a port of their own, so other tests' frames never count here.
        self.port = 20000 + (r >> 40) % 20000
        self.group = self.gids[sorted(groups)[0]]
        self.mcast = self.maddr[sorted(groups)[0]]
        # Deep af_packet rings: on the shared machine the appliance's lcore is descheduled
        # now and then, and a 4096-frame ring overflows (rx_missed) at the rates here.
        self.app_sets += [f"ports.in.device=net_af_packet0,iface={self.tag}a0,framecnt=16384",
                          f"ports.out.device=net_af_packet1,iface={self.tag}a1,framecnt=16384"]

    def __enter__(self):
        super().__enter__()
        # Linux lets a socket join 20 multicast groups by default (per namespace); a host
        # here may be in up to libinterlink's IL_EP_MAX_GROUPS
        try:
            for i in range(1, self.n_hosts + 1):
                subprocess.run(["ip", "netns", "exec", self.ns(i), "sysctl", "-qw",
                                "net.ipv4.igmp_max_memberships=512"], check=True)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def member_id(self, i):
        return self.id_base + i

    def host(self, i, name, *, lec="peers", loss="none", seed=1, count=0, rate=200, size=256,
             senders=None, expect=None, extra=(), timeout=120, linger_ms=1500):
        """il-lec-host on host i in every group that lists it; it sends in the groups
        `senders` names for it (default: all of its groups). Returns the Popen; its JSON
        lands in <tmp>/<name>.json."""
        mine = [n for n in sorted(self.groups) if i in self.groups[n]]
        send = mine if senders is None else senders
        args = ["ip", "netns", "exec", self.ns(i), str(LEC_HOST), "--tx", "tx0", "--rx", "rx0",
                "--id", str(self.member_id(i)), "--port", str(self.port), "--lec", lec,
                "--loss", loss, "--seed", str(seed), "--count", str(count), "--rate", str(rate),
                "--size", str(size), "--timeout", str(timeout), "--linger-ms", str(linger_ms),
                "--json", str(self.tmp / f"{name}.json"),
                "--ready", str(self.tmp / f"{name}.ready"), "--start", str(self.tmp / "start")]
        for n in mine:
            args += ["--group", f"{self.gids[n]}:{self.maddr[n]}" + (":send" if n in send else "")]
            if expect is not None:
                args += ["--expect", f"{self.gids[n]}:{expect[n]}"]
        for j in range(1, self.n_hosts + 1):
            if j != i:
                args += ["--peer", f"{self.member_id(j)}={self.tx_ip(j)}"]
        args += list(extra)
        log = open(self.tmp / f"{name}.log", "w")
        p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.kv_procs[name] = p
        return p

    def run(self, specs, timeout=180):
        """specs: {name: (host, kwargs)}; starts them all, waits until each is a member of its
        groups, starts the traffic, waits for the ends; returns {name: summary}."""
        (self.tmp / "start").unlink(missing_ok=True)
        procs = {n: self.host(h, n, **kw) for n, (h, kw) in specs.items()}
        end = time.time() + 90
        while not all((self.tmp / f"{n}.ready").exists() for n in procs):
            for n, p in procs.items():
                assert p.poll() is None, (n, (self.tmp / f"{n}.log").read_text())
            assert time.time() < end, "the hosts did not all become members"
            time.sleep(0.1)
        time.sleep(0.3)  # the last VIEWs reach every member
        (self.tmp / "start").touch()
        out = {}
        for n, p in procs.items():
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            js = self.tmp / f"{n}.json"
            out[n] = json.loads(js.read_text()) if js.exists() else None
            if out[n] is not None:
                out[n]["rc"] = p.returncode
                out[n]["udp"] = self.udp_counters(specs[n][0])
        return out

    def udp_counters(self, i):
        """The kernel's UDP counters of host i's namespace (its own since the rig made it):
        RcvbufErrors are datagrams the host's sockets lost to a full receive buffer, a loss
        no loss model chose."""
        p = subprocess.run(["ip", "netns", "exec", self.ns(i), "cat", "/proc/net/snmp"],
                           capture_output=True, text=True)
        rows = [l.split()[1:] for l in p.stdout.splitlines() if l.startswith("Udp:")]
        return dict(zip(rows[0], map(int, rows[1]))) if len(rows) == 2 else {}

    def expect_args(self, count, senders=None):
        """--expect for each group: count messages from each of its senders."""
        exp = {}
        for n, hosts in self.groups.items():
            ns = len(hosts) if senders is None else len([h for h in hosts if n in senders.get(h, [])])
            exp[n] = ns * count
        return exp
