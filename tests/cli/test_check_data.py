#!/usr/bin/python3
"""The equivalence check of `ferry optimize`, `convert` and `quantize` on models that cannot run
on all-1 dims: --shape NAME=DIMS and --check-data DIR, the dims the graph tells (a Conv window
through a reflect Pad), the error that names input, dims and node, and paddle2onnx's -1 dims
(dynamic, as ONNX Runtime reads them: no SIGSEGV in the check, `ferry run` takes any batch).

Models are built here with Debian's onnx (1.12).
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from clilib import check, expect_error, ferry, summary  # noqa: E402


def save(g, path, opset=13):
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


def sevens(work):
    """x [1, ?] -> Reshape [-1, 7] -> Relu: only multiples of 7 run; the -1 hides it."""
    shape = numpy_helper.from_array(np.array([-1, 7], np.int64), "shape")
    g = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["xi"], name="id"),
         helper.make_node("Reshape", ["xi", "shape"], ["r"], name="reshape7"),
         helper.make_node("Relu", ["r"], ["y"], name="relu")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, None])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 7])], [shape])
    return save(g, os.path.join(work, "sevens.onnx"))


def stft(work):
    """samples [1, ?] -> reflect Pad 16 -> Unsqueeze -> Conv(kernel 64, stride 32) -> Relu:
    the window needs 64 padded samples: 32."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(np.array([0, 16, 0, 16], np.int64), "pads"),
             numpy_helper.from_array(np.array([1], np.int64), "axes"),
             numpy_helper.from_array(rng.standard_normal((4, 1, 64)).astype(np.float32), "w")]
    g = helper.make_graph(
        [helper.make_node("Pad", ["x", "pads"], ["p"], name="pad", mode="reflect"),
         helper.make_node("Unsqueeze", ["p", "axes"], ["u"], name="unsq"),
         helper.make_node("Conv", ["u", "w"], ["c"], name="stft", kernel_shape=[64], strides=[32]),
         helper.make_node("Relu", ["c"], ["y"], name="relu")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "samples"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return save(g, os.path.join(work, "stft.onnx"))


def paddle(work):
    """paddle2onnx's habit: x float32[-1, 3, ?, ?] (dim_value -1, dim_param "?")."""
    rng = np.random.default_rng(1)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "?", "?"])
    x.type.tensor_type.shape.dim[0].dim_value = -1
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    y.type.tensor_type.shape.dim[0].dim_value = -1
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")]
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3]),
         helper.make_node("MaxPool", ["c"], ["m"], name="pool", kernel_shape=[2, 2]),
         helper.make_node("GlobalAveragePool", ["m"], ["g"], name="gap"),
         helper.make_node("Flatten", ["g"], ["y"], name="flat")],
        "g", [x], [y], inits)
    return save(g, os.path.join(work, "paddle.onnx"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    W = lambda n: os.path.join(args.work, n)  # noqa: E731

    m = sevens(args.work)
    expect_error(args, "optimize: the seeded check cannot run the model", 3,
                 ["seeded input set 0", "x float32[1,1] for float32[1,?]", "Reshape 'reshape7'",
                  "--shape NAME=DIMS", "--check-data DIR"], "optimize", m, "-o", W("o1.onnx"))
    check(not os.path.exists(W("o1.onnx")), "optimize: nothing written when the check cannot run")
    rc, out, err = ferry(args, "optimize", m, "-o", W("o2.onnx"), "--shape", "x=1x14", "--json")
    j = json.loads(out) if rc == 0 else {}
    check(rc == 0 and j["check"]["shapes"] == {"x": [1, 14]} and j["check"]["ok"],
          "optimize --shape x=1x14 runs the check on those dims (%r)" % err.strip()[:300])
    data = W("data")
    os.makedirs(data)
    np.save(os.path.join(data, "x.npy"), np.random.default_rng(2).standard_normal((3, 1, 28)).astype(np.float32))
    rc, out, err = ferry(args, "optimize", m, "-o", W("o3.onnx"), "--check-data", data)
    check(rc == 0 and "check: 3 input set(s) from " + data in out,
          "optimize --check-data runs every set of the folder (%r)" % (out + err)[-300:])
    expect_error(args, "optimize --shape of an unknown input", 2, ["'nope'", "x"],
                 "optimize", m, "-o", W("o4.onnx"), "--shape", "nope=1x7")
    expect_error(args, "optimize --check-data with --check 0", 2, ["--check-data", "--check 0"],
                 "optimize", m, "-o", W("o4.onnx"), "--check-data", data, "--check", "0")
    expect_error(args, "optimize --check-data of a missing folder", 3, ["--check-data", "nodir"],
                 "optimize", m, "-o", W("o4.onnx"), "--check-data", W("nodir"))
    rc, out, err = ferry(args, "convert", m, "-o", W("c1.onnx"), "--fp16", "--check-data", data, "--json")
    j = json.loads(out) if rc == 0 else {}
    check(rc == 0 and j["check"]["data"] == data and j["check"]["inputs"] == 3,
          "convert --fp16 --check-data (%r)" % err.strip()[:300])
    rc, out, err = ferry(args, "convert", m, "-o", W("c2.onnx"), "--opset", "14", "--shape", "x=1x7")
    check(rc == 0, "convert --opset --shape (%r)" % err.strip()[:300])

    cls_model = stft(args.work)
    rc, out, err = ferry(args, "optimize", cls_model, "-o", W("s1.onnx"))
    check(rc == 0 and "seeded dims: x axis 1 ('samples') = 32" in out and "Conv 'stft'" in out,
          "optimize picks the Conv window's minimum through the reflect Pad (%r)" % (out + err)[-400:])

    rc, out, err = ferry(args, "quantize", cls_model, "-o", W("q1.onnx"), "--mode", "dynamic",
                         "--check", "2", "--json")
    j = json.loads(out) if rc == 0 else {}
    check(rc == 0 and j.get("check", {}).get("inputs") == 2 and j["check"]["shapes"]["x"] == [1, 32],
          "quantize --check 2 with the graph's dims (%r)" % err.strip()[:300])
    samples = W("samples")
    os.makedirs(samples)
    np.save(os.path.join(samples, "x.npy"), np.random.default_rng(3).standard_normal((1, 200)).astype(np.float32))
    rc, out, err = ferry(args, "quantize", cls_model, "-o", W("q2.onnx"), "--mode", "dynamic",
                         "--check-data", samples)
    check(rc == 0 and "check on 1 input set(s) from " + samples in out,
          "quantize --check-data (%r)" % (out + err)[-300:])
    rc, out, err = ferry(args, "quantize", cls_model, "-o", W("q3.onnx"), "--mode", "dynamic", "--json")
    check(rc == 0 and json.loads(out)["check"] is None, "quantize: no check by default")
    expect_error(args, "quantize --shape without --check", 2, ["--shape", "--check N"],
                 "quantize", cls_model, "-o", W("q4.onnx"), "--mode", "dynamic", "--shape", "x=1x64")

    p = paddle(args.work)
    rc, out, err = ferry(args, "inspect", p)
    check(rc == 0 and "float32[?,3,?,?]" in out, "inspect: a -1 dim is dynamic (%r)" % out[-300:])
    rc, out, err = ferry(args, "optimize", p, "-o", W("p1.onnx"))
    check(rc == 0, "optimize of a model with -1 dims: no crash, exit 0 (rc %d, %r)" % (rc, err.strip()[:300]))
    check("x axis 2 = 4" in out and "x axis 3 = 4" in out,
          "the \"?\" dims are separate dims, each sized for the Conv and the pool (%r)" % out[-400:])
    batch = W("batch4.npy")
    np.save(batch, np.random.default_rng(4).standard_normal((4, 3, 16, 20)).astype(np.float32))
    rc, out, err = ferry(args, "run", p, "--input", "x=" + batch, "--json")
    j = json.loads(out) if rc == 0 else {}
    check(rc == 0 and j["outputs"][0]["shape"] == [4, 4], "run takes a batch of 4 for a -1 dim (%r)" % err.strip()[:300])
    rc, out, err = ferry(args, "bench", p, "--runs", "2", "--shape", "x=2x3x8x8", "--json")
    check(rc == 0, "bench of a model with -1 dims (%r)" % err.strip()[:300])
    sys.exit(summary())


if __name__ == "__main__":
    main()
