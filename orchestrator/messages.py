"""Injected steering messages: their grammar, validation and parsed payloads."""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Collection

from pydantic import BaseModel, ConfigDict, Field

from harness.static_checks import parse_constraint
from ledger import MessageRecord

MAX_TEXT = 4000
DEFAULT_REDIRECT_STEPS = 5


class MessageKind(enum.StrEnum):
    """What a human (or agent) can inject into a running search."""

    IDEA = "IDEA"
    CONSTRAINT = "CONSTRAINT"
    PRIORITY = "PRIORITY"
    LITERATURE = "LITERATURE"
    REDIRECT = "REDIRECT"
    RETRACT = "RETRACT"


class MessageError(ValueError):
    """An injected message that does not parse or names something unknown."""


class MessageContext(BaseModel):
    """What a message may refer to."""

    model_config = ConfigDict(frozen=True)

    config_ids: list[str] = Field(description="Configs of the run.")
    idea_ids: list[str] = Field(description="Ideas known to the run.")
    candidate_shas: list[str] = Field(description="Candidates that can be expanded.")
    tunables: dict[str, list[str]] = Field(
        default_factory=dict,
        description="The workload's tunables (TUNABLE_SPACE of the seed): each one's values.",
    )
    retractable: dict[int, str] = Field(
        default_factory=dict,
        description="Messages in force that a RETRACT may name: ledger seq -> kind and text.",
    )


FORMATS = {
    MessageKind.IDEA: "free text describing one optimization",
    MessageKind.CONSTRAINT: "'forbid TUNABLE=VALUE' (a tunable of the workload and one of its "
    "values, e.g. 'forbid matmul_precision=bf16') or 'forbid NAME' (a dotted name the "
    "frontier's code does not use, e.g. 'forbid torch.einsum')",
    MessageKind.PRIORITY: "'idea:ID=Q' (Q in (0,1)) or 'config:ID=WEIGHT' (WEIGHT > 0), "
    "comma-separated",
    MessageKind.LITERATURE: "free text or a reference for the researcher",
    MessageKind.REDIRECT: "'configs=ID,ID [steps=N]', 'parent=SHA [steps=N]' or 'reset'",
    MessageKind.RETRACT: "'ID': the message id (ledger seq) of an earlier message, as "
    "'ratchet inject' and 'ratchet status' show it; from then on it no longer applies",
}


def _listing(space: dict[str, list[str]]) -> str:
    return "; ".join(f"{name}={'|'.join(values)}" for name, values in sorted(space.items()))


def _constraint(text: str, ctx: MessageContext) -> dict[str, object]:
    """A checkable constraint naming a real tunable value, or a name that is no tunable."""
    constraint = parse_constraint(text)
    space = ctx.tunables
    if constraint.tunable is not None:
        if constraint.tunable not in space:
            known = _listing(space) if space else "none (the seed declares no TUNABLE_SPACE)"
            raise MessageError(
                f"CONSTRAINT names unknown tunable {constraint.tunable!r}; the workload's "
                f"tunables and their values: {known}"
            )
        values = space[constraint.tunable]
        if constraint.value not in values:
            raise MessageError(
                f"CONSTRAINT value {constraint.value!r} is not a value of tunable "
                f"{constraint.tunable!r}; its values: {', '.join(values)}"
            )
    elif constraint.name in space:
        values = space[constraint.name]
        raise MessageError(
            f"CONSTRAINT {text!r} names tunable {constraint.name!r} without a value (it would "
            "forbid every use of the name in the code); forbid one value instead: "
            + ", ".join(f"'forbid {constraint.name}={v}'" for v in values)
        )
    return constraint.model_dump(mode="json")


def _retract(text: str, ctx: MessageContext) -> dict[str, object]:
    raw = text.removeprefix("#")
    if not raw.isdigit():
        raise MessageError(f"RETRACT {text!r} is not a message id")
    seq = int(raw)
    if seq not in ctx.retractable:
        known = "; ".join(f"{k}: {v[:60]}" for k, v in sorted(ctx.retractable.items()))
        raise MessageError(
            f"RETRACT names {seq}, which is no message in force (never written, already "
            f"retracted, or a RETRACT itself); messages in force: {known or 'none'}"
        )
    return {"seq": seq}


def _priority(text: str, ctx: MessageContext) -> dict[str, object]:
    ideas: dict[str, float] = {}
    configs: dict[str, float] = {}
    for item in (part.strip() for part in text.split(",")):
        match = re.fullmatch(r"(idea|config):([\w.-]+)=([0-9.eE+-]+)", item)
        if not match:
            raise MessageError(f"PRIORITY item {item!r} is malformed")
        target, name, raw = match.groups()
        value = float(raw)
        if not math.isfinite(value):
            raise MessageError(f"PRIORITY value {raw!r} is not a finite number")
        if target == "idea":
            if name not in ctx.idea_ids:
                raise MessageError(f"PRIORITY names unknown idea {name!r}; known: {ctx.idea_ids}")
            if not 0 < value < 1:
                raise MessageError(f"PRIORITY idea quality must be in (0, 1), got {value}")
            ideas[name] = value
        else:
            if name not in ctx.config_ids:
                raise MessageError(
                    f"PRIORITY names unknown config {name!r}; known: {ctx.config_ids}"
                )
            if not value > 0:
                raise MessageError(f"PRIORITY config weight must be > 0, got {value}")
            configs[name] = value
    return {"ideas": ideas, "configs": configs}


def _resolve_sha(prefix: str, shas: Collection[str]) -> str:
    matches = [sha for sha in shas if sha.startswith(prefix.lower())]
    if len(matches) != 1:
        what = "no" if not matches else f"{len(matches)}"
        raise MessageError(f"REDIRECT parent={prefix!r} matches {what} expandable candidates")
    return matches[0]


def _redirect(text: str, ctx: MessageContext) -> dict[str, object]:
    if text.strip() == "reset":
        return {"reset": True}
    fields: dict[str, str] = {}
    for item in text.split():
        key, sep, value = item.partition("=")
        if not sep or key not in ("configs", "parent", "steps") or not value:
            raise MessageError(f"REDIRECT item {item!r} is malformed")
        fields[key] = value
    if "configs" not in fields and "parent" not in fields:
        raise MessageError("REDIRECT needs configs=... or parent=...")
    payload: dict[str, object] = {"reset": False}
    if "configs" in fields:
        ids = [i for i in fields["configs"].split(",") if i]
        unknown = [i for i in ids if i not in ctx.config_ids]
        if unknown or not ids:
            raise MessageError(f"REDIRECT names unknown configs {unknown}; known: {ctx.config_ids}")
        payload["configs"] = ids
    if "parent" in fields:
        payload["parent"] = _resolve_sha(fields["parent"], ctx.candidate_shas)
    steps = fields.get("steps", str(DEFAULT_REDIRECT_STEPS))
    if not steps.isdigit() or int(steps) < 1:
        raise MessageError(f"REDIRECT steps must be a positive integer, got {steps!r}")
    payload["steps"] = int(steps)
    return payload


def parse_message(kind: str, text: str, author: str, ctx: MessageContext) -> MessageRecord:
    """Validate a message and return the ledger record; MessageError shows the expected format."""
    try:
        message_kind = MessageKind(kind.upper())
    except ValueError:
        known = ", ".join(k.value for k in MessageKind)
        raise MessageError(f"unknown message kind {kind!r}; expected one of {known}") from None
    text = text.strip()
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes reach argv as lone surrogates
        shown = text.encode("utf-8", "replace")[:60]
        raise MessageError(
            f"{message_kind} text is not valid UTF-8 ({shown!r}); pass the text in UTF-8"
        ) from None
    if not text or len(text) > MAX_TEXT:
        raise MessageError(f"{message_kind} text must be 1..{MAX_TEXT} characters, got {len(text)}")
    try:
        payload: dict[str, object] = {}
        if message_kind is MessageKind.CONSTRAINT:
            payload = _constraint(text, ctx)
        elif message_kind is MessageKind.PRIORITY:
            payload = _priority(text, ctx)
        elif message_kind is MessageKind.REDIRECT:
            payload = _redirect(text, ctx)
        elif message_kind is MessageKind.RETRACT:
            payload = _retract(text, ctx)
    except (MessageError, ValueError) as exc:
        hint = "" if "expected" in str(exc) else f"; expected {FORMATS[message_kind]}"
        raise MessageError(f"{exc}{hint}") from None
    return MessageRecord(kind=message_kind.value, text=text, author=author, payload=payload)
