"""The run directory: ledger, candidate repository (one commit per candidate), evaluations."""

from __future__ import annotations

import io
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

import git

from kernels.candidate_tree import write_tree
from kernels.workload import Workload

SEED_BRANCH = "ratchet/seed"
ACTOR = git.Actor("ratchet", "ratchet@ratchet.invalid")


class WorkspaceError(RuntimeError):
    """The run directory is not usable as it is."""


@dataclass(frozen=True)
class RunPaths:
    """Where everything of a run lives."""

    root: Path

    @property
    def ledger(self) -> Path:
        """The SQLite ledger."""
        return self.root / "ledger.sqlite"

    @property
    def repo(self) -> Path:
        """The candidate git repository."""
        return self.root / "repo"

    @property
    def worktrees(self) -> Path:
        """Per-expansion worktrees (temporary)."""
        return self.root / "worktrees"

    @property
    def evals(self) -> Path:
        """Per-evaluation work directories (request, result, judge log, arm sources)."""
        return self.root / "evals"


def step_branch(step: int) -> str:
    """The branch that holds a step's candidate."""
    return f"ratchet/step-{step:05d}"


def open_repository(paths: RunPaths) -> git.Repo:
    """The run's candidate repository."""
    try:
        return git.Repo(paths.repo)
    except (git.NoSuchPathError, git.InvalidGitRepositoryError) as exc:
        raise WorkspaceError(f"{paths.repo} is not the run's candidate repository: {exc}") from exc


def init_repository(paths: RunPaths, workload: Workload) -> git.Repo:
    """Create the candidate repository with the seed candidate as its first commit."""
    if paths.repo.exists():
        shutil.rmtree(paths.repo)  # a half-made repo from an interrupted start; nothing in it
    repo = git.Repo.init(paths.repo, initial_branch="main")
    with repo.config_writer() as cfg:
        cfg.set_value("user", "name", ACTOR.name)
        cfg.set_value("user", "email", ACTOR.email)
    sources = workload.seed_sources()
    write_tree(sources, paths.repo)
    repo.index.add(sorted(sources))
    message = (
        f"seed: the {workload.name} reference in the candidate API\n\n"
        f"Baseline: {workload.baseline}\n"
    )
    commit = repo.index.commit(message, author=ACTOR, committer=ACTOR)
    repo.create_head(SEED_BRANCH, commit.hexsha)
    return repo


def branch_commit(repo: git.Repo, branch: str) -> str | None:
    """The commit a branch points at, if the branch exists."""
    head = next((h for h in repo.heads if h.name == branch), None)
    return head.commit.hexsha if head is not None else None


def tree_of(repo: git.Repo, sha: str) -> str:
    """The git tree sha of a commit."""
    return str(repo.commit(sha).tree.hexsha)


def read_file(repo: git.Repo, sha: str, path: str) -> str:
    """One file of a commit."""
    return str(repo.git.show(f"{sha}:{path}"))


def read_sources(repo: git.Repo, sha: str) -> dict[str, str]:
    """Every Python file of a commit, by path."""
    tree = repo.commit(sha).tree
    return {
        str(blob.path): blob.data_stream.read().decode("utf-8")
        for blob in tree.traverse()
        if isinstance(blob, git.Blob) and str(blob.path).endswith(".py")
    }


def materialize(repo: git.Repo, sha: str, dest: Path) -> Path:
    """Write a commit's exact tree into dest (replacing what was there)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    buffer = io.BytesIO()
    repo.archive(buffer, sha, format="tar")
    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as tar:
        tar.extractall(dest, filter="data")
    return dest


def resolve_sha(repo: git.Repo, known: list[str], prefix: str) -> str:
    """A full candidate sha from a unique prefix of at least 4 hex digits."""
    prefix = prefix.strip().lower()
    if len(prefix) < 4 or any(c not in "0123456789abcdef" for c in prefix):
        raise WorkspaceError(f"{prefix!r} is not a commit sha prefix (4+ hex digits)")
    matches = [sha for sha in known if sha.startswith(prefix)]
    if not matches:
        raise WorkspaceError(f"no candidate of this run has a sha starting with {prefix!r}")
    if len(matches) > 1:
        raise WorkspaceError(f"sha prefix {prefix!r} is ambiguous: {', '.join(matches)}")
    return matches[0]
