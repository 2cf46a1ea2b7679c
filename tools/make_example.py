#!/usr/bin/python3
"""Builds the bundled example examples/digits_cnn: a small CNN trained on scikit-learn's digits
(8x8 grey images, 10 classes), exported to ONNX (opset 13, dynamic batch) with PyTorch's own
outputs on held-out images as test data. Run with Debian's python3 (torch 1.13, onnx 1.12):

    /usr/bin/python3 tools/make_example.py examples/digits_cnn
"""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper
import torch
from sklearn.datasets import load_digits


class DigitsCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(16)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.fc = torch.nn.Linear(32 * 2 * 2, 10)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


def train_digits():
    """Trains DigitsCnn (seeded) on 1347 of scikit-learn's 1797 digits; returns (model in eval
    mode, images float32 [N,1,8,8] in [0,1], labels int64 [N], held-out indices, accuracy)."""
    torch.manual_seed(0)
    np.random.seed(0)
    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = digits.target.astype(np.int64)
    perm = np.random.permutation(len(x))
    train, test = perm[:1347], perm[1347:]
    model = DigitsCnn()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    xt, yt = torch.from_numpy(x[train]), torch.from_numpy(y[train])
    for epoch in range(15):
        model.train()
        for i in range(0, len(xt), 64):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xt[i:i + 64]), yt[i:i + 64])
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        pred = model(torch.from_numpy(x[test])).argmax(1).numpy()
    acc = float((pred == y[test]).mean())
    return model, x, y, test, acc


def main(out_dir):
    model, x, y, test, acc = train_digits()
    print("held-out accuracy: %.4f on %d images" % (acc, len(test)))

    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "model.onnx")
    torch.onnx.export(model, torch.from_numpy(x[test[:1]]), path, opset_version=13,
                      input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
                      do_constant_folding=True)
    m = onnx.load(path)
    m.producer_name = "ferry-example"
    meta = m.metadata_props.add()
    meta.key, meta.value = "heldout_accuracy", "%.4f" % acc
    onnx.save(m, path)
    for k, batch in enumerate([test[:1], test[1:9]]):
        d = os.path.join(out_dir, "test_data_set_%d" % k)
        os.makedirs(d, exist_ok=True)
        inp = x[batch]
        with torch.no_grad():
            out = model(torch.from_numpy(inp)).numpy()
        with open(os.path.join(d, "input_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(inp, "image").SerializeToString())
        with open(os.path.join(d, "output_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(out, "logits").SerializeToString())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "examples/digits_cnn")
