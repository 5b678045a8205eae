"""What every view of a run shares: its ledger read once, verdict classes, evaluation lookups."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ledger import Ledger
from orchestrator.events import EvaluationSummary, EventKind, Stage
from orchestrator.state import CandidateView, SearchState, derive_state
from orchestrator.workspace import RunPaths
from search import Verdict

RESULT_FILE = "result.json"
JUDGE_LOG = "judge.log"


class RunViewError(LookupError):
    """A view asked for something the run does not hold (an unknown candidate, say)."""


class VerdictClass(enum.StrEnum):
    """The four outcomes a person reads a search by."""

    PROMOTED = "promoted"
    REJECTED = "rejected"
    INCONCLUSIVE = "inconclusive"
    FAILED = "failed"  # failed_correctness, failed_static, failed_run, no_run, duplicate


def verdict_class(verdict: Verdict | None) -> VerdictClass | None:
    """The class of a verdict (None: not judged yet)."""
    if verdict is None:
        return None
    if verdict in (Verdict.PROMOTED, Verdict.REJECTED, Verdict.INCONCLUSIVE):
        return VerdictClass(verdict.value)
    return VerdictClass.FAILED


class Ratio(BaseModel):
    """A paired speed ratio (other arm's time over this one's: > 1 is faster) with its CI."""

    model_config = ConfigDict(frozen=True)

    median: float = Field(description="Median of the paired ratios.")
    ci_low: float = Field(description="Lower end of its 95% CI.")
    ci_high: float = Field(description="Upper end of its 95% CI.")


def ratio_of(value: Any) -> Ratio | None:
    """A ratio dict of the ledger (median, ci_low, ci_high), or None when absent."""
    if not isinstance(value, dict) or value.get("median") is None:
        return None
    median = float(value["median"])
    low, high = value.get("ci_low"), value.get("ci_high")
    return Ratio(
        median=median,
        ci_low=median if low is None else float(low),
        ci_high=median if high is None else float(high),
    )


@dataclass
class RunData:
    """One consistent read of a run: the derived state and every evaluation summary.

    Views built from one RunData agree with each other, even while `ratchet run` appends."""

    run_dir: Path
    state: SearchState
    evaluations: list[tuple[int, str, EvaluationSummary]] = field(default_factory=list)

    @property
    def paths(self) -> RunPaths:
        """Where the run's files are."""
        return RunPaths(self.run_dir)

    def evaluations_of(self, sha: str) -> list[EvaluationSummary]:
        """Every evaluation of a candidate (screen, sweeps, re-measurements), in ledger order."""
        return [summary for _, _, summary in self.evaluations if summary.sha == sha]

    def last_sweep(self, sha: str) -> EvaluationSummary | None:
        """The candidate's last full sweep (earlier ones were tainted and measured again)."""
        sweeps = [e for e in self.evaluations_of(sha) if e.stage is Stage.SWEEP]
        return sweeps[-1] if sweeps else None

    def best_evaluation(self, sha: str) -> EvaluationSummary | None:
        """Its last sweep, else its screen: the measurements a verdict was decided on."""
        found = self.evaluations_of(sha)
        return self.last_sweep(sha) or (found[-1] if found else None)

    def candidate(self, prefix: str) -> CandidateView:
        """The candidate with this sha or unique sha prefix."""
        wanted = prefix.strip().lower()
        matches = [c for sha, c in self.state.candidates.items() if sha.startswith(wanted)]
        if len(wanted) < 4 or len(matches) != 1:
            what = "no candidate" if not matches else f"{len(matches)} candidates"
            raise RunViewError(
                f"{prefix!r} matches {what} of the run in {self.run_dir}; give 4 or more hex "
                "digits of a candidate's sha, as the lineage and trajectory pages list them"
            )
        return matches[0]

    def eval_dir(self, summary: EvaluationSummary) -> Path:
        """The evaluation's work directory (request, result, judge log), as the run named it."""
        name = summary.evaluation_id.rpartition(":")[2]
        return self.paths.evals / f"step-{summary.step:05d}-{name}"

    def result_json(self, summary: EvaluationSummary) -> dict[str, Any]:
        """The judge's full result of an evaluation, when its work directory is still there."""
        try:
            data = json.loads((self.eval_dir(summary) / RESULT_FILE).read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}


def read_run(ledger: Ledger, run_dir: Path) -> RunData:
    """Read the run once: derive its state and collect its evaluation summaries."""
    state = derive_state(ledger)
    evaluations = [
        (stored.seq, stored.created_at, EvaluationSummary.model_validate(stored.record.payload))
        for stored in ledger.events(kind=EventKind.EVALUATION.value)
    ]
    return RunData(run_dir=run_dir, state=state, evaluations=evaluations)


def title(message: str) -> str:
    """The first line of a commit message."""
    return message.strip().splitlines()[0] if message.strip() else ""
