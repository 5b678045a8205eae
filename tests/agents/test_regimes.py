"""A dispatching candidate's regimes: read back, rewritten one at a time, and what they reach."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from agents.dispatch import Regime, RegimeBranch, read_regimes, write_dispatch
from agents.expander import ExpansionOutcome
from agents.offline import OfflineExpander, draw_regime, served_counts
from agents.regimes import (
    DEFAULT_REGIME,
    changed_configs,
    changed_settings,
    read_dispatch_tree,
    regime_reads,
    served_configs,
    serving_regimes,
    settings_by_config,
    write_regime,
)
from agents.tunables import TunablesError, read_tunables, write_tunables
from kernels.track3.workload import track3_workload
from tests.agents.conftest import make_repo
from tests.agents.test_offline_expander import request

# Narrow models go to r1 (the fused kernels), wide ones keep TUNABLES; r2 serves nobody.
TREE = RegimeBranch(feature="d_model", threshold=362.0, below="r1", above=None)
FUSED = {"fused_kernel": "triton", "graph_capture": "cuda_graph"}
SIZES = {c: track3_workload().dispatch_features(c) for c in ("1", "2", "6", "7", "8", "13")}


def dispatching(source: str, tree: RegimeBranch | str | None = TREE) -> str:
    defaults = read_tunables(source)
    regimes = [
        Regime(name="r1", tunables={**defaults, **FUSED}, source_sha="a" * 40),
        Regime(name="r2", tunables={**defaults, "gelu": "tanh"}, source_sha="b" * 40),
    ]
    return write_dispatch(source, regimes, tree)


def test_the_composition_steps_tree_reads_back(track3_source: str) -> None:
    source = dispatching(track3_source)
    assert read_dispatch_tree(source) == TREE
    assert read_dispatch_tree(dispatching(track3_source, "r2")) == "r2"
    assert read_dispatch_tree(track3_source) is None  # the seed's: always TUNABLES


def test_a_predicate_in_another_form_is_not_interpreted(track3_source: str) -> None:
    source = dispatching(track3_source).replace("sizes.d_model < 362.0", "sizes.d_model % 2")
    with pytest.raises(TunablesError):
        read_dispatch_tree(source)
    assert settings_by_config(source, SIZES) is None
    assert changed_configs(source, source, SIZES) is None
    assert set(serving_regimes(source, SIZES)) == {DEFAULT_REGIME, "r1", "r2"}


def test_a_changed_regime_reaches_exactly_its_configs(track3_source: str) -> None:
    parent = dispatching(track3_source)
    retuned = {**read_regimes(parent)["r1"], "fused_rows": "32"}
    narrow = write_regime(parent, "r1", retuned, "c" * 40)
    assert changed_configs(parent, narrow, SIZES) == {"1", "2", "6", "7", "13"}
    wide = write_tunables(parent, {**read_tunables(parent), "matmul_precision": "fp16"})
    assert changed_configs(parent, wide, SIZES) == {"8"}
    # The regime nobody is sent to reaches no config; a plain candidate's change, every one.
    exact = {**read_regimes(parent)["r2"], "gelu": "erf"}
    unserved = write_regime(parent, "r2", exact, "c" * 40)
    assert changed_configs(parent, unserved, SIZES) == set()
    plain = write_tunables(track3_source, {**read_tunables(track3_source), "gelu": "tanh"})
    assert changed_configs(track3_source, plain, SIZES) == set(SIZES)


def test_rewriting_one_regime_keeps_everything_else(track3_source: str) -> None:
    parent = dispatching(track3_source)
    settings = {**read_regimes(parent)["r1"], "fused_rows": "32"}
    child = write_regime(parent, "r1", settings, "c" * 40)
    assert read_regimes(child) == {**read_regimes(parent), "r1": settings}
    assert read_tunables(child) == read_tunables(parent)
    assert read_dispatch_tree(child) == TREE
    assert f"# changed from candidate {'c' * 12}'s r1" in child
    assert f"# measured as candidate {'a' * 12}" not in child  # r1's old provenance
    assert f"# measured as candidate {'b' * 12}" in child  # r2's stays
    changed = [line for line in child.splitlines() if line not in parent.splitlines()]
    assert len(changed) == 2, changed  # the provenance comment and the one setting
    with pytest.raises(TunablesError):
        write_regime(parent, "r9", settings, "c" * 40)


def test_regimes_that_serve_no_config_are_left_alone(track3_source: str) -> None:
    source = dispatching(track3_source)
    assert set(serving_regimes(source, SIZES)) == {DEFAULT_REGIME, "r1"}
    assert set(serving_regimes(source, {})) == {DEFAULT_REGIME, "r1", "r2"}
    assert set(serving_regimes(track3_source, SIZES)) == {DEFAULT_REGIME}


def test_the_operator_changes_one_serving_regime_of_a_dispatching_parent(
    tmp_path: Path, track3_source: str
) -> None:
    repo, sha = make_repo(tmp_path / "repo", dispatching(track3_source))
    parent = repo.git.show(f"{sha}:candidate.py")
    reached: set[str] = set()
    for seed in range(30):
        req = request(repo, sha, f"cand/{seed}", "retune", {"fused_keys": None}, seed=seed)
        req = req.model_copy(update={"config_sizes": SIZES})
        result = OfflineExpander().expand(req)
        assert result.outcome is ExpansionOutcome.COMMITTED, result.message
        assert result.sha is not None
        child = repo.git.show(f"{result.sha}:candidate.py")
        changed = changed_configs(parent, child, SIZES)
        assert changed in ({"1", "2", "6", "7", "13"}, {"8"}), (seed, changed)
        assert read_regimes(child)["r2"] == read_regimes(parent)["r2"]  # serves nobody
        reached.add("r1" if "[r1]" in result.message else DEFAULT_REGIME)
        if changed == {"8"}:  # the idea's tunable needs the fused kernel, which it switched on
            assert read_tunables(child)["fused_kernel"] == "triton"
    assert reached == {"r1", DEFAULT_REGIME}


def test_a_repair_changes_only_the_regimes_that_ran_its_failing_configs(
    tmp_path: Path, track3_source: str
) -> None:
    """Run 18 repaired a miss on config 13 (its own regime) by changing TUNABLES, which serves
    the other configurations, and screened the same failure again."""
    repo, sha = make_repo(tmp_path / "repo", dispatching(track3_source))
    parent = repo.git.show(f"{sha}:candidate.py")
    for failing, expected in (({"13": 1.2}, {"1", "2", "6", "7", "13"}), ({"8": 1.5}, {"8"})):
        for seed in range(12):
            req = request(repo, sha, f"fix-{min(failing)}/{seed}", "retune", {"fused_keys": None})
            req = req.model_copy(
                update={"config_sizes": SIZES, "source_misses": failing, "seed": seed}
            )
            result = OfflineExpander().expand(req)
            assert result.outcome is ExpansionOutcome.COMMITTED, result.message
            assert result.sha is not None
            child = repo.git.show(f"{result.sha}:candidate.py")
            assert changed_configs(parent, child, SIZES) == expected, (failing, seed)
            regime = "r1" if "13" in failing else DEFAULT_REGIME
            assert result.message is not None and f"[{regime}]" in result.message


def test_an_idea_is_applied_only_in_a_regime_that_lacks_it(
    tmp_path: Path, track3_source: str
) -> None:
    """r1 already captures graphs: cuda-graph changes TUNABLES, never r1 by a random move."""
    repo, sha = make_repo(tmp_path / "repo", dispatching(track3_source))
    parent = repo.git.show(f"{sha}:candidate.py")
    graph = {"graph_capture": "cuda_graph"}
    for seed in range(12):
        req = request(repo, sha, f"cand/{seed}", "capture graphs", graph, seed=seed)
        result = OfflineExpander().expand(req.model_copy(update={"config_sizes": SIZES}))
        assert result.outcome is ExpansionOutcome.COMMITTED, result.message
        assert result.sha is not None
        child = repo.git.show(f"{result.sha}:candidate.py")
        assert read_regimes(child)["r1"] == read_regimes(parent)["r1"], seed
        assert read_tunables(child)["graph_capture"] == "cuda_graph"


def test_an_idea_every_serving_regime_holds_makes_no_change(
    tmp_path: Path, track3_source: str
) -> None:
    """Held by TUNABLES and r1 (r2 serves nobody): no commit, and the reason says why."""
    source = dispatching(track3_source)
    source = write_tunables(source, {**read_tunables(source), **FUSED})
    repo, sha = make_repo(tmp_path / "repo", source)
    req = request(repo, sha, "cand/x", "capture graphs", {"graph_capture": "cuda_graph"})
    result = OfflineExpander().expand(req.model_copy(update={"config_sizes": SIZES}))
    assert result.outcome is ExpansionOutcome.NO_CHANGE
    assert "already applied, or changes nothing the code reads, in every regime" in result.message
    assert result.sha is None


# What the parent's recorder reported: the fused kernels (r1's narrow sizes) never read the
# torch path's precision or mask mode; the torch path (config 8, TUNABLES) reads them.
FUSED_READ = ["attention", "fused_kernel", "fused_keys", "fused_rows", "graph_capture"]
TORCH_READ = ["attention", "fused_kernel", "graph_capture", "matmul_precision", "padding_mask"]
READ = {c: FUSED_READ for c in ("1", "2", "6", "7", "13")} | {"8": TORCH_READ}


def test_a_regime_reads_what_its_configs_read(track3_source: str) -> None:
    source = dispatching(track3_source)
    assert served_configs(source, SIZES) == {
        DEFAULT_REGIME: ["8"],
        "r1": ["1", "2", "6", "7", "13"],
        "r2": [],
    }
    reads = regime_reads(source, SIZES, {c: set(r) for c, r in READ.items()})
    assert reads == {DEFAULT_REGIME: set(TORCH_READ), "r1": set(FUSED_READ), "r2": None}
    # One served config unreported: anything may act in that regime.
    partial = {c: set(r) for c, r in READ.items() if c != "7"}
    assert regime_reads(source, SIZES, partial)["r1"] is None
    assert regime_reads(source, SIZES, partial)[DEFAULT_REGIME] == set(TORCH_READ)


def expand_many(
    tmp_path: Path, source: str, idea: Mapping[str, str | None], read: dict[str, list[str]]
) -> list[tuple[str, dict[str, set[str]]]]:
    """The regime each of 20 seeded expansions changed, and what it changed per config."""
    repo, sha = make_repo(tmp_path / "repo", source)
    parent = repo.git.show(f"{sha}:candidate.py")
    out = []
    for seed in range(20):
        req = request(repo, sha, f"cand/{seed}", "an idea", idea, seed=seed)
        req = req.model_copy(update={"config_sizes": SIZES, "settings_read": read})
        result = OfflineExpander().expand(req)
        assert result.outcome is ExpansionOutcome.COMMITTED, result.message
        assert result.sha is not None
        changed = changed_settings(parent, repo.git.show(f"{result.sha}:candidate.py"), SIZES)
        assert changed is not None
        out.append(("r1" if "[r1]" in result.message else DEFAULT_REGIME, changed))
    return out


def test_an_idea_goes_only_where_the_parent_read_its_tunables(
    tmp_path: Path, track3_source: str
) -> None:
    """fp16 islands act on the torch path only: never put into the fused regime, where run 11
    screened them as the parent's own code and charged the idea."""
    fp16 = {"matmul_precision": "fp16"}
    source = dispatching(track3_source)
    done = expand_many(tmp_path / "a", source, fp16, READ)
    assert {regime for regime, _ in done} == {DEFAULT_REGIME}
    # Without the reports the same seeds also change r1 (the check above can fail).
    unreported = expand_many(tmp_path / "b", source, fp16, {})
    assert "r1" in {regime for regime, _ in unreported}


def test_random_moves_change_only_what_the_regime_read(tmp_path: Path, track3_source: str) -> None:
    for regime, changed in expand_many(tmp_path, dispatching(track3_source), {}, READ):
        reads = set(FUSED_READ if regime == "r1" else TORCH_READ)
        moved = set().union(*changed.values())
        assert moved & reads, (regime, moved)


def test_an_idea_no_regime_reads_makes_no_change(tmp_path: Path, track3_source: str) -> None:
    """Every serving regime fused (TUNABLES too): no configuration reads the precision."""
    source = dispatching(track3_source)
    source = write_tunables(source, {**read_tunables(source), "fused_kernel": "triton"})
    repo, sha = make_repo(tmp_path / "repo", source)
    req = request(repo, sha, "cand/x", "fp16 islands", {"matmul_precision": "fp16"})
    fused = {c: FUSED_READ for c in SIZES}
    result = OfflineExpander().expand(
        req.model_copy(update={"config_sizes": SIZES, "settings_read": fused})
    )
    assert result.outcome is ExpansionOutcome.NO_CHANGE
    assert "changes nothing the code reads" in result.message


def test_regimes_are_drawn_by_the_configurations_they_serve() -> None:
    """5 configs to 1: r1 is drawn about 5/6 of the time (uniform draws would give 1/2)."""
    rng = np.random.default_rng(7)
    draws = [draw_regime(["TUNABLES", "r1"], {"TUNABLES": 1, "r1": 5}, rng) for _ in range(3000)]
    assert abs(draws.count("r1") / len(draws) - 5 / 6) < 0.03
    # A regime that serves nothing known still gets drawn (weight 1, never 0).
    assert set(draw_regime(["a", "b"], {}, rng) for _ in range(50)) == {"a", "b"}


def test_the_operator_weighs_regimes_by_the_configs_they_serve(track3_source: str) -> None:
    """What draw_regime is given: r1 serves 5 of the 6 configs, TUNABLES 1, r2 none."""
    counts = served_counts(dispatching(track3_source), SIZES)
    assert counts == {DEFAULT_REGIME: 1, "r1": 5, "r2": 0}
    assert served_counts(track3_source, SIZES) == {DEFAULT_REGIME: 6}


def test_an_idea_that_needs_the_fused_kernels_reaches_the_torch_path(
    tmp_path: Path, track3_source: str
) -> None:
    """The torch path never reads the fused kernels' block sizes, but it reads the switch
    they require: an idea about a block size may still switch them on there."""
    done = expand_many(tmp_path, dispatching(track3_source), {"fused_keys": None}, READ)
    assert DEFAULT_REGIME in {regime for regime, _ in done}
    for regime, changed in done:
        if regime == DEFAULT_REGIME:
            assert changed["8"] >= {"fused_keys", "fused_kernel"}, changed


def test_the_replay_script_shows_which_configs_a_repair_reaches(
    tmp_path: Path, track3_source: str
) -> None:
    """benchmarks/repair_regime_replay.py on a run directory's repository: a miss on config 8
    (the only config TUNABLES serves; r1 serves the other twelve) is repaired in TUNABLES
    only; a bad run directory is a clean error."""
    repo, parent = make_repo(tmp_path / "run" / "repo", dispatching(track3_source))
    source = repo.git.show(f"{parent}:candidate.py")
    fp16 = {**read_tunables(source), "matmul_precision": "fp16"}
    (tmp_path / "run" / "repo" / "candidate.py").write_text(write_tunables(source, fp16))
    repo.index.add(["candidate.py"])
    miss = repo.index.commit("the miss").hexsha
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "repair_regime_replay.py"
    args = [str(tmp_path / "run"), parent, miss, "normalized-softmax", "8", "4"]
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 4 and all(f"[{DEFAULT_REGIME}]" in line for line in lines), lines
    assert all(line.endswith("-> changes configs 8") for line in lines), lines
    # '-' for the miss: a plain expansion of the parent, drawn over both regimes by the
    # configs each serves (r1 serves twelve).
    args = [str(tmp_path / "run"), parent, "-", "normalized-softmax", "-", "4"]
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 4 and any("[r1]" in line for line in lines), lines
    # Inputs that would silently replay something else are refused with the expected form.
    run = str(tmp_path / "run")
    for wrong, says in [
        ([run, parent, miss, "normalized-softmax", "-"], "give both as '-'"),
        ([run, parent, "-", "normalized-softmax", "8"], "give both as '-'"),
        ([run, parent, miss, "normalized-softmax", "99"], "not timed"),
        ([run, parent, miss, "normalized-softmax", "8", "ten"], "positive number of seeds"),
        ([run, parent, miss, "no-such-idea", "8"], "its ideas: "),
    ]:
        refused = subprocess.run(
            [sys.executable, str(script), *wrong], capture_output=True, text=True
        )
        assert refused.returncode != 0 and says in refused.stderr, (wrong, refused.stderr)
        assert "Traceback" not in refused.stderr
    bad = [str(tmp_path / "nothing"), parent, miss, "normalized-softmax", "8"]
    failed = subprocess.run([sys.executable, str(script), *bad], capture_output=True, text=True)
    assert failed.returncode != 0 and "holds no candidate repository" in failed.stderr
    assert "Traceback" not in failed.stderr
