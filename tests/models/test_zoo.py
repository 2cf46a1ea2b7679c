#!/usr/bin/python3
"""Runs zoo models (tools/make_zoo.py) through `ferry run MODEL --test-data DIR` against PyTorch's
outputs and prints, per model, the max abs error over every test set and output. Fails on any
mismatch (assert_allclose semantics, --atol/--rtol) or on a model missing from the zoo.

    tests/models/test_zoo.py --ferry build/src/ferry --zoo build/models/zoo [--only a,b] [--skip c]
        [--providers cpu,reference]
"""
import argparse
import json
import os
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--zoo", required=True, help="folder written by tools/make_zoo.py")
    ap.add_argument("--only", default="", help="comma-separated model names (default: every model)")
    ap.add_argument("--skip", default="", help="comma-separated model names to leave out")
    ap.add_argument("--atol", default="1e-4")
    ap.add_argument("--rtol", default="1e-3")
    ap.add_argument("--providers", default="cpu,reference",
                    help="comma-separated `ferry run --provider` values, each run in turn")
    args = ap.parse_args()
    with open(os.path.join(args.zoo, "zoo.json")) as f:
        manifest = json.load(f)
    models = {m["name"]: m for m in manifest["models"]}
    only = [n for n in args.only.split(",") if n]
    skip = set(n for n in args.skip.split(",") if n)
    names = [n for n in (only or list(models)) if n not in skip]
    failed = 0
    providers = [p for p in args.providers.split(",") if p]
    print("%-16s %-10s %-8s %-12s %8s  %s" % ("model", "provider", "result", "max_abs", "seconds", "sets"))
    runs = 0
    for name, provider in [(n, p) for n in names for p in providers]:
        runs += 1
        if name not in models:
            print("%-16s %-10s %-8s missing from %s" % (name, provider, "FAIL", args.zoo))
            failed += 1
            continue
        d = os.path.join(args.zoo, name)
        t0 = time.time()
        p = subprocess.run([args.ferry, "run", os.path.join(d, "model.onnx"), "--test-data", d, "--atol",
                            args.atol, "--rtol", args.rtol, "--provider", provider, "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        dt = time.time() - t0
        try:
            j = json.loads(p.stdout)
        except ValueError:
            j = None
        if j is None or p.returncode not in (0, 1):
            print("%-16s %-10s %-8s exit %d: %s" % (name, provider, "FAIL", p.returncode, p.stderr.strip()[-400:]))
            failed += 1
            continue
        max_abs = max(o["max_abs"] for s in j["sets"] for o in s["outputs"])
        ok = p.returncode == 0 and j["ok"]
        failed += not ok
        print("%-16s %-10s %-8s %-12.3g %8.1f  %d" % (name, provider, "ok" if ok else "MISMATCH", max_abs, dt, len(j["sets"])))
        if not ok:
            for s in j["sets"]:
                for o in s["outputs"]:
                    if not o.get("ok", True):
                        print("    %s %s: %s" % (os.path.basename(s.get("set", "?")), o.get("name", "?"), json.dumps(o)))
    print("%d passed, %d failed" % (runs - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
