"""Step choice details: ideas already present in a parent are not offered for it."""

from __future__ import annotations

from agents.mutation import SearchSpace
from harness.models import Outcome
from orchestrator.idea_arms import changing_arms, measurable_arms, open_ideas
from orchestrator.state import CandidateView, SearchState, StepView
from search import IdeaArm, Verdict
from tests.orchestrator.conftest import step_started


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
    assert [a.idea_id for a in open_ideas(arms, targets, {"TUNABLES": parent})] == [
        "packed",
        "free-text",
    ]


def test_when_every_idea_is_applied_all_stay_open() -> None:
    arms = [arm("sdpa", 0)]
    targets: dict[str, dict[str, str | None]] = {"sdpa": {"attention": "sdpa"}}
    assert open_ideas(arms, targets, {"TUNABLES": {"attention": "sdpa"}}) == arms


def test_an_idea_stays_open_while_one_regime_lacks_it() -> None:
    """A dispatching parent: an idea one regime holds is still open for the other; it is
    left out only once every serving regime holds it."""
    arms = [arm("sdpa", 0), arm("packed", 1)]
    targets: dict[str, dict[str, str | None]] = {
        "sdpa": {"attention": "sdpa"},
        "packed": {"qkv": "packed"},
    }
    regimes = {
        "TUNABLES": {"attention": "sdpa", "qkv": "packed"},
        "r1": {"attention": "explicit", "qkv": "packed"},
    }
    assert [a.idea_id for a in open_ideas(arms, targets, regimes)] == ["sdpa"]


def test_an_idea_whose_tunables_no_regime_read_is_left_out() -> None:
    """The parent's code read the attention mode but never the precision (the fused kernels):
    fp16 islands have nothing to act on there; unknown reads leave every idea open."""
    arms = [arm("sdpa", 0), arm("fp16", 1), arm("explore", 2)]
    targets: dict[str, dict[str, str | None]] = {
        "sdpa": {"attention": "sdpa"},
        "fp16": {"precision": "fp16"},
        "explore": {},
    }
    regimes = {"TUNABLES": {"attention": "explicit", "precision": "fp32", "fused": "off"}}
    reads: dict[str, set[str] | None] = {"TUNABLES": {"attention", "fused"}}
    space = SearchSpace(values={}, requires={"block": {"fused": "on"}})
    read = (reads, space)
    assert [a.idea_id for a in open_ideas(arms, targets, regimes, read)] == ["sdpa", "explore"]
    assert open_ideas(arms, targets, regimes, ({"TUNABLES": None}, space)) == arms
    # An idea about the fused kernels' block size switches them on, which this code reads.
    block = [arm("block", 3)]
    assert open_ideas(block, {"block": {"block": "32"}}, regimes, read) == block
    assert open_ideas(
        [*arms, *block],
        {**targets, "block": {"block": "32"}},
        regimes,
        (reads, SearchSpace(values={})),
    ) == [arms[0], arms[2]]


def test_a_requirement_already_met_does_not_count_as_the_ideas() -> None:
    """Run 13: the fused kernels were on, config 7 ran the torch path (it read fused_kernel
    and the width bound there, to decide so); a softmax idea for the fused kernels, which
    needs them on, changes nothing that code runs."""
    arms = [arm("softmax", 0)]
    targets: dict[str, dict[str, str | None]] = {"softmax": {"softmax": "normalized"}}
    space = SearchSpace(values={}, requires={"softmax": {"fused": "on"}})
    reads: dict[str, set[str] | None] = {"TUNABLES": {"fused", "min_width", "precision"}}
    on = {"TUNABLES": {"fused": "on", "softmax": "online"}}
    off = {"TUNABLES": {"fused": "off", "softmax": "online"}}
    assert changing_arms(arms, targets, on, (reads, space)) == []
    # Off, the idea switches the fused kernels on, which does change what runs there.
    assert changing_arms(arms, targets, off, (reads, space)) == arms


def test_ideas_no_screen_could_judge_are_left_out_unless_none_is_left() -> None:
    state = SearchState()
    state.steps[1] = StepView(started=step_started(1, "seed", "slow"))
    cut = CandidateView(
        sha="c", tree_sha="c", parent_sha="seed", step=1, idea_id="slow", agent="a", message=""
    )
    cut.verdict, cut.details = Verdict.FAILED_RUN, {"reject_reason": Outcome.TIMEOUT.value}
    state.candidates["c"] = cut
    arms = [arm("slow", 0), arm("quick", 1)]
    assert [a.idea_id for a in measurable_arms(state, arms)] == ["quick"]
    assert [a.idea_id for a in measurable_arms(state, arms[:1])] == ["slow"]  # none left
    cut.details = {"reject_reason": "crash"}  # a run that failed is no cut screen
    assert [a.idea_id for a in measurable_arms(state, arms)] == ["slow", "quick"]
