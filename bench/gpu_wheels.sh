#!/usr/bin/env bash
# Run on a machine with the network before the GPU checks: download the wheels the GPU image lacks
# (its python3 is 3.12 with torch, transformers, peft, accelerate, pyarrow, pandas, pillow; no
# pydantic, duckdb, trl or datasets) into .whl/, at the versions of requirements.lock.
# Then copy .whl/ to the GPU machine with the checkout and run `bash bench/gpu_checks.sh` there.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
pins=()
for name in pydantic pydantic_core annotated-types typing-inspection duckdb trl datasets dill multiprocess \
            transformers peft; do
  pin=$(grep -iE "^${name//[-_]/[-_]}==" requirements.lock) || { echo "no pin for $name in requirements.lock" >&2; exit 2; }
  pins+=("$pin")
done
rm -rf .whl && mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${pins[@]}"
ls -la .whl
du -sh .whl
