"""The search objective: one score from per-config timings, with uncapped speedups alongside."""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator


class ObjectiveKind(enum.StrEnum):
    """How per-config timings are aggregated into one score."""

    GEOMEAN = "geomean"
    CAPPED_GEOMEAN = "capped_geomean"
    TOTAL_LATENCY = "total_latency"


class ConfigTiming(BaseModel):
    """Baseline and candidate time on one configuration."""

    model_config = ConfigDict(frozen=True)

    config_id: str = Field(description="Id of the configuration.")
    baseline_s: float = Field(gt=0, allow_inf_nan=False, description="Baseline time in seconds.")
    candidate_s: float | None = Field(
        gt=0,
        allow_inf_nan=False,
        description="Candidate time in seconds; None if it failed or was not measured here.",
    )


class ObjectiveSpec(BaseModel):
    """Which aggregate to compute and how configs are weighted."""

    model_config = ConfigDict(frozen=True)

    kind: ObjectiveKind = Field(default=ObjectiveKind.GEOMEAN, description="The aggregate.")
    cap: float = Field(
        default=3.0, gt=1, allow_inf_nan=False, description="Speedup cap for CAPPED_GEOMEAN."
    )
    weights: dict[str, float] = Field(
        default_factory=dict,
        description="Config weights from human PRIORITY messages; missing configs weigh 1.0.",
    )

    @field_validator("weights")
    @classmethod
    def _weights_positive(cls, weights: dict[str, float]) -> dict[str, float]:
        bad = {config_id: w for config_id, w in weights.items() if not (math.isfinite(w) and w > 0)}
        if bad:
            raise ValueError(
                f"config weights must be finite and > 0, got {bad}; "
                "drop a config's weight to give it the default 1.0"
            )
        return weights


class ObjectiveValue(BaseModel):
    """A candidate's score, always shown next to its uncapped per-config speedups."""

    model_config = ConfigDict(frozen=True)

    kind: ObjectiveKind = Field(description="The aggregate that produced value.")
    value: float = Field(description="The score (>1 means faster than the baseline).")
    per_config: dict[str, float] = Field(
        description="Uncapped speedup baseline_s / candidate_s per config."
    )
    capped_configs: list[str] = Field(
        description="Configs whose speedup exceeded the cap (CAPPED_GEOMEAN only; else empty)."
    )


def geometric_mean(values: Sequence[float], weights: Sequence[float] | None = None) -> float:
    """Weighted geometric mean, computed in log space to avoid overflow of long products."""
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"geometric mean needs a non-empty flat list of values, got {values!r}")
    if not (np.all(np.isfinite(array)) and np.all(array > 0)):
        raise ValueError(
            f"geometric mean needs finite positive values, got {array.tolist()}; "
            "drop or fix the non-positive entries (a failed config has no speedup)"
        )
    if weights is None:
        return float(np.exp(np.mean(np.log(array))))
    weight_array = np.asarray(weights, dtype=float)
    if weight_array.shape != array.shape:
        raise ValueError(
            f"geometric mean got {array.size} values but {weight_array.size} weights; "
            "pass one weight per value"
        )
    if not (np.all(np.isfinite(weight_array)) and np.all(weight_array > 0)):
        raise ValueError(f"geometric mean needs finite weights > 0, got {weight_array.tolist()}")
    return float(np.exp(np.sum(weight_array * np.log(array)) / np.sum(weight_array)))


def compute_objective(
    timings: Sequence[ConfigTiming], spec: ObjectiveSpec
) -> ObjectiveValue | None:
    """The spec's aggregate of the timings; None if empty or any config has no candidate time."""
    ids = [timing.config_id for timing in timings]
    if len(set(ids)) != len(ids):
        raise ValueError(f"config ids {ids} contain duplicates; pass one timing per config")
    # A candidate that fails any config has no score: averaging over the rest would reward it.
    if not timings or any(timing.candidate_s is None for timing in timings):
        return None
    candidate = np.array([timing.candidate_s for timing in timings], dtype=float)
    baseline = np.array([timing.baseline_s for timing in timings], dtype=float)
    weights = np.array([spec.weights.get(config_id, 1.0) for config_id in ids], dtype=float)
    speedups = baseline / candidate
    per_config = {config_id: float(s) for config_id, s in zip(ids, speedups, strict=True)}
    capped: list[str] = []
    if spec.kind is ObjectiveKind.GEOMEAN:
        value = geometric_mean(speedups.tolist(), weights.tolist())
    elif spec.kind is ObjectiveKind.CAPPED_GEOMEAN:
        capped = [config_id for config_id, s in per_config.items() if s > spec.cap]
        value = geometric_mean(np.minimum(speedups, spec.cap).tolist(), weights.tolist())
    else:
        value = float(np.sum(baseline * weights) / np.sum(candidate * weights))
    return ObjectiveValue(kind=spec.kind, value=value, per_config=per_config, capped_configs=capped)
