#!/usr/bin/env bash
# On a CUDA machine: kernel tests on the GPU, then the kernel benchmark (< 8 minutes in all).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
echo "== stage 1: environment ($PY)"
nvidia-smi --query-gpu=name,memory.total --format=csv || echo "nvidia-smi missing"
$PY -c 'import torch; assert torch.cuda.is_available(), "torch has no CUDA"; print("torch", torch.__version__, torch.cuda.get_device_name())' \
  || { echo "MISSING: a CUDA build of torch"; exit 1; }
$PY -c 'import triton; print("triton", triton.__version__)' \
  || { echo "MISSING: triton (pip install triton==3.9.0)"; exit 1; }
$PY -c 'import pytest' || { echo "MISSING: pytest"; exit 1; }
echo "== stage 2: kernel tests on the GPU (TRITON_INTERPRET=0)"
TRITON_INTERPRET=0 timeout 300 $PY -m pytest tests/kernels -q -x --deselect tests/kernels/test_int8_greedy.py::test_int8_kv_greedy_agrees_with_float32
echo "== stage 3: benchmark"
TRITON_INTERPRET=0 timeout 150 $PY benchmarks/attention_kernels.py
echo "== done"
