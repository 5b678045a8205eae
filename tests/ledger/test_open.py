"""Opening ledgers: creation, missing files, foreign databases and schema versions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ledger import (
    SCHEMA_VERSION,
    Ledger,
    LedgerError,
    LedgerNotFoundError,
    NotALedgerError,
    SchemaVersionError,
)
from tests.ledger import factories


def test_open_creates_schema_with_wal_and_version(ledger_path: Path) -> None:
    Ledger.open_path(ledger_path).close()
    connection = sqlite3.connect(ledger_path)
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert connection.execute("SELECT application, version FROM schema_info").fetchall() == [
            ("ratchet-ledger", SCHEMA_VERSION)
        ]
    finally:
        connection.close()


def test_create_false_on_missing_file_names_the_path(ledger_path: Path) -> None:
    with pytest.raises(LedgerNotFoundError, match=str(ledger_path)):
        Ledger.open_path(ledger_path, create=False)
    assert not ledger_path.exists()


def test_create_false_on_empty_database_is_not_found(ledger_path: Path) -> None:
    ledger_path.touch()
    with pytest.raises(LedgerNotFoundError, match="empty"):
        Ledger.open_path(ledger_path, create=False)


def test_missing_directory_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "no" / "such" / "ledger.sqlite"
    with pytest.raises(LedgerNotFoundError, match="does not exist"):
        Ledger.open_path(path)
    assert not (tmp_path / "no").exists()


def test_newer_schema_version_is_refused(ledger_path: Path) -> None:
    Ledger.open_path(ledger_path).close()
    connection = sqlite3.connect(ledger_path, isolation_level=None)
    try:
        connection.execute("DROP TRIGGER ratchet_schema_info_no_update")
        connection.execute("UPDATE schema_info SET version = ?", (SCHEMA_VERSION + 1,))
    finally:
        connection.close()
    with pytest.raises(SchemaVersionError, match=f"schema version {SCHEMA_VERSION + 1}"):
        Ledger.open_path(ledger_path)


def test_other_sqlite_database_is_not_a_ledger(ledger_path: Path) -> None:
    connection = sqlite3.connect(ledger_path)
    connection.execute("CREATE TABLE people (name TEXT)")
    connection.commit()
    connection.close()
    with pytest.raises(NotALedgerError, match="people"):
        Ledger.open_path(ledger_path)


def test_garbage_file_is_not_a_ledger(ledger_path: Path) -> None:
    ledger_path.write_bytes(b"this is not a database, just some bytes" * 100)
    with pytest.raises(NotALedgerError, match="not a readable SQLite database"):
        Ledger.open_path(ledger_path)


def test_unsupported_backend_is_refused_clearly() -> None:
    with pytest.raises(LedgerError, match="'mysql' is not supported") as caught:
        Ledger.open("mysql://user:secret@localhost/ratchet")
    assert "secret" not in str(caught.value)
    assert "postgresql+psycopg://" in str(caught.value)  # the fix names what is supported


def test_unsupported_postgresql_driver_is_refused_clearly() -> None:
    with pytest.raises(LedgerError, match="driver 'postgresql\\+asyncpg'") as caught:
        Ledger.open("postgresql+asyncpg://user:secret@localhost/ratchet")
    assert "secret" not in str(caught.value)


def test_in_memory_ledger_works() -> None:
    with Ledger.open("sqlite://") as ledger:
        ledger.append_many(factories.one_of_each())
        assert ledger.count() == 6
        assert ledger.verify().ok
