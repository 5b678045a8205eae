"""Judge time per stage of finished runs, read from their ledgers (no judging).

Usage: python benchmarks/stage_times.py RUN_DIR [RUN_DIR ...]
Prints one markdown row per run: screens and sweeps (count, median wall s), all judge wall
time, and the sweeps measured again because the frontier changed while they ran.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ledger import Ledger, LedgerNotFoundError  # noqa: E402
from orchestrator.events import EvaluationSummary, EventKind, Stage  # noqa: E402
from orchestrator.state import derive_state  # noqa: E402


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
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
