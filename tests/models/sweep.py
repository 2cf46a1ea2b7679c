#!/usr/bin/env python3
"""The wide sweep: many models exported from Debian's PyTorch the way the zoo is (seeded weights,
eval mode, BatchNorm statistics re-estimated on photo crops, do_constant_folding=True), run by
PyTorch, ONNX Runtime and Ferry on seeded inputs. Per output, Ferry passes when

    max|ferry - torch| <= max(5 * max|ort - torch|, 1e-5 * max|torch|)

Two steps, two pythons (the venv has onnxruntime and numpy 2; Debian's python has torch 1.13):

    .venv/bin/python tests/models/sweep.py --ferry build/src/ferry --out build/models/sweep [--only a,b] [--fast]
        [--provider cpu|reference] [--planned]

runs `/usr/bin/python3 tests/models/sweep.py export --out DIR --only ...` itself (exports are cached
in DIR/<name>/ as model.onnx, input_K.npy, torch_K.npy, meta.json), then compares. `--list` prints
the model names; `--fast` is the small subset ctest runs. `ferry run` runs a model once, on the
unplanned first run; `--planned` also runs `ferry golden capture` (several input sets in one
session, at 1 and at 2 threads: the later sets on the arena plan, with Concat inputs and residuals
in place) and compares each set with ONNX Runtime (relative to the output's largest value, bar
1e-4).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import List

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXPORT_VERSION = "1"

# name -> (kind, spec). CNN spec: (torchvision builder, image size, opset).
CNNS = {
    "alexnet": ("alexnet", 224, 13),
    "vgg11": ("vgg11", 224, 13),
    "squeezenet1_0": ("squeezenet1_0", 224, 13),
    "squeezenet1_1": ("squeezenet1_1", 224, 13),
    "densenet121": ("densenet121", 224, 13),
    "inception_v3": ("inception_v3", 299, 13),
    "googlenet": ("googlenet", 224, 13),
    "shufflenet_v2_x1_0": ("shufflenet_v2_x1_0", 224, 13),
    "mnasnet0_5": ("mnasnet0_5", 224, 13),
    "efficientnet_b0": ("efficientnet_b0", 224, 13),
    "regnet_y_400mf": ("regnet_y_400mf", 224, 13),
    "convnext_tiny": ("convnext_tiny", 224, 13),
    "resnext50_32x4d": ("resnext50_32x4d", 224, 13),
    "wide_resnet50_2": ("wide_resnet50_2", 224, 13),
    "mobilenet_v3_small": ("mobilenet_v3_small", 224, 13),
    "mobilenet_v3_large": ("mobilenet_v3_large", 224, 13),
    "vit_b_16": ("vit_b_16", 224, 14),
    "swin_t": ("swin_t", 224, 14),
    "fcn_resnet50": ("segmentation.fcn_resnet50", 224, 13),
    "deeplabv3_mobilenet_v3_large": ("segmentation.deeplabv3_mobilenet_v3_large", 224, 13),
    "lraspp_mobilenet_v3_large": ("segmentation.lraspp_mobilenet_v3_large", 224, 13),
}
SEQS = ["lstm_bidir", "gru_bidir_h0", "transformer_decoder", "transformer_decoder_op17",
        "seq2seq_transformer", "seq2seq_gru", "control_flow", "control_flow_seq", "unet_blocks",
        "conv1d_audio", "ssdlite320"]
FAST = ["squeezenet1_1", "lstm_bidir", "gru_bidir_h0", "transformer_decoder", "control_flow"]
ALL = list(CNNS) + SEQS


# ---- export step (Debian's python: torch, torchvision, onnx 1.12) ------------------------------

def export_one(name, d):
    import numpy as np
    import onnx
    import torch
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import make_zoo

    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    dyn = None
    if name in CNNS:
        import torchvision
        builder, size, opset = CNNS[name]
        fn = torchvision.models
        for part in builder.split("."):
            fn = getattr(fn, part)
        kwargs = {"weights": None}
        if builder in ("inception_v3", "googlenet"):
            kwargs.update(aux_logits=False, init_weights=True)
        if builder.startswith("segmentation."):
            kwargs.update(weights_backbone=None, aux_loss=False)
        model = fn(**kwargs)
        for mod in model.modules():  # zero-initialised heads (vit_b_16) would give all-zero logits
            if isinstance(mod, torch.nn.Linear) and not mod.weight.detach().any():
                torch.nn.init.normal_(mod.weight, std=0.02)
        make_zoo.calibrate_batchnorm(model, rng, size=size, batches=2, batch_size=8)
        inputs = [make_zoo.photo_batch(rng, 1, size)]
        in_names, out_names = ["image"], None
        dyn = {"image": {0: "batch"}}
        wrap = model
        if builder.startswith("segmentation."):
            class Seg(torch.nn.Module):
                def __init__(self, m):
                    super().__init__()
                    self.m = m

                def forward(self, x):
                    return self.m(x)["out"]
            wrap = Seg(model).eval()
        out_names = ["out"]
        model = wrap
    else:
        model, inputs, in_names, out_names, dyn, opset = build_seq(name, rng)
    model.eval()
    t_in = [torch.from_numpy(a) for a in inputs]
    with torch.no_grad():
        outs = model(*t_in)
    if isinstance(outs, torch.Tensor):
        outs = (outs,)
    if name in ("transformer_decoder", "seq2seq_transformer"):
        # Math path (no fused fast path) for the reference outputs too.
        with torch.enable_grad():
            outs = model(*t_in)
            outs = (outs,) if isinstance(outs, torch.Tensor) else outs
            outs = tuple(o.detach() for o in outs)
    path = os.path.join(d, "model.onnx")
    example = tuple(t_in) if len(t_in) > 1 else t_in[0]
    torch.onnx.export(model, example, path, opset_version=opset, input_names=in_names,
                      output_names=out_names, dynamic_axes=dyn, do_constant_folding=True)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    for k, a in enumerate(inputs):
        np.save(os.path.join(d, "input_%d.npy" % k), a)
    for k, o in enumerate(outs):
        np.save(os.path.join(d, "torch_%d.npy" % k), o.detach().numpy())
    ops = sorted(set(n.op_type for n in m.graph.node))
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump({"inputs": in_names, "outputs": [o.name for o in m.graph.output], "opset": opset,
                   "ops": ops, "version": EXPORT_VERSION}, f)


def build_seq(name, rng):
    import numpy as np
    import torch
    nn = torch.nn
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
    if name == "lstm_bidir":
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(32, 48, num_layers=2, bidirectional=True, batch_first=True)

            def forward(self, x):
                y, (h, c) = self.lstm(x)
                return y, h, c
        return (M(), [f32(3, 11, 32)], ["x"], ["y", "h", "c"],
                {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}, 13)
    if name == "gru_bidir_h0":
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = nn.GRU(32, 40, num_layers=3, bidirectional=True)

            def forward(self, x, h0):
                return self.gru(x, h0)
        return (M(), [f32(9, 2, 32), f32(6, 2, 40)], ["x", "h0"], ["y", "h"],
                {"x": {0: "seq", 1: "batch"}, "h0": {1: "batch"}}, 13)
    if name in ("transformer_decoder", "transformer_decoder_op17"):
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                layer = nn.TransformerDecoderLayer(64, 4, 128, dropout=0.1, batch_first=True)
                self.dec = nn.TransformerDecoder(layer, 2)

            def forward(self, tgt, memory):
                s = tgt.shape[1]
                mask = torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
                return self.dec(tgt, memory, tgt_mask=mask)
        return (M(), [f32(2, 7, 64), f32(2, 9, 64)], ["tgt", "memory"], ["out"],
                {"tgt": {0: "batch", 1: "tseq"}, "memory": {0: "batch", 1: "sseq"}},
                17 if name.endswith("op17") else 14)
    if name == "seq2seq_transformer":
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.src = nn.Embedding(1000, 64)
                self.tgt = nn.Embedding(1000, 64)
                self.t = nn.Transformer(64, 4, 2, 2, 128, dropout=0.1, batch_first=True)
                self.t.encoder.enable_nested_tensor = False
                self.out = nn.Linear(64, 1000)

            def forward(self, src, tgt, src_mask):
                s = tgt.shape[1]
                mask = torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
                pad = src_mask == 0
                h = self.t(self.src(src), self.tgt(tgt), tgt_mask=mask, src_key_padding_mask=pad,
                           memory_key_padding_mask=pad)
                return self.out(h)
        src = rng.randint(0, 1000, (2, 10)).astype(np.int64)
        tgt = rng.randint(0, 1000, (2, 6)).astype(np.int64)
        sm = np.ones((2, 10), np.int64)
        sm[1, 7:] = 0
        return (M(), [src, tgt, sm], ["src", "tgt", "src_mask"], ["logits"],
                {"src": {0: "b", 1: "s"}, "tgt": {0: "b", 1: "t"}, "src_mask": {0: "b", 1: "s"}}, 14)
    if name == "seq2seq_gru":
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(500, 32)
                self.enc = nn.GRU(32, 64, batch_first=True)
                self.dec = nn.LSTM(32, 64, batch_first=True)
                self.out = nn.Linear(64, 500)

            def forward(self, src, tgt):
                _, h = self.enc(self.emb(src))
                y, _ = self.dec(self.emb(tgt), (h, torch.zeros_like(h)))
                return torch.log_softmax(self.out(y), -1)
        return (M(), [rng.randint(0, 500, (4, 12)).astype(np.int64),
                      rng.randint(0, 500, (4, 5)).astype(np.int64)], ["src", "tgt"], ["logp"],
                {"src": {0: "b", 1: "s"}, "tgt": {0: "b", 1: "t"}}, 13)
    if name == "control_flow":
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(16, 16)
                self.gate = nn.Linear(16, 1)

            def forward(self, x, steps):
                h = x
                for _ in range(int(steps)):
                    h = torch.tanh(self.lin(h)) + h
                i = 0
                while bool(h.abs().max() > 1.0) and i < 20:
                    h = h * 0.5
                    i += 1
                if bool(self.gate(h).mean() > 0):
                    out = h * 2.0 + float(i)
                else:
                    out = torch.sigmoid(h) - float(i)
                return out
        m = torch.jit.script(M())
        return (m, [f32(3, 16), np.array(4, np.int64)], ["x", "steps"], ["out"], {"x": {0: "batch"}}, 13)
    if name == "unet_blocks":
        class M(nn.Module):
            """Encoder-decoder blocks: GroupNorm, InstanceNorm, strided and transposed convolutions,
            nearest and bilinear upsampling, PixelShuffle, SiLU/GELU/LeakyReLU, a skip concat."""

            def __init__(self):
                super().__init__()
                self.c1 = nn.Conv2d(3, 16, 3, padding=1)
                self.g1 = nn.GroupNorm(4, 16)
                self.c2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
                self.n2 = nn.InstanceNorm2d(32, affine=True)
                self.up1 = nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1)
                self.c3 = nn.Conv2d(32, 12, 3, padding=1, dilation=1)
                self.ps = nn.PixelShuffle(2)
                self.c4 = nn.Conv2d(3, 4, 5, padding=2, padding_mode="reflect")

            def forward(self, x):
                a = torch.nn.functional.silu(self.g1(self.c1(x)))
                b = torch.nn.functional.gelu(self.n2(self.c2(a)))
                u = self.up1(b)
                u2 = torch.nn.functional.interpolate(b, scale_factor=2.0, mode="nearest")[:, :16]
                c = torch.nn.functional.leaky_relu(self.c3(torch.cat([u + u2, a], 1)), 0.1)
                d = self.ps(c)
                d = torch.nn.functional.interpolate(d, size=(45, 51), mode="bilinear", align_corners=False)
                return self.c4(d), torch.nn.functional.adaptive_avg_pool2d(b, 1).flatten(1)
        return (M(), [f32(2, 3, 40, 36)], ["x"], ["y", "pooled"], {"x": {0: "batch"}}, 13)
    if name == "conv1d_audio":
        class M(nn.Module):
            """A small 1-D conv stack over a waveform (wav2vec-like feature extractor): strided
            Conv1d, GroupNorm, GELU, LayerNorm over features, a depthwise Conv1d, a GRU head."""

            def __init__(self):
                super().__init__()
                self.c1 = nn.Conv1d(1, 32, 10, stride=5)
                self.g = nn.GroupNorm(32, 32)
                self.c2 = nn.Conv1d(32, 32, 3, stride=2)
                self.ln = nn.LayerNorm(32)
                self.dw = nn.Conv1d(32, 32, 7, padding=3, groups=32)
                self.gru = nn.GRU(32, 24, batch_first=True)

            def forward(self, wav):
                x = torch.nn.functional.gelu(self.g(self.c1(wav)))
                x = torch.nn.functional.gelu(self.c2(x))
                x = self.ln(x.transpose(1, 2)).transpose(1, 2)
                x = x + self.dw(x)
                y, h = self.gru(x.transpose(1, 2))
                return y, torch.max_pool1d(x, 3, 2, ceil_mode=True)
        return (M(), [f32(2, 1, 1600) * 0.3], ["wav"], ["y", "pooled"], {"wav": {0: "b", 2: "t"}}, 13)
    if name == "ssdlite320":
        import torchvision

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.m = torchvision.models.detection.ssdlite320_mobilenet_v3_large(
                    weights=None, weights_backbone=None, score_thresh=0.0, detections_per_img=50)

            def forward(self, x):
                r = self.m([x[0]])[0]
                return r["boxes"], r["scores"], r["labels"]
        m = M()
        import sys as _s
        _s.path.insert(0, os.path.join(ROOT, "tools"))
        import make_zoo
        make_zoo.calibrate_batchnorm(m.m.backbone, rng, size=320, batches=2, batch_size=4)
        m.eval()
        img = make_zoo.photo_batch(rng, 1, 320) * 0.226 + 0.45
        return (m, [img.astype(np.float32)], ["image"], ["boxes", "scores", "labels"], None, 13)
    if name == "control_flow_seq":
        class M(nn.Module):
            """A scripted recurrence collecting its steps in a list (Loop with a sequence or scan
            output), with a data-dependent early exit and a per-step branch."""

            def __init__(self):
                super().__init__()
                self.wx = nn.Linear(8, 8)
                self.wh = nn.Linear(8, 8)

            def forward(self, x, steps):
                h = torch.zeros(x.shape[0], 8)
                outs: List[torch.Tensor] = []
                for t in range(int(steps)):
                    h = torch.tanh(self.wx(x[:, t % x.shape[1]]) + self.wh(h))
                    if bool(h.sum() > 0):
                        outs.append(h)
                    else:
                        outs.append(-h)
                    if bool(h.abs().mean() > 10.0):
                        break
                return torch.stack(outs, 1)
        m = torch.jit.script(M())
        return (m, [f32(2, 5, 8), np.array(7, np.int64)], ["x", "steps"], ["out"], {"x": {0: "batch"}}, 13)
    raise KeyError(name)


def export_main(args):
    os.makedirs(args.out, exist_ok=True)
    import torch
    torch.set_num_threads(2)
    failed = 0
    for name in [n for n in args.only.split(",") if n] or ALL:
        final = os.path.join(args.out, name)
        if is_exported(final):
            continue
        tmp = tempfile.mkdtemp(prefix=".%s." % name, dir=args.out)
        t0 = time.time()
        try:
            export_one(name, tmp)
            os.chmod(tmp, 0o755)
            shutil.rmtree(final, ignore_errors=True)
            os.rename(tmp, final)
            print("exported %s (%.0f s)" % (name, time.time() - t0), flush=True)
        except Exception as e:  # one failing export must not stop the sweep
            shutil.rmtree(tmp, ignore_errors=True)
            failed += 1
            os.makedirs(final + ".failed", exist_ok=True)
            with open(os.path.join(final + ".failed", "error.txt"), "w") as f:
                f.write("%s: %s\n" % (type(e).__name__, e))
            print("export of %s failed: %s: %s" % (name, type(e).__name__, str(e)[:300]), flush=True)
    return 0


def is_exported(d):
    try:
        with open(os.path.join(d, "meta.json")) as f:
            return json.load(f).get("version") == EXPORT_VERSION
    except (OSError, ValueError):
        return False


# ---- compare step (venv: onnxruntime, numpy) ---------------------------------------------------

def npy_name(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy"


def planned_check(args, path, ort, np):
    """Runs after the first in one session use its arena plan (in-place Concat inputs and
    residuals): `ferry golden capture` (several input sets in one session) at 1 and at 2 threads
    (SqueezeNet's fire-module 3x3 convolutions run Winograd at both: in one piece at 1 thread, in
    chunks of tiles on both threads at 2, and write their place in the Concat) against ONNX
    Runtime on the same inputs. Returns the largest |ferry - ort| / max|ort| over thread counts,
    sets and outputs (inf when a run or a shape differs)."""
    import onnx
    from onnx import numpy_helper

    def load(f):
        t = onnx.TensorProto()
        with open(f, "rb") as fh:
            t.ParseFromString(fh.read())
        return numpy_helper.to_array(t)

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    worst = 0.0
    for threads in ("1", "2"):
        with tempfile.TemporaryDirectory() as tmp:
            gd = os.path.join(tmp, "golden")
            p = subprocess.run([args.ferry, "golden", "capture", path, "-o", gd, "--count", "2",
                                "--threads", threads], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
            if p.returncode != 0:
                print("golden capture failed: " + p.stderr.strip()[-200:])
                return float("inf")
            sets = sorted(d for d in os.listdir(gd) if d.startswith("test_data_set_"))
            if len(sets) < 2:
                return float("inf")
            for ds in sets:
                feeds = {n: load(os.path.join(gd, ds, "input_%d.pb" % k)) for k, n in enumerate(names)}
                for k, want in enumerate(sess.run(None, feeds)):
                    got = load(os.path.join(gd, ds, "output_%d.pb" % k))
                    if got.shape != want.shape:
                        return float("inf")
                    scale = float(np.max(np.abs(want))) if want.size else 0.0
                    diff = np.abs(got.astype(np.float64) - want)
                    diff[np.isnan(got) & np.isnan(want)] = 0.0
                    worst = max(worst, float(np.max(diff)) / max(scale, 1e-6) if want.size else 0.0)
    return worst


def compare_main(args):
    import numpy as np
    import onnxruntime as ort
    names = [n for n in args.only.split(",") if n] or (FAST if args.fast else ALL)
    unknown = [n for n in names if n not in ALL]
    if unknown:
        print("unknown model(s): %s" % ", ".join(unknown))
        return 2
    os.makedirs(args.out, exist_ok=True)
    for n in names:  # forget earlier failed exports so they are retried
        shutil.rmtree(os.path.join(args.out, n + ".failed"), ignore_errors=True)
    subprocess.run([args.torch_python, os.path.abspath(__file__), "export", "--out", args.out, "--only",
                    ",".join(names)], check=True)
    rows, failed = [], 0
    for name in names:
        d = os.path.join(args.out, name)
        if not is_exported(d):
            err = ""
            try:
                with open(os.path.join(d + ".failed", "error.txt")) as f:
                    err = f.read().strip()
            except OSError:
                pass
            rows.append((name, "-", "", 0, 0, 0, 0, 0, "EXPORT FAILED " + err[:80]))
            continue
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)
        path = os.path.join(d, "model.onnx")
        inputs = [np.load(os.path.join(d, "input_%d.npy" % k)) for k in range(len(meta["inputs"]))]
        want = [np.load(os.path.join(d, "torch_%d.npy" % k)) for k in range(len(meta["outputs"]))]
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        try:
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            got_ort = sess.run(meta["outputs"], dict(zip(meta["inputs"], inputs)))
        except Exception as e:
            got_ort = [None] * len(want)
            print("%s: onnxruntime failed: %s" % (name, str(e)[:200]))
        od = os.path.join(args.out, ".ferry_out", args.provider, name)
        shutil.rmtree(od, ignore_errors=True)
        cmd = [args.ferry, "run", path, "--provider", args.provider, "--output-dir", od]
        for k, n in enumerate(meta["inputs"]):
            cmd += ["--input", "%s=%s" % (n, os.path.join(d, "input_%d.npy" % k))]
        t0 = time.time()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        secs = time.time() - t0
        print("%-30s ferry %.1f s" % (name, secs), flush=True)
        if p.returncode != 0:
            failed += 1
            rows.append((name, "-", "", 0, 0, 0, 0, secs, "FERRY FAILED: " + p.stderr.strip()[-160:]))
            continue
        for n, w, go in zip(meta["outputs"], want, got_ort):
            gf = np.load(os.path.join(od, npy_name(n)))
            scale = float(np.max(np.abs(w))) if w.size else 0.0
            err = lambda g: (float("inf") if g is None or g.shape != w.shape else
                             float(np.max(np.abs(g.astype(np.float64) - w))) if w.size else 0.0)
            e_ort, e_ferry = err(go), err(gf)
            bar = max(5 * e_ort, 1e-5 * scale)
            ok = e_ferry <= bar or (e_ferry == 0.0)
            failed += not ok
            rows.append((name, n, "x".join(map(str, w.shape)), scale, e_ort, e_ferry, bar, secs,
                         "ok" if ok else "FAIL"))
        if args.planned:
            err = planned_check(args, path, ort, np)
            ok = err <= 1e-4
            failed += not ok
            rows.append((name, "planned", "golden sets", 0, 0, err, 1e-4, 0, "ok" if ok else "FAIL"))
    print("\n%-30s %-7s %-16s %9s %9s %9s %9s %7s  %s" % ("model", "output", "shape", "max|torch|",
                                                        "ort_err", "ferry_err", "bar", "ferry_s", ""))
    for r in rows:
        print("%-30s %-7s %-16s %9.3g %9.3g %9.3g %9.3g %7.1f  %s" % r)
    print("%d outputs within the bar, %d not (ferry --provider %s)" % (sum(r[-1] == "ok" for r in rows), failed,
                                                                    args.provider))
    return 1 if failed else 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "export":
        ap = argparse.ArgumentParser()
        ap.add_argument("cmd")
        ap.add_argument("--out", required=True)
        ap.add_argument("--only", default="")
        return export_main(ap.parse_args())
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ferry", default=os.path.join(ROOT, "build", "src", "ferry"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "models", "sweep"))
    ap.add_argument("--only", default="")
    ap.add_argument("--fast", action="store_true", help="the small subset ctest runs")
    ap.add_argument("--provider", default="cpu", help="`ferry run --provider`: cpu or reference")
    ap.add_argument("--planned", action="store_true",
                    help="also check runs on the arena plan (golden capture vs ONNX Runtime)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    args = ap.parse_args()
    args.ferry = os.path.abspath(args.ferry)
    if args.list:
        print("\n".join(ALL))
        return 0
    return compare_main(args)


if __name__ == "__main__":
    sys.exit(main())
