"""run_checks: an edit that touches Triton kernels is checked with the kernels really running
(Triton's interpreter on the CPU); other edits are checked as they are."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import git
import pytest

from agents.tunables import read_tunables, write_tunables
from harness.runner import RunnerSettings
from kernels.candidate_tree import write_tree
from kernels.track3.workload import track3_workload
from orchestrator.checker import HarnessChecker, changed_files

pytest.importorskip("triton")
pytestmark = pytest.mark.slow
CODE_ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = track3_workload()
GELU = "tl.math.erf(t * 0.7071067811865476)"


def fused_worktree(root: Path) -> Path:
    """A committed track3 seed package whose tunables take the fused Triton path."""
    sources = WORKLOAD.seed_sources()
    entry = sources["candidate.py"]
    sources["candidate.py"] = write_tunables(
        entry, {**read_tunables(entry), "fused_kernel": "triton", "matmul_precision": "fp16"}
    )
    repo = git.Repo.init(root)
    write_tree(sources, root)
    repo.index.add(sorted(sources))
    repo.index.commit("fused seed")
    return root


def checker(tmp_path: Path) -> HarnessChecker:
    runner = RunnerSettings(python=sys.executable, lock_dir=tmp_path / "locks", code_root=CODE_ROOT)
    # cpu-1: width 128, which the fused kernels serve.
    return HarnessChecker(WORKLOAD, [], runner, tmp_path / "checks", ["cpu-1"])


def failing(text: str) -> int:
    """Failing elements the quick check reported (0 when it passed)."""
    return sum(int(n) for n in re.findall(r"(\d+) failing elements", text))


def test_a_broken_triton_edit_fails_the_checks_because_the_kernels_ran(tmp_path: Path) -> None:
    tree = fused_worktree(tmp_path / "wt")
    kernels = tree / "fused_kernels.py"
    kernels.write_text(kernels.read_text().replace(GELU, "tl.math.erf(t * 0.75)"))
    assert changed_files(tree) == ["fused_kernels.py"]
    report = checker(tmp_path).check(tree)
    assert not report.passed and "interpreter" in report.text
    assert failing(report.text) > 1000, report.text


def test_a_sound_triton_edit_passes_under_the_interpreter_and_others_run_as_they_are(
    tmp_path: Path,
) -> None:
    tree = fused_worktree(tmp_path / "wt")
    kernels = tree / "fused_kernels.py"
    kernels.write_text(kernels.read_text().replace(GELU, "tl.math.erf(t * 0.70710678118654752)"))
    report = checker(tmp_path).check(tree)
    # The fp16 kernels sit near the tolerance of the exact fp32 CPU reference: a salted trial
    # has failed by one element (0.00247 against atol 0.002). A sound edit stays within that.
    assert "interpreter" in report.text and failing(report.text) <= 2, report.text
    git.Repo(tree).git.checkout("--", "fused_kernels.py")
    (tree / "attention.py").write_text((tree / "attention.py").read_text() + "\n# tuned\n")
    report = checker(tmp_path).check(tree)
    # Same fp16 margin as above: a salted trial may land one element past atol (seen: 0.00206).
    assert "interpreter" not in report.text, report.text
    assert report.passed or failing(report.text) <= 2, report.text
