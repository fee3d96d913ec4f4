#!/usr/bin/env bash
# The main job on the embedded default configuration, on one machine, no NICs,
# no hugepages: interlink-pktgen's emulated senders -> net_memif -> the
# appliance (sequencer, NAK service) -> net_memif -> pktgen's emulated
# receivers, each of which loses 0.1% of frames on its own and repairs the
# gaps with NAKs. Live status lines from both, then both summaries.
#
#   sudo ./scripts/demo.sh [pktgen options...]     e.g. --count 5000000 --rate 2000000
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
./scripts/build.sh dataplane/interlink pktgen/interlink-pktgen >/dev/null

ncpu=$(nproc)
app_cpu=$(( ncpu > 1 ? 1 : 0 ))
tmp=$(mktemp -d)
app_pid=""
cleanup() {
  if [ -n "$app_pid" ] && kill -0 "$app_pid" 2>/dev/null; then
    kill -INT "$app_pid" 2>/dev/null || true
    wait "$app_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp" /var/run/dpdk/interlink-demo /var/run/dpdk/pktgen-demo
}
trap cleanup EXIT INT TERM

echo "== interlink demo: appliance on CPU $app_cpu, pktgen on CPU 0 =="
# The embedded default config, with both lcores of the appliance on one CPU.
taskset -c "$app_cpu" ./build/dataplane/interlink \
  --set name=interlink-demo \
  --set 'eal=[--no-huge, -m, "1024", --lcores, "0,1", --log-level, "lib.eal:error"]' \
  --json "$tmp/appliance.json" > >(sed -u 's/^/[appliance] /') 2>&1 &
app_pid=$!
sleep 1.5
kill -0 "$app_pid" 2>/dev/null || { echo "the appliance did not start"; exit 1; }

set +e
taskset -c 0 ./build/pktgen/interlink-pktgen \
  --tx net_memif0,role=client,socket=/run/interlink/in.sock \
  --rx net_memif1,role=client,socket=/run/interlink/out.sock \
  --senders 4 --groups 2 --receivers 3 --count 2000000 --rate 1000000 \
  --loss bernoulli:0.001 --json "$tmp/pktgen.json" "$@" \
  -- --file-prefix pktgen-demo --lcores 0 --log-level lib.eal:error \
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
