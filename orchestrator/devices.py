"""Which devices a run evaluates on: GPUs of the host, or CPU slots of one core each."""

from __future__ import annotations

import os
from collections.abc import Mapping

from harness.models import DeviceSlot


class DeviceSpecError(ValueError):
    """The devices asked for do not exist here."""


def visible_gpus(environ: Mapping[str, str], count: int) -> list[str]:
    """The GPUs this process may use, as the host numbers them (CUDA_VISIBLE_DEVICES order)."""
    listed = [v.strip() for v in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return listed[:count] if listed else [str(index) for index in range(count)]


def _chosen(spec: str, available: int, what: str) -> list[int]:
    if spec == "all":
        return list(range(available))
    indices = [int(part) for part in spec.split(",")]
    missing = [index for index in indices if index >= available]
    if missing:
        raise DeviceSpecError(
            f"--devices {spec}: {what} {missing[0]} does not exist here ({available} available, "
            f"indices 0-{available - 1}); use --devices all or indices below {available}"
        )
    return indices


def resolve_slots(
    kind: str,
    spec: str | None,
    gpu_count: int = 0,
    environ: Mapping[str, str] | None = None,
    cores: list[int] | None = None,
) -> list[DeviceSlot]:
    """One slot per device asked for (none without a spec: the run's one device, unpinned,
    as --device says). A CUDA slot narrows the judge to its GPU; a
    CPU slot pins the judge to one core, so two slots do not share a core."""
    if spec is None:
        return []  # the run's one device, as serial runs always had it: no slot, no pinning
    if kind == "cuda":
        gpus = visible_gpus(os.environ if environ is None else environ, gpu_count)
        return [
            DeviceSlot(name=f"cuda:{index}", kind="cuda", visible_gpu=gpus[index])
            for index in _chosen(spec, len(gpus), "GPU")
        ]
    usable = sorted(os.sched_getaffinity(0)) if cores is None else cores
    return [
        DeviceSlot(name=f"cpu:{index}", kind="cpu", cpus=(usable[index],))
        for index in _chosen(spec, len(usable), "CPU slot")
    ]
