#!/bin/sh
# Unpack Triton Inference Server for bench/serve/loadgen.py --servers ...,triton into
# build/peers/triton (or $1). PyPI's `tritonserver` is a placeholder sdist that raises on install;
# the runnable server is the one bundled in NVIDIA's `nvidia-pytriton` wheel (Triton 2.51,
# manylinux_2_35, Python backend stubs for CPython 3.8-3.13, runs without a GPU: CUDA, NVML and
# DCGM only warn). The wheel is unpacked, not installed (its dependencies stay out of .venv).
# numpy 1.26 goes beside it: the Python backend's pybind11 reads numpy 2 arrays as empty.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEST=${1:-$ROOT/build/peers/triton}
PY=${PYTHON:-$ROOT/.venv/bin/python}
mkdir -p "$DEST"
"$PY" -m pip download --no-deps nvidia-pytriton==0.7.0 -d "$DEST/wheel"
rm -rf "$DEST/x"
mkdir -p "$DEST/x"
(cd "$DEST/x" && unzip -q "$DEST"/wheel/nvidia_pytriton-0.7.0-*.whl)
T="$DEST/x/pytriton/tritonserver"
PYV=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
cp "$T/python_backend_stubs/$PYV/triton_python_backend_stub" "$T/backends/python/"
"$PY" -m pip install --no-deps --target "$DEST/np1" numpy==1.26.4
echo "Triton ready under $DEST (stub for Python $PYV)"
