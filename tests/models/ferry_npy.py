"""Shared by the model tests (tests/models/*.py, tests/models/real/): arrays fed to `ferry run`
as .npy files."""
import os
import re
import subprocess

import numpy as np


def npy_name(name):
    """The file name `ferry run --output-dir` gives an output (and we give an input)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def run_with_npy(ferry, model, feeds, in_dir, *args):
    """`ferry run MODEL ARGS --input NAME=IN_DIR/in_NAME.npy ...`; the CompletedProcess."""
    os.makedirs(in_dir, exist_ok=True)
    cmd = [ferry, "run", model] + list(args)
    for k, v in feeds.items():
        f = os.path.join(in_dir, "in_%s.npy" % npy_name(k))
        np.save(f, v)
        cmd += ["--input", "%s=%s" % (k, f)]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
