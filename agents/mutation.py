"""The offline search operator: idea-guided mutation and recombination of declared tunables."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field


class ChangeReason(enum.StrEnum):
    """Why a tunable changed."""

    IDEA = "idea"
    EXPLORE = "explore"
    RECOMBINE = "recombine"
    CONSTRAINT = "constraint"


class TunableChange(BaseModel):
    """One tunable moved from one value to another."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="Tunable name.")
    old: str = Field(description="Value in the parent.")
    new: str = Field(description="Value in the child.")
    reason: ChangeReason = Field(description="Why it changed.")


class OperatorSettings(BaseModel):
    """Probabilities of the operator's optional moves."""

    model_config = ConfigDict(frozen=True)

    p_recombine: float = Field(default=0.25, ge=0, le=1, description="Cross with a donor.")
    p_extra_mutation: float = Field(default=0.1, ge=0, le=1, description="One extra random move.")


def _other_value(
    name: str, current: str, space: Mapping[str, Sequence[str]], rng: np.random.Generator
) -> str | None:
    options = [v for v in space[name] if v != current]
    return str(options[int(rng.integers(len(options)))]) if options else None


def _mutate_random(
    child: dict[str, str],
    space: Mapping[str, Sequence[str]],
    avoid: set[str],
    rng: np.random.Generator,
) -> str | None:
    names = [n for n in space if n not in avoid and len(space[n]) > 1]
    if not names:
        return None
    name = names[int(rng.integers(len(names)))]
    value = _other_value(name, child[name], space, rng)
    if value is None:
        return None
    child[name] = value
    return name


class Variant(BaseModel):
    """A proposed child and why each tunable moved."""

    tunables: dict[str, str] = Field(description="The child's full tunable settings.")
    reasons: dict[str, ChangeReason] = Field(description="Reason of the latest move per name.")


def propose_variant(
    parent: Mapping[str, str],
    space: Mapping[str, Sequence[str]],
    targets: Mapping[str, str | None],
    donors: Sequence[Mapping[str, str]],
    rng: np.random.Generator,
    settings: OperatorSettings | None = None,
) -> Variant:
    """A child of `parent`: the idea's settings applied, then maybe recombined and mutated."""
    settings = settings or OperatorSettings()
    child = dict(parent)
    reasons: dict[str, ChangeReason] = {}
    for name, value in targets.items():
        if name not in space:
            continue
        if value is None:
            child[name] = _other_value(name, child[name], space, rng) or child[name]
        elif value in space[name]:
            child[name] = value
        reasons[name] = ChangeReason.IDEA
    if donors and rng.random() < settings.p_recombine:
        donor = donors[int(rng.integers(len(donors)))]
        for name in space:
            donated = donor.get(name)
            if name not in targets and donated in space[name] and rng.random() < 0.5:
                child[name] = donor[name]
                reasons[name] = ChangeReason.RECOMBINE
    if child == dict(parent) or rng.random() < settings.p_extra_mutation:
        # The idea is already in the parent (or we were asked to explore): move elsewhere.
        moved = _mutate_random(child, space, set(targets), rng)
        if moved:
            reasons[moved] = ChangeReason.EXPLORE
    return Variant(tunables=child, reasons=reasons)


def enforce_forbidden(
    child: dict[str, str],
    parent: Mapping[str, str],
    space: Mapping[str, Sequence[str]],
    forbidden: set[tuple[str, str]],
) -> dict[str, str]:
    """Move forbidden settings back to the parent's value, else to the first allowed one."""
    fixed = dict(child)
    for name, value in forbidden:
        if fixed.get(name) != value:
            continue
        allowed = [v for v in space.get(name, []) if (name, v) not in forbidden]
        if not allowed:
            continue
        fixed[name] = parent[name] if parent.get(name) in allowed else allowed[0]
    return fixed


def describe_changes(
    parent: Mapping[str, str], child: Mapping[str, str], reasons: Mapping[str, ChangeReason]
) -> list[TunableChange]:
    """The tunables that differ, with the reason each one changed."""
    return [
        TunableChange(
            name=name,
            old=parent[name],
            new=child[name],
            reason=reasons.get(name, ChangeReason.CONSTRAINT),
        )
        for name in child
        if child[name] != parent.get(name)
    ]
