"""Device qualification: measure before trusting (bandwidth, matmul rate, timer, launches)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SUPPORTED_BACKENDS = ("cpu", "cuda")


def _best_seconds(
    fn: Callable[[], Any], sync: Callable[[], None], clock: Callable[[], int], reps: int
) -> float:
    fn()
    sync()
    best = float("inf")
    for _ in range(reps):
        start = clock()
        fn()
        sync()
        best = min(best, (clock() - start) / 1e9)
    return best


def _measure(device: str, clock: Callable[[], int]) -> dict[str, float]:
    import torch

    cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    words = (256 if cuda else 32) * 1024 * 1024
    src = torch.randn(words, device=device)
    dst = torch.empty_like(src)
    copy_s = _best_seconds(lambda: dst.copy_(src), sync, clock, 5)
    n = 8192 if cuda else 1024
    dtype = torch.float16 if cuda else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    mm_s = _best_seconds(lambda: a @ b, sync, clock, 5)
    tiny = torch.zeros(1, device=device)
    launches = 1000
    launch_s = _best_seconds(lambda: [tiny.add_(1) for _ in range(launches)], sync, clock, 3)
    return {
        "copy_bytes_per_s": 2 * words * 4 / copy_s,
        "matmul_flops_per_s": 2 * n**3 / mm_s,
        "matmul_dtype_bits": float(torch.finfo(dtype).bits),
        "launch_overhead_s": launch_s / launches,
    }


def qualify_device(device: str, clock: Callable[[], int]) -> dict[str, Any] | None:
    """Measured properties of the device, or None for a backend that cannot be qualified."""
    import torch

    from harness.timing import CpuTimer, CudaFunctions, CudaTimer

    kind = device.split(":")[0]
    if kind not in SUPPORTED_BACKENDS or (kind == "cuda" and not torch.cuda.is_available()):
        return None
    if kind == "cuda":
        torch.cuda.set_device(torch.device(device).index or 0)
        fns = CudaFunctions(
            torch.cuda.Event,
            torch.cuda.Event.record,
            torch.cuda.Event.elapsed_time,
            torch.cuda.synchronize,
        )
        resolution = CudaTimer(fns, clock).resolution_ns()
    else:
        resolution = CpuTimer(clock).resolution_ns()
    report: dict[str, Any] = {"backend": kind, "timer_resolution_ns": resolution}
    report.update(_measure(device, clock))
    if kind == "cuda":
        props = torch.cuda.get_device_properties(torch.device(device).index or 0)
        report.update(
            name=props.name,
            multiprocessors=props.multi_processor_count,
            l2_bytes=int(getattr(props, "L2_cache_size", 0)),
            memory_bytes=props.total_memory,
        )
    return report
