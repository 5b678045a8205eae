"""The tunables each candidate's code read, per config, as derived from the ledger."""

from __future__ import annotations

from pathlib import Path

from ledger import Ledger
from orchestrator.events import ConfigSummary, EvaluationSummary, EventKind, Stage
from orchestrator.state import derive_state

SHA = "a" * 40


def digest(config_id: str, read: list[str] | None) -> ConfigSummary:
    return ConfigSummary(
        config_id=config_id,
        correct=True,
        trials=2,
        failed_elements=0,
        total_elements=10,
        max_abs_error=0.0,
        problem=None,
        ratios=[],
        settings_read=read,
    )


def evaluation(stage: Stage, configs: list[ConfigSummary]) -> EvaluationSummary:
    return EvaluationSummary(
        step=0,
        sha=SHA,
        evaluation_id=f"{SHA}:{stage.value}",
        stage=stage,
        outcome="passed",
        message="",
        wall_s=1.0,
        protocol="p",
        fingerprint_id=None,
        timer_resolution_ns=None,
        arms={},
        configs=configs,
        aggregates=[],
        trial_seeds=[],
    )


def test_reads_of_every_evaluation_are_joined_and_unknown_ones_left_out(tmp_path: Path) -> None:
    screen = evaluation(Stage.SCREEN, [digest("1", ["gelu"]), digest("2", None)])
    sweep = evaluation(Stage.SWEEP, [digest("1", ["fused_rows"]), digest("3", [])])
    with Ledger.open_path(tmp_path / "ledger.sqlite") as ledger:
        ledger.append(screen.to_event(EventKind.EVALUATION))
        ledger.append(sweep.to_event(EventKind.EVALUATION))
        state = derive_state(ledger)
    assert state.settings_read == {SHA: {"1": {"gelu", "fused_rows"}, "3": set()}}


def test_a_summary_recorded_before_reads_were_kept_still_reads_back() -> None:
    old = evaluation(Stage.SWEEP, [digest("1", None)]).model_dump(mode="json")
    del old["configs"][0]["settings_read"]
    assert EvaluationSummary.model_validate(old).configs[0].settings_read is None
