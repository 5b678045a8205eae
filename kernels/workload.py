"""The workload plug-in interface: what a problem must declare for Ratchet to search it."""

from __future__ import annotations

import enum
import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kernels.candidate_tree import bundle_sources, read_tree


class Comparator(enum.StrEnum):
    """How an element's error is compared with the tolerance."""

    STRICT = "strict"
    INCLUSIVE = "inclusive"


class Tolerance(BaseModel):
    """Per-element correctness tolerance (OR of absolute and relative bounds)."""

    model_config = ConfigDict(frozen=True)

    atol: float = Field(gt=0, description="Absolute bound on |out - ref|.")
    rtol: float = Field(gt=0, description="Relative bound on |out - ref| / |ref|.")
    comparator: Comparator = Field(
        default=Comparator.STRICT, description="strict uses '<', inclusive uses '<='."
    )


class TrialSpec(BaseModel):
    """One correctness trial: how fresh inputs are drawn."""

    model_config = ConfigDict(frozen=True)

    seed: int = Field(description="Seed of the input generator for this trial.")
    padding_ratio: float = Field(
        default=0.0, ge=0.0, lt=1.0, description="Fraction of positions that may be padding."
    )
    input_scale: float = Field(default=1.0, gt=0.0, description="Multiplier on the inputs.")


class ConfigSet(BaseModel):
    """A named set of configurations with its screening subset."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="Name of the set, e.g. 'official' or 'cpu'.")
    config_ids: tuple[str, ...] = Field(description="Configurations of the full sweep.")
    screening_ids: tuple[str, ...] = Field(description="Subset used by the quick screen.")
    runnable_ids: tuple[str, ...] | None = Field(
        default=None,
        description="Configs the reference can run (None: all); the rest are feasibility-only.",
    )
    feasibility_ids: tuple[str, ...] = Field(
        default=(),
        description="Configs outside the sweep a frontier must pass (correctness against the "
        "workload's oracle, never timed) before it is exported as the frontier; checked once "
        "per frontier, when a run stops.",
    )

    @model_validator(mode="after")
    def _screen_is_subset(self) -> ConfigSet:
        missing = set(self.screening_ids) - set(self.config_ids)
        if missing:
            raise ValueError(f"screening ids {sorted(missing)} are not in config set {self.name}")
        both = set(self.feasibility_ids) & set(self.config_ids)
        if both:
            raise ValueError(
                f"feasibility ids {sorted(both)} of config set {self.name} are in its sweep too"
            )
        if not self.screening_ids:
            raise ValueError(f"config set {self.name} has an empty screening subset")
        return self


class IdeaSpec(BaseModel):
    """An optimization idea from a workload's starter library."""

    model_config = ConfigDict(frozen=True)

    slug: str = Field(description="Stable identifier of the idea, e.g. 'packed-qkv'.")
    text: str = Field(description="The idea in words, as an expander reads it.")
    quality: float = Field(gt=0, lt=1, description="Rubric score q in (0, 1).")
    uncertainty: float = Field(ge=0, le=1, description="Rubric uncertainty H in [0, 1].")
    targets: dict[str, str | None] = Field(
        default_factory=dict,
        description="Tunable settings the idea asks for; None means 'change this tunable'.",
    )
    devices: tuple[str, ...] = Field(
        default=("cpu", "cuda"), description="Device kinds on which the idea can matter."
    )
    headroom: bool = Field(
        default=False,
        description="The idea gives up speed for numerical headroom (a rubric tag, written "
        "with the library before any measurement): after a candidate misses the tolerance "
        "narrowly, the repair step draws from these ideas only.",
    )


# Standard-library modules that compute and nothing else: no process, file, thread, network,
# frame or code-object access (those stay refused, and their attributes too: static checks).
HARMLESS_STDLIB: tuple[str, ...] = (
    "__future__",
    "abc",
    "bisect",
    "collections",
    "contextlib",
    "copy",
    "dataclasses",
    "enum",
    "fractions",
    "functools",
    "heapq",
    "itertools",
    "math",
    "numbers",
    "operator",
    "typing",
    "warnings",
)


class StaticPolicy(BaseModel):
    """What the static checks enforce for candidates of a workload."""

    model_config = ConfigDict(frozen=True)

    entry_point: str = Field(description="Class the candidate module must define.")
    entry_aliases: tuple[str, ...] = Field(
        default=(), description="Other accepted names of the entry class (e.g. organizer names)."
    )
    allowed_imports: tuple[str, ...] = Field(
        description="Top-level modules a candidate may import."
    )
    shape_constants: tuple[int, ...] = Field(
        description="Official shape values that must not appear in equality dispatch predicates."
    )


class WorkloadRuntime(Protocol):
    """The torch side of a workload, imported only where tensors are made (the judge)."""

    def prepare_process(self, device: str) -> None:
        """Apply the reference's process-wide precision policy (called once per judge)."""

    def build_reference(self, config: Any, device: str) -> Any:
        """Return the reference model (or callable) for a config on a device."""

    def build_candidate(self, entry: type, reference: Any, config: Any, device: str) -> Any:
        """Instantiate a candidate's entry class with the reference's weights."""

    def generate_inputs(self, config: Any, trial: TrialSpec, device: str) -> tuple[Any, ...]:
        """Fresh inputs for one trial."""

    def call(self, model: Any, inputs: tuple[Any, ...]) -> Any:
        """Run a model on inputs the way the user would."""

    def build_oracle(self, reference: Any, config: Any, device: str) -> Any:
        """A memory-bounded stand-in for the reference on configs it cannot run."""

    def cost(self, config: Any) -> tuple[float, float]:
        """Lower bounds of (FLOPs, bytes moved) of one call: the roofline's numerators."""

    def settings_read(self, model: Any) -> list[str] | None:
        """The tunables a built candidate says its code read (None: it cannot say). Optional:
        a runtime without it reports nothing, and the search then screens a change on every
        configuration its settings reach."""


# A candidate listing more names than this (or longer ones) is not describing its tunables.
MAX_SETTINGS_READ = 1000
MAX_SETTING_NAME = 100


def declared_reads(model: Any) -> list[str] | None:
    """What a candidate reports of its own tunables' reads (``model.tunables.names_read()``,
    the seeds' recorder), sorted; None when it reports nothing well-formed. The candidate's
    word: it only narrows which configurations a screen measures (advisory), never a verdict."""
    try:
        names_read = getattr(getattr(model, "tunables", None), "names_read", None)
        names = names_read() if callable(names_read) else None
    except BaseException:  # candidate code: SystemExit too, and the report is only advisory
        return None
    if not isinstance(names, list) or len(names) > MAX_SETTINGS_READ:
        return None
    if not all(isinstance(n, str) and len(n) <= MAX_SETTING_NAME for n in names):
        return None
    return sorted(set(names))


class Workload(BaseModel):
    """A problem Ratchet can search: reference, inputs, configs, tolerance and baseline."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str = Field(description="Registry name, e.g. 'track3'.")
    description: str = Field(description="One line for humans.")
    baseline: str = Field(description="Exactly what the speed baseline is (mode, precision).")
    configs: Mapping[str, BaseModel] = Field(description="Every configuration by id.")
    config_sets: Mapping[str, ConfigSet] = Field(description="Named config sets.")
    default_config_set: Mapping[str, str] = Field(
        description="Config set to use per device kind ('cpu', 'cuda')."
    )
    tolerance: Tolerance = Field(description="The correctness gate.")
    official_trials: tuple[TrialSpec, ...] = Field(description="Trials always included.")
    timing_seed_offset: int = Field(description="Timing inputs use seed + this offset.")
    candidate_file: str = Field(description="File name of the candidate module in a tree.")
    seed_candidate: Path = Field(
        description="The seed candidate: one module file, or a directory holding the entry "
        "module (candidate_file) and its sibling modules (a flat package)."
    )
    ideas_file: Path = Field(description="JSON file with the starter idea library.")
    static_policy: StaticPolicy = Field(description="Static-check policy.")
    runtime_module: str = Field(description="Dotted module exposing the WorkloadRuntime API.")

    def config_set(self, name: str) -> ConfigSet:
        """The named config set, or a ValueError listing the known ones."""
        if name not in self.config_sets:
            known = ", ".join(sorted(self.config_sets))
            raise ValueError(f"workload {self.name} has no config set {name!r}; known: {known}")
        return self.config_sets[name]

    def resolve_config_ids(self, spec: str) -> tuple[str, ...]:
        """Turn 'official', 'cpu', 'screen:<set>' or 'ID,ID' into config ids."""
        if spec in self.config_sets:
            return self.config_sets[spec].config_ids
        if spec.startswith("screen:"):
            return self.config_set(spec.removeprefix("screen:")).screening_ids
        ids = tuple(part.strip() for part in spec.split(",") if part.strip())
        unknown = [i for i in ids if i not in self.configs]
        if not ids or unknown:
            raise ValueError(
                f"unknown configs {unknown or spec!r} for workload {self.name}; use a set name "
                f"({', '.join(sorted(self.config_sets))}) or ids from {', '.join(self.configs)}"
            )
        return ids

    def dispatch_features(self, config_id: str) -> dict[str, float]:
        """The sizes a dispatch predicate may read for a config: its numeric fields, by the
        names the seed's ``Sizes`` gives them (booleans are flags, not sizes)."""
        config = self.configs[config_id]
        values = config.model_dump()
        return {
            name: float(value)
            for name, value in values.items()
            if isinstance(value, int | float) and not isinstance(value, bool)
        }

    def oracle_only_ids(self) -> set[str]:
        """Configs some set marks as beyond the reference (checked by the oracle, not timed)."""
        return {
            cid
            for cs in self.config_sets.values()
            if cs.runnable_ids is not None
            for cid in cs.config_ids
            if cid not in cs.runnable_ids
        }

    def seed_entry(self) -> Path:
        """Path of the seed's entry module (the file itself, or candidate_file in its dir)."""
        if self.seed_candidate.is_dir():
            return self.seed_candidate / self.candidate_file
        return self.seed_candidate

    def seed_sources(self) -> dict[str, str]:
        """The seed's files by path inside a candidate tree (the entry as candidate_file)."""
        return read_tree(self.seed_candidate, self.candidate_file)

    def seed_bundle(self) -> str:
        """The seed as one standalone module (its package bundled)."""
        return bundle_sources(self.seed_sources(), self.candidate_file)

    def load_ideas(self) -> list[IdeaSpec]:
        """The starter idea library shipped with the workload."""
        import json

        raw = json.loads(self.ideas_file.read_text())
        return [IdeaSpec.model_validate(item) for item in raw]

    def load_runtime(self) -> WorkloadRuntime:
        """Import the torch side of the workload."""
        module: Any = importlib.import_module(self.runtime_module)
        return cast(WorkloadRuntime, module)


WorkloadFactory = Callable[[], Workload]
