#!/usr/bin/env bash
# The main job on the embedded default configuration, on one machine, no NICs,
# no hugepages: interlink-pktgen's emulated senders -> net_memif -> the
# appliance (sequencer, NAK service) -> net_memif -> pktgen's emulated
# receivers, each of which loses 0.1% of frames on its own and repairs the
# gaps with NAKs. Live status lines from both, then both summaries.
#
#   ./scripts/demo.sh [pktgen options...]     e.g. --count 5000000 --rate 2000000
#
# Run as root. Every name a demo uses is its own: DPDK file prefixes ildemo-TAG and
# ildemo-gen-TAG, memif socket files in a temporary directory. Two demos run side by side,
# and each one's clean-up removes only what it made.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
./scripts/build.sh dataplane/interlink pktgen/interlink-pktgen >/dev/null

ncpu=$(nproc)
app_cpu=$(( ncpu > 1 ? 1 : 0 ))
tmp=$(mktemp -d /tmp/ildemo.XXXXXXXX)
tag=${tmp##*.}
app_prefix=ildemo-$tag gen_prefix=ildemo-gen-$tag
sock_in=$tmp/in.sock sock_out=$tmp/out.sock
app_pid=""
cleanup() {
  if [ -n "$app_pid" ] && kill -0 "$app_pid" 2>/dev/null; then
    kill -INT "$app_pid" 2>/dev/null || true
    wait "$app_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp" "/var/run/dpdk/$app_prefix" "/var/run/dpdk/$gen_prefix"
}
trap cleanup EXIT INT TERM

echo "== interlink demo $tag: appliance on CPU $app_cpu (file prefix $app_prefix)," \
  "pktgen on CPU 0 (file prefix $gen_prefix), memif sockets in $tmp =="
# The embedded default config, with both lcores of the appliance on one CPU and memif
# sockets of this demo's own.
taskset -c "$app_cpu" ./build/dataplane/interlink \
  --set "name=$app_prefix" \
  --set "ports.in.device=net_memif0,role=server,socket=$sock_in,socket-abstract=no" \
  --set "ports.out.device=net_memif1,role=server,socket=$sock_out,socket-abstract=no" \
  --set 'eal=[--no-huge, -m, "1024", --lcores, "0,1", --log-level, "lib.eal:error"]' \
  --json "$tmp/appliance.json" > >(sed -u 's/^/[appliance] /') 2>&1 &
app_pid=$!
# Up once it listens on both sockets.
for _ in $(seq 1 300); do
  [ -S "$sock_in" ] && [ -S "$sock_out" ] && break
  kill -0 "$app_pid" 2>/dev/null || break
  sleep 0.1
done
[ -S "$sock_in" ] && [ -S "$sock_out" ] || { echo "the appliance did not start"; exit 1; }

set +e
taskset -c 0 ./build/pktgen/interlink-pktgen \
  --tx "net_memif0,role=client,socket=$sock_in,socket-abstract=no" \
  --rx "net_memif1,role=client,socket=$sock_out,socket-abstract=no" \
  --senders 4 --groups 2 --receivers 3 --count 2000000 --rate 1000000 \
  --loss bernoulli:0.001 --json "$tmp/pktgen.json" "$@" \
  -- --file-prefix "$gen_prefix" --lcores 0 --log-level lib.eal:error \
  2>&1 | sed -u 's/^/[pktgen]    /'
rc=${PIPESTATUS[0]}
set -e

kill -INT "$app_pid"
wait "$app_pid" || true
app_pid=""
sleep 0.2
echo
if [ "$rc" -eq 0 ]; then
  echo "demo: PASS - every receiver delivered every message in the same order"
else
  echo "demo: FAIL - see the pktgen summary above (exit $rc)"
fi
exit "$rc"
