#!/usr/bin/env python3
"""torchvision's tensor resize for the prep references (tools/prep_reference.py), run by
Debian's python (/usr/bin/python3: torch 1.13, torchvision 0.14), which the project venv lacks.

A worker: reads one request per line on stdin, `IN.npy OUT.npy H W ANTIALIAS` (IN: a uint8 or
float32 HxWxC or HxW array; ANTIALIAS 0|1), writes torchvision.transforms.functional.resize of
it as a CHW tensor of that dtype (bilinear) back as HxWxC (or HxW) to OUT.npy, answers `ok` or
`error: ...` on stdout; exits at end of input. `--versions` prints the versions and exits.
"""
import sys

import numpy as np
import torch
import torchvision
import torchvision.transforms.functional as F


def resize(a, h, w, antialias):
    t = torch.from_numpy(np.ascontiguousarray(a if a.ndim == 3 else a[:, :, None]))
    t = t.permute(2, 0, 1).contiguous()
    out = F.resize(t, [h, w], interpolation=F.InterpolationMode.BILINEAR, antialias=antialias)
    out = out.permute(1, 2, 0).contiguous().numpy()
    return out if a.ndim == 3 else out[:, :, 0]


def main():
    if sys.argv[1:] == ["--versions"]:
        print(f"torch {torch.__version__}, torchvision {torchvision.__version__}")
        return 0
    torch.set_num_threads(1)
    for line in sys.stdin:
        try:
            src, dst, h, w, aa = line.split()
            np.save(dst, resize(np.load(src), int(h), int(w), aa == "1"))
            print("ok", flush=True)
        except Exception as e:  # noqa: BLE001 - reported to the caller, one line
            print(f"error: {e}".replace("\n", " "), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
