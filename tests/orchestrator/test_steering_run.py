"""Issue 17, steering and feedback, on real runs through the CLI: a wait for the device lock is
reported, the run ends with what to do next, budgets count the whole run, a bad CONSTRAINT is
refused with the valid choices, a CONSTRAINT every candidate fails stops the run (its findings
printed once), and a retracted CONSTRAINT stops applying."""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

import pytest

from harness.lock import DeviceLock
from harness.static_checks import parse_constraint
from ledger import Ledger, MessageRecord
from orchestrator import cli, service
from orchestrator.state import derive_state

pytestmark = pytest.mark.slow

CONFIG = """
[ratchet]
torch_threads = 1
verify_frontier = false
max_same_failures = 3
[ratchet.screen_timing]
min_rounds = 4
max_rounds = 8
budget_s = 0.3
target_half_width = 0.05
[ratchet.sweep_timing]
min_rounds = 6
max_rounds = 12
budget_s = 0.5
"""
FINDING_LINE = re.compile(r"^\S+\.py:\d+: \[constraint\] ", re.MULTILINE)


def _run(config: Path, run_dir: Path, *flags: str) -> int:
    argv = ["--config", str(config), "run", "--run-dir", str(run_dir)]
    return cli.main([*argv, "--workload", "softmax", "--device", "cpu", *flags])


def _entries(run_dir: Path) -> int:
    return service.verify_ledger(run_dir).entries_checked


def test_a_run_steered_by_constraints_retractions_and_budgets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir, config, locks = tmp_path / "run", tmp_path / "ratchet.toml", tmp_path / "locks"
    config.write_text(CONFIG)
    monkeypatch.setenv("RATCHET_LOCK_DIR", str(locks))

    # Another evaluation holds the device lock when the run starts: the wait is reported.
    lock = DeviceLock(locks, "cpu")
    lock.acquire(timeout_s=5)
    release = threading.Timer(3.0, lock.release)
    release.start()
    try:
        assert _run(config, run_dir, "--max-candidates", "1") == 0
    finally:
        release.join()
    out = capsys.readouterr().out
    assert "waiting for the device lock" in out and "device lock free after" in out, out
    assert f"held by pid {os.getpid()}" in out  # this test holds it
    # It ends with what to do next, the run dir filled in.
    assert f"ratchet status --run-dir {run_dir}\n" in out
    assert f"ratchet export --run-dir {run_dir} --out {run_dir / 'export'}\n" in out
    assert "tainted sweeps:" in out and "dashboard" not in out

    # Budgets count the whole run: the time of the first invocation is already used.
    assert _run(config, run_dir, "--minutes", "0.01") == 0
    out = capsys.readouterr().out
    assert "stopped: time budget of 0.01 min used" in out and "1 earlier invocation" in out
    assert "; 0 steps in" in out

    # A CONSTRAINT that names no tunable value, an unknown tunable, or what the frontier itself
    # uses is refused with the choices and the format; nothing is written.
    before = _entries(run_dir)
    refusals = {
        "forbid exp_passes": ["without a value", "'forbid exp_passes=once'", "expected"],
        "forbid nosuchtunable=1": ["unknown tunable 'nosuchtunable'", "exp_passes=twice|once"],
        "forbid normalize=nope": ["'nope' is not a value", "divide, reciprocal_multiply"],
        "forbid torch.exp": ["broken by the frontier", "uses torch.exp"],
    }
    for text, needles in refusals.items():
        assert cli.main(["inject", "CONSTRAINT", text, "--run-dir", str(run_dir)]) == 2
        err = capsys.readouterr().err
        assert all(n in err for n in needles), err
        assert "Traceback" not in err
    assert _entries(run_dir) == before

    # A ledger written before the check holds such a CONSTRAINT: every candidate fails it.
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        payload = parse_constraint("forbid torch.exp").model_dump(mode="json")
        bad = ledger.append(
            MessageRecord(kind="CONSTRAINT", text="forbid torch.exp", author="old", payload=payload)
        )
    assert _run(config, run_dir, "--minutes", "10", "--max-candidates", "30") == 0
    out = capsys.readouterr().out
    assert "3 candidates in a row" in out and "failed the same check" in out, out
    assert f"'ratchet inject RETRACT {bad}'" in out
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
    failed = [s for s in state.steps.values() if s.static is not None and not s.static.passed]
    assert len(failed) == 3
    # The findings are printed once; the next two failures only refer to them.
    assert len(FINDING_LINE.findall(out)) == len(failed[0].static.findings)  # type: ignore[union-attr]
    assert out.count("static checks failed: the same") == 2

    # RETRACT withdraws it: status shows it withdrawn, and the next candidate is not held to it.
    assert cli.main(["inject", "RETRACT", str(bad), "--run-dir", str(run_dir)]) == 0
    assert f"retracted message #{bad}" in capsys.readouterr().out
    assert cli.main(["inject", "RETRACT", str(bad), "--run-dir", str(run_dir)]) == 2
    assert "no message in force" in capsys.readouterr().err
    assert cli.main(["status", "--run-dir", str(run_dir), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["constraints"] == []
    (withdrawn,) = [m for m in status["messages"] if m["seq"] == bad]
    assert withdrawn["retracted_by"] > bad
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        stages = [e.record.payload["stage"] for e in ledger.events("evaluation")]
    assert status["taint"]["sweeps"] == stages.count("sweep") >= 1
    total = status["candidates"]  # the seed included: the run holds total - 1 new ones
    assert _run(config, run_dir, "--minutes", "10", "--max-candidates", str(total)) == 0
    assert f"stopped: reached {total} candidates" in capsys.readouterr().out
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        last = derive_state(ledger).steps
    newest = last[max(last)]
    assert newest.static is not None and newest.static.passed
