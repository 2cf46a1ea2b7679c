#!/usr/bin/env python3
"""Ferry's int8 execution of static QDQ models beside ONNX Runtime on the same file.

ResNet-18 and MobileNetV2 from the zoo are quantized with `ferry quantize --mode static
--per-channel` (calibrated on 32 seeded inputs, as issue 6's bar). Both engines run the written
file on 10 other seeded inputs; >= 99% of the logits must agree with ORT's within one output
quantization step (the step a static quantization of that output would use: (max - min) / 255 of ORT's logits for
that input). `ferry bench --json --profile` must show every Conv inside an int8 convolution
(`cpu (QConv)`) and no node but Flatten on the reference kernels.

    test_int8_agreement.py --ferry build/src/ferry --zoo build/models/zoo --work build/tests/int8_work
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort

MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)
FAILED = []


def has_vnni():
    """Whether oneDNN's int8 convolutions are exact here (VNNI or AMX; without them Ferry declines
    weights above 64 in magnitude and runs the float steps, and ORT's u8 x s8 kernels saturate)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = set(f.read().split())
    except OSError:
        return False
    return bool(flags & {"avx512_vnni", "avx_vnni", "amx_int8"})


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILED.append(what)


def images(seed, n):
    r = np.random.RandomState(seed)
    return ((r.rand(n, 3, 224, 224).astype(np.float32) - MEAN) / STD).astype(np.float32)


def ferry(args, *cmd):
    p = subprocess.run([args.ferry] + list(cmd), capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def case(args, name, folder, bar):
    work = os.path.join(args.work, name)
    calib = os.path.join(work, "calib")
    os.makedirs(calib, exist_ok=True)
    if not os.path.exists(os.path.join(calib, "image.npy")):
        np.save(os.path.join(calib, "image.npy"), images(1, 32))
    model = os.path.join(args.zoo, folder, "model.onnx")
    qdq = os.path.join(work, name + "_int8.onnx")
    rc, _, err = ferry(args, "quantize", model, "-o", qdq, "--mode", "static", "--calibration",
                       calib, "--per-channel")
    check(rc == 0, "%s: ferry quantize static per-channel (%s)" % (name, err.strip()[:300]))
    if rc != 0:
        return
    sess = ort.InferenceSession(qdq, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0].name
    total = close = 0
    worst = 0.0
    for k in range(10):
        x = images(100 + k, 1)
        xp = os.path.join(work, "x%d.npy" % k)
        np.save(xp, x)
        out_dir = os.path.join(work, "out%d" % k)
        rc, _, err = ferry(args, "run", qdq, "--input", "%s=%s" % (inp, xp), "--output-dir", out_dir)
        check(rc == 0, "%s: ferry run input %d (%s)" % (name, k, err.strip()[:300]))
        if rc != 0:
            return
        out_name = sess.get_outputs()[0].name
        got = np.load(os.path.join(out_dir, out_name + ".npy"))
        want = sess.run(None, {inp: x})[0]
        step = (want.max() - want.min()) / 255.0
        d = np.abs(got.astype(np.float64) - want.astype(np.float64))
        total += d.size
        close += int((d <= step * (1 + 1e-6)).sum())
        worst = max(worst, float(d.max() / step))
    frac = close / total
    if not args.vnni:
        print("%s: no VNNI/AMX on this CPU: int8 convolutions decline to the float steps; "
              "%.4f of the logits within one step of ORT (not checked)" % (name, frac))
        return
    print("%s: %.4f of %d logits within one output step of ORT (worst %.2f steps)" %
          (name, frac, total, worst))
    check(frac >= bar, "%s: >= %.0f%% of the logits within one output quantization step of ORT (%.4f)"
          % (name, 100 * bar, frac))
    rc, so, err = ferry(args, "bench", qdq, "--shape", "%s=1,3,224,224" % inp, "--runs", "1",
                        "--warmup", "0", "--threads", "1", "--json", "--profile")
    check(rc == 0, "%s: ferry bench (%s)" % (name, err.strip()[:300]))
    if rc != 0:
        return
    j = json.loads(so)
    by = j["nodes_by_provider"]
    print("%s: nodes by provider %s" % (name, by))
    check(by.get("cpu (QConv)", 0) >= 10, "%s: the int8 convolutions ran (%d QConv)" %
          (name, by.get("cpu (QConv)", 0)))
    ref = sorted({n["op"] for n in j["nodes"] if n["provider"].startswith("reference")})
    check(set(ref) <= {"Flatten"}, "%s: only Flatten on the reference kernels (%s)" % (name, ref))
    convs = [n for n in j["nodes"] if n["op"] == "Conv"]
    check(all(n["provider"] in ("cpu (QConv)", "fused") for n in convs),
          "%s: every Conv runs as int8 (%d)" % (name, len(convs)))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    args.vnni = has_vnni()
    case(args, "resnet18", "resnet18_op17", 0.99)
    # MobileNetV2 was at 97.5% while QAdd computed the float steps exactly: ORT's QLinearAdd rounds
    # its own way (scale ratios, two FMAs) in ~0.04% of the residual Adds' elements and the network
    # amplifies that. QAdd now rounds as QLinearAdd does (src/ops/cpu/qconv.cc): 100%, 0 steps.
    case(args, "mobilenet_v2", "mobilenet_v2", 0.99)
    if FAILED:
        print("%d check(s) failed" % len(FAILED))
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
