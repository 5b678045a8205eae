"""How far GEMM operand rounding lands from a TF32 reference: an emulation on the CPU.

The track3 reference runs on the GPU with TF32 GEMMs (10-bit mantissas, fp16's width). This
script replays the reference arithmetic with every GEMM's operands rounded the way a mode
would round them, fp32 accumulation. The "reference" side rounds to TF32, either to nearest
or by truncation (which one cuBLAS does on the H200 is not known here). The "candidate"
side rounds as fp16, TF32 (either way) or not at all, and accumulates in float64: a
different summation order, as a kernel's would be. For each pair it reports the largest
share of its tolerance any element used (the judge's `tolerance_used`) and how many elements
failed, over a few official-style inputs.

An emulation, not a measurement of any kernel: it says which operand mode could land inside
the tolerance, and the H200 precision check (`benchmarks/gpu/issue13_kernel_check.py ...
precision`) says which one does. Nothing here sets a prior or a default.

Usage: python benchmarks/precision_emulation.py [--configs 2,7,1] [--trials 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from harness.gate import compare_outputs  # noqa: E402
from harness.models import share_text  # noqa: E402
from kernels.track3 import CONFIGS, generate_inputs  # noqa: E402
from kernels.track3.reference import build_reference_model  # noqa: E402
from kernels.track3.workload import track3_workload  # noqa: E402

Rounding = Callable[[torch.Tensor], torch.Tensor]
_LOW_BITS = (1 << 13) - 1  # fp32 mantissa bits TF32 drops


def tf32_nearest(t: torch.Tensor) -> torch.Tensor:
    """fp32 rounded to a 10-bit mantissa, ties to even."""
    bits = t.contiguous().view(torch.int32)
    lsb = (bits >> 13) & 1
    return ((bits + 0xFFF + lsb) & ~_LOW_BITS).view(torch.float32)


def tf32_truncated(t: torch.Tensor) -> torch.Tensor:
    """fp32 with the 13 low mantissa bits dropped (round toward zero)."""
    return (t.contiguous().view(torch.int32) & ~_LOW_BITS).view(torch.float32)


def fp16(t: torch.Tensor) -> torch.Tensor:
    """fp32 through fp16 and back (range and 10-bit mantissa)."""
    return t.half().float()


ROUNDINGS: dict[str, Rounding] = {
    "fp16": fp16,
    "tf32 nearest": tf32_nearest,
    "tf32 truncated": tf32_truncated,
    "fp32 exact": lambda t: t,
}
LATE = (False, True)  # the candidate's softmax: normalized before PV (as the reference), or not
REFERENCES: dict[str, Rounding] = {
    "tf32 nearest": tf32_nearest,
    "tf32 truncated": tf32_truncated,
}


def forward(
    model: Any, x: torch.Tensor, rounding: Rounding, wide: bool, late_norm: bool
) -> torch.Tensor:
    """The reference arithmetic (no padding, causal) with every GEMM's operands rounded;
    accumulated in float64 when `wide` (another order than fp32's), else in fp32. With
    `late_norm`, as an online-softmax kernel does: the unnormalized exp(s - max) is rounded
    for the PV product and the context divided by the row sum afterwards."""

    def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = rounding(a), rounding(b)
        return (a.double() @ b.double()).float() if wide else a @ b

    def linear(h: torch.Tensor, layer: torch.nn.Linear) -> torch.Tensor:
        return mm(h, layer.weight.t()) + layer.bias

    batch, seq, width = x.shape
    for block in model.layers:
        att = block.attention
        heads = att.num_heads

        def split(t: torch.Tensor, heads: int = heads) -> torch.Tensor:
            return t.view(batch, seq, heads, width // heads).transpose(1, 2)

        h = block.norm1(x)
        q, k, v = (split(linear(h, p)) for p in (att.q_proj, att.k_proj, att.v_proj))
        scores = mm(q, k.transpose(-2, -1)) * (width / heads) ** -0.5
        future = torch.ones(seq, seq, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
        if late_norm:
            weights = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
            context = mm(weights, v) / weights.sum(dim=-1, keepdim=True)
        else:
            context = mm(torch.softmax(scores, dim=-1), v)
        context = context.transpose(1, 2).reshape(batch, seq, width)
        x = x + linear(context, att.out_proj)
        hidden = F.gelu(linear(block.norm2(x), block.ffn_in))
        x = x + linear(hidden, block.ffn_out)
    return model.final_norm(x)


def emulate(config_id: str, trials: int) -> list[str]:
    """One table row per (reference rounding, candidate rounding) on this config."""
    config = CONFIGS[config_id]
    model = build_reference_model(config, device="cpu", seed=1234)
    tolerance = track3_workload().tolerance
    rows = []
    inputs = [generate_inputs(config, 1234 + i, 0.0, 1.0, "cpu")[0] for i in range(trials)]
    with torch.no_grad():
        for ref_name, ref_round in REFERENCES.items():
            refs = [forward(model, x, ref_round, wide=False, late_norm=False) for x in inputs]
            for (cand_name, cand_round), late in itertools.product(ROUNDINGS.items(), LATE):
                failed, used = 0, 0.0
                for x, ref in zip(inputs, refs, strict=True):
                    out = forward(model, x, cand_round, wide=True, late_norm=late)
                    found = compare_outputs(out, ref, tolerance)
                    failed += found.failed
                    used = max(used, found.tolerance_used or 0.0)
                softmax = "online (late)" if late else "normalized first"
                rows.append(
                    f"| {config_id} | {ref_name} | {cand_name} | {softmax} | {share_text(used)} "
                    f"| {failed} |"
                )
                print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="2,7,1", help="track3 config ids, comma-separated")
    parser.add_argument("--trials", type=int, default=2, help="inputs per config (seeds 1234+)")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "docs/results/precision-emulation-cpu.md"
    )
    args = parser.parse_args()
    configs = args.configs.split(",")
    unknown = [c for c in configs if c not in CONFIGS or c.startswith("cpu") or c == "14"]
    if unknown:
        raise SystemExit(f"--configs: unknown or unsupported {unknown}; use ids 1-13")
    if args.trials < 1:
        raise SystemExit(f"--trials: {args.trials} is not a positive count")
    if not args.out.parent.is_dir():
        raise SystemExit(f"--out: folder {args.out.parent} does not exist; create it first")
    torch.set_num_threads(2)
    lines = [
        "# GEMM operand rounding against a TF32 reference (CPU emulation)",
        "",
        f"Command: `python benchmarks/precision_emulation.py --configs {args.configs} "
        f"--trials {args.trials}`",
        "",
        "The reference arithmetic with each GEMM's operands rounded as named, fp32 accumulation "
        "on the reference side, float64 accumulation on the candidate side; official-style "
        "inputs (seeds 1234 on), no padding. Tolerance used: the largest share of "
        "max(atol, rtol x |ref|) any element used (below 100% passes). An emulation, not a "
        "kernel measured on the H200.",
        "",
        "| config | reference GEMMs | candidate GEMMs | candidate softmax | tolerance used "
        "| failed elements |",
        "|---|---|---|---|---:|---:|",
    ]
    for config_id in configs:
        lines += emulate(config_id, args.trials)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
