"""Sweep the fused Triton path's launch shape (rows per program x warps) per config on the GPU:
median per-call CUDA-event time of the graph-captured forward, and failed elements on one
official trial. For tuning the 'auto' heuristic; the judge's numbers come from track3_h200.py.

Usage (H200): python benchmarks/track3_fused_sweep.py --configs 2,1,6 --out docs/results/x.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.gate import count_failures  # noqa: E402
from kernels.candidate_tree import load_candidate  # noqa: E402
from kernels.registry import resolve_workload  # noqa: E402

BASE = {
    "fused_kernel": "triton",
    "matmul_precision": "fp16",
    "graph_capture": "cuda_graph",
    "qkv_projection": "packed",
    "attention": "sdpa",
    "causal_mask": "cached",
}


def load_swept(path: Path) -> Any:
    """A candidate module file, or a package directory (its candidate.py)."""
    return load_candidate(path / "candidate.py" if path.is_dir() else path, "swept_candidate")


def time_calls(fn: Any, inputs: tuple[Any, ...], calls: int) -> float:
    """Median per-call event time in ms (each call its own event pair)."""
    import torch

    for _ in range(5):
        fn(*inputs)
    samples = []
    for _ in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*inputs)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def sweep_config(
    module: Any, config_id: str, shapes: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    import torch

    workload = resolve_workload("track3")
    runtime = workload.load_runtime()
    runtime.prepare_process("cuda")
    config = workload.configs[config_id]
    reference = runtime.build_reference(config, "cuda")
    inputs = runtime.generate_inputs(config, workload.official_trials[0], "cuda")
    want = runtime.call(reference, inputs)
    rows = []
    for block_rows, warps in shapes:
        tunables = {**BASE, "fused_rows": block_rows, "fused_warps": warps}
        model = module.OptimizedTransformer(config, tunables).cuda()
        model.load_state_dict(reference.state_dict(), strict=True)
        model.eval()
        row: dict[str, Any] = {"config": config_id, "rows": block_rows, "warps": warps}
        try:
            got = runtime.call(model, inputs)
            row["failed"] = count_failures(got, want, workload.tolerance)[0]
            row["ms"] = time_calls(
                lambda x, m, model=model: runtime.call(model, (x, m)), inputs, 50
            )
        except Exception as exc:  # a launch shape that does not compile is a row too
            row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        rows.append(row)
        print(json.dumps(row), flush=True)
        del model
        torch.cuda.empty_cache()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--configs", default="2,12,7,1,5,11,13,6")
    parser.add_argument("--rows", default="auto,16,32,64,128")
    parser.add_argument("--warps", default="4,8")
    parser.add_argument("--candidate", type=Path, default=ROOT / "kernels/track3/seed")
    parser.add_argument("--out", type=Path, default=ROOT / "docs/results/track3-fused-sweep.md")
    args = parser.parse_args()
    module = load_swept(args.candidate)
    shapes = [(r, w) for r in args.rows.split(",") for w in args.warps.split(",")]
    results = [row for cid in args.configs.split(",") for row in sweep_config(module, cid, shapes)]
    lines = [
        "# Fused Triton path: launch shapes per config (H200)",
        "",
        f"Command: `python {' '.join(sys.argv)}`",
        "",
        "Graph-captured forward, fp16 islands; median of 50 per-call CUDA-event times "
        "(no L2 flush); failed elements on official trial seed 1234.",
        "",
        "| config | rows | warps | ms | failed |",
        "|---|---|---|---:|---:|",
    ]
    for r in results:
        ms = f"{r['ms']:.4f}" if "ms" in r else r.get("error", "-")[:60]
        lines.append(
            f"| {r['config']} | {r['rows']} | {r['warps']} | {ms} | {r.get('failed', '-')} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
