"""A run's throughput: its wall time over every invocation, what the time went to, and the
candidates it judged per hour of it, read from the ledger's event stamps."""

from __future__ import annotations

import enum
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from harness.models import Outcome
from ledger import StoredEvent
from orchestrator.events import EventKind, Stage


class Activity(enum.StrEnum):
    """What a stretch of a run's wall time went to: the work its closing event records."""

    QUALIFICATION = "qualification"  # the device's peaks and the A/A noise floor
    EXPANSION = "expansion"  # drawing a step, writing (LLM calls included) and checking it
    AGENTS = "agents"  # the researcher's and the inspector's work between steps
    SCREEN = "screen"
    SCREEN_CUT = "screen_cut"  # screens cut at their time limit: nothing learnt
    SWEEP = "sweep"
    VERIFICATION = "verification"  # a new frontier replicated in a fresh process
    # A parent judged again where its child failed, or a frontier on inputs that demoted one.
    INHERITED_CHECK = "inherited_check"
    FEASIBILITY = "feasibility"  # the frontier on the untimed configs, before it ships
    OTHER = "other"


class RunTime(BaseModel):
    """How long the run has searched, on what, and how many candidates that bought."""

    run_s: float = Field(
        description="Wall seconds of the run: each invocation from its run_started event to "
        "its last event, summed (what --minutes counts; the pauses between invocations not)."
    )
    invocations: int = Field(description="Invocations of `ratchet run` the run has had.")
    candidates: int = Field(description="Candidates in the ledger, the seed included.")
    per_hour: float | None = Field(
        description="Candidates per hour of run_s (None while no time has passed)."
    )
    by_activity: dict[Activity, float] = Field(
        description="run_s split by what each stretch between two events ended in (a screen, "
        "a sweep, a cut screen, a verification...); the seconds sum to run_s."
    )


def event_time(stored: StoredEvent) -> datetime:
    """When the event was recorded (the writer stamps UTC; a naive stamp is read as UTC)."""
    stamp = datetime.fromisoformat(stored.created_at)
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def activity_of(stored: StoredEvent) -> Activity:
    """What the stretch of time that this event closes was spent on."""
    kind, payload = stored.record.kind, stored.record.payload
    if kind == EventKind.EVALUATION:
        if payload.get("stage") == Stage.SWEEP:
            return Activity.SWEEP
        cut = payload.get("outcome") == Outcome.TIMEOUT.value
        return Activity.SCREEN_CUT if cut else Activity.SCREEN
    by_kind = {
        EventKind.DEVICE_QUALIFIED: Activity.QUALIFICATION,
        EventKind.DEVICE_NO_RUN: Activity.QUALIFICATION,
        EventKind.NOISE_FLOOR: Activity.QUALIFICATION,
        EventKind.STEP_STARTED: Activity.EXPANSION,
        EventKind.LLM_CALL: Activity.EXPANSION,
        EventKind.STATIC_CHECKED: Activity.EXPANSION,
        EventKind.EXPANSION_FAILED: Activity.EXPANSION,
        EventKind.RESEARCH: Activity.AGENTS,
        EventKind.INSPECTION: Activity.AGENTS,
        EventKind.VERIFICATION: Activity.VERIFICATION,
        EventKind.INHERITED_CHECK: Activity.INHERITED_CHECK,
        EventKind.FEASIBILITY: Activity.FEASIBILITY,
    }
    known = {k.value: k for k in EventKind}.get(kind)
    return by_kind.get(known, Activity.OTHER) if known is not None else Activity.OTHER


def run_time(events: list[StoredEvent], candidates: int) -> RunTime:
    """The run's time and throughput from its events in ledger order (every kind: the stamps
    of each invocation's events delimit its stretches)."""
    spent = dict.fromkeys(Activity, 0.0)
    invocations = 0
    last: datetime | None = None
    for stored in events:
        stamp = event_time(stored)
        if stored.record.kind == EventKind.RUN_STARTED:
            invocations += 1  # the time since the last invocation's end is no run time
        elif last is not None:
            spent[activity_of(stored)] += max(0.0, (stamp - last).total_seconds())
        last = stamp
    total = sum(spent.values())
    return RunTime(
        run_s=total,
        invocations=invocations,
        candidates=candidates,
        per_hour=candidates * 3600.0 / total if total > 0 else None,
        by_activity={a: round(s, 3) for a, s in spent.items() if s > 0},
    )


def describe_throughput(report: RunTime) -> str:
    """The run's time, its rate, and what the time went to, largest share first."""
    rate = f"{report.per_hour:.1f} per hour" if report.per_hour is not None else "no rate yet"
    shares = sorted(report.by_activity.items(), key=lambda item: -item[1])
    parts = ", ".join(f"{a.value} {s:.0f} s" for a, s in shares)
    return (
        f"{report.run_s:.0f} s over {report.invocations} invocation(s), {report.candidates} "
        f"candidates (the seed included): {rate}" + (f" ({parts})" if parts else "")
    )


def format_run_time(report: RunTime) -> str:
    """The status line."""
    return f"run time {report.run_s / 60:.1f} min: {describe_throughput(report)}"


def throughput_cell(run_time: dict[str, object] | None) -> str:
    """A status JSON's run_time as a table cell ('-' for a status from before runs reported
    it)."""
    return describe_throughput(RunTime.model_validate(run_time)) if run_time else "-"
