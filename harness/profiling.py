"""Profile mode: the judged arm's top kernels by device time on one config (torch.profiler)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.models import EvaluationRequest, ProfileRow

WARMUP_CALLS = 3
PROFILED_CALLS = 5
TOP_ROWS = 15


def _self_time(event: Any, cuda: bool) -> float:
    if cuda:
        return float(getattr(event, "self_device_time_total", 0.0) or 0.0)
    return float(event.self_cpu_time_total)


def profile_arm(request: EvaluationRequest, load_entry: Callable[[Any], type]) -> list[ProfileRow]:
    """Warm the judged arm up on the first config, then profile a few calls and rank what ran
    by self time on the device (on a CPU, by CPU self time)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from kernels.registry import resolve_workload

    workload = resolve_workload(request.workload)
    runtime = workload.load_runtime()
    runtime.prepare_process(request.device)
    if request.torch_threads:
        torch.set_num_threads(request.torch_threads)
    config = workload.configs[request.config_ids[0]]
    arm = next(a for a in request.arms if a.name == request.judged_arm)
    reference = runtime.build_reference(config, request.device)
    model = runtime.build_candidate(load_entry(arm), reference, config, request.device)
    inputs = runtime.generate_inputs(config, request.trials[0], request.device)
    cuda = request.device.startswith("cuda")
    for _ in range(WARMUP_CALLS):
        runtime.call(model, inputs)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    if cuda:
        torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        for _ in range(PROFILED_CALLS):
            runtime.call(model, inputs)
        if cuda:
            torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if _self_time(e, cuda) > 0]
    total = sum(_self_time(e, cuda) for e in events) or 1.0
    events.sort(key=lambda e: _self_time(e, cuda), reverse=True)
    return [
        ProfileRow(
            name=str(e.key)[:160],
            calls=int(e.count),
            device_us=round(_self_time(e, cuda), 3),
            share=round(_self_time(e, cuda) / total, 4),
        )
        for e in events[:TOP_ROWS]
    ]
