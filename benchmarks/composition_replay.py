"""The composition a finished run's results call for at its end, as the loop would plan it.

Reads a run directory (its ledger and repository; no device) and runs the loop's own
composition_plan over the run's final state: the dispatch plan (config -> variant), what the
measurements predict for it, and the frontier's geomean on the same data; or why there is
none. It answers "was a composition due that the run never built?". Usage:
python benchmarks/composition_replay.py RUN_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import git  # noqa: E402

from ledger import Ledger  # noqa: E402
from orchestrator.composition import composition_plan, short_id  # noqa: E402
from orchestrator.events import RunStarted  # noqa: E402
from orchestrator.settings import Settings  # noqa: E402
from orchestrator.stages import DerivedCaches  # noqa: E402
from orchestrator.state import derive_state  # noqa: E402
from orchestrator.workloads import load_workload  # noqa: E402


class ReplayContext:
    """What composition_plan reads of a LoopContext, rebuilt from a finished run."""

    def __init__(self, run: Path, ledger: Ledger, started: RunStarted) -> None:
        known = {k: v for k, v in started.settings.items() if k in Settings.model_fields}
        self.settings = Settings.model_validate({**known, "compose_regimes": True})
        self.workload = load_workload(started.workload)
        self.config_set = self.workload.config_set(started.config_set)
        self.ledger, self.repo, self.caches = ledger, git.Repo(run / "repo"), DerivedCaches()
        self.noise_floor = 0.0


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: composition_replay.py RUN_DIR (a run directory)")
    run = Path(sys.argv[1])
    if not (run / "ledger.sqlite").is_file() or not (run / "repo").is_dir():
        raise SystemExit(f"{run}: not a run directory (no ledger.sqlite and repo/ there)")
    with Ledger.open_path(run / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
        if state.run is None or state.frontier_sha is None:
            raise SystemExit(f"{run}: the run has no frontier yet")
        ctx = ReplayContext(run, ledger, state.run)
        floor = state.noise_floor(state.run.config_set)
        # Without a calibrated floor the loop judges with the settings' own.
        ctx.noise_floor = floor if floor is not None else ctx.settings.noise_floor
        plan = composition_plan(ctx, state)  # type: ignore[arg-type]
    print(f"frontier {state.frontier_sha[:10]}, noise floor {ctx.noise_floor:.3f}")
    if plan is None:
        print("no composition due: no split beats the frontier beyond the noise floor")
        return
    print("| config | variant | predicted x baseline |")
    print("|---|---|---:|")
    for config in sorted(plan.assignment, key=lambda c: (len(c), c)):
        variant = short_id(plan.assignment[config])
        print(f"| {config} | {variant} | {plan.predicted[config]:.2f} |")
    print(
        f"predicted geomean {plan.predicted_objective:.3f}x (pessimistic "
        f"{plan.pessimistic_objective:.3f}x) against the incumbent's "
        f"{plan.incumbent_objective:.3f}x: {plan.predicted_gain:.2f}x"
    )


if __name__ == "__main__":
    main()
