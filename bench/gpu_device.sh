#!/usr/bin/env bash
# Issue 38's GPU check on a lent device, in one call (about 7 minutes of device time with the start):
#   here, once:  python -m pip download --no-deps -d build/wheels transformer-lens==4.3.0 datasets==5.2.0 \
#                  dill==0.4.1 transformers==5.24.0 && python -m pip download --no-deps --only-binary=:all: \
#                  --python-version 3.12 -d build/wheels multiprocess==0.70.19
#   device run:  command "bash bench/gpu_device.sh", carry ["build/wheels"], timeout_s 540
# The device image lacks those packages and has no network: they are installed from the carried wheels into a
# temporary folder. Writes $OUT/gpu.json, gpu.md (after every cell), BENCHMARKS.md (its GPU section) and cuda-tests.txt.
set -u
OUT=${OUT:-/tmp/poslens-gpu}
mkdir -p "$OUT"
SITE=$(mktemp -d)
python -m pip install -q --no-index --no-deps --target "$SITE" build/wheels/*.whl > "$OUT/pip.txt" 2>&1
export PYTHONPATH="$PWD:$SITE" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv > "$OUT/device.txt" 2>&1
timeout 360 python -m bench.gpu --budget 330 --out "$OUT" --write 2>&1 | tail -60 > "$OUT/gpu-log.txt"
cp BENCHMARKS.md "$OUT/BENCHMARKS.md"
timeout 120 python -m pytest -m cuda -p no:cacheprovider tests/integration/interp/test_attention_cuda.py -q \
  > "$OUT/cuda-tests.txt" 2>&1
tail -5 "$OUT/cuda-tests.txt"
cat "$OUT/gpu.md"
