"""Which idea arms still have something to change on a candidate, as the expander reads them."""

from __future__ import annotations

from collections.abc import Mapping

import git

from agents.mutation import SearchSpace
from agents.offline import interpret_idea, open_regimes
from agents.regimes import regime_reads, serving_regimes
from agents.tunables import TunablesError, read_requirements, read_space
from orchestrator.stages import LoopContext, timed_sizes
from orchestrator.state import SearchState
from orchestrator.workspace import read_file
from search import IdeaArm


def ideas_for_parent(ctx: LoopContext, state: SearchState, parent_sha: str) -> list[IdeaArm]:
    """Idea arms worth trying on this parent: those whose settings it already has are left
    out, so an idea is never credited with a random move made in its name, and so are those
    no screen of this run could judge (every arm when none is left)."""
    arms = measurable_arms(state, untried_arms(state, parent_sha, state.idea_arms(ctx.device)))
    return open_arms(ctx, state, parent_sha, arms) or arms


def unmeasured_ideas(state: SearchState) -> frozenset[str]:
    """Ideas with a candidate in this run that no screen could judge in its time limit (cut,
    and cut again on its retry). Not a score of the idea (a timeout is infrastructure, and
    its posterior is untouched), but drawing it again spends the same minutes for nothing:
    run 14 on the H200 cut five screens of fp32 fused operands at 60 s, 300 s of its 9.5
    minutes, and steps 4 and 8 (fp32 IEEE operands, drawn twice) were never measured."""
    return frozenset(
        state.steps[cand.step].started.idea_id
        for cand in state.candidates.values()
        if cand.timed_out and cand.step in state.steps
    )


def measurable_arms(state: SearchState, arms: list[IdeaArm]) -> list[IdeaArm]:
    """The arms whose ideas this run's screens could judge (all when none could): a human
    idea still to try included, which would otherwise be forced on every step."""
    unmeasured = unmeasured_ideas(state)
    return [a for a in arms if a.idea_id not in unmeasured] or arms


def untried_arms(state: SearchState, sha: str, arms: list[IdeaArm]) -> list[IdeaArm]:
    """The arms that made something new on this candidate, or might (all when none did)."""
    # An idea that made nothing new on this parent is not drawn for it again.
    tried = state.no_change.get(sha, set())
    return [a for a in arms if a.idea_id not in tried] or arms


def open_arms(
    ctx: LoopContext,
    state: SearchState,
    sha: str,
    arms: list[IdeaArm],
    configs: set[str] | None = None,
) -> list[IdeaArm] | None:
    """Of these arms, the ones with something left to change in some regime of the candidate
    that serves one of `configs` (None: any timed config), in tunables its code read there
    (possibly none); None when its code declares no tunables (every idea is then open)."""
    sizes = {c: s for c, s in timed_sizes(ctx).items() if configs is None or c in configs}
    read = {
        c: names
        for c, names in state.settings_read.get(sha, {}).items()
        if configs is None or c in configs
    }
    try:
        source = read_file(ctx.repo, sha, ctx.workload.candidate_file)
        regimes, space = serving_regimes(source, sizes), read_space(source)
        reads = regime_reads(source, sizes, read)
        search_space = SearchSpace(values=space, requires=read_requirements(source))
    except (TunablesError, SyntaxError, git.GitCommandError):
        return None
    # Free-text ideas are read the way the offline expander will read them.
    targets = {
        idea_id: idea.targets or interpret_idea(idea.text, space)
        for idea_id, idea in state.ideas.items()
    }
    return changing_arms(arms, targets, regimes, (reads, search_space))


def changing_arms(
    arms: list[IdeaArm],
    targets: dict[str, dict[str, str | None]],
    regimes: Mapping[str, Mapping[str, str]],
    read: tuple[Mapping[str, set[str] | None], SearchSpace] | None = None,
) -> list[IdeaArm]:
    """The arms that still have something to change in some regime of the parent: settings
    it does not already have, in tunables its code there read (read: per regime, and the
    space whose requirements count as an idea's; a plain parent has one regime, its
    TUNABLES)."""
    reads, space = read if read is not None else (None, None)
    return [a for a in arms if open_regimes(regimes, targets.get(a.idea_id, {}), reads, space)]


def open_ideas(
    arms: list[IdeaArm],
    targets: dict[str, dict[str, str | None]],
    regimes: Mapping[str, Mapping[str, str]],
    read: tuple[Mapping[str, set[str] | None], SearchSpace] | None = None,
) -> list[IdeaArm]:
    """changing_arms, or all arms if none is left."""
    return changing_arms(arms, targets, regimes, read) or arms
