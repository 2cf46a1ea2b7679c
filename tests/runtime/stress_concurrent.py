#!/usr/bin/env python3
"""Concurrent runs on shared sessions: the zoo models and the control-flow model through
ferry_stress (tests/runtime/stress_main.cc), every output compared bit for bit with a serial run.

    /usr/bin/python3 tests/runtime/stress_concurrent.py --stress build/tests/ferry_stress \
        --zoo build/models/zoo --cache build/models [--threads 1] [--callers 8] [--runs 40]

The zoo comes from tools/make_zoo.py (the ctest `zoo` fixture); the control-flow model (a
scripted Loop / If export) from tests/models/sweep.py's export, given two input sets here
(batch 3 with 4 steps, batch 5 with 2) in the test-data layout. Run by the release build's
ctest and, with one thread per run, by the ThreadSanitizer and AddressSanitizer builds.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZOO_MODELS = ["resnet18_op13", "mobilenet_v2", "bert_encoder", "gru_encoder"]


def control_flow_dir(cache):
    """The control-flow export with two input sets in the test-data layout (cached)."""
    sweep = os.path.join(cache, "sweep")
    src = os.path.join(sweep, "control_flow")
    if not os.path.exists(os.path.join(src, "model.onnx")):
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "models", "sweep.py"),
                        "export", "--out", sweep, "--only", "control_flow"], check=True)
    final = os.path.join(cache, "stress", "control_flow")
    if os.path.exists(os.path.join(final, "test_data_set_1", "input_1.pb")):
        return final
    import numpy as np
    from onnx import numpy_helper
    os.makedirs(os.path.dirname(final), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".control_flow.", dir=os.path.dirname(final))
    shutil.copy(os.path.join(src, "model.onnx"), os.path.join(tmp, "model.onnx"))
    rng = np.random.RandomState(3)
    for k, (batch, steps) in enumerate([(3, 4), (5, 2)]):
        d = os.path.join(tmp, "test_data_set_%d" % k)
        os.makedirs(d)
        x = rng.uniform(-1.5, 1.5, (batch, 16)).astype(np.float32)
        for i, (a, name) in enumerate([(x, "x"), (np.array(steps, np.int64), "steps")]):
            with open(os.path.join(d, "input_%d.pb" % i), "wb") as f:
                f.write(numpy_helper.from_array(a, name).SerializeToString())
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    return final


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stress", required=True, help="the ferry_stress binary")
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--cache", required=True, help="the model cache (build/models)")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--callers", default="8")
    ap.add_argument("--runs", default="40")
    ap.add_argument("--models", default=",".join(ZOO_MODELS + ["control_flow"]))
    args = ap.parse_args()
    dirs = []
    for name in args.models.split(","):
        dirs.append(control_flow_dir(args.cache) if name == "control_flow"
                    else os.path.join(args.zoo, name))
    for d in dirs:
        if not os.path.exists(os.path.join(d, "model.onnx")):
            print("stress: missing %s (run the zoo fixture first)" % d, file=sys.stderr)
            return 2
    cmd = [args.stress, "--threads", args.threads, "--callers", args.callers, "--runs", args.runs]
    print(" ".join(cmd + dirs), flush=True)
    return subprocess.run(cmd + dirs).returncode


if __name__ == "__main__":
    sys.exit(main())
