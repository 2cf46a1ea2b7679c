#!/usr/bin/env python3
"""`ferry optimize` on the zoo models, side by side with ONNX Runtime's basic-level optimizer
(SessionOptions.optimized_model_filepath) and onnxsim. Run with the project venv (onnxruntime,
onnxsim, onnx from PyPI). For each model it prints the three node counts and requires:
  - Ferry's output has no Identity or Dropout nodes and no more nodes than either peer's;
  - ONNX Runtime loads Ferry's output and its outputs match ORT on the original within
    rtol 1e-5 / atol 1e-6 on seeded inputs;
  - two runs of `ferry optimize` give byte-identical files.

    optimize_peers.py --ferry build/src/ferry --zoo build/models/zoo [--models a,b]
"""
import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

DEFAULT_MODELS = ["resnet18_op13", "resnet18_op17", "mobilenet_v2", "bert_encoder", "gru_encoder", "digits_cnn"]


def count_nodes(m):
    n = 0
    c = collections.Counter()
    def walk(g):
        nonlocal n
        for node in g.node:
            n += 1
            c[node.op_type] += 1
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for sg in a.graphs:
                    walk(sg)
    walk(m.graph)
    return n, c


def feeds_for(m, rng):
    inits = {i.name: i for i in m.graph.initializer}
    gather_rows = {}
    for node in m.graph.node:
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[0] in inits:
            gather_rows[node.input[1]] = inits[node.input[0]].dims[0]
    feeds = {}
    for i in m.graph.input:
        if i.name in inits:
            continue
        t = i.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else (1 if k == 0 else 16) for k, d in enumerate(t.shape.dim)]
        if t.elem_type == onnx.TensorProto.FLOAT:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
        elif t.elem_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
            hi = gather_rows.get(i.name, 2)
            dt = np.int64 if t.elem_type == onnx.TensorProto.INT64 else np.int32
            feeds[i.name] = rng.integers(0, hi, shape).astype(dt)
        elif t.elem_type == onnx.TensorProto.BOOL:
            feeds[i.name] = np.ones(shape, bool)
        else:
            raise SystemExit(f"{i.name}: dtype {t.elem_type} not generated")
    # An attention mask of ones (every token real), ids within the table.
    return feeds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--extra", action="append", default=[], help="NAME=PATH of another model to include")
    a = ap.parse_args()
    import onnxsim
    failures = []
    rows = []
    work = tempfile.mkdtemp(prefix="ferry-optpeers-")
    todo = [(n, os.path.join(a.zoo, n, "model.onnx")) for n in a.models.split(",")]
    todo += [tuple(e.split("=", 1)) for e in a.extra]
    for name, src in todo:
        if not os.path.exists(src):
            failures.append(f"{name}: {src} missing")
            continue
        out1, out2 = os.path.join(work, name + ".ferry1.onnx"), os.path.join(work, name + ".ferry2.onnx")
        for out in (out1, out2):
            r = subprocess.run([a.ferry, "optimize", src, "-o", out], capture_output=True, text=True)
            if r.returncode != 0:
                failures.append(f"{name}: ferry optimize exit {r.returncode}: {r.stderr.strip()}")
                break
        if not os.path.exists(out2):
            continue
        if open(out1, "rb").read() != open(out2, "rb").read():
            failures.append(f"{name}: two ferry optimize runs differ")
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        ort_path = os.path.join(work, name + ".ort_basic.onnx")
        so.optimized_model_filepath = ort_path
        ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
        sim, _ = onnxsim.simplify(onnx.load(src), check_n=0)
        orig_n, _ = count_nodes(onnx.load(src))
        ferry_n, ferry_ops = count_nodes(onnx.load(out1))
        ort_n, _ = count_nodes(onnx.load(ort_path))
        sim_n, _ = count_nodes(sim)
        rows.append((name, orig_n, ferry_n, ort_n, sim_n))
        if ferry_ops["Identity"] or ferry_ops["Dropout"]:
            failures.append(f"{name}: Identity/Dropout left ({ferry_ops['Identity']}/{ferry_ops['Dropout']})")
        if ferry_n > ort_n or ferry_n > sim_n:
            failures.append(f"{name}: ferry leaves {ferry_n} nodes; ORT basic {ort_n}, onnxsim {sim_n}")
        # ORT runs Ferry's output; compare with ORT on the original.
        plain = ort.SessionOptions()
        plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        s0 = ort.InferenceSession(src, plain, providers=["CPUExecutionProvider"])
        s1 = ort.InferenceSession(out1, plain, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        worst = 0.0
        for _ in range(3):
            f = feeds_for(onnx.load(src, load_external_data=False), rng)
            r0, r1 = s0.run(None, f), s1.run(None, f)
            for o, (x, y) in zip(s0.get_outputs(), zip(r0, r1)):
                worst = max(worst, float(np.max(np.abs(x.astype(np.float64) - y))) if x.size else 0.0)
                if not np.allclose(y, x, rtol=1e-5, atol=1e-6):
                    failures.append(f"{name}: output {o.name} differs under ORT after ferry optimize")
        rows[-1] = rows[-1] + (worst,)
    # ferry convert on ResNet-18: --opset 11 runs in ORT and matches; --fp16 keeps top-1 and cosine.
    src = os.path.join(a.zoo, "resnet18_op13", "model.onnx")
    if "resnet18_op13" in a.models.split(",") and os.path.exists(src):
        plain = ort.SessionOptions()
        s0 = ort.InferenceSession(src, plain, providers=["CPUExecutionProvider"])
        o11, o16 = os.path.join(work, "r18_op11.onnx"), os.path.join(work, "r18_fp16.onnx")
        r = subprocess.run([a.ferry, "convert", src, "-o", o11, "--opset", "11"], capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"convert --opset 11: exit {r.returncode}: {r.stderr.strip()}")
        else:
            s1 = ort.InferenceSession(o11, plain, providers=["CPUExecutionProvider"])
            rng = np.random.default_rng(1)
            worst = 0.0
            for _ in range(3):
                x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
                y0, y1 = s0.run(None, {s0.get_inputs()[0].name: x})[0], s1.run(None, {s1.get_inputs()[0].name: x})[0]
                worst = max(worst, float(np.max(np.abs(y0 - y1))))
            print(f"convert --opset 11: opset {onnx.load(o11).opset_import[0].version}, ORT max abs vs original {worst:.2e}")
            if worst > 1e-5:
                failures.append(f"convert --opset 11: ORT outputs differ by {worst}")
        r = subprocess.run([a.ferry, "convert", src, "-o", o16, "--fp16", "--check", "0"], capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"convert --fp16: exit {r.returncode}: {r.stderr.strip()}")
        else:
            s1 = ort.InferenceSession(o16, plain, providers=["CPUExecutionProvider"])
            rng = np.random.default_rng(2)
            cos_min, same = 1.0, 0
            for _ in range(20):
                x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
                y0 = s0.run(None, {s0.get_inputs()[0].name: x})[0].ravel().astype(np.float64)
                y1 = s1.run(None, {s1.get_inputs()[0].name: x.astype(np.float16)})[0].ravel().astype(np.float64)
                cos_min = min(cos_min, float(y0 @ y1 / np.linalg.norm(y0) / np.linalg.norm(y1)))
                same += int(np.argmax(y0) == np.argmax(y1))
            ratio = os.path.getsize(o16) / os.path.getsize(src)
            print(f"convert --fp16 (run by ORT): min cosine {cos_min:.6f}, same top-1 {same}/20, file {ratio:.3f}x")
            if cos_min < 0.999 or same != 20 or ratio > 0.55:
                failures.append(f"convert --fp16: cosine {cos_min}, top-1 {same}/20, size {ratio:.3f}x")
    # ferry audit on the zoo's GRU encoder: dynamic batch and sequence axes.
    gru = os.path.join(a.zoo, "gru_encoder", "model.onnx")
    if os.path.exists(gru):
        import json
        r = subprocess.run([a.ferry, "audit", gru, "--json"], capture_output=True, text=True)
        axes = sorted((d["axis"], d["symbol"]) for d in json.loads(r.stdout)["dynamic_axes"]) if r.returncode == 0 else []
        print(f"audit gru_encoder: dynamic axes {axes}")
        if len(axes) != 2 or axes[0][0] != 0 or axes[1][0] != 1:
            failures.append(f"audit gru_encoder: expected dynamic axes 0 and 1, got {axes} ({r.stderr.strip()})")
    print(f"{'model':<16} {'original':>9} {'ferry':>7} {'ORT basic':>10} {'onnxsim':>8} {'max abs (ORT)':>14}")
    for r in rows:
        print(f"{r[0]:<16} {r[1]:>9} {r[2]:>7} {r[3]:>10} {r[4]:>8} {r[5] if len(r) > 5 else float('nan'):>14.2e}")
    for f in failures:
        print("FAIL", f)
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
