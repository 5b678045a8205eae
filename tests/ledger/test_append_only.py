"""The database itself refuses UPDATE, DELETE and overwriting INSERT on every ledger table."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import Table, delete, update

from ledger import AppendOnlyViolation, Ledger
from ledger.db import make_engine
from ledger.models import all_tables
from tests.ledger import factories

TABLES = sorted(target.name for target in all_tables())


def test_every_table_is_covered() -> None:
    assert TABLES == [
        "candidates",
        "entries",
        "events",
        "fingerprints",
        "measurements",
        "messages",
        "schema_info",
        "verdicts",
    ]


@pytest.fixture
def filled(ledger: Ledger) -> Ledger:
    """A ledger holding one row in every table."""
    ledger.append_many(factories.one_of_each())
    return ledger


@pytest.mark.parametrize("name", TABLES)
def test_raw_sqlite_update_and_delete_are_refused(
    filled: Ledger, raw: sqlite3.Connection, name: str
) -> None:
    column = "id" if name == "schema_info" else "seq"
    rows_before = raw.execute(f"SELECT * FROM {name} ORDER BY {column}").fetchall()
    assert rows_before
    with pytest.raises(sqlite3.IntegrityError, match=f"append-only: UPDATE on {name} refused"):
        raw.execute(f"UPDATE {name} SET {column} = {column} + 100")
    with pytest.raises(sqlite3.IntegrityError, match=f"append-only: DELETE on {name} refused"):
        raw.execute(f"DELETE FROM {name}")
    assert raw.execute(f"SELECT * FROM {name} ORDER BY {column}").fetchall() == rows_before


@pytest.mark.parametrize("target", all_tables(), ids=lambda target: target.name)
def test_sqlalchemy_update_and_delete_raise_append_only_violation(
    filled: Ledger, ledger_path: Path, target: Table
) -> None:
    engine = make_engine(f"sqlite:///{ledger_path}")
    try:
        first = next(iter(target.primary_key.columns))
        with engine.connect() as connection:
            with pytest.raises(AppendOnlyViolation, match="append-only"):
                connection.execute(update(target).values({first.name: first + 100}))
            connection.rollback()
            with pytest.raises(AppendOnlyViolation, match="append-only"):
                connection.execute(delete(target))
    finally:
        engine.dispose()
    assert filled.verify().ok


def test_insert_or_replace_cannot_overwrite(filled: Ledger, raw: sqlite3.Connection) -> None:
    with pytest.raises(sqlite3.IntegrityError, match="append-only: INSERT over an existing row"):
        raw.execute(
            "INSERT OR REPLACE INTO entries (seq, kind, payload_json, prev_hash, hash, created_at)"
            " SELECT seq, kind, '{}', prev_hash, hash, created_at FROM entries WHERE seq = 1"
        )
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute(
            "INSERT OR REPLACE INTO candidates (seq, sha, parent_sha, tree_sha, step, idea_id, "
            "agent) SELECT 99, sha, parent_sha, tree_sha, step, idea_id, 'evil' FROM candidates"
        )
    assert filled.verify().ok
