"""The workload inspector: looks at the inputs and configurations (never the code) and proposes
ideas from what it sees (seed 004: the biggest win came from looking at the inputs)."""

from __future__ import annotations

from typing import Any

from agents.llm.session import LLMSession
from agents.proposals import ScoredIdea, ask_for_proposals
from kernels.workload import TrialSpec, Workload
from prompts import render_prompt

MAX_ELEMENTS = 4_000_000  # inputs larger than this are not materialized on the host


def describe_configs(workload: Workload, config_ids: list[str]) -> str:
    """Shape fields, lower-bound FLOPs and bytes, and arithmetic intensity per config."""
    runtime = workload.load_runtime()
    lines = []
    for cid in config_ids:
        config = workload.configs[cid]
        flops, nbytes = runtime.cost(config)
        fields = ", ".join(f"{k}={v}" for k, v in config.model_dump().items())
        lines.append(
            f"- {cid}: {fields}; {flops / 1e9:.3g} GFLOP, {nbytes / 1e6:.3g} MB, "
            f"{flops / max(nbytes, 1):.1f} FLOP/byte"
        )
    return "\n".join(lines)


def _describe_tensor(name: str, t: Any) -> str:
    import torch

    if t.dtype == torch.bool:
        rows = t.reshape(-1, t.shape[-1]) if t.dim() > 1 else t.reshape(1, -1)
        lengths = rows.sum(dim=-1)
        prefix = bool((rows == (torch.arange(rows.shape[-1]) < lengths[:, None])).all())
        return (
            f"{name}: bool {tuple(t.shape)}, {float(t.float().mean()):.3f} true, "
            f"valid lengths {int(lengths.min())}..{int(lengths.max())}, "
            f"{'every row a prefix (right padding)' if prefix else 'not prefix-shaped'}"
        )
    f = t.float()
    zero_rows = int((f.reshape(-1, f.shape[-1]).abs().sum(-1) == 0).sum()) if f.dim() > 1 else 0
    dtype = str(t.dtype).removeprefix("torch.")
    return (
        f"{name}: {dtype} {tuple(t.shape)}, mean {float(f.mean()):.3f}, "
        f"std {float(f.std()):.3f}, min {float(f.min()):.3f}, max {float(f.max()):.3f}, "
        f"all-zero rows {zero_rows}"
    )


def describe_inputs(workload: Workload, config_ids: list[str], trials: list[TrialSpec]) -> str:
    """What generated inputs look like, on the host, for configs small enough to draw."""
    runtime = workload.load_runtime()
    lines = []
    for cid in config_ids:
        config = workload.configs[cid]
        _, nbytes = runtime.cost(config)
        if nbytes / 4 > MAX_ELEMENTS:
            continue
        for trial in trials:
            inputs = runtime.generate_inputs(config, trial, "cpu")
            head = f"config {cid}, padding {trial.padding_ratio}, scale {trial.input_scale}"
            parts = "; ".join(_describe_tensor(f"input {i}", t) for i, t in enumerate(inputs))
            lines.append(f"- {head}: {parts}")
    return "\n".join(lines) or "- (every config is too large to draw on the host)"


def inspect_workload(
    session: LLMSession, workload: Workload, config_ids: list[str], max_ideas: int = 5
) -> list[ScoredIdea]:
    """Scored proposals from the configurations and the inputs."""
    trials = [TrialSpec(seed=1, padding_ratio=p) for p in (0.0, 0.5)]
    prompt = render_prompt(
        "inspector",
        {
            "workload_name": workload.name,
            "workload_description": workload.description,
            "configs": describe_configs(workload, config_ids),
            "inputs": describe_inputs(workload, config_ids, trials),
            "max_ideas": str(max_ideas),
        },
    )
    return ask_for_proposals(session, "inspector", prompt)[:max_ideas]
