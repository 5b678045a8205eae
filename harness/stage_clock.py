"""Wall seconds per phase of a judge process and of each config's judging, so a run can say
where its judge time went."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum


class JudgePhase(StrEnum):
    """The phases of one config's judging, in the order they run."""

    CHECK_BUILD = "check_build"
    CHECK_TRIALS = "check_trials"
    CHECK_EXTRA = "check_extra"
    TIMING_BUILD = "timing_build"
    TIMING_WARMUP = "timing_warmup"
    TIMING_ROUNDS = "timing_rounds"
    RECHECK = "recheck"
    # Waiting for the GPU contention readings (nvidia-smi) to finish: they start before the
    # untimed work around the timed rounds and are collected after it; what they take beyond
    # that work is spent here (run 11: 81 of 220 s of its screens fell outside every phase).
    CONTENTION_WAIT = "contention_wait"


class ProcessPhase(StrEnum):
    """The judge process's own phases, outside every config."""

    # From process creation to the judge's first line: the interpreter and its first imports.
    # It comes before the judge's clock starts, so it is not part of the evaluation's wall_s.
    INTERPRETER = "interpreter"
    # The judge's own modules, torch with them: imported after the clock started (run 11 on
    # the H200: 3.6-4.9 s of every evaluation's wall time fell outside every phase).
    IMPORT = "import"
    OPEN = "open"  # the device and its timers, the workload, the fingerprint
    LOAD = "load"  # importing the arms' modules


@contextmanager
def phase_clock(record: dict[str, float], phase: StrEnum) -> Iterator[None]:
    """Add the wall time of the block to record[phase], also when the block raises."""
    started = time.perf_counter()
    try:
        yield
    finally:
        record[phase.value] = record.get(phase.value, 0.0) + time.perf_counter() - started


def seconds_since_process_start() -> float | None:
    """Wall seconds since the kernel created this process (Linux /proc; None elsewhere): how
    long the interpreter took before the first line of the judge ran."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            # Field 22, counted after the parenthesised command name (which may hold spaces).
            started_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        now = time.clock_gettime(time.CLOCK_BOOTTIME)
        return max(0.0, now - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return None
