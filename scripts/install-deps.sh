#!/usr/bin/env bash
# Install every build and test dependency of Interlink from Debian 12's archive.
# Idempotent: packages already present are skipped; safe to run on every build.
set -euo pipefail

PKGS=(
  build-essential pkg-config meson ninja-build clang llvm lld libclang-rt-14-dev
  libdpdk-dev dpdk dpdk-dev libsodium-dev
  libisal-dev liburing-dev libbenchmark-dev libcmocka-dev libyaml-dev
  libpcap-dev libcurl4-openssl-dev libjansson-dev etcd-server
  python3 python3-scapy python3-pytest python3-matplotlib python3-yaml
  python3-venv python3-setuptools python3-wheel
  iproute2 iperf3 tcpdump ethtool procps psmisc tshark
  tmux python3-prometheus-client prometheus
  debhelper scdoc man-db systemd
  nginx redis-server redis-tools curl
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}); run as root" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# tshark's wireshark-common asks whether non-root users may capture: no, and no prompt.
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
