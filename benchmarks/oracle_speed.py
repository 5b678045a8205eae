"""The track3 blocked float64 oracle (config 14's judge) against its version at an earlier
commit, side by side in one process, on a reduced shape with config 14's structure.

    .venv/bin/python benchmarks/oracle_speed.py --before 4e6c843 \
        --out docs/results/oracle-speed-cpu.md
    (on the H200: --device cuda --seq-len 32768 --d-model 1024 --query-block 1024
     --key-block 4096, config 14's widths and blocks)
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from kernels.track3 import Track3Config, generate_inputs  # noqa: E402
from kernels.track3.oracle import BlockedOracle  # noqa: E402
from kernels.track3.reference import build_reference_model  # noqa: E402


def load_before(rev: str, where: Path) -> ModuleType:
    """kernels/track3/oracle.py as it was at `rev`, loaded from a file of its own."""
    shown = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:kernels/track3/oracle.py"],
        capture_output=True,
        text=True,
    )
    if shown.returncode != 0:
        raise SystemExit(f"--before {rev}: git show failed: {shown.stderr.strip()}")
    path = where / "oracle_before.py"
    path.write_text(shown.stdout)
    spec = importlib.util.spec_from_file_location("oracle_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def time_call(oracle: object, inputs: tuple[torch.Tensor, torch.Tensor], device: str) -> float:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    started = time.perf_counter()
    with torch.no_grad():
        oracle(*inputs)  # type: ignore[operator]
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", required=True, help="git revision of the older oracle")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--query-block", type=int, default=1024)
    parser.add_argument("--key-block", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    config = Track3Config(
        batch_size=1, seq_len=args.seq_len, d_model=args.d_model, num_heads=16,
        ffn_dim=args.d_model, num_layers=1,
    )  # fmt: skip
    reference = build_reference_model(config).to(args.device)
    blocks = {"query_block": args.query_block, "key_block": args.key_block}
    lines = [
        "# The blocked float64 oracle: this commit against an earlier one",
        "",
        f"Command: `python benchmarks/oracle_speed.py {' '.join(sys.argv[1:])}`",
        "",
        f"Shape: 1 x {args.seq_len} tokens, width {args.d_model}, 16 heads, 1 layer, causal; "
        f"blocks {args.query_block} x {args.key_block}; device {args.device}, "
        f"{torch.get_num_threads()} torch threads. Median of {args.repeats} calls per arm, "
        "the arms alternating.",
        "",
        "| padding | before s | now s | speedup | max abs difference (float32 out) |",
        "|---:|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        before = load_before(args.before, Path(tmp)).BlockedOracle(reference, **blocks)
        now = BlockedOracle(reference, **blocks)
        for padding in (0.0, 0.5):
            inputs = generate_inputs(config, 5, padding, device=args.device)
            times: dict[str, list[float]] = {"before": [], "now": []}
            for _ in range(args.repeats):
                times["before"].append(time_call(before, inputs, args.device))
                times["now"].append(time_call(now, inputs, args.device))
            with torch.no_grad():
                diff = (before(*inputs) - now(*inputs)).abs().max().item()
            b, n = statistics.median(times["before"]), statistics.median(times["now"])
            lines.append(f"| {padding} | {b:.3f} | {n:.3f} | {b / n:.2f}x | {diff:.2e} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
