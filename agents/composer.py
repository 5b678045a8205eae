"""The composer: commits one dispatching candidate built from measured per-regime winners."""

from __future__ import annotations

import time
from pathlib import Path

import git
from pydantic import BaseModel, ConfigDict, Field

from agents.dispatch import Regime, RegimeBranch, code_outside_blocks, write_dispatch
from agents.expander import ExpansionOutcome, ExpansionResult
from agents.tunables import TunablesError, write_tunables
from agents.worktree import add_worktree, commit_worktree, remove_worktree
from prompts import render_prompt

AGENT_NAME = "composer"


class CompositionRequest(BaseModel):
    """What to compose: the base commit, the default tunables, the regimes and their tree."""

    model_config = ConfigDict(frozen=True)

    repo_path: Path = Field(description="The run's candidate repository.")
    worktree_root: Path = Field(description="Where worktrees are made.")
    base_sha: str = Field(description="Commit whose code the composition keeps (the parent).")
    branch: str = Field(description="Branch to create for the commit.")
    candidate_file: str = Field(description="The candidate's entry file.")
    default_tunables: dict[str, str] = Field(description="TUNABLES: what no regime claims.")
    regimes: list[Regime] = Field(description="REGIMES entries, in order.")
    tree: RegimeBranch | str | None = Field(description="The dispatch predicate.")
    sources: dict[str, str] = Field(
        description="Entry-file source of every variant by sha, to check they share code."
    )
    known_trees: list[str] = Field(description="Git trees already in the ledger.")
    message_variables: dict[str, str] = Field(description="Filled into the commit message.")


def commit_composition(request: CompositionRequest) -> ExpansionResult:
    """Commit the dispatching candidate on request.branch, or say why not."""
    started = time.monotonic()
    repo = git.Repo(request.repo_path)
    try:
        base = repo.git.show(f"{request.base_sha}:{request.candidate_file}")
    except git.GitCommandError as exc:
        return _result(
            ExpansionOutcome.INFRASTRUCTURE_ERROR, f"cannot read the base: {exc}", started
        )
    shared = code_outside_blocks(base)
    for sha, source in request.sources.items():
        if code_outside_blocks(source) != shared:
            # Tunables of a variant with other code would run on code they were not measured on.
            reason = f"variant {sha[:10]} has code outside its tunables that the base lacks"
            return _result(ExpansionOutcome.NO_CHANGE, reason, started)
    try:
        text = write_dispatch(
            write_tunables(base, request.default_tunables), request.regimes, request.tree
        )
    except TunablesError as exc:
        return _result(ExpansionOutcome.NO_CHANGE, f"cannot write the dispatch: {exc}", started)
    worktree = add_worktree(repo, request.worktree_root, request.branch, request.base_sha)
    try:
        return _commit(request, worktree, text, started)
    finally:
        remove_worktree(repo, worktree)


def _commit(
    request: CompositionRequest, worktree: Path, text: str, started: float
) -> ExpansionResult:
    tree_repo = git.Repo(worktree)
    (worktree / request.candidate_file).write_text(text)
    # git's own add: GitPython's index.add changes the process's working directory, which
    # another expansion's thread shares.
    tree_repo.git.add("--", request.candidate_file)
    tree_sha = tree_repo.git.write_tree()
    if tree_sha in set(request.known_trees):
        reason = "this composition is already in the ledger (same tree)"
        return _result(ExpansionOutcome.NO_CHANGE, reason, started)
    prompt = render_prompt("composition_commit", request.message_variables)
    actor = git.Actor("ratchet composer", "composer@ratchet.invalid")
    commit = commit_worktree(request.repo_path, worktree, request.branch, prompt.text, actor)
    return ExpansionResult(
        outcome=ExpansionOutcome.COMMITTED,
        agent=AGENT_NAME,
        sha=commit.sha,
        tree_sha=commit.tree_sha,
        message=prompt.text,
        prompt_hash=prompt.template_hash,
        wall_s=time.monotonic() - started,
    )


def _result(outcome: ExpansionOutcome, message: str, started: float) -> ExpansionResult:
    return ExpansionResult(
        outcome=outcome, agent=AGENT_NAME, message=message, wall_s=time.monotonic() - started
    )
