"""Issue 17: what a user needs is inside the repository, and the README's own example run dir
is not picked up by git."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_readme_example_run_dirs_are_ignored_by_git() -> None:
    for path in ("runs/night1/ledger.sqlite", "ratchet-run/ledger.sqlite"):
        ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT, check=False)
        assert ignored.returncode == 0, f"{path} is not ignored by git"


def test_readme_and_docs_point_only_inside_the_repository() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "../shared" not in text and "../seeds" not in text, page
        for target in LINK.findall(text):
            if "://" in target:
                continue
            resolved = (page.parent / target).resolve()
            assert resolved.is_relative_to(ROOT), f"{page.name} links outside: {target}"
            assert resolved.exists(), f"{page.name} links to a missing {target}"
    assert (ROOT / "docs" / "measurement.md").is_file()
