"""Candidates that fail the same check again and again: one short line each, then a stop.

A run whose every candidate fails for one identical reason (a CONSTRAINT the code cannot meet,
a broken workload or device) learns nothing; it says so and stops instead of going on.
"""

from __future__ import annotations

from typing import Any

from harness.static_checks import StaticReport
from orchestrator.state import SearchState, StepView
from search import Verdict

FAILED = frozenset({Verdict.FAILED_STATIC, Verdict.FAILED_CORRECTNESS, Verdict.FAILED_RUN})


def static_key(findings: list[dict[str, Any]]) -> str:
    """Static findings as one comparable text (files and line numbers left out)."""
    return "static checks: " + "; ".join(
        sorted({f"[{f.get('rule')}] {f.get('message')}" for f in findings})
    )


def failure_key(state: SearchState, step: StepView) -> str | None:
    """What a step's candidate failed on, comparable across steps (None: it did not fail)."""
    cand = state.candidates.get(step.sha or "")
    if cand is None or cand.verdict not in FAILED:
        return None
    if cand.verdict is Verdict.FAILED_STATIC and step.static is not None:
        return static_key(step.static.findings)
    return cand.reason


def same_failures_in_row(state: SearchState, since_step: int = 1) -> tuple[list[int], str | None]:
    """The newest closed steps (from `since_step` on) whose candidates all failed for one
    identical reason, in step order, and that reason. Steps that committed nothing are passed
    over: they neither break nor extend the row."""
    steps: list[int] = []
    key: str | None = None
    for number in sorted(state.steps, reverse=True):
        step = state.steps[number]
        if number < since_step:
            break
        if not step.closed or step.sha is None:
            continue
        this = failure_key(state, step)
        if this is None or (key is not None and this != key):
            break
        key = this
        steps.append(number)
    return sorted(steps), key


def _fix(state: SearchState, key: str) -> str:
    for seq, text in state.constraint_messages.items():
        if repr(text) in key:
            return (
                f"CONSTRAINT #{seq} ({text!r}) fails every candidate: retract it with "
                f"'ratchet inject RETRACT {seq}'"
            )
    return "fix the cause (a CONSTRAINT, the workload or the device; 'ratchet status' shows them)"


def repeated_failure_stop(state: SearchState, since_step: int, limit: int) -> str | None:
    """Why the run must stop when `limit` candidates in a row failed the same way."""
    steps, key = same_failures_in_row(state, since_step)
    if key is None or len(steps) < limit:
        return None
    shown = key if len(key) <= 300 else key[:297] + "..."
    return (
        f"{len(steps)} candidates in a row (steps {steps[0]}-{steps[-1]}) failed the same "
        f"check ({shown}); {_fix(state, key)}, then run again (the count starts afresh)"
    )


def static_line(state: SearchState, report: StaticReport) -> str:
    """The progress line of a static check: every finding once, then only a reference to the
    steps that failed with the same findings."""
    if report.passed:
        return "  static checks: ok"
    steps, key = same_failures_in_row(state)
    if steps and key == static_key([f.model_dump(mode="json") for f in report.findings]):
        where = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
        return f"  static checks failed: the same {len(report.findings)} findings as {where}"
    return f"  static checks failed:\n{report.summary()}"
