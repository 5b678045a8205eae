"""Wall seconds per phase of a config's judging, so a run can say where its judge time went."""

from __future__ import annotations

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


@contextmanager
def phase_clock(record: dict[str, float], phase: JudgePhase) -> Iterator[None]:
    """Add the wall time of the block to record[phase], also when the block raises."""
    started = time.perf_counter()
    try:
        yield
    finally:
        record[phase.value] = record.get(phase.value, 0.0) + time.perf_counter() - started
