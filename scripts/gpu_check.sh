#!/usr/bin/env bash
# GPU bring-up in one command (under 8 minutes on an H200): install the carried wheels, run the kernel
# and engine tests on CUDA (compiled, not interpreted), then the kernel and engine benchmarks.
# Everything goes to $OUT/gpu_check.log (OUT defaults to out/); a stage that fails or runs past its
# time is logged and the next one still runs. Carried files (see docs/gpu.md): .gpu/whl (jsonschema
# and its needs, for Python 3.12) and .gpu/tokenizer (the default model's tokenizer files).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-out}"
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
: >"$LOG"
export PYTHONUNBUFFERED=1 TRITON_INTERPRET=0

stage() {  # stage NAME SECONDS CMD...: run CMD with a time limit, log its output and exit status
  local name=$1 limit=$2
  shift 2
  echo "=== $name ($(date -u +%H:%M:%S), limit ${limit}s)" | tee -a "$LOG"
  local t0=$SECONDS
  timeout "$limit" "$@" 2>&1 | tee -a "$LOG"
  echo "=== $name: exit ${PIPESTATUS[0]} after $((SECONDS - t0))s" | tee -a "$LOG"
}

if compgen -G ".gpu/whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/kvx-site .gpu/whl/*.whl
  export PYTHONPATH="/tmp/kvx-site:$PWD"
else
  export PYTHONPATH="$PWD"
fi
stage environment 60 bash -c 'nvidia-smi -L; python3 -c "import torch, triton, transformers; print(\"torch\", torch.__version__, \"triton\", triton.__version__, \"transformers\", transformers.__version__, \"cuda\", torch.version.cuda)"'
stage "kernel and engine tests on CUDA" 200 python3 -m pytest -q -p no:cacheprovider --timeout 120 -k "not numba" \
  tests/kernels tests/engine/test_masking.py
stage "attention kernels benchmark" 120 python3 benchmarks/attention_kernels.py
stage "engine benchmark (random Llama-3.2-1B shape)" 240 python3 benchmarks/gpu_engine.py --tokenizer .gpu/tokenizer \
  --json "$OUT/gpu_engine.json" ${GPU_ENGINE_ARGS:-}
echo "log: $LOG"
