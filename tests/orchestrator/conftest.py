"""Fixtures for orchestrator tests: fast settings, a quiet reporter, ledger payload builders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.models import TimingPlan
from kernels.workload import TrialSpec
from ledger import CandidateRecord, VerdictRecord
from orchestrator.events import ConfigSummary, EvaluationSummary, Stage, StepStarted
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


def config_digest(
    config_id: str,
    correct: bool = True,
    settings_read: list[str] | None = None,
    failed_trial: TrialSpec | None = None,
    tolerance_used: float | None = None,
) -> ConfigSummary:
    """One config of an evaluation summary, as the ledger keeps it (no ratios)."""
    return ConfigSummary(
        config_id=config_id,
        correct=correct,
        trials=1,
        failed_elements=0 if correct else 8,
        total_elements=8192,
        max_abs_error=0.0 if correct else 1.0,
        tolerance_used=tolerance_used,
        problem=None,
        ratios=[],
        settings_read=settings_read,
        failed_trial=failed_trial,
    )


def step_started(step: int, parent: str, idea: str, **extra: Any) -> StepStarted:
    """A step the samplers drew (thetas 0.5, nothing forced); extra: composition, repair_of."""
    return StepStarted(
        step=step,
        parent_sha=parent,
        idea_id=idea,
        parent_theta=0.5,
        idea_theta=0.5,
        idea_forced=False,
        parent_forced=False,
        **extra,
    )


def planted_child(sha: str, tree: str, parent: str, step: int, idea: str) -> CandidateRecord:
    """A child the offline expander would have committed, planted in a ledger by hand."""
    return CandidateRecord(
        sha=sha,
        tree_sha=tree,
        parent_sha=parent,
        step=step,
        idea_id=idea,
        agent="offline",
        message="planted child",
        prompt_hash=None,
        cost={},
    )


def failed_correctness(sha: str, stage: Stage) -> VerdictRecord:
    """The verdict of a candidate that failed config 'tall' at this stage."""
    return VerdictRecord(
        candidate_sha=sha,
        verdict="failed_correctness",
        stage=stage.value,
        reason="failed correctness on configs ['tall']",
        objective=None,
        details={"success": False},
    )


def evaluation_summary(
    step: int, sha: str, stage: Stage, configs: list[ConfigSummary]
) -> EvaluationSummary:
    """An evaluation event's payload: passed when every config is correct, else incorrect."""
    correct = all(c.correct for c in configs)
    return EvaluationSummary(
        step=step,
        sha=sha,
        evaluation_id=f"{sha}:{stage.value}",
        stage=stage,
        outcome="passed" if correct else "incorrect",
        message="" if correct else "failed correctness",
        wall_s=1.0,
        protocol="p",
        fingerprint_id=None,
        timer_resolution_ns=None,
        arms={},
        configs=configs,
        aggregates=[],
        trial_seeds=[],
    )


@pytest.fixture
def reporter() -> ListReporter:
    """A reporter that keeps the lines for assertions."""
    return ListReporter()
