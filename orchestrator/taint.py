"""Tainted sweeps, counted and explained: on a busy machine nothing is promoted, never silently.

A full sweep measured under contention or throttling (other processes' CPU time, foreign GPU
processes, GPU slowdown bits) is recorded, measured again, and never promotes. The run's output
and `ratchet status` say how many sweeps were tainted and why.
"""

from __future__ import annotations

import re
from collections import Counter

from pydantic import BaseModel, ConfigDict, Field

from ledger import Ledger
from orchestrator.events import EvaluationSummary, EventKind, Stage

QUIET_HINT = (
    "a tainted sweep never promotes: stop the other work on this machine (or run elsewhere) "
    "and run again"
)


class TaintSummary(BaseModel):
    """How many full sweeps were measured under contention, and why."""

    model_config = ConfigDict(frozen=True)

    sweeps: int = Field(description="Full sweeps measured (the seed's and re-measurements too).")
    tainted: int = Field(description="Of which measured under contention or throttling.")
    causes: dict[str, int] = Field(
        description="Tainted sweeps by cause (the measured numbers replaced by N)."
    )
    latest: str | None = Field(description="The newest taint, with its numbers.")


def taint_cause(text: str) -> str:
    """A taint reason without its numbers, so that equal causes count together."""
    text = re.sub(r"\[[^\]]*\]", "[...]", text)
    return re.sub(r"\d+(\.\d+)?", "N", text)


def taint_summary(ledger: Ledger, after_seq: int = 0) -> TaintSummary:
    """Tainted full sweeps recorded after ledger seq `after_seq` (0: the whole run)."""
    sweeps = [
        EvaluationSummary.model_validate(e.record.payload)
        for e in ledger.events(EventKind.EVALUATION, after_seq=after_seq)
    ]
    sweeps = [s for s in sweeps if s.stage is Stage.SWEEP]
    tainted = [s for s in sweeps if s.taint]
    causes = Counter(taint_cause(reason) for s in tainted for reason in s.taint)
    return TaintSummary(
        sweeps=len(sweeps),
        tainted=len(tainted),
        causes=dict(causes.most_common()),
        latest="; ".join(tainted[-1].taint) if tainted else None,
    )


def describe_taint(summary: TaintSummary, scope: str) -> list[str]:
    """Lines for the run's end and `ratchet status` (none when nothing was swept)."""
    if not summary.sweeps:
        return []
    if not summary.tainted:
        return [f"tainted sweeps: none of {summary.sweeps} {scope}"]
    causes = ", ".join(f"{cause}: {n}" for cause, n in summary.causes.items())
    lines = [f"tainted sweeps: {summary.tainted} of {summary.sweeps} {scope} ({causes})"]
    if summary.tainted == summary.sweeps:
        lines.append(f"    every sweep was tainted, so nothing could be promoted; {QUIET_HINT}")
    else:
        lines.append(f"    {QUIET_HINT}")
    return lines


def tainted_line(taint: list[str], attempt: int, again: bool) -> str:
    """The progress line of one tainted sweep."""
    why = "; ".join(taint)[:300]
    if again:
        return f"  sweep tainted ({why}): measuring again ({attempt})"
    return (
        f"  sweep tainted ({why}): measured {attempt} time(s), tainted each time; this verdict "
        "never promotes and is not scored"
    )
