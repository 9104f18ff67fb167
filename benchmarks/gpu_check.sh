#!/usr/bin/env bash
# The check on a real NVIDIA GPU (issue 47, item 5): benchmarks/gpu_check.py, in at most 9 minutes.
# Needs PyTorch with CUDA, timm and nvidia-ml-py there; whatever else infercast needs (XGBoost,
# LightGBM, tflite) comes as wheels in .whl/ (installed into /tmp/site, nothing else touched).
#   bash benchmarks/gpu_check.sh [OUT]      (OUT: $OUT where it is set, else ./gpu-check)
# The wheels, fetched beforehand on a machine with pip (the GPU image's Python is 3.12):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     xgboost-cpu==3.2.0 lightgbm==4.7.0 tflite==2.18.0
set -euo pipefail
out="${1:-${OUT:-gpu-check}}"
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="src:.:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 INFERCAST_CACHE="${INFERCAST_CACHE:-/tmp/infercast-cache}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
mkdir -p "$out"
timeout 530 python3 benchmarks/gpu_check.py --out "$out" --budget-s 450 2>&1 | tee "$out/run.log"
