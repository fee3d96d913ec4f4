#!/usr/bin/env bash
# Install what is missing, build, and run every test: C unit tests (release and
# ASan/UBSan builds), a short libFuzzer run of the parser, and the Python
# conformance and integration tests against the real binaries.
# .ci/run calls exactly this script.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-30}

step() { printf '\n==== %s ====\n' "$*"; }

step "dependencies"
./scripts/install-deps.sh

step "build (release)"
./scripts/build.sh

step "unit tests (release)"
# The pytest suites are meson tests too (suites conformance, integration);
# they run in one pytest call at the end.
meson test -C build --print-errorlogs --num-processes 1 --no-suite conformance \
  --no-suite integration

step "unit tests (ASan + UBSan)"
if [ ! -f build-san/build.ninja ]; then
  meson setup build-san -Dsanitize=true -Dbench=false --buildtype=debugoptimized >/dev/null
fi
ninja -C build-san
ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  meson test -C build-san --print-errorlogs --num-processes 1 --suite core --suite wire --suite stages \
  --suite impair --suite control --suite fec --suite util --suite coord --suite lec --suite shm \
  --suite ftcp --suite auth \
  --timeout-multiplier 4

step "fuzz the parser for ${FUZZ_SECONDS}s (libFuzzer)"
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang CXX=clang++ meson setup build-fuzz -Dfuzz=true -Dbench=false >/dev/null
fi
ninja -C build-fuzz tests/fuzz/fuzz_parse
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp tests/fuzz/corpus/* "$corpus"/
./build-fuzz/tests/fuzz/fuzz_parse -max_total_time="$FUZZ_SECONDS" -max_len=2048 \
  -print_final_stats=1 "$corpus" 2>&1 | tail -n 4

step "conformance and integration tests (pytest + Scapy)"
IL_BUILD="$PWD/build" /usr/bin/python3 -m pytest -q -p no:cacheprovider \
  tests/conformance tests/integration
