"""Candidate trees: the seed as a package of small modules, loading it, bundling it to one file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from kernels.candidate_tree import (
    CandidateTreeError,
    bundle_sources,
    load_candidate,
    read_tree,
    write_tree,
)
from kernels.track3 import CONFIGS, generate_inputs
from kernels.track3.reference import build_reference_model
from kernels.track3.workload import track3_workload

WORKLOAD = track3_workload()
ENTRY = "candidate.py"


def test_the_seed_is_a_package_of_modules_by_concern() -> None:
    sources = WORKLOAD.seed_sources()
    assert {"candidate.py", "attention.py", "block.py", "fused.py", "fused_kernels.py"} <= set(
        sources
    )
    for path, text in sources.items():
        assert len(text.splitlines()) <= 300, path
    assert "class OptimizedTransformer" in sources[ENTRY]
    assert "TUNABLES = {" in sources[ENTRY]  # the offline expander's block stays in the entry
    assert "@triton.jit" in sources["fused_kernels.py"]


def _outputs(module: object, tunables: dict[str, str]) -> torch.Tensor:
    config = CONFIGS["cpu-2"]
    reference = build_reference_model(config, device="cpu", seed=1234)
    model = module.OptimizedTransformer(config, tunables)  # type: ignore[attr-defined]
    model.load_state_dict(reference.state_dict(), strict=True)
    x, mask = generate_inputs(config, 1234, 0.5, 1.0, "cpu")
    with torch.no_grad():
        return model(x, valid_token_mask=mask)


@pytest.mark.parametrize(
    "tunables",
    [{}, {"attention": "sdpa", "qkv_projection": "packed", "matmul_precision": "fp16"}],
    ids=["reference", "sdpa-packed-fp16"],
)
def test_the_bundle_computes_what_the_package_computes(
    tmp_path: Path, tunables: dict[str, str]
) -> None:
    package = load_candidate(WORKLOAD.seed_entry(), "t_tree_package")
    bundle = tmp_path / "submission.py"
    bundle.write_text(WORKLOAD.seed_bundle())
    bundled = load_candidate(bundle, "t_tree_bundle")
    assert "from ." not in bundle.read_text()
    assert torch.equal(_outputs(package, tunables), _outputs(bundled, tunables))


def test_each_load_gets_its_own_modules_and_library_names_are_not_shadowed(
    tmp_path: Path,
) -> None:
    # A candidate file named like a library must not replace the library for its siblings.
    write_tree(
        {
            ENTRY: "import math\nfrom .helper import VALUE\nclass Entry:\n    value = VALUE\n"
            "    root = math.sqrt(4.0)\n",
            "helper.py": "VALUE = [1]\n",
            "math.py": "sqrt = None\n",
        },
        tmp_path,
    )
    first = load_candidate(tmp_path / ENTRY, "t_tree_first")
    second = load_candidate(tmp_path / ENTRY, "t_tree_second")
    assert first.Entry.root == 2.0
    assert first.Entry.value == [1] and first.Entry.value is not second.Entry.value
    assert sys.modules["t_tree_first.helper"] is not sys.modules["t_tree_second.helper"]


def test_read_tree_takes_a_file_or_a_directory(tmp_path: Path) -> None:
    single = tmp_path / "mine.py"
    single.write_text("x = 1\n")
    assert read_tree(single, ENTRY) == {ENTRY: "x = 1\n"}
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "pkg" / ENTRY).write_text("y = 2\n")
    (tmp_path / "pkg" / "__pycache__" / "junk.py").write_text("")
    assert read_tree(tmp_path / "pkg", ENTRY) == {ENTRY: "y = 2\n"}
    with pytest.raises(CandidateTreeError, match="no entry module"):
        read_tree(tmp_path, "other.py")
    with pytest.raises(CandidateTreeError, match="neither"):
        read_tree(tmp_path / "missing", ENTRY)


def test_aliased_relative_imports_survive_bundling(tmp_path: Path) -> None:
    sources = {
        ENTRY: '"""Doc."""\nfrom __future__ import annotations\n'
        "from .a import make as build\nclass Entry:\n    value = build()\n",
        "a.py": "from __future__ import annotations\nimport math\ndef make():\n"
        "    return math.floor(2.5)\n",
    }
    bundle = tmp_path / "b.py"
    bundle.write_text(bundle_sources(sources, ENTRY))
    text = bundle.read_text()
    assert text.startswith('"""Doc."""') and text.count("from __future__") == 1
    assert load_candidate(bundle, "t_tree_alias").Entry.value == 2


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        ({ENTRY: "from .a import x\n", "a.py": "from .candidate import y\nx = 1\n"}, "cycle"),
        ({ENTRY: "from .a import x\n_h = 1\n", "a.py": "x = 1\n_h = 2\n"}, "defined in both"),
        ({ENTRY: "def f():\n    from .a import x\n", "a.py": "x = 1\n"}, "top-level"),
        ({ENTRY: "from . import a\n", "a.py": "x = 1\n"}, "top-level"),
        ({ENTRY: "from .missing import x\n"}, "does not have"),
        ({ENTRY: "x = 1\n", "sub/a.py": "y = 1\n"}, "only top-level modules"),
        ({ENTRY: "x = (\n"}, "candidate.py:1"),
    ],
    ids=["cycle", "clash", "nested", "package-form", "missing", "subdir", "syntax"],
)
def test_trees_that_cannot_be_bundled_say_why(sources: dict[str, str], message: str) -> None:
    with pytest.raises(CandidateTreeError, match=message):
        bundle_sources(sources, ENTRY)


def test_identical_library_imports_in_two_modules_are_no_clash() -> None:
    sources = {
        ENTRY: "import torch\nfrom .a import f\nclass Entry:\n    pass\n",
        "a.py": "import torch\ndef f():\n    return torch.zeros(1)\n",
    }
    assert bundle_sources(sources, ENTRY).count("import torch") == 2
