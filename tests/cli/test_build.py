#!/usr/bin/python3
"""`ferry build`, `ferry sign`, `ferry keys generate`, `ferry artifact verify` on the bundled
digits CNN (examples/digits_cnn): fp32 (optimized) and int8 (static, calibrated) variants gated on
scikit-learn's held-out digits with labels; a rebuild in another folder with other --threads is
byte-identical (every file and the archive); the gate failing writes nothing; bad inputs are one
error line with their exit code; tampering is named.

With --model-signing (the venv's `model_signing` 1.1.1 CLI, ctest cli_build_signing): Ferry's
signature verifies there, one `model_signing sign key` made verifies in Ferry, and one changed
byte is refused by both, naming the file.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from clilib import check, expect_error, ferry, summary  # noqa: E402

CONFIG = """name: digits
version: 1.0.0
source:
  path: model.onnx
  sha256: {sha}
reference:
  data: heldout
  edge_cases: [zeros, large]
tolerance: {{atol: 1e-4, rtol: 1e-3}}
task:
  output: logits
  labels: heldout_labels.npy
  max_accuracy_drop: 2
  max_class_drop: 10
audit:
  targets: [ferry-cpu]
variants:
  - name: fp32
    steps:
      - optimize: {{level: all}}
  - name: int8
    steps:
      - quantize: {{mode: static, calibration: calib{quant_extra}}}
    tolerance: {{atol: 2.0, rtol: 0.5}}
    edge_cases: false
{int8_extra}fallback: int8
"""


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def make_project(root, example, quant_extra="", int8_extra="", sha=None):
    """model.onnx (the example), heldout/image.npy + heldout_labels.npy (the digits the example
    was not trained on), calib/image.npy (256 training images), ferry.yaml."""
    from sklearn.datasets import load_digits
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(os.path.join(root, "heldout"))
    os.makedirs(os.path.join(root, "calib"))
    shutil.copy(os.path.join(example, "model.onnx"), os.path.join(root, "model.onnx"))
    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = digits.target.astype(np.int64)
    np.random.seed(0)
    perm = np.random.permutation(len(x))  # tools/make_example.py's split
    train, test = perm[:1347], perm[1347:]
    np.save(os.path.join(root, "heldout", "image.npy"), np.ascontiguousarray(x[test]))
    np.save(os.path.join(root, "heldout_labels.npy"), y[test])
    np.save(os.path.join(root, "calib", "image.npy"), np.ascontiguousarray(x[train[:256]]))
    with open(os.path.join(root, "ferry.yaml"), "w") as f:
        f.write(CONFIG.format(sha=sha or sha256(os.path.join(root, "model.onnx")),
                              quant_extra=quant_extra, int8_extra=int8_extra))
    return os.path.join(root, "ferry.yaml")


def tree(dir_):
    out = {}
    for base, _, files in os.walk(dir_):
        for n in files:
            p = os.path.join(base, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, dir_)] = f.read()
    return out


def run_in(cwd, args, *cmd):
    p = subprocess.run([args.ferry] + list(cmd), cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    return p.returncode, p.stdout, p.stderr


def test_build_and_rebuild(args, work):
    cfg = make_project(os.path.join(work, "proj_a"), args.example)
    out = os.path.join(work, "dist_a", "digits")
    os.makedirs(os.path.dirname(out))
    rc, so, se = ferry(args, "build", cfg, "-o", out, "--archive", "--threads", "1", "--bench-runs", "3")
    check(rc == 0, "build: exit 0 (got %d: %s)" % (rc, se.strip()[-400:]))
    check("PASS: wrote" in so, "build: says PASS (%r)" % so[-300:])
    for f in ["manifest.json", "RUNBOOK.md", "ferry.yaml", "models/fp32.onnx", "models/int8.onnx",
              "golden/data/test_data_set_0/input_0.pb", "golden/data/test_data_set_0/output_0.pb",
              "golden/labels.npy", "golden/tolerances.json", "golden/edge_cases/test_data_set_1/output_0.pb"]:
        check(os.path.isfile(os.path.join(out, f)), "artifact holds %s" % f)
    check(os.path.isfile(out + ".ferry"), "--archive wrote digits.ferry")
    check(os.path.isfile(os.path.join(out + ".report", "report.md")), "report.md beside the artifact")
    check(not os.path.exists(os.path.join(out, "report.md")), "report.md not inside the artifact")
    m = json.load(open(os.path.join(out, "manifest.json")))
    check(m["name"] == "digits" and m["version"] == "1.0.0", "manifest: name and version")
    check(m["inputs"][0]["name"] == "image" and m["inputs"][0]["shape"] == ["batch", 1, 8, 8],
          "manifest: input image [batch,1,8,8] (%r)" % m["inputs"])
    check([v["name"] for v in m["variants"]] == ["fp32", "int8"] and m["fallback"] == "int8",
          "manifest: variants and fallback")
    task = m["variants"][1]["verification"]["task"]
    check(task["rows"] == 450 and len(task["classes"]) == 10,
          "manifest: int8 task metric over 450 labeled rows, 10 classes (%d rows)" % task["rows"])
    check(m["variants"][1]["bytes"] < m["variants"][0]["bytes"], "int8 model is smaller")
    listed = [f["path"] for f in m["files"]]
    check(listed == sorted(listed) and "manifest.json" not in listed, "manifest: files sorted")
    check(all(sha256(os.path.join(out, f["path"])) == f["sha256"] for f in m["files"]),
          "manifest: every digest matches its file")
    check(not any(work.encode() in b for b in tree(out).values()), "no build path inside the artifact")
    report = open(os.path.join(out + ".report", "report.md")).read()
    check("## Bench summary" in report and "| class |" in report, "report: bench and per-class tables")

    # The archive: a plain tar with sorted entries, fixed times and owners.
    with tarfile.open(out + ".ferry") as t:
        members = t.getmembers()
        names = [mm.name.rstrip("/") + ("/" if mm.isdir() else "") for mm in members]
        check(len(names) > 10 and names == sorted(names), "archive: read by Python's tarfile, entries sorted")
        check(all(mm.mtime == 0 and mm.uid == 0 and mm.gid == 0 for mm in members),
              "archive: mtime 0, uid/gid 0")
        check(all(mm.mode == (0o755 if mm.isdir() else 0o644) for mm in members), "archive: modes")
        check(t.extractfile("manifest.json").read() == open(os.path.join(out, "manifest.json"), "rb").read(),
              "archive: holds the manifest")

    # Rebuild: a copy of the project in another folder, relative paths, another --threads.
    proj_b = os.path.join(work, "elsewhere", "proj_b")
    cfg_b = make_project(proj_b, args.example)
    rc, so, se = run_in(proj_b, args, "build", "ferry.yaml", "-o", "../out_b", "--archive",
                        "--threads", "2", "--bench-runs", "2")
    check(rc == 0, "rebuild: exit 0 (%s)" % se.strip()[-300:])
    ta, tb = tree(out), tree(os.path.join(work, "elsewhere", "out_b"))
    check(sorted(ta) == sorted(tb), "rebuild: the same files")
    diff = [k for k in ta if ta[k] != tb.get(k)]
    check(not diff, "rebuild: every file byte-identical (differ: %s)" % diff[:5])
    a1, a2 = open(out + ".ferry", "rb").read(), open(os.path.join(work, "elsewhere", "out_b.ferry"), "rb").read()
    check(a1 == a2, "rebuild: archive byte-identical")
    print("reproducibility: manifest sha256 %s / %s, archive sha256 %s / %s" % (
        sha256(os.path.join(out, "manifest.json")), sha256(os.path.join(work, "elsewhere", "out_b", "manifest.json")),
        hashlib.sha256(a1).hexdigest(), hashlib.sha256(a2).hexdigest()))
    del cfg_b

    # artifact verify: folder, archive, golden rerun.
    rc, so, se = ferry(args, "artifact", "verify", out, "--golden")
    check(rc == 0 and "PASS" in so, "artifact verify --golden: exit 0 (%s %s)" % (so[-200:], se[-200:]))
    rc, so, se = ferry(args, "artifact", "verify", out + ".ferry", "--json")
    check(rc == 0 and json.loads(so)["pass"], "artifact verify of the archive: pass")
    return cfg, out


def test_gate(args, work):
    # An impossible tolerance on int8's logits: exit 1 naming output and layer, nothing at OUT.
    cfg = make_project(os.path.join(work, "proj_gate"), args.example,
                       int8_extra="    tolerances: {logits: {atol: 0, rtol: 0}}\n")
    out = os.path.join(work, "gate_out")
    expect_error(args, "gate: impossible tolerance", 1,
                 ["gate failed", "variant 'int8'", "output 'logits'", "layer", "nothing written at " + out],
                 "build", cfg, "-o", out, "--archive", "--bench-runs", "0")
    check(not os.path.exists(out) and not os.path.exists(out + ".ferry"), "gate: nothing written at OUT")
    check(os.path.isfile(os.path.join(out + ".report", "report.md")), "gate: the report says why")
    check(not [n for n in os.listdir(work) if n.startswith(".gate_out")], "gate: no temp folder left")

    # Ranges clipped to the median (percentile:50) break classes: the per-class limit blocks it.
    cfg = make_project(os.path.join(work, "proj_class"), args.example, quant_extra=", method: \"percentile:50\"")
    out = os.path.join(work, "class_out")
    rc, so, se = ferry(args, "build", cfg, "-o", out, "--bench-runs", "0")
    check(rc == 1 and "class " in se and "max_class_drop" in se and "layer" in se,
          "gate: a class beyond max_class_drop is named with the layer (rc %d: %s)" % (rc, se.strip()[:400]))
    check(not os.path.exists(out), "gate (class): nothing written")


def test_bad_inputs(args, work, cfg, out):
    proj = os.path.dirname(cfg)
    text = open(cfg).read()
    bad = os.path.join(proj, "bad.yaml")
    with open(bad, "w") as f:
        f.write(text.replace("  edge_cases:", "  edge_case:"))
    expect_error(args, "unknown key", 3, ["bad.yaml:8: reference.edge_case: unknown key"],
                 "build", bad, "-o", os.path.join(work, "bad1"))
    with open(bad, "w") as f:
        f.write(text.replace("version: 1.0.0\n", ""))
    expect_error(args, "missing key", 3, ["version: missing"], "build", bad, "-o", os.path.join(work, "bad1"))
    with open(bad, "w") as f:
        f.write(text.replace("max_class_drop: 10", "max_class_drop: ten"))
    expect_error(args, "mistyped key", 3, ["task.max_class_drop: expected a number, got 'ten'"],
                 "build", bad, "-o", os.path.join(work, "bad1"))
    real = sha256(os.path.join(proj, "model.onnx"))
    with open(bad, "w") as f:
        f.write(text.replace(real, "0" * 64))
    expect_error(args, "wrong digest", 3, ["source.sha256", real, "0" * 64],
                 "build", bad, "-o", os.path.join(work, "bad1"))
    with open(bad, "w") as f:
        f.write(text.replace("calibration: calib", "calibration: nowhere"))
    expect_error(args, "missing calibration folder", 3, ["quantize.calibration", "nowhere"],
                 "build", bad, "-o", os.path.join(work, "bad1"))
    os.makedirs(os.path.join(proj, "wrongcal"), exist_ok=True)
    np.save(os.path.join(proj, "wrongcal", "pixels.npy"), np.zeros((4, 1, 8, 8), np.float32))
    with open(bad, "w") as f:
        f.write(text.replace("calibration: calib", "calibration: wrongcal"))
    expect_error(args, "calibration folder that does not fit", 3, ["quantize.calibration", "image"],
                 "build", bad, "-o", os.path.join(work, "bad1"))
    check(not os.path.exists(os.path.join(work, "bad1")), "bad inputs: nothing written")
    expect_error(args, "existing OUT", 3, ["already exists", "--force"], "build", cfg, "-o", out)
    before = open(os.path.join(out, "manifest.json"), "rb").read()
    rc, so, se = ferry(args, "build", cfg, "-o", out, "--force", "--bench-runs", "0", "--archive")
    check(rc == 0, "--force replaces OUT (%s)" % se.strip()[-200:])
    check(open(os.path.join(out, "manifest.json"), "rb").read() == before, "--force: the same manifest")

    # Tampering, without a signature: the manifest names the file.
    t = os.path.join(work, "tampered")
    shutil.copytree(out, t)
    p = os.path.join(t, "models", "int8.onnx")
    b = bytearray(open(p, "rb").read())
    b[len(b) // 2] ^= 1
    open(p, "wb").write(bytes(b))
    expect_error(args, "tampered weight file", 1, ["models/int8.onnx"], "artifact", "verify", t)
    data = open(out + ".ferry", "rb").read()
    open(os.path.join(work, "cut.ferry"), "wb").write(data[: len(data) // 2])
    expect_error(args, "truncated archive", 3, ["truncated"], "artifact", "verify", os.path.join(work, "cut.ferry"))


PREP = """inputs:
  - name: image
    image:
      decode: {{exif: apply}}
      color: gray
      resize: {{size: [8, 8], filter: {filter}}}
      scale: 0.00392156862745098
"""
CLASSES = "zero\none\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\n"


def make_release(args, work, name, version="1.0.0", filter="pil_box", quant_extra="",
                 rename_output=None, classes=CLASSES):
    """A project with a pre-processing spec and class names, built to WORK/NAME (no bench)."""
    import onnx
    proj = os.path.join(work, "rel_" + name)
    cfg = make_project(proj, args.example, quant_extra=quant_extra)
    text = open(cfg).read().replace("version: 1.0.0", "version: " + version)
    if rename_output:
        path = os.path.join(proj, "model.onnx")
        old = sha256(path)
        m = onnx.load(path)
        for node in m.graph.node:
            node.output[:] = [rename_output if o == "logits" else o for o in node.output]
        m.graph.output[0].name = rename_output
        onnx.save(m, path)
        text = text.replace(old, sha256(path)).replace("output: logits", "output: " + rename_output)
    with open(os.path.join(proj, "prep.yaml"), "w") as f:
        f.write(PREP.format(filter=filter))
    with open(os.path.join(proj, "classes.txt"), "w") as f:
        f.write(classes)
    with open(cfg, "w") as f:
        f.write(text + "prep: prep.yaml\nclass_names: classes.txt\n")
    out = os.path.join(work, name)
    rc, so, se = ferry(args, "build", cfg, "-o", out, "--bench-runs", "0", "--archive")
    check(rc == 0, "build %s: exit 0 (%s)" % (name, se.strip()[-300:]))
    return cfg, out


def test_inspect_diff(args, work, base):
    """artifact inspect and diff: the issue's bar (a renamed output and a changed resize filter
    are breaking, a re-quantized model with the same interface is compatible), and the pre-
    processing spec and class names carried in the artifact."""
    cfg_a, a = make_release(args, work, "rel_a")
    for f in ["prep.yaml", "labels.txt"]:
        check(os.path.isfile(os.path.join(a, f)), "artifact holds the config's %s" % f)
    check(open(os.path.join(a, "labels.txt")).read() == CLASSES, "labels.txt = class_names")
    m = json.load(open(os.path.join(a, "manifest.json")))
    check(m["prep"]["file"] == "prep.yaml" and
          m["prep"]["spec"]["inputs"][0]["image"]["resize"]["filter"] == "pil_box" and
          m["prep"]["spec"]["inputs"][0]["image"]["layout"] == "chw",
          "manifest: the prep spec with its defaults filled in (%r)" % m.get("prep"))
    check(m["class_names"]["count"] == 10, "manifest: 10 class names")

    rc, so, se = ferry(args, "artifact", "inspect", a)
    check(rc == 0, "inspect: exit 0 (%s)" % se.strip())
    for needle in ["image  float32[batch, 1, 8, 8]", "logits  float32[batch, 10]",
                   "pre-processing: prep.yaml", "image: image, gray, resize [8,8] pil_box",
                   "class names: labels.txt (10 classes: zero, ..., nine)", "fp32 (default)",
                   "int8 (fallback)", "verification: PASS", "quantize:"]:
        check(needle in so, "inspect names %r" % needle)
    rc1, j1, _ = ferry(args, "artifact", "inspect", a, "--json")
    rc2, j2, _ = ferry(args, "artifact", "inspect", a + ".ferry", "--json")
    j1, j2 = json.loads(j1), json.loads(j2)
    check(j2["archive"] and not j1["archive"] and
          {k: v for k, v in j1.items() if k not in ("artifact", "archive")} ==
          {k: v for k, v in j2.items() if k not in ("artifact", "archive")},
          "inspect --json: the archive reads the same as the folder")
    check([v["name"] for v in j1["variants"]] == ["fp32", "int8"] and j1["class_names"][9] == "nine",
          "inspect --json: variants and class names")

    rc, so, se = ferry(args, "artifact", "diff", a, a + ".ferry")
    check(rc == 0 and "identical" in so, "diff of an artifact and its archive: identical (%s)" % so)
    # The artifact without pre-processing or class names -> with them: compatible additions.
    rc, so, se = ferry(args, "artifact", "diff", base, a)
    check(rc == 0 and "compatible:" in so and "pre-processing" in so and "class names" in so,
          "diff: adding prep and class names is compatible (%s)" % (so + se)[-400:])

    # Re-quantized (per channel), new version: compatible, the changes listed.
    _, b = make_release(args, work, "rel_b", version="1.1.0", quant_extra=", per_channel: true")
    rc, so, se = ferry(args, "artifact", "diff", a, b)
    check(rc == 0 and so.splitlines()[1].startswith("compatible") and "BREAKING" not in so,
          "diff: a re-quantized model with the same interface is compatible (%s)" % (so + se)[-500:])
    check("variant 'int8' model" in so and "version: 1.0.0 -> 1.1.0" in so,
          "diff lists the int8 model and the version (%s)" % so[-500:])

    # Another resize filter: breaking, named.
    _, c = make_release(args, work, "rel_c", filter="pil_bilinear")
    expect_error(args, "diff: a changed resize filter", 1,
                 ["prep inputs[image].image.resize.filter", "--allow-breaking"],
                 "artifact", "diff", a, c)
    rc, so, se = ferry(args, "artifact", "diff", a, c)
    check("BREAKING" in so and '"pil_box" -> "pil_bilinear"' in so,
          "diff prints the filter change (%s)" % so[-400:])
    rc, so, se = ferry(args, "artifact", "diff", a, c, "--allow-breaking", "--json")
    d = json.loads(so)
    check(rc == 0 and not d["compatible"] and d["breaking"] >= 1,
          "diff --allow-breaking: exit 0, still reported breaking (%d)" % rc)

    # A renamed output: breaking, the rename recognised.
    _, r = make_release(args, work, "rel_r", rename_output="scores")
    expect_error(args, "diff: a renamed output", 1, ["output 'logits'", "renamed to 'scores'"],
                 "artifact", "diff", a, r)
    # Other class names: breaking.
    _, n = make_release(args, work, "rel_n", classes=CLASSES.replace("two", "deux"))
    expect_error(args, "diff: changed class names", 1, ["class name 2"], "artifact", "diff", a, n)

    # Bad inputs: one error line, exit 3.
    expect_error(args, "diff: no such artifact", 3, ["nowhere"], "artifact", "diff", a,
                 os.path.join(work, "nowhere"))
    broken = os.path.join(work, "rel_broken")
    shutil.copytree(a, broken)
    with open(os.path.join(broken, "manifest.json"), "w") as f:
        f.write('{"format": "ferry.artifact/1", "name": 7}')
    expect_error(args, "inspect: a manifest with a mistyped field", 3, ["manifest.json", "name"],
                 "artifact", "inspect", broken)
    proj = os.path.dirname(cfg_a)
    text = open(cfg_a).read()
    bad = os.path.join(proj, "bad.yaml")
    with open(os.path.join(proj, "prep_wrong.yaml"), "w") as f:
        f.write(PREP.format(filter="pil_box").replace("name: image", "name: pixels"))
    with open(bad, "w") as f:
        f.write(text.replace("prep: prep.yaml", "prep: prep_wrong.yaml"))
    expect_error(args, "build: a prep spec naming another input", 3, ["prep", "'pixels'"],
                 "build", bad, "-o", os.path.join(work, "bad_prep"))
    with open(os.path.join(proj, "prep_big.yaml"), "w") as f:
        f.write(PREP.format(filter="pil_box").replace("[8, 8]", "[16, 16]"))
    with open(bad, "w") as f:
        f.write(text.replace("prep: prep.yaml", "prep: prep_big.yaml"))
    expect_error(args, "build: a prep spec making other dims", 3, ["prep", "[1, 1, 16, 16]"],
                 "build", bad, "-o", os.path.join(work, "bad_prep"))
    with open(os.path.join(proj, "nine.txt"), "w") as f:
        f.write(CLASSES.replace("nine\n", ""))
    with open(bad, "w") as f:
        f.write(text.replace("class_names: classes.txt", "class_names: nine.txt"))
    expect_error(args, "build: 9 class names for 10 classes", 3, ["class_names", "9 classes"],
                 "build", bad, "-o", os.path.join(work, "bad_prep"))
    check(not os.path.exists(os.path.join(work, "bad_prep")), "bad prep/class names: nothing written")


def test_reference_files(args, work):
    """reference.files: raw PNGs through the `prep` spec become the golden sets (one per file,
    sorted); the inputs stored are what `ferry prep run` makes; a rebuild elsewhere is
    byte-identical (set names hold file names, never paths)."""
    from PIL import Image
    import onnx
    from onnx import numpy_helper
    outs = []
    for tag in ("a", "b"):
        proj = os.path.join(work, "rawref_" + tag, "proj")
        cfg = make_project(proj, args.example)
        x = np.load(os.path.join(proj, "heldout", "image.npy"))[:20]
        y = np.load(os.path.join(proj, "heldout_labels.npy"))[:20]
        os.makedirs(os.path.join(proj, "pngs"))
        for i in range(20):
            px = np.round(x[i, 0] * 255).astype(np.uint8)
            Image.fromarray(np.kron(px, np.ones((4, 4), np.uint8))).save(
                os.path.join(proj, "pngs", "digit%02d.png" % i))
        np.save(os.path.join(proj, "png_labels.npy"), y)
        with open(os.path.join(proj, "prep.yaml"), "w") as f:
            f.write(PREP.format(filter="pil_box"))
        text = open(cfg).read().replace("  data: heldout\n", "  files: pngs\n").replace(
            "labels: heldout_labels.npy", "labels: png_labels.npy")
        with open(cfg, "w") as f:
            f.write(text + "prep: prep.yaml\n")
        out = os.path.join(work, "rawref_" + tag, "out")
        rc, so, se = ferry(args, "build", cfg, "-o", out, "--bench-runs", "0",
                           "--threads", "1" if tag == "a" else "2")
        check(rc == 0, "reference.files build %s: exit 0 (%s)" % (tag, (so + se).strip()[-300:]))
        outs.append(out)
    if not all(os.path.isdir(o) for o in outs):
        return
    m = json.load(open(os.path.join(outs[0], "manifest.json")))
    check(m["golden"]["sets"] == 20 and m["golden"]["rows"] == 20,
          "reference.files: 20 PNGs, 20 golden sets and labelled rows (%r)" % m["golden"])
    rc, so, se = ferry(args, "prep", "run", os.path.join(work, "rawref_a", "proj", "prep.yaml"),
                       os.path.join(work, "rawref_a", "proj", "pngs", "digit00.png"),
                       "-o", os.path.join(work, "rawref_prep"))
    t = onnx.TensorProto()
    t.ParseFromString(open(os.path.join(outs[0], "golden", "data", "test_data_set_0",
                                        "input_0.pb"), "rb").read())
    check(rc == 0 and np.array_equal(numpy_helper.to_array(t),
                                      np.load(os.path.join(work, "rawref_prep", "image.npy"))),
          "reference.files: golden input 0 = ferry prep run of the first PNG")
    ta, tb = tree(outs[0]), tree(outs[1])
    check(sorted(ta) == sorted(tb) and all(ta[k] == tb[k] for k in ta),
          "reference.files: rebuilt elsewhere with other --threads, byte-identical")
    proj = os.path.join(work, "rawref_a", "proj")
    text = open(os.path.join(proj, "ferry.yaml")).read()
    with open(os.path.join(proj, "bad.yaml"), "w") as f:
        f.write(text.replace("prep: prep.yaml\n", ""))
    expect_error(args, "reference.files without a prep spec", 3, ["reference.files", "prep"],
                 "build", os.path.join(proj, "bad.yaml"), "-o", os.path.join(work, "rawref_bad"))
    with open(os.path.join(proj, "bad.yaml"), "w") as f:
        f.write(text.replace("  files: pngs\n", "  files: pngs\n  data: heldout\n"))
    expect_error(args, "reference.data and reference.files both", 3,
                 ["exactly one of data", "files"], "build", os.path.join(proj, "bad.yaml"),
                 "-o", os.path.join(work, "rawref_bad"))


def tamper(path):
    b = bytearray(open(path, "rb").read())
    b[len(b) // 2] ^= 1
    open(path, "wb").write(bytes(b))


def test_signing(args, work, out):
    key = os.path.join(work, "keys", "release.pem")
    os.makedirs(os.path.dirname(key))
    rc, so, se = ferry(args, "keys", "generate", "--out", key)
    check(rc == 0 and os.path.isfile(key) and os.path.isfile(key.replace(".pem", ".pub.pem")),
          "keys generate: KEY.pem and KEY.pub.pem (%s)" % se.strip())
    check(oct(os.stat(key).st_mode & 0o777) == "0o600", "keys generate: private key mode 0600")
    expect_error(args, "keys generate over an existing key", 3, ["already exists"], "keys", "generate", "--out", key)
    pub = key.replace(".pem", ".pub.pem")
    art = os.path.join(work, "signed", "digits")
    shutil.copytree(out, art)
    rc, so, se = ferry(args, "sign", art, "--key", key)
    check(rc == 0 and os.path.isfile(os.path.join(art, "model.sig")), "sign: wrote model.sig (%s)" % se.strip())
    rc, so, se = ferry(args, "artifact", "verify", art, "--key", pub, "--golden")
    check(rc == 0, "artifact verify --key --golden: exit 0 (%s)" % (so + se).strip()[-300:])
    other = os.path.join(work, "keys", "other.pem")
    ferry(args, "keys", "generate", "--out", other)
    expect_error(args, "another key", 1, ["another key"], "artifact", "verify", art, "--key",
                 other.replace(".pem", ".pub.pem"))
    for f in ["models/fp32.onnx", "manifest.json", "golden/labels.npy"]:
        t = os.path.join(work, "signed_t", f.replace("/", "_"), "digits")
        shutil.copytree(art, t)
        tamper(os.path.join(t, f))
        expect_error(args, "tampered " + f, 1, [f], "artifact", "verify", t, "--key", pub)
    t = os.path.join(work, "signed_t", "sig", "digits")
    shutil.copytree(art, t)
    bundle = json.load(open(os.path.join(t, "model.sig")))
    s = bundle["dsseEnvelope"]["signatures"][0]["sig"]
    bundle["dsseEnvelope"]["signatures"][0]["sig"] = s[:20] + ("A" if s[20] != "A" else "B") + s[21:]
    json.dump(bundle, open(os.path.join(t, "model.sig"), "w"))
    expect_error(args, "tampered signature", 1, ["model.sig"], "artifact", "verify", t, "--key", pub)
    return art, key, pub


def test_model_signing_interop(args, work, art, key, pub):
    ms = args.model_signing

    def ms_run(*cmd):
        p = subprocess.run([ms] + list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return p.returncode, p.stdout + p.stderr

    rc, o = ms_run("verify", "key", art, "--signature", os.path.join(art, "model.sig"), "--public_key", pub)
    check(rc == 0 and "Verification succeeded" in o, "model_signing verifies Ferry's signature (%s)" % o.strip()[-300:])
    for f in ["models/int8.onnx", "manifest.json", "golden/data/test_data_set_0/output_0.pb"]:
        t = os.path.join(work, "ms_t", f.replace("/", "_"), "digits")
        shutil.copytree(art, t)
        tamper(os.path.join(t, f))
        rc, o = ms_run("verify", "key", t, "--signature", os.path.join(t, "model.sig"), "--public_key", pub)
        check(rc != 0 and f in o, "model_signing refuses a changed %s naming it (%s)" % (f, o.strip()[-200:]))
        expect_error(args, "ferry refuses a changed " + f, 1, [f], "artifact", "verify", t, "--key", pub)
    # Signed by model_signing, verified by Ferry.
    theirs = os.path.join(work, "ms_signed", "digits")
    shutil.copytree(art, theirs)
    os.remove(os.path.join(theirs, "model.sig"))
    rc, o = ms_run("sign", "key", theirs, "--private_key", key, "--signature", os.path.join(theirs, "model.sig"))
    check(rc == 0, "model_signing sign key (%s)" % o.strip()[-300:])
    rc, so, se = ferry(args, "artifact", "verify", theirs, "--key", pub, "--json")
    check(rc == 0 and json.loads(so)["signature"]["ok"], "Ferry verifies model_signing's signature (%s)" % (so + se)[-300:])
    tamper(os.path.join(theirs, "models", "fp32.onnx"))
    expect_error(args, "Ferry refuses model_signing-signed, tampered", 1, ["models/fp32.onnx"],
                 "artifact", "verify", theirs, "--key", pub)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--example", required=True, help="examples/digits_cnn")
    ap.add_argument("--model-signing", help="the model_signing CLI (interop tests)")
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    cfg, out = test_build_and_rebuild(args, work)
    if args.model_signing:
        art, key, pub = test_signing(args, work, out)
        test_model_signing_interop(args, work, art, key, pub)
    else:
        test_gate(args, work)
        test_bad_inputs(args, work, cfg, out)
        test_inspect_diff(args, work, out)
        test_reference_files(args, work)
        test_signing(args, work, out)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
