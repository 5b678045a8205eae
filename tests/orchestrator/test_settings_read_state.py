"""The tunables each candidate's code read, per config, as derived from the ledger."""

from __future__ import annotations

from pathlib import Path

from ledger import Ledger
from orchestrator.events import EvaluationSummary, EventKind, Stage
from orchestrator.state import derive_state
from tests.orchestrator.conftest import config_digest, evaluation_summary

SHA = "a" * 40


def test_reads_of_every_evaluation_are_joined_and_unknown_ones_left_out(tmp_path: Path) -> None:
    screen = evaluation_summary(
        0, SHA, Stage.SCREEN, [config_digest("1", True, ["gelu"]), config_digest("2")]
    )
    sweep = evaluation_summary(
        0,
        SHA,
        Stage.SWEEP,
        [config_digest("1", True, ["fused_rows"]), config_digest("3", True, [])],
    )
    with Ledger.open_path(tmp_path / "ledger.sqlite") as ledger:
        ledger.append(screen.to_event(EventKind.EVALUATION))
        ledger.append(sweep.to_event(EventKind.EVALUATION))
        state = derive_state(ledger)
    assert state.settings_read == {SHA: {"1": {"gelu", "fused_rows"}, "3": set()}}


def test_a_summary_recorded_before_reads_were_kept_still_reads_back() -> None:
    old = evaluation_summary(0, SHA, Stage.SWEEP, [config_digest("1")]).model_dump(mode="json")
    del old["configs"][0]["settings_read"], old["configs"][0]["failed_trial"]
    config = EvaluationSummary.model_validate(old).configs[0]
    assert config.settings_read is None and config.failed_trial is None
