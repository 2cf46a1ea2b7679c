#!/usr/bin/python3
"""`ferry verify` on real models.

    --case resnet18_perturb  one Conv weight of ResNet-18 shifted by 1e-2: `verify --per-layer`
                             must name exactly that Conv as the first layer out of tolerance
    --case resnet50_rss      `verify --per-layer` of ResNet-50 against itself: peak RSS under
                             2.5x the peak of one plain `ferry run` of it (getrusage of the child)
    --case zoo_golden        every zoo model passes `ferry verify MODEL --golden DIR` (the zoo's
                             test sets are at batch 1 and 8)

Models: the zoo (tools/make_zoo.py, --zoo) when it holds the model, else exported here with
Debian's torchvision (seeded weights) into --cache. No time limits.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper


def export_cnn(arch, path):
    import torch
    import torchvision
    torch.manual_seed(0)
    model = getattr(torchvision.models, arch)(weights=None).eval()
    tmp = path + ".tmp"
    torch.onnx.export(model, torch.randn(1, 3, 224, 224), tmp, opset_version=13,
                      input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}}, do_constant_folding=True)
    os.replace(tmp, path)


def cnn_model(args, arch):
    z = os.path.join(args.zoo, arch + "_op13", "model.onnx") if args.zoo else ""
    if z and os.path.exists(z):
        return z
    os.makedirs(args.cache, exist_ok=True)
    path = os.path.join(args.cache, "%s_verify_opset13.onnx" % arch)
    if not os.path.exists(path):
        export_cnn(arch, path)
    return path


def image_data(work, name, batch=1):
    """One test_data_set_0 with a seeded image input named after the model's input."""
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    x = np.random.RandomState(0).randn(batch, 3, 224, 224).astype(np.float32)
    return d, x


def run_measured(cmd):
    t0 = time.time()
    pid = os.fork()
    if pid == 0:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.execv(cmd[0], cmd)
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    return os.waitstatus_to_exitcode(status), ru.ru_maxrss, time.time() - t0


def case_resnet18_perturb(args):
    ref = cnn_model(args, "resnet18")
    m = onnx.load(ref)
    inits = {i.name: i for i in m.graph.initializer}
    convs = [n for n in m.graph.node if n.op_type == "Conv" and n.input[1] in inits]
    target = convs[len(convs) // 2]  # a Conv in the middle of the network
    w = inits[target.input[1]]
    a = numpy_helper.to_array(w) + np.float32(1e-2)
    w.CopyFrom(numpy_helper.from_array(a.astype(np.float32), w.name))
    cand = os.path.join(args.work, "resnet18_perturbed.onnx")
    onnx.save(m, cand)
    name = m.graph.input[0].name
    d, x = image_data(args.work, "r18_data")
    with open(os.path.join(d, "test_data_set_0", "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, name).SerializeToString())
    report = os.path.join(args.work, "resnet18_perturb.md")
    t0 = time.time()
    p = subprocess.run([args.ferry, "verify", "--reference", ref, "--candidate", cand, "--data", d,
                        "--per-layer", "--report", report], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    dt = time.time() - t0
    lines = p.stdout.splitlines()
    marked = [i for i, l in enumerate(lines) if "<-- first out of tolerance" in l]
    for l in lines[:4]:
        print(l)
    if marked:
        for l in lines[max(0, marked[0] - 3):marked[0] + 3]:
            print(l)
    print([l for l in lines if l.startswith("verdict")])
    print("perturbed Conv %r (weight %s, %d Convs), %.1f s" % (target.name, w.name, len(convs), dt))
    ok = p.returncode == 1 and len(marked) == 1 and (" %s " % target.name) in lines[marked[0]]
    pj = subprocess.run([args.ferry, "verify", "--reference", ref, "--candidate", cand, "--data", d,
                         "--per-layer", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    j = json.loads(pj.stdout) if pj.stdout.strip().startswith("{") else {}
    first = (j.get("per_layer") or {}).get("first_out_of_tolerance") or {}
    layers = (j.get("per_layer") or {}).get("layers", [])
    before = [l for l in layers if l["index"] < first.get("index", -1)]
    ok = ok and first.get("node") == target.name and first.get("op_type") == "Conv"
    ok = ok and before and all(l["pass"] and l["max_abs"] == 0 for l in before)
    print("%s: first layer out of tolerance %r (%d identical layers before it; rc %d %s)" %
          ("ok" if ok else "FAIL", first.get("node"), len(before), p.returncode, p.stderr.strip()))
    return 0 if ok else 1


def case_resnet50_rss(args):
    model = cnn_model(args, "resnet50")
    name = onnx.load(model, load_external_data=False).graph.input[0].name
    d, x = image_data(args.work, "r50_data")
    np.save(os.path.join(args.work, "r50_x.npy"), x)
    with open(os.path.join(d, "test_data_set_0", "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, name).SerializeToString())
    rc1, run_kib, t_run = run_measured([args.ferry, "run", model, "--input",
                                        "%s=%s" % (name, os.path.join(args.work, "r50_x.npy"))])
    rc2, ver_kib, t_ver = run_measured([args.ferry, "verify", "--reference", model, "--candidate", model,
                                        "--data", d, "--per-layer"])
    ratio = ver_kib / run_kib if run_kib else float("inf")
    ok = rc1 == 0 and rc2 == 0 and ratio < 2.5
    print("%s: ResNet-50 peak RSS: run %.1f MiB (%.1f s), verify --per-layer %.1f MiB (%.1f s), ratio %.2f "
          "(limit 2.5; exit codes %d, %d)" % ("ok" if ok else "FAIL", run_kib / 1024, t_run, ver_kib / 1024,
                                              t_ver, ratio, rc1, rc2))
    return 0 if ok else 1


def case_zoo_golden(args):
    with open(os.path.join(args.zoo, "zoo.json")) as f:
        models = json.load(f)["models"]
    failed = 0
    for m in models:
        d = os.path.join(args.zoo, m["name"])
        t0 = time.time()
        p = subprocess.run([args.ferry, "verify", os.path.join(d, "model.onnx"), "--golden", d, "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        j = json.loads(p.stdout) if p.stdout.strip().startswith("{") else {}
        batches = sorted({int(numpy_helper.to_array(onnx.load_tensor(os.path.join(d, s, "input_0.pb"))).shape[0])
                          for s in m["test_data_sets"]})
        ok = p.returncode == 0 and j.get("pass") is True and {1, 8} <= set(batches)
        failed += not ok
        worst = max([o["max_abs"] for o in j.get("outputs", []) if isinstance(o.get("max_abs"), float)] or [0])
        print("%-16s %-4s batches %s, max_abs %.3g, %.1f s %s" % (m["name"], "ok" if ok else "FAIL", batches, worst,
                                                              time.time() - t0, p.stderr.strip()[-300:]))
    print("%d models, %d failed" % (len(models), failed))
    return 1 if failed or not models else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--case", required=True, choices=["resnet18_perturb", "resnet50_rss", "zoo_golden"])
    ap.add_argument("--zoo", default="", help="folder written by tools/make_zoo.py")
    ap.add_argument("--cache", required=True, help="where models exported here are cached")
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    return {"resnet18_perturb": case_resnet18_perturb, "resnet50_rss": case_resnet50_rss,
            "zoo_golden": case_zoo_golden}[args.case](args)


if __name__ == "__main__":
    sys.exit(main())
