#!/usr/bin/env bash
# Issue 4, GPU command 1 (one nvidia-h200, nothing else running beside it): the search run from
# the seed, its frontier exported, its run dir archived so a later command can resume it.
#   usage (on the device, repo root, $OUT set): bash benchmarks/gpu/issue4_search.sh [MINUTES] [CARRIED_DIR]
# CARRIED_DIR, when given, holds run.tgz from an earlier command: the run resumes from it.
# DEVICE=cpu runs the same steps on a laptop (a dry run of the script itself).
set -euo pipefail
minutes=${1:-8}
carried=${2:-}
hard_stop=$(python3 -c "print(int(float('$minutes') * 60))")
resume=()
if [ -n "$carried" ]; then
    tar xzf "$carried/run.tgz" -C /tmp  # worktrees hold absolute paths: back to /tmp/run
    resume=(--resume)
fi
export PYTHONUNBUFFERED=1
python benchmarks/cpu_default_run.py --device "${DEVICE:-cuda}" --minutes "$minutes" --hard-stop-s "$hard_stop" \
    --inject-after 0 --run-dir /tmp/run "${resume[@]}" --export "$OUT/frontier" \
    --status-json "$OUT/status.json" --out "$OUT/run.md" 2>&1 | tee "$OUT/run.log"
tar czf "$OUT/run.tgz" -C /tmp run
