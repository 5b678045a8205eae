"""GPU readings through a stand-in nvidia-smi (the only edge replaced: no GPU here)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from harness.contention import take_snapshot

OURS = "6f1c0a52-0000-4000-8000-000000000001"
OTHER = "7a2b0c11-0000-4000-8000-000000000002"
FAKE_SMI = """#!/bin/sh
echo "$*" >> "{log}"
case "$*" in
  *query-compute-apps*) printf '101, GPU-{ours}\\n202, GPU-{other}\\n';;
  *clocks.sm*) printf 'GPU-{other}, 1980, 0x0\\n'
               printf 'GPU-{ours}, 1410, 0x40\\n';;
  *) exit 3;;
esac
"""


@pytest.fixture
def smi_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "calls.log"
    exe = tmp_path / "bin" / "nvidia-smi"
    exe.parent.mkdir()
    exe.write_text(FAKE_SMI.format(log=log, ours=OURS, other=OTHER))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{exe.parent}:/usr/bin:/bin")
    return log


def test_a_reading_of_the_judged_gpu_takes_two_calls(smi_log: Path) -> None:
    snap = take_snapshot("cuda", OURS)
    assert snap.gpu_processes == [101]
    assert snap.sm_clock_mhz == 1410.0
    assert snap.slowdown, "0x40 is a slowdown reason"
    assert len(smi_log.read_text().splitlines()) == 2


def test_an_unlisted_gpu_counts_the_processes_of_every_gpu(smi_log: Path) -> None:
    snap = take_snapshot("cuda", "00000000-dead-4000-8000-000000000000")
    assert snap.gpu_processes == [101, 202]
    assert snap.sm_clock_mhz == 1980.0  # the first GPU's row
