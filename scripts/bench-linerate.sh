#!/usr/bin/env bash
# The line-rate benchmark in one command: builds what is missing, then runs
# bench/linerate/run.py: dpdk-testpmd (txonly) drives the appliance and the
# testpmd-io ceiling as fast as they take frames, interlink-pktgen measures no-drop
# rates and latency, and the same raw-mode job runs on veth pairs by the appliance,
# by an AF_PACKET sequencer and by a UDP-socket one. Writes the "Line rate" section
# of docs/benchmarks.md and docs/linerate-*.png.
#
#   ./scripts/bench-linerate.sh              # full run, about 5 minutes
#   ./scripts/bench-linerate.sh --quick      # one short point of each kind, no verdicts (< 1 min)
#   ./scripts/bench-linerate.sh --nice -10   # push other work on a shared machine aside
#
# Other options: bench/linerate/run.py --help. IL_BUILD names the build directory
# (default build/).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "bench-linerate: run as root (memif sockets, network namespaces, veth pairs)" >&2
  exit 2
fi
BUILD=${IL_BUILD:-build}
# Always bring the build up to date (a no-op when it is): a stale pktgen or appliance
# would measure yesterday's code.
if [ "$BUILD" = build ]; then
  nice ./scripts/build.sh >/dev/null
else
  nice ninja -C "$BUILD" >/dev/null
fi
for tool in dpdk-testpmd ip ethtool cc; do
  command -v "$tool" >/dev/null || { echo "bench-linerate: $tool is missing (scripts/install-deps.sh)" >&2; exit 2; }
done
exec /usr/bin/python3 bench/linerate/run.py --build "$BUILD" "$@"
