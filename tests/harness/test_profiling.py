"""Profile mode: a judge subprocess ranks the judged arm's operators by self time."""

from __future__ import annotations

from pathlib import Path

from harness.models import ArmKind, ArmSpec, EvaluationMode, EvaluationRequest, Outcome
from harness.runner import RunnerSettings, run_evaluation
from kernels.track3.workload import track3_workload
from kernels.workload import TrialSpec

CODE_ROOT = Path(__file__).resolve().parents[2]


def profile(module: Path, work: Path) -> tuple[Outcome, list[str], str]:
    request = EvaluationRequest(
        evaluation_id="test:profile",
        workload="track3",
        device="cpu",
        config_ids=["cpu-2"],
        arms=[
            ArmSpec(
                name="candidate",
                kind=ArmKind.MODULE,
                module_path=str(module),
                entry_point="OptimizedTransformer",
            )
        ],
        trials=[TrialSpec(seed=1234)],
        mode=EvaluationMode.PROFILE,
        torch_threads=1,
    )
    settings = RunnerSettings(lock_dir=work / "locks", code_root=CODE_ROOT)
    result = run_evaluation(request, work / "judge", settings)
    shares = sum(row.share for row in result.profile)
    assert shares <= 1.0 + 1e-6
    return result.outcome, [row.name for row in result.profile], result.message


def test_the_seed_package_is_profiled_by_operator(tmp_path: Path) -> None:
    outcome, names, message = profile(track3_workload().seed_entry(), tmp_path)
    assert outcome is Outcome.PASSED, message
    assert any("linear" in name or "addmm" in name for name in names), names


def test_an_arm_that_fails_while_profiled_is_an_outcome(tmp_path: Path) -> None:
    module = tmp_path / "broken.py"
    module.write_text(
        track3_workload()
        .seed_bundle()
        .replace(
            "        return self._eager(x, valid_token_mask)\n",
            "        raise RuntimeError('kernel fault')\n",
        )
    )
    outcome, names, message = profile(module, tmp_path)
    assert outcome is Outcome.RUNTIME_ERROR and names == []
    assert "kernel fault" in message
