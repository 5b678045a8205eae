"""The matchain workload declaration (pure data: importing it does not import torch)."""

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


class MatchainConfig(BaseModel):
    """out = A @ B @ C with A [m, k], B [k, n], C [n, p], float32."""

    model_config = ConfigDict(frozen=True)

    m: int = Field(gt=0, description="Rows of A and of the output.")
    k: int = Field(gt=0, description="Columns of A, rows of B.")
    n: int = Field(gt=0, description="Columns of B, rows of C.")
    p: int = Field(gt=0, description="Columns of C and of the output.")


# Left association ((AB)C) costs m*k*n + m*n*p multiply-adds, right (A(BC)) k*n*p + m*k*p:
# each wins by ~25x on one of the first two shapes, and they tie on the third.
CONFIGS: dict[str, MatchainConfig] = {
    "tall": MatchainConfig(m=1024, k=256, n=256, p=8),
    "short": MatchainConfig(m=8, k=256, n=256, p=1024),
    "square": MatchainConfig(m=128, k=128, n=128, p=128),
    # Never timed: a frontier must pass it before it is exported (feasibility).
    "long": MatchainConfig(m=2048, k=64, n=64, p=2048),
}
SWEPT = ("tall", "short", "square")


def matchain_workload() -> Workload:
    """A three-matrix product; the reference multiplies left to right whatever the shapes."""
    ids = SWEPT
    return Workload(
        name="matchain",
        description="a float32 matrix chain A @ B @ C (tiny workload: per-regime dispatch tests)",
        baseline="eager reference (A @ B) @ C, float32",
        configs=CONFIGS,
        config_sets={
            "cpu": ConfigSet(
                name="cpu", config_ids=ids, screening_ids=ids, feasibility_ids=("long",)
            ),
            "official": ConfigSet(name="official", config_ids=ids, screening_ids=ids),
        },
        default_config_set={"cpu": "cpu", "cuda": "official"},
        tolerance=Tolerance(atol=1e-4, rtol=1e-3, comparator=Comparator.STRICT),
        official_trials=(TrialSpec(seed=1), TrialSpec(seed=2)),
        timing_seed_offset=100000,
        candidate_file="candidate.py",
        seed_candidate=HERE / "seed_candidate.py",
        ideas_file=HERE / "ideas.json",
        static_policy=StaticPolicy(
            entry_point="OptimizedChain",
            allowed_imports=("torch", *HARMLESS_STDLIB),
            shape_constants=tuple(
                sorted({v for c in CONFIGS.values() for v in (c.m, c.k, c.n, c.p)})
            ),
        ),
        runtime_module="kernels.matchain.runtime",
    )
