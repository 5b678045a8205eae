"""Where a candidate's time per call goes on the GPU: host launch work, kernels, gaps between.

For each config: the organizer-protocol median (back-to-back event-timed calls), the host time
of one call (perf_counter over un-synchronized calls, synchronized once at the end), and from
torch.profiler the kernels of one call (count, summed duration, the widest ones) and the span
from the first kernel's start to the last one's end. Kernel sum ~ organizer median: the
kernels are the cost; host ~ organizer median: the launches are; span well above the kernel
sum: the gaps between kernels are. A diagnosis, not a result: nothing here feeds the search.
Usage: python benchmarks/gpu/frontier_profile.py CANDIDATE.py OUT.md [CONFIGS [NAME=VALUE,...]]
(the last: tunables passed to the candidate's constructor, e.g. the seed's)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from harness.organizer_timing import organizer_medians  # noqa: E402
from kernels.candidate_tree import load_candidate  # noqa: E402
from kernels.track3 import CONFIGS, generate_inputs  # noqa: E402
from kernels.track3.reference import build_reference_model  # noqa: E402
from kernels.track3.runtime import prepare_process  # noqa: E402

CALLS = 200
PROFILED = 10


def shown_path(path: Path) -> str:
    """The path from its repository's root (the nearest directory holding pyproject.toml): a
    report names no machine's directories, wherever the candidate was read from."""
    resolved = path.resolve()
    for parent in resolved.parents:
        if (parent / "pyproject.toml").is_file():
            return str(resolved.relative_to(parent))
    return path.name


def profile_arguments(
    argv: list[str], usage: str, configs: list[str]
) -> tuple[Path, Path, list[str]]:
    """CANDIDATE, OUT and the configs (comma-separated, or these defaults) from argv, or a
    SystemExit naming what is wrong and the usage: no traceback for a mistyped command."""
    if len(argv) < 3:
        raise SystemExit(f"usage: {usage}")
    candidate, out = Path(argv[1]), Path(argv[2])
    if not candidate.is_file():
        raise SystemExit(f"no candidate file {candidate}: pass a candidate's .py ({usage})")
    chosen = argv[3].split(",") if len(argv) > 3 else configs
    unknown = [c for c in chosen if c not in CONFIGS]
    if unknown:
        raise SystemExit(f"unknown configs {unknown}; known: {sorted(CONFIGS)}")
    if not torch.cuda.is_available():
        raise SystemExit("this diagnosis needs a CUDA device (none is visible)")
    return candidate, out, chosen


def host_us(call: Any, calls: int = CALLS, warmup: int = 0) -> float:
    """Host microseconds per un-synchronized call, over `calls` calls after `warmup` untimed
    ones (the queue absorbs the GPU's share until it fills)."""
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(calls):
        call()
    host = (time.perf_counter() - started) / calls
    torch.cuda.synchronize()
    return host * 1e6


def kernel_profile(call: Any) -> tuple[int, float, float, list[tuple[str, float]]]:
    """Kernels per call, their summed and spanned microseconds per call, the widest five."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(PROFILED):
            call()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type.name == "CUDA"]
    if not kernels:
        return 0, 0.0, 0.0, []
    starts = [e.time_range.start for e in kernels]
    ends = [e.time_range.end for e in kernels]
    total = sum(e.time_range.elapsed_us() for e in kernels)
    by_name: dict[str, float] = {}
    for event in kernels:
        by_name[event.name] = by_name.get(event.name, 0.0) + event.time_range.elapsed_us()
    widest = sorted(by_name.items(), key=lambda item: -item[1])[:5]
    span = (max(ends) - min(starts)) / PROFILED
    return (
        len(kernels) // PROFILED,
        total / PROFILED,
        span,
        [(name[:60], us / PROFILED) for name, us in widest],
    )


def profile_config(entry: type, config_id: str, tunables: dict[str, str]) -> list[str]:
    config = CONFIGS[config_id]
    reference = build_reference_model(config, device="cuda", seed=1234)
    model = entry(config, tunables) if tunables else entry(config)
    model.load_state_dict(reference.state_dict(), strict=True)
    model = model.cuda().eval()
    x, mask = generate_inputs(config, 1234 + 100000, 0.0, 1.0, "cuda")
    with torch.no_grad():

        def call() -> Any:
            return model(x, mask)

        organizer = organizer_medians({"candidate": call}, cuda=True)["candidate"] * 1e3
        host = host_us(call)
        count, summed, span, widest = kernel_profile(call)
    top = "; ".join(f"{name} {us:.1f}" for name, us in widest)
    return [
        f"| {config_id} | {organizer:.1f} | {host:.1f} | {count} | {summed:.1f} | {span:.1f} "
        f"| {top} |"
    ]


def main() -> None:
    usage = "frontier_profile.py CANDIDATE.py OUT.md [CONFIGS [NAME=VALUE,...]]"
    pairs = sys.argv[4].split(",") if len(sys.argv) > 4 else []
    if any("=" not in pair for pair in pairs):
        raise SystemExit(f"tunables {sys.argv[4]!r}: expected NAME=VALUE,... ({usage})")
    candidate, out, configs = profile_arguments(sys.argv, usage, ["2", "12", "1", "9", "5", "8"])
    tunables = dict(pair.split("=", 1) for pair in pairs)
    prepare_process("cuda")
    module = load_candidate(candidate, "profiled")
    entry = module.UserOptimizedTransformer
    lines = [
        f"Candidate `{shown_path(candidate)}`; per call, microseconds. {CALLS} host-timed calls, "
        f"{PROFILED} profiled; tunables {tunables or 'as the candidate sets them'}.",
        "",
        "| config | organizer median | host per call | kernels | kernel sum | kernel span "
        "| widest kernels (us per call) |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for config_id in configs:
        started = time.perf_counter()
        try:
            lines += profile_config(entry, config_id, tunables)
        except Exception as exc:  # a config that fails to run is a finding too
            lines.append(f"| {config_id} | error: {type(exc).__name__}: {str(exc)[:160]} |")
        print(lines[-1], f"({time.perf_counter() - started:.1f} s)", flush=True)
        out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
