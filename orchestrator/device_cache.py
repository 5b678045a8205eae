"""A/A noise floors kept per device across runs: reused while the device's fingerprint (GPU
UUID, driver, library versions), the seed, the configs and the timing plan are unchanged."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from harness.models import TimingPlan
from kernels.workload import ConfigSet
from orchestrator.calibration import NoiseFloorCalibrated


class FloorCacheKey(BaseModel):
    """Everything an A/A noise floor depends on; a change in any part means a new calibration."""

    fingerprint_id: str = Field(description="Fingerprint of the qualified device and software.")
    workload: str = Field(description="Workload name or plug-in spec.")
    config_set: str = Field(description="Config set calibrated.")
    config_ids: list[str] = Field(description="Its configs, in order.")
    seed_tree: str = Field(description="Git tree of the seed both A/A arms ran.")
    timing: dict[str, object] = Field(description="The sweep timing plan used.")
    minimum_floor: float = Field(description="The smallest floor the settings allow.")
    device_slot: str | None = Field(
        default=None, description="The device slot calibrated (None: a run's one device)."
    )

    def digest(self) -> str:
        """Stable file name of this key."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:32]


class CachedFloor(BaseModel):
    """One cache file: its key (checked on read) and the calibration it stands for."""

    key: FloorCacheKey = Field(description="What the calibration was measured under.")
    calibration: NoiseFloorCalibrated = Field(description="The ledger event's payload.")
    run_dir: str = Field(description="The run that measured it.")


def floor_key(
    fingerprint_id: str, workload: str, config_set: ConfigSet, seed_tree: str, timing: TimingPlan
) -> FloorCacheKey:
    """The key of a calibration (the minimum floor is filled in by the caller's settings)."""
    return FloorCacheKey(
        fingerprint_id=fingerprint_id,
        workload=workload,
        config_set=config_set.name,
        config_ids=list(config_set.config_ids),
        seed_tree=seed_tree,
        timing=timing.model_dump(mode="json"),
        minimum_floor=0.0,
    )


def load_floor(cache_dir: Path, key: FloorCacheKey) -> CachedFloor | None:
    """The cached calibration for exactly this key; None when absent, unreadable or stale."""
    path = cache_dir / f"{key.digest()}.json"
    try:
        cached = CachedFloor.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError, ValueError):
        return None
    return cached if cached.key == key else None


def store_floor(cache_dir: Path, cached: CachedFloor) -> Path | None:
    """Write a calibration atomically (a full or read-only disk only costs a recalibration)."""
    with contextlib.suppress(OSError):
        cache_dir.mkdir(parents=True, exist_ok=True)
        path = cache_dir / f"{cached.key.digest()}.json"
        fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".floor-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(cached.model_dump_json(indent=2))
        os.replace(tmp, path)
        return path
    return None
