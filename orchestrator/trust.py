"""Before a run trusts its devices: qualify each one and calibrate its A/A noise floor."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import git

from harness.models import DeviceSlot
from kernels.workload import ConfigSet
from ledger import Ledger, Record
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
from orchestrator.state import SearchState, derive_state


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
    run (or reused from an earlier run). Devices are measured at once, each on itself; what
    they measured is recorded here, in device order."""
    state = derive_state(ledger)
    if len(judgings) == 1:
        return [
            record_trust(ledger, measure_trust(judgings[0], state, settings, config_set), reporter)
        ]
    with ThreadPoolExecutor(max_workers=len(judgings), thread_name_prefix="ratchet-trust") as pool:
        # Each thread its own repository handle: GitPython's are not shared across threads.
        own = [replace(j, repo=git.Repo(j.repo.git_dir)) if j.repo else j for j in judgings]
        futures = [pool.submit(measure_trust, j, state, settings, config_set) for j in own]
        measured = [future.result() for future in futures]
    seen: set[tuple[str, str]] = set()  # CPU slots share one fingerprint: record it once
    for index, one in enumerate(measured):
        fresh = [r for r in one.records if _record_key(r) not in seen]
        seen.update(_record_key(r) for r in one.records)
        measured[index] = replace(one, records=fresh)
    return [record_trust(ledger, m, reporter) for m in measured]


def _record_key(record: Record) -> tuple[str, str]:
    payload = getattr(record, "payload", {})
    fingerprint = getattr(record, "fingerprint_id", None) or payload.get("fingerprint_id", "")
    return type(record).__name__ + getattr(record, "kind", ""), str(fingerprint)


def slot_judgings(judging: Judging, slots: list[DeviceSlot]) -> list[Judging]:
    """The run's judging narrowed to each device slot (itself alone without slots)."""
    if not slots:
        return [judging]
    return [replace(judging, runner=judging.runner.model_copy(update={"slot": s})) for s in slots]


@dataclass(frozen=True)
class TrustMeasured:
    """What qualifying and calibrating one device found, not yet in the ledger."""

    judging: Judging
    records: list[Record]
    floor: float | None
    calibrated: NoiseFloorCalibrated | None
    failure: str | None = None


def measure_trust(
    judging: Judging, state: SearchState, settings: Settings, config_set: ConfigSet
) -> TrustMeasured:
    """Qualify the device and calibrate its A/A noise floor unless the run already has it
    (safe on a thread of its own: nothing is written to the ledger here)."""
    slot = judging.runner.slot.name if judging.runner.slot is not None else None
    try:
        peaks, qualified = qualify(judging)
    except NotQualifiedError as exc:
        return TrustMeasured(judging, [], None, None, failure=str(exc))
    fingerprint_id = qualified[0].fingerprint_id
    known = state.qualification
    records: list[Record] = []
    if known is None or known.get("fingerprint_id") != fingerprint_id:
        records.extend(qualified)
    judging = replace(judging, device_peaks=peaks)
    floor = state.noise_floor(config_set.name, fingerprint_id, slot)
    if floor is not None:
        return TrustMeasured(judging, records, floor, None)
    assert state.seed_sha is not None
    calibrated = noise_floor(judging, settings, config_set, fingerprint_id, state.seed_sha)
    return TrustMeasured(judging, records, calibrated.floor, calibrated)


def record_trust(ledger: Ledger, measured: TrustMeasured, reporter: Reporter) -> DeviceWorker:
    """The qualification and the calibration into the ledger (a no-run if the device could
    not be qualified); the device's worker."""
    judging = measured.judging
    if measured.failure is not None:
        no_run = DeviceNoRun(device=judging.slot_name, message=measured.failure)
        ledger.append(no_run.to_event(EventKind.DEVICE_NO_RUN))
        raise DeviceUntrustedError(f"{measured.failure}; a no-run was recorded in the ledger")
    records = list(measured.records)
    calibrated = measured.calibrated
    if calibrated is not None:
        records.append(calibrated.to_event(EventKind.NOISE_FLOOR))
    if records:
        ledger.append_many(records)
    if calibrated is not None:
        classes = ", ".join(f"{k} {v:.2%}" for k, v in calibrated.classes.items())
        origin = f", reused from {calibrated.reused_from}" if calibrated.reused_from else ""
        where = f" on {calibrated.device_slot}" if calibrated.device_slot else ""
        reporter.line(
            f"noise floor{where} {calibrated.floor:.2%} (A/A by class: {classes}{origin})"
        )
    assert measured.floor is not None
    return DeviceWorker(judging=judging, noise_floor=measured.floor)


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
