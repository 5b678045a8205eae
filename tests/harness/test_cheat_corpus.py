"""Every cheat in the corpus is rejected for its own reason; honest candidates are accepted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.models import (
    ArmKind,
    ArmSpec,
    DevicePeaks,
    EvaluationMode,
    EvaluationRequest,
    EvaluationResult,
    Outcome,
    TimingPlan,
)
from harness.runner import RunnerSettings, run_evaluation
from harness.static_checks import check_sources
from harness.trials import correctness_trials, new_salt, recheck_trials
from kernels.registry import resolve_workload
from tests.harness.cheat_corpus import CHEATS, CONFIGS, CORRECTNESS_CALLS, HONEST, Case

pytestmark = pytest.mark.slow
CODE_ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = resolve_workload("track3")
PLAN = TimingPlan(min_rounds=6, max_rounds=6, budget_s=2.0, spot_checks=3)


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> RunnerSettings:
    return RunnerSettings(
        python=sys.executable,
        timeout_s=120,
        lock_dir=tmp_path_factory.mktemp("locks"),
        code_root=CODE_ROOT,
    )


@pytest.fixture(scope="module")
def peaks(runner: RunnerSettings, tmp_path_factory: pytest.TempPathFactory) -> DevicePeaks:
    request = EvaluationRequest(
        evaluation_id="corpus:qualify",
        workload="track3",
        device="cpu",
        config_ids=["cpu-3"],
        arms=[ArmSpec(name="candidate", kind=ArmKind.REFERENCE)],
        trials=list(WORKLOAD.official_trials[:1]),
        mode=EvaluationMode.QUALIFY,
        torch_threads=1,
    )
    result = run_evaluation(request, tmp_path_factory.mktemp("qualify"), runner)
    assert result.qualification, result.message
    q = result.qualification
    return DevicePeaks(
        matmul_flops_per_s=float(str(q["matmul_flops_per_s"])),
        copy_bytes_per_s=float(str(q["copy_bytes_per_s"])),
    )


def judge(
    case: Case, tmp_path: Path, runner: RunnerSettings, peaks: DevicePeaks
) -> EvaluationResult:
    module = tmp_path / "candidate.py"
    module.write_text(case.source())
    salt = new_salt()
    request = EvaluationRequest(
        evaluation_id=f"corpus:{case.name}",
        workload="track3",
        device="cpu",
        config_ids=list(CONFIGS),
        arms=[
            ArmSpec(
                name="candidate",
                kind=ArmKind.MODULE,
                module_path=str(module),
                entry_point="OptimizedTransformer",
            ),
            ArmSpec(name="baseline", kind=ArmKind.REFERENCE),
        ],
        trials=correctness_trials(WORKLOAD.official_trials, salt),
        recheck_trials=recheck_trials(salt),
        device_peaks=peaks,
        timing=PLAN,
        torch_threads=1,
    )
    assert len(CONFIGS) * (len(request.trials) + 3) == CORRECTNESS_CALLS, "corpus out of date"
    return run_evaluation(request, tmp_path / "work", runner)


def static_passes(case: Case) -> bool:
    report = check_sources({"candidate.py": case.source()}, WORKLOAD.static_policy, "candidate.py")
    return report.passed


def test_the_corpus_is_large_enough() -> None:
    assert len(CHEATS) >= 15
    assert len({c.name for c in CHEATS}) == len(CHEATS)
    assert any(c.expect != "static_check" for c in CHEATS)


@pytest.mark.parametrize("case", HONEST, ids=lambda c: c.name)
def test_honest_candidates_are_accepted(
    case: Case, tmp_path: Path, runner: RunnerSettings, peaks: DevicePeaks
) -> None:
    assert static_passes(case)
    result = judge(case, tmp_path, runner, peaks)
    assert result.outcome is Outcome.PASSED, result.message


@pytest.mark.parametrize("case", [c for c in CHEATS if not c.gpu_only], ids=lambda c: c.name)
def test_cheats_are_rejected_for_their_own_reason(
    case: Case, tmp_path: Path, runner: RunnerSettings, peaks: DevicePeaks
) -> None:
    assert static_passes(case) == (case.expect != "static_check")
    result = judge(case, tmp_path, runner, peaks)
    expected = case.runtime_reason(result.isolation)
    if expected is None:
        assert result.outcome is Outcome.PASSED, result.message
    else:
        assert result.outcome is not Outcome.PASSED
        got = result.reason.value if result.reason else result.outcome.value
        assert got == expected, result.message[-1500:]


@pytest.mark.gpu
@pytest.mark.parametrize("case", [c for c in CHEATS if c.gpu_only], ids=lambda c: c.name)
def test_gpu_cheats_are_rejected(case: Case, tmp_path: Path, runner: RunnerSettings) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    module = tmp_path / "candidate.py"
    module.write_text(case.source())
    salt = new_salt()
    request = EvaluationRequest(
        evaluation_id=f"corpus:{case.name}",
        workload="track3",
        device="cuda",
        # A GPU-bound config: hidden work only pays off (and only shows) when the device
        # time exceeds the launch time.
        config_ids=["13"],
        arms=[
            ArmSpec(
                name="candidate",
                kind=ArmKind.MODULE,
                module_path=str(module),
                entry_point="OptimizedTransformer",
            ),
            ArmSpec(name="baseline", kind=ArmKind.REFERENCE),
        ],
        trials=correctness_trials(WORKLOAD.official_trials, salt),
        recheck_trials=recheck_trials(salt),
        timing=TimingPlan(warmup_calls=10, target_block_s=0.002, min_rounds=6, max_rounds=10),
    )
    result = run_evaluation(request, tmp_path / "work", runner)
    got = result.reason.value if result.reason else result.outcome.value
    assert got == case.runtime, result.message[-1500:]


CONTENT_CACHE = Case(
    "content_keyed_cache",
    "key = (tuple(x.reshape(-1)[:4].tolist()), None if m is None else int(m.sum()))\n"
    "if key not in STATE:\n    STATE[key] = self._compute(x, m)\nreturn STATE[key].clone()",
    None,
    None,
)


def test_a_content_keyed_cache_gains_no_speed(
    tmp_path: Path, runner: RunnerSettings, peaks: DevicePeaks
) -> None:
    """Every call of a timed block sees bytes no earlier call saw, so a cache on content never
    hits: the cheat is the reference's arithmetic plus a lookup, never faster."""
    assert static_passes(CONTENT_CACHE)
    result = judge(CONTENT_CACHE, tmp_path, runner, peaks)
    assert result.outcome is Outcome.PASSED, result.message
    ratio = result.aggregate("baseline")
    assert ratio is not None and ratio.median < 1.25, ratio
