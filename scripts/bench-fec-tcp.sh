#!/usr/bin/env bash
# The Maelstrom TCP benchmark (issue 4, the shape of the paper's Fig. 10): hosts A and B in
# network namespaces, the FEC link pair between them (configs/linkpair.yaml: encoder ->
# impairment with Bernoulli loss both ways, 50 ms one way, 1 Gbit/s -> decoder), iperf3 with
# 8 parallel TCP flows (Reno) from A to B, at each loss rate with FEC on and off; then the
# link pair's forwarding rate against plain forwarding at 1500 B (memif + interlink-pktgen).
# Writes results.json, table.md, fwd.json and the plot (default docs/fec-tcp.png); the table
# and ratios go into docs/fec.md's "Measured" section by hand.
#
#   ./scripts/bench-fec-tcp.sh                       # 7 loss rates x on/off x 20 s (~7 min)
#   ./scripts/bench-fec-tcp.sh --repeat 2            # each point twice, medians
#   ./scripts/bench-fec-tcp.sh --loss 0,0.01 --seconds 10 --no-fwd
#
# Options: --seconds S (20), --loss LIST (0,0.0001,0.001,0.01,0.02,0.05,0.1), --repeat N (1),
# --out DIR (/tmp/il-fec-tcp), --png FILE (docs/fec-tcp.png), --no-fwd, --append (add the
# repeats to DIR/results.json instead of starting over).
# IL_BUILD names the build directory (default build/).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "bench-fec-tcp: run as root (network namespaces, veth pairs)" >&2
  exit 2
fi
seconds=20 loss=0,0.0001,0.001,0.01,0.02,0.05,0.1 repeat=1 out=/tmp/il-fec-tcp
png=docs/fec-tcp.png fwd=1 append=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --loss) loss=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --png) png=$2; shift 2 ;;
    --no-fwd) fwd=0; shift ;;
    --append) append=(--append); shift ;;
    *) echo "bench-fec-tcp: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
BUILD=${IL_BUILD:-build}
if [ "$BUILD" = build ]; then
  nice ./scripts/build.sh >/dev/null
else
  nice ninja -C "$BUILD" >/dev/null
fi
export IL_BUILD=$(cd "$BUILD" && pwd)
for tool in iperf3 ip ethtool taskset; do
  command -v "$tool" >/dev/null || { echo "bench-fec-tcp: $tool is missing (scripts/install-deps.sh)" >&2; exit 2; }
done
mkdir -p "$out"
lib=tests/integration/test_fec_lib.py
echo "bench-fec-tcp: $(date -u '+%Y-%m-%d %H:%M UTC'), loss $loss, $seconds s per point, x$repeat"
/usr/bin/python3 "$lib" tcp --seconds "$seconds" --loss "$loss" --repeat "$repeat" --out "$out" \
  "${append[@]}"
/usr/bin/python3 "$lib" plot "$out/results.json" --png "$png" --md "$out/table.md"
if [ "$fwd" = 1 ]; then
  echo "bench-fec-tcp: forwarding rate at 1500 B, link pair stages vs plain forwarding"
  /usr/bin/python3 "$lib" fwd --frame 1500 --seconds 5 --reps 3 --out "$out"
fi
