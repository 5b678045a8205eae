#!/usr/bin/env bash
# Issue 4, GPU command 2 (one nvidia-h200): eager vs torch.compile(max-autotune) vs the frontier
# the search exported, configs 1-13 in one run, the compile arm built by 16 Inductor workers.
#   usage (on the device, repo root, $OUT set): bash benchmarks/gpu/issue4_bench.sh CARRIED_DIR [CONFIGS]
# CARRIED_DIR holds frontier/submission.py and status.json from the search command.
# DEVICE=cpu COMPILE_MODE=default CONFIGS... runs the same steps on a laptop (a dry run).
set -euo pipefail
carried=$1
configs=${2:-2,3,4,1,5,6,7,8,13,12,9,10,11}
export PYTHONUNBUFFERED=1
python benchmarks/track3_h200.py --device "${DEVICE:-cuda}" \
    --compile-mode "${COMPILE_MODE:-max-autotune}" --frontier "$carried/frontier/submission.py" \
    --ledger-summary "$carried/status.json" --compile-threads 16 --configs "$configs" \
    --json-out "$OUT/track3-h200.json" --out "$OUT/track3-h200.md" 2>&1 | tee "$OUT/bench.log" \
    | grep -v '^{"num_choices"'
