"""The organizer comparator and the output/input checks of the correctness gate."""

from __future__ import annotations

import pytest
import torch

from harness.gate import (
    check_output_type,
    compare_outputs,
    count_failures,
    inputs_unchanged,
    judge_trial,
)
from harness.models import share_text
from kernels.workload import Comparator, Tolerance, TrialSpec

STRICT = Tolerance(atol=0.002, rtol=0.02, comparator=Comparator.STRICT)
INCLUSIVE = Tolerance(atol=0.002, rtol=0.02, comparator=Comparator.INCLUSIVE)


def test_or_of_absolute_and_relative_bounds() -> None:
    ref = torch.tensor([0.0, 1.0, 10.0, -10.0])
    # 0.001 abs ok; 0.01 at |ref|=1 is within 2% rel; 0.15 at 10 within rel; 0.3 at -10 fails both.
    out = ref + torch.tensor([0.001, 0.01, 0.15, 0.3])
    failed, max_abs = count_failures(out, ref, STRICT)
    assert failed == 1
    assert max_abs is not None and abs(max_abs - 0.3) < 1e-5


def test_strict_comparator_rejects_the_boundary_inclusive_accepts_it() -> None:
    ref = torch.tensor([0.0], dtype=torch.float64)
    out = torch.tensor([0.002], dtype=torch.float64)
    # float32 casting: compare exactly at the float32 value of atol.
    tol32 = float(torch.tensor(0.002, dtype=torch.float32))
    strict = Tolerance(atol=tol32, rtol=1e-9, comparator=Comparator.STRICT)
    inclusive = Tolerance(atol=tol32, rtol=1e-9, comparator=Comparator.INCLUSIVE)
    assert count_failures(out, ref, strict)[0] == 1
    assert count_failures(out, ref, inclusive)[0] == 0


def test_non_finite_values_fail_even_when_equal() -> None:
    ref = torch.tensor([1.0, float("inf"), 2.0])
    out = torch.tensor([1.0, float("inf"), float("nan")])
    assert count_failures(out, ref, INCLUSIVE)[0] == 2


def test_output_type_checks() -> None:
    ref = torch.zeros(2, 3)
    assert check_output_type(torch.zeros(2, 3), ref) is None
    assert "shape" in (check_output_type(torch.zeros(3, 2), ref) or "")
    assert "dtype" in (check_output_type(torch.zeros(2, 3, dtype=torch.float64), ref) or "")
    assert "plain torch.Tensor" in (check_output_type(torch.zeros(2, 3).numpy(), ref) or "")

    class Sub(torch.Tensor):
        pass

    assert "plain torch.Tensor" in (
        check_output_type(torch.zeros(2, 3).as_subclass(Sub), ref) or ""
    )


def test_trial_with_a_problem_fails_every_element() -> None:
    ref = torch.ones(4)
    result = judge_trial(TrialSpec(seed=1), torch.ones(4), ref, STRICT, problem="mutated inputs")
    assert not result.passed and result.failed_elements == 4 and result.problem == "mutated inputs"
    assert judge_trial(TrialSpec(seed=1), torch.ones(4), ref, STRICT).passed


def test_input_comparison_is_bit_exact() -> None:
    x = torch.tensor([0.0, 1.5, -2.0])
    mask = torch.tensor([True, False, True])
    pristine = (x.clone(), mask.clone())
    assert inputs_unchanged((x, mask), pristine)
    negative_zero = x.clone()
    negative_zero[0] = -0.0  # equal as a number, different bits
    assert not inputs_unchanged((negative_zero, mask), pristine)
    flipped = mask.clone()
    flipped[1] = True
    assert not inputs_unchanged((x, flipped), pristine)


def _whole_tensor_failures(out: torch.Tensor, ref: torch.Tensor) -> tuple[int, float]:
    err = (out - ref).abs()
    good = out.isfinite() & ref.isfinite() & ((err < STRICT.atol) | (err < STRICT.rtol * ref.abs()))
    return int((~good).sum()), float(err[err.isfinite()].max())


def test_chunked_comparison_counts_like_the_whole_tensor(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs are compared in chunks (config 14's 3.28e9 elements); chunk edges lose nothing,
    the largest error may sit in the last, partial chunk."""
    import harness.gate as gate

    g = torch.Generator().manual_seed(0)
    ref = torch.randn(7, 13, 11, generator=g)
    out = ref + torch.randn(7, 13, 11, generator=g) * 0.003
    out.view(-1)[[0, 63, 64, 500]] = torch.tensor([float("nan"), 5.0, -5.0, float("inf")])
    out.view(-1)[-1] = ref.view(-1)[-1] + 9.0
    want = _whole_tensor_failures(out, ref)
    monkeypatch.setattr(gate, "_CHUNK_ELEMENTS", 64)
    failed, max_abs = count_failures(out, ref, STRICT)
    assert (failed, max_abs) == (want[0], want[1])
    assert max_abs is not None and abs(max_abs - 9.0) < 1e-4 and failed > 4


def test_tolerance_used_is_the_worst_elements_share_of_what_it_may_err() -> None:
    ref = torch.tensor([0.0, 1.0, 10.0, -10.0])
    # Allowed: 0.002 (atol), 0.02 (2% of 1), 0.2, 0.2. Shares: 0.5, 0.75, 0.95, 0.25.
    out = ref + torch.tensor([0.001, 0.015, 0.19, 0.05])
    comparison = compare_outputs(out, ref, STRICT)
    assert comparison.failed == 0
    assert comparison.tolerance_used == pytest.approx(0.95, rel=1e-4)
    # Over the line by a hair: the share crosses 1 exactly where the comparator fails.
    out[2] = ref[2] + 0.2001
    over = compare_outputs(out, ref, STRICT)
    assert over.failed == 1 and over.tolerance_used is not None and over.tolerance_used > 1
    trial = judge_trial(TrialSpec(seed=1), ref + 0.001, ref, STRICT)
    assert trial.passed and trial.tolerance_used == pytest.approx(0.5, rel=1e-4)


def test_tolerance_used_ignores_non_finite_elements() -> None:
    ref = torch.tensor([1.0, float("inf"), 0.0, 2.0])
    out = torch.tensor([1.01, float("inf"), 0.0, float("nan")])
    comparison = compare_outputs(out, ref, STRICT)
    assert comparison.failed == 2  # inf == inf and the NaN both fail, but have no share
    assert comparison.tolerance_used == pytest.approx(0.5, rel=1e-4)
    assert comparison.non_finite == 1  # the NaN where the reference is finite; inf == inf is not
    assert compare_outputs(torch.tensor([float("nan")]), torch.tensor([1.0]), STRICT) == (
        1,
        None,
        None,
        1,
    )


def test_chunked_tolerance_used_matches_the_whole_tensor(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.gate as gate

    g = torch.Generator().manual_seed(1)
    ref = torch.randn(9, 17, generator=g)
    out = ref + torch.randn(9, 17, generator=g) * 0.0005
    whole = compare_outputs(out, ref, STRICT)
    monkeypatch.setattr(gate, "_CHUNK_ELEMENTS", 16)
    assert compare_outputs(out, ref, STRICT) == whole
    assert whole.tolerance_used is not None and 0 < whole.tolerance_used < 1


@pytest.mark.parametrize(
    ("share", "text"),
    [(0.000446, "0.045%"), (0.0, "0%"), (0.5, "50.0%"), (0.9996, "99.9%"), (1.05, "105.0%")],
)
def test_a_share_of_the_tolerance_reads_without_rounding_a_pass_up(share: float, text: str) -> None:
    assert share_text(share) == text


def test_inputs_compared_by_chunks_see_one_changed_byte_anywhere() -> None:
    from harness.gate import inputs_unchanged

    x, mask = torch.randn(5, 7), torch.ones(5, 7, dtype=torch.bool)
    pristine = (x.clone(), mask.clone())
    assert inputs_unchanged((x, mask), pristine, chunk_bytes=16)
    for index in (0, 16, x.numel() - 1):  # first, a chunk edge, the last partial chunk
        changed = x.clone()
        changed.view(-1).view(torch.int32)[index] ^= 1  # the lowest mantissa bit only
        assert not inputs_unchanged((changed, mask), pristine, chunk_bytes=16)
    flipped = mask.clone()
    flipped[-1, -1] = False
    assert not inputs_unchanged((x, flipped), pristine, chunk_bytes=16)
    assert not inputs_unchanged((x.double(), mask), pristine, chunk_bytes=16)


def test_a_sparse_output_is_the_wrong_type() -> None:
    ref = torch.randn(4, 4)
    problem = check_output_type(ref.to_sparse(), ref)
    assert problem is not None and "layout" in problem


def test_non_finite_outputs_counted_by_chunks_match_the_whole_tensor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import harness.gate as gate

    ref = torch.randn(9, 17)
    ref.view(-1)[5] = float("inf")  # non-finite in the reference too: not the candidate's
    out = ref.clone()
    out.view(-1)[[5, 16, 17, 150]] = torch.tensor([float("inf"), float("nan"), -float("inf"), 1e9])
    whole = int((torch.isfinite(ref) & ~torch.isfinite(out)).sum())
    monkeypatch.setattr(gate, "_CHUNK_ELEMENTS", 16)
    assert compare_outputs(out, ref, STRICT).non_finite == whole == 2
