# Sourced by the GPU scripts, from the repository root on the device: unpack the clean
# `git archive` of the commit (build/clean.tgz) into /tmp/clean, install the carried wheels,
# and go there, so that nothing runs from a working tree with edits in flight.
mkdir -p /tmp/clean && tar xzf build/clean.tgz -C /tmp/clean && cp -r .whl /tmp/clean/
cd /tmp/clean || exit 1
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
cat build_commit.txt
ratchet() { python3 -m orchestrator.cli "$@"; }
