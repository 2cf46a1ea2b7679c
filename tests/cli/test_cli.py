#!/usr/bin/python3
"""Command-line behaviour of `ferry run` / `ferry inspect`: exit codes (DESIGN.md: 0 ok,
1 check failed, 2 usage, 3 invalid model or input, 4 unsupported), exactly one error line on
stderr naming what was wrong, and no output file written when a run fails.

Models are built here with Debian's onnx (1.12) so the test needs no network.
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from clilib import FAILURES, PASSED, check, expect_error, ferry  # noqa: E402


def save(model, path):
    onnx.save(model, path)
    return path


def add_model(work, dynamic=False):
    dims = ["batch", 3] if dynamic else [2, 3]
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "y"], ["sum"], name="add0"),
         helper.make_node("Identity", ["sum"], ["out/a:b"], name="id0")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("out/a:b", TensorProto.FLOAT, dims)])
    return save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), os.path.join(work, "add.onnx"))


def npy(work, name, arr):
    p = os.path.join(work, name)
    np.save(p, arr)
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    model = add_model(work)
    x = npy(work, "x.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    y = npy(work, "y.npy", np.ones((2, 3), dtype=np.float32))

    # A good run writes sanitized output names.
    out_dir = os.path.join(work, "out")
    rc, out, err = ferry(args, "run", model, "--input", "x=" + x, "--input", "y=" + y, "--output-dir", out_dir)
    check(rc == 0, "run ok (rc %d, %s)" % (rc, err.strip()))
    f = os.path.join(out_dir, "out_a_b.npy")
    check(os.path.exists(f), "output written as out_a_b.npy")
    if os.path.exists(f):
        check(np.array_equal(np.load(f), np.arange(6, dtype=np.float32).reshape(2, 3) + 1), "output values")
    # .pb inputs work too.
    xpb = os.path.join(work, "x.pb")
    with open(xpb, "wb") as fh:
        fh.write(numpy_helper.from_array(np.zeros((2, 3), np.float32), "x").SerializeToString())
    rc, out, err = ferry(args, "run", model, "--input", "x=" + xpb, "--input", "y=" + y, "--json")
    check(rc == 0 and '"outputs"' in out, "run with a .pb input and --json")

    # Bad model files.
    with open(model, "rb") as fh:
        data = fh.read()
    trunc = os.path.join(work, "truncated.onnx")
    with open(trunc, "wb") as fh:
        fh.write(data[: len(data) // 2])
    expect_error(args, "truncated model", 3, ["truncated.onnx"], "run", trunc)
    garbage = os.path.join(work, "garbage.onnx")
    with open(garbage, "wb") as fh:
        fh.write(np.random.RandomState(0).bytes(4096))
    expect_error(args, "random bytes as a model", 3, ["garbage.onnx"], "run", garbage)
    expect_error(args, "random bytes to inspect", 3, ["garbage.onnx"], "inspect", garbage)
    expect_error(args, "missing model file", 3, ["nope.onnx"], "run", os.path.join(work, "nope.onnx"))

    # A node reading a tensor nobody produces.
    g = helper.make_graph([helper.make_node("Identity", ["ghost"], ["y"], name="reader")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    dangling = save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), os.path.join(work, "dangling.onnx"))
    expect_error(args, "dangling tensor", 3, ["ghost", "reader"], "run", dangling, "--input", "x=" + x)

    # Unknown op, unknown domain.
    g = helper.make_graph([helper.make_node("FrobnicateX", ["x"], ["y"], name="frob")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    unknown = save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), os.path.join(work, "unknown_op.onnx"))
    expect_error(args, "unknown op", 4, ["FrobnicateX", "frob", "ai.onnx", "14"], "run", unknown)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="custom", domain="com.acme")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    custom = save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14), helper.make_opsetid("com.acme", 1)]),
                  os.path.join(work, "custom_domain.onnx"))
    expect_error(args, "unknown domain", 4, ["Relu", "com.acme", "custom"], "run", custom)

    # Inputs: missing, unknown, wrong dtype, wrong shape, unreadable .npy, bad --input syntax.
    expect_error(args, "missing input", 3, ["'y'"], "run", model, "--input", "x=" + x)
    expect_error(args, "unknown input", 3, ["'z'", "x, y"], "run", model, "--input", "z=" + x)
    xi = npy(work, "x_int.npy", np.zeros((2, 3), np.int32))
    expect_error(args, "wrong dtype", 3, ["'x'", "float32", "int32"], "run", model, "--input", "x=" + xi, "--input", "y=" + y)
    xs = npy(work, "x_shape.npy", np.zeros((3, 2), np.float32))
    expect_error(args, "wrong shape", 3, ["'x'", "[3,2]", "[2,3]"], "run", model, "--input", "x=" + xs, "--input", "y=" + y)
    bad_npy = os.path.join(work, "bad.npy")
    with open(bad_npy, "wb") as fh:
        fh.write(b"\x93NUMPY\x01\x00garbage")
    expect_error(args, "unreadable .npy", 3, ["bad.npy"], "run", model, "--input", "x=" + bad_npy, "--input", "y=" + y)
    trunc_npy = os.path.join(work, "trunc.npy")
    with open(x, "rb") as fh:
        d = fh.read()
    with open(trunc_npy, "wb") as fh:
        fh.write(d[:-8])
    expect_error(args, "truncated .npy", 3, ["trunc.npy"], "run", model, "--input", "x=" + trunc_npy, "--input", "y=" + y)
    expect_error(args, "missing input file", 3, ["nothere.npy"], "run", model, "--input", "x=" + os.path.join(work, "nothere.npy"), "--input", "y=" + y)
    expect_error(args, "bad --input syntax", 2, ["NAME=FILE"], "run", model, "--input", "xfile")

    # Usage errors.
    rc, _, _ = ferry(args)
    check(rc == 2, "no subcommand: exit 2 (got %d)" % rc)
    rc, _, _ = ferry(args, "run", model, "--no-such-flag")
    check(rc == 2, "unknown flag: exit 2 (got %d)" % rc)

    # Two outputs whose file names collide: an error, and nothing written.
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["a/b"]), helper.make_node("Identity", ["x"], ["a:b"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("a/b", TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("a:b", TensorProto.FLOAT, [2, 3])])
    collide = save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), os.path.join(work, "collide.onnx"))
    cdir = os.path.join(work, "collide_out")
    expect_error(args, "colliding output names", 3, ["a_b.npy"], "run", collide, "--input", "x=" + x, "--output-dir", cdir)
    check(not os.path.exists(cdir) or not os.listdir(cdir), "collision writes no file")

    # A failing run writes no output file.
    fdir = os.path.join(work, "fail_out")
    expect_error(args, "wrong shape writes nothing", 3, ["'x'"], "run", model, "--input", "x=" + xs, "--input", "y=" + y, "--output-dir", fdir)
    check(not os.path.exists(fdir) or not os.listdir(fdir), "failed run writes no file")

    # --test-data: mismatch gives exit 1.
    td = os.path.join(work, "case", "test_data_set_0")
    os.makedirs(td)
    for i, (n, a) in enumerate([("x", np.ones((2, 3), np.float32)), ("y", np.ones((2, 3), np.float32))]):
        with open(os.path.join(td, "input_%d.pb" % i), "wb") as fh:
            fh.write(numpy_helper.from_array(a, n).SerializeToString())
    with open(os.path.join(td, "output_0.pb"), "wb") as fh:
        fh.write(numpy_helper.from_array(np.full((2, 3), 2, np.float32), "out/a:b").SerializeToString())
    rc, out, err = ferry(args, "run", model, "--test-data", os.path.dirname(td))
    check(rc == 0, "--test-data match: exit 0 (got %d %s)" % (rc, err.strip()))
    with open(os.path.join(td, "output_0.pb"), "wb") as fh:
        fh.write(numpy_helper.from_array(np.full((2, 3), 2.5, np.float32), "out/a:b").SerializeToString())
    rc, out, err = ferry(args, "run", model, "--test-data", os.path.dirname(td))
    check(rc == 1 and "MISMATCH" in out, "--test-data mismatch: exit 1 (got %d)" % rc)

    # Dynamic batch: the same model runs batch 1 and batch 8.
    dyn = add_model(work, dynamic=True)
    for b in (1, 8):
        xb = npy(work, "xb%d.npy" % b, np.ones((b, 3), np.float32))
        rc, out, err = ferry(args, "run", dyn, "--input", "x=" + xb, "--input", "y=" + xb, "--json")
        check(rc == 0 and ("%d," % b) in out.replace(" ", "").replace("\n", ""), "dynamic batch %d runs" % b)

    # External data: resolved against the model's folder; a path leaving it is refused.
    ext_dir = os.path.join(work, "ext")
    os.makedirs(ext_dir)
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="addw")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                          [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.metadata_props.add(key="author", value="ferry-tests")
    onnx.save_model(m, os.path.join(ext_dir, "ext.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    rc, out, err = ferry(args, "run", os.path.join(ext_dir, "ext.onnx"), "--input", "x=" + y, "--output-dir", os.path.join(work, "ext_out"))
    check(rc == 0, "external data model runs (rc %d %s)" % (rc, err.strip()))
    if rc == 0:
        check(np.array_equal(np.load(os.path.join(work, "ext_out", "y.npy")), w + 1), "external data values")
    rc, out, err = ferry(args, "inspect", os.path.join(ext_dir, "ext.onnx"), "--json")
    check(rc == 0 and '"author": "ferry-tests"' in out, "inspect shows metadata")
    for init in m.graph.initializer:
        for kv in init.external_data:
            if kv.key == "location":
                kv.value = "../x.npy"
    evil = os.path.join(ext_dir, "evil.onnx")
    with open(evil, "wb") as fh:
        fh.write(m.SerializeToString())
    expect_error(args, "external data leaving the model folder", 3, ["../x.npy", "leaves"], "run", evil, "--input", "x=" + y)

    print("%d passed, %d failed" % (PASSED[0], len(FAILURES)))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
