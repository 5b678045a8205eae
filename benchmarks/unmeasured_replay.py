"""Which steps of a finished run moved a setting that no screen before them could judge in time.

Reads a run directory (its ledger and repository; no device). For each step, the settings the
operator is now asked to leave alone (orchestrator/unmeasured.py) are those of candidates cut
twice at earlier steps, less those some earlier candidate was measured with; the step's child is
listed when it moved one of them, with the seconds its evaluations took (the ledger's stamps).
It answers "what would the rule have saved this run?". Usage:
python benchmarks/unmeasured_replay.py RUN_DIR
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.regimes import settings_by_config  # noqa: E402
from ledger import Ledger, StoredEvent  # noqa: E402
from orchestrator.events import EventKind  # noqa: E402
from orchestrator.state import SearchState, derive_state  # noqa: E402
from orchestrator.throughput import event_time  # noqa: E402
from orchestrator.unmeasured import (  # noqa: E402
    Setting,
    moved_settings,
    run_sources,
    unmeasured_settings,
)


def evaluation_seconds(events: list[StoredEvent]) -> dict[int, float]:
    """Per step, the seconds up to each of its evaluations' events since the event before
    (within one invocation), as the run's throughput report counts them."""
    seconds: dict[int, float] = {}
    last = None
    for stored in events:
        stamp = event_time(stored)
        payload = stored.record.payload
        step_of = payload.get("step") if stored.record.kind == EventKind.EVALUATION else None
        if stored.record.kind != EventKind.RUN_STARTED and last is not None and step_of:
            step = int(step_of)
            seconds[step] = seconds.get(step, 0.0) + max(0.0, (stamp - last).total_seconds())
        last = stamp
    return seconds


def before_step(state: SearchState, step: int) -> SearchState:
    """The state's candidates from the steps before this one (their verdicts came first)."""
    earlier = copy.copy(state)
    earlier.candidates = {s: c for s, c in state.candidates.items() if c.step < step}
    return earlier


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: unmeasured_replay.py RUN_DIR (a run directory)")
    run = Path(sys.argv[1])
    if not (run / "ledger.sqlite").is_file() or not (run / "repo").is_dir():
        raise SystemExit(f"{run}: not a run directory (no ledger.sqlite and repo/ there)")
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
        events = ledger.events()
    sources = run_sources(run, state)
    if sources is None:
        raise SystemExit(
            f"{run}: its run has not started, or its repository or workload cannot be read"
        )
    read_source, sizes = sources

    def settings(sha: str) -> dict[str, dict[str, str]] | None:
        source = read_source(sha)
        return None if source is None else settings_by_config(source, sizes)

    seconds = evaluation_seconds(events)
    print("| step | idea | forbidden then | moved by its child | its evaluations (s) |")
    print("|---:|---|---|---|---:|")
    saved = 0.0
    for number in sorted(state.steps):
        step = state.steps[number]
        forbidden: set[Setting] = unmeasured_settings(
            before_step(state, number), read_source, sizes
        )
        if step.sha is None or not forbidden:
            continue
        moved = moved_settings(settings(step.started.parent_sha), settings(step.sha)) & forbidden
        if not moved:
            continue
        saved += seconds.get(number, 0.0)
        print(
            f"| {number} | {step.started.idea_id} | {_names(forbidden)} | {_names(moved)} "
            f"| {seconds.get(number, 0.0):.0f} |"
        )
    print(f"\nevaluations of steps that moved a forbidden setting: {saved:.0f} s")


def _names(pairs: set[Setting]) -> str:
    return ", ".join(f"`{n}={v}`" for n, v in sorted(pairs))


if __name__ == "__main__":
    main()
