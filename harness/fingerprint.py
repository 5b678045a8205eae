"""Environment fingerprint: what a measurement depended on that nobody varied."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from typing import Any


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def collect_fingerprint(device: str) -> dict[str, Any]:
    """Versions, device and host facts recorded next to every measurement."""
    import torch

    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "device": device,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    if device.startswith("cuda") and torch.cuda.is_available():
        index = torch.device(device).index or 0
        props = torch.cuda.get_device_properties(index)
        info.update(
            gpu_name=props.name,
            gpu_capability=f"{props.major}.{props.minor}",
            gpu_memory_bytes=props.total_memory,
            gpu_multiprocessors=props.multi_processor_count,
            cuda_runtime=torch.version.cuda,
            cudnn=torch.backends.cudnn.version(),
            # Which GPU, and which driver: a calibration of one GPU is not another's.
            gpu_uuid=str(getattr(props, "uuid", "")),
            driver=_driver_version(),
        )
    return info


def _driver_version() -> str | None:
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout else None
