#!/usr/bin/env python3
"""The AVX2 paths on a machine without AVX-512: valgrind's CPU has AVX2 and no AVX-512 (its
CPUID says so and it cannot execute an AVX-512 instruction), so every kernel Ferry picks by the
CPU takes its AVX2 path under `valgrind --tool=none`, and any AVX-512 instruction reached anyway
(a table built for the wrong ISA, a missing CPU check) is an illegal instruction: the run dies
with SIGILL. Runs the bundled example and the zoo's test data.

    /usr/bin/python3 tests/models/avx2_under_valgrind.py --ferry build/src/ferry --zoo DIR
"""
import argparse
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--zoo", required=True)
    args = ap.parse_args()
    # Without AVX-512 every test already runs the AVX2 paths natively: nothing to add, and
    # valgrind costs ~4 minutes. Skipped (ctest SKIP_RETURN_CODE 77) on such CPUs.
    with open("/proc/cpuinfo") as f:
        if " avx512f" not in f.read():
            print("avx2: this CPU has no AVX-512: the native tests run the AVX2 paths; skipped")
            return 77
    if not shutil.which("valgrind"):
        print("avx2: valgrind is missing (scripts/install-deps installs it)", file=sys.stderr)
        return 2
    # (model folder, test data): the example's sets, and per zoo model its sets 0 and 2 (batch
    # 1, two shapes). Set 1 (batch 8) is left out: under valgrind it alone took 125 s of
    # MobileNetV2's 158 s and 36 s of BERT's 45 s (measured 2026-12-07), and the batch-8 shapes
    # run the same AVX2 kernels natively on AVX2-only CI machines.
    ex = os.path.join(ROOT, "examples", "digits_cnn")
    cases = [(ex, ex)]
    for name in ["gru_encoder", "bert_encoder", "mobilenet_v2"]:
        for k in (0, 2):
            cases.append((os.path.join(args.zoo, name),
                          os.path.join(args.zoo, name, "test_data_set_%d" % k)))
    env = dict(os.environ, GOMP_SPINCOUNT="5000")  # no re-exec of the binary under valgrind
    failed = 0
    for d, data in cases:
        cmd = ["valgrind", "--tool=none", "-q", args.ferry, "run", os.path.join(d, "model.onnx"),
               "--test-data", data, "--rtol", "1e-3", "--atol", "1e-4", "--threads", "2"]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        status = "ok" if r.returncode == 0 else "exit %d" % r.returncode
        print("%-16s %-16s %s" % (os.path.basename(d), os.path.basename(data), status), flush=True)
        if r.returncode != 0:
            failed += 1
            print((r.stdout + r.stderr)[-3000:], file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
