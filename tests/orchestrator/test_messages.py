"""Steering messages: each kind parses to a typed payload, bad input says what is expected."""

from __future__ import annotations

import pytest

from orchestrator.messages import MessageContext, MessageError, parse_message

CTX = MessageContext(
    config_ids=["s1", "s2"],
    idea_ids=["reuse-exp", "human-9"],
    candidate_shas=[
        "abcdef0123456789abcdef0123456789abcdef01",
        "abc0000000000000000000000000000000000000",
    ],
    tunables={"normalize": ["divide", "fused_softmax"], "exp_passes": ["twice", "once"]},
    retractable={12: "CONSTRAINT forbid normalize=fused_softmax", 15: "IDEA fuse rows"},
)


def test_idea_and_literature_are_free_text() -> None:
    record = parse_message("idea", "  reuse the exponentials  ", "ana", CTX)
    assert record.kind == "IDEA" and record.text == "reuse the exponentials"
    assert record.author == "ana"
    assert (
        parse_message("LITERATURE", "FlashAttention-2, Dao 2023", "ana", CTX).kind == "LITERATURE"
    )


def test_constraint_is_parsed_into_a_check() -> None:
    record = parse_message("CONSTRAINT", "forbid normalize=fused_softmax", "ana", CTX)
    assert record.payload["tunable"] == "normalize" and record.payload["value"] == "fused_softmax"


def test_retract_names_a_message_in_force() -> None:
    assert parse_message("RETRACT", "12", "ana", CTX).payload == {"seq": 12}
    assert parse_message("retract", "#15", "ana", CTX).payload == {"seq": 15}


def test_priority_targets_ideas_and_configs() -> None:
    record = parse_message("PRIORITY", "idea:reuse-exp=0.9, config:s2=2", "ana", CTX)
    assert record.payload == {"ideas": {"reuse-exp": 0.9}, "configs": {"s2": 2.0}}


def test_redirect_configs_parent_and_reset() -> None:
    record = parse_message("REDIRECT", "configs=s2 parent=abcd steps=3", "ana", CTX)
    assert record.payload["configs"] == ["s2"] and record.payload["steps"] == 3
    assert str(record.payload["parent"]).startswith("abcdef")
    assert parse_message("REDIRECT", "reset", "ana", CTX).payload == {"reset": True}


@pytest.mark.parametrize(
    ("kind", "text", "needle"),
    [
        ("HINT", "x", "unknown message kind"),
        ("IDEA", "   ", "1..4000"),
        ("IDEA", "x" * 4001, "1..4000"),
        ("CONSTRAINT", "please be careful", "forbid TUNABLE=VALUE"),
        ("PRIORITY", "idea:nope=0.5", "unknown idea"),
        ("PRIORITY", "idea:reuse-exp=1.5", "(0, 1)"),
        ("PRIORITY", "config:s9=2", "unknown config"),
        ("PRIORITY", "reuse-exp is great", "malformed"),
        ("REDIRECT", "configs=s9", "unknown configs"),
        ("REDIRECT", "parent=abc", "matches 2"),
        ("REDIRECT", "steps=2", "configs=... or parent="),
        ("REDIRECT", "configs=s1 steps=0", "positive integer"),
        ("PRIORITY", "config:s1=1e999", "not a finite number"),
        ("PRIORITY", "idea:reuse-exp=1e999", "not a finite number"),
        ("IDEA", "fuse \udcff the rows", "not valid UTF-8"),
        # A tunable name with no value once failed every later candidate (72 steps).
        ("CONSTRAINT", "forbid exp_passes", "'forbid exp_passes=twice', 'forbid exp_passes=once'"),
        ("CONSTRAINT", "forbid exp_passes", "expected 'forbid TUNABLE=VALUE'"),
        ("CONSTRAINT", "forbid nosuchtunable=1", "unknown tunable 'nosuchtunable'"),
        ("CONSTRAINT", "forbid nosuchtunable=1", "normalize=divide|fused_softmax"),
        ("CONSTRAINT", "forbid normalize=bogus", "its values: divide, fused_softmax"),
        ("RETRACT", "13", "no message in force"),
        ("RETRACT", "13", "12: CONSTRAINT forbid normalize=fused_softmax"),
        ("RETRACT", "the constraint", "not a message id"),
    ],
)
def test_bad_messages_are_refused_with_the_expected_format(
    kind: str, text: str, needle: str
) -> None:
    with pytest.raises(MessageError) as info:
        parse_message(kind, text, "ana", CTX)
    assert needle in str(info.value)
