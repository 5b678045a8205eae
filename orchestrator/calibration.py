"""Before a device is trusted: qualify it, and measure its A/A noise floor per config class."""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from harness.models import (
    ArmKind,
    ArmSpec,
    DevicePeaks,
    EvaluationMode,
    EvaluationRequest,
    EvaluationResult,
    Outcome,
    TimingPlan,
)
from harness.trials import correctness_trials, new_salt
from kernels.workload import ConfigSet
from ledger import EventRecord, FingerprintRecord
from orchestrator.evaluation import Judging, commit_arm, judge
from orchestrator.events import EventKind, Payload

CONFIG_CLASSES = (("launch", 3e5), ("mid", 1e6), ("heavy", math.inf))  # by per-call ns


class NotQualifiedError(RuntimeError):
    """The backend could not be qualified: nothing it would measure can be trusted."""


class DeviceQualified(Payload):
    """Measured properties of the device (qualification before first use)."""

    fingerprint_id: str = Field(description="Environment fingerprint of the judge.")
    report: dict[str, Any] = Field(description="Bandwidth, matmul rate, timer, launch overhead.")


class DeviceNoRun(Payload):
    """A backend that could not be qualified: a formal no-run, never a number."""

    device: str = Field(description="The device asked for.")
    message: str = Field(description="Why it produced no measurement.")


class NoiseFloorCalibrated(Payload):
    """A/A calibration: identical code in both arms, per config and per config class."""

    fingerprint_id: str = Field(description="Environment fingerprint of the judge.")
    config_set: str = Field(description="Config set calibrated.")
    per_config: dict[str, dict[str, float]] = Field(description="A/A ratio and CI per config.")
    classes: dict[str, float] = Field(description="Noise floor per config class.")
    aggregate: dict[str, float] = Field(description="A/A aggregate ratio and CI.")
    floor: float = Field(description="Floor the promotion rule uses (aggregate).")
    reused_from: str | None = Field(
        default=None,
        description="Run dir whose calibration this is, when reused for an unchanged device, "
        "seed, configs and timing (None: measured in this run).",
    )
    device_slot: str | None = Field(
        default=None,
        description="The device slot calibrated ('cpu:N', 'cuda:N'; None: the run's one device).",
    )


@dataclass(frozen=True)
class FloorKey:
    """Which device a calibration belongs to, and the smallest floor allowed."""

    fingerprint_id: str
    minimum: float


def excursion(ratio: dict[str, float]) -> float:
    """How far an A/A interval reaches from 1 (both directions): what pure noise can show."""
    return max(ratio["ci_high"] - 1.0, 1.0 - ratio["ci_low"], abs(ratio["median"] - 1.0))


def qualify(
    judging: Judging, work_name: str = "qualify"
) -> tuple[DevicePeaks, tuple[FingerprintRecord, EventRecord]]:
    """Run the qualification judge; returns the peaks and the ledger records to append."""
    request = EvaluationRequest(
        evaluation_id=f"{work_name}:{secrets.token_hex(4)}",
        workload=judging.workload_ref,
        device=judging.device,
        config_ids=[judging.runnable_ids[0]],
        arms=[ArmSpec(name="candidate", kind=ArmKind.REFERENCE)],
        trials=list(judging.workload.official_trials[:1]),
        mode=EvaluationMode.QUALIFY,
        torch_threads=judging.torch_threads,
    )
    what = f"qualifying the device ({judging.slot_name})"
    work = judging.evals_dir / f"{work_name}{judging.work_suffix}"
    result = judge(judging, request, work, what)
    if result.outcome is not Outcome.PASSED or not result.qualification:
        raise NotQualifiedError(
            f"device {judging.slot_name} could not be qualified ({result.outcome}): "
            f"{result.message.strip()[:500]}"
        )
    report = dict(result.qualification)
    fingerprint = FingerprintRecord.from_content(dict(result.fingerprint))
    event = DeviceQualified(fingerprint_id=fingerprint.fingerprint_id, report=report)
    peaks = DevicePeaks(
        matmul_flops_per_s=float(str(report["matmul_flops_per_s"])),
        copy_bytes_per_s=float(str(report["copy_bytes_per_s"])),
    )
    return peaks, (fingerprint, event.to_event(EventKind.DEVICE_QUALIFIED))


def _class_of(per_call_ns: float) -> str:
    return next(name for name, limit in CONFIG_CLASSES if per_call_ns < limit)


def summarize_aa(
    result: EvaluationResult, fingerprint_id: str, config_set: str, minimum: float
) -> NoiseFloorCalibrated:
    """Per-config and per-class A/A excursions; the floor is the aggregate's (at least
    `minimum`)."""
    per_config: dict[str, dict[str, float]] = {}
    classes: dict[str, float] = {}
    for config in result.configs:
        ratio = next(r for r in config.ratios if r.other == "twin")
        per_config[config.config_id] = {
            "median": ratio.median,
            "ci_low": ratio.ci_low,
            "ci_high": ratio.ci_high,
        }
        base = next(t.median_ns for t in config.timings if t.arm == "twin")
        name = _class_of(base)
        classes[name] = max(classes.get(name, 0.0), excursion(per_config[config.config_id]))
    agg = result.aggregate("twin")
    assert agg is not None
    aggregate = {"median": agg.median, "ci_low": agg.ci_low, "ci_high": agg.ci_high}
    return NoiseFloorCalibrated(
        fingerprint_id=fingerprint_id,
        config_set=config_set,
        per_config=per_config,
        classes=classes,
        aggregate=aggregate,
        floor=max(minimum, excursion(aggregate)),
    )


def calibrate_noise(
    judging: Judging, seed_sha: str, config_set: ConfigSet, timing: TimingPlan, floor: FloorKey
) -> NoiseFloorCalibrated:
    """Time the seed against a byte-identical copy of itself on every config; the result is
    keyed to the qualified device's fingerprint."""
    work = judging.evals_dir / f"calibration{judging.work_suffix}"
    arms = [commit_arm(judging, name, seed_sha, work) for name in ("candidate", "twin")]
    timed = [c for c in config_set.config_ids if c in judging.runnable_ids]
    request = EvaluationRequest(
        evaluation_id=f"{seed_sha}:aa",
        workload=judging.workload_ref,
        device=judging.device,
        config_ids=timed,
        arms=arms,
        trials=correctness_trials(judging.workload.official_trials[:1], new_salt()),
        timing=timing,
        seed=secrets.randbelow(2**31),
        torch_threads=judging.torch_threads,
    )
    what = f"calibrating the noise floor (the seed against itself, {len(timed)} configs)"
    result = judge(judging, request, work, what)
    if result.outcome is not Outcome.PASSED:
        raise NotQualifiedError(
            f"the A/A calibration failed ({result.outcome}): {result.message.strip()[:500]}"
        )
    return summarize_aa(result, floor.fingerprint_id, config_set.name, floor.minimum)
