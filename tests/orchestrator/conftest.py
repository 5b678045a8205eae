"""Fixtures for orchestrator tests: fast settings, a quiet reporter, one shared softmax run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.models import TimingPlan
from orchestrator.settings import Settings

FAST_SCREEN = TimingPlan(min_rounds=4, max_rounds=8, budget_s=0.3, target_half_width=0.05)
FAST_SWEEP = TimingPlan(min_rounds=6, max_rounds=12, budget_s=0.5, target_half_width=0.03)


class ListReporter:
    """Collects progress lines instead of printing them."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def line(self, text: str) -> None:
        self.lines.append(text)


def fast_settings(run_dir: Path, **overrides: Any) -> Settings:
    """Settings for quick, real runs: small timing plans, one judge thread."""
    values: dict[str, Any] = {
        "run_dir": run_dir,
        "workload": "softmax",
        "device": "cpu",
        "minutes": 10,
        "lock_dir": run_dir.parent / "locks",
        "screen_timing": FAST_SCREEN,
        "sweep_timing": FAST_SWEEP,
        "torch_threads": 1,
    }
    values.update(overrides)
    return Settings.model_validate(values)


@pytest.fixture
def reporter() -> ListReporter:
    """A reporter that keeps the lines for assertions."""
    return ListReporter()
