"""`ratchet run --ray` against a real Ray cluster on loopback with two CPU devices."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import git
import pytest

from ledger import Ledger
from orchestrator import service
from orchestrator.events import EvaluationSummary
from orchestrator.state import derive_state
from tests.orchestrator.test_kill_resume import CONFIG

pytest.importorskip("ray")
pytestmark = pytest.mark.slow
CODE_ROOT = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).parent / "ray"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """`ray start --head` on 127.0.0.1 with two CPUs; its address."""
    # Ray's socket paths must stay short: a temp dir of its own directly under /tmp.
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    port = _free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    start = [str(RAY), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}"]
    start += ["--num-cpus=2", "--num-gpus=0", "--include-dashboard=false", f"--temp-dir={temp}"]
    done = subprocess.run(start, capture_output=True, text=True, env=env, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([str(RAY), "stop", "--force"], capture_output=True, env=env, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def run_dir(cluster: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ray-run")
    config = root / "ratchet.toml"
    config.write_text(CONFIG)
    argv = [sys.executable, "-m", "orchestrator.cli", "--config", str(config), "run"]
    argv += ["--run-dir", str(root / "run"), "--workload", "softmax", "--device", "cpu"]
    argv += ["--ray", cluster, "--expanders", "2", "--max-candidates", "4", "--minutes", "10"]
    env = {**os.environ, "RATCHET_LOCK_DIR": str(root / "locks"), "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run(argv, cwd=CODE_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reached 4 candidates" in done.stdout, done.stdout
    return root / "run"


def test_both_actors_judged_and_every_evaluation_names_its_worker(run_dir: Path) -> None:
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        evaluations = [
            EvaluationSummary.model_validate(e.record.payload) for e in ledger.events("evaluation")
        ]
        floors = [e.record.payload["device_slot"] for e in ledger.events("noise_floor")]
    slots = {e.device_slot for e in evaluations}
    assert len(slots) == 2 and all(str(s).startswith("ray") for s in slots), slots
    assert sorted(map(str, floors)) == sorted(map(str, slots))


def test_the_judge_files_came_back_and_the_commits_were_fetched(run_dir: Path) -> None:
    logs = list((run_dir / "evals").glob("step-*-sweep*/judge.log"))
    assert logs and all(log.stat().st_size > 0 for log in logs)
    repo = git.Repo(run_dir / "repo")
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
    assert len(state.candidates) == 5
    for candidate in state.candidates.values():
        commit = repo.commit(candidate.sha)  # a remote expansion's commit is in the run's repo
        if candidate.parent_sha is not None:
            assert commit.parents[0].hexsha == candidate.parent_sha
        assert candidate.verdict is not None


def test_the_ledger_verifies(run_dir: Path) -> None:
    assert service.verify_ledger(run_dir).ok


def test_an_unreachable_cluster_is_a_clean_error_and_writes_nothing(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "orchestrator.cli", "run", "--run-dir", str(tmp_path / "r")]
    argv += ["--workload", "softmax", "--device", "cpu", "--ray", f"127.0.0.1:{_free_port()}"]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run(argv, cwd=CODE_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "cannot join the Ray cluster" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r").exists()
