#!/usr/bin/env bash
# Issue 13 on one nvidia-h200: a search from the seed (neutral priors, offline operator and the
# composition step, unattended), its frontier exported, then the frontier against the eager
# reference on configs 1-13 under both protocols. Runs from a clean export of the commit
# (build/clean.tgz, made by `git archive`), never from a working tree with edits in flight.
#   usage (device, repo root, $OUT set): bash benchmarks/gpu/issue13_search.sh [MINUTES]
set -uo pipefail
minutes=${1:-6}
hard_stop=$(python3 -c "print(int(float('$minutes') * 60))")
source benchmarks/gpu/clean_checkout.sh
python3 benchmarks/cpu_default_run.py --device cuda --minutes "$minutes" --hard-stop-s "$hard_stop" \
    --inject-after 0 --run-dir /tmp/run --export "$OUT/frontier" \
    --status-json "$OUT/status.json" --out "$OUT/run.md" > "$OUT/run.log" 2>&1
tail -25 "$OUT/run.log"
tar czf "$OUT/run.tgz" -C /tmp run
python3 benchmarks/track3_h200.py --frontier "$OUT/frontier/submission.py" --compile-mode none \
    --rounds 5 --ledger-summary "$OUT/status.json" --out "$OUT/bench-eager.md" \
    --json-out "$OUT/bench-eager.json" > "$OUT/bench.log" 2>&1
tail -30 "$OUT/bench-eager.md"
