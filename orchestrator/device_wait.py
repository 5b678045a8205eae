"""Waiting for the device lock out loud: a wait is reported when it starts, while it lasts and
when it ends, instead of a silent pause of up to the lock timeout (an hour by default).

The harness takes the lock itself (harness/lock.py); this side only probes it without blocking
before an evaluation starts, and waits here, saying so, while another evaluation holds it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.lock import DeviceBusyError, DeviceLock
from harness.runner import RunnerSettings

Notice = Callable[[str], None]


@dataclass(frozen=True)
class LockPacing:
    """How often the lock is probed and the wait reported."""

    poll_s: float = 0.5
    report_every_s: float = 30.0


def lock_busy(lock_dir: Path, device: str) -> bool:
    """Whether another evaluation holds the device lock now (a non-blocking probe: a free
    lock is taken and dropped at once)."""
    lock = DeviceLock(lock_dir, device)
    try:
        lock.acquire(timeout_s=0.0)
    except DeviceBusyError:
        return True
    lock.release()
    return False


def lock_holder(lock_dir: Path, device: str) -> str:
    """Who holds the lock, as its file says (the holder writes its pid there)."""
    try:
        pid = DeviceLock(lock_dir, device).path.read_text(encoding="utf-8").strip()
    except OSError:
        pid = ""
    return f"pid {pid}" if pid.isdigit() else "another process"


def wait_for_device(
    runner: RunnerSettings, device: str, notice: Notice, pacing: LockPacing | None = None
) -> float:
    """Wait while another evaluation holds the device lock (up to the runner's lock timeout),
    saying so when the wait starts, every `report_every_s` and when it ends; returns the
    seconds waited (0.0: the lock was free)."""
    pacing = pacing or LockPacing()
    if not lock_busy(runner.lock_dir, device):
        return 0.0
    path = DeviceLock(runner.lock_dir, device).path
    start = time.monotonic()
    notice(
        f"  waiting for the device lock {path}: held by {lock_holder(runner.lock_dir, device)} "
        f"(another evaluation on this machine); waiting up to {runner.lock_timeout_s:.0f} s"
    )
    next_report = start + pacing.report_every_s
    while lock_busy(runner.lock_dir, device):
        now = time.monotonic()
        if now - start >= runner.lock_timeout_s:
            notice(f"  the device lock is still held after {now - start:.0f} s; giving up")
            return now - start
        if now >= next_report:
            holder = lock_holder(runner.lock_dir, device)
            notice(f"  still waiting for the device lock ({now - start:.0f} s, held by {holder})")
            next_report += pacing.report_every_s
        time.sleep(pacing.poll_s)
    waited = time.monotonic() - start
    notice(f"  device lock free after {waited:.1f} s of waiting")
    return waited
