"""Arms, artifacts and git branches moved by value between hosts."""

from __future__ import annotations

from pathlib import Path

import git
import pytest

from harness.models import ArmKind, ArmSpec, EvaluationRequest
from kernels.workload import TrialSpec
from workers.shipping import (
    ShippedArms,
    bundle_refs,
    clone_bundle,
    code_digest,
    fetch_bundle,
    pack_arms,
    read_artifacts,
    unpack_arms,
    write_artifacts,
)


def _request(module: Path) -> EvaluationRequest:
    return EvaluationRequest(
        evaluation_id="sha:sweep",
        workload="softmax",
        device="cpu",
        config_ids=["s1"],
        arms=[
            ArmSpec(
                name="candidate", kind=ArmKind.MODULE, module_path=str(module), entry_point="Model"
            ),
            ArmSpec(name="baseline", kind=ArmKind.REFERENCE),
        ],
        trials=[TrialSpec(seed=1)],
    )


def test_arms_travel_as_files_and_land_under_the_new_work_dir(tmp_path: Path) -> None:
    here = tmp_path / "here" / "step-1-sweep"
    module = here / "arms" / "candidate" / "pkg" / "candidate.py"
    module.parent.mkdir(parents=True)
    module.write_text("X = 1\n")
    (module.parent / "helper.py").write_text("Y = 2\n")
    shipped = ShippedArms.model_validate_json(pack_arms(_request(module), here).model_dump_json())
    there = tmp_path / "there" / "step-1-sweep"
    moved = unpack_arms(_request(module), shipped, there)
    landed = Path(str(moved.arms[0].module_path))
    assert landed == there / "arms" / "candidate" / "pkg" / "candidate.py"
    assert landed.read_text() == "X = 1\n" and (landed.parent / "helper.py").is_file()
    assert moved.arms[1].module_path is None  # the reference arm needs no files


def test_a_shipped_path_cannot_leave_the_arm_tree(tmp_path: Path) -> None:
    shipped = ShippedArms(
        files={"candidate": {"../../escape.py": b"x"}}, entries={"candidate": "a"}
    )
    with pytest.raises(ValueError, match="leaves the arm's tree"):
        unpack_arms(_request(tmp_path / "m.py"), shipped, tmp_path / "work")
    assert not (tmp_path / "escape.py").exists()


def test_only_the_judge_files_come_back(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "judge.log").write_text("log")
    (tmp_path / "a" / "secret.txt").write_text("no")
    artifacts = read_artifacts(tmp_path / "a")
    assert set(artifacts) == {"judge.log"}
    write_artifacts(tmp_path / "b", {**artifacts, "../evil": b"x", "result.json": b"{}"})
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["judge.log", "result.json"]


def test_a_branch_goes_out_and_comes_back_with_the_same_commit(tmp_path: Path) -> None:
    origin = git.Repo.init(tmp_path / "origin")
    (tmp_path / "origin" / "f.txt").write_text("one")
    origin.index.add(["f.txt"])
    base = origin.index.commit("base")
    clone = clone_bundle(bundle_refs(tmp_path / "origin", ["--all"]), tmp_path / "clone")
    remote = git.Repo(clone)
    remote.create_head("step-00001", base.hexsha)
    remote.git.checkout("step-00001")
    (clone / "f.txt").write_text("two")
    remote.index.add(["f.txt"])
    made = remote.index.commit("child")
    fetch_bundle(
        tmp_path / "origin",
        bundle_refs(clone, ["refs/heads/step-00001"]),
        "refs/heads/step-00001:refs/heads/step-00001",
    )
    assert origin.commit("step-00001").hexsha == made.hexsha
    assert origin.commit("step-00001").parents[0].hexsha == base.hexsha


def test_the_code_digest_changes_with_the_judge_sources(tmp_path: Path) -> None:
    for package in ("harness", "kernels"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "a.py").write_text("A = 1\n")
    before = code_digest(tmp_path)
    assert code_digest(tmp_path) == before
    (tmp_path / "harness" / "a.py").write_text("A = 2\n")
    assert code_digest(tmp_path) != before
