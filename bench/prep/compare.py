#!/usr/bin/env python3
"""Issue 22's speed bar, side by side: one 1920x1080 JPEG decoded, resized to 224x224,
normalised (ImageNet mean/std, float32) and laid out CHW, in-process, one thread:

  ferry   `ferry prep bench SPEC IMAGE` (C++: libjpeg-turbo, the filter's own arithmetic)
  opencv  cv2.imdecode + cv2.cvtColor(BGR2RGB) + cv2.resize + NumPy normalise + transpose
  pil     Image.open + convert + resize + NumPy normalise + transpose (the pil_* filters' peer)

per filter pair (cv2_linear / INTER_LINEAR, cv2_area / INTER_AREA, pil_bilinear / BILINEAR),
alternating ferry and the peer in rounds; p50 of each, and the ratio ferry / peer.

    .venv/bin/python bench/prep/compare.py --ferry build/src/ferry [--runs 50] [--rounds 3]
"""
import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time

import cv2
import numpy as np
from PIL import Image

ASTRONAUT = "/usr/lib/python3/dist-packages/skimage/data/astronaut.png"
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
SPEC = """inputs:
  - name: x
    image:
      decode: {{exif: ignore}}
      color: rgb
      resize: {{size: [224, 224], filter: {filter}}}
      scale: 0.00392156862745098
      mean: [0.485, 0.456, 0.406]
      std: [0.229, 0.224, 0.225]
"""
CV2 = {"cv2_linear": cv2.INTER_LINEAR, "cv2_area": cv2.INTER_AREA}
PIL = {"pil_bilinear": Image.BILINEAR}


def photo():
    """A 1920x1080 JPEG (quality 90) of scikit-image's astronaut (Debian's python3-skimage),
    resized up with Pillow."""
    img = Image.open(ASTRONAUT).convert("RGB").resize((1920, 1080), Image.BICUBIC)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def opencv_steps(data, interp):
    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    small = cv2.resize(rgb, (224, 224), interpolation=interp)
    x = (small.astype(np.float32) * np.float32(1 / 255) - MEAN) / STD
    return np.ascontiguousarray(x.transpose(2, 0, 1))[None]


def pil_steps(data, resample):
    img = Image.open(io.BytesIO(data)).convert("RGB").resize((224, 224), resample)
    x = (np.asarray(img, np.float32) * np.float32(1 / 255) - MEAN) / STD
    return np.ascontiguousarray(x.transpose(2, 0, 1))[None]


def time_python(fn, runs, warmup=3):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1000)
    return float(np.median(ts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    cv2.setNumThreads(1)
    data = photo()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "photo.jpg")
        open(path, "wb").write(data)
        for filt in list(CV2) + list(PIL):
            spec = os.path.join(tmp, filt + ".yaml")
            open(spec, "w").write(SPEC.format(filter=filt))
            ferry_ms, peer_ms = [], []
            for _ in range(a.rounds):
                out = subprocess.run([a.ferry, "prep", "bench", spec, path, "--runs", str(a.runs),
                                      "--json"], capture_output=True, text=True, check=True)
                ferry_ms.append(json.loads(out.stdout)[0]["total_p50_ms"])
                if filt in CV2:
                    peer_ms.append(time_python(lambda: opencv_steps(data, CV2[filt]), a.runs))
                else:
                    peer_ms.append(time_python(lambda: pil_steps(data, PIL[filt]), a.runs))
            f, p = min(ferry_ms), min(peer_ms)
            peer = "opencv" if filt in CV2 else "pillow"
            rows.append({"filter": filt, "peer": peer, "ferry_p50_ms": f, "peer_p50_ms": p,
                         "ratio": f / p})
            print(f"{filt:14s} ferry p50 {f:7.3f} ms   {peer} p50 {p:7.3f} ms   "
                  f"ferry/{peer} {f / p:5.2f}", flush=True)
    print(f"(1920x1080 JPEG {len(data)} bytes -> float32[1,3,224,224]; best of {a.rounds} rounds "
          f"of {a.runs} runs each, alternating; one thread; cv2 {cv2.__version__}, "
          f"Pillow {Image.__version__})")
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
