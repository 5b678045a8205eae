"""Which inputs a candidate must get right: the official trials plus salted ones it cannot
predict, covering every padding ratio and input scale the judge varies."""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from kernels.workload import TrialSpec

PADDING_RATIOS = (0.0, 0.25, 0.5)
INPUT_SCALES = (0.5, 1.0, 2.0)
# Every padding ratio and every scale at least once, and the hardest pair (most padding,
# largest inputs) as well.
SALTED_GRID = ((0.0, 2.0), (0.25, 0.5), (0.5, 1.0), (0.5, 2.0))
RECHECK_GRID = ((0.25, 1.0), (0.0, 0.5))


def new_salt() -> int:
    """A secret seed base: drawn per evaluation, written to the ledger only afterwards."""
    return secrets.randbelow(2**31 - 1000)


def correctness_trials(official: Sequence[TrialSpec], salt: int) -> list[TrialSpec]:
    """The official trials, then the salted grid."""
    salted = [
        TrialSpec(seed=salt + i, padding_ratio=pad, input_scale=scale)
        for i, (pad, scale) in enumerate(SALTED_GRID)
    ]
    return [*official, *salted]


def recheck_trials(salt: int) -> list[TrialSpec]:
    """Fresh inputs the judged arm must still get right after it was timed."""
    return [
        TrialSpec(seed=salt + 100 + i, padding_ratio=pad, input_scale=scale)
        for i, (pad, scale) in enumerate(RECHECK_GRID)
    ]
