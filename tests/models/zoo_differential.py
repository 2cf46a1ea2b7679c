#!/usr/bin/env python3
"""Differential test on the model zoo: every zoo model runs through ONNX Runtime and through Ferry
(`ferry run --input NAME=FILE --output-dir`, with the cpu and the reference provider) on each
test data set, and both are compared with
PyTorch's outputs. Prints per model and output the max abs error of each; fails only when Ferry
is out of tolerance (assert_allclose with --atol/--rtol), never because of ONNX Runtime.

Run with the project venv's python (onnxruntime, onnx, numpy):

    .venv/bin/python tests/models/zoo_differential.py --ferry build/src/ferry --zoo build/models/zoo
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper
import onnxruntime as ort


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def npy_name(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy"


def max_abs(got, want):
    if got.shape != want.shape:
        return float("inf")
    if got.size == 0:
        return 0.0
    return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--providers", default="cpu,reference", help="`ferry run --provider` values")
    args = ap.parse_args()
    with open(os.path.join(args.zoo, "zoo.json")) as f:
        models = json.load(f)["models"]
    only = set(n for n in args.only.split(",") if n)
    providers = [p for p in args.providers.split(",") if p]
    failed = 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="ferry-zoo-diff-") as work:
        for m in models:
            if only and m["name"] not in only:
                continue
            path = os.path.join(args.zoo, m["path"])
            so = ort.SessionOptions()
            so.intra_op_num_threads = 1
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            in_names = [i["name"] for i in m["inputs"]]
            out_names = [o["name"] for o in m["outputs"]]
            ferry_err = {(n, pv): 0.0 for n in out_names for pv in providers}
            ort_err = {n: 0.0 for n in out_names}
            scale = {n: 0.0 for n in out_names}
            ok = {n: True for n in out_names}
            problem = ""
            for sd in sorted(glob.glob(os.path.join(args.zoo, m["name"], "test_data_set_*"))):
                in_files = [os.path.join(sd, "input_%d.pb" % i) for i in range(len(in_names))]
                want = [read_pb(os.path.join(sd, "output_%d.pb" % i)) for i in range(len(out_names))]
                feeds = {n: read_pb(f) for n, f in zip(in_names, in_files)}
                got_ort = sess.run(out_names, feeds)
                for n, w, go in zip(out_names, want, got_ort):
                    ort_err[n] = max(ort_err[n], max_abs(go, w))
                    scale[n] = max(scale[n], float(np.max(np.abs(w))) if w.size else 0.0)
                for pv in providers:
                    od = os.path.join(work, m["name"], pv, os.path.basename(sd))
                    cmd = [args.ferry, "run", path, "--provider", pv, "--output-dir", od]
                    for n, f in zip(in_names, in_files):
                        cmd += ["--input", "%s=%s" % (n, f)]
                    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                    if p.returncode != 0:
                        problem = "ferry (%s) exit %d: %s" % (pv, p.returncode, p.stderr.strip()[-300:])
                        for n in out_names:
                            ok[n] = False
                            ferry_err[n, pv] = float("inf")
                        continue
                    for n, w in zip(out_names, want):
                        gf = np.load(os.path.join(od, npy_name(n)))
                        ferry_err[n, pv] = max(ferry_err[n, pv], max_abs(gf, w))
                        if gf.shape != w.shape or not np.allclose(gf, w, rtol=args.rtol, atol=args.atol,
                                                                  equal_nan=True):
                            ok[n] = False
            for n in out_names:
                failed += not ok[n]
                rows.append((m["name"], n, scale[n], ort_err[n]) + tuple(ferry_err[n, pv] for pv in providers)
                            + ("ok" if ok[n] else "FAIL",))
            if problem:
                print("%s: %s" % (m["name"], problem))
    print(("%-16s %-10s %10s %12s" + " %12s" * len(providers) + " %6s") %
          (("model", "output", "max|torch|", "ort_err") + tuple("ferry_" + pv[:3] + "_err" for pv in providers)
           + ("",)))
    for r in rows:
        print(("%-16s %-10s %10.3g %12.3g" + " %12.3g" * len(providers) + " %6s") % r)
    print("%d outputs ok, %d out of tolerance (atol %g, rtol %g)" % (len(rows) - failed, failed, args.atol,
                                                                   args.rtol))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
