"""Issue 17, a run that says what is happening: waits for the device lock reported as they
happen, tainted sweeps counted with their causes (in the run's output and in `status`), budgets
that count the whole run, and a row of identical failures recognised."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from harness.lock import DeviceLock
from harness.runner import RunnerSettings
from ledger import EventRecord, Ledger, StoredEvent
from orchestrator import cli
from orchestrator.budget import begin_invocation, budget_stop, earlier_invocations
from orchestrator.device_wait import LockPacing, lock_busy, wait_for_device
from orchestrator.events import (
    EvaluationSummary,
    EventKind,
    ExpansionFailed,
    Stage,
    StaticChecked,
    StepStarted,
)
from orchestrator.repeats import repeated_failure_stop, same_failures_in_row
from orchestrator.state import CandidateView, SearchState, StepView
from orchestrator.taint import describe_taint, taint_cause, taint_summary, tainted_line
from search import Verdict


def test_a_wait_for_the_device_lock_is_reported_as_it_happens(tmp_path: Path) -> None:
    runner = RunnerSettings(lock_dir=tmp_path, code_root=tmp_path, lock_timeout_s=30)
    holder = DeviceLock(tmp_path, "cpu")
    holder.acquire(timeout_s=1)
    assert lock_busy(tmp_path, "cpu")
    notices: list[str] = []
    release = threading.Timer(0.8, holder.release)
    release.start()
    waited = wait_for_device(runner, "cpu", notices.append, LockPacing(0.02, 0.3))
    release.join()
    assert 0.5 < waited < 10
    assert notices[0].startswith(f"  waiting for the device lock {holder.path}: held by pid ")
    assert any(n.startswith("  still waiting for the device lock") for n in notices)
    assert notices[-1].startswith("  device lock free after")
    assert not lock_busy(tmp_path, "cpu")
    assert wait_for_device(runner, "cpu", notices.append) == 0.0  # a free lock: no word


def _sweep(step: int, taint: list[str]) -> EventRecord:
    summary = EvaluationSummary(
        step=step,
        sha="a" * 40,
        evaluation_id=f"{'a' * 40}:sweep-{step}",
        stage=Stage.SWEEP,
        outcome="passed",
        message="",
        wall_s=1.0,
        protocol="interleaved-abba",
        fingerprint_id=None,
        timer_resolution_ns=None,
        arms={},
        configs=[],
        aggregates=[],
        trial_seeds=[],
        taint=taint,
    )
    return summary.to_event(EventKind.EVALUATION)


BUSY = ["other processes used 1.73 CPU cores while timing"]


def test_tainted_sweeps_are_counted_with_their_causes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with Ledger.open_path(run_dir / "ledger.sqlite") as ledger:
        ledger.append_many(
            [_sweep(1, BUSY), _sweep(2, []), _sweep(3, [BUSY[0].replace("1.73", "0.9")])]
        )
        summary = taint_summary(ledger)
    assert (summary.sweeps, summary.tainted) == (3, 2)
    assert summary.causes == {"other processes used N CPU cores while timing": 2}
    assert summary.latest == "other processes used 0.9 CPU cores while timing"
    lines = describe_taint(summary, "in this run")
    assert lines[0] == (
        "tainted sweeps: 2 of 3 in this run (other processes used N CPU cores while timing: 2)"
    )
    every = describe_taint(summary.model_copy(update={"sweeps": 2}), "in this run")
    assert "every sweep was tainted, so nothing could be promoted" in every[1]
    # `ratchet status` says it too (text and JSON).
    assert cli.main(["status", "--run-dir", str(run_dir)]) in (0, 1)
    assert lines[0] in capsys.readouterr().out
    assert cli.main(["status", "--run-dir", str(run_dir), "--json"]) in (0, 1)
    assert '"tainted": 2' in capsys.readouterr().out


def test_taint_lines_say_why_and_what_follows() -> None:
    again = tainted_line(BUSY, 1, again=True)
    assert again == f"  sweep tainted ({BUSY[0]}): measuring again (1)"
    final = tainted_line(BUSY, 3, again=False)
    assert "measured 3 time(s), tainted each time" in final and "never promotes" in final
    assert taint_cause("foreign GPU processes [123, 456]") == "foreign GPU processes [...]"


def _event(seq: int, kind: EventKind, at: str) -> StoredEvent:
    record = EventRecord(kind=kind.value, payload={})
    return StoredEvent(seq=seq, hash="0" * 64, created_at=at, record=record)


def test_earlier_invocations_count_toward_the_run_budget() -> None:
    events = [
        _event(1, EventKind.RUN_STARTED, "2026-12-01T10:00:00+00:00"),
        _event(2, EventKind.EVALUATION, "2026-12-01T10:01:30+00:00"),
        _event(3, EventKind.RUN_STOPPED, "2026-12-01T10:02:00+00:00"),
        # Killed: no run_stopped; its last recorded work ends it.
        _event(4, EventKind.RUN_STARTED, "2026-12-01T11:00:00+00:00"),
        _event(5, EventKind.EVALUATION, "2026-12-01T11:00:45+00:00"),
        _event(6, EventKind.RUN_STARTED, "2026-12-01T12:00:00+00:00"),  # the running one
        _event(7, EventKind.EVALUATION, "2026-12-01T12:05:00+00:00"),
    ]
    assert earlier_invocations(events) == (165.0, 2)
    assert earlier_invocations(events[:1]) == (0.0, 0)


def test_this_invocation_counts_from_its_run_started_event() -> None:
    # Qualification and calibration ran before the loop: the budget counts them, as it does
    # for earlier invocations (from run_started), not only the loop.
    now = datetime.now(UTC)
    events = [
        _event(1, EventKind.RUN_STARTED, (now - timedelta(seconds=400)).isoformat()),
        _event(2, EventKind.RUN_STOPPED, (now - timedelta(seconds=300)).isoformat()),
        _event(3, EventKind.RUN_STARTED, (now - timedelta(seconds=60)).isoformat()),
    ]
    invocation = begin_invocation(events, SearchState(), head_seq=3)
    assert invocation.earlier_s == 100.0 and invocation.earlier_count == 1
    assert 159.0 < invocation.used_s() < 170.0
    assert invocation.elapsed_s() < 5.0  # the loop's own time starts now
    assert budget_stop(invocation, SearchState(), minutes=2.5, max_candidates=None)
    assert budget_stop(invocation, SearchState(), minutes=3.0, max_candidates=None) is None


def _step(state: SearchState, number: int, verdict: Verdict | None, findings: str | None) -> None:
    started = StepStarted(
        step=number,
        parent_sha="p" * 40,
        idea_id="i",
        parent_theta=None,
        idea_theta=0.5,
        idea_forced=False,
        parent_forced=False,
    )
    view = StepView(started=started)
    state.steps[number] = view
    if verdict is None:  # the expander made nothing new: no candidate, the step is closed
        view.expansion_failed = ExpansionFailed(
            step=number, parent_sha="p" * 40, idea_id="i", outcome="no_change", message=""
        )
        return
    sha = f"{number:040d}"
    view.sha, view.verdict = sha, verdict
    if findings is not None:
        found = [{"rule": "constraint", "file": "c.py", "line": number, "message": findings}]
        view.static = StaticChecked(step=number, sha=sha, passed=False, findings=found)
    state.candidates[sha] = CandidateView(
        sha=sha,
        tree_sha=sha,
        parent_sha="p" * 40,
        step=number,
        idea_id="i",
        agent="offline",
        message="",
        verdict=verdict,
        reason="static" if findings else "screen: runtime_error: boom",
    )


def test_a_row_of_identical_failures_stops_the_run_and_names_the_constraint() -> None:
    state = SearchState()
    state.constraint_messages[7] = "forbid torch.exp"
    forbidden = "uses torch.exp, forbidden by CONSTRAINT 'forbid torch.exp'"
    _step(state, 1, Verdict.PROMOTED, None)
    _step(state, 2, Verdict.FAILED_STATIC, forbidden)
    _step(state, 3, Verdict.FAILED_STATIC, forbidden)  # another line number, the same finding
    _step(state, 4, None, None)  # passed over: neither breaks nor extends the row
    _step(state, 5, Verdict.FAILED_STATIC, forbidden)
    assert same_failures_in_row(state) == ([2, 3, 5], f"static checks: [constraint] {forbidden}")
    assert repeated_failure_stop(state, 1, 4) is None
    reason = repeated_failure_stop(state, 1, 3)
    assert reason is not None and reason.startswith("3 candidates in a row (steps 2-5) failed")
    assert "'ratchet inject RETRACT 7'" in reason
    assert repeated_failure_stop(state, 3, 3) is None  # this invocation began at step 3
    _step(state, 6, Verdict.FAILED_RUN, None)  # another reason breaks the row
    assert same_failures_in_row(state)[0] == [6]
