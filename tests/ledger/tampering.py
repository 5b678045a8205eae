"""What an attacker with write access to ledger.sqlite (and nothing else) can do to it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from ledger import canonical_json, entry_hash

Statement = tuple[str, tuple[Any, ...]]


def behind_the_triggers(path: Path, statements: list[Statement]) -> None:
    """Drop every append-only trigger, run the statements, then restore the triggers exactly,
    so that the ledger's own trigger check sees nothing."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        triggers = connection.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"
        ).fetchall()
        connection.execute("BEGIN")
        for name, _ in triggers:
            connection.execute(f"DROP TRIGGER {name}")
        for sql, params in statements:
            connection.execute(sql, params)
        for _, sql in triggers:
            connection.execute(sql)
        connection.execute("COMMIT")
    finally:
        connection.close()


def delete_last(path: Path, count: int) -> None:
    """Delete the last `count` entries and their index rows (the chain stays consistent)."""
    connection = sqlite3.connect(path)
    try:
        (head,) = connection.execute("SELECT max(seq) FROM entries").fetchone()
        tables = [
            row[0]
            for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN "
                "('entries', 'schema_info', 'ratchet_alembic_version')"
            )
        ]
    finally:
        connection.close()
    first = head - count + 1
    statements: list[Statement] = [
        (f"DELETE FROM {table} WHERE seq >= ?", (first,)) for table in tables
    ]
    statements.append(("DELETE FROM entries WHERE seq >= ?", (first,)))
    behind_the_triggers(path, statements)


def rewrite_and_rehash(path: Path, seq: int, change: dict[str, Any]) -> None:
    """Change the payload of entry `seq` (fields that are not index columns) and recompute its
    hash and every later prev_hash/hash, so that the chain agrees with itself again."""
    connection = sqlite3.connect(path)
    try:
        rows = connection.execute(
            "SELECT seq, kind, payload_json, prev_hash, created_at FROM entries WHERE seq >= ? "
            "ORDER BY seq",
            (seq,),
        ).fetchall()
    finally:
        connection.close()
    statements: list[Statement] = []
    prev_hash = rows[0][3]
    for row_seq, kind, payload_json, _, created_at in rows:
        if row_seq == seq:
            payload_json = canonical_json(json.loads(payload_json) | change)
        new_hash = entry_hash(prev_hash, row_seq, kind, created_at, payload_json)
        statements.append(
            (
                "UPDATE entries SET payload_json = ?, prev_hash = ?, hash = ? WHERE seq = ?",
                (payload_json, prev_hash, new_hash, row_seq),
            )
        )
        prev_hash = new_hash
    behind_the_triggers(path, statements)


def edit_in_place(path: Path, seq: int, change: dict[str, Any]) -> None:
    """Change the payload of entry `seq` and recompute nothing (the chain breaks there)."""
    connection = sqlite3.connect(path)
    try:
        (payload_json,) = connection.execute(
            "SELECT payload_json FROM entries WHERE seq = ?", (seq,)
        ).fetchone()
    finally:
        connection.close()
    forged = canonical_json(json.loads(payload_json) | change)
    update = "UPDATE entries SET payload_json = ? WHERE seq = ?"
    behind_the_triggers(path, [(update, (forged, seq))])


def corrupt_page(path: Path, page: int, page_size: int = 4096) -> None:
    """Overwrite one whole page of the database file with garbage (the WAL checkpointed first,
    so that the page really is in the main file)."""
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()
    with path.open("r+b") as handle:
        handle.seek(page_size * page)
        handle.write(bytes((index * 37 + 11) % 251 for index in range(page_size)))


def middle_page_of(path: Path, table: str) -> int:
    """A page in the middle of a table's leaf pages (the middle of the file without dbstat)."""
    connection = sqlite3.connect(path)
    try:
        try:
            pages = [
                row[0]
                for row in connection.execute(
                    "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' "
                    "ORDER BY pageno",
                    (table,),
                )
            ]
        except sqlite3.OperationalError:  # SQLite built without the dbstat table
            (count,) = connection.execute("PRAGMA page_count").fetchone()
            pages = [count // 2 + 1]
    finally:
        connection.close()
    # dbstat numbers pages from 1; corrupt_page takes the 0-based page index in the file.
    return pages[len(pages) // 2] - 1
