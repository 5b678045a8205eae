"""The softmax workload declaration (pure data: importing it does not import torch)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from kernels.workload import (
    HARMLESS_STDLIB,
    Comparator,
    ConfigSet,
    StaticPolicy,
    Tolerance,
    TrialSpec,
    Workload,
)

HERE = Path(__file__).resolve().parent


class SoftmaxConfig(BaseModel):
    """One softmax shape: a [rows, cols] float32 matrix, softmax over each row."""

    model_config = ConfigDict(frozen=True)

    rows: int = Field(gt=0, description="Number of independent rows.")
    cols: int = Field(gt=0, description="Row length (the softmax axis).")


CONFIGS: dict[str, SoftmaxConfig] = {
    "s1": SoftmaxConfig(rows=256, cols=1024),
    "s2": SoftmaxConfig(rows=64, cols=4096),
    "s3": SoftmaxConfig(rows=2048, cols=128),
}


def softmax_workload() -> Workload:
    """Row softmax over float32 rows; the reference is a deliberately naive two-exp version."""
    ids = tuple(CONFIGS)
    return Workload(
        name="softmax",
        description="row softmax of a float32 matrix (tiny workload for fast tests)",
        baseline="eager naive reference (two exp passes), float32",
        configs=CONFIGS,
        config_sets={
            "cpu": ConfigSet(name="cpu", config_ids=ids, screening_ids=("s1",)),
            "official": ConfigSet(name="official", config_ids=ids, screening_ids=("s1",)),
        },
        default_config_set={"cpu": "cpu", "cuda": "official"},
        tolerance=Tolerance(atol=1e-6, rtol=1e-4, comparator=Comparator.STRICT),
        official_trials=(TrialSpec(seed=1), TrialSpec(seed=2), TrialSpec(seed=3)),
        timing_seed_offset=100000,
        candidate_file="candidate.py",
        seed_candidate=HERE / "seed_candidate.py",
        ideas_file=HERE / "ideas.json",
        static_policy=StaticPolicy(
            entry_point="OptimizedSoftmax",
            allowed_imports=("torch", "triton", *HARMLESS_STDLIB),
            shape_constants=tuple(sorted({v for c in CONFIGS.values() for v in (c.rows, c.cols)})),
        ),
        runtime_module="kernels.softmax.runtime",
    )
