"""`status`, `export`, `run` and `ledger verify` on a ledger that was truncated, rewritten or
damaged: refused or warned about loudly, naming `ratchet ledger verify`, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ledger import CandidateRecord, EventRecord, Ledger
from orchestrator import cli
from orchestrator.events import EventKind, RunStarted
from tests.ledger.tampering import corrupt_page, delete_last, middle_page_of, rewrite_and_rehash

ROOT = Path(__file__).resolve().parents[2]
LEAKS = ("Traceback", "sqlite:///", "[SQL", "sqlalche.me", "sqlite3.", "DatabaseError")


def make_run_dir(root: Path) -> Path:
    """A run dir whose ledger holds a started softmax run, its seed and 300 padded events in
    30 commits (the ledger spans dozens of pages); returns the ledger's path."""
    root.mkdir(parents=True)
    path = root / "ledger.sqlite"
    started = RunStarted(
        workload="softmax",
        device="cpu",
        config_set="cpu",
        config_ids=["s1", "s2", "s3"],
        screening_ids=["s1"],
        baseline="eager softmax",
        seed=0,
        settings={},
        resumed=False,
    )
    seed = CandidateRecord(
        sha="a" * 40,
        tree_sha="b" * 40,
        parent_sha=None,
        step=0,
        idea_id=None,
        agent="seed",
        message="seed",
        prompt_hash=None,
        cost={},
    )
    with Ledger.open_path(path) as ledger:
        ledger.append_many([started.to_event(EventKind.RUN_STARTED), seed])
        for batch in range(30):
            ledger.append_many(
                [
                    EventRecord(kind="note", payload={"n": batch * 10 + n, "pad": "x" * 300})
                    for n in range(10)
                ]
            )
    return path


def head_of(path: Path) -> tuple[int, str]:
    with Ledger.open_path(path, create=False) as ledger:
        return ledger.head()


def ratchet(*argv: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_status_prints_the_verified_head_and_checks_incrementally(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_run_dir(tmp_path / "run")
    seq, head_hash = head_of(path)
    assert cli.main(["status", "--run-dir", str(tmp_path / "run")]) == 0
    assert f"ledger: {seq} entries, head {seq}:{head_hash} (verified)" in capsys.readouterr().out
    verified = json.loads((tmp_path / "run" / "ledger.sqlite.verified").read_text())
    assert (verified["seq"], verified["hash"]) == (seq, head_hash)
    with Ledger.open_path(path, create=False) as ledger:
        ledger.append(EventRecord(kind="note", payload={"n": -1}))
        report = ledger.check()  # what the next status does: only the entry after the head
    assert (report.ok, report.checked_from_seq, report.entries_checked) == (True, seq + 1, 1)


def test_status_warns_loudly_when_the_last_entries_were_deleted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_run_dir(tmp_path / "run")
    delete_last(path, 15)
    assert cli.main(["status", "--run-dir", str(tmp_path / "run")]) == 1
    captured = capsys.readouterr()
    first_line = captured.out.splitlines()[0]
    assert first_line.startswith("WARNING: the ledger's hash chain does NOT verify")
    assert "entries 288 to 302 at least were deleted" in first_line
    assert "ratchet ledger verify --run-dir" in first_line
    assert "(NOT VERIFIED)" in captured.out and "steps 0, candidates 1" in captured.out
    assert "WARNING" in captured.err
    assert cli.main(["status", "--json", "--run-dir", str(tmp_path / "run")]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ledger_verified"] is False and "deleted" in data["ledger_problem"]


def test_ledger_verify_names_the_truncation_in_a_real_subprocess(tmp_path: Path) -> None:
    path = make_run_dir(tmp_path / "run")
    seq, head_hash = head_of(path)
    good = ratchet("ledger", "verify", "--run-dir", str(tmp_path / "run"))
    assert good.returncode == 0, good.stderr
    assert f"head {seq}:{head_hash}" in good.stdout and "recorded heads match" in good.stdout
    delete_last(path, 5)
    bad = ratchet("ledger", "verify", "--run-dir", str(tmp_path / "run"))
    assert bad.returncode == 1
    assert bad.stderr.startswith(f"ledger BROKEN at entry {seq - 4} (truncated): ")
    assert "fix: " in bad.stderr
    assert not [leak for leak in LEAKS if leak in bad.stderr], bad.stderr


def test_expect_head_catches_a_rewrite_whose_journal_was_removed_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    path = make_run_dir(run)
    seq, head_hash = head_of(path)  # recorded elsewhere, e.g. in an export manifest
    verify = ["ledger", "verify", "--run-dir", str(run)]
    assert cli.main([*verify, "--expect-head", f"{seq}:{head_hash}"]) == 0
    rewrite_and_rehash(path, 2, {"message": "forged"})
    (run / "ledger.sqlite.heads").unlink()
    (run / "ledger.sqlite.verified").unlink()
    capsys.readouterr()
    assert cli.main(verify) == 0  # what is left agrees with itself...
    assert "note: no head journal" in capsys.readouterr().out  # ...and says what it cannot see
    assert cli.main([*verify, "--expect-head", f"{seq}:{head_hash}"]) == 1
    err = capsys.readouterr().err
    assert f"ledger BROKEN at entry {seq} (expected_head)" in err
    assert f"not the expected {head_hash}" in err
    assert cli.main([*verify, "--expect-head", "12:nothex"]) == 2
    assert "--expect-head: expected head '12:nothex' is not SEQ:HASH" in capsys.readouterr().err


def test_export_refuses_a_ledger_whose_chain_was_rewritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    path = make_run_dir(run)
    rewrite_and_rehash(path, 50, {"payload": {"n": 0, "pad": "forged"}})
    out = tmp_path / "out"
    assert cli.main(["export", "--run-dir", str(run), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "does not verify" in err and "(its later hashes recomputed)" in err
    assert "Nothing was exported" in err and f"'ratchet ledger verify --run-dir {run}'" in err
    assert not out.exists()


def test_run_refuses_to_resume_a_truncated_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    path = make_run_dir(run)
    delete_last(path, 1)
    before = head_of(path)
    argv = ["run", "--run-dir", str(run), "--workload", "softmax", "--device", "cpu"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "does not verify" in err and "Nothing was run" in err and "ratchet ledger verify" in err
    assert head_of(path) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["status"],
        ["ledger", "verify"],
        ["ledger", "show"],
        ["export", "--out", "{tmp}/out"],
        ["run", "--workload", "softmax", "--device", "cpu"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_a_corrupt_page_is_a_clean_error_for_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    run = tmp_path / "run"
    path = make_run_dir(run)
    corrupt_page(path, middle_page_of(path, "entries"))
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    assert cli.main([*args, "--run-dir", str(run)]) in (1, 2)
    err = capsys.readouterr().err
    assert "is damaged: SQLite cannot read part of the file" in err and "backup" in err
    assert not [leak for leak in LEAKS if leak in err], err
    assert not (tmp_path / "out").exists()


def test_status_on_a_corrupt_page_in_a_real_subprocess(tmp_path: Path) -> None:
    path = make_run_dir(tmp_path / "run")
    corrupt_page(path, middle_page_of(path, "entries"))
    done = ratchet("status", "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 2
    assert done.stderr.startswith("ratchet status: error: ledger ")
    assert not [leak for leak in LEAKS if leak in done.stderr + done.stdout], done.stderr
