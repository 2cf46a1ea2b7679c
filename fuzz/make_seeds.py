#!/usr/bin/python3
"""Writes the fuzz targets' seed corpora into OUT/<target>/ (a build folder, never committed).

Models (session, passes, audit_inspect): up to two ONNX conformance models per operator from
libonnx-testdata (node/), its small pytorch-operator and simple models, the bundled example and
the zoo models under ZOO that are below the size cap. TensorProto files (tensorproto): the
conformance cases' input/output .pb files, a few per operator. .npy files (npy): generated
with numpy, every dtype Ferry reads, C and Fortran order, format versions 1-3, empty and
scalar arrays, unicode strings.
Deterministic: the same data gives the same seeds. Usage: make_seeds.py --out DIR [--zoo DIR]
"""
import argparse
import collections
import hashlib
import io
import os
import shutil
import sys

TESTDATA = "/usr/share/libonnx-testdata/data"
MAX_MODEL = 256 * 1024
MAX_PB = 64 * 1024


def copy(src, dst_dir, prefix):
    os.makedirs(dst_dir, exist_ok=True)
    with open(src, "rb") as f:
        data = f.read()
    name = prefix + "-" + hashlib.sha1(data).hexdigest()[:12]
    with open(os.path.join(dst_dir, name), "wb") as f:
        f.write(data)


def model_seeds(out, repo, zoo):
    models = []
    node_dir = os.path.join(TESTDATA, "node")
    per_op = collections.Counter()
    for case in sorted(os.listdir(node_dir)):
        op = case[len("test_"):].split("_")[0]
        path = os.path.join(node_dir, case, "model.onnx")
        if per_op[op] >= 2 or not os.path.exists(path):
            continue
        per_op[op] += 1
        models.append((case, path))
    for sub in ("pytorch-operator", "simple"):
        d = os.path.join(TESTDATA, sub)
        if not os.path.isdir(d):
            continue
        for case in sorted(os.listdir(d)):
            path = os.path.join(d, case, "model.onnx")
            if os.path.exists(path) and os.path.getsize(path) <= MAX_MODEL:
                models.append((case, path))
    models.append(("digits_cnn", os.path.join(repo, "examples/digits_cnn/model.onnx")))
    if zoo and os.path.isdir(zoo):
        for name in sorted(os.listdir(zoo)):
            path = os.path.join(zoo, name, "model.onnx")
            if os.path.exists(path) and os.path.getsize(path) <= MAX_MODEL:
                models.append(("zoo_" + name, path))
    for target in ("session", "passes", "audit_inspect"):
        for case, path in models:
            copy(path, os.path.join(out, target), case)
    return len(models)


def pb_seeds(out):
    node_dir = os.path.join(TESTDATA, "node")
    per_op = collections.Counter()
    n = 0
    for case in sorted(os.listdir(node_dir)):
        op = case[len("test_"):].split("_")[0]
        data = os.path.join(node_dir, case, "test_data_set_0")
        if per_op[op] >= 3 or not os.path.isdir(data):
            continue
        for f in sorted(os.listdir(data)):
            path = os.path.join(data, f)
            if f.endswith(".pb") and os.path.getsize(path) <= MAX_PB and per_op[op] < 3:
                per_op[op] += 1
                copy(path, os.path.join(out, "tensorproto"), case + "-" + f[:-3])
                n += 1
    return n


def npy_seeds(out):
    import numpy as np
    d = os.path.join(out, "npy")
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(0)
    arrays = []
    for dt in ("<f4", "<f8", "<f2", "|u1", "|i1", "<u2", "<i2", "<i4", "<i8", "<u4", "<u8", "|b1"):
        arrays.append((dt, (rng.standard_normal((2, 3)) * 10).astype(dt)))
    arrays += [
        ("scalar", np.array(3.5, dtype="<f4")),
        ("empty", np.zeros((0, 4), dtype="<f4")),
        ("fortran", np.asfortranarray(np.arange(12, dtype="<i8").reshape(3, 4))),
        ("rank5", np.arange(32, dtype="<f4").reshape(1, 2, 2, 2, 4)),
        ("unicode", np.array(["a", "xyz", "\u00e9t\u00e9"], dtype="<U3")),
        ("bigendian", np.arange(4, dtype=">f4")),
    ]
    n = 0
    for name, a in arrays:
        for version in ((1, 0), (2, 0), (3, 0)):
            if version == (3, 0) and a.dtype.kind != "U":
                continue
            buf = io.BytesIO()
            np.lib.format.write_array(buf, a, version=version, allow_pickle=False)
            with open(os.path.join(d, "%s-v%d" % (name, version[0])), "wb") as f:
                f.write(buf.getvalue())
            n += 1
    return n


def config_seeds(out, repo):
    """ferry.yaml files (config): the bundled example and variants of it touching every key."""
    d = os.path.join(out, "config")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(repo, "examples", "digits_cnn", "ferry.yaml")) as f:
        base = f.read()
    variants = {
        "example": base,
        "task": base.replace("audit:", "task:\n  output: logits\n  labels: labels.npy\n"
                             "  max_accuracy_drop: 2\n  max_class_drop: 10\n  top_k: 5\naudit:"),
        "convert": base.replace("- optimize: {level: all}",
                                "- optimize: {level: basic, passes: [fold_constants], fix_shape: {image: [1, 1, 8, 8]}}\n"
                                "      - convert: {opset: 13}\n"
                                "      - convert: {fp16: true, keep_fp32: [logits]}"),
        "quant": base.replace("per_channel: true", "per_channel: false, method: \"percentile:99.9\", "
                              "accuracy_budget: 1.5"),
        "tolerances": base.replace("tolerance: {atol: 1e-4, rtol: 1e-3}",
                                   "tolerance: {atol: 1e-4, rtol: 1e-3}\ntolerances:\n  logits: {atol: 1e-3}"),
        "anchors": "name: &n x\nversion: *n\nsource: {path: m.onnx, sha256: *n}\n",
    }
    for name, text in variants.items():
        with open(os.path.join(d, name + ".yaml"), "w") as f:
            f.write(text)
    return len(variants)


def http_seeds(out):
    """ferry serve infer bodies (http_request): header length line, then the body."""
    import json
    import numpy as np
    d = os.path.join(out, "http_request")
    os.makedirs(d, exist_ok=True)
    img = np.linspace(0, 1, 8, dtype=np.float32)
    seeds = {
        "json": ("", json.dumps({"id": "a", "inputs": [
            {"name": "x", "shape": [2, 4], "datatype": "FP32", "data": img.tolist()},
            {"name": "b", "shape": [2], "datatype": "BOOL", "data": [True, False]},
            {"name": "s", "shape": [1], "datatype": "BYTES", "data": ["hi"]}],
            "outputs": [{"name": "y", "parameters": {"classification": 2}}],
            "parameters": {"priority": 1, "timeout": 5}}).encode()),
        "nested": ("", json.dumps({"inputs": [{"name": "x", "shape": [2, 2], "datatype": "INT64",
                                               "data": [[1, 2], [3, -4]]}]}).encode()),
    }
    hdr = json.dumps({"inputs": [
        {"name": "x", "shape": [2, 4], "datatype": "FP32", "parameters": {"binary_data_size": 32}},
        {"name": "s", "shape": [2], "datatype": "BYTES", "parameters": {"binary_data_size": 13}}],
        "parameters": {"binary_data_output": True}}).encode()
    strings = b"\x02\x00\x00\x00ab\x03\x00\x00\x00cde"
    seeds["binary"] = (str(len(hdr)), hdr + img.tobytes() + strings)
    for name, (header, body) in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(header.encode() + b"\n" + body)
    return len(seeds)


def prep_seeds(out, repo):
    """prep: byte 0 odd + a spec (the example's, JSON and YAML variants touching every key);
    byte 0 = spec index << 2 + an encoded image: small PNGs of every colour type and bit depth,
    interlaced, and JPEGs (4:2:0, 4:4:4, gray, progressive, each EXIF orientation); byte 0 = 2 +
    CSV text."""
    import numpy as np
    from PIL import Image
    d = os.path.join(out, "prep")
    os.makedirs(d, exist_ok=True)
    n = 0

    def put(name, data):
        nonlocal n
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
        n += 1

    with open(os.path.join(repo, "examples", "digits_cnn", "prep.yaml"), "rb") as f:
        put("spec-example", b"\x01" + f.read())
    specs = {
        "cv2": "inputs:\n  - name: x\n    image:\n      decode: {exif: ignore, max_pixels: 4096}\n"
               "      color: bgr\n      resize: {shorter_side: 6, filter: cv2_area}\n"
               "      crop: {center: [4, 4]}\n      mean: [1, 2, 3]\n      std: [4, 5, 6]\n"
               "      layout: hwc\n      batch: false\n",
        "letterbox": "inputs:\n  - name: images\n    image:\n      decode: {exif: apply}\n"
                     "      color: rgb\n      resize: {size: [640, 640], filter: cv2_linear, "
                     "fit: letterbox, pad_value: 114}\n      scale: 0.00392156862745098\n",
        "outputs": "inputs:\n  - name: images\n    image:\n      decode: {exif: apply}\n"
                   "      color: rgb\n      resize: {size: [64, 64], filter: cv2_linear, "
                   "fit: letterbox}\noutputs:\n  - name: output0\n    detect: {format: yolov8, "
                   "score_threshold: 0.3, iou_threshold: 0.5, max_detections: 10, "
                   "class_agnostic: true, input: images, labels: [a, b]}\n"
                   "  - name: text\n    ctc: {blank: 0, charset: ['', x, y]}\n",
        "uint8": "version: 1\ninputs:\n  - name: a/b:c\n    image:\n      decode: {exif: apply}\n"
                 "      color: gray\n      library: cv2\n      dtype: uint8\n",
        "json": '{"inputs": [{"name": "x", "image": {"decode": {"exif": "apply"}, "color": "rgb",'
                ' "resize": {"size": [3, 4], "filter": "pil_lanczos"}, "scale": 0.5}}]}',
    }
    for name, text in specs.items():
        put("spec-" + name, b"\x01" + text.encode())
    rng = np.random.RandomState(0)
    rgb = rng.randint(0, 256, (12, 16, 3)).astype(np.uint8)
    images = {
        "png-rgb": (Image.fromarray(rgb), "PNG", {}),
        "png-gray": (Image.fromarray(rgb[:, :, 0]), "PNG", {}),
        "png-rgba": (Image.fromarray(np.dstack([rgb, rgb[:, :, :1]])), "PNG", {}),
        "png-la": (Image.fromarray(rgb[:, :, :2].copy()).convert("LA"), "PNG", {}),
        "png-palette": (Image.fromarray(rgb).convert("P"), "PNG", {}),
        "png-interlaced": (Image.fromarray(rgb), "PNG", {"interlace": 1}),
        "png-1bit": (Image.fromarray(rgb[:, :, 0] > 128), "PNG", {}),
        "jpeg-420": (Image.fromarray(rgb), "JPEG", {"quality": 75}),
        "jpeg-444": (Image.fromarray(rgb), "JPEG", {"quality": 90, "subsampling": 0}),
        "jpeg-gray": (Image.fromarray(rgb[:, :, 0]), "JPEG", {}),
        "jpeg-progressive": (Image.fromarray(rgb), "JPEG", {"progressive": True}),
    }
    for orientation in range(1, 9):
        exif = Image.Exif()
        exif[0x0112] = orientation
        images["jpeg-exif%d" % orientation] = (Image.fromarray(rgb[:9, :5]), "JPEG",
                                               {"exif": exif.tobytes()})
    for k, (name, (img, fmt, kw)) in enumerate(sorted(images.items())):
        buf = io.BytesIO()
        img.save(buf, format=fmt, **kw)
        put(name, bytes([(k * 11 % 64) << 2]) + buf.getvalue())
    # 16-bit PNG, written by hand (Pillow writes I;16 as gray 16).
    buf = io.BytesIO()
    Image.fromarray((rgb[:, :, 0].astype(np.uint16) * 257)).save(buf, format="PNG")
    put("png-gray16", bytes([20 << 2]) + buf.getvalue())
    # CSV tables (byte 0 = 2): quoting, CRLF, missing fields, categories, a text column.
    put("csv-numeric", b"\x02" + b'a,b,c\r\n1.5,x,y\r\n,"z",x\r\n-1e3,w,z\r\n')
    put("csv-text", b"\x02" + 'a,d\n"multi\nline ""q""",1\n\u00e9\u4e2d,2\n'.encode())
    table_spec = ("inputs:\n  - name: t\n    table:\n      dtype: float32\n      columns:\n"
                  "        - field: a\n          number: {missing: 0, clip: [-1, 1], mean: 0.5, "
                  "std: 2, scale: 3}\n        - field: b\n          category: {vocabulary: [x, y], "
                  "encoding: index, unknown: zeros}\n")
    put("spec-table", b"\x01" + table_spec.encode())
    return n


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--zoo", default="")
    a = p.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isdir(a.out):
        shutil.rmtree(a.out)
    m = model_seeds(a.out, repo, a.zoo)
    t = pb_seeds(a.out)
    n = npy_seeds(a.out)
    y = config_seeds(a.out, repo)
    h = http_seeds(a.out)
    p = prep_seeds(a.out, repo)
    print("make_seeds: %d models, %d TensorProto files, %d .npy files, %d configs, %d infer "
          "bodies, %d prep specs and images in %s" % (m, t, n, y, h, p, a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
