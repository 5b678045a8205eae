"""Issue 13 on the H200: do the fused kernels' new schedule tunables compile and pass the gate?

Each variant of the seed (fused Triton layers + CUDA graph, then one schedule tunable changed)
is checked on the official trials plus padded and rescaled ones, and timed under the organizer
protocol beside the eager reference. A check of the kernels, not a search result: nothing here
sets a prior or a default. Usage: python benchmarks/gpu/issue13_kernel_check.py OUT.md
[CONFIGS [SET[,SET...] [TRIALS]]]; SET: schedule (the default), heads, softmax, weight-loads,
precision, precision-groups, torch-path or compile (several comma-separated run as one table);
TRIALS: more inputs to check, SEED:PADDING:SCALE,... (e.g. the ones a run's ledger recorded as
demoting a frontier)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from replay_compare import kernel_resources  # noqa: E402

from harness.gate import compare_outputs  # noqa: E402
from harness.models import share_text  # noqa: E402
from harness.organizer_timing import organizer_medians  # noqa: E402
from kernels.candidate_tree import load_candidate  # noqa: E402
from kernels.track3 import CONFIGS, generate_inputs  # noqa: E402
from kernels.track3.reference import build_reference_model  # noqa: E402
from kernels.track3.runtime import prepare_process  # noqa: E402
from kernels.track3.workload import track3_workload  # noqa: E402
from kernels.workload import TrialSpec  # noqa: E402

BASE = {"fused_kernel": "triton", "graph_capture": "cuda_graph"}
IEEE = "fp32_ieee"
VARIANTS = {
    "fused fp16": {},
    "ieee all": {
        "fused_projection_operands": IEEE,
        "fused_attention_operands": IEEE,
        "fused_ffn_operands": IEEE,
    },
    "ieee attention": {"fused_attention_operands": IEEE},
    "ieee projections": {"fused_projection_operands": IEEE},
    "keys 32, stages 2": {"fused_keys": "32", "fused_stages": "2"},
    "ffn block 128, stages 3": {"fused_ffn_block": "128", "fused_stages": "3"},
    "min width 64": {"fused_min_width": "64"},
}
# The fused kernels' weight loads (fused_weight_loads), at the FFN block run 10's frontier chose
# for its small batches (16) and at auto.
WEIGHT_LOAD_VARIANTS = {
    f"{loads}, ffn block {block}": {"fused_weight_loads": loads, "fused_ffn_block": block}
    for block in ("16", "auto")
    for loads in ("in_order", "pipelined_2", "pipelined_3")
}
# Every operand mode of all three GEMM groups, and fp16 with the softmax normalized before the
# PV product: how much of the tolerance each uses against the TF32 reference (run 12's fp16
# kernels' largest errors were 0.0011-0.0021 per config in its sweeps, atol 0.002, and they
# failed by one element on fresh inputs of configs 1, 5, 6 and 7).
OPERANDS = ("fused_projection_operands", "fused_attention_operands", "fused_ffn_operands")
PRECISION_VARIANTS = {
    **{f"operands {m}": dict.fromkeys(OPERANDS, m) for m in ("fp16", "tf32x3", "fp32_ieee")},
    "operands fp16, normalized softmax": {"fused_softmax": "normalized"},
}
# The GEMM library's path (fused kernels off), where the widths the fused kernels do not serve
# go (config 8): fp32 with TF32 as the reference, fp16 islands, and fp16 islands with packed
# projections and SDPA, all under the CUDA graph.
TORCH_PATH_VARIANTS = {
    "torch path fp32": {"fused_kernel": "none"},
    "torch path fp16": {"fused_kernel": "none", "matmul_precision": "fp16"},
    "torch path fp16, packed, sdpa": {
        "fused_kernel": "none",
        "matmul_precision": "fp16",
        "qkv_projection": "packed",
        "attention": "sdpa",
    },
}
# Run 17's torch-path settings (the frontier's, config 8), then the same under whole-model
# compile, in both modes the search may choose.
RUN17_TORCH_PATH = {
    "fused_kernel": "none",
    "matmul_precision": "fp16",
    "head_layout": "strided",
    "attention": "sdpa",
    "score_scale": "baddbmm",
}
# Run 20's step 13: the fp32 torch path with the folded score scale (explicit attention, whose
# baddbmm Inductor's Triton template lowered reading its uninitialized input), compiled.
RUN20_STEP13 = {"fused_kernel": "none", "score_scale": "baddbmm"}
COMPILE_VARIANTS = {
    "fp32 torch path, baddbmm, compile max-autotune-no-cudagraphs": {
        **RUN20_STEP13,
        "whole_model_compile": "max-autotune-no-cudagraphs",
    },
    "run 17 torch path": RUN17_TORCH_PATH,
    **{
        f"run 17 torch path, compile {mode}": {**RUN17_TORCH_PATH, "whole_model_compile": mode}
        for mode in ("default", "max-autotune-no-cudagraphs")
    },
}
# The fused attention's heads all in one score tile (today's) or one after another
# (fused_heads=looped), at the auto schedule and at other row blocks; and both at the auto
# schedule with the softmax normalized before PV (one pass where one key block holds the causal
# range).
HEAD_VARIANTS = {
    "heads batched": {},
    "heads looped": {"fused_heads": "looped"},
    "heads looped, warps 8": {"fused_heads": "looped", "fused_warps": "8"},
    "heads looped, rows 128, warps 8": {
        "fused_heads": "looped",
        "fused_rows": "128",
        "fused_warps": "8",
    },
    "heads looped, normalized softmax": {"fused_heads": "looped", "fused_softmax": "normalized"},
    "heads batched, normalized softmax": {"fused_softmax": "normalized"},
}
# The softmax's two forms under both head tilings, at the auto schedule: which keeps the fused
# fp16 path inside the tolerance on inputs that found its edge (run 20: one element of config 6
# at 0.00212 on three x0.5 inputs, the same element at every fused schedule the run promoted).
SOFTMAX_VARIANTS = {
    name: HEAD_VARIANTS[name]
    for name in (
        "heads batched",
        "heads batched, normalized softmax",
        "heads looped",
        "heads looped, normalized softmax",
    )
}
# One GEMM group at a time in near-fp32 (tf32x3) or exact fp32 (the attention products), the
# others fp16: which group's rounding makes the fp16 path's one-element misses (run 20: config
# 6 at 0.00212, atol 0.002) and what lifting only that group costs.
GROUP_VARIANTS = {
    "operands fp16": {},
    **{f"{name.split('_')[1]} tf32x3": {name: "tf32x3"} for name in OPERANDS},
    "attention fp32_ieee": {"fused_attention_operands": IEEE},
}
VARIANT_SETS = {
    "softmax": SOFTMAX_VARIANTS,
    "precision-groups": GROUP_VARIANTS,
    "schedule": VARIANTS,
    "heads": HEAD_VARIANTS,
    "torch-path": TORCH_PATH_VARIANTS,
    "compile": COMPILE_VARIANTS,
    "weight-loads": WEIGHT_LOAD_VARIANTS,
    "precision": PRECISION_VARIANTS,
}
TRIALS = [TrialSpec(seed=s) for s in range(1234, 1239)] + [
    TrialSpec(seed=77, padding_ratio=0.25),
    TrialSpec(seed=78, padding_ratio=0.5),
    TrialSpec(seed=79, input_scale=0.5),
    TrialSpec(seed=80, input_scale=2.0),
]


def chosen_variants(text: str) -> dict[str, dict[str, str]]:
    """SET or SET,SET,... as one ordered table of variants (a name two sets share runs once)."""
    names = [name for name in text.split(",") if name]
    unknown = [name for name in names if name not in VARIANT_SETS]
    if not names or unknown:
        raise SystemExit(
            f"unknown variant set(s) {unknown or [text]}; known: {sorted(VARIANT_SETS)} "
            "(one, or several comma-separated, e.g. softmax,precision-groups)"
        )
    variants: dict[str, dict[str, str]] = {}
    for name in names:
        for label, tunables in VARIANT_SETS[name].items():
            variants.setdefault(label, tunables)
    return variants


def parse_trials(text: str) -> list[TrialSpec]:
    """SEED:PADDING:SCALE,... as TrialSpecs (the usage line's TRIALS)."""
    trials = []
    for item in filter(None, text.split(",")):
        parts = item.split(":")
        try:
            if len(parts) != 3:
                raise ValueError(item)
            seed, padding, scale = int(parts[0]), float(parts[1]), float(parts[2])
            trial = TrialSpec(seed=seed, padding_ratio=padding, input_scale=scale)
        except ValueError:  # pydantic's ValidationError is one too
            raise SystemExit(
                f"trial {item!r}: expected SEED:PADDING:SCALE (an integer and two numbers), "
                "e.g. 373791598:0.25:0.5"
            ) from None
        trials.append(trial)
    return trials


def check(
    seed: object, config_id: str, tunables: dict[str, str]
) -> tuple[int, float, float, float, float]:
    config = CONFIGS[config_id]
    reference = build_reference_model(config, device="cuda", seed=1234)
    model = seed.OptimizedTransformer(config, {**BASE, **tunables})  # type: ignore[attr-defined]
    model.load_state_dict(reference.state_dict(), strict=True)
    model = model.cuda().eval()
    workload = track3_workload()
    failed, worst, used = 0, 0.0, 0.0
    with torch.no_grad():
        for trial in TRIALS:
            x, mask = generate_inputs(
                config, trial.seed, trial.padding_ratio, trial.input_scale, "cuda"
            )
            found = compare_outputs(model(x, mask), reference(x, mask), workload.tolerance)
            failed, worst = failed + found.failed, max(worst, found.max_abs or 0.0)
            used = max(used, found.tolerance_used or 0.0)
        x, mask = generate_inputs(config, 1234 + 100000, 0.0, 1.0, "cuda")
        calls = {"eager": lambda: reference(x, mask), "variant": lambda: model(x, mask)}
        medians = organizer_medians(calls, cuda=True)
    if model.fused_refused:
        # Triton refused the schedule at launch and the torch path ran instead: the row is
        # that path's (run on 2026-12-07: config 13 at 0% of the tolerance, 0.95x eager).
        raise FusedRefused(f"fused kernels refused at launch, {fallback_timing(medians)}")
    return failed, worst, used, medians["eager"], medians["variant"]


class FusedRefused(Exception):
    """The variant's fused kernels did not run: what was timed is the fallback."""


def fallback_timing(medians: dict[str, float]) -> str:
    return f"the torch path ran: {medians['variant']:.4f} ms vs eager {medians['eager']:.4f} ms"


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit(
            "usage: issue13_kernel_check.py OUT.md [CONFIGS [SET[,SET...] [TRIALS]]]; SET: "
            + "|".join(VARIANT_SETS)
        )
    out = Path(sys.argv[1])
    configs = sys.argv[2].split(",") if len(sys.argv) > 2 else ["2", "7", "1", "13", "6"]
    variants = chosen_variants(sys.argv[3] if len(sys.argv) > 3 else "schedule")
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        raise SystemExit(f"unknown configs {unknown}; known: {sorted(CONFIGS)}")
    if not torch.cuda.is_available():
        raise SystemExit("the kernel check needs a CUDA device (none is visible)")
    if len(sys.argv) > 4:
        TRIALS.extend(parse_trials(sys.argv[4]))
    prepare_process("cuda")
    seed = load_candidate(track3_workload().seed_entry(), "seed13")
    lines = [
        f"| config | variant | failed elements ({len(TRIALS)} trials) | max abs err "
        "| tolerance used | eager ms | variant ms | x eager |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    seen: set[int] = set()
    resources: list[str] = []
    for config_id in configs:
        for name, tunables in variants.items():
            started = time.perf_counter()
            try:
                failed, worst, used, eager, ms = check(seed, config_id, tunables)
                cells = (
                    f"{failed} | {worst:.4g} | {share_text(used)} | {eager:.4f} | {ms:.4f} | "
                    f"{eager / ms:.2f}x"
                )
                row = f"| {config_id} | {name} | {cells} |"
            except Exception as exc:  # a variant that does not build is a finding
                error = f"error: {type(exc).__name__}: {str(exc)[:160]}"
                row = f"| {config_id} | {name} | {error} | | | | | |"
            print(row, f"({time.perf_counter() - started:.1f} s)", flush=True)
            lines.append(row)
            compiled = kernel_resources("seed13.fused_kernels", seen)
            resources += [f"- config {config_id}, {name}: {line}" for line in compiled]
            out.write_text("\n".join([*lines, "", "Kernels compiled:", "", *resources]) + "\n")


if __name__ == "__main__":
    main()
