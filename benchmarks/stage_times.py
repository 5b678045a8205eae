"""Judge time per stage of finished runs, read from their ledgers (no judging).

Usage: python benchmarks/stage_times.py RUN_DIR [RUN_DIR ...]
Prints one markdown row per run: screens and sweeps (count, median wall s), all judge wall
time, and the sweeps measured again because the frontier changed while they ran. Then, for
runs whose judge recorded them (harness.stage_clock), the judge's seconds by phase summed over
every evaluation of each stage, read from the run dir's evals/*/result.json, with the judge
process's own phases: opening (torch, device, workload, fingerprint) and loading the arms
inside its wall time, and the interpreter's start before it.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.models import EvaluationResult  # noqa: E402
from harness.stage_clock import JudgePhase, ProcessPhase  # noqa: E402
from ledger import Ledger, LedgerNotFoundError  # noqa: E402
from orchestrator.events import EvaluationSummary, EventKind, Stage  # noqa: E402
from orchestrator.state import derive_state  # noqa: E402

# The judge process's phases inside its wall time; the interpreter's start comes before it.
INSIDE_WALL = (ProcessPhase.IMPORT, ProcessPhase.OPEN, ProcessPhase.LOAD)


def stage_row(run_dir: Path) -> str:
    """The run's row of the table."""
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        summaries = [
            EvaluationSummary.model_validate(e.record.payload)
            for e in ledger.events(EventKind.EVALUATION)
        ]
        superseded = sum(v.superseded_sweeps for v in derive_state(ledger).steps.values())
    walls = {stage: [s.wall_s for s in summaries if s.stage is stage] for stage in Stage}

    def cell(stage: Stage) -> str:
        values = walls[stage]
        return f"{len(values)} ({statistics.median(values):.2f})" if values else "0"

    total = sum(s.wall_s for s in summaries)
    cells = [str(run_dir), cell(Stage.SCREEN), cell(Stage.SWEEP), f"{total:.0f}", str(superseded)]
    return "| " + " | ".join(cells) + " |"


def phase_rows(run_dir: Path) -> list[str]:
    """Per stage (screen, sweep, ...): evaluations, judge wall s, s per judging phase and per
    process phase, what is left (contention readings between configs, writing the result),
    and the interpreter's start, which comes before the judge's wall time."""
    totals: dict[str, dict[str, float]] = {}
    for path in sorted((run_dir / "evals").glob("*/result.json")):
        try:
            result = EvaluationResult.model_validate_json(path.read_text())
        except (OSError, ValueError) as exc:  # a judge killed mid-write leaves a torn file
            print(f"stage_times: skipped {path}: not a judge result ({exc})", file=sys.stderr)
            continue
        stage = path.parent.name.rsplit("-", 1)[-1]
        row = totals.setdefault(stage, {"evaluations": 0.0, "wall": 0.0})
        row["evaluations"] += 1
        row["wall"] += result.wall_s
        recorded = [*(c.phase_s for c in result.configs), result.phase_s]
        for phase_s in recorded:
            for phase, seconds in phase_s.items():
                row[phase] = row.get(phase, 0.0) + seconds
    rows = []
    for stage, row in sorted(totals.items()):
        phases = [row.get(p.value, 0.0) for p in (*JudgePhase, *INSIDE_WALL)]
        if not any(phases):
            continue  # judged before the phases were recorded
        rest = row["wall"] - sum(phases)
        interpreter = row.get(ProcessPhase.INTERPRETER.value, 0.0)
        cells = [str(run_dir), stage, f"{row['evaluations']:.0f}", f"{row['wall']:.1f}"]
        # A phase no evaluation recorded (judged before it had a clock) is "-", not 0.0.
        cells += [
            f"{row[p.value]:.1f}" if p.value in row else "-" for p in (*JudgePhase, *INSIDE_WALL)
        ]
        rows.append("| " + " | ".join([*cells, f"{rest:.1f}", f"{interpreter:.1f}"]) + " |")
    return rows


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    rows = []
    for name in argv:
        try:
            rows.append(stage_row(Path(name)))
        except LedgerNotFoundError:
            print(f"stage_times: no ledger in {name}: pass a run dir", file=sys.stderr)
            return 2
    header = ["run dir", "screens (median s)", "sweeps (median s)", "judge s in all", "superseded"]
    print("| " + " | ".join(header) + " |")
    print("|---|---:|---:|---:|---:|")
    print("\n".join(rows))
    phases = [row for name in argv for row in phase_rows(Path(name))]
    if phases:
        names = [p.value for p in (*JudgePhase, *INSIDE_WALL)]
        head = " | ".join([*names, "rest", "interpreter (before wall s)"])
        print(f"\n| run dir | stage | evaluations | wall s | {head} |")
        print("|---|---|---:|---:|" + "---:|" * (len(names) + 2))
        print("\n".join(phases))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
