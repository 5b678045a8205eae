"""Settings no screen of this run could judge in its time limit: the operator leaves them alone.

Run 16 on the H200 cut a repair with fp32 IEEE fused operands twice (253 s), and eight steps
later the operator's own mutation put `fused_projection_operands=fp32_ieee` into a
strided-heads child, whose screen was cut again (140 s more): the idea was no longer drawn, but
the setting that made it unmeasurable still was. A setting a twice-cut candidate moved is
forbidden to the operator for the rest of the run, unless the candidate moved it only so that
its change could act (a requirement, or a reference value a requirement woke), or a candidate
of this run that was measured in time runs it too (then it is known to be measurable, and the
cut was something else). It is not a score: a timeout is infrastructure, and no idea's
posterior moves. `benchmarks/unmeasured_replay.py RUN_DIR` shows what it would have changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import git

from agents.regimes import settings_by_config
from agents.tunables import TunablesError, read_requirements, read_space
from orchestrator.state import CandidateView, SearchState
from orchestrator.workloads import WorkloadLoadError, load_workload
from orchestrator.workspace import RunPaths

Setting = tuple[str, str]
SourceReader = Callable[[str], str | None]  # a commit's candidate source (None: unreadable)


def unmeasured_settings(
    state: SearchState, read_source: SourceReader, sizes: Mapping[str, Mapping[str, float]]
) -> set[Setting]:
    """(tunable, value) pairs that twice-cut candidates moved from their parents, less those
    some candidate measured in time also runs."""
    cut = [c for c in state.candidates.values() if c.timed_out and c.parent_sha is not None]
    if not cut:
        return set()
    settings: dict[str, dict[str, dict[str, str]] | None] = {}

    def by_config(sha: str) -> dict[str, dict[str, str]] | None:
        if sha not in settings:
            source = read_source(sha)
            settings[sha] = None if source is None else settings_by_config(source, sizes)
        return settings[sha]

    suspects: set[Setting] = set()
    for cand in cut:
        assert cand.parent_sha is not None
        moved = moved_settings(by_config(cand.parent_sha), by_config(cand.sha))
        suspects |= moved - _enablers(read_source(cand.sha), moved)
    if not suspects:
        return set()
    measured: set[Setting] = set()
    for cand in state.candidates.values():
        if _measured(cand):
            measured |= _runs(by_config(cand.sha), suspects)
    return suspects - measured


Sizes = dict[str, dict[str, float]]  # config -> what a dispatch predicate reads of it


def run_sources(run_root: Path, state: SearchState) -> tuple[SourceReader, Sizes] | None:
    """A run directory's candidate sources by commit, and the sizes of the configs it times
    (None when its repository or workload cannot be read)."""
    if state.run is None:
        return None
    try:
        repo = git.Repo(RunPaths(run_root).repo)
        workload = load_workload(state.run.workload)
        config_set = workload.config_set(state.run.config_set)
        oracle_only = workload.oracle_only_ids()
        timed = [c for c in config_set.config_ids if c not in oracle_only]
        sizes = {c: workload.dispatch_features(c) for c in timed}
    except (git.GitError, WorkloadLoadError, KeyError, ValueError):
        return None

    def read_source(sha: str) -> str | None:
        try:
            return str(repo.git.show(f"{sha}:{workload.candidate_file}"))
        except git.GitCommandError:
            return None

    return read_source, sizes


def left_alone(run_root: Path, state: SearchState) -> list[str]:
    """The 'forbid' lines a run's operator now works under beyond the user's, read from the
    run directory (its repository and workload); none when they cannot be read."""
    if not any(c.timed_out for c in state.candidates.values()):
        return []
    sources = run_sources(run_root, state)
    if sources is None:
        return []
    return forbid_lines(unmeasured_settings(state, *sources))


def forbid_lines(settings: set[Setting]) -> list[str]:
    """The pairs as the operator's 'forbid TUNABLE=VALUE' constraints, in a stable order."""
    return [f"forbid {name}={value}" for name, value in sorted(settings)]


def _enablers(source: str | None, moved: set[Setting]) -> set[Setting]:
    """What a cut candidate moved only so that its change could act: the reference values
    (values[0], which tunables take when a requirement starts them acting) and the
    requirements of its other moved settings. Run 15 on the H200 cut twice a candidate that
    turned the fused kernels on for its fp32 operands; forbidding `fused_kernel=triton` too
    would have barred step 5, the run's 5.6x gain."""
    if source is None:
        return set(moved)  # unreadable: nothing is forbidden on a guess
    try:
        space, requires = read_space(source), read_requirements(source)
    except (TunablesError, SyntaxError):
        return set(moved)
    defaults = {(name, values[0]) for name, values in space.items() if values}
    needed = {
        (other, value) for name, _ in moved for other, value in requires.get(name, {}).items()
    }
    return (moved & defaults) | (moved & needed)


def _measured(cand: CandidateView) -> bool:
    return cand.verdict is not None and not cand.timed_out and not cand.tainted


def moved_settings(
    before: dict[str, dict[str, str]] | None, after: dict[str, dict[str, str]] | None
) -> set[Setting]:
    """The (tunable, value) pairs a child runs somewhere that its parent does not run there
    (per-configuration settings, as settings_by_config reads them; none when unreadable)."""
    if before is None or after is None:
        return set()  # cannot be told: nothing is forbidden on a guess
    return {
        (name, value)
        for config, values in after.items()
        for name, value in values.items()
        if before.get(config, {}).get(name) != value
    }


def _runs(settings: dict[str, dict[str, str]] | None, pairs: set[Setting]) -> set[Setting]:
    if settings is None:
        return set()
    return {(n, v) for values in settings.values() for n, v in values.items() if (n, v) in pairs}
