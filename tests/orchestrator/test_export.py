"""What `ratchet export` ships: one bundled file where the tree bundles, else a package."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernels.candidate_tree import load_candidate, write_tree
from kernels.track3.workload import track3_workload
from orchestrator.export import ExportError, SubmissionForm, build_submission

WORKLOAD = track3_workload()


def test_the_seed_package_ships_as_one_standalone_file() -> None:
    submission = build_submission(WORKLOAD.seed_sources(), WORKLOAD)
    assert submission.form is SubmissionForm.BUNDLE
    assert list(submission.files) == ["submission.py"] == [submission.entry_module]
    assert "11 modules bundled" in submission.note
    assert "from ." not in submission.files["submission.py"]


def test_a_tree_that_cannot_be_bundled_ships_as_a_package_that_loads(tmp_path: Path) -> None:
    sources = WORKLOAD.seed_sources()
    # Two modules binding one name cannot share one file.
    sources["block.py"] += "\n\ndef weight_key() -> None:\n    return None\n"
    submission = build_submission(sources, WORKLOAD)
    assert submission.form is SubmissionForm.PACKAGE
    assert "weight_key" in submission.note and "defined in both" in submission.note
    assert submission.entry_module == "submission/candidate.py"
    write_tree(submission.files, tmp_path)
    module = load_candidate(tmp_path / submission.entry_module, "t_export_package")
    assert module.OptimizedTransformer is module.UserOptimizedTransformer


def test_a_tree_importing_more_than_torch_is_not_exported() -> None:
    sources = {**WORKLOAD.seed_sources(), "extra.py": "import numpy\n"}
    with pytest.raises(ExportError, match="not a standalone submission"):
        build_submission(sources, WORKLOAD)


def test_what_the_search_accepts_exports() -> None:
    # The run's static policy allows the harmless standard library; an export that refused it
    # left an H200 run's frontier without a submission (collections.abc in one module).
    sources = WORKLOAD.seed_sources()
    sources["capture.py"] = "from collections.abc import Callable\n" + sources["capture.py"]
    assert build_submission(sources, WORKLOAD).form is SubmissionForm.BUNDLE
    sources["capture.py"] = "import os\n" + sources["capture.py"]
    with pytest.raises(ExportError, match="'os' is not allowed"):
        build_submission(sources, WORKLOAD)
