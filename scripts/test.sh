#!/usr/bin/env bash
# Install what is missing, build, and run every test: C unit tests (release and
# ASan/UBSan builds), a short libFuzzer run of every fuzz target, and the Python
# conformance and integration tests against the real binaries.
# .ci/run calls exactly this script.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-15}

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

step "every benchmark starts (its cases listed; bench_scale one short round)"
# Nothing is timed here: a benchmark that cannot set itself up (a config its
# stages now refuse, an EAL too small for them) fails the step instead of
# waiting for the next person who measures.
for b in $(find build/bench -type f -executable -name 'bench_*' | sort); do
  case "$b" in
    */bench_scale) args=(--seconds 0.1 --rounds 1) ;;
    *) args=(--benchmark_list_tests) ;;
  esac
  if ! out=$(timeout 120 "$b" "${args[@]}" 2>&1); then
    printf '%s\n' "$out" | tail -n 20
    echo "$b did not start" >&2
    exit 1
  fi
  printf '%-40s ok\n' "$b"
done
# and bench_scale with the lec stage in its shards
if ! out=$(timeout 120 build/bench/scale/bench_scale --seconds 0.1 --rounds 1 --lec 2>&1); then
  printf '%s\n' "$out" | tail -n 20
  echo "bench_scale --lec did not start" >&2
  exit 1
fi

step "unit tests (ASan + UBSan)"
if [ ! -f build-san/build.ninja ]; then
  meson setup build-san -Dsanitize=true -Dbench=false --buildtype=debugoptimized >/dev/null
fi
ninja -C build-san
# Every C suite (suite 'unit': endpoint, pktgen, ftcp and the rest alike), leaks included.
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  meson test -C build-san --print-errorlogs --num-processes 1 --suite unit \
  --timeout-multiplier 4

step "fuzz every parser for ${FUZZ_SECONDS}s each (libFuzzer, docs/fuzzing.md)"
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang CXX=clang++ meson setup build-fuzz -Dfuzz=true -Dbench=false >/dev/null
fi
fuzz_targets=$(awk '!/^#/ && NF { print $1 }' tests/fuzz/targets.txt)
ninja -C build-fuzz $(printf 'tests/fuzz/fuzz_%s ' $fuzz_targets)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for t in $fuzz_targets; do
  # The seed corpus (regression inputs included) runs first; a finding fails
  # the step, with the log and the input left in $work.
  mkdir "$work/$t"
  cp tests/fuzz/corpus/"$t"/* "$work/$t"/
  max_len=$(awk -v t="$t" '$1 == t { print $2 }' tests/fuzz/targets.txt)
  if ! (cd "$work" && "$OLDPWD/build-fuzz/tests/fuzz/fuzz_$t" -max_total_time="$FUZZ_SECONDS" \
        -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$work/$t-" "$work/$t" >"$work/$t.log" 2>&1); then
    tail -n 40 "$work/$t.log"
    trap - EXIT
    echo "fuzz_$t found something: $work/$t.log and $work/$t-*" >&2
    exit 1
  fi
  printf '%-12s %s\n' "$t" "$(grep -E '^stat::(number_of_executed_units|average_exec_per_sec)' \
    "$work/$t.log" | tr '\n' ' ')"
done

step "conformance and integration tests (pytest + Scapy)"
IL_BUILD="$PWD/build" /usr/bin/python3 -m pytest -q -p no:cacheprovider \
  tests/conformance tests/integration
