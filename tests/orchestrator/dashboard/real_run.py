"""One small real run shared by the run-view and dashboard tests (built once per session)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ledger import Ledger
from orchestrator import service
from orchestrator.state import derive_state
from tests.orchestrator.conftest import ListReporter, fast_settings

SCRIPT_IDEA = "<script>window.pwned = 1</script> fuse the normalization"
DONE = "BUILT"


def _build(root: Path) -> None:
    """Seed + 2 candidates, then a human IDEA whose text is markup and a REDIRECT to the seed,
    then one more candidate (a resumed run: two invocations)."""
    first = service.run_search(
        fast_settings(root, max_candidates=2, verify_frontier=False), ListReporter()
    )
    assert first.reason == "reached 2 candidates", first.reason
    service.inject_message(root, "IDEA", SCRIPT_IDEA, "tester")
    with Ledger.open_path(root / "ledger.sqlite", create=False) as ledger:
        seed = derive_state(ledger).seed_sha
    service.inject_message(root, "REDIRECT", f"parent={seed} steps=1", "tester")
    second = service.run_search(
        fast_settings(root, max_candidates=3, verify_frontier=False), ListReporter()
    )
    assert second.reason == "reached 3 candidates", second.reason


def pristine_run(factory: pytest.TempPathFactory) -> Path:
    """The shared run, built on first use in this session; never written to by tests (copy
    it with `copy_run` to write)."""
    root = factory.getbasetemp() / "shared-real-run" / "run"
    if not (root.parent / DONE).exists():
        shutil.rmtree(root.parent, ignore_errors=True)
        root.mkdir(parents=True)
        _build(root)
        (root.parent / DONE).write_text("ok")
    return root


def copy_run(source: Path, dest: Path) -> Path:
    """A private copy of a run dir (ledger, its anchors, repository, evaluations)."""
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("run.lock", "worktrees"))
    return dest
