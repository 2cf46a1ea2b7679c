#!/usr/bin/python3
"""Generates Ferry's model zoo: real architectures exported from Debian's PyTorch (torch 1.13,
torchvision 0.14, onnx 1.12) with PyTorch's own outputs as test data, in the ONNX test-data layout.

    /usr/bin/python3 tools/make_zoo.py --out DIR [--only name,name] [--list]

Writes DIR/<name>/{model.onnx, test_data_set_0..2/{input_K.pb, output_K.pb}} per model and
DIR/zoo.json (name, opset, inputs/outputs with dtype and shape, dynamic axes). Idempotent: a model
whose folder exists and carries this generator's version stamp is skipped; each model is built in a
temporary folder and renamed into place, so a killed run never leaves half a model.

Weights are seeded (torch.manual_seed); the CNNs' BatchNorm statistics are re-estimated on crops of
scikit-image's sample photos so activations have realistic ranges, and their test inputs are
normalised photo crops. Everything here is deterministic on one machine.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# Bump when a model's definition, weights or test data change: cached folders are then rebuilt.
GENERATOR_VERSION = "1"
STAMP = ".zoo_version"

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]
PHOTOS = ["astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field", "immunohistochemistry",
          "retina", "cat", "colorwheel"]
_photo_cache = []


def _photos():
    if not _photo_cache:
        import skimage.data
        for name in PHOTOS:
            im = getattr(skimage.data, name)()
            if im.ndim == 3 and im.shape[2] == 3:
                _photo_cache.append(im)
    return _photo_cache


def photo_batch(rng, n, size=224):
    """n random size x size crops of scikit-image's colour sample photos, as float32 [n,3,size,size]
    in ImageNet normalisation. Photos smaller than `size` are upscaled (nearest) first."""
    photos = _photos()
    out = np.empty((n, 3, size, size), np.float32)
    for i in range(n):
        im = photos[rng.randint(len(photos))]
        h, w = im.shape[:2]
        if min(h, w) < size:
            f = int(np.ceil(size / min(h, w)))
            im = im.repeat(f, 0).repeat(f, 1)
            h, w = im.shape[:2]
        y, x = rng.randint(h - size + 1), rng.randint(w - size + 1)
        crop = im[y:y + size, x:x + size].astype(np.float32).transpose(2, 0, 1) / 255.0
        if rng.rand() < 0.5:
            crop = crop[:, :, ::-1]
        out[i] = (crop - IMAGENET_MEAN) / IMAGENET_STD
    return out


def calibrate_batchnorm(model, rng, size=224, batches=4, batch_size=16):
    """Re-estimates every BatchNorm's running statistics on photo crops (cumulative average:
    momentum=None), then leaves the model in eval mode. Models without BatchNorm are untouched."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if bns:
        for m in bns:
            m.reset_running_stats()
            m.momentum = None
        model.train()
        with torch.no_grad():
            for _ in range(batches):
                model(torch.from_numpy(photo_batch(rng, batch_size, size)))
    model.eval()
    return model


def save_pb(path, array, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(array), name).SerializeToString())


def to_numpy(out):
    if isinstance(out, (tuple, list)):
        return [o.detach().numpy() for o in out]
    return [out.detach().numpy()]


def export(model, example, path, opset, input_names, output_names, dynamic_axes):
    torch.onnx.export(model, example, path, opset_version=opset, input_names=input_names,
                      output_names=output_names, dynamic_axes=dynamic_axes, do_constant_folding=True)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    m.producer_name = "ferry-zoo"
    onnx.save(m, path)


def write_sets(d, model, input_names, output_names, sets, forward=None):
    """sets: list of tuples of numpy inputs; outputs are PyTorch's (through `forward` if given)."""
    forward = forward or (lambda *a: model(*a))
    for k, inputs in enumerate(sets):
        sd = os.path.join(d, "test_data_set_%d" % k)
        os.makedirs(sd)
        with torch.no_grad():
            outs = to_numpy(forward(*[torch.from_numpy(a) for a in inputs]))
        for i, (a, n) in enumerate(zip(inputs, input_names)):
            save_pb(os.path.join(sd, "input_%d.pb" % i), a, n)
        for i, (a, n) in enumerate(zip(outs, output_names)):
            save_pb(os.path.join(sd, "output_%d.pb" % i), a, n)


# ---- models -----------------------------------------------------------------------------------

def build_cnn(d, arch, opset):
    import torchvision
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    model = calibrate_batchnorm(getattr(torchvision.models, arch)(weights=None), rng)
    sets = [(photo_batch(rng, 1),), (photo_batch(rng, 8),), (photo_batch(rng, 1),)]
    export(model, torch.from_numpy(sets[0][0]), os.path.join(d, "model.onnx"), opset, ["image"],
           ["logits"], {"image": {0: "batch"}, "logits": {0: "batch"}})
    write_sets(d, model, ["image"], ["logits"], sets)


class GruEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(30000, 64)
        self.gru = torch.nn.GRU(64, 64, batch_first=True)
        self.head = torch.nn.Linear(64, 5)

    def forward(self, ids):
        _, h = self.gru(self.embed(ids))
        return self.head(h[-1])


def build_gru(d):
    torch.manual_seed(0)
    rng = np.random.RandomState(1)
    model = GruEncoder().eval()
    ids = lambda b, s: rng.randint(0, 30000, size=(b, s)).astype(np.int64)
    sets = [(ids(1, 12),), (ids(8, 20),), (ids(1, 7),)]
    export(model, torch.from_numpy(sets[0][0]), os.path.join(d, "model.onnx"), 13, ["ids"],
           ["logits"], {"ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch"}})
    write_sets(d, model, ["ids"], ["logits"], sets)


class BertEncoder(torch.nn.Module):
    """Token + learned position embeddings, LayerNorm, a 4-layer post-norm TransformerEncoder; outputs
    the hidden states and a masked-mean pooled vector. `attention_mask`: int64, 1 = token, 0 = pad."""

    def __init__(self):
        super().__init__()
        self.tok = torch.nn.Embedding(30000, 256)
        self.pos = torch.nn.Embedding(512, 256)
        self.norm = torch.nn.LayerNorm(256)
        layer = torch.nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, dropout=0.1,
                                                 batch_first=True)
        # No nested tensors: the exported graph and the test data both take the plain math path.
        self.encoder = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)

    def forward(self, ids, attention_mask):
        pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        x = self.norm(self.tok(ids) + self.pos(pos))
        h = self.encoder(x, src_key_padding_mask=attention_mask == 0)
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        pooled = (h * m).sum(1) / m.sum(1)
        return h, pooled


def build_bert(d):
    torch.manual_seed(0)
    rng = np.random.RandomState(2)
    model = BertEncoder().eval()

    def case(lengths, s):
        ids = rng.randint(0, 30000, size=(len(lengths), s)).astype(np.int64)
        mask = (np.arange(s)[None, :] < np.array(lengths)[:, None]).astype(np.int64)
        ids[mask == 0] = 0
        return ids, mask

    sets = [case([16], 16), case([24, 17, 9, 24, 3, 20, 12, 1], 24), case([6], 10)]

    # torch 1.13's TransformerEncoderLayer takes a fused fast path in eval mode when grad is off;
    # with grad on (and parameters requiring grad) it runs the plain math that export traces.
    def forward(*args):
        with torch.enable_grad():
            return tuple(t.detach() for t in model(*args))

    example = tuple(torch.from_numpy(a) for a in sets[0])
    export(model, example, os.path.join(d, "model.onnx"), 14, ["ids", "attention_mask"],
           ["hidden", "pooled"],
           {"ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
            "hidden": {0: "batch", 1: "sequence"}, "pooled": {0: "batch"}})
    # The fast path must agree with the math path (else the test data would be ambiguous).
    with torch.no_grad():
        fast = model(*[torch.from_numpy(a) for a in sets[1]])
    slow = forward(*[torch.from_numpy(a) for a in sets[1]])
    m = torch.from_numpy(sets[1][1]).bool().unsqueeze(-1)
    diff = float(((fast[0] - slow[0]).abs() * m).max())
    assert diff < 1e-3, "bert_encoder: fast and math paths differ by %g" % diff
    write_sets(d, model, ["ids", "attention_mask"], ["hidden", "pooled"], sets, forward)


def build_digits(d):
    from make_example import train_digits
    model, x, y, test, acc = train_digits()
    assert acc >= 0.95, "digits_cnn held-out accuracy %.4f < 0.95" % acc
    path = os.path.join(d, "model.onnx")
    export(model, torch.from_numpy(x[test[:1]]), path, 13, ["image"], ["logits"],
           {"image": {0: "batch"}, "logits": {0: "batch"}})
    m = onnx.load(path)
    meta = m.metadata_props.add()
    meta.key, meta.value = "heldout_accuracy", "%.4f" % acc
    onnx.save(m, path)
    np.save(os.path.join(d, "heldout_images.npy"), np.ascontiguousarray(x[test]))
    np.save(os.path.join(d, "heldout_labels.npy"), y[test])
    # The training images (train_digits's split, same order) as calibration data for quantize.
    np.random.seed(0)
    perm = np.random.permutation(len(x))
    assert (perm[len(x) - len(test):] == test).all()
    np.save(os.path.join(d, "train_images.npy"), np.ascontiguousarray(x[perm[:len(x) - len(test)]]))
    write_sets(d, model, ["image"], ["logits"], [(x[test[:1]],), (x[test[1:9]],), (x[test[9:10]],)])


MODELS = {
    "resnet18_op13": lambda d: build_cnn(d, "resnet18", 13),
    "resnet18_op17": lambda d: build_cnn(d, "resnet18", 17),
    "mobilenet_v2": lambda d: build_cnn(d, "mobilenet_v2", 13),
    "gru_encoder": build_gru,
    "bert_encoder": build_bert,
    "digits_cnn": build_digits,
}


# ---- cache and manifest -----------------------------------------------------------------------

def is_complete(d):
    try:
        with open(os.path.join(d, STAMP)) as f:
            return f.read().strip() == GENERATOR_VERSION
    except OSError:
        return False


def generate(out, name):
    final = os.path.join(out, name)
    if is_complete(final):
        print("%-14s cached" % name)
        return
    tmp = tempfile.mkdtemp(prefix=".%s." % name, dir=out)
    try:
        MODELS[name](tmp)
        with open(os.path.join(tmp, STAMP), "w") as f:
            f.write(GENERATOR_VERSION + "\n")
        os.chmod(tmp, 0o755)
        if os.path.exists(final):
            shutil.rmtree(final)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print("%-14s generated" % name)


def describe(value_infos):
    out = []
    for v in value_infos:
        t = v.type.tensor_type
        dims = [dim.dim_param if dim.HasField("dim_param") else dim.dim_value for dim in t.shape.dim]
        out.append({"name": v.name, "dtype": onnx.TensorProto.DataType.Name(t.elem_type).lower(),
                    "shape": dims, "dynamic_axes": [i for i, x in enumerate(dims) if isinstance(x, str)]})
    return out


def write_manifest(out):
    entries = []
    for name in MODELS:
        d = os.path.join(out, name)
        if not is_complete(d):
            continue
        m = onnx.load(os.path.join(d, "model.onnx"), load_external_data=False)
        opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
        sets = sorted(x for x in os.listdir(d) if x.startswith("test_data_set_"))
        entries.append({"name": name, "path": name + "/model.onnx", "opset": opset,
                        "inputs": describe(m.graph.input), "outputs": describe(m.graph.output),
                        "test_data_sets": sets})
    tmp = os.path.join(out, ".zoo.json.tmp")
    with open(tmp, "w") as f:
        json.dump({"generator_version": GENERATOR_VERSION, "models": entries}, f, indent=1)
        f.write("\n")
    os.replace(tmp, os.path.join(out, "zoo.json"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="zoo folder (created)")
    ap.add_argument("--only", default="", help="comma-separated model names (default: all)")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    args = ap.parse_args()
    if args.list:
        print("\n".join(MODELS))
        return 0
    names = [n for n in args.only.split(",") if n] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print("make_zoo.py: unknown model(s) %s; known: %s" % (", ".join(unknown), ", ".join(MODELS)),
              file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    for n in names:
        generate(args.out, n)
    write_manifest(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
