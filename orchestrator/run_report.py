"""What `ratchet run` prints when it ends: why it stopped, the frontier, the tainted sweeps,
and what to do next, as exact command lines with the run dir filled in."""

from __future__ import annotations

import shlex
from pathlib import Path

from orchestrator.loop import RunSummary
from orchestrator.provenance import format_gains, frontier_gains
from orchestrator.status import format_config_speedups
from orchestrator.taint import describe_taint


def next_steps(run_dir: Path, program: str = "ratchet") -> list[str]:
    """The commands that follow a run, ready to paste."""
    where = shlex.quote(str(run_dir))
    out = shlex.quote(str(run_dir / "export"))
    return [
        "next:",
        f"  {program} status --run-dir {where}",
        "      where the run stands: the frontier, counts, ideas, messages",
        f"  {program} export --run-dir {where} --out {out}",
        "      the frontier as a standalone submission.py with its manifest.json",
        f"  {program} inject IDEA 'your idea' --run-dir {where}",
        f"      steer the search ('{program} inject --help' lists every kind)",
        "  the same run command again, with a larger --minutes or --max-candidates",
        "      searches on from where it stopped (budgets count the whole run)",
    ]


def format_run_end(summary: RunSummary, run_dir: Path, program: str = "ratchet") -> str:
    """The lines `ratchet run` ends with."""
    state = summary.state
    lines = [f"stopped: {summary.reason}; {summary.steps} steps in {summary.elapsed_s:.0f} s"]
    frontier = state.candidates.get(state.frontier_sha or "")
    if frontier is not None:
        speed = f"{frontier.objective:.3f}x" if frontier.objective is not None else "n/a"
        lines.append(
            f"frontier {frontier.sha[:10]} (step {frontier.step}): {speed} over the baseline"
        )
        speedups = frontier.details.get("per_config_speedup", {})
        used = frontier.details.get("per_config_tolerance_used", {})
        lines.extend(format_config_speedups(speedups, used))
        lines.extend(format_gains(frontier_gains(state)))
    if summary.taint is not None:
        lines.extend(describe_taint(summary.taint, "in this invocation"))
    lines.extend(next_steps(run_dir, program))
    return "\n".join(lines)
