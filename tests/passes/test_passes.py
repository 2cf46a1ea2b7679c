#!/usr/bin/python3
"""Each graph pass of `ferry optimize`: a structure test (the rewritten graph has the expected
ops) and a numeric-equivalence test (original and optimized model give the same outputs on
seeded inputs, computed with `ferry run` and compared here with numpy, independently of
optimize's own --check). Models are built with Debian's onnx helper API.

    tests/passes/test_passes.py --ferry build/src/ferry --work build/tests/passes_work
"""
import argparse
import collections
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from clilib import FAILURES, check  # noqa: E402

RNG = np.random.default_rng(7)


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="test")
    m.ir_version = 7
    return m


def fin(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def ops(path):
    return collections.Counter(n.op_type for n in onnx.load(path).graph.node)


class Ctx:
    def __init__(self, ferry, work):
        self.ferry, self.work = ferry, work

    def optimize(self, m, name, *flags, expect_rc=0):
        src = os.path.join(self.work, name + ".onnx")
        dst = os.path.join(self.work, name + ".opt.onnx")
        onnx.save(m, src)
        if os.path.exists(dst):
            os.remove(dst)
        r = subprocess.run([self.ferry, "optimize", src, "-o", dst, "--json", *flags], capture_output=True, text=True)
        check(r.returncode == expect_rc, f"{name}: optimize exit {r.returncode} (expected {expect_rc}) {r.stderr.strip()}")
        return src, dst, (json.loads(r.stdout) if r.returncode == 0 else None), r

    def run(self, path, feeds, tag):
        d = os.path.join(self.work, tag)
        os.makedirs(d, exist_ok=True)
        args = [self.ferry, "run", path, "--output-dir", d]
        for k, v in feeds.items():
            f = os.path.join(d, "in_" + k + ".npy")
            np.save(f, v)
            args += ["--input", f"{k}={f}"]
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode != 0:
            return None, r.stderr
        outs = {}
        for o in onnx.load(path).graph.output:
            outs[o.name] = np.load(os.path.join(d, o.name + ".npy"))
        return outs, ""

    def equivalent(self, name, src, dst, feeds_list, rtol=1e-5, atol=1e-6):
        for i, feeds in enumerate(feeds_list):
            a, ea = self.run(src, feeds, name + f"_ref{i}")
            b, eb = self.run(dst, feeds, name + f"_opt{i}")
            if a is None or b is None:
                check(False, f"{name}: both models run ({ea or eb})")
                return
            for k in a:
                ok = a[k].shape == b[k].shape and np.allclose(b[k], a[k], rtol=rtol, atol=atol)
                err = float(np.max(np.abs(a[k].astype(np.float64) - b[k]))) if a[k].shape == b[k].shape else -1
                check(ok, f"{name}: output {k} equal on input set {i} (max abs {err:.2e})")


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_fuse_batchnorm(c):
    # Conv -> BatchNormalization, non-trivial statistics.
    w, b = randn(8, 3, 3, 3), randn(8)
    scale, bias, mean, var = randn(8), randn(8), randn(8), (RNG.random(8) + 0.5).astype(np.float32)
    m = model([helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
               helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["y"], name="bn", epsilon=1e-3)],
              [fin("x", ["N", 3, 10, 10])], [fin("y", None)],
              [const("w", w), const("b", b), const("s", scale), const("bb", bias), const("m", mean), const("v", var)])
    src, dst, j, _ = c.optimize(m, "conv_bn", "--passes", "fuse_batchnorm,eliminate_dead")
    check(ops(dst) == {"Conv": 1}, f"conv_bn: only a Conv left ({dict(ops(dst))})")
    # Folding rescales the weights, so the Conv accumulates differently rounded products: the
    # issue's bar for BN folding is agreement within 1e-5.
    c.equivalent("conv_bn", src, dst, [{"x": randn(2, 3, 10, 10)}, {"x": randn(1, 3, 10, 10)}], atol=1e-5)
    # Gemm (transB=1, with C and beta) -> BatchNormalization.
    wg, cg = randn(6, 5), randn(6)
    m = model([helper.make_node("Gemm", ["x", "w", "c"], ["g"], name="fc", transB=1, beta=0.5, alpha=1.5),
               helper.make_node("BatchNormalization", ["g", "s", "bb", "m", "v"], ["y"], name="bn")],
              [fin("x", [4, 5])], [fin("y", [4, 6])],
              [const("w", wg), const("c", cg), const("s", randn(6)), const("bb", randn(6)), const("m", randn(6)),
               const("v", (RNG.random(6) + 0.5).astype(np.float32))])
    src, dst, j, _ = c.optimize(m, "gemm_bn", "--passes", "fuse_batchnorm,eliminate_dead")
    check(ops(dst) == {"Gemm": 1}, f"gemm_bn: only a Gemm left ({dict(ops(dst))})")
    c.equivalent("gemm_bn", src, dst, [{"x": randn(4, 5)}], atol=1e-5)
    # ConvTranspose (groups) -> BatchNormalization.
    m = model([helper.make_node("ConvTranspose", ["x", "w"], ["c"], name="deconv", group=2, strides=[2, 2]),
               helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["y"], name="bn")],
              [fin("x", [1, 4, 5, 5])], [fin("y", None)],
              [const("w", randn(4, 3, 3, 3)), const("s", randn(6)), const("bb", randn(6)), const("m", randn(6)),
               const("v", (RNG.random(6) + 0.5).astype(np.float32))])
    src, dst, j, _ = c.optimize(m, "deconv_bn", "--passes", "fuse_batchnorm,eliminate_dead")
    check(ops(dst) == {"ConvTranspose": 1}, f"deconv_bn: only a ConvTranspose left ({dict(ops(dst))})")
    c.equivalent("deconv_bn", src, dst, [{"x": randn(1, 4, 5, 5)}], atol=1e-5)
    # Not folded: the Conv output is read twice.
    m = model([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
               helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["y"], name="bn"),
               helper.make_node("Relu", ["c"], ["z"])],
              [fin("x", [1, 3, 6, 6])], [fin("y", None), fin("z", None)],
              [const("w", w), const("s", scale), const("bb", bias), const("m", mean), const("v", var)])
    src, dst, j, _ = c.optimize(m, "conv_bn_shared", "--passes", "fuse_batchnorm")
    check(ops(dst)["BatchNormalization"] == 1, "conv_bn_shared: BN kept when the Conv output has another reader")


def test_noop_and_dead(c):
    x = fin("x", [2, 3, 4])
    nodes = [helper.make_node("Identity", ["x"], ["i1"]),
             helper.make_node("Dropout", ["i1"], ["d1"], ratio=0.3),
             helper.make_node("Cast", ["d1"], ["c1"], to=TensorProto.FLOAT),
             helper.make_node("Reshape", ["c1", "shape_same"], ["r1"]),
             helper.make_node("Add", ["r1", "zero"], ["a1"]),
             helper.make_node("Mul", ["a1", "one"], ["m1"]),
             helper.make_node("Transpose", ["m1"], ["t1"], perm=[0, 1, 2]),
             helper.make_node("Transpose", ["t1"], ["t2"], perm=[2, 0, 1]),
             helper.make_node("Transpose", ["t2"], ["t3"], perm=[1, 2, 0]),
             helper.make_node("Relu", ["t3"], ["dead"]),  # unread
             helper.make_node("Sigmoid", ["t3"], ["y"])]
    m = model(nodes, [x], [fin("y", [2, 3, 4])],
              [const("shape_same", np.array([2, 3, 4], np.int64)), const("zero", np.zeros([1], np.float32)),
               const("one", np.ones([4], np.float32)), const("unused", randn(100))])
    src, dst, j, _ = c.optimize(m, "noop", "--level", "basic")
    check(ops(dst) == {"Sigmoid": 1}, f"noop: only Sigmoid left ({dict(ops(dst))})")
    check(len(onnx.load(dst).graph.initializer) == 0, "noop: unused initializers removed")
    c.equivalent("noop", src, dst, [{"x": randn(2, 3, 4)}])
    # Add of a broadcasting zero that grows the shape is not a no-op.
    m = model([helper.make_node("Add", ["x", "zeros"], ["y"])], [fin("x", [3])], [fin("y", [2, 3])],
              [const("zeros", np.zeros([2, 3], np.float32))])
    src, dst, j, _ = c.optimize(m, "broadcast_add", "--level", "basic", "--skip", "fold_constants")
    check(ops(dst) == {"Add": 1}, "broadcast_add: an Add that broadcasts is kept")
    # Identity straight to a graph output: the producer takes the output's name.
    m = model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Identity", ["r"], ["y"])],
              [fin("x", [3])], [fin("y", [3])])
    src, dst, j, _ = c.optimize(m, "identity_out", "--level", "basic")
    g = onnx.load(dst).graph
    check([n.op_type for n in g.node] == ["Relu"] and g.node[0].output[0] == "y" and g.output[0].name == "y",
          "identity_out: Relu now writes the graph output 'y'")
    c.equivalent("identity_out", src, dst, [{"x": randn(3)}])
    # Identity from a graph input to a graph output must stay (nothing to rename).
    m = model([helper.make_node("Identity", ["x"], ["y"])], [fin("x", [3])], [fin("y", [3])])
    src, dst, j, _ = c.optimize(m, "identity_io", "--level", "basic")
    check(ops(dst) == {"Identity": 1}, "identity_io: input-to-output Identity kept")
    # Dropout in training mode is not removed.
    m = model([helper.make_node("Dropout", ["x", "ratio", "train"], ["y"], seed=1)], [fin("x", [3])], [fin("y", [3])],
              [const("ratio", np.array(0.5, np.float32)), const("train", np.array(True))])
    src, dst, j, _ = c.optimize(m, "dropout_train", "--level", "basic", "--check", "0")
    check(ops(dst) == {"Dropout": 1}, "dropout_train: training-mode Dropout kept")


def test_unsqueeze_squeeze(c):
    m = model([helper.make_node("Unsqueeze", ["x", "ax"], ["u"]), helper.make_node("Relu", ["u"], ["r"]),
               helper.make_node("Unsqueeze", ["x", "ax"], ["u2"]), helper.make_node("Squeeze", ["u2", "ax"], ["s"]),
               helper.make_node("Add", ["s", "x"], ["y"])],
              [fin("x", ["N", 3])], [fin("y", None), fin("r", None)], [const("ax", np.array([1], np.int64))])
    src, dst, j, _ = c.optimize(m, "unsq_sq", "--passes", "merge_reshapes,eliminate_dead")
    check(ops(dst) == {"Unsqueeze": 1, "Relu": 1, "Add": 1}, f"unsq_sq: Unsqueeze->Squeeze cancelled ({dict(ops(dst))})")
    c.equivalent("unsq_sq", src, dst, [{"x": randn(2, 3)}])


def test_fold_constants(c):
    nodes = [helper.make_node("Constant", [], ["k"], value=const("kv", randn(3))),
             helper.make_node("Exp", ["k"], ["ek"]),
             helper.make_node("Shape", ["x"], ["sx"]),
             helper.make_node("Gather", ["sx", "idx"], ["d0"], axis=0),
             helper.make_node("Add", ["x", "ek"], ["y"]),
             helper.make_node("ConstantOfShape", ["big_shape"], ["big"], value=const("v", np.array([1.0], np.float32))),
             helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0),
             helper.make_node("RandomNormal", [], ["rn"], shape=[3]),
             helper.make_node("Add", ["y", "rn"], ["y2"])]
    m = model(nodes, [fin("x", [2, 3])],
              [fin("y", [2, 3]), helper.make_tensor_value_info("d0", TensorProto.INT64, []), fin("s", []),
               fin("y2", [2, 3])],
              [const("idx", np.array(0, np.int64)), const("big_shape", np.array([1024, 1024], np.int64))])
    src, dst, j, _ = c.optimize(m, "fold", "--passes", "fold_constants,eliminate_dead", "--check", "0")
    o = ops(dst)
    check(o["Constant"] == 0 and o["Exp"] == 0 and o["Shape"] == 0 and o["Gather"] == 0,
          f"fold: Constant/Exp/Shape/Gather folded ({dict(o)})")
    check(o["ConstantOfShape"] == 1, "fold: a 4 MiB ConstantOfShape is not materialised")
    check(o["RandomNormal"] == 1, "fold: RandomNormal never folded")
    # Equivalence on the deterministic outputs only.
    m2 = onnx.load(dst)
    check(any(i.name == "d0" for i in m2.graph.initializer), "fold: static Shape[0] became the initializer 'd0'")


def test_matmul_gemm_pad_affine(c):
    m = model([helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", ["bias", "mm"], ["y"])],
              [fin("x", [4, 5])], [fin("y", [4, 6])], [const("w", randn(5, 6)), const("bias", randn(6))])
    src, dst, j, _ = c.optimize(m, "matmul_add", "--passes", "matmul_add_to_gemm")
    check(ops(dst) == {"Gemm": 1}, f"matmul_add: one Gemm ({dict(ops(dst))})")
    c.equivalent("matmul_add", src, dst, [{"x": randn(4, 5)}])
    # 3-D input: stays MatMul + Add.
    m = model([helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", ["mm", "bias"], ["y"])],
              [fin("x", [2, 4, 5])], [fin("y", None)], [const("w", randn(5, 6)), const("bias", randn(6))])
    src, dst, j, _ = c.optimize(m, "matmul_add_3d", "--passes", "matmul_add_to_gemm")
    check(ops(dst) == {"MatMul": 1, "Add": 1}, "matmul_add_3d: a 3-D MatMul is not turned into Gemm")
    # Pad -> Conv.
    m = model([helper.make_node("Pad", ["x", "pads"], ["p"]), helper.make_node("Conv", ["p", "w"], ["y"], pads=[0, 1, 0, 1])],
              [fin("x", [1, 2, 7, 7])], [fin("y", None)],
              [const("pads", np.array([0, 0, 1, 2, 0, 0, 3, 0], np.int64)), const("w", randn(4, 2, 3, 3))])
    src, dst, j, _ = c.optimize(m, "pad_conv", "--passes", "fuse_pad")
    g = onnx.load(dst).graph
    check(ops(dst) == {"Conv": 1}, f"pad_conv: Pad folded ({dict(ops(dst))})")
    pads = [list(a.ints) for a in g.node[0].attribute if a.name == "pads"]
    check(pads == [[1, 3, 3, 1]], f"pad_conv: Conv pads merged to [1,3,3,1] ({pads})")
    c.equivalent("pad_conv", src, dst, [{"x": randn(1, 2, 7, 7)}])
    # Pad -> MaxPool stays (MaxPool pads with -inf).
    m = model([helper.make_node("Pad", ["x", "pads"], ["p"]), helper.make_node("MaxPool", ["p"], ["y"], kernel_shape=[2, 2])],
              [fin("x", [1, 2, 6, 6])], [fin("y", None)], [const("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))])
    src, dst, j, _ = c.optimize(m, "pad_maxpool", "--passes", "fuse_pad")
    check(ops(dst) == {"Pad": 1, "MaxPool": 1}, "pad_maxpool: Pad before MaxPool kept")
    # Conv -> per-channel Mul and Add.
    m = model([helper.make_node("Conv", ["x", "w", "b"], ["c"]), helper.make_node("Mul", ["c", "k"], ["m"]),
               helper.make_node("Add", ["m", "a"], ["y"])],
              [fin("x", [1, 3, 6, 6])], [fin("y", None)],
              [const("w", randn(5, 3, 3, 3)), const("b", randn(5)), const("k", randn(5, 1, 1)), const("a", randn(1, 5, 1, 1))])
    src, dst, j, _ = c.optimize(m, "conv_affine", "--passes", "fuse_conv_affine,eliminate_dead")
    check(ops(dst) == {"Conv": 1}, f"conv_affine: Mul and Add folded ({dict(ops(dst))})")
    c.equivalent("conv_affine", src, dst, [{"x": randn(1, 3, 6, 6)}])


def test_duplicates_and_if(c):
    w = randn(3, 3)
    m = model([helper.make_node("MatMul", ["x", "w1"], ["a"]), helper.make_node("MatMul", ["x", "w2"], ["b"]),
               helper.make_node("Relu", ["a"], ["ra"]), helper.make_node("Relu", ["b"], ["rb"]),
               helper.make_node("Add", ["ra", "rb"], ["y"])],
              [fin("x", [2, 3])], [fin("y", [2, 3])], [const("w1", w), const("w2", w.copy())])
    src, dst, j, _ = c.optimize(m, "cse", "--level", "basic")
    check(ops(dst) == {"MatMul": 1, "Relu": 1, "Add": 1}, f"cse: duplicates merged ({dict(ops(dst))})")
    check(len(onnx.load(dst).graph.initializer) == 1, "cse: duplicate initializer merged")
    c.equivalent("cse", src, dst, [{"x": randn(2, 3)}])
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Neg", ["t"], ["tn"])],
                               "then", [], [fin("tn", None)])
    else_g = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["e"])], "else", [], [fin("e", None)])
    m = model([helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g, name="if")],
              [fin("x", [4])], [fin("y", None)], [const("cond", np.array(True))])
    src, dst, j, _ = c.optimize(m, "const_if", "--level", "basic")
    check(ops(dst) == {"Relu": 1, "Neg": 1}, f"const_if: the then-branch is inlined ({dict(ops(dst))})")
    c.equivalent("const_if", src, dst, [{"x": randn(4)}])


def test_cli(c):
    m = model([helper.make_node("Identity", ["x"], ["i"]), helper.make_node("Relu", ["i"], ["y"])],
              [fin("x", ["N", 3])], [fin("y", ["N", 3])])
    src, dst, j, _ = c.optimize(m, "determinism")
    first = open(dst, "rb").read()
    os.remove(dst)
    c.optimize(m, "determinism")
    check(open(dst, "rb").read() == first, "determinism: two runs give byte-identical files")
    check(j is not None and j["nodes_before"] == 2 and j["nodes_after"] == 1 and j["check"]["ok"],
          "json: node counts and check result")
    # --fix-shape fixes exactly the named input.
    m = model([helper.make_node("Add", ["x", "z"], ["y"])],
              [fin("x", ["N", 3]), fin("z", ["M", 3])], [fin("y", None)])
    src, dst, j, _ = c.optimize(m, "fix_shape", "--fix-shape", "x=2x3")
    g = onnx.load(dst).graph
    dims = {i.name: [d.dim_value if d.HasField("dim_value") else d.dim_param for d in i.type.tensor_type.shape.dim]
            for i in g.input}
    check(dims == {"x": [2, 3], "z": ["M", 3]}, f"fix_shape: only x fixed ({dims})")
    _, _, _, r = c.optimize(m, "fix_shape_bad", "--fix-shape", "x=2x3x4", expect_rc=2)
    check("rank" in r.stderr and "x" in r.stderr, f"fix_shape: rank mismatch named ({r.stderr.strip()})")
    _, _, _, r = c.optimize(m, "fix_shape_unknown", "--fix-shape", "nope=2", expect_rc=2)
    _, _, _, r = c.optimize(m, "bad_pass", "--passes", "no_such_pass", expect_rc=2)
    check("no_such_pass" in r.stderr, "unknown pass named")
    r = subprocess.run([c.ferry, "optimize", os.path.join(c.work, "missing.onnx"), "-o", os.path.join(c.work, "o.onnx")],
                       capture_output=True, text=True)
    check(r.returncode == 3 and not os.path.exists(os.path.join(c.work, "o.onnx")), "missing input: exit 3, nothing written")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    c = Ctx(a.ferry, a.work)
    for t in [test_fuse_batchnorm, test_noop_and_dead, test_unsqueeze_squeeze, test_fold_constants, test_matmul_gemm_pad_affine,
              test_duplicates_and_if, test_cli]:
        t(c)
    print(f"{len(FAILURES)} failure(s)")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
