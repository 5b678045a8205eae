"""The expander's file tools: line-range reads, grep, exact and patch edits, and their errors."""

from __future__ import annotations

import subprocess
from pathlib import Path

import git
import pytest

from agents.edit_tools import (
    MAX_READ_LINES,
    ToolError,
    apply_patch,
    grep,
    list_files,
    read_file,
    str_replace,
)

SOURCE = "".join(f"line {i}\n" for i in range(1, 11)) + "twin\ntwin\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    repo = git.Repo.init(tree)
    (tree / "a.py").write_text(SOURCE)
    (tree / "b.py").write_text("def forward(x):\n    return x\n")
    repo.index.add(["a.py", "b.py"])
    return tree


def test_read_file_by_line_range_is_numbered_and_says_how_to_read_on(root: Path) -> None:
    assert read_file(root, {"path": "a.py", "start_line": 3, "end_line": 4}) == (
        "    3| line 3\n    4| line 4\n[lines 3-4 of 12; read on with start_line=5]"
    )
    assert read_file(root, {"path": "a.py", "start_line": 11}).splitlines() == [
        "   11| twin",
        "   12| twin",
    ]
    with pytest.raises(ToolError, match="past the end"):
        read_file(root, {"path": "a.py", "start_line": 99})
    with pytest.raises(ToolError, match="positive line number"):
        read_file(root, {"path": "a.py", "start_line": 0})


def test_a_long_file_is_read_in_bounded_pieces(root: Path) -> None:
    (root / "long.py").write_text("".join(f"x{i} = {i}\n" for i in range(2000)))
    text = read_file(root, {"path": "long.py"})
    assert text.count("\n") == MAX_READ_LINES
    assert text.endswith(f"read on with start_line={MAX_READ_LINES + 1}]")


def test_list_files_gives_sizes(root: Path) -> None:
    listing = list_files(root, {}).splitlines()
    assert listing[0] == f"a.py  12 lines  {len(SOURCE)} bytes"
    assert all(".git" not in row for row in listing)


def test_grep_finds_lines_and_refuses_a_bad_pattern(root: Path) -> None:
    assert grep(root, {"pattern": r"def \w+"}) == "b.py:1: def forward(x):"
    assert grep(root, {"pattern": "twin", "path": "a.py"}) == "a.py:11: twin\na.py:12: twin"
    assert "no line matches" in grep(root, {"pattern": "nowhere"})
    with pytest.raises(ToolError, match="not a valid regular expression"):
        grep(root, {"pattern": "(unclosed"})


def test_str_replace_edits_one_unique_match(root: Path) -> None:
    assert str_replace(root, {"path": "a.py", "old_text": "line 5\n", "new_text": "five\n"}) == (
        "replaced in a.py: now line 5"
    )
    two = {"path": "b.py", "old_text": "return x", "new_text": "y = x\n    return y"}
    assert str_replace(root, two) == "replaced in b.py: now lines 2-3"
    assert "five\nline 6" in (root / "a.py").read_text()


def test_str_replace_without_a_match_shows_the_nearest_lines(root: Path) -> None:
    with pytest.raises(ToolError, match="not found") as info:
        str_replace(root, {"path": "b.py", "old_text": "    return  x", "new_text": "y"})
    assert "    2|     return x" in str(info.value)
    assert (root / "b.py").read_text() == "def forward(x):\n    return x\n"


def test_str_replace_with_two_matches_names_their_lines(root: Path) -> None:
    with pytest.raises(ToolError, match=r"matches 2 places .*lines 11, 12"):
        str_replace(root, {"path": "a.py", "old_text": "twin", "new_text": "one"})
    assert (root / "a.py").read_text() == SOURCE


def _diff(root: Path, path: str, new_text: str) -> str:
    old = (root / path).read_text()
    (root / path).write_text(new_text)
    diff = subprocess.run(
        ["git", "diff", "--", path], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    (root / path).write_text(old)
    return diff


def test_apply_patch_changes_several_files_at_once(root: Path) -> None:
    patch = _diff(root, "a.py", SOURCE.replace("line 2\n", "two\n"))
    patch += _diff(root, "b.py", "def forward(x):\n    return 2 * x\n")
    assert apply_patch(root, {"patch": patch}) == "patched a.py, b.py"
    assert "two\n" in (root / "a.py").read_text()
    assert "2 * x" in (root / "b.py").read_text()


def test_a_patch_that_does_not_apply_changes_nothing(root: Path) -> None:
    good = _diff(root, "a.py", SOURCE.replace("line 2\n", "two\n"))
    stale = _diff(root, "b.py", "def forward(x):\n    return 2 * x\n").replace(
        "-    return x", "-    return q"
    )
    with pytest.raises(ToolError, match=r"does not apply .*nothing was changed"):
        apply_patch(root, {"patch": good + stale})
    assert (root / "a.py").read_text() == SOURCE, "all hunks or none"


@pytest.mark.parametrize(
    "patch",
    [
        "--- a/../outside.py\n+++ b/../outside.py\n@@ -0,0 +1 @@\n+x\n",
        "--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-a\n+b\n",
        "just some text",
        "",
    ],
    ids=["escape", "git-dir", "no-headers", "empty"],
)
def test_malformed_or_escaping_patches_are_refused(root: Path, patch: str) -> None:
    with pytest.raises(ToolError, match=r"leaves|\.git|names no file|needs 'patch'"):
        apply_patch(root, {"patch": patch})
    assert not (root.parent / "outside.py").exists()
