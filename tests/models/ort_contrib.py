#!/usr/bin/env python3
"""ONNX Runtime's contrib ops (com.microsoft) against ONNX Runtime itself.

1. One-node models of every contrib op Ferry implements, seeded inputs of awkward sizes: `ferry
   run` (cpu provider, then reference) against ONNX Runtime 1.30; float outputs within 1e-4 x
   max(1, |ORT|), 8-bit outputs equal (QLinearSigmoid: within one step, MLAS's logistic is a
   polynomial).
2. The zoo through ONNX Runtime's own tools, cached under --cache: the BERT encoder after its
   transformer optimizer (SkipLayerNormalization, LayerNormalization) and after that plus its
   dynamic quantizer; ResNet-18 and MobileNetV2 after its static QOperator quantizer
   (QLinearConv, QLinearAdd, QLinearGlobalAveragePool, QGemm); an LSTM model through its dynamic
   quantizer (DynamicQuantizeLSTM). Bar per output: max abs error against the framework (PyTorch's
   test data) <= max(5 x ORT's, 1e-5 x max |framework|), else within 1e-4 x max |ORT| of ORT; the
   same argmax (task decision) as ORT. Then `ferry optimize` on each, and ORT on its output must
   agree with ORT on the input (1e-4 x magnitude).

Run with the project venv's python:

    .venv/bin/python tests/models/ort_contrib.py --ferry build/src/ferry --zoo build/models/zoo \
        --cache build/models
"""
import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import types
import warnings

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ferry_npy import npy_name, run_with_npy  # noqa: E402

warnings.filterwarnings("ignore")
MS = "com.microsoft"


def ort_run(path, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return s.run(None, feeds), [o.name for o in s.get_outputs()]


def ferry_run(ferry, path, feeds, out_dir, provider):
    p = run_with_npy(ferry, path, feeds, out_dir, "--provider", provider, "--output-dir", out_dir,
                     "--threads", "1")
    if p.returncode != 0:
        return None, "ferry run exit %d: %s" % (p.returncode, p.stderr.strip()[-500:])
    return out_dir, None


def read_out(d, name):
    return np.load(os.path.join(d, npy_name(name) + ".npy"))


# ---------------------------------------------------------------- one-node models

def t(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def model(node, inputs, outputs, inits=(), opset=17):
    """inputs: [(name, array)] fed at run time; inits: [(name, array)] initializers."""
    g = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in inputs],
        [onnx.ValueInfoProto(name=o) for o in outputs],
        [t(n, a) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    return m, dict(inputs)


def qparams(rng, dtype):
    scale = np.float32(rng.uniform(0.01, 0.1))
    zp = np.array(rng.randint(0, 256) if dtype == np.uint8 else rng.randint(-128, 128), dtype=dtype)
    return scale, zp


def qrand(rng, shape, dtype):
    lo, hi = (0, 256) if dtype == np.uint8 else (-128, 128)
    return rng.randint(lo, hi, size=shape).astype(dtype)


EXPECT = {}  # case -> expected outputs, where ONNX Runtime's CPU provider lacks the op


def node_cases():
    """Yields (case name, (ModelProto, feeds), int_tolerance)."""
    rng = np.random.RandomState(7)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
    mk = helper.make_node

    # --- normalizations ---
    for shape, bias, outs in [((2, 13, 48), True, ["y"]), ((1, 7, 127), False, ["y", "", "", "sum"]), ((3, 5), True, ["y"])]:
        h = shape[-1]
        ins = ["x", "skip", "gamma", "beta"] + (["bias"] if bias else [])
        inits = [("gamma", f32(h)), ("beta", f32(h))] + ([("bias", f32(h))] if bias else [])
        yield ("SkipLayerNormalization_%s" % "x".join(map(str, shape)),
               model(mk("SkipLayerNormalization", ins, outs, domain=MS, epsilon=1e-5),
                     [("x", f32(*shape)), ("skip", f32(*shape))], [o for o in outs if o], inits), None)
    yield ("SkipLayerNormalization_bcast_skip",
           model(mk("SkipLayerNormalization", ["x", "skip", "gamma"], ["y"], domain=MS, epsilon=1e-6),
                 [("x", f32(3, 9, 33)), ("skip", f32(1, 9, 33))], ["y"], [("gamma", f32(33))]), None)
    yield ("SkipSimplifiedLayerNormalization",
           model(mk("SkipSimplifiedLayerNormalization", ["x", "skip", "gamma"], ["y"], domain=MS, epsilon=1e-6),
                 [("x", f32(2, 5, 31)), ("skip", f32(2, 5, 31))], ["y"], [("gamma", f32(31))]), None)
    yield ("LayerNormalization_opset14",
           model(mk("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5),
                 [("x", f32(2, 7, 19))], ["y"], [("g", f32(19)), ("b", f32(19))], opset=14), None)
    ids = rng.randint(0, 50, size=(2, 11)).astype(np.int32)
    seg = rng.randint(0, 2, size=(2, 11)).astype(np.int32)
    mask = (np.arange(11)[None, :] < np.array([[11], [6]])).astype(np.int32)
    yield ("EmbedLayerNormalization",
           model(mk("EmbedLayerNormalization", ["ids", "seg", "we", "pe", "se", "g", "b", "mask"], ["y", "mi"],
                    domain=MS, epsilon=1e-12),
                 [("ids", ids), ("seg", seg), ("mask", mask)], ["y", "mi"],
                 [("we", f32(50, 24)), ("pe", f32(16, 24)), ("se", f32(2, 24)), ("g", f32(24)), ("b", f32(24))]), None)

    # --- gelu family ---
    for op, ins, inits, attrs in [("Gelu", ["x"], [], {}), ("FastGelu", ["x", "bias"], [("bias", f32(37))], {}),
                                  ("FastGelu", ["x"], [], {}), ("BiasGelu", ["x", "bias"], [("bias", f32(37))], {}),
                                  ("QuickGelu", ["x"], [], {"alpha": 1.5})]:
        yield ("%s_%d" % (op, len(ins)), model(mk(op, ins, ["y"], domain=MS, **attrs), [("x", f32(3, 5, 37) * 3)], ["y"], inits), None)
    # ONNX Runtime has BiasAdd on CUDA only: numpy gives the expected output.
    bx, bskip, bb = f32(2, 9, 17), f32(2, 9, 17), f32(17)
    EXPECT["BiasAdd"] = [bx + bb + bskip]
    yield ("BiasAdd", model(mk("BiasAdd", ["x", "bias", "skip"], ["y"], domain=MS),
                            [("x", bx), ("skip", bskip)], ["y"], [("bias", bb)]), None)

    # --- fused ---
    yield ("FusedMatMul", model(mk("FusedMatMul", ["a", "b"], ["y"], domain=MS, alpha=0.37, transA=1, transB=1),
                                [("a", f32(2, 3, 13, 7)), ("b", f32(3, 11, 13))], ["y"]), None)
    yield ("FusedConv", model(mk("FusedConv", ["x", "w", "b", "z"], ["y"], domain=MS, activation="LeakyRelu",
                                 activation_params=[0.2], pads=[1, 1, 1, 1], strides=[2, 1]),
                              [("x", f32(1, 5, 13, 11)), ("z", f32(1, 7, 7, 11))], ["y"], [("w", f32(7, 5, 3, 3)), ("b", f32(7))]), None)
    yield ("FusedConv_Clip", model(mk("FusedConv", ["x", "w"], ["y"], domain=MS, activation="Clip", activation_params=[-0.5, 0.75]),
                                   [("x", f32(2, 3, 9, 9))], ["y"], [("w", f32(4, 3, 3, 3))]), None)

    # --- attention ---
    b, s, d, n = 2, 7, 24, 3
    x = f32(b, s, d)
    w = f32(d, 3 * d) * 0.3
    bias = f32(3 * d)
    for tag, extra, attrs in [("nomask", [], {}), ("keylen", [("mask", np.array([7, 4], np.int32))], {}),
                              ("endstart", [("mask", np.array([7, 5, 0, 2], np.int32))], {}),
                              ("raw2d", [("mask", (rng.rand(b, s) > 0.3).astype(np.int32))], {}),
                              ("raw3d", [("mask", (rng.rand(b, s, s) > 0.3).astype(np.int32))], {}),
                              ("causal", [], {"unidirectional": 1}),
                              ("causal_keylen", [("mask", np.array([7, 3], np.int32))], {"unidirectional": 1})]:
        ins = ["x", "w", "bias"] + (["mask"] if extra else [])
        yield ("Attention_" + tag, model(mk("Attention", ins, ["y"], domain=MS, num_heads=n, **attrs),
                                         [("x", x)] + extra, ["y"], [("w", w), ("bias", bias)]), None)
    past = f32(2, b, n, 4, d // n)
    yield ("Attention_past", model(mk("Attention", ["x", "w", "bias", "", "past"], ["y", "present"], domain=MS, num_heads=n, unidirectional=1),
                                   [("x", x), ("past", past)], ["y", "present"], [("w", w), ("bias", bias)]), None)
    yield ("Attention_qkv_sizes_bias", model(mk("Attention", ["x", "w2", "bias2", "", "", "ab"], ["y"], domain=MS, num_heads=n,
                                                qkv_hidden_sizes=[12, 12, 18], scale=0.3),
                                             [("x", x), ("ab", f32(1, n, s, s))], ["y"], [("w2", f32(d, 42)), ("bias2", f32(42))]), None)
    q, k, v = f32(b, s, d), f32(b, 5, d), f32(b, 5, 2 * d)
    yield ("MultiHeadAttention_cross", model(mk("MultiHeadAttention", ["q", "k", "v", "bias", "kpm"], ["y"], domain=MS, num_heads=n),
                                             [("q", q), ("k", k), ("v", v), ("kpm", (rng.rand(b, 5) > 0.3).astype(np.int32))], ["y"],
                                             [("bias", f32(4 * d))]), None)
    yield ("MultiHeadAttention_past", model(mk("MultiHeadAttention", ["q", "k", "v", "", "", "", "pk", "pv"], ["y", "pko", "pvo"], domain=MS,
                                               num_heads=n, unidirectional=1),
                                            [("q", q), ("k", f32(b, s, d)), ("v", f32(b, s, d)), ("pk", f32(b, n, 3, 8)), ("pv", f32(b, n, 3, 8))],
                                            ["y", "pko", "pvo"]), None)

    # --- rotary ---
    cos = np.cos(rng.rand(32, 4)).astype(np.float32)
    sin = np.sin(rng.rand(32, 4)).astype(np.float32)
    for inter in (0, 1):
        yield ("RotaryEmbedding_i%d" % inter,
               model(mk("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS, interleaved=inter, num_heads=3),
                     [("x", f32(2, 5, 24)), ("pos", rng.randint(0, 27, size=(2, 5)).astype(np.int64))], ["y"],
                     [("cos", cos), ("sin", sin)]), None)

    # --- qlinear ---
    for dt in (np.uint8, np.int8):
        tn = "u8" if dt == np.uint8 else "s8"
        sa, za = qparams(rng, dt)
        sb, zb = qparams(rng, dt)
        sc, zc = qparams(rng, dt)
        for op in ("QLinearAdd", "QLinearMul"):
            for bshape in ((2, 3, 5, 7), (5, 1), ()):
                yield ("%s_%s_%s" % (op, tn, len(bshape)),
                       model(mk(op, ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["y"], domain=MS),
                             [("a", qrand(rng, (2, 3, 5, 7), dt)), ("b", qrand(rng, bshape, dt))], ["y"],
                             [("sa", sa), ("za", za), ("sb", sb), ("zb", zb), ("sc", sc), ("zc", zc)]), 0)
        yield ("QLinearSigmoid_" + tn, model(mk("QLinearSigmoid", ["x", "sx", "zx", "sy", "zy"], ["y"], domain=MS),
                                            [("x", qrand(rng, (3, 77), dt))], ["y"],
                                            [("sx", sa), ("zx", za), ("sy", np.float32(1 / 256.)), ("zy", np.array(0 if dt == np.uint8 else -128, dt))]), 1)
        yield ("QLinearLeakyRelu_" + tn, model(mk("QLinearLeakyRelu", ["x", "sx", "zx", "sy", "zy"], ["y"], domain=MS, alpha=0.13),
                                              [("x", qrand(rng, (3, 77), dt))], ["y"], [("sx", sa), ("zx", za), ("sy", sc), ("zy", zc)]), 0)
        yield ("QLinearConcat_" + tn, model(mk("QLinearConcat", ["sy", "zy", "a", "sa", "za", "b", "sb", "zb", "c", "sy", "zy"], ["y"], domain=MS, axis=1),
                                           [("a", qrand(rng, (2, 3, 5), dt)), ("b", qrand(rng, (2, 1, 5), dt)), ("c", qrand(rng, (2, 4, 5), dt))], ["y"],
                                           [("sy", sc), ("zy", zc), ("sa", sa), ("za", za), ("sb", sb), ("zb", zb)]), 0)
        for attrs in ({"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]},
                      {"kernel_shape": [2, 3], "count_include_pad": 1, "pads": [1, 0, 1, 1]}):
            yield ("QLinearAveragePool_%s_%d" % (tn, len(attrs)),
                   model(mk("QLinearAveragePool", ["x", "sx", "zx", "sy", "zy"], ["y"], domain=MS, **attrs),
                         [("x", qrand(rng, (2, 3, 9, 11), dt))], ["y"], [("sx", sa), ("zx", za), ("sy", sc), ("zy", zc)]), 0)
        for last in (0, 1):
            yield ("QLinearGlobalAveragePool_%s_%d" % (tn, last),
                   model(mk("QLinearGlobalAveragePool", ["x", "sx", "zx", "sy", "zy"], ["y"], domain=MS, channels_last=last),
                         [("x", qrand(rng, (2, 13, 7, 5), dt))], ["y"], [("sx", sa), ("zx", za), ("sy", sc), ("zy", zc)]), 0)
    # Int8 GEMMs: B within +-64 (the quantizer's reduce_range). Without VNNI, ONNX Runtime's MLAS
    # multiplies u8 x s8 with vpmaddubsw, whose pair sums saturate at int16 beyond that (measured:
    # its MatMulIntegerToFloat matches the saturating sums to 1.6e-6 and is 7.5 off the exact
    # ones on full-range B); Ferry computes the exact sums (tests/cpu/ checks them bit for bit).
    w7 = lambda shape: rng.randint(-64, 65, size=shape).astype(np.int8)
    # QGemm: A uint8, B int8 (per column), C int32; quantized and float outputs.
    a = qrand(rng, (13, 37), np.uint8)
    bq = w7((19, 37))
    bs = rng.uniform(0.001, 0.01, size=19).astype(np.float32)
    c = rng.randint(-3000, 3000, size=19).astype(np.int32)
    for tag, ins, outs_q, inits in [
            ("q", ["a", "sa", "za", "b", "sb", "zb", "c", "sy", "zy"], True,
             [("sa", np.float32(0.02)), ("za", np.uint8(117)), ("b", bq), ("sb", bs), ("zb", np.zeros(19, np.int8)), ("c", c),
              ("sy", np.float32(0.05)), ("zy", np.uint8(120))]),
            ("f", ["a", "sa", "za", "b", "sb", "zb", "c"], False,
             [("sa", np.float32(0.02)), ("za", np.uint8(117)), ("b", bq), ("sb", bs), ("zb", np.zeros(19, np.int8)), ("c", c)])]:
        yield ("QGemm_" + tag, model(mk("QGemm", ins, ["y"], domain=MS, transB=1, alpha=0.75), [("a", a)], ["y"], inits), 0 if outs_q else None)

    # --- dynamic quantization ---
    B = w7((29, 17))
    yield ("DynamicQuantizeMatMul", model(mk("DynamicQuantizeMatMul", ["a", "b", "bs", "bz", "bias"], ["y"], domain=MS),
                                          [("a", f32(3, 5, 29))], ["y"],
                                          [("b", B), ("bs", rng.uniform(0.01, 0.02, size=17).astype(np.float32)),
                                           ("bz", np.zeros(17, np.int8)), ("bias", f32(17))]), None)
    yield ("MatMulIntegerToFloat", model(mk("MatMulIntegerToFloat", ["a", "b", "as", "bs", "az", "bz", "bias"], ["y"], domain=MS),
                                         [("a", qrand(rng, (6, 29), np.uint8))], ["y"],
                                         [("b", B), ("as", np.float32(0.03)), ("bs", np.float32(0.01)), ("az", np.uint8(128)),
                                          ("bz", np.int8(3)), ("bias", f32(17))]), None)
    xq = qrand(rng, (2, 5, 24), np.uint8)
    wq = w7((24, 72))
    yield ("QAttention", model(mk("QAttention", ["x", "w", "bias", "xs", "ws", "mask", "xz", "wz"], ["y"], domain=MS, num_heads=3),
                               [("x", xq), ("mask", np.array([5, 3], np.int32))], ["y"],
                               [("w", wq), ("bias", f32(72)), ("xs", np.float32(0.02)), ("ws", np.float32(0.01)),
                                ("xz", np.uint8(128)), ("wz", np.int8(0))]), None)


# ---------------------------------------------------------------- zoo models through ORT's tools

def optimize_without_torch(fn):
    # The transformer optimizer imports torch only to ask whether it is a ROCm build: a stand-in
    # module while it runs (removed after: other tools look torch up with importlib).
    m = types.ModuleType("torch")
    m.version = types.SimpleNamespace(hip=None, cuda=None)
    had = sys.modules.get("torch")
    sys.modules["torch"] = m
    try:
        return fn()
    finally:
        if had is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = had


def make_lstm(path):
    rng = np.random.RandomState(3)
    i, h = 24, 40
    W = (rng.standard_normal((2, 4 * h, i)) * 0.3).astype(np.float32)
    R = (rng.standard_normal((2, 4 * h, h)) * 0.3).astype(np.float32)
    B = (rng.standard_normal((2, 8 * h)) * 0.1).astype(np.float32)
    lstm = helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "yh", "yc"], hidden_size=h, direction="bidirectional")
    g = helper.make_graph([lstm], "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["seq", "batch", i])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "yh", "yc")],
                          [t("W", W), t("R", R), t("B", B)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.save(m, path)


def generate(zoo, cache):
    """Returns [(name, path, [feeds], [framework outputs or None])]; models cached in `cache`."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_dynamic, quantize_static
    os.makedirs(cache, exist_ok=True)
    models = []

    def sets(name):
        d = os.path.join(zoo, name)
        g = onnx.load(os.path.join(d, "model.onnx"), load_external_data=False)
        ins = [i.name for i in g.graph.input if i.name not in {x.name for x in g.graph.initializer}]
        outs = [o.name for o in g.graph.output]
        feeds, wants = [], []
        for sd in sorted(x for x in os.listdir(d) if x.startswith("test_data_set_")):
            load = lambda p: numpy_helper.to_array(onnx.load_tensor(p))
            feeds.append({n: load(os.path.join(d, sd, "input_%d.pb" % k)) for k, n in enumerate(ins)})
            wants.append({n: load(os.path.join(d, sd, "output_%d.pb" % k)) for k, n in enumerate(outs)})
        return feeds, wants

    bert_opt = os.path.join(cache, "bert_ort_opt.onnx")
    if not os.path.exists(bert_opt):
        def opt():
            from onnxruntime.transformers.optimizer import optimize_model
            return optimize_model(os.path.join(zoo, "bert_encoder", "model.onnx"), model_type="bert",
                                  num_heads=4, hidden_size=256, opt_level=1)
        m = optimize_without_torch(opt)
        m.save_model_to_file(bert_opt + ".tmp")
        os.replace(bert_opt + ".tmp", bert_opt)
    feeds, wants = sets("bert_encoder")
    models.append(("bert_ort_opt", bert_opt, feeds, wants))

    bert_q = os.path.join(cache, "bert_ort_opt_dynq.onnx")
    if not os.path.exists(bert_q):
        # reduce_range: 7-bit weights, which ONNX Runtime's int8 GEMM multiplies exactly on every
        # x86 CPU (full-range weights saturate in its AVX2 kernels without VNNI, see node_cases).
        quantize_dynamic(bert_opt, bert_q + ".tmp.onnx", reduce_range=True,
                         extra_options={"DefaultTensorType": TensorProto.FLOAT})
        os.replace(bert_q + ".tmp.onnx", bert_q)
    models.append(("bert_ort_opt_dynq", bert_q, feeds, wants))

    for name in ("resnet18_op13", "mobilenet_v2"):
        feeds, wants = sets(name)
        path = os.path.join(cache, "%s_qop.onnx" % name)
        if not os.path.exists(path):
            from onnxruntime.quantization.shape_inference import quant_pre_process
            pre = path + ".pre.onnx"
            quant_pre_process(os.path.join(zoo, name, "model.onnx"), pre)

            class Reader(CalibrationDataReader):
                def __init__(self):
                    rng = np.random.RandomState(0)
                    self.it = iter([{"image": f["image"][:1]} for f in feeds] +
                                   [{"image": rng.rand(1, 3, 224, 224).astype(np.float32)} for _ in range(2)])

                def get_next(self):
                    return next(self.it, None)

            quantize_static(pre, path + ".tmp.onnx", Reader(), quant_format=QuantFormat.QOperator)
            os.replace(path + ".tmp.onnx", path)
            os.remove(pre)
        models.append((name + "_qop", path, feeds, wants))

    lstm = os.path.join(cache, "lstm_dynq.onnx")
    if not os.path.exists(lstm):
        make_lstm(lstm + ".f32.onnx")
        quantize_dynamic(lstm + ".f32.onnx", lstm + ".tmp.onnx", reduce_range=True)
        os.replace(lstm + ".tmp.onnx", lstm)
    rng = np.random.RandomState(5)
    lf = [{"x": rng.standard_normal((s, b, 24)).astype(np.float32)} for s, b in ((9, 3), (1, 1), (17, 2))]
    models.append(("lstm_dynq", lstm, lf, [None] * len(lf)))
    return models


def max_abs(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("inf")
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--only", default="", help="comma-separated case / model name prefixes")
    ap.add_argument("--no-zoo", action="store_true")
    args = ap.parse_args()
    only = [x for x in args.only.split(",") if x]
    want = lambda n: not only or any(n.startswith(o) for o in only)
    failures = []
    work = tempfile.mkdtemp(prefix="ferry_contrib_")

    print("%-40s %-9s %-12s %-12s" % ("one-node case", "ort", "cpu err", "ref err"))
    for name, (m, feeds), itol in node_cases():
        if not want(name):
            continue
        path = os.path.join(work, name + ".onnx")
        onnx.save(m, path)
        try:
            if name in EXPECT:
                o_vals, o_names = EXPECT[name], [o.name for o in m.graph.output]
            else:
                o_vals, o_names = ort_run(path, feeds)
        except Exception as ex:  # noqa: BLE001
            failures.append("%s: ONNX Runtime failed: %s" % (name, str(ex)[:300]))
            continue
        errs = []
        for pv in ("cpu", "reference"):
            od, err = ferry_run(args.ferry, path, feeds, os.path.join(work, name, pv), pv)
            if err:
                failures.append("%s (%s): %s" % (name, pv, err))
                errs.append("FAIL")
                continue
            worst = 0.0
            for on, ov in zip(o_names, o_vals):
                fv = read_out(od, on)
                e = max_abs(fv, ov)
                if itol is not None and np.issubdtype(ov.dtype, np.integer):
                    bad = e > itol
                else:
                    bad = e > 1e-4 * max(1.0, float(np.max(np.abs(ov))) if ov.size else 1.0)
                if bad:
                    failures.append("%s (%s): output %s max abs error %.3g" % (name, pv, on, e))
                worst = max(worst, e)
            errs.append("%.3g" % worst)
        print("%-40s %-9s %-12s %-12s" % (name, "ok", errs[0], errs[1]))
    sys.stdout.flush()

    if not args.no_zoo:
        print("\n%-20s %-10s %-12s %-12s %-10s %-9s" % ("model", "output", "ort err", "ferry err", "vs ort", "optimize"))
        for name, path, feeds, wants in generate(args.zoo, args.cache):
            if not want(name):
                continue
            opt_state = "-"
            for si, (feed, want_out) in enumerate(zip(feeds, wants)):
                o_vals, o_names = ort_run(path, feed)
                od, err = ferry_run(args.ferry, path, feed, os.path.join(work, name, str(si)), "cpu")
                if err:
                    failures.append("%s set %d: %s" % (name, si, err))
                    continue
                for on, ov in zip(o_names, o_vals):
                    fv = read_out(od, on)
                    vs_ort = max_abs(fv, ov)
                    ok_ort = vs_ort <= 1e-4 * max(1.0, float(np.max(np.abs(ov))))
                    ort_err = ferry_err = float("nan")
                    ok = ok_ort
                    if want_out is not None and on in want_out:
                        ref = want_out[on]
                        ort_err, ferry_err = max_abs(ov, ref), max_abs(fv, ref)
                        ok = ok or ferry_err <= max(5 * ort_err, 1e-5 * float(np.max(np.abs(ref))))
                    if not ok:
                        failures.append("%s set %d output %s: max abs error %.3g vs ORT (framework: ferry %.3g, ORT %.3g)" %
                                        (name, si, on, vs_ort, ferry_err, ort_err))
                    if ov.ndim >= 2 and ov.shape[-1] > 1 and fv.shape == ov.shape and name.endswith("_qop"):
                        if np.any(np.argmax(fv, -1) != np.argmax(ov, -1)):
                            failures.append("%s set %d: top-1 differs from ORT's" % (name, si))
                    print("%-20s %-10s %-12.3g %-12.3g %-10.3g" % ("%s/%d" % (name, si), on[:10], ort_err, ferry_err, vs_ort))
            # ferry optimize, then ORT on its output against ORT on the input.
            od = os.path.join(work, name, "opt")
            os.makedirs(od, exist_ok=True)
            opt_path = os.path.join(od, "model.onnx")
            check = os.path.join(od, "check")
            os.makedirs(check, exist_ok=True)
            for k, v in feeds[0].items():
                np.save(os.path.join(check, npy_name(k) + ".npy"), v[None])
            p = subprocess.run([args.ferry, "optimize", path, "-o", opt_path, "--check-data", check,
                                "--rtol", "1e-4", "--atol", "1e-4"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if p.returncode != 0:
                failures.append("%s: ferry optimize exit %d: %s" % (name, p.returncode, p.stderr.strip()[-400:]))
                opt_state = "FAIL"
            else:
                try:
                    for feed in feeds:
                        a, _ = ort_run(path, feed)
                        b, _ = ort_run(opt_path, feed)
                        for x, y in zip(a, b):
                            if max_abs(x, y) > 1e-4 * max(1.0, float(np.max(np.abs(x)))):
                                raise RuntimeError("outputs differ by %.3g" % max_abs(x, y))
                    opt_state = "ok"
                except Exception as ex:  # noqa: BLE001
                    failures.append("%s: ONNX Runtime on the optimized model: %s" % (name, str(ex)[:300]))
                    opt_state = "FAIL"
            print("%-20s optimize: %s" % (name, opt_state))

    if failures:
        print("\nFAILURES (%d):" % len(failures))
        for f in failures:
            print("  " + f)
        return 1
    print("\nall agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
