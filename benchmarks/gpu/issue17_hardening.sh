#!/usr/bin/env bash
# Issue 17 on one nvidia-h200: the supervised judge with CUDA (the seed judged on the GPU,
# the supervisor, runner and GPU cheat-corpus tests), and what isolation the host allows.
#   usage (on the device, repo root, $OUT set): bash benchmarks/gpu/issue17_hardening.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
{
    id
    unshare --pid --fork true && echo "pid namespace: available" || echo "pid namespace: refused"
    python3 -c "import ctypes; l = ctypes.CDLL(None); print('subreaper prctl:', l.prctl(36, 1, 0, 0, 0))"
    nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv
} 2>&1 | tee "$OUT/host.txt"
python3 -c "from kernels.track3.workload import track3_workload as w; print(w().seed_bundle())" \
    > /tmp/seed_submission.py
for configs in 13 screen; do
    timeout 240 python3 -m orchestrator.cli judge /tmp/seed_submission.py --device cuda \
        --configs "$configs" > "$OUT/judge-seed-$configs.txt" 2> "$OUT/judge-seed-$configs.err"
    echo "exit code $?" >> "$OUT/judge-seed-$configs.txt"
done
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/harness/test_supervisor.py \
    tests/harness/test_runner.py 2>&1 | tail -5 | tee "$OUT/supervisor-tests.txt"
timeout 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/harness/test_cheat_corpus.py \
    2>&1 | tail -5 | tee "$OUT/cheat-corpus-gpu.txt"
