#!/usr/bin/python3
"""Post-processing in a prep spec (`outputs:`), through `ferry run MODEL --prep SPEC`, against
the code users compare with, run here with Debian's torch/torchvision:

  detect (yolov8)  ultralytics' non_max_suppression (candidates over the score threshold, boxes to
                   corners, class offset 7680, torchvision.ops.nms, max_det) and scale_boxes back
                   through the input's letterbox: boxes, scores, classes and order exactly equal
  ctc              greedy CTC written plainly in Python: the same string and ids

The model: an image input (the spec letterboxes a photo into it) and a raw tensor input passed
through Identity to the output the spec decodes, so the decoder sees exactly the tensor the
reference sees.

    /usr/bin/python3 tests/prep/test_decode.py --ferry build/src/ferry --work DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import torch
import torchvision
from onnx import TensorProto, helper
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from clilib import check, summary  # noqa: E402


def identity_model(path, raw_shape, out_name):
    """images [1,3,640,640] -> mean (unused), raw -> Identity -> out_name."""
    g = helper.make_graph(
        [helper.make_node("Identity", ["raw"], [out_name]),
         helper.make_node("ReduceMean", ["images"], ["mean"], keepdims=0)],
        "decode_test",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 640, 640]),
         helper.make_tensor_value_info("raw", TensorProto.FLOAT, raw_shape)],
        [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, raw_shape),
         helper.make_tensor_value_info("mean", TensorProto.FLOAT, [])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def ultralytics_reference(pred, conf, iou, max_det, img_hw, orig_hw, agnostic=False):
    """non_max_suppression (one image, no masks) + scale_boxes, as ultralytics 8.x writes them."""
    p = torch.from_numpy(pred)
    nc = p.shape[1] - 4
    xc = p[:, 4:4 + nc].amax(1) > conf
    p = p.transpose(-1, -2)
    xy, wh = p[..., :2], p[..., 2:4] / 2
    p = torch.cat((xy - wh, xy + wh, p[..., 4:]), -1)
    x = p[0][xc[0]]
    box, cls = x.split((4, nc), 1)
    cf, j = cls.max(1, keepdim=True)
    x = torch.cat((box, cf, j.float()), 1)[cf.view(-1) > conf]
    c = x[:, 5:6] * (0 if agnostic else 7680)
    i = torchvision.ops.nms(x[:, :4] + c, x[:, 4], iou)[:max_det]
    x = x[i]
    gain = min(img_hw[0] / orig_hw[0], img_hw[1] / orig_hw[1])
    pad = (round((img_hw[1] - orig_hw[1] * gain) / 2 - 0.1),
           round((img_hw[0] - orig_hw[0] * gain) / 2 - 0.1))
    b = x[:, :4].clone()
    b[:, 0] -= pad[0]
    b[:, 2] -= pad[0]
    b[:, 1] -= pad[1]
    b[:, 3] -= pad[1]
    b /= gain
    b[:, 0].clamp_(0, orig_hw[1])
    b[:, 2].clamp_(0, orig_hw[1])
    b[:, 1].clamp_(0, orig_hw[0])
    b[:, 3].clamp_(0, orig_hw[0])
    return b.numpy(), x[:, 4].numpy(), x[:, 5].numpy().astype(np.int64)


def run(args, *cmd):
    return subprocess.run([args.ferry] + list(cmd), capture_output=True, text=True)


def test_detect(args, work):
    rng = np.random.RandomState(3)
    orig_h, orig_w = 300, 500
    Image.fromarray(rng.randint(0, 256, (orig_h, orig_w, 3), dtype=np.uint8)).save(
        os.path.join(work, "photo.png"))
    for case, (classes, anchors, conf, iou, agnostic, max_det) in {
            "3 classes": (3, 400, 0.25, 0.45, False, 300),
            "agnostic, max_det 5": (4, 300, 0.3, 0.5, True, 5),
            "80 classes, dense": (80, 2000, 0.1, 0.7, False, 300)}.items():
        pred = np.zeros((1, 4 + classes, anchors), np.float32)
        pred[0, 0] = rng.uniform(0, 640, anchors)
        pred[0, 1] = rng.uniform(0, 640, anchors)
        pred[0, 2] = rng.uniform(4, 220, anchors)
        pred[0, 3] = rng.uniform(4, 220, anchors)
        pred[0, 4:] = rng.uniform(0, 1, (classes, anchors)) ** 3
        # Clusters of near-duplicate boxes so NMS has work, some exact score ties.
        for k in range(0, anchors - 4, 7):
            pred[0, :4, k + 1] = pred[0, :4, k] + rng.uniform(-3, 3, 4).astype(np.float32)
            pred[0, 4:, k + 2] = pred[0, 4:, k]
        model = os.path.join(work, "detect.onnx")
        identity_model(model, [1, 4 + classes, anchors], "output0")
        np.save(os.path.join(work, "raw.npy"), pred)
        spec = os.path.join(work, "detect.yaml")
        with open(spec, "w") as f:
            f.write("inputs:\n  - name: images\n    image:\n      decode: {exif: apply}\n"
                    "      color: rgb\n      resize: {size: [640, 640], filter: cv2_linear, "
                    "fit: letterbox}\n      scale: 0.00392156862745098\n"
                    "outputs:\n  - name: output0\n    detect: {format: yolov8, "
                    f"score_threshold: {conf}, iou_threshold: {iou}, max_detections: {max_det}, "
                    f"class_agnostic: {'true' if agnostic else 'false'}, input: images, "
                    "labels: [a, b, c]}\n")
        r = run(args, "run", model, "--prep", spec, "--input", "images=" + os.path.join(work, "photo.png"),
                "--input", "raw=" + os.path.join(work, "raw.npy"), "--json")
        check(r.returncode == 0, f"detect {case}: ferry run exit 0 ({r.stderr.strip()[-300:]})")
        if r.returncode != 0:
            continue
        out = json.loads(r.stdout)["outputs"][0]
        got_b = np.array([d["box"] for d in out["detections"]], np.float32).reshape(-1, 4)
        got_s = np.array([d["score"] for d in out["detections"]], np.float32)
        got_c = np.array([d["class"] for d in out["detections"]], np.int64)
        want_b, want_s, want_c = ultralytics_reference(pred, conf, iou, max_det, (640, 640),
                                                      (orig_h, orig_w), agnostic)
        same = (got_b.shape == want_b.shape and np.array_equal(got_b, want_b) and
                np.array_equal(got_s, want_s) and np.array_equal(got_c, want_c))
        check(same and out["boxes_in"] == "original image" and len(want_s) > 0,
              f"detect {case}: {len(got_s)} detections, equal to ultralytics + torchvision.ops.nms "
              f"({len(want_s)}; max box diff "
              f"{np.abs(got_b - want_b).max() if got_b.shape == want_b.shape and len(want_b) else '-'})")
        if case == "3 classes":
            labels = [d["label"] for d in out["detections"]]
            check(all(l == "abc"[c] for l, c in zip(labels, got_c)), "detect: labels by class")


def test_nms_alone(args, work):
    """torchvision.ops.nms on random boxes with many overlaps, through a 1-class output whose
    boxes sit at the origin (no class offset): the kept boxes equal torchvision's."""
    rng = np.random.RandomState(5)
    n = 500
    pred = np.zeros((1, 5, n), np.float32)
    pred[0, 0] = rng.uniform(50, 150, n)
    pred[0, 1] = rng.uniform(50, 150, n)
    pred[0, 2] = rng.uniform(20, 80, n)
    pred[0, 3] = rng.uniform(20, 80, n)
    pred[0, 4] = np.round(rng.uniform(0.3, 1, n), 2)  # many exact ties
    model = os.path.join(work, "nms.onnx")
    identity_model(model, [1, 5, n], "output0")
    np.save(os.path.join(work, "nms.npy"), pred)
    spec = os.path.join(work, "nms.yaml")
    with open(spec, "w") as f:
        f.write("inputs:\n  - name: images\n    image:\n      decode: {exif: apply}\n      color: rgb\n"
                "      resize: {size: [640, 640], filter: cv2_linear}\n"
                "outputs:\n  - name: output0\n    detect: {format: yolov8, score_threshold: 0.0, "
                "iou_threshold: 0.3, max_detections: 100000}\n")
    r = run(args, "run", model, "--prep", spec, "--input", "images=" + os.path.join(work, "photo.png"),
            "--input", "raw=" + os.path.join(work, "nms.npy"), "--json")
    out = json.loads(r.stdout)["outputs"][0] if r.returncode == 0 else {"detections": []}
    p = torch.from_numpy(pred[0])
    boxes = torch.stack([p[0] - p[2] / 2, p[1] - p[3] / 2, p[0] + p[2] / 2, p[1] + p[3] / 2], 1)
    keep = torchvision.ops.nms(boxes, p[4], 0.3)
    want = boxes[keep].numpy()
    got = np.array([d["box"] for d in out["detections"]], np.float32).reshape(-1, 4)
    check(r.returncode == 0 and out.get("boxes_in") == "model input" and got.shape == want.shape
          and np.array_equal(got, want),
          f"NMS alone: {len(got)} kept of {n}, torchvision keeps {len(want)}, equal boxes in order")


def test_ctc(args, work):
    rng = np.random.RandomState(7)
    charset = ["<blank>"] + list("abcdefghij") + ["é", "中", "😀"]
    T, C = 40, len(charset)
    logits = rng.normal(0, 1, (1, T, C)).astype(np.float32)
    for t in range(T):  # runs of the same class and blanks in between
        logits[0, t, rng.choice([0, 0, 3, 3, 11, 12, 13, 5])] += 5
    model = os.path.join(work, "ctc.onnx")
    g = helper.make_graph(
        [helper.make_node("Identity", ["raw"], ["ctc_out"]),
         helper.make_node("ReduceMean", ["images"], ["mean"], keepdims=0)],
        "ctc", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 640, 640]),
                helper.make_tensor_value_info("raw", TensorProto.FLOAT, [1, T, C])],
        [helper.make_tensor_value_info("ctc_out", TensorProto.FLOAT, [1, T, C]),
         helper.make_tensor_value_info("mean", TensorProto.FLOAT, [])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), model)
    np.save(os.path.join(work, "ctc.npy"), logits)
    spec = os.path.join(work, "ctc.yaml")
    with open(spec, "w", encoding="utf-8") as f:
        f.write("inputs:\n  - name: images\n    image:\n      decode: {exif: apply}\n      color: rgb\n"
                "      resize: {size: [640, 640], filter: cv2_linear}\n"
                "outputs:\n  - name: ctc_out\n    ctc:\n      blank: 0\n      charset: " +
                json.dumps(charset, ensure_ascii=False) + "\n")
    r = run(args, "run", model, "--prep", spec, "--input", "images=" + os.path.join(work, "photo.png"),
            "--input", "raw=" + os.path.join(work, "ctc.npy"), "--json")
    best = logits[0].argmax(1)
    ids, prev = [], -1
    for b in best:
        if b != prev and b != 0:
            ids.append(int(b))
        prev = b
    want = "".join(charset[i] for i in ids)
    out = json.loads(r.stdout)["outputs"][0] if r.returncode == 0 else {}
    check(r.returncode == 0 and out.get("text") == want and out.get("ids") == ids,
          f"CTC greedy: {out.get('text')!r} == {want!r} ({r.stderr.strip()[-200:]})")
    r = run(args, "run", model, "--prep", spec, "--input", "images=" + os.path.join(work, "photo.png"),
            "--input", "raw=" + os.path.join(work, "ctc.npy"))
    check(r.returncode == 0 and f"ctc_out: '{want}'" in r.stdout, "CTC: the text output prints the string")
    # A charset too short for the classes the model emits: one error line naming the output.
    with open(spec, "w", encoding="utf-8") as f:
        f.write("inputs:\n  - name: images\n    image:\n      decode: {exif: apply}\n      color: rgb\n"
                "      resize: {size: [640, 640], filter: cv2_linear}\n"
                "outputs:\n  - name: ctc_out\n    ctc: {blank: 0, charset: [x, y]}\n")
    r = run(args, "run", model, "--prep", spec, "--input", "images=" + os.path.join(work, "photo.png"),
            "--input", "raw=" + os.path.join(work, "ctc.npy"))
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 3 and len(lines) == 1 and "ctc_out" in lines[0] and "charset" in lines[0],
          f"CTC with a short charset: exit 3 naming the output ({r.returncode} {lines})")


def test_spec_errors(args, work):
    photo = os.path.join(work, "photo.png")
    model = os.path.join(work, "detect.onnx")
    for body, needle in (
            ("  - name: output0\n    detect: {format: yolov5}\n", "outputs[0].detect.format"),
            ("  - name: output0\n    detect: {format: yolov8}\n    ctc: {charset: [a]}\n",
             "exactly one of detect and ctc"),
            ("  - name: output0\n    detect: {format: yolov8, input: nothere}\n",
             "outputs[0].detect.input"),
            ("  - name: output0\n    ctc: {blank: 0}\n", "outputs[0].ctc.charset")):
        spec = os.path.join(work, "bad_out.yaml")
        with open(spec, "w") as f:
            f.write("inputs:\n  - name: images\n    image:\n      decode: {exif: apply}\n"
                    "      color: rgb\n      resize: {size: [640, 640], filter: cv2_linear}\n"
                    "outputs:\n" + body)
        r = run(args, "run", model, "--prep", spec, "--input", "images=" + photo, "--input",
                "raw=" + os.path.join(work, "raw.npy"))
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 3 and len(lines) == 1 and needle in lines[0],
              f"spec error ({needle}): exit {r.returncode}, {lines}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    test_detect(args, work)
    test_nms_alone(args, work)
    test_ctc(args, work)
    test_spec_errors(args, work)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
