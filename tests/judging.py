"""Shared test helper: judge a standalone module file for correctness with the real harness."""

from __future__ import annotations

from pathlib import Path

from harness.models import ArmKind, ArmSpec, EvaluationRequest, EvaluationResult
from harness.runner import RunnerSettings, run_evaluation
from kernels.registry import resolve_workload
from kernels.workload import TrialSpec

CODE_ROOT = Path(__file__).resolve().parents[1]


def gate_module(
    module: Path, workload: str, config_ids: list[str], trials: list[TrialSpec], work: Path
) -> EvaluationResult:
    """Correctness of `module` (the workload's entry class) on configs, in a judge subprocess."""
    entry = resolve_workload(workload).static_policy.entry_point
    request = EvaluationRequest(
        evaluation_id="test:gate",
        workload=workload,
        device="cpu",
        config_ids=config_ids,
        arms=[
            ArmSpec(
                name="candidate", kind=ArmKind.MODULE, module_path=str(module), entry_point=entry
            )
        ],
        trials=trials,
    )
    settings = RunnerSettings(lock_dir=work / "locks", code_root=CODE_ROOT)
    return run_evaluation(request, work / "gate", settings)
