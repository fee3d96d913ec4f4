#!/usr/bin/env python3
# Side-by-side runs of bench_seq from several build directories on a shared
# machine: N rounds, each running every build's bench_seq once (taskset -c 1,
# 3 repetitions of --benchmark_min_time=0.5), alternated so that all builds
# meet the same load. Prints, per case and build, the median over the rounds
# of each round's median repetition, and every round's value in brackets.
#
#   bench/seq_ab.py 5 'BM_History/1/1/1' /path/to/build-before build
import json
import os
import statistics
import subprocess
import sys
import time

KEYS = ['cyc_p50', 'classify_p50', 'seq_p50', 'nak_p50', 'cycles_per_pkt', 'classify_cyc',
        'seq_cyc']


def run(build, pattern):
    out = subprocess.run(['taskset', '-c', '1', build + '/bench/bench_seq',
                          '--benchmark_filter=' + pattern, '--benchmark_min_time=0.5',
                          '--benchmark_repetitions=3', '--benchmark_report_aggregates_only=true',
                          '--benchmark_format=json'],
                         capture_output=True, text=True, check=True).stdout
    return [r for r in json.loads(out[out.index('{'):])['benchmarks']
            if r.get('aggregate_name') == 'median']


def main():
    rounds, pattern, builds = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    got = {}  # (build, case) -> one median row per round
    for i in range(rounds):
        for b in builds:
            for r in run(b, pattern):
                got.setdefault((b, r['run_name']), []).append(r)
            print(f'round {i} {b} done {time.strftime("%T")} load {os.getloadavg()[0]:.2f}',
                  file=sys.stderr)
    for case in sorted(set(c for _, c in got)):
        print(case)
        for b in builds:
            line = f'  {b:28s}'
            for k in KEYS:
                v = [r[k] for r in got.get((b, case), []) if k in r]
                if v:
                    line += f' {k}={statistics.median(v):6.1f} [{", ".join(f"{x:.0f}" for x in v)}]'
            print(line)


if __name__ == '__main__':
    main()
