"""The correctness gate: the organizer comparator over the whole output, plus type checks."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from harness.models import TrialResult
from kernels.workload import Comparator, Tolerance, TrialSpec


def check_output_type(out: Any, ref: torch.Tensor) -> str | None:
    """A plain tensor of the reference's shape, dtype and device, or the reason it is not."""
    if type(out) is not torch.Tensor:
        kind = f"{type(out).__module__}.{type(out).__qualname__}"
        return f"output is {kind}, not a plain torch.Tensor"
    if out.layout is not torch.strided:
        return f"output layout {out.layout} is not torch.strided (a dense tensor)"
    if out.shape != ref.shape:
        return f"output shape {tuple(out.shape)} != reference shape {tuple(ref.shape)}"
    if out.dtype != ref.dtype:
        return f"output dtype {out.dtype} != reference dtype {ref.dtype}"
    if out.device != ref.device:
        return f"output device {out.device} != reference device {ref.device}"
    return None


# Elements compared at a time: the comparison's temporaries stay ~1 GB however large the
# output (track3 config 14's is 3.28e9 elements; whole-tensor temporaries took 73 GiB).
_CHUNK_ELEMENTS = 1 << 26


class Comparison(NamedTuple):
    """What the comparator found over a whole output."""

    failed: int
    max_abs: float | None  # largest |out - ref| over finite elements
    # The worst finite element's |out - ref| over what the tolerance allows it there,
    # max(atol, rtol * |ref|): below 1 passes (at most 1, inclusive). A pass at 0.98 may be
    # one fresh input away from failing; the gate's verdict alone cannot say so.
    tolerance_used: float | None
    # Elements non-finite in the output where the reference is finite (NaN or inf written).
    non_finite: int = 0


def compare_outputs(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> Comparison:
    """Elements failing finite(ref) & finite(out) & (abs < atol | abs < rtol*|ref|), the
    largest error, and the largest share of its tolerance any element used."""
    flat_out, flat_ref = out.detach().reshape(-1), ref.detach().reshape(-1)
    failed, non_finite = 0, 0
    max_abs: float | None = None
    used: float | None = None
    for start in range(0, flat_ref.numel(), _CHUNK_ELEMENTS):
        o = flat_out[start : start + _CHUNK_ELEMENTS].float()
        r = flat_ref[start : start + _CHUNK_ELEMENTS].float()
        chunk = _chunk_comparison(o, r, tol)
        failed += chunk.failed
        non_finite += chunk.non_finite
        max_abs = _larger(max_abs, chunk.max_abs)
        used = _larger(used, chunk.tolerance_used)
    return Comparison(failed, max_abs, used, non_finite)


def count_failures(
    out: torch.Tensor, ref: torch.Tensor, tol: Tolerance
) -> tuple[int, float | None]:
    """Elements failing finite(ref) & finite(out) & (abs < atol | abs < rtol*|ref|), and the
    largest |out - ref| over finite elements."""
    comparison = compare_outputs(out, ref, tol)
    return comparison.failed, comparison.max_abs


def _larger(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _chunk_comparison(o: torch.Tensor, r: torch.Tensor, tol: Tolerance) -> Comparison:
    err = (o - r).abs()
    bound = r.abs() * tol.rtol
    if tol.comparator is Comparator.STRICT:
        within = (err < tol.atol) | (err < bound)
    else:
        within = (err <= tol.atol) | (err <= bound)
    finite_out, finite_ref = torch.isfinite(o), torch.isfinite(r)
    failed = int(torch.count_nonzero(~(finite_out & finite_ref & within)))
    non_finite = int(torch.count_nonzero(finite_ref & ~finite_out))
    finite = torch.isfinite(err)
    if not bool(finite.any()):
        return Comparison(failed, None, None, non_finite)
    err = torch.where(finite, err, 0.0)
    allowed = torch.clamp(torch.where(finite, bound, 0.0), min=tol.atol)  # atol > 0
    worst = float((err / allowed).max().item())
    return Comparison(failed, float(err.max().item()), worst, non_finite)


def judge_trial(
    trial: TrialSpec, out: Any, ref: torch.Tensor, tol: Tolerance, problem: str | None = None
) -> TrialResult:
    """One trial's verdict: a type problem or any failing element fails it."""
    total = int(ref.numel())
    problem = problem or check_output_type(out, ref)
    if problem is not None:
        return TrialResult(
            trial=trial,
            passed=False,
            failed_elements=total,
            total_elements=total,
            max_abs_error=None,
            problem=problem,
        )
    comparison = compare_outputs(out, ref, tol)
    return TrialResult(
        trial=trial,
        passed=comparison.failed == 0,
        failed_elements=comparison.failed,
        total_elements=total,
        max_abs_error=comparison.max_abs,
        tolerance_used=comparison.tolerance_used,
    )


def inputs_unchanged(
    inputs: tuple[Any, ...], pristine: tuple[Any, ...], chunk_bytes: int = 1 << 28
) -> bool:
    """Bit-exact comparison of the inputs after the candidate ran with untouched copies, a
    chunk of bytes at a time (config 14's input is 13.1 GB: a whole-tensor comparison's
    temporaries do not fit beside it on an 80 GB card)."""
    for now, before in zip(inputs, pristine, strict=True):
        if isinstance(before, torch.Tensor):
            if not isinstance(now, torch.Tensor) or now.shape != before.shape:
                return False
            if now.dtype != before.dtype or not _bytes_equal(now, before, chunk_bytes):
                return False
    return True


def _bytes_equal(a: torch.Tensor, b: torch.Tensor, chunk_bytes: int) -> bool:
    flat_a, flat_b = a.detach().reshape(-1), b.detach().reshape(-1)
    if a.dtype != torch.bool:
        flat_a, flat_b = flat_a.view(torch.uint8), flat_b.view(torch.uint8)
    return all(
        torch.equal(flat_a[start : start + chunk_bytes], flat_b[start : start + chunk_bytes])
        for start in range(0, flat_a.numel(), chunk_bytes)
    )
