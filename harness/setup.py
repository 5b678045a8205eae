"""Judge set-up: bind timers and guards before any candidate code is imported."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.checks import TamperGuard
from harness.judge import Judge
from harness.models import EvaluationRequest
from harness.timing import CpuTimer, CudaFunctions, CudaTimer


def _l2_flusher(device: str) -> Callable[[], Any]:
    import torch

    props = torch.cuda.get_device_properties(torch.device(device).index or 0)
    l2 = int(getattr(props, "L2_cache_size", 0)) or 64 * 1024 * 1024
    buffer = torch.empty(2 * l2, dtype=torch.uint8, device=device)
    return lambda: buffer.zero_()


def quiet_progress_monitor() -> None:
    """Stop tqdm (Inductor's autotuner uses it) from starting its monitor thread with the first
    progress bar: that thread outlives the build, and the judge rejects leftover threads."""
    import importlib.util

    if importlib.util.find_spec("tqdm") is None:
        return
    import tqdm

    tqdm.tqdm.monitor_interval = 0


def release_compile_workers() -> None:
    """Shut down Inductor's compile pools (its thread pool and its Triton subprocess pool) once a
    build has compiled: compiling in parallel is then cheap in wall time, and the judge still
    finds no thread left running. Only those pool objects are shut down, never a thread by name,
    so a candidate's own background work is still caught."""
    import sys

    if "torch._inductor.async_compile" not in sys.modules:
        return  # nothing was compiled
    from torch._inductor import async_compile

    # A subprocess pool's quiesce timer outlives its shutdown until its next wake-up (half of
    # quiesce_async_compile_time): wait for it, or the judge finds 'subproc_worker_timer'.
    timers = [getattr(p, "timer", None) for p in list(async_compile._pool_set)]
    threads = [(t.background_thread, t.sleep_time) for t in timers if t is not None]
    async_compile.shutdown_compile_workers()
    for thread, nap in threads:
        if thread is not None:
            thread.join(timeout=nap + 5.0)
    pool = async_compile.AsyncCompile.pool
    if pool.cache_info().currsize:
        pool().shutdown(wait=True)
        pool.cache_clear()


def open_judge(request: EvaluationRequest, clock: Callable[[], int]) -> Judge | None:
    """The judge for a request, or None when its device is not available here."""
    import numpy as np
    import torch

    from harness.fingerprint import collect_fingerprint
    from kernels.registry import resolve_workload

    cuda = request.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        return None
    quiet_progress_monitor()
    guard = TamperGuard()  # timer identities and threads before any candidate exists
    timer: Any = CpuTimer(clock)
    flush = None
    if cuda:
        torch.cuda.set_device(torch.device(request.device).index or 0)
        fns = CudaFunctions(
            event=torch.cuda.Event,
            record=torch.cuda.Event.record,
            elapsed=torch.cuda.Event.elapsed_time,
            synchronize=torch.cuda.synchronize,
        )
        timer = CudaTimer(fns, clock)
        flush = _l2_flusher(request.device)
    workload = resolve_workload(request.workload)
    runtime = workload.load_runtime()
    runtime.prepare_process(request.device)
    if request.torch_threads:
        torch.set_num_threads(request.torch_threads)
    return Judge(
        request=request,
        workload=workload,
        runtime=runtime,
        timer=timer,
        rng=np.random.default_rng(request.seed),
        clock=clock,
        fingerprint=collect_fingerprint(request.device),
        guard=guard,
        flush=flush,
    )
