#!/usr/bin/env bash
# Runs on a machine with one GPU: the GPU measurements in one go (at most 8 minutes: each step
# under its own time limit), their output kept under $OUT (default: /tmp/ableaudit-gpu-checks),
# every figure gathered in $OUT/gpu_checks.json.
#   1. bench/generation.py: the transformers backend against plain HF generate, random-init
#      Qwen2.5-0.5B and Qwen2.5-7B architectures, bf16, batch 64 and 256: the ratio of their
#      throughputs (and both against one prompt at a time).
#   2. bench/scorers.py --part encoders: texts/s of a Regard-sized (roberta-base) and a
#      detector-sized (all-MiniLM-L6-v2 + LoRA) random-init encoder, bf16, a few thousand texts,
#      batched by token length against batches in the given order.
#   3. bench/dpo_train.py: TRL DPO with a LoRA on a random-init Qwen2.5-0.5B, 20 steps, with
#      load/train seconds, steps/s and peak GPU memory: DPO at a real model size.
# Before, on a machine with the network: `bash bench/gpu_wheels.sh` (wheels the GPU image lacks, in
# .whl/); copy .whl/ along and run `bash bench/gpu_checks.sh` there. A CPU dry run of the same script
# (no install, tiny sizes, longer limits: a few minutes per step on a busy 2-core machine):
#   PY=.venv/bin/python DEVICE=cpu NO_INSTALL=1 SHAPES=small GEN_ARGS="--n-prompts 8 --batches 2,4 \
#   --max-new-tokens 8 --baseline-prompts 2 --repeat 1" ENC_ARGS="--encoder-texts 16 --encoder-batch 4" \
#   DPO_ARGS="--random-init tiny --synthetic 8 --max-steps 2 --batch-size 2 --max-length 128" \
#   GEN_TIMEOUT=900 ENC_TIMEOUT=900 DPO_TIMEOUT=900 OUT=/tmp/gpu-dry bash bench/gpu_checks.sh
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

SHAPES=${SHAPES:-qwen2.5-0.5b qwen2.5-7b}
GEN_ARGS=${GEN_ARGS:---batches 64,256 --n-prompts 256 --max-new-tokens 64 --baseline-prompts 4 --repeat 1}
ENC_ARGS=${ENC_ARGS:---encoder-texts 4096 --encoder-batch 64 --dtype bfloat16}
DPO_ARGS=${DPO_ARGS:---random-init qwen2.5-0.5b --synthetic 64 --max-steps 20 --batch-size 4 --max-length 512}
failed=0
for shape in $SHAPES; do
  # the 7B builds ~15 GB of weights on the GPU: it gets the longer limit
  case $shape in *7b) limit=${GEN7B_TIMEOUT:-170} ;; *) limit=${GEN_TIMEOUT:-100} ;; esac
  echo "== bench/generation.py --shape $shape --device $DEVICE $GEN_ARGS" | tee "$OUT/generation-$shape.txt"
  # shellcheck disable=SC2086  # the argument strings split on purpose
  timeout "$limit" "$PY" bench/generation.py --shape "$shape" --device "$DEVICE" $GEN_ARGS \
    --json "$OUT/generation-$shape.json" 2>&1 | tee -a "$OUT/generation-$shape.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || failed=$((failed + 1))
done
echo "== bench/scorers.py --part encoders --device $DEVICE $ENC_ARGS" | tee "$OUT/encoders.txt"
# shellcheck disable=SC2086
timeout "${ENC_TIMEOUT:-80}" "$PY" bench/scorers.py --part encoders --device "$DEVICE" $ENC_ARGS \
  --json "$OUT/encoders.json" 2>&1 | tee -a "$OUT/encoders.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || failed=$((failed + 1))
echo "== bench/dpo_train.py --device $DEVICE $DPO_ARGS" | tee "$OUT/dpo.txt"
# shellcheck disable=SC2086
timeout "${DPO_TIMEOUT:-120}" "$PY" bench/dpo_train.py --device "$DEVICE" $DPO_ARGS 2>&1 | tee -a "$OUT/dpo.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || failed=$((failed + 1))
rm -rf "$work"
# every figure in one JSON: each step's own JSON, and the DPO step's timings line
FAILED=$failed "$PY" - "$OUT" <<'PYEOF'
import json, os, re, sys
from pathlib import Path

out = Path(sys.argv[1])
figures = {"failed_steps": int(os.environ["FAILED"])}
for f in sorted(out.glob("generation-*.json")):
    figures.setdefault("generation", {})[f.stem.removeprefix("generation-")] = json.loads(f.read_text())
if (out / "encoders.json").is_file():
    figures["encoders"] = json.loads((out / "encoders.json").read_text())["encoders"]
dpo = (out / "dpo.txt").read_text() if (out / "dpo.txt").is_file() else ""
m = re.search(r"timings: load ([\d.]+)s, train ([\d.]+)s for (\d+) steps \(([\d.]+) steps/s", dpo)
if m:
    figures["dpo"] = dict(zip(("load_s", "train_s", "steps", "steps_per_s"), map(float, m.groups())))
    peak = re.search(r"peak ([\d.]+) GiB", dpo)
    figures["dpo"]["peak_gib"] = float(peak.group(1)) if peak else None
(out / "gpu_checks.json").write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
print(f"figures: {out / 'gpu_checks.json'}")
PYEOF
echo "gpu checks: $failed failed (output in $OUT)"
exit "$failed"
