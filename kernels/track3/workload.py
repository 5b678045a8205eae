"""The track3 workload declaration (pure data: importing it does not import torch)."""

from __future__ import annotations

from pathlib import Path

from kernels.track3.configs import CONFIGS, CPU_CONFIGS, OFFICIAL_CONFIGS
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


def _shape_constants() -> tuple[int, ...]:
    values = set()
    for cfg in OFFICIAL_CONFIGS.values():
        values |= {cfg.batch_size, cfg.seq_len, cfg.d_model, cfg.num_heads, cfg.ffn_dim}
    # 1, 2 and 4 are too generic to signal special-casing (x.dim() == 2, ...).
    return tuple(sorted(v for v in values if v > 4))


def track3_workload() -> Workload:
    """TikTok TechJam 2026 Track 3: dense causal transformer inference, float32 in and out."""
    official = tuple(OFFICIAL_CONFIGS)
    # The quick screen spans the sizes' classes, cheapest first: one sequence (2), a batch (1),
    # the narrow model (7), the one wide, GEMM-bound model (8), long sequences (13). Without a
    # wide model a change only the GEMM library's path feels there (fp16 islands, D=1024)
    # read as its parent on every screened config and was never swept (H200 runs 11 and 12).
    screening = ("2", "1", "7", "8", "13")
    return Workload(
        name="track3",
        description="dense causal pre-LN transformer inference (TechJam 2026 Track 3)",
        baseline="eager reference, float32, torch.set_float32_matmul_precision('high') with "
        "TF32 allowed for matmul and cuDNN",
        configs=CONFIGS,
        config_sets={
            "official": ConfigSet(
                name="official",
                config_ids=official,
                screening_ids=screening,
                runnable_ids=tuple(i for i in official if i != "14"),
            ),
            "runnable": ConfigSet(
                name="runnable",
                config_ids=tuple(i for i in official if i != "14"),
                screening_ids=screening,
                feasibility_ids=("14",),
            ),
            "cpu": ConfigSet(
                name="cpu", config_ids=tuple(CPU_CONFIGS), screening_ids=("cpu-1", "cpu-3")
            ),
        },
        default_config_set={"cpu": "cpu", "cuda": "runnable"},
        tolerance=Tolerance(atol=0.002, rtol=0.02, comparator=Comparator.STRICT),
        official_trials=tuple(TrialSpec(seed=s) for s in range(1234, 1239)),
        timing_seed_offset=100000,
        candidate_file="candidate.py",
        seed_candidate=HERE / "seed",
        ideas_file=HERE / "ideas.json",
        static_policy=StaticPolicy(
            entry_point="OptimizedTransformer",
            entry_aliases=("UserOptimizedTransformer",),
            allowed_imports=("torch", "triton", *HARMLESS_STDLIB),
            shape_constants=_shape_constants(),
        ),
        runtime_module="kernels.track3.runtime",
    )
