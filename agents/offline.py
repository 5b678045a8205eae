"""The offline expander: a real search operator over declared tunables, committing like an LLM."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import git
import numpy as np

from agents.expander import ExpansionOutcome, ExpansionRequest, ExpansionResult
from agents.mutation import (
    ChangeReason,
    OperatorSettings,
    SearchSpace,
    TunableChange,
    describe_changes,
    enforce_forbidden,
    propose_variant,
)
from agents.regimes import (
    DEFAULT_REGIME,
    acts_in,
    regime_reads,
    served_configs,
    serving_regimes,
    write_regime,
)
from agents.tunables import (
    TunablesError,
    idea_applied,
    read_docs,
    read_requirements,
    read_space,
    read_tunables,
    write_tunables,
)
from agents.worktree import add_worktree, commit_worktree, remove_worktree
from prompts import render_prompt

AGENT_NAME = "offline"
_STOPWORDS = frozenset({"the", "and", "with", "for", "instead", "use", "try", "into", "one", "of"})
_FORBID_TUNABLE = re.compile(r"^\s*forbid\s+(?P<name>\w+)=(?P<value>\S+)\s*$")


_SUFFIXES = ("ing", "ed", "er", "es", "s", "e")


def _stem(word: str) -> str:
    # A crude stem: "pack"/"packed", "cache"/"cached", "compile"/"compiled" meet once one
    # suffix is stripped; a fixed prefix length made "computer" match "compile".
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _tokens(text: str) -> set[str]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {_stem(w) for w in words if len(w) >= 3 and w not in _STOPWORDS}


def interpret_idea(text: str, space: Mapping[str, Sequence[str]]) -> dict[str, str | None]:
    """Map free idea text onto tunables. A named non-default value is the strongest signal
    ("pack the QKV projection and keep strided views" -> both settings); without one, the
    tunables whose names match best are to be changed (value None)."""
    words = _tokens(text)
    by_value: dict[str, str] = {}
    by_name: dict[str, tuple[int, float]] = {}
    for name, values in space.items():
        best_value, best_hits = None, 0
        for value in values[1:]:
            hits = len(_tokens(value.replace("_", " ")) & words)
            if hits > best_hits:
                best_value, best_hits = value, hits
        if best_value is not None:
            by_value[name] = best_value
        name_tokens = _tokens(name.replace("_", " "))
        name_hits = len(name_tokens & words)
        if name_hits:
            # Ties go to the name the words cover best: "attention" over "fused attention
            # operands" for "rethink the attention".
            by_name[name] = (name_hits, name_hits / len(name_tokens))
    if by_value:
        return dict(by_value)
    if not by_name:
        return {}
    top = max(by_name.values())
    return {name: None for name, hits in by_name.items() if hits == top}


def forbidden_settings(constraints: Sequence[str]) -> set[tuple[str, str]]:
    """The 'forbid TUNABLE=VALUE' constraints as (name, value) pairs."""
    pairs = set()
    for text in constraints:
        match = _FORBID_TUNABLE.match(text)
        if match:
            pairs.add((match["name"], match["value"]))
    return pairs


def _changes_text(changes: list[TunableChange], docs: Mapping[str, str]) -> str:
    return "\n".join(
        f"- {c.name}: {c.old} -> {c.new} ({c.reason}; {docs.get(c.name, '')})" for c in changes
    )


def _prediction(changes: list[TunableChange], quality: float) -> str:
    risky = [c.name for c in changes if "precision" in c.name or c.new in ("tanh", "bf16", "fp16")]
    risk = f" Numerical risk from {', '.join(risky)}: the gate decides." if risky else ""
    return (
        f"faster than the parent where the changed path is on the critical path; "
        f"prior chance of a measurable win {quality:.0%}.{risk}"
    )


@dataclass(frozen=True)
class _Plan:
    """What one expansion works from: the parent's source and tunables, the idea's targets."""

    request: ExpansionRequest
    source: str
    space: dict[str, list[str]]
    search_space: SearchSpace
    docs: dict[str, str]
    targets: dict[str, str | None]
    donors: list[dict[str, str]]
    # The parent's regimes that serve a configuration (DEFAULT_REGIME: its TUNABLES): a
    # dispatching parent is changed one regime at a time, as a plain one is as a whole.
    regimes: dict[str, dict[str, str]]
    # Per regime, the tunables the parent's code read where it serves (None: not reported),
    # and how many timed configurations it serves (what a change there can reach).
    reads: dict[str, set[str] | None]
    weights: dict[str, int]


def _message_variables(plan: _Plan, changes: list[TunableChange], regime: str) -> dict[str, str]:
    idea = plan.request.idea
    recombined = any(c.reason == ChangeReason.RECOMBINE for c in changes)
    # A repair sees only the failing configs' regimes; its title still names the one changed.
    dispatching = len(plan.regimes) > 1 or len(plan.weights) > 1
    where = f" [{regime}]" if dispatching else ""
    operator = "idea-guided mutation" + (" + recombination" if recombined else "")
    if where:
        operator += f" of the parent's regime {regime} (the sizes its dispatch sends there)"
    source = plan.request.source_sha
    if source is not None:
        operator += f", repairing {source[:10]}: its code, which missed the tolerance narrowly"
    return {
        "title": f"{idea.idea_id}{where}: " + ", ".join(f"{c.name}={c.new}" for c in changes),
        "idea_text": idea.text
        + ("" if plan.targets else " (matched no declared tunable: explored at random)"),
        "hypothesis": "; ".join(
            f"{c.name} -> {c.new}: {plan.docs.get(c.name, '')}" for c in changes
        ),
        "prediction": _prediction(changes, idea.quality),
        "changes": _changes_text(changes, plan.docs),
        "parent_sha": plan.request.parent_sha,
        "operator": operator,
    }


def open_regimes(
    regimes: Mapping[str, Mapping[str, str]],
    targets: Mapping[str, str | None],
    reads: Mapping[str, set[str] | None] | None = None,
    space: SearchSpace | None = None,
) -> list[str]:
    """The regimes an idea still has something to change in, by name. An idea whose concrete
    settings a regime already holds would only make a random move there in its name (run 10:
    cuda-graph, drawn twice for a regime that already captured graphs, moved fused_stages and
    was booked with both slower results). Nor is it applied where the parent's code read none
    of its tunables (reads, per regime): run 11 put fp16 islands and the mask mode into the
    fused kernels' regime, which reads neither, and charged both ideas with the parent's own
    timing. What a target needs to act counts as the idea's (space: the fused kernels' block
    sizes switch the fused kernels on, which the torch path reads). Ideas without concrete
    targets stay open everywhere."""
    space = space or SearchSpace(values={})
    return sorted(
        name
        for name, tunables in regimes.items()
        if not idea_applied(dict(targets), dict(tunables))
        and acts_in(space.with_requirements(targets, tunables), (reads or {}).get(name))
    )


def _repaired_sizes(request: ExpansionRequest) -> dict[str, dict[str, float]]:
    """The configurations whose regimes this expansion may change: a repair's failing ones
    (run 18 drew TUNABLES, serving 12 configurations, to repair a miss on config 13 that its
    own regime ran, and screened the same 2391 failing elements again), else every timed one."""
    failing = {c: s for c, s in request.config_sizes.items() if c in request.source_misses}
    return failing or request.config_sizes


def served_counts(source: str, sizes: Mapping[str, Mapping[str, float]]) -> dict[str, int]:
    """How many timed configurations each regime serves (an unreadable dispatch: none known,
    and every regime is drawn alike)."""
    served = served_configs(source, sizes) or {}
    return {name: len(configs) for name, configs in served.items()}


def draw_regime(names: Sequence[str], served: Mapping[str, int], rng: np.random.Generator) -> str:
    """One of these regimes, drawn by the configurations each serves (at least 1 each): an
    idea tried where it reaches one size of thirteen says little about it (run 11's fused
    kernels went to a regime of 3 configurations while 10 ran the torch path)."""
    weights = np.array([max(1, served.get(n, 1)) for n in names], dtype=float)
    return names[int(rng.choice(len(names), p=weights / weights.sum()))]


class OfflineExpander:
    """Mutation and recombination of the candidate's declared tunables, guided by the idea."""

    name = AGENT_NAME

    def __init__(self, settings: OperatorSettings | None = None, max_attempts: int = 24) -> None:
        self.settings = settings or OperatorSettings()
        self.max_attempts = max_attempts

    def expand(self, request: ExpansionRequest) -> ExpansionResult:
        """Commit one novel variant of the parent on request.branch, or say why not."""
        started = time.monotonic()
        repo = git.Repo(request.repo_path)
        try:
            start = request.source_sha or request.parent_sha
            source = repo.git.show(f"{start}:{request.candidate_file}")
            space, docs = read_space(source), read_docs(source)
            search_space = SearchSpace(values=space, requires=read_requirements(source))
            regimes = serving_regimes(source, _repaired_sizes(request))
            reads = regime_reads(source, request.config_sizes, request.settings_read)
        except git.GitCommandError as exc:
            reason = f"cannot read the parent: {exc}"
            return self._result(ExpansionOutcome.INFRASTRUCTURE_ERROR, reason, started)
        except (TunablesError, SyntaxError) as exc:
            # Code without declared tunables: this operator has nothing it can change there.
            reason = f"cannot read the parent's tunables: {exc}"
            return self._result(ExpansionOutcome.NO_CHANGE, reason, started)
        plan = _Plan(
            request=request,
            source=source,
            space=space,
            search_space=search_space,
            docs=docs,
            targets=dict(request.idea.targets) or interpret_idea(request.idea.text, space),
            donors=self._donors(repo, request),
            regimes=regimes,
            reads=reads,
            weights=served_counts(source, request.config_sizes),
        )
        worktree = add_worktree(
            repo, request.worktree_root, request.branch, request.parent_sha, request.source_sha
        )
        try:
            return self._commit_novel(plan, worktree, started)
        finally:
            remove_worktree(repo, worktree)

    def _donors(self, repo: git.Repo, request: ExpansionRequest) -> list[dict[str, str]]:
        donors = []
        for sha in request.donor_shas:
            if sha == request.parent_sha:
                continue
            try:
                donors.append(read_tunables(repo.git.show(f"{sha}:{request.candidate_file}")))
            except (git.GitCommandError, TunablesError):
                continue  # a donor whose code no longer declares tunables simply does not donate
        return donors

    def _commit_novel(self, plan: _Plan, worktree: Path, started: float) -> ExpansionResult:
        request = plan.request
        rng = np.random.default_rng(request.seed)
        forbidden = forbidden_settings(request.constraints)
        known = set(request.known_trees)
        tree_repo = git.Repo(worktree)
        names = open_regimes(plan.regimes, plan.targets, plan.reads, plan.search_space)
        if not names:
            return self._result(
                ExpansionOutcome.NO_CHANGE,
                f"idea {request.idea.idea_id!r} is already applied, or changes nothing the "
                f"code reads, in every regime of {request.parent_sha[:10]} that serves a "
                f"configuration ({', '.join(sorted(plan.regimes))}): nothing of its own to change",
                started,
            )
        # Why each attempt made nothing new: the parent again, what it never reads, known.
        missed = {
            "were the parent": 0,
            "moved only what its code there never read": 0,
            "were known": 0,
        }
        settings = self.settings
        for _ in range(self.max_attempts):
            regime = draw_regime(names, plan.weights, rng)
            parent = plan.regimes[regime]
            variant = propose_variant(
                parent, plan.search_space, plan.targets, plan.donors, rng, settings
            )
            child = enforce_forbidden(variant.tunables, parent, plan.space, forbidden)
            effective = plan.search_space.effective
            if effective(child) == effective(parent):
                missed["were the parent"] += 1  # nothing that acts moved: the parent's run again
                continue
            moved = {k for k, v in effective(child).items() if effective(parent).get(k) != v}
            if not acts_in(moved, plan.reads.get(regime)):
                missed["moved only what its code there never read"] += 1  # the same run again
                continue
            text = (
                write_tunables(plan.source, child)
                if regime == DEFAULT_REGIME
                else write_regime(plan.source, regime, child, request.parent_sha)
            )
            (worktree / request.candidate_file).write_text(text)
            # git's own add: GitPython's index.add changes the process's working directory,
            # which another expansion's thread shares.
            tree_repo.git.add("--", request.candidate_file)
            tree_sha = tree_repo.git.write_tree()
            if tree_sha in known:
                missed["were known"] += 1
                # The first factor (what the idea needs, switched on) was measured: its own
                # open targets move now, rather than a random move riding under its name.
                settings = settings.model_copy(update={"hold_inert_targets": False})
                continue
            changes = describe_changes(parent, child, variant.reasons)
            prompt = render_prompt("offline_commit", _message_variables(plan, changes, regime))
            actor = git.Actor("ratchet offline expander", "offline@ratchet.invalid")
            commit = commit_worktree(
                request.repo_path, worktree, request.branch, prompt.text, actor
            )
            return ExpansionResult(
                outcome=ExpansionOutcome.COMMITTED,
                agent=AGENT_NAME,
                sha=commit.sha,
                tree_sha=commit.tree_sha,
                message=prompt.text,
                prompt_hash=prompt.template_hash,
                wall_s=time.monotonic() - started,
            )
        return self._result(
            ExpansionOutcome.NO_CHANGE,
            f"no novel variant of {request.parent_sha[:10]} for idea {request.idea.idea_id!r} "
            f"in {self.max_attempts} attempts ("
            + ", ".join(f"{n} {why}" for why, n in missed.items() if n)
            + ")",
            started,
        )

    def _result(self, outcome: ExpansionOutcome, message: str, started: float) -> ExpansionResult:
        return ExpansionResult(
            outcome=outcome, agent=AGENT_NAME, message=message, wall_s=time.monotonic() - started
        )
