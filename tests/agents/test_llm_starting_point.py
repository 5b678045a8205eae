"""What the LLM expander's task says the worktree holds: the parent's code, or a repair's."""

from __future__ import annotations

from pathlib import Path

from agents.expander import ExpansionRequest, IdeaBrief
from agents.llm_expander import starting_point


def _request(**extra: object) -> ExpansionRequest:
    return ExpansionRequest.model_validate(
        {
            "repo_path": Path("/r"),
            "worktree_root": Path("/w"),
            "parent_sha": "p" * 40,
            "branch": "ratchet/step-00009",
            "candidate_file": "candidate.py",
            "idea": IdeaBrief(idea_id="normalized-softmax", text="t", source="library"),
            "seed": 1,
            **extra,
        }
    )


def test_an_ordinary_expansion_works_on_the_parent() -> None:
    assert starting_point(_request()) == "The worktree holds the parent's code."


def test_a_repair_names_its_source_and_each_failing_configs_share() -> None:
    text = starting_point(_request(source_sha="c" * 40, source_misses={"7": 1.0887, "6": None}))
    assert "repair" in text and "cccccccccc" in text
    assert "config 7: 108.9% of its tolerance used" in text
    assert "config 6: share not reported" in text
    assert "another child of the parent" in text
