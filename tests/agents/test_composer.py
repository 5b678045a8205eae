"""The dispatch block and the composer: regimes chosen by sizes, committed in a real repository."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import git
import pytest
import torch

from agents.composer import CompositionRequest, commit_composition
from agents.dispatch import (
    Regime,
    RegimeBranch,
    code_outside_blocks,
    read_regimes,
    render_dispatch,
    write_dispatch,
)
from agents.expander import ExpansionOutcome
from agents.tunables import read_tunables, write_tunables
from harness.static_checks import check_sources
from kernels.track3.configs import CPU_CONFIGS
from kernels.track3.inputs import generate_inputs
from kernels.track3.reference import build_reference_model
from kernels.track3.workload import track3_workload
from tests.agents.conftest import make_repo

NARROW = {"attention": "sdpa", "padding_mask": "multiply"}
TREE = RegimeBranch(feature="d_model", threshold=64.0, below="r1", above=None)


def composed(source: str) -> str:
    regime = Regime(name="r1", tunables={**read_tunables(source), **NARROW}, source_sha="ab" * 20)
    return write_dispatch(source, [regime], TREE)


def load(source: str, tmp_path: Path) -> ModuleType:
    path = tmp_path / "composed_candidate.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("composed_candidate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_block_round_trips_and_keeps_everything_else(track3_source: str) -> None:
    text = composed(track3_source)
    assert read_regimes(text) == {"r1": {**read_tunables(track3_source), **NARROW}}
    assert read_regimes(track3_source) == {}
    assert code_outside_blocks(text) == code_outside_blocks(track3_source)
    assert "if sizes.d_model < 64.0:" in text and "==" not in render_dispatch([], TREE)


def test_a_composed_candidate_passes_the_static_checks(track3_source: str) -> None:
    workload = track3_workload()
    report = check_sources(
        {"candidate.py": composed(track3_source)}, workload.static_policy, "candidate.py"
    )
    assert report.passed, report.findings
    # The check that guards dispatch still fires on an exact-shape predicate in the same block.
    exact = composed(track3_source).replace("sizes.d_model < 64.0", "sizes.d_model == 32")
    refused = check_sources({"candidate.py": exact}, workload.static_policy, "candidate.py")
    assert not refused.passed
    assert {f.rule.value for f in refused.findings} == {"shape_special_case"}


def test_each_input_runs_its_regime_and_matches_the_reference(
    track3_source: str, tmp_path: Path
) -> None:
    module = load(composed(track3_source), tmp_path)
    for config_id, expected in (("cpu-5", NARROW), ("cpu-2", {"attention": "explicit"})):
        config = CPU_CONFIGS[config_id]
        reference = build_reference_model(config, device="cpu", seed=1234)
        model = module.OptimizedTransformer(config)
        model.load_state_dict(reference.state_dict())
        x, mask = generate_inputs(config, 7, 0.25, 1.0, "cpu")
        with torch.no_grad():
            out, ref = model(x, valid_token_mask=mask), reference(x, valid_token_mask=mask)
        assert all(model.tunables[k] == v for k, v in expected.items()), config_id
        torch.testing.assert_close(out, ref, atol=2e-3, rtol=2e-2)


def test_a_regime_outside_the_space_is_refused_at_construction(
    track3_source: str, tmp_path: Path
) -> None:
    bad = Regime(name="r1", tunables={"attention": "magic"}, source_sha="cd" * 20)
    module = load(write_dispatch(track3_source, [bad], "r1"), tmp_path)
    with pytest.raises(ValueError, match=r"REGIMES\['r1'\]: tunable attention='magic'"):
        module.OptimizedTransformer(CPU_CONFIGS["cpu-5"])


def request(
    repo: git.Repo, base: str, sources: dict[str, str], known: list[str]
) -> CompositionRequest:
    root = Path(repo.working_dir)
    source = repo.git.show(f"{base}:candidate.py")
    regime = Regime(name="r1", tunables={**read_tunables(source), **NARROW}, source_sha="ab" * 20)
    variables = {
        name: name
        for name in (
            *("title", "regimes", "predicted"),
            *("predicted_objective", "best_single_objective", "parent_sha"),
        )
    }
    return CompositionRequest(
        repo_path=root,
        worktree_root=root.parent / "worktrees",
        base_sha=base,
        branch="step-1",
        candidate_file="candidate.py",
        default_tunables=read_tunables(source),
        regimes=[regime],
        tree=TREE,
        sources=sources,
        known_trees=known,
        message_variables=variables,
    )


def test_the_composer_commits_once_and_refuses_variants_with_other_code(
    track3_source: str, tmp_path: Path
) -> None:
    repo, base = make_repo(tmp_path / "repo", track3_source)
    variant = write_tunables(track3_source, {**read_tunables(track3_source), **NARROW})
    result = commit_composition(request(repo, base, {"v": variant}, []))
    assert result.outcome is ExpansionOutcome.COMMITTED and result.sha is not None
    assert repo.commit(result.sha).parents[0].hexsha == base
    assert read_regimes(repo.git.show(f"{result.sha}:candidate.py"))["r1"]["attention"] == "sdpa"
    again = commit_composition(request(repo, base, {"v": variant}, [str(result.tree_sha)]))
    assert again.outcome is ExpansionOutcome.NO_CHANGE and "already" in again.message
    other_code = variant.replace("def zero_padded", "def zero_padded_renamed", 1)
    assert other_code != variant
    refused = commit_composition(request(repo, base, {"v": other_code}, []))
    assert refused.outcome is ExpansionOutcome.NO_CHANGE
    assert "code outside its tunables" in refused.message
