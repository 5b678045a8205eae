"""The expander interface: one idea applied to one parent commit, a new commit out."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field


class IdeaBrief(BaseModel):
    """The idea as an expander sees it."""

    model_config = ConfigDict(frozen=True)

    idea_id: str = Field(description="Ledger id of the idea.")
    text: str = Field(description="The idea in words.")
    source: str = Field(description="'library', 'human', 'researcher'...")
    targets: dict[str, str | None] = Field(
        default_factory=dict, description="Tunable settings asked for (None: change it)."
    )
    quality: float = Field(default=0.5, description="Rubric score q of the idea.")


NOT_GIVEN = "(not given)"


class ExpansionContext(BaseModel):
    """Sections of the expansion prompt, rendered from the ledger by the orchestrator; each is
    plain text (tables, lists), already cut to the run's context budget."""

    model_config = ConfigDict(frozen=True)

    parent_table: str = Field(default=NOT_GIVEN, description="The parent's per-config results.")
    frontier_table: str = Field(default=NOT_GIVEN, description="The frontier's per-config results.")
    file_map: str = Field(default=NOT_GIVEN, description="The parent's files with sizes.")
    frontier_diff: str = Field(
        default=NOT_GIVEN, description="diff parent -> frontier (if they differ)."
    )
    attempts: str = Field(
        default=NOT_GIVEN, description="Earlier attempts on this parent and idea."
    )
    workload_profile: str = Field(
        default=NOT_GIVEN, description="The inspector's workload profile."
    )
    device: str = Field(
        default=NOT_GIVEN, description="Device figures and roofline floor per config."
    )
    lessons: str = Field(default=NOT_GIVEN, description="The run's lessons log.")

    def sections(self) -> dict[str, str]:
        """Every section by name (what the prompt template receives)."""
        return {name: str(getattr(self, name)) for name in type(self).model_fields}


class ExpansionRequest(BaseModel):
    """Everything an expander needs for one step."""

    model_config = ConfigDict(frozen=True)

    repo_path: Path = Field(description="The run's candidate repository.")
    worktree_root: Path = Field(description="Where per-expansion worktrees are created.")
    parent_sha: str = Field(description="Commit to branch from (the declared parent).")
    source_sha: str | None = Field(
        default=None,
        description="Commit whose code the expansion changes when it is not the parent's: a "
        "repair changes a child that missed the tolerance narrowly and commits the result as "
        "another child of the parent (None: the parent's code).",
    )
    source_misses: dict[str, float | None] = Field(
        default_factory=dict,
        description="A repair's reason: per config the source failed, the share of its "
        "tolerance its worst element used (1 fails; empty: not a repair).",
    )
    branch: str = Field(description="Branch name to create for the new commit.")
    candidate_file: str = Field(description="The candidate module inside the tree.")
    idea: IdeaBrief = Field(description="The idea to implement.")
    constraints: list[str] = Field(default_factory=list, description="Active CONSTRAINT texts.")
    donor_shas: list[str] = Field(
        default_factory=list, description="Good candidates available for recombination."
    )
    frontier_sha: str | None = Field(
        default=None, description="The run's frontier when the step started (bench arm)."
    )
    step: int = Field(default=0, description="Step number (names the bench's work dirs).")
    context: ExpansionContext | None = Field(
        default=None, description="What the agent should know (tables, history, lessons)."
    )
    known_trees: list[str] = Field(
        default_factory=list, description="Tree shas already in the ledger (avoid duplicates)."
    )
    seed: int = Field(description="Seed of this expansion's random choices.")
    config_sizes: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="The sizes (what a dispatch predicate reads) of each timed configuration: "
        "the offline operator changes only regimes of a dispatching parent that serve one.",
    )
    settings_read: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Per timed configuration, the tunables the parent's code read there (its "
        "sweep's report; a configuration left out was not reported): the offline operator "
        "changes a regime only in tunables its configurations read.",
    )


class ExpansionOutcome(enum.StrEnum):
    """How an expansion ended."""

    COMMITTED = "committed"
    # The agent worked on the idea and produced nothing that passes: the idea's failure.
    FAILED = "failed"
    # Infrastructure outcomes: nothing was learnt about the idea or the parent.
    NO_CHANGE = "no_change"
    PROVIDER_ERROR = "provider_error"
    MALFORMED_REPLIES = "malformed_replies"
    INFRASTRUCTURE_ERROR = "infrastructure_error"

    @property
    def infrastructure(self) -> bool:
        """True when the outcome says nothing about the idea or the parent (never scored)."""
        return self not in (ExpansionOutcome.COMMITTED, ExpansionOutcome.FAILED)


class ExpansionResult(BaseModel):
    """What the expander produced."""

    model_config = ConfigDict(frozen=True)

    outcome: ExpansionOutcome = Field(description="Committed, nothing new, or failed.")
    agent: str = Field(description="Which expander produced it.")
    sha: str | None = Field(default=None, description="The new commit.")
    tree_sha: str | None = Field(default=None, description="Its git tree.")
    message: str = Field(default="", description="Commit message, or why nothing was made.")
    prompt_hash: str | None = Field(default=None, description="Template hash behind the text.")
    wall_s: float = Field(default=0.0, description="Time spent.")
    lessons: list[str] = Field(
        default_factory=list, description="Lessons the agent noted (the run's lessons log)."
    )
    tool_wall_s: dict[str, float] = Field(
        default_factory=dict, description="Wall seconds spent in each tool."
    )
    bench_device_s: float = Field(default=0.0, description="Device seconds its benchmarks took.")


class Expander(Protocol):
    """Parent commit + idea in, commit out (in its own worktree branched from the parent)."""

    @property
    def name(self) -> str:
        """Agent name recorded with each candidate."""

    def expand(self, request: ExpansionRequest) -> ExpansionResult:
        """Implement the idea on the parent and commit, or say why not."""
