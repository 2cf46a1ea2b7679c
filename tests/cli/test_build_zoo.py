#!/usr/bin/python3
"""`ferry build` on issue 23's bar configs beyond the digits CNN: the zoo's ResNet-18 (fp32 +
static int8 with a fallback, a preprocessing spec, calibrated on scikit-image's photos) and the
BERT-like encoder (dynamic batch and sequence axes, fp32 + dynamic int8, no spec). Each builds,
then rebuilds in another folder with another --threads: every file and the archive must be
byte-identical, and `artifact diff` must say identical; `artifact inspect` shows the dynamic axes
by name and the spec.

    /usr/bin/python3 tests/cli/test_build_zoo.py --ferry build/src/ferry --zoo build/models/zoo --work DIR
"""
import argparse
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from clilib import check, ferry, summary  # noqa: E402
from test_build import sha256, tree  # noqa: E402

RESNET = """name: resnet18
version: 1.0.0
source: {{path: model.onnx, sha256: {sha}}}
reference:
  data: .
  random: 2
  seed: 7
  edge_cases: [zeros]
prep: prep.yaml
tolerance: {{atol: 1e-4, rtol: 1e-3}}
audit: {{targets: [ferry-cpu]}}
variants:
  - name: fp32
    steps:
      - optimize: {{level: all}}
  - name: int8
    steps:
      - quantize: {{mode: static, calibration: calib, per_channel: true}}
    tolerance: {{atol: 1.5, rtol: 0.5}}
    edge_cases: false
fallback: int8
"""
PREP = """inputs:
  - name: image
    image:
      decode: {exif: apply}
      color: rgb
      resize: {shorter_side: 256, filter: pil_bilinear}
      crop: {center: [224, 224]}
      scale: 0.00392156862745098
      mean: [0.485, 0.456, 0.406]
      std: [0.229, 0.224, 0.225]
"""
BERT = """name: bert-encoder
version: 1.0.0
source: {{path: model.onnx, sha256: {sha}}}
reference:
  data: .
tolerance: {{atol: 1e-4, rtol: 1e-3}}
tolerances:
  hidden: {{atol: 2e-4, rtol: 1e-3}}
audit: {{targets: [ferry-cpu]}}
variants:
  - name: fp32
    steps:
      - optimize: {{level: all}}
  - name: int8
    steps:
      - quantize: {{mode: dynamic}}
    tolerance: {{atol: 0.5, rtol: 0.5}}
    tolerances:
      hidden: {{atol: 0.5, rtol: 0.5}}
fallback: int8
"""


def project(root, zoo_model, config, extra=None):
    shutil.copytree(zoo_model, root)
    with open(os.path.join(root, "ferry.yaml"), "w") as f:
        f.write(config.format(sha=sha256(os.path.join(root, "model.onnx"))))
    if extra:
        extra(root)
    return os.path.join(root, "ferry.yaml")


def resnet_extra(root):
    """prep.yaml and calib/image.npy: six scikit-image photos, resized and normalised."""
    from skimage import data
    from PIL import Image
    with open(os.path.join(root, "prep.yaml"), "w") as f:
        f.write(PREP)
    mean = np.array([0.485, 0.456, 0.406], np.float32)
    std = np.array([0.229, 0.224, 0.225], np.float32)
    xs = []
    for name in ["astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field",
                 "immunohistochemistry"]:
        im = Image.fromarray(getattr(data, name)()).convert("RGB").resize((224, 224),
                                                                          Image.BILINEAR)
        xs.append(((np.asarray(im, np.float32) / 255 - mean) / std).transpose(2, 0, 1))
    os.makedirs(os.path.join(root, "calib"))
    np.save(os.path.join(root, "calib", "image.npy"), np.stack(xs).astype(np.float32))


def build_twice(args, work, name, zoo_model, config, extra=None):
    cfg_a = project(os.path.join(work, name + "_a"), zoo_model, config, extra)
    cfg_b = project(os.path.join(work, "elsewhere", name + "_b"), zoo_model, config, extra)
    out_a, out_b = os.path.join(work, "out_a", name), os.path.join(work, "elsewhere", "out", name)
    os.makedirs(os.path.dirname(out_a), exist_ok=True)
    os.makedirs(os.path.dirname(out_b), exist_ok=True)
    rc, so, se = ferry(args, "build", cfg_a, "-o", out_a, "--archive", "--threads", "2",
                       "--bench-runs", "2")
    check(rc == 0, "%s: build exit 0 (%s)" % (name, (so + se).strip()[-500:]))
    rc, so, se = ferry(args, "build", cfg_b, "-o", out_b, "--archive", "--threads", "1",
                       "--bench-runs", "0")
    check(rc == 0, "%s: rebuild exit 0 (%s)" % (name, (so + se).strip()[-500:]))
    ta, tb = tree(out_a), tree(out_b)
    differ = sorted(k for k in set(ta) | set(tb) if ta.get(k) != tb.get(k))
    check(ta and not differ, "%s: rebuild in another folder with other --threads is byte-identical "
          "(%d files; differ: %s)" % (name, len(ta), differ[:5]))
    check(open(out_a + ".ferry", "rb").read() == open(out_b + ".ferry", "rb").read(),
          "%s: archives byte-identical (sha256 %s)" % (name, sha256(out_a + ".ferry")))
    rc, so, _ = ferry(args, "artifact", "diff", out_a, out_b + ".ferry")
    check(rc == 0 and "identical" in so, "%s: artifact diff says identical" % name)
    rc, so, se = ferry(args, "artifact", "verify", out_a, "--golden")
    check(rc == 0, "%s: artifact verify --golden passes (%s)" % (name, (so + se).strip()[-300:]))
    rc, so, _ = ferry(args, "artifact", "inspect", out_a)
    return so


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    so = build_twice(args, work, "resnet18", os.path.join(args.zoo, "resnet18_op17"), RESNET,
                     resnet_extra)
    check("image: image, rgb, resize shorter side 256 pil_bilinear" in so and
          "int8 (fallback)" in so, "resnet18: inspect shows the spec and the fallback")
    so = build_twice(args, work, "bert", os.path.join(args.zoo, "bert_encoder"), BERT)
    check("ids  int64[batch, sequence]" in so and "hidden  float32[batch, sequence, 256]" in so,
          "bert: inspect shows the dynamic axes by name")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
