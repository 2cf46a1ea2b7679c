#!/usr/bin/python3
"""Command-line behaviour of `ferry verify` and `ferry golden capture`: verdicts and exit codes
(0 pass, 1 out of tolerance / unmatched / NaN found, 2 usage, 3 invalid input), the first layer
out of tolerance under --per-layer, the first NaN/Inf layer under --validate, data layouts,
labels, reports, and golden capture round trips.

Models are built here with Debian's onnx (1.12) so the test needs no network.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from clilib import FAILURES, PASSED, check, expect_error, ferry  # noqa: E402


def mlp(path, w1, w2, rename_relu=False, out_names=("logits", "feat"), logits_cols=3):
    """x[batch,4] -> MatMul 'mm' -> Relu 'relu' -> MatMul 'fc' -> logits; feat = Identity(relu)."""
    r = "r2" if rename_relu else "r"
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm"),
             helper.make_node("Relu", ["h"], [r], name="relu"),
             helper.make_node("MatMul", [r, "w2"], [out_names[0]], name="fc"),
             helper.make_node("Identity", [r], [out_names[1]], name="feat_id")]
    g = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info(out_names[0], TensorProto.FLOAT, ["batch", logits_cols]),
         helper.make_tensor_value_info(out_names[1], TensorProto.FLOAT, ["batch", 5])],
        [numpy_helper.from_array(w1.astype(np.float32), "w1"), numpy_helper.from_array(w2.astype(np.float32), "w2")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)
    return path


def nan_model(path, kind):
    """Log of a negative number, or Div 0/0, in the middle of the graph."""
    if kind == "log":
        nodes = [helper.make_node("Sub", ["x", "hundred"], ["shifted"], name="shift"),
                 helper.make_node("Log", ["shifted"], ["logged"], name="log0"),
                 helper.make_node("Relu", ["logged"], ["y"], name="relu_out")]
        inits = [numpy_helper.from_array(np.array(100, np.float32), "hundred")]
    else:
        nodes = [helper.make_node("Sub", ["x", "x"], ["zero"], name="zero0"),
                 helper.make_node("Div", ["zero", "zero"], ["q"], name="div0"),
                 helper.make_node("Add", ["q", "x"], ["y"], name="add_out")]
        inits = []
    g = helper.make_graph(nodes, "nan", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)
    return path


def write_pb(path, arr, name):
    with open(path, "wb") as fh:
        fh.write(numpy_helper.from_array(arr, name).SerializeToString())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    tmp = os.path.join(work, "tmp")  # per-layer spill folders go here, and must be gone after
    os.makedirs(tmp)
    os.environ["TMPDIR"] = tmp
    rng = np.random.RandomState(0)
    w1 = rng.randn(4, 5)
    w2 = rng.randn(5, 3)
    ref = mlp(os.path.join(work, "ref.onnx"), w1, w2)
    same = mlp(os.path.join(work, "same.onnx"), w1, w2)
    bad_fc = mlp(os.path.join(work, "bad_fc.onnx"), w1, w2 + 0.05)
    bad_mm = mlp(os.path.join(work, "bad_mm.onnx"), w1 + 0.05, w2)

    # Data: .npy per input with a leading batch of 3 sets of [2, 4].
    npy_dir = os.path.join(work, "npy_data")
    os.makedirs(npy_dir)
    xs = rng.randn(3, 2, 4).astype(np.float32)
    np.save(os.path.join(npy_dir, "x.npy"), xs)
    # Data: test-data layout with 2 sets.
    td_dir = os.path.join(work, "td_data")
    for s in range(2):
        os.makedirs(os.path.join(td_dir, "test_data_set_%d" % s))
        write_pb(os.path.join(td_dir, "test_data_set_%d" % s, "input_0.pb"), xs[s], "x")

    # Identical models pass, with both layouts.
    for d, n in ((npy_dir, 3), (td_dir, 2)):
        rc, out, err = ferry(args, "verify", "--reference", ref, "--candidate", same, "--data", d)
        check(rc == 0 and "verdict: PASS" in out, "identical models pass on %s (rc %d, %s)" % (os.path.basename(d), rc, err.strip()))
        check("(%d input sets)" % n in out, "%d input sets read from %s" % (n, os.path.basename(d)))
        check("top-1 agreement 100.0%" in out, "classifier output gets top-1 agreement")

    # A perturbed candidate fails; JSON carries the statistics; --report writes Markdown.
    report = os.path.join(work, "report.md")
    rc, out, err = ferry(args, "verify", "--reference", ref, "--candidate", bad_fc, "--data", npy_dir, "--json",
                         "--report", report)
    check(rc == 1, "perturbed candidate: exit 1 (got %d, %s)" % (rc, err.strip()))
    j = json.loads(out) if out.strip().startswith("{") else {}
    outs = {o["name"]: o for o in j.get("outputs", [])}
    check(not j.get("pass", True) and j.get("verdict", "").startswith("FAIL"), "JSON verdict FAIL")
    check("logits" in outs and not outs["logits"]["pass"], "logits out of tolerance")
    check("feat" in outs and outs["feat"]["pass"] and outs["feat"]["max_abs"] == 0, "feat identical")
    if "logits" in outs:
        lo = outs["logits"]
        # Expected statistics computed here with numpy.
        h = np.maximum(xs.reshape(6, 4).astype(np.float32) @ w1.astype(np.float32), 0)
        a = h @ w2.astype(np.float32)
        b = h @ (w2 + 0.05).astype(np.float32)
        d = np.abs(b - a)
        check(abs(lo["max_abs"] - d.max()) < 1e-4, "max_abs %.6g ~ numpy %.6g" % (lo["max_abs"], d.max()))
        cos = float((a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum()))
        check(abs(lo["cosine"] - cos) < 1e-5, "cosine %.6g ~ numpy %.6g" % (lo["cosine"], cos))
        check(abs(lo["rmse"] - np.sqrt((d * d).mean())) < 1e-4, "rmse ~ numpy")
        check(lo["min_passing_atol"] > 0 and lo["elements"] == 18, "min passing atol and element count")
        check("classifier" in lo and lo["classifier"]["rows"] == 6, "classifier rows over 3 sets of 2")
    check(os.path.exists(report), "--report written")
    if os.path.exists(report):
        md = open(report).read()
        shas = [m["weights_sha256"] for m in j.get("models", [])]
        check("**Verdict: FAIL" in md and "| logits |" in md, "report has verdict and output table")
        check(len(shas) == 2 and all(s and s in md for s in shas), "report has both weights SHA-256")
        check("verify --reference" in md and "--report" in md, "report has the command line")
    rc, out, _ = ferry(args, "inspect", ref, "--json")
    check(json.loads(out)["weights_sha256"] == (j.get("models") or [{}])[0].get("weights_sha256"),
          "verify's weights SHA-256 is inspect's")

    # Per-output tolerance overrides make it pass.
    rc, out, err = ferry(args, "verify", "--reference", ref, "--candidate", bad_fc, "--data", npy_dir,
                         "--tolerance", "logits=10,0")
    check(rc == 0, "--tolerance logits=10,0 passes (rc %d %s)" % (rc, err.strip()))

    # Per layer: the first layer out of tolerance is the perturbed one.
    for model, node in ((bad_fc, "fc"), (bad_mm, "mm")):
        rc, out, err = ferry(args, "verify", "--reference", ref, "--candidate", model, "--data", npy_dir,
                             "--per-layer", "--json")
        j = json.loads(out) if out.strip().startswith("{") else {}
        first = (j.get("per_layer") or {}).get("first_out_of_tolerance") or {}
        check(rc == 1 and first.get("node") == node, "per-layer names %r first (got %r)" % (node, first))
        rc, out, err = ferry(args, "verify", "--reference", ref, "--candidate", model, "--data", npy_dir, "--per-layer")
        line = [l for l in out.splitlines() if "first out of tolerance" in l and "<--" in l]
        check(len(line) == 1 and (" %s " % node) in line[0], "text table marks %r (%r)" % (node, line))
    # Renamed tensors are listed as unmatched, not failures.
    renamed = mlp(os.path.join(work, "renamed.onnx"), w1, w2, rename_relu=True)
    rc, out, err = ferry(args, "verify", "--reference", ref, "--candidate", renamed, "--data", npy_dir, "--per-layer", "--json")
    j = json.loads(out) if out.strip().startswith("{") else {}
    layers = {l["tensor"]: l for l in (j.get("per_layer") or {}).get("layers", [])}
    check(rc == 0 and layers.get("r", {}).get("state") == "unmatched", "renamed tensor is unmatched (rc %d)" % rc)
    check((j.get("per_layer") or {}).get("candidate_only_tensors") == 1, "candidate-only tensor counted")

    # Mismatched outputs: a missing name is unmatched (exit 1), a different shape incomparable.
    other = mlp(os.path.join(work, "other_names.onnx"), w1, w2, out_names=("scores", "feat"))
    rc, out, err = ferry(args, "verify", "--reference", ref, "--candidate", other, "--data", npy_dir)
    check(rc == 1 and "UNMATCHED" in out and "scores" in out, "renamed output: unmatched, exit 1 (rc %d)" % rc)
    wide = mlp(os.path.join(work, "wide.onnx"), w1, rng.randn(5, 4), logits_cols=4)
    rc, out, err = ferry(args, "verify", "--reference", ref, "--candidate", wide, "--data", npy_dir)
    check(rc == 1 and "INCOMPARABLE" in out and "[2,3] vs [2,4]" in out, "shape mismatch: incomparable, exit 1")

    # Labels: accuracy of both and per class.
    labels = os.path.join(work, "labels.npy")
    np.save(labels, np.array([0, 1, 2, 0, 1, 2], np.int64))
    rc, out, err = ferry(args, "verify", "--reference", ref, "--candidate", bad_fc, "--data", npy_dir,
                         "--labels", labels, "--json", "--top-k", "2")
    j = json.loads(out) if out.strip().startswith("{") else {}
    c = ({o["name"]: o for o in j.get("outputs", [])}.get("logits") or {}).get("classifier", {})
    h = np.maximum(xs.reshape(6, 4).astype(np.float32) @ w1.astype(np.float32), 0)
    want = float(np.mean(np.argmax(h @ w2.astype(np.float32), 1) == np.array([0, 1, 2, 0, 1, 2])))
    check(c.get("labeled") == 6 and abs(c.get("reference_accuracy", -1) - want) < 1e-9 and c.get("k") == 2,
          "labels: reference accuracy %r == %r" % (c.get("reference_accuracy"), want))
    check(len(c.get("per_class", [])) == 3, "labels: per-class accuracy")
    bad_labels = os.path.join(work, "labels5.npy")
    np.save(bad_labels, np.zeros(5, np.int64))
    expect_error(args, "label count", 3, ["labels5.npy", "5 labels"], "verify", "--reference", ref,
                 "--candidate", same, "--data", npy_dir, "--labels", bad_labels)

    # --validate: the first NaN/Inf layer, with one model or two.
    for kind, node in (("log", "log0"), ("div", "div0")):
        m = nan_model(os.path.join(work, "nan_%s.onnx" % kind), kind)
        rc, out, err = ferry(args, "verify", m, "--validate", "--data", npy_dir)
        check(rc == 1 and ("'%s'" % node) in out and "first NaN/Inf" in out,
              "--validate names %r (rc %d, %s)" % (node, rc, out.strip()[-200:]))
        rc, out, err = ferry(args, "verify", m, "--validate", "--data", npy_dir, "--json")
        j = json.loads(out) if out.strip().startswith("{") else {}
        f = (j.get("validate") or [{}])[0].get("first_non_finite") or {}
        check(f.get("node") == node and f.get("nan", 0) > 0, "--validate JSON names %r" % node)
    rc, out, err = ferry(args, "verify", ref, "--validate", "--data", npy_dir)
    check(rc == 0 and "no layer produces NaN or Inf" in out, "--validate on a clean model: exit 0")
    rc, out, err = ferry(args, "verify", "--reference", ref, "--candidate", same, "--data", npy_dir, "--validate")
    check(rc == 0 and out.count("no layer produces NaN or Inf") == 2, "--validate with two models")

    # Golden capture, then verify against it.
    gdir = os.path.join(work, "golden")
    rc, out, err = ferry(args, "golden", "capture", ref, "-o", gdir, "--count", "3", "--seed", "7")
    check(rc == 0 and os.path.isdir(os.path.join(gdir, "test_data_set_4")), "golden capture writes 3+2 sets (rc %d %s)" % (rc, err.strip()))
    check("'batch' set to 1" in out, "capture says which default it chose for the batch")
    man = json.load(open(os.path.join(gdir, "golden.json"))) if os.path.exists(os.path.join(gdir, "golden.json")) else {}
    check([s["kind"] for s in man.get("sets", [])] == ["random"] * 3 + ["zeros", "large"], "set kinds in golden.json")
    rc, out, err = ferry(args, "verify", ref, "--golden", gdir)
    check(rc == 0 and "verdict: PASS" in out, "model passes its own golden data (rc %d %s)" % (rc, err.strip()))
    rc, out, err = ferry(args, "verify", bad_fc, "--golden", gdir)
    check(rc == 1, "perturbed model fails the golden data")
    rc, out, err = ferry(args, "run", ref, "--test-data", gdir, "--atol", "1e-5")
    check(rc == 0, "ferry run --test-data reads captured data")
    x0 = numpy_helper.to_array(onnx.load_tensor(os.path.join(gdir, "test_data_set_0", "input_0.pb")))
    check(x0.shape == (1, 4) and x0.dtype == np.float32, "captured input shape [1,4] float32")
    # Same seed, same bytes.
    g2 = os.path.join(work, "golden2")
    ferry(args, "golden", "capture", ref, "-o", g2, "--count", "3", "--seed", "7")
    same_bytes = all(open(os.path.join(gdir, "test_data_set_%d" % s, f), "rb").read() ==
                     open(os.path.join(g2, "test_data_set_%d" % s, f), "rb").read()
                     for s in range(5) for f in ("input_0.pb", "output_0.pb")) if os.path.isdir(g2) else False
    check(same_bytes, "capture is deterministic for a seed")
    expect_error(args, "existing golden folder", 3, ["golden", "--force"], "golden", "capture", ref, "-o", gdir)
    rc, out, err = ferry(args, "golden", "capture", ref, "-o", gdir, "--force", "--count", "1", "--shape", "x=8,4")
    check(rc == 0 and not os.path.exists(os.path.join(gdir, "test_data_set_3")), "--force replaces the folder")
    x0 = numpy_helper.to_array(onnx.load_tensor(os.path.join(gdir, "test_data_set_0", "input_0.pb")))
    check(x0.shape == (8, 4), "--shape x=8,4 gives batch 8")
    rc, out, err = ferry(args, "verify", ref, "--golden", gdir)
    check(rc == 0, "batch-8 golden data passes")
    check(not [p for p in os.listdir(work) if p.startswith(".golden")], "no temp folders left")
    expect_error(args, "capture --shape unknown input", 2, ["'nope'"], "golden", "capture", ref, "-o",
                 os.path.join(work, "g3"), "--shape", "nope=1,4")
    expect_error(args, "capture --shape wrong fixed dim", 2, ["x", "4"], "golden", "capture", ref, "-o",
                 os.path.join(work, "g3"), "--shape", "x=1,5")
    check(not os.path.exists(os.path.join(work, "g3")), "failed capture writes nothing")

    # Embedding model: ids feed a Gather through a Cast; ids stay within the table.
    table = rng.randn(11, 3).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Cast", ["ids"], ["ids32"], to=TensorProto.INT32, name="cast"),
         helper.make_node("Gather", ["table", "ids32"], ["emb"], name="embed"),
         helper.make_node("ReduceSum", ["emb"], ["pooled"], axes=[1], keepdims=0, name="pool")],
        "emb", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(table, "table")])
    emb = os.path.join(work, "emb.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 12)]), emb)
    edir = os.path.join(work, "golden_emb")
    rc, out, err = ferry(args, "golden", "capture", emb, "-o", edir)
    check(rc == 0, "capture of an embedding model (rc %d %s)" % (rc, err.strip()))
    man = json.load(open(os.path.join(edir, "golden.json"))) if os.path.exists(os.path.join(edir, "golden.json")) else {}
    kinds = [s["kind"] for s in man.get("sets", [])]
    check(kinds[-2:] == ["shortest", "longest"], "shortest and longest sequence sets (%r)" % kinds)
    check("'seq' set to 16" in out and "[0, 10]" in out, "capture notes seq default and the table range")
    ids = [numpy_helper.to_array(onnx.load_tensor(os.path.join(edir, "test_data_set_%d" % s, "input_0.pb")))
           for s in range(len(kinds))] if kinds else []
    check(ids and all(a.min() >= 0 and a.max() <= 10 for a in ids), "ids within the 11-row table")
    check(ids and ids[kinds.index("shortest")].shape == (1, 1), "shortest set has length 1")
    check(ids and ids[kinds.index("large")].max() == 10, "large set uses the last row")
    rc, out, err = ferry(args, "verify", emb, "--golden", edir)
    check(rc == 0, "embedding model passes its golden data")
    rdir = os.path.join(work, "golden_range")
    rc, out, err = ferry(args, "golden", "capture", emb, "-o", rdir, "--range", "ids=2,3", "--shape", "ids=2,6")
    ids = numpy_helper.to_array(onnx.load_tensor(os.path.join(rdir, "test_data_set_0", "input_0.pb"))) if rc == 0 else None
    check(ids is not None and ids.shape == (2, 6) and ids.min() >= 2 and ids.max() <= 3, "--range ids=2,3")

    # Errors: one line, documented exit codes.
    expect_error(args, "nothing to verify", 2, ["--reference"], "verify")
    expect_error(args, "candidate without reference", 2, ["--reference"], "verify", "--candidate", ref, "--data", npy_dir)
    expect_error(args, "no --data", 2, ["--data"], "verify", "--reference", ref, "--candidate", same)
    expect_error(args, "--per-layer with --golden", 2, ["--per-layer"], "verify", ref, "--golden", gdir, "--per-layer")
    expect_error(args, "bad --tolerance", 2, ["OUTPUT=ATOL,RTOL"], "verify", "--reference", ref, "--candidate", same,
                 "--data", npy_dir, "--tolerance", "logits")
    expect_error(args, "--tolerance for an unknown output", 2, ["'nope'"], "verify", "--reference", ref,
                 "--candidate", same, "--data", npy_dir, "--tolerance", "nope=1,1")
    expect_error(args, "missing data folder", 3, ["no_such_dir"], "verify", "--reference", ref, "--candidate", same,
                 "--data", os.path.join(work, "no_such_dir"))
    expect_error(args, "missing reference", 3, ["missing.onnx"], "verify", "--reference", os.path.join(work, "missing.onnx"),
                 "--candidate", same, "--data", npy_dir)
    expect_error(args, "missing candidate", 3, ["candidate", "missing.onnx"], "verify", "--reference", ref,
                 "--candidate", os.path.join(work, "missing.onnx"), "--data", npy_dir)
    empty = os.path.join(work, "empty_data")
    os.makedirs(empty)
    expect_error(args, "no input file", 3, ["x.npy", "'x'"], "verify", "--reference", ref, "--candidate", same, "--data", empty)
    expect_error(args, "golden folder without outputs", 3, ["output"], "verify", ref, "--golden", td_dir)
    wrong = os.path.join(work, "wrong_rank")
    os.makedirs(wrong)
    np.save(os.path.join(wrong, "x.npy"), np.zeros((2, 5), np.float32))
    expect_error(args, "wrong input shape", 3, ["reference", "'x'", "[2,5]"], "verify", "--reference", ref, "--candidate", same,
                 "--data", wrong)
    rep2 = os.path.join(work, "no_dir", "r.md")
    expect_error(args, "report in a missing folder", 3, ["r.md"], "verify", "--reference", ref, "--candidate", same,
                 "--data", npy_dir, "--report", rep2)
    check(not os.path.exists(rep2), "no report written")

    check(os.listdir(tmp) == [], "no per-layer spill folder left in TMPDIR (%r)" % os.listdir(tmp))
    print("%d passed, %d failed" % (PASSED[0], len(FAILURES)))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
