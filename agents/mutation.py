"""The offline search operator: idea-guided mutation and recombination of declared tunables."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

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
    p_further_open_move: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description=(
            "After the first, the chance that each further open target of an idea (a tunable "
            "it names without a value, e.g. one of a kernel's schedule parameters) moves too."
        ),
    )
    hold_inert_targets: bool = Field(
        default=True,
        description="An open target that does not act in the parent keeps its value while what "
        "it needs switches on (one factor at a time); off, it moves as well (the operator's "
        "next attempt once that child is known).",
    )


@dataclass(frozen=True)
class SearchSpace:
    """The declared tunables: each one's allowed values, and what it needs elsewhere to act."""

    values: Mapping[str, Sequence[str]]
    requires: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def acts(self, name: str, tunables: Mapping[str, str]) -> bool:
        """True when the tunable's requirements hold in these settings (it changes the code)."""
        return all(tunables.get(k) == v for k, v in self.requires.get(name, {}).items())

    def effective(self, tunables: Mapping[str, str]) -> dict[str, str]:
        """The settings that act: two variants equal here run the same code."""
        return {n: v for n, v in tunables.items() if self.acts(n, tunables)}

    def with_requirements(
        self, names: Iterable[str], tunables: Mapping[str, str] | None = None
    ) -> set[str]:
        """These tunables and every one they need to act, transitively (an idea about the
        fused kernels' block size also switches the fused kernels on); with `tunables`, only
        the requirements those settings do not meet already (switched on, they stay as
        they are: run 13 counted fused_kernel, which the torch path reads, for a softmax
        idea on a parent whose fused kernels were on)."""
        found, pending = set(names), list(names)
        while pending:
            for other, value in self.requires.get(pending.pop(), {}).items():
                met = tunables is not None and tunables.get(other) == value
                if other not in found and not met:
                    found.add(other)
                    pending.append(other)
        return found


def as_space(space: Mapping[str, Sequence[str]] | SearchSpace) -> SearchSpace:
    """A plain values mapping is a space whose tunables all act."""
    return space if isinstance(space, SearchSpace) else SearchSpace(values=space)


def _other_value(
    name: str, current: str, space: Mapping[str, Sequence[str]], rng: np.random.Generator
) -> str | None:
    options = [v for v in space[name] if v != current]
    return str(options[int(rng.integers(len(options)))]) if options else None


def _meet_requirements(
    child: dict[str, str],
    space: SearchSpace,
    changed: Sequence[str],
    reasons: dict[str, ChangeReason],
) -> None:
    """Set what the idea's tunables need to act (an idea about a fused kernel's block size is
    an idea about the fused kernel), unless the idea itself sets that tunable otherwise."""
    pending = list(changed)
    while pending:
        name = pending.pop()
        for other, value in space.requires.get(name, {}).items():
            if child.get(other) == value or reasons.get(other) is ChangeReason.IDEA:
                continue
            if other in child and value in space.values.get(other, ()):
                child[other] = value
                reasons[other] = ChangeReason.CONSTRAINT
                pending.append(other)


def _mutate_random(
    child: dict[str, str],
    space: SearchSpace,
    avoid: set[str],
    rng: np.random.Generator,
) -> str | None:
    # A tunable that does not act in the child would change nothing the judge can measure.
    names = [
        n
        for n in space.values
        if n not in avoid and len(space.values[n]) > 1 and space.acts(n, child)
    ]
    if not names:
        return None
    name = names[int(rng.integers(len(names)))]
    value = _other_value(name, child[name], space.values, rng)
    if value is None:
        return None
    child[name] = value
    return name


def _open_moves(
    targets: Mapping[str, str | None],
    values: Mapping[str, Sequence[str]],
    rng: np.random.Generator,
    p_further: float,
) -> list[str]:
    """The open targets (named without a value) that move this time: one, then each further
    one with probability p_further. An idea naming six schedule parameters is a step in that
    schedule, not a restart: moving all six at once threw away every value the parent's
    lineage had measured (H200 run 9 replaced the default schedule by a random one twice as
    slow on the largest configs, and never measured the default)."""
    open_names = [n for n, v in targets.items() if v is None and n in values]
    if not open_names:
        return []
    order = [open_names[int(i)] for i in rng.permutation(len(open_names))]
    count = 1
    while count < len(order) and rng.random() < p_further:
        count += 1
    return order[:count]


class Variant(BaseModel):
    """A proposed child and why each tunable moved."""

    tunables: dict[str, str] = Field(description="The child's full tunable settings.")
    reasons: dict[str, ChangeReason] = Field(description="Reason of the latest move per name.")


def propose_variant(
    parent: Mapping[str, str],
    space: Mapping[str, Sequence[str]] | SearchSpace,
    targets: Mapping[str, str | None],
    donors: Sequence[Mapping[str, str]],
    rng: np.random.Generator,
    settings: OperatorSettings | None = None,
) -> Variant:
    """A child of `parent`: the idea's settings applied (with what they need to act), then
    maybe recombined and mutated. An open target that does not act in the parent keeps its
    value: the idea's move there is switching on what it needs."""
    settings = settings or OperatorSettings()
    space = as_space(space)
    values = space.values
    child = dict(parent)
    reasons: dict[str, ChangeReason] = {}
    for name, value in targets.items():
        if name in values and value is not None and value in values[name]:
            child[name] = value
            reasons[name] = ChangeReason.IDEA
    for name in _open_moves(targets, values, rng, settings.p_further_open_move):
        reasons[name] = ChangeReason.IDEA
        if settings.hold_inert_targets and not space.acts(name, parent):
            # What it needs switches on below, and its value acts for the first time: one
            # factor at a time. Moving it too hid a bundle (run 18 on the H100: the fused kernels
            # on with fused_min_width at a random 64, promoted 4.7x on configs 1-12, left config
            # 7 on the torch path for the rest of the run; nothing measured its default there).
            continue
        child[name] = _other_value(name, child[name], values, rng) or child[name]
    _meet_requirements(child, space, list(reasons), reasons)
    if donors and rng.random() < settings.p_recombine:
        donor = donors[int(rng.integers(len(donors)))]
        for name in values:
            donated = donor.get(name)
            # A donor gives what its own lineage changed: values[0] is the reference's setting,
            # which copying would only undo in the parent.
            changed = donated in values[name] and donated != values[name][0]
            if name not in reasons and changed and rng.random() < 0.5:
                child[name] = donor[name]
                reasons[name] = ChangeReason.RECOMBINE
    unchanged = space.effective(child) == space.effective(parent)
    if unchanged or rng.random() < settings.p_extra_mutation:
        # The idea is already in the parent (or we were asked to explore): move elsewhere,
        # but never off a setting the parent's lineage chose (values[0] is the reference's):
        # that was measured and kept, and a random move would mostly undo a gain (on the
        # H200 one put the fused kernels in and took the parent's CUDA graph out).
        held = {n for n in values if parent.get(n, values[n][0]) != values[n][0]}
        moved = _mutate_random(child, space, set(targets) | set(reasons) | held, rng)
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
