"""verify(): an untouched ledger passes; each kind of tampering is caught at the right seq."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ledger import GENESIS_HASH, Ledger, Record, canonical_json, entry_hash
from tests.ledger import factories


def ten_records() -> list[Record]:
    """seq 1 candidate, 2 fingerprint, 3-4 measurements, 5 verdict, 6 message, 7-10 events."""
    return [
        factories.candidate("a"),
        factories.fingerprint(),
        factories.measurement("a", "c0"),
        factories.measurement("a", "c1"),
        factories.verdict("a"),
        factories.message("idea"),
        *(factories.event(n=n) for n in range(4)),
    ]


@pytest.fixture
def ten(ledger: Ledger) -> Ledger:
    """A ledger holding the ten records of ten_records()."""
    ledger.append_many(ten_records())
    return ledger


def tamper(path: Path, table: str, *statements: str) -> None:
    """Drop one table's append-only triggers, then run statements on a raw connection."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        for operation in ("update", "delete"):
            connection.execute(f"DROP TRIGGER ratchet_{table}_no_{operation}")
        for statement in statements:
            connection.execute(statement)
    finally:
        connection.close()


def entry_row(path: Path, seq: int) -> tuple[str, str, str, str]:
    """(kind, payload_json, prev_hash, created_at) of an entry, read directly."""
    connection = sqlite3.connect(path)
    try:
        statement = "SELECT kind, payload_json, prev_hash, created_at FROM entries WHERE seq = ?"
        row: tuple[str, str, str, str] = connection.execute(statement, (seq,)).fetchone()
        return row
    finally:
        connection.close()


def test_untouched_ledger_verifies(ten: Ledger) -> None:
    report = ten.verify()
    assert report.ok
    assert report.entries_checked == 10
    assert report.head_hash == ten.head()[1]
    assert report.first_bad_seq is None
    assert report.problem is None


def test_empty_ledger_verifies(ledger: Ledger) -> None:
    report = ledger.verify()
    assert (report.ok, report.entries_checked, report.head_hash) == (True, 0, GENESIS_HASH)


def test_modified_payload_in_the_middle_is_caught(ten: Ledger, ledger_path: Path) -> None:
    payload = json.loads(entry_row(ledger_path, 5)[1])
    forged = canonical_json(payload | {"verdict": "reject"})
    tamper(ledger_path, "entries", f"UPDATE entries SET payload_json = '{forged}' WHERE seq = 5")
    report = ten.verify()
    assert not report.ok
    assert report.first_bad_seq == 5
    assert report.problem is not None
    assert report.problem.startswith(
        "entry 5 (verdict): stored hash does not match recomputed hash"
    )
    assert report.entries_checked == 5
    assert report.head_hash == ten.entries(after_seq=3, limit=1)[0].hash


def test_rehashed_forgery_breaks_the_next_link(ten: Ledger, ledger_path: Path) -> None:
    kind, payload_json, prev_hash, created_at = entry_row(ledger_path, 5)
    # reason is not an index column, so entry 5 is self-consistent: only the link to 6 breaks.
    forged = canonical_json(json.loads(payload_json) | {"reason": "forged"})
    forged_hash = entry_hash(prev_hash, 5, kind, created_at, forged)
    tamper(
        ledger_path,
        "entries",
        f"UPDATE entries SET payload_json = '{forged}', hash = '{forged_hash}' WHERE seq = 5",
    )
    report = ten.verify()
    assert report.first_bad_seq == 6
    assert report.problem is not None
    assert report.problem.startswith("entry 6 (message): prev_hash")


def test_non_canonical_rewrite_is_caught(ten: Ledger, ledger_path: Path) -> None:
    spaced = json.dumps(json.loads(entry_row(ledger_path, 7)[1]), sort_keys=True)
    tamper(ledger_path, "entries", f"UPDATE entries SET payload_json = '{spaced}' WHERE seq = 7")
    report = ten.verify()
    assert report.first_bad_seq == 7
    assert (
        report.problem
        == "entry 7 (event): payload_json is not in canonical form (it was rewritten)"
    )


def test_modified_index_column_is_caught(ten: Ledger, ledger_path: Path) -> None:
    tamper(ledger_path, "measurements", "UPDATE measurements SET config_id = 'evil' WHERE seq = 4")
    report = ten.verify()
    assert not report.ok
    assert report.first_bad_seq == 4
    assert report.problem == (
        "entry 4 (measurement): index table measurements column config_id holds 'evil' but "
        "the payload says 'c1'"
    )


def test_deleted_index_row_of_last_entry_is_caught(ten: Ledger, ledger_path: Path) -> None:
    tamper(ledger_path, "events", "DELETE FROM events WHERE seq = 10")
    report = ten.verify()
    assert not report.ok
    assert report.first_bad_seq == 10
    assert report.problem == "entry 10 (event): its row in index table events is missing"
    assert report.entries_checked == 10


def test_deleted_entry_in_the_middle_is_caught(ten: Ledger, ledger_path: Path) -> None:
    tamper(ledger_path, "messages", "DELETE FROM messages WHERE seq = 6")
    tamper(ledger_path, "entries", "DELETE FROM entries WHERE seq = 6")
    report = ten.verify()
    assert report.first_bad_seq == 6
    assert report.problem is not None
    assert report.problem.startswith("entry 6 is missing")


def test_orphan_index_row_is_caught(ten: Ledger, ledger_path: Path) -> None:
    tamper(ledger_path, "entries", "DELETE FROM entries WHERE seq = 10")
    report = ten.verify()
    assert report.first_bad_seq == 10
    assert report.problem == (
        "index table events has a row for seq 10, but entry 10 does not exist"
    )


def test_index_row_in_the_wrong_table_is_caught(ten: Ledger, raw: sqlite3.Connection) -> None:
    raw.execute("INSERT INTO events (seq, kind) VALUES (1, 'forged')")
    report = ten.verify()
    assert report.first_bad_seq == 1
    assert report.problem == (
        "entry 1 (candidate): index table events has a row for it, but only event entries "
        "belong there"
    )


def test_dropped_trigger_alone_is_reported(ten: Ledger, ledger_path: Path) -> None:
    tamper(ledger_path, "verdicts")
    report = ten.verify()
    assert not report.ok
    assert report.first_bad_seq is None
    assert report.problem is not None
    assert "ratchet_verdicts_no_update" in report.problem
    assert report.entries_checked == 10


def test_verify_streams_past_one_fetch_batch(ledger: Ledger) -> None:
    ledger.append_many([factories.event(n=n) for n in range(2500)])
    report = ledger.verify()
    assert report.ok
    assert report.entries_checked == 2500
