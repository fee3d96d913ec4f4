#!/usr/bin/env bash
# Long libFuzzer runs, one target at a time, at the lowest priority (the
# machine is shared: nice 19 and SCHED_IDLE, so any other work takes the CPU
# first): docs/fuzzing.md.
#
#   scripts/fuzz.sh [-r RUNS] [-w DIR] [-t SECONDS] [TARGET...]
#
# RUNS executions per target (default 100000000); TARGETs from
# tests/fuzz/targets.txt (default: all of them, in its order). Each target
# starts from a copy of its seed corpus in DIR/<target> (default
# /var/tmp/interlink-fuzz; an existing corpus there is kept and grown), with
# the -max_len of targets.txt, and leaves its log in DIR/<target>.log and any
# finding in DIR/<target>-crash-* (or -leak-, -timeout-, -oom-). One line
# per target on stdout: executions, seconds, exec/s, corpus, the outcome
# ("interrupted" for a run stopped by SIGINT with nothing written).
# The build is build-fuzz (configured here if missing: clang, -Dfuzz=true).
# -t: libFuzzer's -timeout, the seconds one input may take before it counts
# as a hang (default 10). A run that will be paused (kill -STOP, to give a
# benchmark quiet cores) needs more than the pause: the pause is counted
# against the input that was running, which libFuzzer then writes as a
# slow-unit-* file (the pause, not a finding: docs/fuzzing.md).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=100000000
work=/var/tmp/interlink-fuzz
timeout=10
while getopts r:w:t: o; do
  case $o in
    r) runs=$OPTARG ;;
    w) work=$OPTARG ;;
    t) timeout=$OPTARG ;;
    *) echo "usage: $0 [-r RUNS] [-w DIR] [-t SECONDS] [TARGET...]" >&2; exit 2 ;;
  esac
done
case $timeout in ''|*[!0-9]*|0) echo "$0: -t expects whole seconds > 0, got '$timeout'" >&2; exit 2 ;; esac
shift $((OPTIND - 1))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(awk '!/^#/ && NF { print $1 }' tests/fuzz/targets.txt)

if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang CXX=clang++ meson setup build-fuzz -Dfuzz=true -Dbench=false >/dev/null
fi
nice -n 19 ninja -C build-fuzz $(printf 'tests/fuzz/fuzz_%s ' "${targets[@]}") >/dev/null
mkdir -p "$work"
rev=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!tests/fuzz/corpus' || echo +)
status=0
for t in "${targets[@]}"; do
  max_len=$(awk -v t="$t" '$1 == t { print $2 }' tests/fuzz/targets.txt)
  [ -n "$max_len" ] || { echo "$t: not in tests/fuzz/targets.txt" >&2; exit 2; }
  mkdir -p "$work/$t"
  cp -n tests/fuzz/corpus/"$t"/* "$work/$t"/
  start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  t0=$(date +%s)
  rc=0
  (cd "$work" && nice -n 19 chrt --idle 0 "$OLDPWD/build-fuzz/tests/fuzz/fuzz_$t" -runs="$runs" \
    -max_len="$max_len" -timeout="$timeout" -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/$t-" "$work/$t" >"$work/$t.log" 2>&1) || rc=$?
  secs=$(( $(date +%s) - t0 ))
  execs=$(awk '/^stat::number_of_executed_units/ { print $2 }' "$work/$t.log")
  rate=$(awk '/^stat::average_exec_per_sec/ { print $2 }' "$work/$t.log")
  outcome="no finding"
  if [ $rc -ne 0 ] && grep -q 'libFuzzer: run interrupted' "$work/$t.log" &&
     ! ls "$work/$t"-crash-* "$work/$t"-leak-* "$work/$t"-timeout-* "$work/$t"-oom-* >/dev/null 2>&1; then
    # SIGINT (the session's end, or an operator): executions so far, no finding
    outcome="interrupted (exit $rc), no finding up to there"
    status=1
  elif [ $rc -ne 0 ]; then
    outcome="FINDING (exit $rc): $(ls "$work/$t"-* 2>/dev/null | tr '\n' ' ' || true)"
    status=1
  fi
  printf '%-12s %s start %s  %s executions  %s s  %s exec/s  corpus %s  %s\n' "$t" "$rev" \
    "$start" "${execs:-?}" "$secs" "${rate:-?}" "$(ls "$work/$t" | wc -l)" "$outcome"
done
exit $status
