"""A run's time and throughput, read from the stamps of its ledger events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ledger import EventRecord, StoredEvent
from orchestrator.events import EventKind, Stage
from orchestrator.throughput import Activity, format_run_time, run_time, throughput_cell

START = datetime(2026, 12, 4, 13, 0, tzinfo=UTC)


def _events(timeline: list[tuple[float, EventKind, dict[str, object]]]) -> list[StoredEvent]:
    return [
        StoredEvent(
            seq=n,
            hash=f"{n:064x}",
            created_at=(START + timedelta(seconds=at)).isoformat(),
            record=EventRecord(kind=kind.value, payload=payload),
        )
        for n, (at, kind, payload) in enumerate(timeline, start=1)
    ]


def _evaluation(stage: Stage, outcome: str = "passed") -> dict[str, object]:
    return {"stage": stage.value, "outcome": outcome}


TWO_INVOCATIONS = _events(
    [
        (0, EventKind.RUN_STARTED, {}),
        (50, EventKind.NOISE_FLOOR, {}),
        (70, EventKind.EVALUATION, _evaluation(Stage.SWEEP)),  # the seed
        (71, EventKind.STEP_STARTED, {}),
        (71.5, EventKind.LLM_CALL, {}),
        (72, EventKind.STATIC_CHECKED, {}),
        (132, EventKind.EVALUATION, _evaluation(Stage.SCREEN, "timeout")),
        (192, EventKind.EVALUATION, _evaluation(Stage.SCREEN, "timeout")),
        (193, EventKind.STEP_STARTED, {}),
        (203, EventKind.EVALUATION, _evaluation(Stage.SCREEN)),
        (263, EventKind.EVALUATION, _evaluation(Stage.SWEEP)),
        (283, EventKind.INHERITED_CHECK, {}),
        (290, EventKind.RESEARCH, {}),
        (300, EventKind.RUN_STOPPED, {}),
        # An hour's pause, then the run resumed: the pause is no run time.
        (3900, EventKind.RUN_STARTED, {}),
        (3930, EventKind.VERIFICATION, {}),
        (4090, EventKind.FEASIBILITY, {}),
        (4091, EventKind.RUN_STOPPED, {}),
    ]
)


def test_each_stretch_goes_to_what_its_closing_event_records() -> None:
    report = run_time(TWO_INVOCATIONS, candidates=3)
    assert report.invocations == 2
    assert report.run_s == pytest.approx(300 + 191)
    assert report.by_activity == {
        Activity.QUALIFICATION: 50,
        Activity.SWEEP: 20 + 60,
        Activity.EXPANSION: 1 + 1 + 1,
        Activity.SCREEN_CUT: 60 + 60,
        Activity.SCREEN: 10,
        Activity.INHERITED_CHECK: 20,
        Activity.AGENTS: 7,
        Activity.OTHER: 10 + 1,
        Activity.VERIFICATION: 30,
        Activity.FEASIBILITY: 160,
    }
    assert report.per_hour == pytest.approx(3 * 3600 / 491)


def test_the_pause_between_invocations_is_not_counted() -> None:
    # Can the check fail? Read as one invocation, the hour's pause lands in the run's time.
    joined = [e for e in TWO_INVOCATIONS if not (e.seq > 1 and e.record.kind == "run_started")]
    assert run_time(joined, candidates=3).run_s > 3600
    assert run_time(TWO_INVOCATIONS, candidates=3).run_s < 600


def test_a_run_without_time_has_no_rate_and_the_lines_say_so() -> None:
    empty = run_time(_events([(0, EventKind.RUN_STARTED, {})]), candidates=1)
    assert (empty.run_s, empty.per_hour, empty.by_activity) == (0.0, None, {})
    assert "no rate yet" in format_run_time(empty)
    assert throughput_cell(None) == "-"
    cell = throughput_cell(run_time(TWO_INVOCATIONS, candidates=3).model_dump(mode="json"))
    assert cell.startswith("491 s over 2 invocation(s), 3 candidates (the seed included): 22.0")
    assert "feasibility 160 s, screen_cut 120 s" in cell
