#!/usr/bin/env bash
# Configure (once) and build Interlink in ./build (release). Extra arguments go to ninja.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release >/dev/null
fi
ninja -C build "$@"
