"""What the host spends on one graph-replayed forward of a track3 candidate, piece by piece.

The organizer protocol times back-to-back un-synchronized calls, so a call whose kernels take
less than its host work is timed at its host work. This splits that work for one config: the
whole forward, then each step of the replay path alone (the served-graph lookup, the input
copies, the replay, the output clone) and an empty module call for scale. Microseconds per
call over many un-synchronized calls, synchronized once at the end. A diagnosis, not a result.
Usage: python benchmarks/gpu/host_overhead.py CANDIDATE.py OUT.md [CONFIGS]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from frontier_profile import host_us, profile_arguments, shown_path  # noqa: E402

from kernels.candidate_tree import load_candidate  # noqa: E402
from kernels.track3 import CONFIGS, generate_inputs  # noqa: E402
from kernels.track3.reference import build_reference_model  # noqa: E402
from kernels.track3.runtime import prepare_process  # noqa: E402

CALLS = 2000


class Empty(torch.nn.Module):
    def forward(self, x: Any, mask: Any = None) -> Any:
        return x


def pieces(entry: type, config_id: str) -> dict[str, float]:
    config = CONFIGS[config_id]
    reference = build_reference_model(config, device="cuda", seed=1234)
    model = entry(config)
    model.load_state_dict(reference.state_dict(), strict=True)
    model = model.cuda().eval()
    x, mask = generate_inputs(config, 1234 + 100000, 0.0, 1.0, "cuda")
    empty = Empty()
    with torch.no_grad():
        model(x, mask)
        captured = model._graphs.served(x, mask)
        steps = {
            "forward": lambda: model(x, mask),
            "empty module call": lambda: empty(x, mask),
            "served lookup": lambda: model._graphs.served(x, mask),
        }
        if captured is not None:
            steps.update(
                {
                    "copy x": lambda: captured.x.copy_(x),
                    "copy mask": lambda: captured.mask.copy_(mask),
                    "replay": captured.graph.replay,
                    "clone out": lambda: captured.out.clone(),
                }
            )
        return {name: host_us(call, CALLS, warmup=50) for name, call in steps.items()}


def main() -> None:
    usage = "host_overhead.py CANDIDATE.py OUT.md [CONFIGS]"
    candidate, out, configs = profile_arguments(sys.argv, usage, ["2", "1"])
    prepare_process("cuda")
    entry = load_candidate(candidate, "host_profiled").UserOptimizedTransformer
    lines = [f"Candidate `{shown_path(candidate)}`; host microseconds per call, {CALLS} calls.", ""]
    for config_id in configs:
        measured = pieces(entry, config_id)
        lines.append(f"| config {config_id} | " + " | ".join(measured) + " |")
        lines.append("|---" * (len(measured) + 1) + "|")
        lines.append("| us | " + " | ".join(f"{v:.1f}" for v in measured.values()) + " |")
        lines.append("")
        print("\n".join(lines[-4:]), flush=True)
        out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
