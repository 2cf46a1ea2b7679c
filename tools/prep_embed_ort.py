#!/usr/bin/env python3
"""The ONNX Runtime side of `ferry prep embed --check` (src/prep/embed_check.cc), run by the
project venv's python.

    prep_embed_ort.py --dir D --images N --inputs NAME...

D holds original.onnx, embedded.onnx and, per image k, D/k/raw_i.npy (the decoded image for
input i) and D/k/spec_i.npy (the spec's tensor for input i). Writes D/k/emb_out_j.npy (the
embedded model's outputs on the raw images) and D/k/ref_out_j.npy (the original model's on the
spec's tensors). Exit 0, or 1 with one line on stderr.
"""
import argparse
import os
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--images", type=int, required=True)
    ap.add_argument("--inputs", nargs="+", required=True)
    a = ap.parse_args()
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    emb = ort.InferenceSession(os.path.join(a.dir, "embedded.onnx"), opts,
                               providers=["CPUExecutionProvider"])
    ref = ort.InferenceSession(os.path.join(a.dir, "original.onnx"), opts,
                               providers=["CPUExecutionProvider"])
    for k in range(a.images):
        d = os.path.join(a.dir, str(k))
        raw = {n: np.load(os.path.join(d, f"raw_{i}.npy")) for i, n in enumerate(a.inputs)}
        spec = {n: np.load(os.path.join(d, f"spec_{i}.npy")) for i, n in enumerate(a.inputs)}
        for j, t in enumerate(emb.run(None, raw)):
            np.save(os.path.join(d, f"emb_out_{j}.npy"), np.ascontiguousarray(t))
        for j, t in enumerate(ref.run(None, spec)):
            np.save(os.path.join(d, f"ref_out_{j}.npy"), np.ascontiguousarray(t))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # noqa: BLE001 - one line for the caller
        print(f"prep_embed_ort: {type(e).__name__}: {e}".replace("\n", " "), file=sys.stderr)
        sys.exit(1)
