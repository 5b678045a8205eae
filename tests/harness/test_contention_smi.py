"""GPU readings through a stand-in nvidia-smi (the only edge replaced: no GPU here)."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest

from harness.contention import GpuReading, cpu_snapshot, take_snapshot

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


GATED_SMI = """#!/bin/sh
echo "$*" >> "{log}"
while [ ! -e "{gate}" ]; do sleep 0.02; done
case "$*" in
  *query-compute-apps*) printf '101, GPU-{ours}\\n';;
  *clocks.sm*) printf 'GPU-{ours}, 1410, 0x0\\n';;
esac
"""


@pytest.fixture
def gated_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """An nvidia-smi that answers only once the gate file exists: (its log, the gate)."""
    log, gate = tmp_path / "calls.log", tmp_path / "gate"
    exe = tmp_path / "bin" / "nvidia-smi"
    exe.parent.mkdir()
    exe.write_text(GATED_SMI.format(log=log, gate=gate, ours=OURS))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{exe.parent}:/usr/bin:/bin")
    return log, gate


def _wait_for_lines(log: Path, count: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if log.exists() and len(log.read_text().splitlines()) >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"nvidia-smi was not started {count} times: {log}")


def test_a_reading_runs_while_the_judge_works(gated_smi: tuple[Path, Path]) -> None:
    """Both queries start at once and are collected later: the judge does untimed work
    meanwhile (a reading taken in the constructor would wait out the gate and read nothing)."""
    log, gate = gated_smi
    reading = GpuReading("cuda", OURS)
    _wait_for_lines(log, 2)  # both queries are running, and neither has answered
    cpu = cpu_snapshot()
    gate.touch()
    snap = reading.complete(cpu)
    assert snap.gpu_processes == [101]
    assert snap.sm_clock_mhz == 1410.0
    assert (snap.cpu_busy_ticks, snap.own_ticks) == (cpu.cpu_busy_ticks, cpu.own_ticks)


def test_a_discarded_reading_stops_its_queries(gated_smi: tuple[Path, Path]) -> None:
    log, _ = gated_smi
    reading = GpuReading("cuda", OURS)
    _wait_for_lines(log, 2)
    procs = [p for p in reading._procs or () if p is not None]
    assert len(procs) == 2
    reading.discard()
    assert all(p.returncode is not None for p in procs), "killed and reaped"
    # Collecting afterwards reads the CPU only: no GPU readings are invented.
    snap = reading.complete()
    assert snap.gpu_processes == [] and snap.sm_clock_mhz is None


def test_a_cpu_device_starts_no_query(smi_log: Path) -> None:
    snap = GpuReading("cpu", None).complete()
    assert snap.gpu_processes == [] and not smi_log.exists()
