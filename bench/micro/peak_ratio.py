#!/usr/bin/env python3
"""Rows of ferry_micro as a fraction of the same run's sgemm peak, over alternating rounds.

Each round runs ferry_micro once with --benchmark_filter='ROWS|sgemm_peak.*/1$' (3 repetitions,
median), divides every row's GFLOP/s by that run's sgemm_peak_1024x1024x1024 and prints it; at
the end, per row, the median and range over the rounds. The machine's speed drifts between
minutes, so only ratios from one run are compared.

  python3 bench/micro/peak_ratio.py [--bin build/bench/micro/ferry_micro] [--rounds 10]
      [--rows 'l4_3x3.*(auto|direct|gemm)/1$|l4_im2col.*/1$']
"""
import argparse
import json
import statistics
import subprocess


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/bench/micro/ferry_micro")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--rows", default=r"l4_3x3.*(auto|direct|gemm)/1$|l4_im2col.*/1$")
    args = ap.parse_args()
    rows = {}
    for r in range(args.rounds):
        out = subprocess.run(
            [args.bin, f"--benchmark_filter={args.rows}|sgemm_peak.*/1$", "--benchmark_min_time=0.5",
             "--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true",
             "--benchmark_format=json"], capture_output=True, text=True, check=True).stdout
        vals = {b["run_name"].split("/", 1)[1]: b["GFLOP/s"]
                for b in json.loads(out)["benchmarks"] if b.get("aggregate_name") == "median"}
        peak = next(v for k, v in vals.items() if k.startswith("sgemm_peak"))
        print(f"round {r}: " + "  ".join(f"{k} {v:.1f} ({v / peak:.2f})" for k, v in vals.items()),
              flush=True)
        for k, v in vals.items():
            rows.setdefault(k, []).append((v, v / peak))
    print(f"{'row':45} GFLOP/s median (range)    / sgemm_peak median (range)")
    for k, l in rows.items():
        g = sorted(x for x, _ in l)
        q = sorted(y for _, y in l)
        print(f"{k:45} {statistics.median(g):6.1f} ({g[0]:.1f}-{g[-1]:.1f})"
              f"   {statistics.median(q):.2f} ({q[0]:.2f}-{q[-1]:.2f})")


if __name__ == "__main__":
    main()
