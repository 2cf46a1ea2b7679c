#!/usr/bin/python3
"""`ferry inspect --json` on a torchvision ResNet-18 export reports the same parameter count
and weights SHA-256 as an independent computation with Debian's onnx: SHA-256 over the raw
little-endian bytes of every initializer, in graph order.

The model is exported once with Debian's torch (seeded random weights) and cached in --cache.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def export(path):
    import torch
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    tmp = path + ".tmp"
    torch.onnx.export(model, torch.randn(1, 3, 224, 224), tmp, opset_version=13,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, do_constant_folding=True)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--cache", required=True)
    args = ap.parse_args()
    os.makedirs(args.cache, exist_ok=True)
    path = os.path.join(args.cache, "resnet18_opset13.onnx")
    if not os.path.exists(path):
        export(path)
    m = onnx.load(path)
    h = hashlib.sha256()
    params = 0
    nbytes = 0
    for init in m.graph.initializer:
        a = numpy_helper.to_array(init)
        b = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        h.update(b)
        params += a.size
        nbytes += len(b)
    p = subprocess.run([args.ferry, "inspect", path, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        print("FAIL: ferry inspect exited %d: %s" % (p.returncode, p.stderr.strip()))
        print("0 passed, 1 failed")
        return 1
    j = json.loads(p.stdout)
    checks = [
        ("parameter_count", j["parameter_count"], params),
        ("parameter_bytes", j["parameter_bytes"], nbytes),
        ("weights_sha256", j["weights_sha256"], h.hexdigest()),
        ("input batch dim is symbolic", j["inputs"][0]["shape"][0], "batch"),
        ("Conv count", j["op_histogram"].get("Conv"), sum(1 for n in m.graph.node if n.op_type == "Conv")),
    ]
    failed = 0
    for name, got, want in checks:
        ok = got == want
        failed += not ok
        print("%s %s: ferry %s, onnx %s" % ("ok:  " if ok else "FAIL:", name, got, want))
    print("%d passed, %d failed" % (len(checks) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
