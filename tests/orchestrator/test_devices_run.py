"""A real run on two CPU slots with two expanders: one worker per device, every arm of a
comparison on one device, a floor per device, and kill -9 mid-flight resumes exactly."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from ledger import Ledger, LedgerError
from orchestrator import service
from orchestrator.events import EvaluationSummary, EventKind
from orchestrator.state import derive_state
from tests.orchestrator.conftest import ListReporter, fast_settings
from tests.orchestrator.test_kill_resume import CONFIG, start

pytestmark = pytest.mark.slow
CODE_ROOT = Path(__file__).resolve().parents[2]
SLOTS = {"cpu:0", "cpu:1"}


def _evaluations(ledger: Ledger) -> list[EvaluationSummary]:
    return [EvaluationSummary.model_validate(e.record.payload) for e in ledger.events("evaluation")]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("devices-run") / "run"
    settings = fast_settings(root, max_candidates=6, devices="0,1", expanders=2)
    summary = service.run_search(settings, ListReporter())
    assert summary.reason == "reached 6 candidates"
    return root


def test_each_device_has_its_own_noise_floor(run_dir: Path) -> None:
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        floors = [e.record.payload for e in ledger.events(EventKind.NOISE_FLOOR)]
        state = derive_state(ledger)
    assert {f["device_slot"] for f in floors} == SLOTS
    for slot in SLOTS:
        assert state.noise_floor("cpu", slot=slot) is not None


def test_every_evaluation_names_its_device_and_both_devices_judged(run_dir: Path) -> None:
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        evaluations = _evaluations(ledger)
        devices_of: dict[str, set[object]] = {}
        for stored in ledger.measurements():
            devices_of.setdefault(stored.record.evaluation_id, set()).add(
                stored.record.extra["device"]
            )
    assert {e.device_slot for e in evaluations} == SLOTS
    for evaluation in evaluations:
        # One comparison, one device: every arm of it measured where the summary says.
        assert devices_of.get(evaluation.evaluation_id, {evaluation.device_slot}) == {
            evaluation.device_slot
        }


def test_verdicts_use_the_floor_of_the_device_that_swept(run_dir: Path) -> None:
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
        sweeps = {
            (e.sha, e.evaluation_id): e.device_slot
            for e in _evaluations(ledger)
            if e.stage.value == "sweep" and not e.taint and e.superseded_by is None
        }
        verdicts = [v.record for v in ledger.verdicts() if v.record.stage == "sweep"]
    by_sha = {sha: slot for (sha, _), slot in sweeps.items()}
    checked = 0
    for verdict in verdicts:
        slot = by_sha.get(verdict.candidate_sha)
        if slot is None or verdict.details.get("noise_floor") is None:
            continue
        assert verdict.details["noise_floor"] == state.noise_floor("cpu", slot=slot)
        checked += 1
    assert checked >= 2


def test_the_ledger_verifies_and_no_candidate_has_two_verdicts(run_dir: Path) -> None:
    assert service.verify_ledger(run_dir).ok
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        judged = Counter(v.record.candidate_sha for v in ledger.verdicts())
    assert judged and max(judged.values()) == 1


def _start(run_dir: Path, config: Path) -> subprocess.Popen[bytes]:
    return start(run_dir, config, 6, "--devices", "0,1", "--expanders", "2")


def _two_in_flight(ledger_path: Path) -> bool:
    """Two steps hold a committed candidate and no verdict: both devices are judging."""
    if not ledger_path.exists():
        return False
    try:
        with Ledger.open_path(ledger_path, create=False) as ledger:
            state = derive_state(ledger)
    except LedgerError:
        return False
    judging = [s for s in state.open_steps if s.sha is not None and s.static is not None]
    return len(judging) >= 2


def test_sigkill_with_two_devices_in_flight_then_resume(tmp_path: Path) -> None:
    run_dir, config = tmp_path / "run", tmp_path / "ratchet.toml"
    config.write_text(CONFIG)
    proc = _start(run_dir, config)
    deadline = time.monotonic() + 240
    while not _two_in_flight(run_dir / "ledger.sqlite"):
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        assert time.monotonic() < deadline, "the run never had two steps in flight"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        open_before = len(derive_state(ledger).open_steps)
    assert open_before >= 2

    again = _start(run_dir, config)
    out, _ = again.communicate(timeout=300)
    assert again.returncode == 0, out.decode()
    assert "resuming run" in out.decode() and "reached 6 candidates" in out.decode()
    assert service.verify_ledger(run_dir).ok
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
        evaluations = _evaluations(ledger)
        keys = [
            (m.record.evaluation_id, m.record.config_id, m.record.arm)
            for m in ledger.measurements()
        ]
        shas = [c.record.sha for c in ledger.candidates()]
        judged = Counter(v.record.candidate_sha for v in ledger.verdicts())
    assert len(shas) == len(set(shas)) == 7
    assert not state.open_steps and all(step.closed for step in state.steps.values())
    assert max(judged.values()) == 1, "a candidate was judged twice into the ledger"
    assert len({e.evaluation_id for e in evaluations}) == len(evaluations)
    assert len(keys) == len(set(keys))
    for cand in state.candidates.values():
        assert cand.verdict is not None, f"{cand.sha[:10]} has no verdict"
