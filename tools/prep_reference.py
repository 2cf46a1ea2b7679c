#!/usr/bin/env python3
"""The reference side of `ferry prep check`: a prep spec's image inputs through the library
its resize filter names (Pillow, OpenCV, or torchvision fed by Pillow), the same steps in the
same order as Ferry's pipeline (src/prep/README.md), written as one .npy per input.
torchvision's resize runs in Debian's python (FERRY_TORCH_PYTHON, default /usr/bin/python3)
through tools/torchvision_resize.py, one worker process for the whole run.

    prep_reference.py --spec SPEC.json --out DIR IMAGE...

SPEC.json is the spec as `ferry prep check` writes it (every default filled in). Writes
DIR/<input>.npy (the images stacked on the batch axis) and DIR/reference.json naming the
library and version used per input. Run it with the project venv (.venv/bin/python).
Also imported by tests/prep/test_prep.py (reference_array).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

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
    "cv2_lanczos4": "INTER_LANCZOS4",
}

# torchvision.transforms.functional.resize of a uint8 tensor, bilinear: antialias False / True.
TV_FILTERS = {
    "torchvision_bilinear": False,
    "torchvision_bilinear_aa": True,
}


def library_of(image_spec):
    """Whose decoder and gray conversion: torchvision's filters are fed by Pillow."""
    r = image_spec.get("resize")
    if r:
        return "cv2" if r["filter"].startswith("cv2_") else "pil"
    return image_spec.get("library", "pil")


def target_size(h, w, resize):
    """(H, W) after resize: a fixed size, or torchvision's _compute_resized_output_size with
    the shorter side (Resize(int)) and/or max_size as longer_side (src/prep/spec.h)."""
    if "size" in resize:
        return resize["size"][0], resize["size"][1]
    n, m = resize.get("shorter_side"), resize.get("longer_side")
    short, long = (w, h) if w <= h else (h, w)
    if resize.get("round") == "half_even":
        # PaddleClas's ResizeImage(resize_short=n): percent = n / short, each side round()ed.
        percent = float(n) / short
        new_short, new_long = int(round(short * percent)), int(round(long * percent))
    elif n:
        new_short, new_long = n, int(n * long / short)
        if m and new_long > m:
            new_short, new_long = int(m * new_short / new_long), m
    else:
        new_short, new_long = int(m * short / long), m
    return (new_long, new_short) if w <= h else (new_short, new_long)


_tv_worker = None


def torchvision_resize(arr, h, w, antialias):
    """torchvision 0.14's F.resize of `arr` (uint8 HWC or HW) as a CHW tensor, in Debian's
    python; the worker (tools/torchvision_resize.py) is started once and kept."""
    global _tv_worker
    if _tv_worker is None:
        py = os.environ.get("FERRY_TORCH_PYTHON", "/usr/bin/python3")
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchvision_resize.py")
        _tv_worker = subprocess.Popen([py, script], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.npy"), os.path.join(d, "out.npy")
        np.save(src, np.ascontiguousarray(arr))
        _tv_worker.stdin.write(f"{src} {dst} {h} {w} {1 if antialias else 0}\n")
        _tv_worker.stdin.flush()
        answer = _tv_worker.stdout.readline().strip()
        if answer != "ok":
            raise SystemExit(f"prep_reference: torchvision resize failed: {answer or 'no answer'}")
        return np.load(dst)


def decode_pil(path, image_spec):
    from PIL import Image, ImageOps

    im = Image.open(path)
    im.load()
    if image_spec["decode"]["exif"] == "apply":
        im = ImageOps.exif_transpose(im)
    alpha = image_spec.get("alpha", "drop")
    if isinstance(alpha, dict) and (im.mode in ("RGBA", "LA", "PA", "RGBa", "La")
                                    or "transparency" in im.info):
        # Composited on the stated colour: Image.alpha_composite over an opaque background.
        im = im.convert("RGBA")
        bg = Image.new("RGBA", im.size, tuple(alpha["composite"]) + (255,))
        im = Image.alpha_composite(bg, im)
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


def crop_offsets(h, w, crop):
    """torchvision's CenterCrop offsets, int(round((size - crop) / 2)); crop.round: floor:
    (size - crop) // 2 (PaddleClas's CropImage)."""
    ch, cw = crop["center"]
    if crop.get("round") == "floor":
        return (h - ch) // 2, (w - cw) // 2
    return int(round((h - ch) / 2.0)), int(round((w - cw) / 2.0))


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
            if (nh, nw) == (im.height, im.width):
                arr = np.asarray(im)
            elif resize["filter"] in TV_FILTERS:
                arr = torchvision_resize(np.asarray(im), nh, nw, TV_FILTERS[resize["filter"]])
            else:
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
        if resize and resize["filter"] in TV_FILTERS:
            h, w = target_size(im.height, im.width, resize)
            arr = np.asarray(im)
            if (h, w) != arr.shape[:2]:
                arr = torchvision_resize(arr, h, w, TV_FILTERS[resize["filter"]])
        else:
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
        top, left = crop_offsets(h, w, crop)
        arr = arr[top : top + ch, left : left + cw]
    return np.ascontiguousarray(arr)


def float_tensor_array(path, image_spec):
    """resize.tensor: float: torchvision's float-tensor path, as a training script writes it:
    the PIL image to a float tensor (to_tensor: p / 255; another scale: p * scale in float32),
    F.resize of the float tensor (no rounding), center crop, channel order, (x - mean) / std."""
    resize = image_spec["resize"]
    arr = np.asarray(decode_pil(path, image_spec))
    if arr.ndim == 2:
        arr = arr[:, :, None]
    scale = image_spec.get("scale", 1.0)
    if abs(scale - 1 / 255) < 1e-15:
        x = arr.astype(np.float32) / np.float32(255)
    else:
        x = arr.astype(np.float32) * np.float32(scale)
    h, w = target_size(arr.shape[0], arr.shape[1], resize)
    x = torchvision_resize(np.ascontiguousarray(x), h, w, TV_FILTERS[resize["filter"]])
    if x.ndim == 2:
        x = x[:, :, None]
    crop = image_spec.get("crop")
    if crop:
        ch, cw = crop["center"]
        top, left = crop_offsets(x.shape[0], x.shape[1], crop)
        x = x[top : top + ch, left : left + cw]
    if image_spec["color"] == "bgr":
        x = x[:, :, ::-1]
    mean = image_spec.get("mean") or []
    std = image_spec.get("std") or []
    if mean:
        x = x - np.array(mean, dtype=np.float32)
    if std:
        x = x / np.array(std, dtype=np.float32)
    if image_spec.get("layout", "chw") == "chw":
        x = x.transpose(2, 0, 1)
    if image_spec.get("batch", True):
        x = x[None]
    return np.ascontiguousarray(x, dtype=np.float32)


def reference_array(path, image_spec):
    """One image through one input's steps: the tensor (with its batch axis of 1 if any)."""
    if (image_spec.get("resize") or {}).get("tensor") == "float":
        return float_tensor_array(path, image_spec)
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


def library_version(lib, image_spec=None):
    r = (image_spec or {}).get("resize") or {}
    if r.get("filter") in TV_FILTERS:
        import PIL

        py = os.environ.get("FERRY_TORCH_PYTHON", "/usr/bin/python3")
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchvision_resize.py")
        v = subprocess.run([py, script, "--versions"], capture_output=True, text=True).stdout
        return f"Pillow {PIL.__version__} + {v.strip()}"
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
        info[inp["name"]] = library_version(library_of(s), s)
    with open(os.path.join(a.out, "reference.json"), "w") as f:
        json.dump(info, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
