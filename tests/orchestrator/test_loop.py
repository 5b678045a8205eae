"""Step choice details: ideas already present in a parent are not offered for it."""

from __future__ import annotations

from orchestrator.loop import open_ideas
from search import IdeaArm


def arm(idea_id: str, order: int) -> IdeaArm:
    return IdeaArm(
        idea_id=idea_id, quality=0.5, uncertainty=0.5, successes=0, failures=0, order=order
    )


def test_applied_ideas_are_left_out_for_that_parent() -> None:
    arms = [arm("sdpa", 0), arm("packed", 1), arm("free-text", 2)]
    targets: dict[str, dict[str, str | None]] = {
        "sdpa": {"attention": "sdpa"},
        "packed": {"qkv": "packed"},
        "free-text": {},
    }
    parent = {"attention": "sdpa", "qkv": "separate"}
    assert [a.idea_id for a in open_ideas(arms, targets, [parent])] == ["packed", "free-text"]


def test_when_every_idea_is_applied_all_stay_open() -> None:
    arms = [arm("sdpa", 0)]
    targets: dict[str, dict[str, str | None]] = {"sdpa": {"attention": "sdpa"}}
    assert open_ideas(arms, targets, [{"attention": "sdpa"}]) == arms


def test_an_idea_stays_open_while_one_regime_lacks_it() -> None:
    """A dispatching parent: an idea one regime holds is still open for the other; it is
    left out only once every serving regime holds it."""
    arms = [arm("sdpa", 0), arm("packed", 1)]
    targets: dict[str, dict[str, str | None]] = {
        "sdpa": {"attention": "sdpa"},
        "packed": {"qkv": "packed"},
    }
    regimes = [
        {"attention": "sdpa", "qkv": "packed"},
        {"attention": "explicit", "qkv": "packed"},
    ]
    assert [a.idea_id for a in open_ideas(arms, targets, regimes)] == ["sdpa"]
