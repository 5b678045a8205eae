"""A damaged file (a corrupt page) gives a clean LedgerError naming the file, never the
SQLAlchemy URL, statement or driver exception text."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import CorruptLedgerError, EventRecord, Ledger, NotALedgerError, ProblemKind
from tests.ledger.tampering import corrupt_page, middle_page_of

LEAKS = ("sqlite:///", "[SQL", "sqlalche.me", "sqlite3.", "DatabaseError")


def big_ledger(path: Path) -> None:
    """600 events of ~300 bytes: some 50 pages of entries."""
    with Ledger.open_path(path) as ledger:
        for batch in range(6):
            events = [
                EventRecord(kind="tick", payload={"n": 100 * batch + n, "pad": "x" * 250})
                for n in range(100)
            ]
            ledger.append_many(events)


def assert_clean(message: str, path: Path) -> None:
    assert str(path) in message and "damaged" in message and "backup" in message
    assert not [leak for leak in LEAKS if leak in message], message


def test_a_corrupt_page_in_the_middle_is_a_clean_error(ledger_path: Path) -> None:
    big_ledger(ledger_path)
    corrupt_page(ledger_path, middle_page_of(ledger_path, "entries"))
    with Ledger.open_path(ledger_path, create=False) as ledger:
        with pytest.raises(CorruptLedgerError) as caught:
            ledger.entries()
        assert_clean(str(caught.value), ledger_path)
        with pytest.raises(CorruptLedgerError):
            ledger.events(kind="tick")
        report = ledger.verify()
    assert not report.ok and report.problem_kind is ProblemKind.DAMAGED
    assert report.problem is not None
    assert_clean(report.problem, ledger_path)


def test_the_incremental_check_reports_damage_instead_of_raising(ledger_path: Path) -> None:
    big_ledger(ledger_path)
    corrupt_page(ledger_path, middle_page_of(ledger_path, "entries"))
    with Ledger.open_path(ledger_path, create=False) as ledger:
        report = ledger.check()  # no checkpoint: walks everything, reaches the bad page
    assert report.problem_kind is ProblemKind.DAMAGED and report.problem is not None
    assert_clean(report.problem, ledger_path)


def test_a_corrupt_index_page_the_walk_never_reads_is_caught(ledger_path: Path) -> None:
    big_ledger(ledger_path)
    corrupt_page(ledger_path, middle_page_of(ledger_path, "ix_events_kind"))
    with Ledger.open_path(ledger_path, create=False) as ledger:
        assert len(ledger.entries()) == 600  # the walk reads the table, never this index
        report = ledger.verify()
    assert report.problem_kind is ProblemKind.DAMAGED
    assert report.problem is not None and "quick_check" in report.problem


def test_a_corrupt_schema_page_fails_at_open(ledger_path: Path) -> None:
    big_ledger(ledger_path)
    corrupt_page(ledger_path, 1)  # page 2: the migration table, read when the ledger opens
    with pytest.raises(CorruptLedgerError) as caught:
        Ledger.open_path(ledger_path, create=False)
    assert_clean(str(caught.value), ledger_path)


def test_a_file_that_is_no_database_names_no_driver_internals(ledger_path: Path) -> None:
    ledger_path.write_bytes(b"not a database at all" * 300)
    with pytest.raises(NotALedgerError) as caught:
        Ledger.open_path(ledger_path)
    message = str(caught.value)
    assert str(ledger_path) in message and "file is not a database" in message
    assert not [leak for leak in LEAKS if leak in message], message
