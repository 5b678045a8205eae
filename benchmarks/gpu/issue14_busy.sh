#!/usr/bin/env bash
# Issue 14 on one nvidia-h200: GPU busy fraction of a track3 search from the seed, today's
# serial loop against one device with two expanders (expansion overlapped with judging), one
# arm after the other, nvidia-smi sampled every 200 ms. Runs from a clean `git archive`.
#   usage (device, repo root, $OUT set): bash benchmarks/gpu/issue14_busy.sh [MINUTES]
set -uo pipefail
minutes=${1:-3.5}
hard_stop=${2:-250}
source benchmarks/gpu/clean_checkout.sh
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader
for arm in serial 0:2; do
    name=$(echo "$arm" | tr ':,' '__')
    # Both arms share one lock dir, so no judge of one can ever overlap the other's.
    python3 benchmarks/device_slots.py --device cuda --minutes "$minutes" --arm "$arm" \
        --hard-stop-s "$hard_stop" --lock-dir /tmp/slot-locks --work "/tmp/slots-$name" --out "$OUT/busy-$name.md" \
        > "$OUT/busy-$name.log" 2>&1
    echo "arm $arm: exit $?"
    tail -12 "$OUT/busy-$name.md" 2>/dev/null || tail -20 "$OUT/busy-$name.log"
    tar czf "$OUT/run-$name.tgz" -C "/tmp/slots-$name" . 2>/dev/null
done
