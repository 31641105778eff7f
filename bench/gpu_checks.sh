#!/usr/bin/env bash
# Runs on a machine with one GPU: the GPU measurements in one go, each under its own time
# limit, their output kept under $OUT (default: /tmp/ableaudit-gpu-checks).
#   1. bench/generation.py: the transformers backend against plain HF generate, random-init
#      Qwen2.5-0.5B architecture, bf16: the ratio of their throughputs.
#   2. ableaudit.adapters.dpo.train: TRL DPO with a LoRA on a random-init Qwen2.5-0.5B, 20 steps, with
#      load/train seconds, steps/s and peak GPU memory: DPO at a real model size.
# Before, on a machine with the network: `bash bench/gpu_wheels.sh` (wheels the GPU image lacks, in
# .whl/); copy .whl/ along and run `bash bench/gpu_checks.sh` there. A CPU dry run of the same script (no install, tiny sizes):
#   PY=.venv/bin/python DEVICE=cpu NO_INSTALL=1 GEN_ARGS="--small --n-prompts 8 --batch 4 \
#   --max-new-tokens 8 --baseline-prompts 2 --repeat 1" DPO_ARGS="--random-init tiny --synthetic 8 \
#   --max-steps 2 --batch-size 2 --max-length 128" bash bench/gpu_checks.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ableaudit-gpu-checks}
mkdir -p "$OUT"
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
if [ -z "${NO_INSTALL:-}" ]; then
  [ -d .whl ] || { echo "no .whl/: run bash bench/gpu_wheels.sh first and carry .whl" >&2; exit 2; }
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
work=$(mktemp -d)
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export ABLEAUDIT_WAREHOUSE=$work/wh.duckdb ABLEAUDIT_ADAPTERS=$work/adapters
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "no nvidia-smi"
  "$PY" -c "import sys, torch, transformers, peft, trl, duckdb; print(sys.version.split()[0], 'torch', torch.__version__,
'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__, 'peft', peft.__version__, 'trl',
trl.__version__, 'duckdb', duckdb.__version__)"
} 2>&1 | tee "$OUT/env.txt"

GEN_ARGS=${GEN_ARGS:---batch 32 --n-prompts 256 --max-new-tokens 128 --baseline-prompts 16 --repeat 2}
DPO_ARGS=${DPO_ARGS:---random-init qwen2.5-0.5b --synthetic 64 --max-steps 20 --batch-size 4 --max-length 512}
failed=0
echo "== bench/generation.py --device $DEVICE $GEN_ARGS" | tee "$OUT/generation.txt"
# shellcheck disable=SC2086  # the argument strings split on purpose
timeout "${GEN_TIMEOUT:-280}" "$PY" bench/generation.py --device "$DEVICE" $GEN_ARGS 2>&1 | tee -a "$OUT/generation.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || failed=$((failed + 1))
echo "== python -m ableaudit.adapters.dpo.train --device $DEVICE $DPO_ARGS" | tee "$OUT/dpo.txt"
# shellcheck disable=SC2086
timeout "${DPO_TIMEOUT:-220}" "$PY" -m ableaudit.adapters.dpo.train --device "$DEVICE" $DPO_ARGS 2>&1 | tee -a "$OUT/dpo.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || failed=$((failed + 1))
rm -rf "$work"
echo "gpu checks: $failed failed (output in $OUT)"
exit "$failed"
