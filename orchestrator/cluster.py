"""A run on a Ray cluster: which device kind it has, and one judging per remote device."""

from __future__ import annotations

from dataclasses import replace

from harness.models import DeviceSlot
from orchestrator.evaluation import Judging
from orchestrator.settings import DeviceChoice, Settings
from workers.ray_cluster import JudgeSettings, RayCluster, RayClusterError


class ClusterError(RuntimeError):
    """The cluster cannot run this search (unreachable, no device of the kind asked for)."""


def join_cluster(settings: Settings) -> RayCluster | None:
    """The cluster --ray names (None without it)."""
    if settings.ray is None:
        return None
    if settings.devices is not None:
        raise ClusterError(
            f"--devices {settings.devices} names devices of this host; with --ray {settings.ray} "
            "Ray places one worker per device of the cluster: drop --devices"
        )
    try:
        return RayCluster(settings.ray)
    except RayClusterError as exc:
        raise ClusterError(str(exc)) from exc


def cluster_kind(cluster: RayCluster, choice: DeviceChoice) -> str:
    """cuda when the cluster has GPUs (and the CPU was not asked for), else cpu."""
    gpus = cluster.device_count("cuda")
    if choice is DeviceChoice.CUDA and gpus == 0:
        raise ClusterError("--device cuda was asked for but the Ray cluster has no GPU")
    return "cuda" if gpus and choice is not DeviceChoice.CPU else "cpu"


def remote_judgings(cluster: RayCluster, judging: Judging, settings: Settings) -> list[Judging]:
    """One judging per device of the cluster, each judging on its actor."""
    kind = judging.device
    count = cluster.device_count(kind)
    if count == 0:
        raise ClusterError(f"the Ray cluster has no {kind} device to evaluate on")
    judge_settings = JudgeSettings(
        timeout_s=settings.eval_timeout_s,
        lock_timeout_s=judging.runner.lock_timeout_s,
        lock_dir=str(settings.lock_dir),
    )
    try:
        devices = cluster.start_devices(kind, judge_settings, count)
    except RayClusterError as exc:
        raise ClusterError(str(exc)) from exc
    slot_kind = "cuda" if kind == "cuda" else "cpu"
    return [
        replace(
            judging,
            runner=judging.runner.model_copy(
                update={"slot": DeviceSlot(name=device.name, kind=slot_kind)}
            ),
            remote=device.judge,
        )
        for device in devices
    ]
