#!/usr/bin/env bash
# The emulated Interlink deployment of docs/deploy.md, from real pieces, on one machine:
# two switches (Linux bridges, each in a network namespace of its own), the appliance
# between them on net_af_packet ports (configs/uto.yaml, in its own namespace, with
# interlink-control beside it), and dual-homed hosts (one namespace each) running the
# replicated store il-kvstore: replicas and a writer.
#
#   ./scripts/deploy-netns.sh up     [--name NAME] [--replicas N] [--writers N]
#                                    [--puts N] [--rate PUTS_PER_S] [--cpu CPU]
#   ./scripts/deploy-netns.sh status [--name NAME] [--json]
#   ./scripts/deploy-netns.sh down   [--name NAME]
#
# Run as root. Everything a deployment makes carries its NAME (default "ildep"): the
# namespaces NAME-swa, NAME-swb, NAME-app and NAME-h1..., the DPDK file prefix NAME
# (/var/run/dpdk/NAME), the control channel /dev/shm/NAME-chan and the state directory
# /run/interlink-deploy/NAME (pids, logs, status files). Several deployments with different
# names run side by side; `down` removes only its own and may be run any number of times.
# IL_BUILD names the build directory (default build/, built if needed).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

die() { echo "deploy-netns: $*" >&2; exit 2; }
log() { echo "deploy-netns: $*"; }

cmd=${1:-}
[ $# -gt 0 ] && shift
name=ildep replicas=3 writers=1 puts=10000 rate=2000 json=0
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
    *) die "unknown option '$1' (allowed: --name, --replicas, --writers, --puts, --rate, --cpu, --json)" ;;
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

# The namespaces of this deployment, whatever its size: exactly NAME-swa, -swb, -app, -hN.
our_netns() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$name-(swa|swb|app|h[0-9]+)\$" || true
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

# interlink-control's management socket: one command, the answer on stdout.
ctl_cmd() {
  /usr/bin/python3 - "$CHAN.mgmt" "$1" <<'EOF'
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

# An up that fails half-way shows the logs and removes what it made.
up_failed() {
  [ "$up_done" = 1 ] && return
  echo "deploy-netns: up failed; the logs, then clean-up:" >&2
  for f in "$STATE"/*.log; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }
  done
  do_down >/dev/null 2>&1 || true
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
  mkdir -p "$STATE"
  up_done=0
  trap 'up_failed' EXIT

  log "$name: switches, appliance and $hosts hosts in network namespaces"
  for ns in "$NS_SWA" "$NS_SWB" "$NS_APP"; do ns_add "$ns"; done
  # Switch A carries the hosts' TX interfaces to the appliance's "in" port: IGMP snooping on,
  # the appliance's port a permanent multicast-router port (it never joins a group itself),
  # and no flooding of unregistered multicast to the hosts' ports, so every host's DATA goes
  # to the appliance only. Switch B carries "out" to the hosts' RX interfaces: snooping with a
  # querier, so each host gets the groups it joined.
  ip -n "$NS_SWA" link add br0 type bridge mcast_snooping 1 mcast_querier 0
  ip -n "$NS_SWB" link add br0 type bridge mcast_snooping 1 mcast_querier 1
  veth "$NS_APP" in "$NS_SWA" app
  veth "$NS_APP" out "$NS_SWB" app
  for sw in "$NS_SWA" "$NS_SWB"; do
    ip -n "$sw" link set app master br0
    ip -n "$sw" link set br0 up
  done
  bridge -n "$NS_SWA" link set dev app mcast_router 2
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
  local info
  info=$(echo /interlink/info | timeout 5 dpdk-telemetry.py -f "$name" 2>/dev/null | tail -n 1 || true)
  /usr/bin/python3 - "$name" "$STATE" "$json" "$info" "$(ctl_cmd status)" \
    "$(our_netns | tr '\n' ' ')" "${list[@]}" <<'EOF'
import json, sys
from pathlib import Path
name, state, as_json, info, ctl, netns, *procs = sys.argv[1:]
state = Path(state)

def load(p):
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return {}

out = {"name": name, "up": True, "state_dir": str(state), "netns": netns.split(), "procs": {}}
try:
    out["appliance_info"] = json.loads(info)["/interlink/info"]
except (ValueError, KeyError, TypeError):
    out["appliance_info"] = None
out["control"] = {k: int(v) for k, v in (l.split(" ", 1) for l in ctl.splitlines() if " " in l)
                  if v.strip().isdigit()}
ok = True
for p in procs:
    what, pid = p.split("=")
    st = {"pid": int(pid), "running": pid != "0"}
    st.update(load(state / f"{what}.json") if what != "appliance" else {})
    if what.startswith("writer"):
        st["done"] = not st["running"] and "pending" in st
    elif not st["running"]:
        ok = False
    out["procs"][what] = st
out["healthy"] = ok
if as_json == "1":
    print(json.dumps(out))
    sys.exit(0 if ok else 1)
print(f"deployment {name}: {'up' if ok else 'DEGRADED'}  (state, logs: {state})")
print(f"  namespaces: {' '.join(sorted(out['netns']))}")
for what, st in out["procs"].items():
    run = "running" if st["running"] else ("done" if st.get("done") else "NOT RUNNING")
    extra = ""
    if what == "appliance" and out["appliance_info"]:
        i = out["appliance_info"]
        extra = f"uptime {i.get('uptime_s')} s, epoch {i.get('epoch')}, drops {i.get('drops_total')}" \
                f"  (dpdk-telemetry.py -f {name})"
    elif what == "control" and out["control"]:
        c = out["control"]
        extra = ", ".join(f"{k} {c[k]}" for k in ("dp_incarnation", "joins", "views", "exclusions")
                          if k in c)
    elif what.startswith("replica") and "applied" in st:
        extra = f"{'ready' if st.get('ready') else 'joining'}, applied {st['applied']}, " \
                f"hash {st.get('hash')}"
    elif what.startswith("writer") and "sent" in st:
        extra = f"sent {st['sent']}, pending {st['pending']}"
    print(f"  {what:<10} pid {st['pid']:<8} {run:<12} {extra}")
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
  stop INT 20 appliance
  stop TERM 10 control
  # Anything else still inside our namespaces is ours too.
  for ns in $nss; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  done
  for ns in $nss; do
    local end=$(( SECONDS + 10 ))
    while [ -n "$(ip netns pids "$ns" 2>/dev/null)" ] && [ $SECONDS -lt $end ]; do sleep 0.1; done
    ip netns del "$ns" 2>/dev/null || true   # its veths and bridge go with it
  done
  rm -rf "/var/run/dpdk/$name" "$STATE"
  rm -f "$CHAN" "$CHAN.sock" "$CHAN.mgmt"
  rmdir /run/interlink-deploy 2>/dev/null || true
  log "$name is down"
}

case "$cmd" in
  up) do_up ;;
  status) do_status ;;
  down) do_down ;;
esac
