"""The CLI views on a real run: the status candidates table, `ledger show` with readable
columns and its --kind / --json filters, and long judge runs reported while they last."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from harness.models import share_text
from harness.runner import RunnerSettings
from ledger import Ledger
from orchestrator import cli, service
from orchestrator.calibration import qualify
from orchestrator.judge_file import temporary_judging
from orchestrator.judge_watch import JudgeWatch
from orchestrator.state import derive_state
from orchestrator.workloads import load_workload
from tests.orchestrator.views_run import views_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return views_run(tmp_path_factory)


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _head(run_dir: Path) -> tuple[int, str]:
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        return ledger.head()


def test_status_shows_the_best_candidates_rejected_ones_too(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _main(capsys, "status", "--run-dir", str(run_dir), "--candidates", "50")
    assert code == 0
    text = out
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        state = derive_state(ledger)
    table = out.split("candidates (the frontier", 1)[1].split("ideas (", 1)[0]
    assert state.frontier_sha is not None
    assert f"* {state.frontier_sha[:10]}" in table  # the frontier first, marked
    assert table.index(state.frontier_sha[:10]) < min(
        table.index(c.sha[:10]) for c in state.candidates.values() if c.sha != state.frontier_sha
    )
    for cand in state.candidates.values():  # every one, failed and unpromoted included
        assert cand.sha[:10] in table and cand.verdict is not None
        row = next(line for line in table.splitlines()[2:] if line[4:14] == cand.sha[:10])
        assert cand.verdict.value in row
    assert "failed_static" in table

    code, out, _ = _main(capsys, "status", "--run-dir", str(run_dir), "--json", "--candidates", "2")
    rows = json.loads(out)["best_candidates"]
    assert (
        code == 0
        and len(rows) == 2
        and rows[0]["frontier"]
        and rows[0]["sha"] == state.frontier_sha
    )
    assert set(rows[0]) >= {
        "sha",
        "step",
        "parent_sha",
        "idea_id",
        "verdict",
        "objective",
        "vs_parent",
        "tainted",
        "reason",
    }
    objectives = [r["objective"] for r in rows[1:] if r["objective"] is not None]
    assert objectives == sorted(objectives, reverse=True)
    # How close the frontier's pass came to failing, per config: every share below 1 (it
    # passed), reported for every config it was timed on, and shown in the text view.
    frontier = json.loads(_main(capsys, "status", "--run-dir", str(run_dir), "--json")[1])[
        "frontier"
    ]
    used = frontier["per_config_tolerance_used"]
    assert set(used) == set(frontier["per_config_speedup"]) and used
    assert all(0 <= share < 1 for share in used.values()), used
    config_id, share = next(iter(used.items()))
    assert f"config {config_id:>8}: " in text and f"(tolerance used {share_text(share)})" in text

    with pytest.raises(SystemExit) as exited:
        cli.main(["status", "--run-dir", str(run_dir), "--candidates", "-3"])
    assert exited.value.code == 2 and "'-3' is not a count" in capsys.readouterr().err


def test_ledger_show_reads_as_columns_per_kind(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _main(capsys, "ledger", "show", "--run-dir", str(run_dir))
    lines = out.splitlines()
    assert code == 0 and len(lines) == _head(run_dir)[0]
    assert not [line for line in lines if '{"' in line], "no raw JSON in the readable view"
    by_kind = {line.split()[3]: line for line in lines}
    assert set(by_kind) == {
        "candidate",
        "measurement",
        "verdict",
        "message",
        "fingerprint",
        "event",
    }
    assert " ms (" in by_kind["measurement"] and "config " in by_kind["measurement"]
    assert any("noise_floor: cpu: floor" in line for line in lines)
    assert any("message" in line and "IDEA by tester: <script>" in line for line in lines)
    assert any("failed_static at static" in line for line in lines)


def test_ledger_show_filters_by_kind_and_gives_json_lines(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Ledger.open_path(run_dir / "ledger.sqlite", create=False) as ledger:
        verdicts, entries = ledger.verdicts(), ledger.entries()
    code, out, _ = _main(capsys, "ledger", "show", "--run-dir", str(run_dir), "--kind", "verdict")
    assert code == 0 and len(out.splitlines()) == len(verdicts)
    assert all(line.split()[3] == "verdict" for line in out.splitlines())

    argv = ["ledger", "show", "--run-dir", str(run_dir), "--kind", "step_started", "--limit", "2"]
    code, out, _ = _main(capsys, *argv)
    steps = [e.seq for e in entries if e.payload.get("kind") == "step_started"]
    assert code == 0 and [int(line.split()[0]) for line in out.splitlines()] == steps[-2:]

    code, out, _ = _main(capsys, "ledger", "show", "--run-dir", str(run_dir), "--json")
    shown = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(shown) == len(entries)
    for got, entry in zip(shown, entries, strict=True):
        assert got["seq"] == entry.seq and got["hash"] == entry.hash
        assert got["payload"] == entry.payload  # whole, never cut
        assert got["summary"]


@pytest.mark.parametrize("argv", [["show", "--kind", "verdicts"], ["verify", "--kind", "event"]])
def test_a_wrong_kind_lists_the_valid_ones_and_does_nothing(
    run_dir: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    before = _head(run_dir)
    code, out, err = _main(capsys, "ledger", *argv, "--run-dir", str(run_dir))
    assert code == 2 and out == "" and "Traceback" not in err
    if argv[0] == "show":
        assert "'verdicts' is not a kind" in err and "verdict, message" in err
        assert "noise_floor" in err  # event kinds are listed too
    else:
        assert "go with 'ledger show'" in err
    assert _head(run_dir) == before


def test_a_long_judge_says_what_it_is_waiting_for(tmp_path: Path) -> None:
    lines: list[str] = []
    runner = RunnerSettings(lock_dir=tmp_path / "locks", code_root=service.CODE_ROOT)
    judging, scratch = temporary_judging(load_workload("softmax"), "cpu", runner)
    with scratch:
        qualify(replace(judging, notice=lines.append, watch_every_s=0.2))
    # Qualification takes a second or two here: at 0.2 s, it is reported while it runs.
    assert any(line.startswith("  still qualifying the device (cpu) after ") for line in lines)


def test_the_watch_counts_configs_by_phase_and_passes_lock_waits_on() -> None:
    lines: list[str] = []
    watch = JudgeWatch("sweep of abc (step 3)", lines.append, configs=3, every_s=60)
    assert watch.line().endswith("(interpreter, imports, device set-up)")
    watch.progress("config s1: correctness")
    assert "config s1: correctness (building the arms, compile and warm-up" in watch.line()
    assert watch.line().endswith("config 1 of 3")
    watch.progress("config s2: correctness")
    watch.progress("config s1: timing 3 arms")
    assert "still sweep of abc (step 3) after" in watch.line()
    assert watch.line().endswith("config s1: timing 3 arms, config 1 of 3")
    watch.progress("waiting for the device lock /x (held by pid 7; 0 s of at most 60 s)")
    assert lines == ["  waiting for the device lock /x (held by pid 7; 0 s of at most 60 s)"]
