#!/usr/bin/env python3
"""The reference side of `ferry prep check`: a prep spec's image inputs through the library
its resize filter names (Pillow or OpenCV), the same steps in the same order as Ferry's
pipeline (src/prep/README.md), written as one .npy per input.

    prep_reference.py --spec SPEC.json --out DIR IMAGE...

SPEC.json is the spec as `ferry prep check` writes it (every default filled in). Writes
DIR/<input>.npy (the images stacked on the batch axis) and DIR/reference.json naming the
library and version used per input. Run it with the project venv (.venv/bin/python).
Also imported by tests/prep/test_prep.py (reference_array).
"""
import argparse
import json
import os
import sys

import numpy as np

PIL_FILTERS = {
    "pil_nearest": "NEAREST",
    "pil_bilinear": "BILINEAR",
    "pil_bicubic": "BICUBIC",
    "pil_lanczos": "LANCZOS",
    "pil_box": "BOX",
}
CV2_FILTERS = {
    "cv2_nearest": "INTER_NEAREST",
    "cv2_nearest_exact": "INTER_NEAREST_EXACT",
    "cv2_linear": "INTER_LINEAR",
    "cv2_cubic": "INTER_CUBIC",
    "cv2_area": "INTER_AREA",
}


def library_of(image_spec):
    r = image_spec.get("resize")
    if r:
        return "pil" if r["filter"].startswith("pil_") else "cv2"
    return image_spec.get("library", "pil")


def target_size(h, w, resize):
    """(H, W) after resize: a fixed size, or torchvision's Resize(int) on the shorter side."""
    if "size" in resize:
        return resize["size"][0], resize["size"][1]
    n = resize["shorter_side"]
    if w <= h:
        return int(n * h / w), n
    return n, int(n * w / h)


def decode_pil(path, image_spec):
    from PIL import Image, ImageOps

    im = Image.open(path)
    im.load()
    if image_spec["decode"]["exif"] == "apply":
        im = ImageOps.exif_transpose(im)
    return im.convert("L" if image_spec["color"] == "gray" else "RGB")


def decode_cv2(path, image_spec):
    import cv2

    flags = cv2.IMREAD_COLOR
    if image_spec["decode"]["exif"] == "ignore":
        flags |= cv2.IMREAD_IGNORE_ORIENTATION
    img = cv2.imdecode(np.fromfile(path, np.uint8), flags)
    if img is None:
        raise SystemExit(f"prep_reference: OpenCV cannot decode {path}")
    if image_spec["color"] == "gray":
        return cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


def letterbox_size(h, w, resize):
    """ultralytics' LetterBox (auto=False, scaleup=True): the scaled size and the padding."""
    H, W = resize["size"]
    r = min(H / h, W / w)
    nh, nw = int(round(h * r)), int(round(w * r))
    dh, dw = (H - nh) / 2, (W - nw) / 2
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    return nh, nw, (top, bottom, left, right)


def pixels(path, image_spec):
    """The uint8 image (H, W, C) after decode, colour, resize and crop; C is RGB order or 1."""
    lib = library_of(image_spec)
    resize = image_spec.get("resize")
    if resize and resize.get("fit") == "letterbox":
        if lib == "pil":
            from PIL import Image

            im = decode_pil(path, image_spec)
            nh, nw, pad = letterbox_size(im.height, im.width, resize)
            if (nh, nw) != (im.height, im.width):
                im = im.resize((nw, nh), resample=getattr(Image.Resampling,
                                                          PIL_FILTERS[resize["filter"]]))
            arr = np.asarray(im)
        else:
            import cv2

            arr = decode_cv2(path, image_spec)
            nh, nw, pad = letterbox_size(arr.shape[0], arr.shape[1], resize)
            if (nh, nw) != arr.shape[:2]:
                arr = cv2.resize(arr, (nw, nh), interpolation=getattr(cv2, CV2_FILTERS[resize["filter"]]))
            v = resize.get("pad_value", 114)
            arr = cv2.copyMakeBorder(arr, *pad, cv2.BORDER_CONSTANT, value=(v, v, v))
        if arr.ndim == 2:
            arr = arr[:, :, None]
        if lib == "pil":
            v = resize.get("pad_value", 114)
            top, bottom, left, right = pad
            arr = np.pad(arr, ((top, bottom), (left, right), (0, 0)), constant_values=v)
        image_spec = dict(image_spec, resize=None)
        crop = image_spec.get("crop")
        if crop:
            ch, cw = crop["center"]
            h, w = arr.shape[:2]
            top = int(round((h - ch) / 2.0))
            left = int(round((w - cw) / 2.0))
            arr = arr[top : top + ch, left : left + cw]
        return np.ascontiguousarray(arr)
    if lib == "pil":
        from PIL import Image

        im = decode_pil(path, image_spec)
        if resize:
            h, w = target_size(im.height, im.width, resize)
            flt = getattr(Image.Resampling, PIL_FILTERS[resize["filter"]])
            im = im.resize((w, h), resample=flt)
        arr = np.asarray(im)
    else:
        import cv2

        arr = decode_cv2(path, image_spec)
        if resize:
            h, w = target_size(arr.shape[0], arr.shape[1], resize)
            if (h, w) != arr.shape[:2]:
                flt = getattr(cv2, CV2_FILTERS[resize["filter"]])
                arr = cv2.resize(arr, (w, h), interpolation=flt)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    crop = image_spec.get("crop")
    if crop:
        ch, cw = crop["center"]
        h, w = arr.shape[:2]
        if ch > h or cw > w:
            raise SystemExit(f"prep_reference: crop {ch}x{cw} larger than {h}x{w} ({path})")
        top = int(round((h - ch) / 2.0))
        left = int(round((w - cw) / 2.0))
        arr = arr[top : top + ch, left : left + cw]
    return np.ascontiguousarray(arr)


def reference_array(path, image_spec):
    """One image through one input's steps: the tensor (with its batch axis of 1 if any)."""
    arr = pixels(path, image_spec)
    if image_spec["color"] == "bgr":
        arr = arr[:, :, ::-1]
    if image_spec.get("dtype", "float32") == "float32":
        x = arr.astype(np.float32) * np.float32(image_spec.get("scale", 1.0))
        mean = image_spec.get("mean") or []
        std = image_spec.get("std") or []
        if mean:
            x = x - np.array(mean, dtype=np.float32)
        if std:
            x = x / np.array(std, dtype=np.float32)
        arr = x
    if image_spec.get("layout", "chw") == "chw":
        arr = arr.transpose(2, 0, 1)
    if image_spec.get("batch", True):
        arr = arr[None]
    return np.ascontiguousarray(arr)


def library_version(lib):
    if lib == "pil":
        import PIL

        return f"Pillow {PIL.__version__}"
    import cv2

    return f"OpenCV {cv2.__version__}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("images", nargs="+")
    a = ap.parse_args()
    with open(a.spec) as f:
        spec = json.load(f)
    info = {}
    for inp in spec["inputs"]:
        s = inp["image"]
        arrays = [reference_array(p, s) for p in a.images]
        t = np.concatenate(arrays, axis=0) if s.get("batch", True) else arrays[0]
        name = inp["name"].replace("/", "_").replace(":", "_")
        np.save(os.path.join(a.out, name + ".npy"), t)
        info[inp["name"]] = library_version(library_of(s))
    with open(os.path.join(a.out, "reference.json"), "w") as f:
        json.dump(info, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
