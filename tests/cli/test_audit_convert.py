#!/usr/bin/python3
"""`ferry audit` and `ferry convert` on small models built with Debian's onnx helper API, and a
torch.jit.script model with data-dependent control flow exported with Debian's torch.

    tests/cli/test_audit_convert.py --ferry build/src/ferry --work build/tests/audit_work
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from clilib import FAILURES, check  # noqa: E402

RNG = np.random.default_rng(3)


def model(nodes, inputs, outputs, inits=(), opset=13, extra_opsets=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)] + list(extra_opsets))
    m.ir_version = 8
    return m


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def ferry(f, *args):
    return subprocess.run([f, *args], capture_output=True, text=True)


def test_audit(f, work):
    # A GRU-style sequence model: dynamic batch and sequence axes.
    emb = RNG.standard_normal((100, 8)).astype(np.float32)
    m = model([helper.make_node("Gather", ["emb", "ids"], ["e"]),
               helper.make_node("Transpose", ["e"], ["t"], perm=[1, 0, 2]),
               helper.make_node("GRU", ["t", "W", "R"], ["", "h"], hidden_size=4),
               helper.make_node("Squeeze", ["h", "axes0"], ["y"])],
              [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
              [const("emb", emb), const("W", RNG.standard_normal((1, 12, 8)).astype(np.float32)),
               const("R", RNG.standard_normal((1, 12, 4)).astype(np.float32)), const("axes0", np.array([0], np.int64))])
    p = os.path.join(work, "gru.onnx")
    onnx.save(m, p)
    r = ferry(f, "audit", p, "--json")
    check(r.returncode == 0, f"audit gru: exit 0 ({r.stderr.strip()})")
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    axes = {(d["input"], d["axis"], d["symbol"]) for d in j.get("dynamic_axes", [])}
    check(axes == {("ids", 0, "batch"), ("ids", 1, "seq")}, f"audit gru: dynamic batch and seq axes ({axes})")
    batch = [d for d in j.get("dynamic_axes", []) if d["symbol"] == "batch"]
    check(batch and batch[0]["values_carrying_it"] > 0, "audit gru: the batch axis propagates into the graph")
    # opset 11 target: Squeeze (axes input since 13) and Softmax change; LayerNormalization missing.
    m = model([helper.make_node("Softmax", ["x"], ["s"]),
               helper.make_node("LayerNormalization", ["s", "g", "b"], ["l"]),
               helper.make_node("Relu", ["l"], ["y"])],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
              [const("g", np.ones(4, np.float32)), const("b", np.zeros(4, np.float32))], opset=17)
    p = os.path.join(work, "opset17.onnx")
    onnx.save(m, p)
    r = ferry(f, "audit", p, "--target", "opset:11", "--json")
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    groups = {g["reason"]: g for g in j["targets"][0]["unsupported"]} if j else {}
    check(any("Softmax changes between opset 17" in k for k in groups), f"audit opset:11: Softmax semantics change ({list(groups)})")
    ln = [g for k, g in groups.items() if k.startswith("LayerNormalization not in opset 11")]
    check(bool(ln) and ln[0]["scope"] == "rewrite" and "ReduceMean" in ln[0]["rewrite"],
          "audit opset:11: LayerNormalization needs a named decomposition")
    check(j and j["targets"][0]["conversion_scope"]["as_is"] == 1, "audit opset:11: Relu moves as is")
    # ops:FILE
    lst = os.path.join(work, "ops.txt")
    with open(lst, "w") as fh:
        fh.write("# build config\n:Relu:14\nai.onnx:Softmax:13\n:LayerNormalization:17\n")
    r = ferry(f, "audit", p, "--target", f"ops:{lst}", "--json")
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    check(j and j["targets"][0]["conversion_scope"] == {"as_is": 3, "rewrite": 0, "application": 0},
          f"audit ops:FILE: all three listed ({j.get('targets')})")
    with open(lst, "w") as fh:
        fh.write(":Relu\n")
    r = ferry(f, "audit", p, "--target", f"ops:{lst}")
    check(r.returncode == 3 and "ops.txt:1" in r.stderr, f"audit ops:FILE: a bad line is named ({r.stderr.strip()})")
    # Custom domain: --strict exits 4.
    m = model([helper.make_node("MyOp", ["x"], ["y"], domain="com.example")],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
              extra_opsets=[helper.make_opsetid("com.example", 1)])
    p = os.path.join(work, "custom.onnx")
    onnx.save(m, p)
    r = ferry(f, "audit", p)
    check(r.returncode == 0 and "com.example" in r.stdout, "audit custom: reported, exit 0 without --strict")
    r = ferry(f, "audit", p, "--strict")
    check(r.returncode == 4, f"audit custom --strict: exit 4 (got {r.returncode})")
    r = ferry(f, "audit", p, "--target", "opset:99")
    check(r.returncode == 2, "audit: a bad --target is a usage error")
    r = ferry(f, "audit", os.path.join(work, "missing.onnx"))
    check(r.returncode == 3, "audit: missing model exit 3")


def test_scripted_control_flow(f, work):
    import torch

    class Branchy(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                y = x * 2
            else:
                y = x - 1
            for _ in range(int(x.shape[0])):
                y = y + 1
            return y

    p = os.path.join(work, "scripted.onnx")
    torch.onnx.export(torch.jit.script(Branchy()), (torch.randn(3, 4),), p, opset_version=13,
                      input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "n"}})
    r = ferry(f, "audit", p, "--json")
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    kinds = {c["node"].split(" ")[0]: c["kind"] for c in j.get("control_flow", [])}
    check("If" in kinds and kinds["If"] == "data-dependent", f"audit scripted: the If on the input ({kinds})")
    check("Loop" in kinds, f"audit scripted: the Loop ({kinds})")


def test_convert(f, work):
    w = RNG.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3
    m = model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
               helper.make_node("Relu", ["c"], ["r"]),
               helper.make_node("ReduceMean", ["r"], ["p"], axes=[2, 3], keepdims=0),
               helper.make_node("Unsqueeze", ["p", "ax"], ["u"]),
               helper.make_node("Squeeze", ["u", "ax"], ["q"]),
               helper.make_node("Softmax", ["q"], ["y"], axis=1)],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])],
              [const("w", w), const("b", RNG.standard_normal(8).astype(np.float32)), const("ax", np.array([2], np.int64))])
    src = os.path.join(work, "conv13.onnx")
    onnx.save(m, src)
    out = os.path.join(work, "conv11.onnx")
    r = ferry(f, "convert", src, "-o", out, "--opset", "11", "--json")
    check(r.returncode == 0, f"convert --opset 11: exit 0 ({r.stderr.strip()})")
    if r.returncode == 0:
        m11 = onnx.load(out)
        check(m11.opset_import[0].version == 11, "convert --opset 11: opset is 11")
        sq = [n for n in m11.graph.node if n.op_type == "Squeeze"]
        check(sq and any(a.name == "axes" for a in sq[0].attribute), "convert --opset 11: Squeeze axes became an attribute")
    r = ferry(f, "audit", src, "--target", "ferry-cpu", "--json")
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    prov = j["targets"][0].get("providers", {}) if j else {}
    check(prov.get("cpu", 0) >= 1 and sum(prov.values()) == 6,
          f"audit --target ferry-cpu: provider of every top-level node ({prov})")
    # fp16
    out = os.path.join(work, "conv_fp16.onnx")
    r = ferry(f, "convert", src, "-o", out, "--fp16", "--json")
    check(r.returncode == 0, f"convert --fp16: exit 0 ({r.stderr.strip()})")
    if r.returncode == 0:
        j = json.loads(r.stdout)
        mh = onnx.load(out)
        check(mh.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT16, "convert --fp16: input is float16")
        check(all(i.data_type != TensorProto.FLOAT for i in mh.graph.initializer if i.name.startswith("w")),
              "convert --fp16: weights are float16")
        check(j["check"]["outputs"][0]["cosine"] > 0.999, f"convert --fp16: cosine {j['check']['outputs'][0]['cosine']}")
        x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float16)
        np.save(os.path.join(work, "x16.npy"), x)
        r = ferry(f, "run", out, "--input", f"x={os.path.join(work, 'x16.npy')}", "--output-dir", os.path.join(work, "o16"))
        check(r.returncode == 0, f"ferry runs the fp16 model ({r.stderr.strip()})")
    out = os.path.join(work, "conv_fp16_io.onnx")
    r = ferry(f, "convert", src, "-o", out, "--fp16", "--keep-io-types", "--keep-fp32", "Softmax", "--json")
    check(r.returncode == 0, f"convert --fp16 --keep-io-types: exit 0 ({r.stderr.strip()})")
    if r.returncode == 0:
        mh = onnx.load(out)
        check(mh.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT and
              mh.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT, "keep-io-types: io stays float32")
        check(json.loads(r.stdout)["fp32_nodes"] >= 1, "keep-fp32 Softmax: kept in float32")
    # Out-of-range weight: clamped and named, never Inf.
    m = model([helper.make_node("Mul", ["x", "big"], ["y"])],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
              [const("big", np.array([1e6, 1.0, -2e5], np.float32))])
    src = os.path.join(work, "big.onnx")
    onnx.save(m, src)
    out = os.path.join(work, "big16.onnx")
    r = ferry(f, "convert", src, "-o", out, "--fp16", "--check", "0")
    check(r.returncode == 0 and "'big'" in r.stderr, f"convert --fp16: clamped initializer named ({r.stderr.strip()})")
    if r.returncode == 0:
        v = numpy_helper.to_array([i for i in onnx.load(out).graph.initializer if i.name == "big"][0])
        check(np.all(np.isfinite(v)) and v[0] == np.float16(65504), "convert --fp16: clamped to 65504, finite")
    # Impossible opset conversion names the op, exit 4, nothing written.
    m = model([helper.make_node("Mod", ["x", "x"], ["y"])],
              [helper.make_tensor_value_info("x", TensorProto.INT64, [3])],
              [helper.make_tensor_value_info("y", TensorProto.INT64, [3])])
    src = os.path.join(work, "mod.onnx")
    onnx.save(m, src)
    out = os.path.join(work, "mod8.onnx")
    r = ferry(f, "convert", src, "-o", out, "--opset", "8")
    check(r.returncode == 4 and "Mod" in r.stderr and not os.path.exists(out),
          f"convert --opset 8 of Mod: exit 4 naming the op, nothing written ({r.returncode}: {r.stderr.strip()})")
    r = ferry(f, "convert", src, "-o", out)
    check(r.returncode == 2, "convert without --opset/--fp16: usage error")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    test_audit(a.ferry, a.work)
    test_convert(a.ferry, a.work)
    test_scripted_control_flow(a.ferry, a.work)
    print(f"{len(FAILURES)} failure(s)")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
