"""The offline expander against real git repositories: parents, branches, worktrees, novelty."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

import git
import pytest

from agents.expander import ExpansionOutcome, ExpansionRequest, ExpansionResult, IdeaBrief
from agents.mutation import OperatorSettings
from agents.offline import OfflineExpander
from agents.tunables import read_space, read_tunables
from tests.agents.conftest import ACTOR, make_repo


def request(
    repo: git.Repo,
    parent_sha: str,
    branch: str,
    text: str,
    targets: Mapping[str, str | None] | None = None,
    seed: int = 0,
    constraints: list[str] | None = None,
    known_trees: list[str] | None = None,
) -> ExpansionRequest:
    """An expansion request on a repo whose worktrees go to a sibling directory."""
    root = Path(repo.working_dir)
    return ExpansionRequest(
        repo_path=root,
        worktree_root=root.parent / "worktrees",
        parent_sha=parent_sha,
        branch=branch,
        candidate_file="candidate.py",
        idea=IdeaBrief(idea_id="idea-1", text=text, source="human", targets=dict(targets or {})),
        constraints=constraints or [],
        known_trees=known_trees or [],
        seed=seed,
    )


def committed_tunables(repo: git.Repo, sha: str) -> dict[str, str]:
    """TUNABLES of candidate.py at a commit."""
    return read_tunables(repo.git.show(f"{sha}:candidate.py"))


def assert_clean(repo: git.Repo, req: ExpansionRequest) -> None:
    """No worktree directory left, and git knows only the main tree."""
    assert not (req.worktree_root / req.branch.replace("/", "-")).exists()
    listed = repo.git.worktree("list", "--porcelain").splitlines()
    assert [line for line in listed if line.startswith("worktree ")] == [
        f"worktree {Path(repo.working_dir).resolve()}"
    ]


def expand(req: ExpansionRequest, settings: OperatorSettings | None = None) -> ExpansionResult:
    """Run the offline expander."""
    return OfflineExpander(settings).expand(req)


@pytest.fixture
def track3_repo(tmp_path: Path, track3_source: str) -> tuple[git.Repo, str]:
    """A repo holding the track3 seed candidate in its first commit."""
    return make_repo(tmp_path / "repo", track3_source)


def test_commit_has_the_declared_parent_and_branch(track3_repo: tuple[git.Repo, str]) -> None:
    repo, seed_sha = track3_repo
    req = request(repo, seed_sha, "cand/sdpa", "use fused sdpa attention", seed=1)
    result = expand(req)
    assert result.outcome is ExpansionOutcome.COMMITTED, result.message
    assert result.agent == "offline" and result.sha and result.tree_sha
    commit = repo.commit(result.sha)
    assert [p.hexsha for p in commit.parents] == [seed_sha]
    assert repo.heads["cand/sdpa"].commit.hexsha == result.sha
    assert commit.tree.hexsha == result.tree_sha
    assert [b.path for b in commit.tree.traverse()] == ["candidate.py"]  # type: ignore[union-attr]
    tunables = committed_tunables(repo, result.sha)
    assert tunables["attention"] == "sdpa"
    assert tunables != committed_tunables(repo, seed_sha)
    assert set(tunables) == set(read_space(repo.git.show(f"{seed_sha}:candidate.py")))
    # The message is the rendered offline_commit prompt.
    message = str(commit.message)
    assert message == result.message
    assert "use fused sdpa attention" in message
    assert "Hypothesis" in message and "Predicted effect" in message
    assert "attention: explicit -> sdpa" in message and seed_sha in message
    assert result.prompt_hash and len(result.prompt_hash) == 64
    # The main checkout is untouched: still on main at the seed commit, nothing dirty.
    assert repo.head.commit.hexsha == seed_sha and repo.active_branch.name == "main"
    assert not repo.is_dirty(untracked_files=True)
    assert_clean(repo, req)


def test_explicit_targets_win_over_the_text(track3_repo: tuple[git.Repo, str]) -> None:
    repo, seed_sha = track3_repo
    req = request(repo, seed_sha, "cand/t", "use fused sdpa attention", {"gelu": "tanh"}, seed=2)
    result = expand(req, OperatorSettings(p_recombine=0.0, p_extra_mutation=0.0))
    assert result.outcome is ExpansionOutcome.COMMITTED, result.message
    assert committed_tunables(repo, str(result.sha)) == {
        **committed_tunables(repo, seed_sha),
        "gelu": "tanh",
    }


def test_parent_need_not_be_a_branch_tip(track3_repo: tuple[git.Repo, str]) -> None:
    repo, seed_sha = track3_repo
    # main moves on, so the seed commit is no branch tip any more.
    (Path(repo.working_dir) / "NOTES.md").write_text("later work\n")
    repo.index.add(["NOTES.md"])
    main_tip = repo.index.commit("later", author=ACTOR, committer=ACTOR).hexsha
    first = expand(request(repo, seed_sha, "cand/a", "Pack the QKV projection", seed=3))
    second = expand(request(repo, seed_sha, "cand/b", "cache the causal mask", seed=4))
    assert first.outcome is second.outcome is ExpansionOutcome.COMMITTED
    assert repo.commit(first.sha).parents[0].hexsha == seed_sha
    assert repo.commit(second.sha).parents[0].hexsha == seed_sha
    # The first child stops being any branch's tip; expand from it.
    repo.delete_head("cand/a", force=True)
    assert first.sha not in {head.commit.hexsha for head in repo.heads}
    req = request(repo, str(first.sha), "cand/a/child", "fp16 islands", seed=5)
    grandchild = expand(req)
    assert grandchild.outcome is ExpansionOutcome.COMMITTED, grandchild.message
    commit = repo.commit(grandchild.sha)
    assert [p.hexsha for p in commit.parents] == [first.sha]
    assert repo.heads["cand/a/child"].commit.hexsha == grandchild.sha
    tunables = committed_tunables(repo, str(grandchild.sha))
    assert tunables["matmul_precision"] == "fp16"
    assert tunables["qkv_projection"] == "packed", "inherited from the first child"
    assert "NOTES.md" not in [b.path for b in commit.tree.traverse()]  # type: ignore[union-attr]
    assert repo.heads["main"].commit.hexsha == main_tip
    assert_clean(repo, req)


def test_forbid_constraints_hold_over_many_seeds(track3_repo: tuple[git.Repo, str]) -> None:
    repo, seed_sha = track3_repo
    constraints = ["forbid gelu=tanh", "forbid attention=sdpa", "forbid matmul_precision=bf16"]
    forbidden = {("gelu", "tanh"), ("attention", "sdpa"), ("matmul_precision", "bf16")}
    hits = {"explore": 0, "tanh": 0}
    for seed in range(8):
        for text, targets in (("explore", {}), ("tanh GELU", {"gelu": "tanh"})):
            slug = "explore" if not targets else "tanh"
            req = request(
                repo, seed_sha, f"c/{slug}/{seed}", text, targets, seed, constraints=constraints
            )
            result = expand(req)
            if result.outcome is ExpansionOutcome.COMMITTED:
                assert not set(committed_tunables(repo, str(result.sha)).items()) & forbidden
            else:
                assert result.outcome is ExpansionOutcome.NO_CHANGE, result.message
            free = expand(request(repo, seed_sha, f"f/{slug}/{seed}", text, targets, seed))
            assert free.outcome is ExpansionOutcome.COMMITTED
            hits[slug] += bool(set(committed_tunables(repo, str(free.sha)).items()) & forbidden)
    # Without the constraints the same requests do reach forbidden settings (a random move
    # picks one of ~20 values, so exploring may take more seeds to hit one).
    for seed in range(8, 48):
        if hits["explore"]:
            break
        free = expand(request(repo, seed_sha, f"f/explore/{seed}", "explore", {}, seed))
        hits["explore"] += bool(set(committed_tunables(repo, str(free.sha)).items()) & forbidden)
    assert hits["tanh"] == 8 and hits["explore"] >= 1, hits
    assert_clean(repo, req)


def test_known_tree_gives_no_change_instead_of_a_duplicate(
    tmp_path: Path, softmax_source: str
) -> None:
    repo, seed_sha = make_repo(tmp_path / "repo", softmax_source)
    settings = OperatorSettings(p_recombine=0.0, p_extra_mutation=0.0)
    targets: dict[str, str | None] = {"exp_passes": "once"}
    first = expand(request(repo, seed_sha, "cand/once", "reuse exp", targets, seed=1), settings)
    assert first.outcome is ExpansionOutcome.COMMITTED, first.message
    assert committed_tunables(repo, str(first.sha)) == {
        "exp_passes": "once",
        "normalize": "divide",
        "row_chunking": "none",
    }
    # Without known_trees the same request would make the same tree again...
    again = expand(request(repo, seed_sha, "cand/again", "reuse exp", targets, seed=2), settings)
    assert again.outcome is ExpansionOutcome.COMMITTED and again.tree_sha == first.tree_sha
    # ...with it, the only novel child is known: nothing is committed.
    known = [str(first.tree_sha)]
    req = request(repo, seed_sha, "cand/dup", "reuse exp", targets, seed=3, known_trees=known)
    result = expand(req, settings)
    assert result.outcome is ExpansionOutcome.NO_CHANGE
    assert result.sha is None and result.tree_sha is None
    assert "no novel variant" in result.message and "were known" in result.message
    assert seed_sha[:10] in result.message and "idea-1" in result.message
    assert "cand/dup" not in [head.name for head in repo.heads]
    assert_clean(repo, req)


def test_an_open_idea_switches_on_what_it_needs_first_then_moves_its_own_targets(
    track3_repo: tuple[git.Repo, str],
) -> None:
    """One factor at a time: on a parent without the fused kernels, a schedule idea first
    switches them on with the schedule as it stands; once that child is known, the next
    expansion moves the schedule itself (not a random move riding under the idea's name)."""
    repo, seed_sha = track3_repo
    settings = OperatorSettings(p_recombine=0.0, p_extra_mutation=0.0)
    targets: dict[str, str | None] = {"fused_rows": None, "fused_warps": None}
    seed = committed_tunables(repo, seed_sha)
    first = expand(request(repo, seed_sha, "cand/on", "schedule", targets, seed=1), settings)
    assert first.outcome is ExpansionOutcome.COMMITTED, first.message
    switched = committed_tunables(repo, str(first.sha))
    assert switched == {**seed, "fused_kernel": "triton"}
    known = [str(first.tree_sha)]
    req = request(repo, seed_sha, "cand/next", "schedule", targets, seed=2, known_trees=known)
    second = expand(req, settings)
    assert second.outcome is ExpansionOutcome.COMMITTED, second.message
    moved = committed_tunables(repo, str(second.sha))
    assert moved["fused_kernel"] == "triton"
    assert {n for n in targets if moved[n] != seed[n]}, moved
    assert_clean(repo, req)


def test_unreadable_parent_fails_cleanly(tmp_path: Path) -> None:
    repo, seed_sha = make_repo(tmp_path / "repo", "print('no tunables here')\n")
    req = request(repo, seed_sha, "cand/x", "use fused sdpa attention")
    result = expand(req)
    assert result.outcome is ExpansionOutcome.NO_CHANGE and result.outcome.infrastructure
    assert "cannot read the parent's tunables" in result.message
    assert "cand/x" not in [head.name for head in repo.heads]
    assert_clean(repo, req)


def test_stale_worktree_from_an_interrupted_expansion_is_replaced(
    track3_repo: tuple[git.Repo, str],
) -> None:
    repo, seed_sha = track3_repo
    req = request(repo, seed_sha, "cand/stale", "cache the causal mask", seed=6)
    stale = req.worktree_root / "cand-stale"
    repo.git.worktree("add", "--detach", str(stale), seed_sha)
    (stale / "junk.txt").write_text("left over\n")
    result = expand(req)
    assert result.outcome is ExpansionOutcome.COMMITTED, result.message
    assert "junk.txt" not in [b.path for b in repo.commit(result.sha).tree.traverse()]  # type: ignore[union-attr]
    assert_clean(repo, req)


def test_a_worktree_left_locked_by_a_kill_during_its_creation_is_replaced(
    track3_repo: tuple[git.Repo, str],
) -> None:
    # kill -9 during `git worktree add` leaves a locked entry whose directory is gone.
    repo, seed_sha = track3_repo
    req = request(repo, seed_sha, "cand/locked", "cache the causal mask", seed=7)
    left = req.worktree_root / "cand-locked"
    repo.git.worktree("add", "--lock", "--detach", str(left), seed_sha)
    shutil.rmtree(left)
    result = expand(req)
    assert result.outcome is ExpansionOutcome.COMMITTED, result.message
    assert_clean(repo, req)


def test_same_seed_same_commit_content(tmp_path: Path, track3_source: str) -> None:
    trees = []
    for name in ("a", "b"):
        repo, seed_sha = make_repo(tmp_path / name, track3_source)
        result = expand(request(repo, seed_sha, "cand/x", "explore the space", seed=42))
        assert result.outcome is ExpansionOutcome.COMMITTED
        trees.append(result.tree_sha)
    assert trees[0] == trees[1]
