"""The run's budgets: --minutes and --max-candidates both count the whole run.

A run is resumed by running the same command again (after Ctrl-C, a crash, a kill), so both
budgets are the run's, summed over its invocations: the time of earlier invocations is read
from the ledger, from each run_started event to the last event of that invocation (its
run_stopped event when it stopped cleanly, its last recorded work when it was killed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from ledger import StoredEvent
from orchestrator.events import EventKind
from orchestrator.state import SearchState
from orchestrator.throughput import event_time


def earlier_invocations(events: list[StoredEvent]) -> tuple[float, int]:
    """Wall seconds and count of the invocations before the newest one (the running one)."""
    spans: list[float] = []
    start: datetime | None = None
    last: datetime | None = None
    for stored in events:
        stamp = event_time(stored)
        if stored.record.kind == EventKind.RUN_STARTED:
            if start is not None and last is not None:
                spans.append((last - start).total_seconds())
            start = stamp
        last = stamp
    return sum(max(0.0, s) for s in spans), len(spans)


def new_candidates(state: SearchState) -> int:
    """Candidates of the run, the seed not counted (what --max-candidates limits)."""
    return sum(1 for c in state.candidates.values() if c.parent_sha is not None)


@dataclass(frozen=True)
class Invocation:
    """This invocation of `ratchet run` within its run."""

    started_at: float  # time.monotonic() when its loop began
    first_step: int  # first step it may start (rows of failures count from here)
    start_seq: int  # ledger head when its loop began
    earlier_s: float  # wall time of the run's earlier invocations
    earlier_count: int  # how many there were
    # Before its loop this invocation qualified and calibrated; counted as for earlier ones.
    before_loop_s: float = 0.0

    def used_s(self) -> float:
        """Wall time the whole run has used, this invocation included (from its run_started
        event, as earlier invocations are counted, not only from its loop)."""
        return self.earlier_s + self.before_loop_s + time.monotonic() - self.started_at

    def elapsed_s(self) -> float:
        """Wall time of this invocation's loop."""
        return time.monotonic() - self.started_at


def begin_invocation(events: list[StoredEvent], state: SearchState, head_seq: int) -> Invocation:
    """The invocation starting now, with what the run's earlier ones used."""
    earlier_s, count = earlier_invocations(events)
    starts = [e for e in events if e.record.kind == EventKind.RUN_STARTED]
    before_loop_s = 0.0
    if starts:
        before_loop_s = max(0.0, (datetime.now(UTC) - event_time(starts[-1])).total_seconds())
    return Invocation(
        started_at=time.monotonic(),
        first_step=state.next_step,
        start_seq=head_seq,
        earlier_s=earlier_s,
        earlier_count=count,
        before_loop_s=before_loop_s,
    )


def budget_stop(
    invocation: Invocation, state: SearchState, minutes: float, max_candidates: int | None
) -> str | None:
    """Why no new step may start, when a budget of the whole run is used up. Steps still
    expanding count as candidates to come: with several in flight, a run does not overshoot
    --max-candidates (one that ends with nothing new frees its place again)."""
    expanding = sum(1 for step in state.open_steps if step.sha is None)
    if max_candidates is not None and new_candidates(state) + expanding >= max_candidates:
        return f"reached {max_candidates} candidates"
    if invocation.used_s() >= minutes * 60:
        earlier = (
            f" ({invocation.earlier_s / 60:.1f} min of it by {invocation.earlier_count} earlier "
            "invocation(s); budgets count the whole run: pass a larger --minutes to go on)"
            if invocation.earlier_count
            else ""
        )
        return f"time budget of {minutes:g} min used{earlier}"
    return None
