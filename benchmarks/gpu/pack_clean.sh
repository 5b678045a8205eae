#!/usr/bin/env bash
# Here, before a GPU call: pack a clean `git archive` of HEAD (committed work only) as
# build/clean.tgz, with build_commit.txt naming the commit; clean_checkout.sh unpacks it on the
# device. Carry build/ (and .whl) in the call. docs/results stays out: the device runs no result
# pages, and the runs' archives there would eat the call's 64 MiB (a bench reads its frontier
# from the working tree, which travels anyway).
#   usage (repo root): bash benchmarks/gpu/pack_clean.sh
set -euo pipefail
rm -rf build/clean && mkdir -p build/clean
git archive HEAD | tar x -C build/clean --exclude=docs/results
git rev-parse HEAD > build/clean/build_commit.txt
tar czf build/clean.tgz -C build/clean .
rm -rf build/clean
echo "build/clean.tgz: $(cat <(git rev-parse --short HEAD)), $(du -h build/clean.tgz | cut -f1)"
