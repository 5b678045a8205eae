#!/usr/bin/env bash
# Issue 12 on one nvidia-h200: a real track3 run whose (scripted) agent calls benchmark and
# profile on the GPU; then the GPU cheat corpus and the split seed's fused kernels, as checks
# that the candidate package loads and runs there. Wheels in .whl (pydantic, sqlalchemy,
# gitpython, openai, httpx2 and their needs) are carried: the image has none of them.
#   usage (on the device, repo root, $OUT set): bash benchmarks/gpu/issue12_agent_tools.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv | tee "$OUT/gpu.txt"
timeout 420 python3 benchmarks/agent_tools_run.py --workload track3 --device cuda --minutes 6 \
    --run-dir /tmp/agent-run/run --out "$OUT/agent-tools-h200.md" \
    --json-out "$OUT/agent-tools-h200.json" 2>&1 | tee "$OUT/agent-tools-h200.log"
timeout 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/harness/test_cheat_corpus.py \
    2>&1 | tail -5 | tee "$OUT/cheat-corpus-gpu.txt"
timeout 100 python3 benchmarks/track3_fused_sweep.py --configs 2,13 --rows auto --warps auto \
    --out "$OUT/fused-sweep-package.md" 2>&1 | tail -5
