"""A run dir is resumed or refused, never overwritten; one `ratchet run` per run dir."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import git
import pytest

from orchestrator import cli, service
from orchestrator.run_dir import RunDirError, check_fresh_start, hold_run_dir
from orchestrator.workspace import RunPaths
from tests.orchestrator.conftest import ListReporter, fast_settings

ROOT = Path(__file__).resolve().parents[2]
HOLD = """
import sys, time
from pathlib import Path
from orchestrator.run_dir import hold_run_dir
with hold_run_dir(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_second_run_on_a_held_run_dir_is_refused_naming_the_holder(tmp_path: Path) -> None:
    root = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(root)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        refused = pytest.raises(RunDirError, match=rf"another 'ratchet run'.*pid {holder.pid} on")
        with refused, hold_run_dir(root):
            pass
    finally:
        holder.kill()
        holder.wait()
    with hold_run_dir(root):  # a killed holder leaves no stale lock
        pass


def test_a_run_dir_that_is_a_file_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "afile"
    path.write_text("x")
    assert cli.main(["run", "--run-dir", str(path), "--workload", "softmax"]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err
    assert path.read_text() == "x"


def _seed_repo(root: Path) -> git.Repo:
    repo = git.Repo.init(root / "repo", initial_branch="main")
    (root / "repo" / "candidate.py").write_text("x = 1\n")
    repo.index.add(["candidate.py"])
    repo.index.commit("seed: test")
    return repo


def test_an_interrupted_first_start_may_start_again(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    (root / "ledger.sqlite").write_bytes(b"")
    _seed_repo(root)
    (root / "evals").mkdir()
    check_fresh_start(RunPaths(root))  # only what a start that died leaves: no error


def test_an_empty_ledger_beside_real_work_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    (root / "ledger.sqlite").write_bytes(b"")
    repo = _seed_repo(root)
    (root / "repo" / "candidate.py").write_text("x = 2\n")
    repo.index.add(["candidate.py"])
    repo.index.commit("step 1")
    (root / "evals" / "step-00001-sweep").mkdir(parents=True)
    with pytest.raises(RunDirError, match="evals, repo: a new run would overwrite them"):
        check_fresh_start(RunPaths(root))


@pytest.mark.slow
def test_a_zero_byte_ledger_in_a_used_run_dir_loses_nothing(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    service.run_search(fast_settings(run_dir, max_candidates=1), ListReporter())
    repo = git.Repo(run_dir / "repo")
    commits = sorted(h.commit.hexsha for h in repo.heads)
    evals = sorted(p.name for p in (run_dir / "evals").iterdir())
    (run_dir / "ledger.sqlite").write_bytes(b"")  # the ledger lost, the rest intact
    with pytest.raises(service.RatchetError, match="a new run would overwrite them"):
        service.run_search(fast_settings(run_dir, max_candidates=2), ListReporter())
    assert sorted(h.commit.hexsha for h in git.Repo(run_dir / "repo").heads) == commits
    assert sorted(p.name for p in (run_dir / "evals").iterdir()) == evals


def test_ratchet_run_on_a_busy_run_dir_exits_cleanly_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(root)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        code = cli.main(["run", "--run-dir", str(root), "--workload", "softmax"])
    finally:
        holder.kill()
        holder.wait()
    assert code == 2 and f"pid {holder.pid}" in capsys.readouterr().err
    assert sorted(p.name for p in root.iterdir()) == ["run.lock"]
