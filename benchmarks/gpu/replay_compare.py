"""A candidate as exported beside the seed of this checkout run with that candidate's tunables.

Tells whether a change to the seed's building blocks (here the graph replay reading the caller's
buffers in place) moves a frontier's times: per config, the organizer-protocol median of the
eager reference, the exported candidate and the seed with its TUNABLES, side by side in one
process; each arm's host time per call; the largest difference between the two candidates'
outputs; and the registers, spills and shared memory of the seed's Triton kernels compiled for
that config. A diagnosis, not a result: nothing here feeds the search.
Usage: python benchmarks/gpu/replay_compare.py CANDIDATE.py OUT.md [CONFIGS]
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

from harness.organizer_timing import PROTOCOL, organizer_medians  # noqa: E402
from kernels.candidate_tree import load_candidate  # noqa: E402
from kernels.track3 import CONFIGS, generate_inputs  # noqa: E402
from kernels.track3.reference import build_reference_model  # noqa: E402
from kernels.track3.runtime import prepare_process  # noqa: E402

SEED = ROOT / "kernels" / "track3" / "seed" / "candidate.py"


def kernel_resources(module_name: str, seen: set[int]) -> list[str]:
    """Registers, spills and shared bytes of the seed's Triton kernels compiled since `seen`."""
    module = sys.modules.get(module_name)
    found = []
    for name in ("kv_kernel", "layer_kernel"):
        fn = getattr(module, name, None)
        for cache in getattr(fn, "device_caches", {}).values():
            compiled = cache[0] if isinstance(cache, tuple) else cache
            for kernel in compiled.values():
                if id(kernel) in seen:
                    continue
                seen.add(id(kernel))
                meta = kernel.metadata
                # A kernel refused at its first launch (too much shared memory) is compiled but
                # never loaded: Triton sets its register counts only when it loads one.
                regs = getattr(kernel, "n_regs", None)
                loaded = "never loaded" if regs is None else f"{regs} regs"
                spills = getattr(kernel, "n_spills", None)
                found.append(
                    f"{name}: {loaded}, {spills if spills is not None else '?'} spills, "
                    f"{meta.shared} B shared, {meta.num_warps} warps"
                )
    return found


def compare_config(arms: dict[str, type], tunables: dict[str, str], config_id: str) -> list[Any]:
    config = CONFIGS[config_id]
    reference = build_reference_model(config, device="cuda", seed=1234)
    models: dict[str, Any] = {"eager": reference}
    for name, entry in arms.items():
        model = entry(config, tunables) if name == "seed" else entry(config)
        model.load_state_dict(reference.state_dict(), strict=True)
        models[name] = model.cuda().eval()
    x, mask = generate_inputs(config, 1234 + 100000, 0.0, 1.0, "cuda")
    calls = {name: (lambda m=model: m(x, mask)) for name, model in models.items()}
    with torch.no_grad():
        outputs = {name: call() for name, call in calls.items() if name != "eager"}
        gap = (outputs["exported"] - outputs["seed"]).abs().max().item()
        medians = organizer_medians(calls, cuda=True)
        hosts = {name: host_us(call, warmup=20) for name, call in calls.items()}
    return [medians, hosts, gap]


def main() -> None:
    usage = "replay_compare.py CANDIDATE.py OUT.md [CONFIGS]"
    candidate, out, configs = profile_arguments(sys.argv, usage, ["2", "12", "7", "3", "4", "1"])
    prepare_process("cuda")
    exported = load_candidate(candidate, "exported_arm")
    seed = load_candidate(SEED, "seed_arm")
    if not isinstance(getattr(exported, "TUNABLES", None), dict):
        raise SystemExit(f"{candidate} has no TUNABLES dict: pass a track3 candidate ({usage})")
    tunables = dict(exported.TUNABLES)
    regimes = getattr(exported, "REGIMES", {})
    arms = {"exported": exported.UserOptimizedTransformer, "seed": seed.UserOptimizedTransformer}
    lines = [
        f"Exported `{shown_path(candidate)}` beside the seed of this checkout with its TUNABLES"
        + (f" (its REGIMES {sorted(regimes)} not applied)" if regimes else "")
        + f". {PROTOCOL}; the three arms side by side in one process per config. Host: "
        "microseconds per un-synchronized call over 200 calls.",
        "",
        "| config | eager ms | exported ms | seed ms | seed / exported | host exported us "
        "| host seed us | max abs diff |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    seen: set[int] = set()
    resources: list[str] = []
    for config_id in configs:
        try:
            medians, hosts, gap = compare_config(arms, tunables, config_id)
            lines.append(
                f"| {config_id} | {medians['eager']:.4f} | {medians['exported']:.4f} "
                f"| {medians['seed']:.4f} | {medians['seed'] / medians['exported']:.3f} "
                f"| {hosts['exported']:.1f} | {hosts['seed']:.1f} | {gap:.2e} |"
            )
        except Exception as exc:  # a config that fails to run is a finding too
            lines.append(f"| {config_id} | error: {type(exc).__name__}: {str(exc)[:160]} |")
        resources += [
            f"- config {config_id}: {r}" for r in kernel_resources("seed_arm.fused_kernels", seen)
        ]
        print(lines[-1], flush=True)
        out.write_text("\n".join([*lines, "", "Seed kernels compiled:", "", *resources]) + "\n")


if __name__ == "__main__":
    main()
