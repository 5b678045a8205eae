"""The declared-parent tree of a run, its frontier path, and where git disagrees with it."""

from __future__ import annotations

import git
from pydantic import BaseModel, Field

from orchestrator.run_view.common import RunData, VerdictClass, title, verdict_class
from orchestrator.state import infrastructure_failure
from orchestrator.workspace import WorkspaceError, open_repository


class LineageNode(BaseModel):
    """One candidate in the declared lineage."""

    sha: str = Field(description="Candidate commit.")
    parent_sha: str | None = Field(description="Declared parent (None: the seed).")
    depth: int = Field(description="Declared generations from the seed (0: the seed).")
    step: int = Field(description="Step that made it.")
    idea_id: str | None = Field(description="Idea it implemented.")
    agent: str = Field(description="Agent that wrote it.")
    title: str = Field(description="First line of its commit message.")
    verdict: str | None = Field(description="Its verdict as written (None: not judged yet).")
    verdict_class: VerdictClass | None = Field(description="promoted/rejected/... or None.")
    objective: float | None = Field(description="Its objective over the baseline.")
    on_frontier_path: bool = Field(
        description="On the declared path from the seed to the frontier."
    )
    is_frontier: bool = Field(description="The frontier itself.")
    demoted: bool = Field(description="Promoted, then its claim did not replicate.")
    git_parents: list[str] | None = Field(
        description="The commit's parents in the run's repository (None: not readable there)."
    )
    git_disagrees: bool = Field(
        description="Git ancestry disagrees with the declared parent: the declared parent is "
        "not a git parent of the commit (or the commit is missing from the repository)."
    )


class FailedExpansion(BaseModel):
    """A step whose expander committed nothing: a failure leaf of its parent."""

    step: int = Field(description="Step number.")
    parent_sha: str = Field(description="Declared parent it was expanding.")
    idea_id: str = Field(description="Idea it tried.")
    outcome: str = Field(description="The expander's outcome.")
    message: str = Field(description="Why nothing was committed.")
    infrastructure: bool = Field(
        description="An infrastructure outcome: never scored against the idea or the clade."
    )


class Lineage(BaseModel):
    """The lineage page."""

    nodes: list[LineageNode] = Field(description="Every candidate, parents before children.")
    failed_expansions: list[FailedExpansion] = Field(description="Steps with no commit.")
    frontier_sha: str | None = Field(description="The frontier.")
    disagreements: int = Field(description="Nodes whose git ancestry disagrees.")
    repository_problem: str | None = Field(
        description="Why git ancestry could not be read at all (None: it was)."
    )


def _frontier_path(data: RunData) -> set[str]:
    return set(data.state.ancestry(data.state.frontier_sha))


def _git_parents(repo: git.Repo | None, sha: str) -> list[str] | None:
    if repo is None:
        return None
    try:
        return [p.hexsha for p in repo.commit(sha).parents]
    except (ValueError, git.BadName, git.GitCommandError):
        return None


def _depths(data: RunData) -> dict[str, int]:
    depths: dict[str, int] = {}
    for sha in data.state.candidates:
        chain: list[str] = []
        current: str | None = sha
        while current is not None and current not in depths and current not in chain:
            chain.append(current)
            cand = data.state.candidates.get(current)
            current = cand.parent_sha if cand else None
        base = depths.get(current, -1) if current is not None else -1
        for offset, node in enumerate(reversed(chain)):
            depths[node] = base + 1 + offset
    return depths


def lineage(data: RunData) -> Lineage:
    """The declared tree from the ledger, checked against the run's git repository."""
    state = data.state
    try:
        repo: git.Repo | None = open_repository(data.paths)
        problem = None
    except WorkspaceError as exc:
        repo, problem = None, str(exc)
    path, depths = _frontier_path(data), _depths(data)
    nodes = []
    for cand in state.candidates.values():
        parents = _git_parents(repo, cand.sha)
        declared = [cand.parent_sha] if cand.parent_sha else []
        disagrees = repo is not None and (parents is None or set(declared) - set(parents) != set())
        nodes.append(
            LineageNode(
                sha=cand.sha,
                parent_sha=cand.parent_sha,
                depth=depths[cand.sha],
                step=cand.step,
                idea_id=cand.idea_id,
                agent=cand.agent,
                title=title(cand.message),
                verdict=cand.verdict.value if cand.verdict else None,
                verdict_class=verdict_class(cand.verdict),
                objective=cand.objective,
                on_frontier_path=cand.sha in path,
                is_frontier=cand.sha == state.frontier_sha,
                demoted=cand.sha in state.demoted,
                git_parents=parents,
                git_disagrees=disagrees,
            )
        )
    nodes.sort(key=lambda n: (n.depth, n.step))
    failed = [
        FailedExpansion(
            step=number,
            parent_sha=step.expansion_failed.parent_sha,
            idea_id=step.expansion_failed.idea_id,
            outcome=step.expansion_failed.outcome,
            message=step.expansion_failed.message,
            infrastructure=infrastructure_failure(step.expansion_failed),
        )
        for number, step in sorted(state.steps.items())
        if step.expansion_failed is not None and step.sha is None
    ]
    return Lineage(
        nodes=nodes,
        failed_expansions=failed,
        frontier_sha=state.frontier_sha,
        disagreements=sum(n.git_disagrees for n in nodes),
        repository_problem=problem,
    )
