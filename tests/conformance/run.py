#!/usr/bin/env python3
"""ONNX conformance: runs every case of libonnx-testdata through `ferry run MODEL --test-data CASE`.

Fails on a regression (a case not in the expected-failures list fails) and on an expected failure
that now passes, so the list only shrinks. Prints pass counts per suite. Optionally also runs the
newer node tests shipped in the `onnx` package from PyPI (report only, no bar).

  run.py --ferry build/src/ferry [--filter REGEX] [--update] [--extra-node-dir DIR] [--jobs N]
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys

ROOT = "/usr/share/libonnx-testdata/data"
SUITES = ["node", "pytorch-converted", "pytorch-operator", "simple"]
HERE = os.path.dirname(os.path.abspath(__file__))
XFAIL = os.path.join(HERE, "expected_failures.txt")


def load_xfail(path):
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            case, _, reason = line.partition(" ")
            out[case] = reason.strip().lstrip("#").strip()
    return out


def run_case(ferry, case_dir, timeout):
    cmd = [ferry, "run", os.path.join(case_dir, "model.onnx"), "--test-data", case_dir, "--threads", "1"]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, text=True,
                           errors="replace")
    except subprocess.TimeoutExpired:
        return False, "hang guard: no result after %ds" % timeout
    if p.returncode == 0:
        return True, ""
    if p.returncode == 1:
        bad = [l for l in p.stdout.splitlines() if "MISMATCH" in l]
        return False, "rc=1 output mismatch: " + (bad[0] if bad else p.stdout.strip()[-200:])
    err = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
    return False, "rc=%d %s" % (p.returncode, err)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--filter", default="")
    ap.add_argument("--update", action="store_true", help="rewrite the expected-failures list")
    ap.add_argument("--extra-node-dir", default="", help="newer onnx node tests (report only)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()

    xfail = load_xfail(XFAIL)
    cases = []
    for suite in SUITES:
        d = os.path.join(ROOT, suite)
        for c in sorted(os.listdir(d)):
            name = suite + "/" + c
            if args.filter and not re.search(args.filter, name):
                continue
            cases.append((suite, name, os.path.join(d, c)))
    if args.extra_node_dir and os.path.isdir(args.extra_node_dir):
        for c in sorted(os.listdir(args.extra_node_dir)):
            name = "onnx-pypi-node/" + c
            if args.filter and not re.search(args.filter, name):
                continue
            if os.path.exists(os.path.join(args.extra_node_dir, c, "model.onnx")):
                cases.append(("onnx-pypi-node", name, os.path.join(args.extra_node_dir, c)))

    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as ex:
        futs = {ex.submit(run_case, args.ferry, d, args.timeout): (s, n) for s, n, d in cases}
        for f in concurrent.futures.as_completed(futs):
            results[futs[f]] = f.result()

    counts = {}
    regressions, fixed = [], []
    for (suite, name), (ok, why) in sorted(results.items()):
        c = counts.setdefault(suite, [0, 0])
        c[1] += 1
        if ok:
            c[0] += 1
        if suite == "onnx-pypi-node":
            continue
        if ok and name in xfail:
            fixed.append(name)
        if not ok and name not in xfail:
            regressions.append((name, why))
        if args.verbose and not ok:
            print("FAIL %s: %s" % (name, why))

    for suite in SUITES + ["onnx-pypi-node"]:
        if suite in counts:
            p, t = counts[suite]
            bar = " (report only)" if suite == "onnx-pypi-node" else ""
            print("conformance %-18s %4d / %4d passed%s" % (suite, p, t, bar))
    others = [counts[s] for s in SUITES[1:] if s in counts]
    if others:
        print("conformance %-18s %4d / %4d passed" % ("other three", sum(p for p, _ in others), sum(t for _, t in others)))

    if args.update:
        keep = {n: r for n, r in xfail.items() if args.filter and not re.search(args.filter, n)}
        for (suite, name), (ok, why) in results.items():
            if suite != "onnx-pypi-node" and not ok:
                keep[name] = why.replace("\n", " ")[:300]
        with open(XFAIL, "w") as f:
            f.write("# ONNX conformance cases Ferry does not pass yet: `suite/case reason`.\n")
            f.write("# The conformance test fails when a listed case passes: remove its line then.\n")
            for n in sorted(keep):
                f.write("%s %s\n" % (n, keep[n]))
        print("wrote %d expected failures to %s" % (len(keep), XFAIL))
        return 0

    for n, why in regressions:
        print("REGRESSION %s: %s" % (n, why))
    for n in fixed:
        print("NOW PASSES (remove from expected_failures.txt) %s" % n)
    if regressions or fixed:
        print("conformance: %d regressions, %d expected failures now passing" % (len(regressions), len(fixed)))
        return 1
    print("conformance: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
