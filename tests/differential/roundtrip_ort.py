"""Import -> export through Ferry's IR keeps every conformance model loadable by ONNX Runtime
and computing the same outputs. Runs with the project venv's python (onnxruntime, onnx).

For each case: ORT runs the original model and the round-tripped one on test_data_set_0's
inputs; outputs must be identical (bitwise, NaN == NaN). Cases ORT cannot load in their
original form are skipped (counted). Fails if any round-tripped model fails to load where the
original loaded, or computes different outputs.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper
import onnxruntime as ort

ROOT = "/usr/share/libonnx-testdata/data"
SUITES = ["node", "pytorch-converted", "pytorch-operator", "simple"]


def load_inputs(case_dir, sess):
    d = os.path.join(case_dir, "test_data_set_0")
    feeds = {}
    names = [i.name for i in sess.get_inputs()]
    k = 0
    while os.path.exists(os.path.join(d, "input_%d.pb" % k)):
        t = onnx.TensorProto()
        with open(os.path.join(d, "input_%d.pb" % k), "rb") as f:
            t.ParseFromString(f.read())
        if k < len(names):
            feeds[t.name if t.name in names else names[k]] = numpy_helper.to_array(t)
        k += 1
    return feeds


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f":
        return np.array_equal(a, b, equal_nan=True)
    return np.array_equal(a, b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--roundtrip", required=True)
    args = ap.parse_args()
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.intra_op_num_threads = 1
    counts = {"compared": 0, "skipped_orig_fails": 0, "no_inputs": 0}
    failures = []
    tmp = tempfile.mkdtemp()
    for suite in SUITES:
        for case in sorted(os.listdir(os.path.join(ROOT, suite))):
            case_dir = os.path.join(ROOT, suite, case)
            src = os.path.join(case_dir, "model.onnx")
            dst = os.path.join(tmp, "rt.onnx")
            p = subprocess.run([args.roundtrip, src, dst], stderr=subprocess.PIPE, text=True)
            if p.returncode != 0:
                failures.append("%s/%s: roundtrip failed: %s" % (suite, case, p.stderr.strip()))
                continue
            try:
                s1 = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
                feeds = load_inputs(case_dir, s1)
                o1 = s1.run(None, feeds)
            except Exception:
                counts["skipped_orig_fails"] += 1
                continue
            try:
                s2 = ort.InferenceSession(dst, so, providers=["CPUExecutionProvider"])
                o2 = s2.run(None, feeds)
            except Exception as e:
                failures.append("%s/%s: ORT fails on the round-tripped model: %s" % (suite, case, str(e).splitlines()[0][:200]))
                continue
            if "random" in case or "bernoulli" in case or "dropout" in case:
                counts["compared"] += 1  # nondeterministic: loading and running is the check
                continue
            if len(o1) != len(o2) or not all(same(a, b) for a, b in zip(o1, o2)):
                failures.append("%s/%s: outputs differ after round trip" % (suite, case))
            counts["compared"] += 1
    for f in failures:
        print("FAIL", f)
    print("roundtrip: %d models compared under ONNX Runtime, %d skipped (ORT cannot run the original)"
          % (counts["compared"], counts["skipped_orig_fails"]))
    print("%d passed, %d failed" % (counts["compared"] - len(failures), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
