"""Everything a report shows, read from the ledger (and the run's repository for diffs) at one
chain head, as one typed model built on the run_view read model."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ledger import Ledger, VerifyReport
from orchestrator.calibration import NoiseFloorCalibrated
from orchestrator.events import EventKind, RunStarted, Verification
from orchestrator.run_view import (
    IdeaRow,
    LedgerView,
    Lineage,
    Overview,
    QueueView,
    RunData,
    Trajectory,
    candidate_detail,
    ideas,
    ledger_view,
    lineage,
    overview,
    queue,
    read_run,
    trajectory,
)
from orchestrator.settings import default_timing
from orchestrator.status import CandidateStatus, best_candidates

MAX_DIFF = 20_000  # per step of the frontier's path: a report is read, not a patch archive
READ_ATTEMPTS = 5  # a live run appends while we read: read again until the head holds still


class NoiseCalibration(BaseModel):
    """One A/A calibration and the timing plan it was measured with."""

    calibration: NoiseFloorCalibrated = Field(description="The noise_floor event as recorded.")
    seq: int = Field(description="Its ledger seq.")
    created_at: str = Field(description="When it was recorded (ISO-8601, UTC).")
    minimum_floor: float | None = Field(description="The configured smallest floor allowed.")
    timing: dict[str, Any] = Field(description="The sweep timing plan the run used.")


class PathStep(BaseModel):
    """One candidate on the declared path from the seed to the frontier, with its change."""

    sha: str = Field(description="Candidate commit.")
    step: int = Field(description="Step that made it.")
    idea_id: str | None = Field(description="Idea it implemented.")
    idea_text: str | None = Field(description="That idea in words.")
    message: str = Field(description="Its full commit message.")
    objective: float | None = Field(description="Its objective over the baseline.")
    diff: str = Field(description="git diff from its declared parent (cut at 20,000 chars).")
    diff_problem: str | None = Field(description="Why there is no diff (None: there is).")


class ReportData(BaseModel):
    """What `ratchet report` is built from, read at one ledger head."""

    run_dir: str = Field(description="The run directory.")
    head: str = Field(description="Ledger head the report was read at, as SEQ:HASH.")
    head_seq: int = Field(description="Entries in the chain at that head.")
    generated_at: str = Field(description="When the report was built (ISO-8601, UTC).")
    settled: bool = Field(
        default=True,
        description="The head held still while everything was read (False: a running search "
        "kept appending; the figures are from reads near the head printed).",
    )
    run: RunStarted | None = Field(description="The run's first start: what was searched.")
    invocations: list[RunStarted] = Field(description="Every start of `ratchet run`, in order.")
    overview: Overview = Field(description="Frontier, per-config table, budgets, devices.")
    trajectory: Trajectory = Field(description="Every judged candidate and the frontier path.")
    lineage: Lineage = Field(description="The declared tree and git's view of it.")
    ideas: list[IdeaRow] = Field(description="Every idea arm with its prior and posterior.")
    queue: QueueView = Field(description="Every injected message and its effect.")
    chain: LedgerView = Field(description="Chain head, counts and the last verification.")
    noise: list[NoiseCalibration] = Field(description="Every A/A calibration, in order.")
    verifications: list[Verification] = Field(description="The verifier's attacks, in order.")
    frontier_path: list[PathStep] = Field(description="Seed to frontier, with each change.")
    experiments: list[CandidateStatus] = Field(
        description="Every candidate with its verdict and reason, in step order."
    )
    chain_check: VerifyReport = Field(description="The chain check made before reading.")


def _noise(ledger: Ledger, run: RunStarted | None) -> list[NoiseCalibration]:
    settings = run.settings if run else {}
    timing = settings.get("sweep_timing")
    if timing is None and run is not None:
        timing = default_timing(run.device, "sweep").model_dump(mode="json")
    return [
        NoiseCalibration(
            calibration=NoiseFloorCalibrated.model_validate(stored.record.payload),
            seq=stored.seq,
            created_at=stored.created_at,
            minimum_floor=settings.get("noise_floor"),
            timing=dict(timing or {}),
        )
        for stored in ledger.events(kind=EventKind.NOISE_FLOOR.value)
    ]


def _path(ledger: Ledger, view: Lineage, data: RunData) -> list[PathStep]:
    steps = []
    for node in [n for n in view.nodes if n.on_frontier_path]:
        detail = candidate_detail(ledger, data, node.sha)
        diff = detail.diff
        if len(diff) > MAX_DIFF:
            diff = diff[:MAX_DIFF] + f"\n[... {len(diff) - MAX_DIFF} characters cut]"
        steps.append(
            PathStep(
                sha=detail.sha,
                step=detail.step,
                idea_id=detail.idea_id,
                idea_text=detail.idea_text,
                message=detail.message,
                objective=detail.objective,
                diff=diff,
                diff_problem=detail.diff_problem,
            )
        )
    return sorted(steps, key=lambda s: s.step)


def _read(ledger: Ledger, run_dir: Path, check: VerifyReport) -> ReportData:
    data = read_run(ledger, run_dir)
    view = lineage(data)
    head_seq, head_hash = ledger.head()
    starts = ledger.events(kind=EventKind.RUN_STARTED.value)
    return ReportData(
        run_dir=str(run_dir),
        head=f"{head_seq}:{head_hash}",
        head_seq=head_seq,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        run=data.state.run,
        invocations=[RunStarted.model_validate(e.record.payload) for e in starts],
        overview=overview(ledger, data),
        trajectory=trajectory(ledger, data),
        lineage=view,
        ideas=ideas(data),
        queue=queue(ledger, data),
        chain=ledger_view(ledger, recent=0),
        noise=_noise(ledger, data.state.run),
        verifications=[
            Verification.model_validate(e.record.payload)
            for e in ledger.events(kind=EventKind.VERIFICATION.value)
        ],
        frontier_path=_path(ledger, view, data),
        experiments=sorted(
            best_candidates(data.state, len(data.state.candidates)), key=lambda c: c.step
        ),
        chain_check=check,
    )


def gather(ledger: Ledger, run_dir: Path, check: VerifyReport) -> ReportData:
    """The report's data at one head: read again while a running search appends meanwhile,
    so every number in the report comes from the head printed in it."""
    for _ in range(READ_ATTEMPTS):
        before = ledger.head()
        report = _read(ledger, run_dir, check)
        if ledger.head() == before and report.head == f"{before[0]}:{before[1]}":
            return report
    return report.model_copy(update={"settled": False})
