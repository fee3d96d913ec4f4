#!/usr/bin/env bash
# The emulated Interlink deployment of docs/deploy.md, from real pieces, on one machine:
# two switches (Linux bridges, each in a network namespace of its own), the appliance
# between them on net_af_packet ports (configs/uto.yaml, in its own namespace, with
# interlink-control beside it), and dual-homed hosts (one namespace each) running the
# replicated store il-kvstore: replicas and a writer. With --pair: two appliances
# (configs/ha.yaml), each in a namespace of its own with its interlink-control, both on both
# switches, one active and one standby, fenced on a 3-member etcd cluster on a management
# network of its own (docs/ha.md, docs/deploy.md section 3a).
#
#   ./scripts/deploy-netns.sh up     [--name NAME] [--replicas N] [--writers N]
#                                    [--puts N] [--rate PUTS_PER_S] [--cpu CPU] [--pair]
#   ./scripts/deploy-netns.sh status [--name NAME] [--json]
#   ./scripts/deploy-netns.sh down   [--name NAME]
#
# Run as root. Everything a deployment makes carries its NAME (default "ildep"): the
# namespaces NAME-swa, NAME-swb, NAME-app and NAME-h1..., the DPDK file prefix NAME
# (/var/run/dpdk/NAME), the control channel /dev/shm/NAME-chan and the state directory
# /run/interlink-deploy/NAME (pids, logs, status files); a pair has NAME-appa, NAME-appb and
# NAME-mgmt instead of NAME-app, file prefixes NAME-a and NAME-b, channels
# /dev/shm/NAME-a-chan and /dev/shm/NAME-b-chan, and etcd's data in
# /var/lib/interlink-deploy/NAME (on disk, as production keeps it). Several deployments with different
# names run side by side; `down` removes only its own and may be run any number of times.
# IL_BUILD names the build directory (default build/, built if needed).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

die() { echo "deploy-netns: $*" >&2; exit 2; }
log() { echo "deploy-netns: $*"; }

cmd=${1:-}
[ $# -gt 0 ] && shift
name=ildep replicas=3 writers=1 puts=10000 rate=2000 json=0 pair=0
cpu=$(( $(nproc) - 1 ))
while [ $# -gt 0 ]; do
  case "$1" in
    --name) name=${2:-}; shift 2 ;;
    --replicas) replicas=${2:-}; shift 2 ;;
    --writers) writers=${2:-}; shift 2 ;;
    --puts) puts=${2:-}; shift 2 ;;
    --rate) rate=${2:-}; shift 2 ;;
    --cpu) cpu=${2:-}; shift 2 ;;
    --json) json=1; shift ;;
    --pair) pair=1; shift ;;
    *) die "unknown option '$1' (allowed: --name, --replicas, --writers, --puts, --rate, --cpu, --pair, --json)" ;;
  esac
done
case "$cmd" in
  up|status|down) ;;
  *) die "usage: $0 up|status|down [--name NAME] [options] (see the header of $0)" ;;
esac
[[ "$name" =~ ^[A-Za-z0-9_-]{1,24}$ ]] || die "--name '$name': 1 to 24 of A-Z a-z 0-9 _ -"
isnum() { [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge "$3" ] && [ "$2" -le "$4" ] ||
  die "$1 '$2': a whole number from $3 to $4"; }
isnum --replicas "$replicas" 1 16
isnum --writers "$writers" 1 16
isnum --puts "$puts" 1 100000000
isnum --rate "$rate" 1 1000000
isnum --cpu "$cpu" 0 $(( $(nproc) - 1 ))
[ "$(id -u)" -eq 0 ] || die "run as root (network namespaces, veth pairs, bridges)"

STATE=/run/interlink-deploy/$name
CHAN=/dev/shm/$name-chan
SUBNET=10.77           # inside the deployment's namespaces only: never clashes with the host's
MCAST=239.1.1.1 GROUP=1 # configs/uto.yaml's group 1; il-kvstore's default
NS_SWA=$name-swa NS_SWB=$name-swb NS_APP=$name-app
ns_host() { echo "$name-h$1"; }
# A pair: appliance x (a or b) in NAME-appx with its control process; etcd and the pair
# heartbeat on the management network NAME-mgmt (a bridge, MGMT.0/24: the control processes
# .1 and .2, the etcd members .11 to .13).
ETCD_DIR=/var/lib/interlink-deploy/$name
MGMT=10.78
ETCD_URLS="http://$MGMT.0.11:2379,http://$MGMT.0.12:2379,http://$MGMT.0.13:2379"
NS_MGMT=$name-mgmt
chan_of() { echo "/dev/shm/$name-$1-chan"; }
# Was this deployment brought up as a pair? (status and down look at what `up` made.)
[ -f "$STATE/pair" ] && pair=1

# The namespaces of this deployment, whatever its size: exactly NAME-swa, -swb, -app, -appa,
# -appb, -mgmt, -hN.
our_netns() {
  ip netns list 2>/dev/null | awk '{print $1}' |
    grep -E "^$name-(swa|swb|app|appa|appb|mgmt|h[0-9]+)\$" || true
}

# What this deployment started, in order: lines "<what> <pid> <namespace>".
procs() { cat "$STATE/procs" 2>/dev/null || true; }

# The pid of <what> if it still runs inside the namespace it was started in.
live_pid() {
  local w pid ns
  while read -r w pid ns; do
    [ "$w" = "$1" ] || continue
    [ -d "/proc/$pid" ] && [ "$(ip netns identify "$pid" 2>/dev/null)" = "$ns" ] &&
      echo "$pid" && return 0
  done < <(procs)
  return 1
}

# Start <what> in namespace <ns>, in a session of its own, logging to STATE/<what>.log.
start() {
  local what=$1 ns=$2
  shift 2
  setsid ip netns exec "$ns" "$@" </dev/null >"$STATE/$what.log" 2>&1 &
  echo "$what $! $ns" >>"$STATE/procs"
}

# interlink-control's management socket: one command, the answer on stdout. A pair's:
# ctl_cmd COMMAND NODE.
ctl_cmd() {
  local ch=$CHAN
  [ $# -gt 1 ] && ch=$(chan_of "$2")
  /usr/bin/python3 - "$ch.mgmt" "$1" <<'EOF'
import os, socket, sys, tempfile
path = os.path.join(tempfile.gettempdir(), f"il-deploy-{os.getpid()}.sock")
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
try:
    s.bind(path)
    s.settimeout(2)
    s.sendto(sys.argv[2].encode(), sys.argv[1])
    print(s.recv(65536).decode(), end="")
except OSError:
    pass
finally:
    s.close()
    os.unlink(path)
EOF
}

wait_for() {  # wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds
  local end=$(( SECONDS + $1 )) what=$2
  shift 2
  until "$@"; do
    if [ $SECONDS -ge $end ]; then
      echo "deploy-netns: timed out waiting for $what" >&2
      return 1
    fi
    sleep 0.2
  done
}

veth() {  # veth NS_A IF_A NS_B IF_B: a veth pair across two namespaces, offloads off
  ip -n "$1" link add "$2" type veth peer name "$4" netns "$3"
  # The appliance rewrites frames in place (and inserts headers in raw mode): a checksum
  # left to offload would reach the hosts wrong and they would drop every frame.
  ip netns exec "$1" ethtool -K "$2" tx off rx off tso off gso off gro off >/dev/null 2>&1 || true
  ip netns exec "$3" ethtool -K "$4" tx off rx off tso off gso off gro off >/dev/null 2>&1 || true
  ip -n "$1" link set "$2" up
  ip -n "$3" link set "$4" up
}

ns_add() {
  ip netns add "$1"
  ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  ip -n "$1" link set lo up
}

ready_replicas() {
  local n=0
  for i in $(seq 1 "$replicas"); do
    grep -q '"ready": true' "$STATE/replica$i.json" 2>/dev/null && n=$((n + 1))
  done
  [ "$n" -eq "$replicas" ]
}

dp_attached() { ctl_cmd status | grep -Eq '^dp_incarnation [1-9]'; }

# A pair: node $1's `ha` says role $2 (a standby: with its data plane alive and the owner
# known; $3, if given, is that owner).
ha_is() {
  local out
  out=$(ctl_cmd ha "$1")
  grep -qx "role $2" <<<"$out" || return 1
  [ "$2" = active ] || { grep -qx "dp_alive 1" <<<"$out" && grep -Eqx "owner ${3:-[ab]}" <<<"$out"; }
}

# The pair is whole: one appliance active, the other its standby. Not necessarily a: on a
# loaded machine a data plane descheduled past the detection settings (40 ms) hands the link
# to the other one, as it should.
pair_whole() {
  { ha_is a active && ha_is b standby a; } || { ha_is b active && ha_is a standby b; }
}

etcd_up() {
  ip netns exec "$NS_MGMT" /usr/bin/python3 - "$ETCD_URLS" <<'EOF'
import json, sys, urllib.request
for u in sys.argv[1].split(","):
    try:
        with urllib.request.urlopen(u + "/health", timeout=1) as r:
            if json.loads(r.read()).get("health") != "true":
                sys.exit(1)
    except (OSError, ValueError):
        sys.exit(1)
EOF
}

# An up that fails half-way shows the logs and removes what it made.
up_failed() {
  [ "$up_done" = 1 ] && return
  echo "deploy-netns: up failed; the logs, then clean-up:" >&2
  for f in "$STATE"/*.log; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }
  done
  do_down >/dev/null 2>&1 || true
}

# A pair's links: each appliance's "in" on switch A and "out" on switch B, both ports
# multicast-router ports on both switches (the standby must get every group's traffic on
# "out" too: it is what it watches and keeps), and each appliance's "mgmt" on the management
# bridge.
pair_links() {
  ns_add "$NS_MGMT"
  ip -n "$NS_MGMT" link add br0 type bridge
  ip -n "$NS_MGMT" link set br0 up
  local x n=0 i
  for i in 11 12 13; do ip -n "$NS_MGMT" addr add "$MGMT.0.$i/24" dev br0; done
  for x in a b; do
    n=$(( n + 1 ))
    ns_add "$name-app$x"
    veth "$name-app$x" in "$NS_SWA" "app$x"
    veth "$name-app$x" out "$NS_SWB" "app$x"
    veth "$name-app$x" mgmt "$NS_MGMT" "app$x"
    ip -n "$NS_MGMT" link set "app$x" master br0
    ip -n "$name-app$x" addr add "$MGMT.0.$n/24" dev mgmt
    for sw in "$NS_SWA" "$NS_SWB"; do
      ip -n "$sw" link set "app$x" master br0
      bridge -n "$sw" link set dev "app$x" mcast_router 2
    done
  done
  for sw in "$NS_SWA" "$NS_SWB"; do ip -n "$sw" link set br0 up; done
}

# etcd x3 on the management network (data on disk), then appliance a with its control
# process (it commits the first epoch and becomes the active one), then b (its standby) on
# the other CPU, until the pair is whole.
pair_up() {
  local i peers="" cpu_b=$(( (cpu + 1) % $(nproc) ))
  mkdir -p "$ETCD_DIR"
  for i in 1 2 3; do peers+="${peers:+,}e$i=http://$MGMT.0.1$i:2380"; done
  log "$name: etcd x3 on $MGMT.0.11-13 (data in $ETCD_DIR)"
  for i in 1 2 3; do
    start "etcd$i" "$NS_MGMT" etcd --name "e$i" --data-dir "$ETCD_DIR/e$i" \
      --listen-client-urls "http://$MGMT.0.1$i:2379" \
      --advertise-client-urls "http://$MGMT.0.1$i:2379" \
      --listen-peer-urls "http://$MGMT.0.1$i:2380" \
      --initial-advertise-peer-urls "http://$MGMT.0.1$i:2380" \
      --initial-cluster "$peers" --initial-cluster-token "il-$name" \
      --initial-cluster-state new --heartbeat-interval 25 --election-timeout 250 \
      --log-level warn
  done
  wait_for 30 "the etcd cluster to elect a leader" etcd_up
  local x n=0 c
  for x in a b; do
    n=$(( n + 1 ))
    c=$cpu
    [ "$x" = b ] && c=$cpu_b
    log "$name: appliance $x (CPU $c, file prefix $name-$x) and its interlink-control"
    start "control-$x" "$name-app$x" "$BUILD/control/interlink-control" --chan "$(chan_of "$x")" \
      --window 256 --suspect-ms 500 --exclude-ms 4000 -v \
      --ha-etcd "$ETCD_URLS" --ha-node "$x" --ha-prefix "/interlink/$name/" \
      --ha-listen "$MGMT.0.$n:7411" --ha-peer "$MGMT.0.$(( 3 - n )):7411"
    start "appliance-$x" "$name-app$x" taskset -c "$c" "$BUILD/dataplane/interlink" \
      -c "$ROOT/configs/ha.yaml" --json "$STATE/appliance-$x.json" \
      --set "name=$name-$x" \
      --set "ports.in.device=net_af_packet0,iface=in,framecnt=4096" \
      --set "ports.out.device=net_af_packet1,iface=out,framecnt=4096" \
      --set "stages.ctrl.chan=$(chan_of "$x")" \
      --set "stages.ha.standby_idle_us=100" \
      --set "eal=[--no-huge, -m, \"512\", --lcores, \"0@$c,1@$c\", --log-level, \"lib.eal:error\"]"
    if [ "$x" = a ]; then
      wait_for 30 "appliance a to become the active one" ha_is a active
    else
      wait_for 30 "the pair to be whole (one active, the other its standby)" pair_whole
    fi
  done
}

do_up() {
  if [ -d "$STATE" ] || [ -n "$(our_netns)" ]; then
    die "a deployment named '$name' exists: '$0 down --name $name' first, or pick another --name"
  fi
  BUILD=${IL_BUILD:-build}
  if [ "$BUILD" = build ]; then
    ./scripts/install-deps.sh >/dev/null
    nice ./scripts/build.sh dataplane/interlink control/interlink-control \
      examples/kvstore/il-kvstore >/dev/null
  fi
  BUILD=$(cd "$BUILD" && pwd)
  for b in dataplane/interlink control/interlink-control examples/kvstore/il-kvstore; do
    [ -x "$BUILD/$b" ] || die "$BUILD/$b is missing: build first (./scripts/build.sh)"
  done
  local hosts=$(( replicas + writers ))
  if [ "$pair" = 1 ]; then
    command -v etcd >/dev/null || die "etcd is not installed (Debian etcd-server; scripts/install-deps.sh)"
    [ -e "$ETCD_DIR" ] && die "$ETCD_DIR exists: '$0 down --name $name' first"
  fi
  mkdir -p "$STATE"
  [ "$pair" = 1 ] && touch "$STATE/pair"
  up_done=0
  trap 'up_failed' EXIT

  if [ "$pair" = 1 ]; then
    log "$name: switches, a management network, two appliances and $hosts hosts in network namespaces"
    for ns in "$NS_SWA" "$NS_SWB"; do ns_add "$ns"; done
  else
    log "$name: switches, appliance and $hosts hosts in network namespaces"
    for ns in "$NS_SWA" "$NS_SWB" "$NS_APP"; do ns_add "$ns"; done
  fi
  # Switch A carries the hosts' TX interfaces to the appliance's "in" port: IGMP snooping on,
  # the appliance's port a permanent multicast-router port (it never joins a group itself),
  # and no flooding of unregistered multicast to the hosts' ports, so every host's DATA goes
  # to the appliance only. Switch B carries "out" to the hosts' RX interfaces: snooping with a
  # querier, so each host gets the groups it joined.
  ip -n "$NS_SWA" link add br0 type bridge mcast_snooping 1 mcast_querier 0
  ip -n "$NS_SWB" link add br0 type bridge mcast_snooping 1 mcast_querier 1
  if [ "$pair" = 1 ]; then
    pair_links
  else
    veth "$NS_APP" in "$NS_SWA" app
    veth "$NS_APP" out "$NS_SWB" app
    for sw in "$NS_SWA" "$NS_SWB"; do
      ip -n "$sw" link set app master br0
      ip -n "$sw" link set br0 up
    done
    bridge -n "$NS_SWA" link set dev app mcast_router 2
  fi
  for i in $(seq 1 "$hosts"); do
    local h
    h=$(ns_host "$i")
    ns_add "$h"
    veth "$h" tx0 "$NS_SWA" "h$i"
    veth "$h" rx0 "$NS_SWB" "h$i"
    ip -n "$NS_SWA" link set "h$i" master br0
    bridge -n "$NS_SWA" link set dev "h$i" mcast_flood off
    ip -n "$NS_SWB" link set "h$i" master br0
    ip -n "$h" addr add "$SUBNET.1.$i/24" dev tx0
    ip -n "$h" addr add "$SUBNET.2.$i/24" dev rx0
    # Frames reach rx0 from addresses routed elsewhere (the appliance's own address, other
    # hosts' and our own TX addresses): no reverse-path filter, accept our own source, and
    # answer ARP for an address only on its own interface (docs/libinterlink.md).
    ip netns exec "$h" sysctl -qw net.ipv4.conf.all.rp_filter=0 \
      net.ipv4.conf.default.rp_filter=0 net.ipv4.conf.rx0.rp_filter=0 \
      net.ipv4.conf.all.accept_local=1 net.ipv4.conf.rx0.accept_local=1 \
      net.ipv4.conf.all.arp_ignore=1
  done

  if [ "$pair" = 1 ]; then
    pair_up
  else
    log "$name: interlink-control and the appliance (CPU $cpu, file prefix $name)"
    start control "$NS_APP" "$BUILD/control/interlink-control" --chan "$CHAN" --window 256 \
      --suspect-ms 500 --exclude-ms 4000 -v
    start appliance "$NS_APP" taskset -c "$cpu" "$BUILD/dataplane/interlink" \
      -c "$ROOT/configs/uto.yaml" --json "$STATE/appliance.json" \
      --set "name=$name" \
      --set "ports.in.device=net_af_packet0,iface=in,framecnt=4096" \
      --set "ports.out.device=net_af_packet1,iface=out,framecnt=4096" \
      --set "stages.ctrl.chan=$CHAN" \
      --set "eal=[--no-huge, -m, \"512\", --lcores, \"0@$cpu,1@$cpu\", --log-level, \"lib.eal:error\"]"
    wait_for 30 "the appliance to attach to interlink-control" dp_attached
  fi

  log "$name: $replicas il-kvstore replicas"
  for i in $(seq 1 "$replicas"); do
    local peers=() q
    # A replica that restarts fetches the state from one of the others (over TCP, switch A).
    for q in $(seq 1 "$replicas"); do
      [ "$q" -ne "$i" ] && peers+=(--peer "$SUBNET.1.$q:7500")
    done
    start "replica$i" "$(ns_host "$i")" "$BUILD/examples/kvstore/il-kvstore" replica \
      --tx tx0 --rx rx0 --id $(( 100 + i )) --group "$GROUP" --mcast "$MCAST" \
      --listen "$SUBNET.1.$i:7500" "${peers[@]}" --status "$STATE/replica$i.json"
  done
  wait_for 60 "the replicas to join" ready_replicas
  log "$name: $writers writer(s), $puts PUTs each at $rate PUTs/s"
  for w in $(seq 1 "$writers"); do
    start "writer$w" "$(ns_host $(( replicas + w )))" "$BUILD/examples/kvstore/il-kvstore" \
      writer --tx tx0 --rx rx0 --id "$w" --group "$GROUP" --mcast "$MCAST" --count "$puts" \
      --rate "$rate" --seed "$w" --status "$STATE/writer$w.json"
  done
  up_done=1
  log "$name is up. '$0 status --name $name' shows what runs; '$0 down --name $name' removes it."
}

do_status() {
  if [ ! -d "$STATE" ] && [ -z "$(our_netns)" ]; then
    if [ "$json" = 1 ]; then echo '{"name": "'"$name"'", "up": false}'; else
      echo "deployment $name: not deployed"; fi
    return 3
  fi
  local what pid ns list=()
  while read -r what pid ns; do
    list+=("$what=$(live_pid "$what" || echo 0)")
  done < <(procs)
  # What the appliances' telemetry and the control processes say: "" for one appliance,
  # "-a" and "-b" for a pair.
  local sfx x
  if [ "$pair" = 1 ]; then sfx="-a -b"; else sfx="-"; fi
  for x in $sfx; do
    x=${x#-}
    local pre=$name ch=()
    [ -n "$x" ] && pre=$name-$x && ch=("$x")
    export "IL_INFO_${x:-one}=$(echo /interlink/info | timeout 5 dpdk-telemetry.py -f "$pre" 2>/dev/null | tail -n 1 || true)"
    export "IL_CTL_${x:-one}=$(ctl_cmd status "${ch[@]}")"
    [ -n "$x" ] && export "IL_HA_$x=$(ctl_cmd ha "$x")"
  done
  /usr/bin/python3 - "$name" "$STATE" "$json" "$pair" "$(our_netns | tr '\n' ' ')" \
    "${list[@]}" <<'EOF'
import json, os, sys
from pathlib import Path
name, state, as_json, pair, netns, *procs = sys.argv[1:]
state = Path(state)
nodes = ["a", "b"] if pair == "1" else ["one"]

def load(p):
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return {}

def kv(text, ints=True):
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if not k or k == "takeover":
            continue
        v = v.strip()
        if v.isdigit():
            out[k] = int(v)
        elif not ints:
            out[k] = v
    return out

out = {"name": name, "up": True, "state_dir": str(state), "netns": netns.split(), "procs": {}}
info, ctl = {}, {}
for x in nodes:
    try:
        info[x] = json.loads(os.environ.get(f"IL_INFO_{x}", ""))["/interlink/info"]
    except (ValueError, KeyError, TypeError):
        info[x] = None
    ctl[x] = kv(os.environ.get(f"IL_CTL_{x}", ""))
if pair == "1":
    out["pair"] = {x: kv(os.environ.get(f"IL_HA_{x}", ""), ints=False) for x in nodes}
    out["appliance_info"] = info
    out["control"] = ctl
    act = [x for x in nodes if out["pair"][x].get("role") == "active"]
    out["active"] = act[0] if len(act) == 1 else None
else:
    out["appliance_info"] = info["one"]
    out["control"] = ctl["one"]
ok = True
for p in procs:
    what, pid = p.split("=")
    st = {"pid": int(pid), "running": pid != "0"}
    st.update(load(state / f"{what}.json") if not what.startswith("appliance") else {})
    if what.startswith("writer"):
        st["done"] = not st["running"] and "pending" in st
    elif not st["running"]:
        ok = False
    out["procs"][what] = st
if pair == "1":
    # One active, the other its standby: a data plane alive and the same owner.
    ok = ok and out["active"] is not None and all(
        out["pair"][x].get("owner") == out["active"] and
        out["pair"][x].get("dp_alive") == 1 for x in nodes)
out["healthy"] = ok
if as_json == "1":
    print(json.dumps(out))
    sys.exit(0 if ok else 1)
print(f"deployment {name}: {'up' if ok else 'DEGRADED'}  (state, logs: {state})")
print(f"  namespaces: {' '.join(sorted(out['netns']))}")
for what, st in out["procs"].items():
    run = "running" if st["running"] else ("done" if st.get("done") else "NOT RUNNING")
    extra = ""
    x = what.partition("-")[2] or "one"
    if what.startswith("appliance") and info.get(x):
        i = info[x]
        pre = name if x == "one" else f"{name}-{x}"
        extra = f"uptime {i.get('uptime_s')} s, epoch {i.get('epoch')}, drops {i.get('drops_total')}" \
                f"  (dpdk-telemetry.py -f {pre})"
    elif what.startswith("control") and pair == "1" and out["pair"].get(x):
        h = out["pair"][x]
        heard = h.get("peer_heard_ms")
        heard = "never" if not isinstance(heard, int) or heard > 10 ** 9 else f"{heard} ms ago"
        extra = f"{h.get('role')}, epoch {h.get('epoch')}, owner {h.get('owner')}, " \
                f"takeovers {h.get('takeovers')}; peer {h.get('peer')} " \
                f"({h.get('peer_role')}, heard {heard})"
    elif what.startswith("control") and ctl.get(x):
        c = ctl[x]
        extra = ", ".join(f"{k} {c[k]}" for k in ("dp_incarnation", "joins", "views", "exclusions")
                          if k in c)
    elif what.startswith("replica") and "applied" in st:
        extra = f"{'ready' if st.get('ready') else 'joining'}, applied {st['applied']}, " \
                f"hash {st.get('hash')}"
    elif what.startswith("writer") and "sent" in st:
        extra = f"sent {st['sent']}, pending {st['pending']}"
    print(f"  {what:<11} pid {st['pid']:<8} {run:<12} {extra}")
sys.exit(0 if ok else 1)
EOF
}

# Stop the processes named (by `what`) with <signal>, all at once, then SIGKILL whatever is
# left after <grace> seconds.
stop() {
  local sig=$1 grace=$2 pids=() pid
  shift 2
  for what in "$@"; do
    pid=$(live_pid "$what") || continue
    kill "-$sig" "$pid" 2>/dev/null || true
    pids+=("$pid")
  done
  local end=$(( SECONDS + grace ))
  for pid in "${pids[@]}"; do
    while [ -d "/proc/$pid" ] && [ $SECONDS -lt $end ]; do sleep 0.1; done
    [ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  done
}

do_down() {
  local nss
  nss=$(our_netns)
  local what pid ns hosts=()
  # Writers and replicas first, then the appliance (SIGINT: a clean stop, its summary in
  # appliance.log), then the control process.
  while read -r what pid ns; do
    case "$what" in writer*|replica*) hosts+=("$what") ;; esac
  done < <(procs)
  stop TERM 10 "${hosts[@]}"
  stop INT 20 appliance appliance-a appliance-b
  stop TERM 10 control control-a control-b
  stop TERM 10 etcd1 etcd2 etcd3
  # Anything else still inside our namespaces is ours too.
  for ns in $nss; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  done
  for ns in $nss; do
    local end=$(( SECONDS + 10 ))
    while [ -n "$(ip netns pids "$ns" 2>/dev/null)" ] && [ $SECONDS -lt $end ]; do sleep 0.1; done
    ip netns del "$ns" 2>/dev/null || true   # its veths and bridge go with it
  done
  # A pair's names (NAME-a, NAME-b) only for a pair: they could be another deployment's own.
  local ch chans=("$CHAN") dpdk=("/var/run/dpdk/$name")
  if [ "$pair" = 1 ]; then
    chans=("$(chan_of a)" "$(chan_of b)")
    dpdk=("/var/run/dpdk/$name-a" "/var/run/dpdk/$name-b")
    rm -rf "$ETCD_DIR"
  fi
  rm -rf "${dpdk[@]}" "$STATE"
  for ch in "${chans[@]}"; do rm -f "$ch" "$ch.sock" "$ch.mgmt"; done
  rmdir /run/interlink-deploy /var/lib/interlink-deploy 2>/dev/null || true
  log "$name is down"
}

case "$cmd" in
  up) do_up ;;
  status) do_status ;;
  down) do_down ;;
esac
