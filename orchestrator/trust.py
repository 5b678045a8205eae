"""Before a run trusts its devices: qualify each one and calibrate its A/A noise floor."""

from __future__ import annotations

from dataclasses import replace

from harness.models import DeviceSlot
from kernels.workload import ConfigSet
from ledger import Ledger
from orchestrator.calibration import (
    DeviceNoRun,
    FloorKey,
    NoiseFloorCalibrated,
    NotQualifiedError,
    calibrate_noise,
    qualify,
)
from orchestrator.device_cache import CachedFloor, floor_key, load_floor, store_floor
from orchestrator.evaluation import Judging
from orchestrator.events import EventKind
from orchestrator.settings import Settings, default_timing
from orchestrator.stages import DeviceWorker, Reporter
from orchestrator.state import derive_state


class DeviceUntrustedError(RuntimeError):
    """A device could not be qualified; a no-run was recorded for it."""


def trust_devices(
    ledger: Ledger,
    judgings: list[Judging],
    settings: Settings,
    config_set: ConfigSet,
    reporter: Reporter,
) -> list[DeviceWorker]:
    """One worker per device, each qualified and with its own noise floor, measured once per
    run (or reused from an earlier run)."""
    return [trust_device(ledger, j, settings, config_set, reporter) for j in judgings]


def slot_judgings(judging: Judging, slots: list[DeviceSlot]) -> list[Judging]:
    """The run's judging narrowed to each device slot (itself alone without slots)."""
    if not slots:
        return [judging]
    return [replace(judging, runner=judging.runner.model_copy(update={"slot": s})) for s in slots]


def trust_device(
    ledger: Ledger, judging: Judging, settings: Settings, config_set: ConfigSet, reporter: Reporter
) -> DeviceWorker:
    """Qualify the device (a no-run event if it cannot be) and calibrate the A/A noise floor
    of this config set on it once; the worker carries the measured peaks and the floor."""
    state = derive_state(ledger)
    slot = judging.runner.slot.name if judging.runner.slot is not None else None
    try:
        peaks, records = qualify(judging)
    except NotQualifiedError as exc:
        no_run = DeviceNoRun(device=judging.slot_name, message=str(exc))
        ledger.append(no_run.to_event(EventKind.DEVICE_NO_RUN))
        raise DeviceUntrustedError(f"{exc}; a no-run was recorded in the ledger") from exc
    fingerprint_id = records[0].fingerprint_id
    known = state.qualification
    if known is None or known.get("fingerprint_id") != fingerprint_id:
        ledger.append_many(records)
    judging = replace(judging, device_peaks=peaks)
    floor = state.noise_floor(config_set.name, fingerprint_id, slot)
    if floor is None:
        assert state.seed_sha is not None
        calibrated = noise_floor(judging, settings, config_set, fingerprint_id, state.seed_sha)
        ledger.append(calibrated.to_event(EventKind.NOISE_FLOOR))
        classes = ", ".join(f"{k} {v:.2%}" for k, v in calibrated.classes.items())
        origin = f", reused from {calibrated.reused_from}" if calibrated.reused_from else ""
        where = f" on {slot}" if slot else ""
        reporter.line(
            f"noise floor{where} {calibrated.floor:.2%} (A/A by class: {classes}{origin})"
        )
        floor = calibrated.floor
    return DeviceWorker(judging=judging, noise_floor=floor)


def noise_floor(
    judging: Judging, settings: Settings, config_set: ConfigSet, fingerprint_id: str, seed: str
) -> NoiseFloorCalibrated:
    """The A/A floor of this device, seed and config set: an earlier run's when nothing it
    depends on changed, else measured now (and kept for the next run)."""
    timing = settings.sweep_timing or default_timing(judging.device, "sweep")
    assert judging.repo is not None
    seed_tree = judging.repo.commit(seed).tree.hexsha
    slot = judging.runner.slot.name if judging.runner.slot is not None else None
    key = floor_key(fingerprint_id, judging.workload_ref, config_set, seed_tree, timing)
    key = key.model_copy(update={"minimum_floor": settings.noise_floor, "device_slot": slot})
    cache_dir = settings.lock_dir / "noise-floors"
    cached = load_floor(cache_dir, key) if settings.reuse_noise_floor else None
    if cached is not None:
        return cached.calibration.model_copy(update={"reused_from": cached.run_dir})
    where = f" on {slot}" if slot else ""
    judging_line = (
        f"calibrating the noise floor{where}: the seed against itself on {config_set.name}"
    )
    if judging.notice is not None:
        judging.notice(judging_line)
    floor_key_ = FloorKey(fingerprint_id=fingerprint_id, minimum=settings.noise_floor)
    calibrated = calibrate_noise(judging, seed, config_set, timing, floor_key_)
    calibrated = calibrated.model_copy(update={"device_slot": slot})
    if settings.reuse_noise_floor:
        run_dir = str(settings.run_dir.resolve())
        store_floor(cache_dir, CachedFloor(key=key, calibration=calibrated, run_dir=run_dir))
    return calibrated
