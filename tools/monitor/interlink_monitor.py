"""Read what a running Interlink deployment says about itself, for interlink-exporter and
interlink-top. Three sources, each optional, each read in one visit:

- the appliance's DPDK telemetry socket (/var/run/dpdk/NAME/dpdk_telemetry.v2): one
  connection, /interlink/info, /interlink/ports, /interlink/stats, and the layout commands
  /interlink/stages, /interlink/counters, /interlink/groups;
- interlink-control's management socket (CHAN.mgmt, datagrams): status, groups, wan, members;
- the FT-TCP logger's statistics file (interlink-control --ftcp-stats FILE, JSON).

Standard library only, so both tools run with any Python 3.9+ and nothing installed.
"""
import json
import os
import re
import socket
import time

# Counters of a stage that are levels, not running totals: typed as gauges.
GAUGE_COUNTERS = frozenset({
    "flows_active", "logger_lag_bytes", "logger_lag_us_last", "logger_lag_us_max",
    "recovery_us_last",
})
# Keys of interlink-control's `status` that are levels or identities, not running totals.
CONTROL_STATE_KEYS = frozenset({
    "incarnation", "dp_incarnation", "dp_epoch", "groups", "last_excluded",
    "last_excluded_quiet_ms", "channels",
    # one of a pair (docs/ha.md): role (1 standby, 2 active/cut, 3 active, 4 quiescing),
    # epochs, the record's revision, the peer
    "ha_role", "ha_epoch", "ha_record_epoch", "ha_record_rev", "ha_peer_heard_ms",
    "ha_peer_role",
})
GROUP_KEY = re.compile(r"^group(\d+)_(.+)$")
# interlink-control --shards N: one channel per shard, its lines chan<k>_<key>.
CHANNEL_KEY = re.compile(r"^chan(\d+)_(.+)$")
CHANNEL_STATE_KEYS = frozenset({"dp_incarnation"})


class SourceError(Exception):
    """A source is not there or did not answer; the message says which and why."""


def runtime_dir():
    """DPDK's runtime directory: /var/run/dpdk as root, else $XDG_RUNTIME_DIR/dpdk or /tmp/dpdk."""
    if os.geteuid() == 0:
        return "/var/run/dpdk"
    return os.path.join(os.environ.get("XDG_RUNTIME_DIR", "/tmp"), "dpdk")


def telemetry_path(prefix):
    return os.path.join(runtime_dir(), prefix, "dpdk_telemetry.v2")


# ---- the appliance --------------------------------------------------------------------------


class Telemetry:
    """A DPDK telemetry v2 client: one SOCK_SEQPACKET connection, one JSON answer a command."""

    def __init__(self, path, timeout=2.0):
        self.path, self.timeout, self.sock = path, timeout, None

    def __enter__(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(self.timeout)
        try:
            s.connect(self.path)
            greeting = json.loads(s.recv(16384).decode())
        except FileNotFoundError:
            s.close()
            raise SourceError(f"not running (no telemetry socket {self.path})") from None
        except (OSError, ValueError) as e:
            s.close()
            raise SourceError(f"telemetry socket {self.path}: {e}") from None
        self.sock, self.max_len = s, int(greeting.get("max_output_len", 16384))
        return self

    def __exit__(self, *exc):
        self.sock.close()

    def query(self, cmd):
        """The command's answer (None for an unknown command or a refused parameter)."""
        try:
            self.sock.send(cmd.encode())
            raw = self.sock.recv(max(self.max_len, 1 << 16) * 4)
        except OSError as e:
            raise SourceError(f"telemetry {cmd}: {e}") from None
        if not raw:
            raise SourceError(f"telemetry {cmd}: the appliance closed the connection")
        try:
            answer = json.loads(raw.decode())
        except ValueError as e:
            raise SourceError(f"telemetry {cmd}: bad JSON ({e})") from None
        # DPDK answers under the command's name, without its parameters.
        return answer.get(cmd, answer.get(cmd.split(",", 1)[0]))


class Stage:
    def __init__(self, name, type_):
        self.name, self.type = name, type_
        self.counters = {}  # running totals, incl. pkts_in and cycles
        self.levels = {}    # counters that are levels (GAUGE_COUNTERS)
        self.state = {}     # the stage's own state
        self.groups = {}    # group id -> {key: value}


class Appliance:
    def __init__(self):
        self.info, self.ports, self.stages = {}, {}, []
        self.group_ids = []
        self.shards = {}  # /interlink/shards: {"0": {lcore, groups, handoff_*}}, {} without


def split_stage(stage, values, counter_names):
    """Sort one /interlink/stats dict into counters, levels, state and per-group state."""
    for k, v in values.items():
        if not isinstance(v, (int, float)):
            continue
        m = GROUP_KEY.match(k)
        if m:
            stage.groups.setdefault(int(m.group(1)), {})[m.group(2)] = v
        elif k in GAUGE_COUNTERS:
            stage.levels[k] = v
        elif counter_names is None or k in counter_names:
            # Without the layout commands (an older appliance) every plain key counts.
            stage.counters[k] = v
        else:
            stage.state[k] = v


def read_appliance(path, timeout=2.0):
    a = Appliance()
    with Telemetry(path, timeout) as t:
        a.info = t.query("/interlink/info") or {}
        if not a.info:
            raise SourceError(f"{path}: no /interlink/info (not an Interlink appliance?)")
        a.ports = t.query("/interlink/ports") or {}
        stats = t.query("/interlink/stats") or {}
        types = t.query("/interlink/stages") or {}
        counters = t.query("/interlink/counters") or {}
        a.group_ids = [int(g) for g in (t.query("/interlink/groups") or [])]
        # Shards (docs/scaling.md): an empty dict without them, None from an appliance
        # older than the command.
        shards = t.query("/interlink/shards")
        a.shards = shards if isinstance(shards, dict) else {}
        for name, values in stats.items():
            st = Stage(name, types.get(name, ""))
            names = set(counters[name]) if name in counters else None
            split_stage(st, values, names)
            a.stages.append(st)
        # A reply holds the groups' state inline only up to a size; where the appliance has
        # /interlink/group,G (one group's state in every stage), ask for those missing.
        have = set()
        for st in a.stages:
            have.update(st.groups)
        by_name = {st.name: st for st in a.stages}
        for gid in a.group_ids:
            if gid in have:
                continue
            one = t.query(f"/interlink/group,{gid}")
            if not isinstance(one, dict):
                break  # not supported: do not ask for the others
            for name, values in one.items():
                if name in by_name and isinstance(values, dict):
                    by_name[name].groups[gid] = {k: v for k, v in values.items()
                                                 if isinstance(v, (int, float))}
    return a


# ---- interlink-control ----------------------------------------------------------------------


def mgmt_path_of(chan):
    return chan + ".mgmt"


class Mgmt:
    """interlink-control's management socket: one datagram a command, one a reply."""

    def __init__(self, path, timeout=2.0):
        self.path, self.timeout, self.sock = path, timeout, None

    def __enter__(self):
        if not os.path.exists(self.path):
            raise SourceError(f"not running (no management socket {self.path})")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.settimeout(self.timeout)
        s.bind("")  # an abstract address of our own, so the reply finds us
        self.sock = s
        return self

    def __exit__(self, *exc):
        self.sock.close()

    def query(self, cmd):
        try:
            self.sock.sendto(cmd.encode(), self.path)
            return self.sock.recv(1 << 20).decode(errors="replace")
        except socket.timeout:
            raise SourceError(f"{self.path}: no answer to '{cmd}' "
                              f"in {self.timeout:g} s") from None
        except OSError as e:
            raise SourceError(f"{self.path}: {e}") from None


class Control:
    def __init__(self):
        self.status = {}   # key -> int
        self.groups = {}   # group id -> {field: int} (groups and wan)
        self.members = {}  # (group, member) -> {field: int} (members and wan)
        self.members_truncated = 0
        self.has_members = False  # an interlink-control with the `members` command


def pairs(words):
    """{'a': 1, 'b': 2} from ['a', '1', 'b', '2'], ints only."""
    out = {}
    for i in range(0, len(words) - 1, 2):
        try:
            out[words[i]] = int(words[i + 1])
        except ValueError:
            pass
    return out


def read_control(path, timeout=2.0):
    c = Control()
    with Mgmt(path, timeout) as m:
        for line in m.query("status").splitlines():
            k, _, v = line.partition(" ")
            if v.strip().isdigit():
                c.status[k] = int(v)
        if not c.status:
            raise SourceError(f"{path}: no answer to 'status' (not interlink-control?)")
        for cmd in ("groups", "wan", "members"):
            reply = m.query(cmd)
            if reply.startswith("error:"):
                continue  # an older interlink-control
            c.has_members |= cmd == "members"
            for line in reply.splitlines():
                w = line.split()
                if len(w) >= 2 and w[0] == "group":
                    c.groups.setdefault(int(w[1]), {}).update(pairs(w[2:]))
                elif len(w) >= 4 and w[0] == "member" and w[2] == "group":
                    key = (int(w[3]), int(w[1]))
                    c.members.setdefault(key, {}).update(pairs(w[4:]))
                elif len(w) == 2 and w[0] == "truncated":
                    c.members_truncated = int(w[1])
    return c


# ---- the FT-TCP logger ----------------------------------------------------------------------


class Ftlog:
    def __init__(self, values, age):
        self.values, self.age = values, age


def read_ftlog(path, timeout=None):
    """The file is rewritten every 200 ms while the logger runs: its age says how fresh."""
    try:
        st = os.stat(path)
        with open(path) as f:
            values = json.load(f)
    except FileNotFoundError:
        raise SourceError(f"no statistics file {path} (logger not started?)") from None
    except (OSError, ValueError) as e:
        raise SourceError(f"{path}: {e}") from None
    return Ftlog({k: v for k, v in values.items() if isinstance(v, (int, float))},
                 max(0.0, time.time() - st.st_mtime))


# ---- one snapshot of everything -------------------------------------------------------------


class Snapshot:
    """Each source's data, or None and the reason; the monotonic time it was taken."""

    def __init__(self):
        self.t = time.monotonic()
        self.appliance = self.control = self.ftlog = None
        self.errors = {}    # source -> reason
        self.seconds = {}   # source -> time the query took
        self.configured = []


def collect(appliance=None, control=None, ftlog=None, timeout=2.0):
    """Read each configured source once (a path, or None for a source not asked for)."""
    snap = Snapshot()
    snap.configured = [s for s, p in (("appliance", appliance), ("control", control),
                                      ("ftlog", ftlog)) if p]
    # The control process first: a watermark read before the sequencer's next sequence is
    # never above it, so what lies between them is never negative.
    for source, path, reader in (("control", control, read_control),
                                 ("appliance", appliance, read_appliance),
                                 ("ftlog", ftlog, read_ftlog)):
        if not path:
            continue
        t0 = time.monotonic()
        try:
            setattr(snap, source, reader(path, timeout))
        except SourceError as e:
            snap.errors[source] = str(e)
        snap.seconds[source] = time.monotonic() - t0
    return snap


def add_source_args(ap):
    """The command-line options both tools share."""
    ap.add_argument("-a", "--appliance", metavar="NAME", default="interlink",
                    help="the appliance's DPDK file prefix, its config's `name` "
                         "(default: interlink); '' to leave it out")
    ap.add_argument("--telemetry", metavar="PATH",
                    help="the telemetry socket itself (default: the runtime directory's "
                         "NAME/dpdk_telemetry.v2)")
    ap.add_argument("-c", "--chan", metavar="PATH", default="/dev/shm/interlink-chan",
                    help="interlink-control's --chan; its management socket is PATH.mgmt "
                         "(default: /dev/shm/interlink-chan); '' to leave it out")
    ap.add_argument("--mgmt", metavar="PATH",
                    help="interlink-control's management socket, if not CHAN.mgmt")
    ap.add_argument("--ftlog-stats", metavar="FILE",
                    help="the FT-TCP logger's statistics (interlink-control --ftcp-stats FILE)")
    ap.add_argument("--timeout", type=float, default=2.0, metavar="SEC",
                    help="how long to wait for each source (default 2)")


def source_paths(args):
    """(telemetry socket, management socket, ftlog file) from the shared options."""
    tel = args.telemetry or (telemetry_path(args.appliance) if args.appliance else None)
    mgmt = args.mgmt or (mgmt_path_of(args.chan) if args.chan else None)
    return tel, mgmt, args.ftlog_stats
