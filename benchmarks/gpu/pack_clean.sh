#!/usr/bin/env bash
# Here, before a GPU call: pack a clean `git archive` of HEAD (committed work only) as
# build/clean.tgz, with build_commit.txt naming the commit; clean_checkout.sh unpacks it on the
# device. Carry build/ (and .whl) in the call.
#   usage (repo root): bash benchmarks/gpu/pack_clean.sh
set -euo pipefail
rm -rf build/clean && mkdir -p build/clean
git archive HEAD | tar x -C build/clean
git rev-parse HEAD > build/clean/build_commit.txt
tar czf build/clean.tgz -C build/clean .
rm -rf build/clean
echo "build/clean.tgz: $(cat <(git rev-parse --short HEAD)), $(du -h build/clean.tgz | cut -f1)"
