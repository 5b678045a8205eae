"""The search's path: the frontier's objective over time and steps, and every judged candidate
as a point with its verdict class and per-config speedups."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from ledger import Ledger
from orchestrator.evaluation import BASELINE_ARM
from orchestrator.events import EventKind
from orchestrator.run_view.common import RunData, VerdictClass, ratio_of, title, verdict_class
from search import Verdict


class CandidatePoint(BaseModel):
    """One judged candidate."""

    sha: str = Field(description="Candidate commit.")
    step: int = Field(description="Step that made it (0: the seed).")
    seq: int = Field(description="Ledger seq of its verdict (the order verdicts were reached).")
    at: str = Field(description="When the verdict was written (ISO-8601, UTC).")
    elapsed_s: float = Field(description="Seconds from the run's first start to the verdict.")
    verdict: str = Field(description="The verdict as written (e.g. failed_static).")
    verdict_class: VerdictClass = Field(description="promoted, rejected, inconclusive, failed.")
    stage: str = Field(description="Stage the verdict came from (static, screen, sweep).")
    objective: float | None = Field(description="Its objective over the baseline (sweeps).")
    per_config: dict[str, float] = Field(
        description="Speed over the baseline per config (uncapped; empty when never swept)."
    )
    tainted: bool = Field(description="Decided on a sweep measured under contention.")
    demoted: bool = Field(description="Promoted, then its claim did not replicate.")
    idea_id: str | None = Field(description="Idea it implemented.")
    title: str = Field(description="First line of its commit message.")
    reason: str = Field(description="Why the verdict.")


class FrontierPoint(BaseModel):
    """The frontier after one change of it (a promotion or a demotion)."""

    seq: int = Field(description="Ledger seq of the change.")
    at: str = Field(description="When (ISO-8601, UTC).")
    elapsed_s: float = Field(description="Seconds from the run's first start.")
    step: int = Field(description="Step of the frontier candidate.")
    sha: str = Field(description="Frontier commit after the change.")
    objective: float | None = Field(description="Its objective over the baseline.")
    cause: str = Field(description="'promoted' or 'demoted' (the previous frontier stands).")


class Trajectory(BaseModel):
    """Everything the trajectory plot draws."""

    config_ids: list[str] = Field(description="Configs of the full sweep, for per-config plots.")
    objective_kind: str | None = Field(description="Which aggregate the objective is.")
    points: list[CandidatePoint] = Field(description="Every judged candidate, in verdict order.")
    frontier: list[FrontierPoint] = Field(description="The frontier after each change of it.")
    started_at: str | None = Field(description="The run's first start (ISO-8601, UTC).")


def _elapsed(start: datetime | None, stamp: str) -> float:
    return 0.0 if start is None else (datetime.fromisoformat(stamp) - start).total_seconds()


def _per_config(data: RunData, sha: str, recorded: object) -> dict[str, float]:
    if isinstance(recorded, dict) and recorded:
        return {str(k): float(v) for k, v in recorded.items()}
    summary = data.best_evaluation(sha)  # a screen reject: what its screen measured
    found = {}
    for config in summary.configs if summary else []:
        ratio = next((ratio_of(r) for r in config.ratios if r.get("other") == BASELINE_ARM), None)
        if ratio is not None:
            found[config.config_id] = ratio.median
    return found


def trajectory(ledger: Ledger, data: RunData) -> Trajectory:
    """Points in the order verdicts were reached (not step order: parallel workers finish
    steps out of order), and the frontier as derive_state defines it at each moment: the
    newest promotion not demoted since."""
    state = data.state
    starts = ledger.events(kind=EventKind.RUN_STARTED.value)
    start = datetime.fromisoformat(starts[0].created_at) if starts else None
    points: list[CandidatePoint] = []
    changes: list[tuple[int, str, str, str]] = []  # (seq, at, sha, cause)
    for stored in ledger.verdicts():
        verdict = stored.record
        cand = state.candidates.get(verdict.candidate_sha)
        if cand is None:
            continue  # written after the state was read
        details = verdict.details
        taint = bool(details.get("taint")) and not details.get("success", False)
        points.append(
            CandidatePoint(
                sha=cand.sha,
                step=cand.step,
                seq=stored.seq,
                at=stored.created_at,
                elapsed_s=_elapsed(start, stored.created_at),
                verdict=verdict.verdict,
                verdict_class=verdict_class(Verdict(verdict.verdict)) or VerdictClass.FAILED,
                stage=verdict.stage,
                objective=verdict.objective,
                per_config=_per_config(data, cand.sha, details.get("per_config_speedup")),
                tainted=taint,
                demoted=cand.sha in state.demoted,
                idea_id=cand.idea_id,
                title=title(cand.message),
                reason=verdict.reason,
            )
        )
        if verdict.verdict == Verdict.PROMOTED:
            changes.append((stored.seq, stored.created_at, cand.sha, "promoted"))
    for event in ledger.events(kind=EventKind.FRONTIER_DEMOTED.value):
        changes.append((event.seq, event.created_at, str(event.record.payload["sha"]), "demoted"))
    return Trajectory(
        config_ids=list(state.run.config_ids) if state.run else [],
        objective_kind=_objective_kind(data),
        points=points,
        frontier=_frontier_series(data, sorted(changes), start),
        started_at=starts[0].created_at if starts else None,
    )


def _objective_kind(data: RunData) -> str | None:
    kinds = [c.details.get("objective_kind") for c in data.state.candidates.values()]
    return next((str(k) for k in kinds if k), None)


def _frontier_series(
    data: RunData, changes: list[tuple[int, str, str, str]], start: datetime | None
) -> list[FrontierPoint]:
    standing: list[str] = []
    series = []
    for seq, at, sha, cause in changes:
        if cause == "promoted":
            standing.append(sha)
        elif sha in standing:
            standing.remove(sha)
        if not standing:
            continue
        current = data.state.candidates[standing[-1]]
        series.append(
            FrontierPoint(
                seq=seq,
                at=at,
                elapsed_s=_elapsed(start, at),
                step=current.step,
                sha=current.sha,
                objective=current.objective,
                cause=cause,
            )
        )
    return series
