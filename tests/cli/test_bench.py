#!/usr/bin/python3
"""`ferry bench`: JSON keys present and sane, --profile shows providers per node (cpu, fused,
reference), random integer ids stay inside the embedding table, and bad --shape / --input /
--provider give one error line with the documented exit code. No timing is asserted.

Models are built here with Debian's onnx (1.12).
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

KEYS = ["load_ms", "first_ms", "min_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms", "runs", "threads",
        "throughput", "peak_rss_mb"]


def conv_model(work):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal((8,)).astype(np.float32), "b")
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv0", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"], name="relu0"),
         helper.make_node("Softsign", ["r"], ["y"], name="sig0")],  # no cpu kernel
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8, 16, 16])], [w, b])
    path = os.path.join(work, "conv.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def embedding_model(work):
    # Gather from a 7-row table: an id >= 7 would make the run fail.
    table = numpy_helper.from_array(np.arange(7 * 4, dtype=np.float32).reshape(7, 4), "table")
    g = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["e"], name="embed")],
        "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, "seq"])],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, "seq", 4])], [table])
    path = os.path.join(work, "embed.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def two_input_model(work):
    # a and b share the symbolic dims batch and seq: Add needs them equal.
    g = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"], name="add")],
        "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", "seq"]),
              helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])])
    path = os.path.join(work, "add.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    conv = conv_model(args.work)

    rc, out, err = ferry(args, "bench", conv, "--shape", "x=2x3x16x16", "--runs", "7", "--warmup", "1",
                         "--threads", "1", "--json")
    check(rc == 0, "bench --json exits 0 (%r)" % err.strip()[:300])
    j = json.loads(out) if rc == 0 else {}
    for k in KEYS:
        check(k in j, "json has key %s" % k)
    if rc == 0:
        check(j["runs"] == 7 and j["threads"] == 1, "runs and threads echoed")
        check(0 < j["min_ms"] <= j["p50_ms"] <= j["p90_ms"] <= j["p99_ms"] <= j["max_ms"],
              "min <= p50 <= p90 <= p99 <= max")
        check(j["load_ms"] > 0 and j["first_ms"] > 0 and j["throughput"] > 0, "load, first, throughput > 0")
        check(j["peak_rss_mb"] > 1, "peak RSS in MB")
        check(j.get("cpu_ms", 0) > 0, "CPU time per run")

    rc, out, err = ferry(args, "bench", conv, "--shape", "x=1x3x16x16", "--runs", "3", "--profile", "--json")
    j = json.loads(out) if rc == 0 else {}
    nodes = {n["name"]: n for n in j.get("nodes", [])}
    check(nodes.get("conv0", {}).get("provider") == "cpu", "profile: conv0 on cpu (%r)" % nodes.get("conv0"))
    check(nodes.get("relu0", {}).get("provider") == "fused" and nodes["relu0"]["fused_into"] == "conv0",
          "profile: relu0 fused into conv0")
    check(nodes.get("sig0", {}).get("provider") == "reference", "profile: sig0 on reference")
    check("ops" in j, "profile: per op type summary")

    rc, out, err = ferry(args, "bench", conv, "--shape", "x=1x3x16x16", "--runs", "2", "--profile")
    check(rc == 0 and "p50" in out and "per op type" in out and "fused" in out, "human output with profile")

    rc, out, err = ferry(args, "bench", conv, "--shape", "x=1x3x16x16", "--runs", "2",
                         "--provider", "reference", "--json", "--profile")
    j = json.loads(out) if rc == 0 else {}
    check(rc == 0 and all(n["provider"] == "reference" for n in j.get("nodes", [None])),
          "--provider reference runs every node on reference")

    emb = embedding_model(args.work)
    rc, out, err = ferry(args, "bench", emb, "--shape", "ids=1x64", "--runs", "3", "--json")
    check(rc == 0, "random ids stay below the table's row count (%r)" % err.strip()[:300])

    # Symbolic dims without --shape are 1, said on stderr; --json stays one document.
    rc, out, err = ferry(args, "bench", conv, "--runs", "2", "--json")
    j = json.loads(out) if rc == 0 else {}
    check(rc == 0 and j.get("inputs", {}).get("x") == [1, 3, 16, 16], "symbolic batch defaults to 1 (%r)" % err.strip()[:300])
    check("'x'" in err and "batch=1" in err and "--shape" in err, "the default is said on stderr (%r)" % err.strip()[:300])
    add = two_input_model(args.work)
    rc, out, err = ferry(args, "bench", add, "--shape", "a=2x5", "--runs", "2", "--json")
    j = json.loads(out) if rc == 0 else {}
    check(rc == 0 and j.get("inputs", {}).get("b") == [2, 5],
          "a symbol fixed by --shape of one input sizes the others (%r)" % err.strip()[:300])
    check("seq=5" in err and "batch=2" in err, "the bound sizes are said (%r)" % err.strip()[:300])
    expect_error(args, "bad --shape syntax", 2, ["x=1xfoo"], "bench", conv, "--shape", "x=1xfoo")
    expect_error(args, "--shape of an unknown input", 2, ["'nope'", "x"], "bench", conv, "--shape", "nope=1x3")
    expect_error(args, "--shape against the declared dims", 3, ["x", "16"], "bench", conv,
                 "--shape", "x=1x3x15x16")
    expect_error(args, "bad --provider", 2, ["gpu"], "bench", conv, "--shape", "x=1x3x16x16", "--provider", "gpu")
    expect_error(args, "--runs 0", 2, ["--runs"], "bench", conv, "--shape", "x=1x3x16x16", "--runs", "0")
    expect_error(args, "missing model", 3, ["missing.onnx"], "bench", os.path.join(args.work, "missing.onnx"))

    print("%d passed, %d failed" % (PASSED[0], len(FAILURES)))
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
