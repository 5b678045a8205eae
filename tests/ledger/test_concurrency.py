"""Several processes appending to one ledger file at once keep one valid chain."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

from ledger import EntryKind, EventRecord, Ledger

WRITERS = 3
EVENTS_PER_WRITER = 40


def append_events(path: str, writer: int, start: Any) -> None:
    """Child process: open the ledger, wait for the others, append events one by one."""
    with Ledger.open_path(Path(path)) as ledger:
        start.wait(timeout=60)
        for n in range(EVENTS_PER_WRITER):
            ledger.append(EventRecord(kind=f"writer-{writer}", payload={"n": n}))


def test_concurrent_appends_from_processes_keep_the_chain_valid(ledger_path: Path) -> None:
    # spawn, not fork: each child builds its own engine and SQLite connections from scratch,
    # exactly like a separate CLI process, and nothing is inherited from the test process.
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(WRITERS)
    workers = [
        context.Process(target=append_events, args=(str(ledger_path), writer, start))
        for writer in range(WRITERS)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0] * WRITERS

    total = WRITERS * EVENTS_PER_WRITER
    with Ledger.open_path(ledger_path, create=False) as ledger:
        assert ledger.count() == total
        assert ledger.count(EntryKind.EVENT) == total
        assert [entry.seq for entry in ledger.entries()] == list(range(1, total + 1))
        for writer in range(WRITERS):
            mine = ledger.events(kind=f"writer-{writer}")
            assert [event.record.payload["n"] for event in mine] == list(range(EVENTS_PER_WRITER))
        report = ledger.verify()
        assert report.ok, report.problem
        assert report.entries_checked == total


def test_the_wal_switch_waits_for_a_process_creating_the_ledger(tmp_path: Path) -> None:
    """A second process opening a ledger another is creating (the file still in rollback mode,
    its lock held) got "database is locked" at once from the WAL pragma, busy handler or
    not; the switch now waits for the lock."""
    import sqlite3
    import threading
    import time

    from ledger.db import _switch_to_wal

    path = tmp_path / "fresh.sqlite"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("CREATE TABLE t (x)")
    opener = sqlite3.connect(path, isolation_level=None, timeout=0.05)
    try:
        # The check can fail: a bare pragma does not wait.
        try:
            opener.execute("PRAGMA journal_mode = WAL")
            raise AssertionError("the WAL pragma went through a held exclusive lock")
        except sqlite3.OperationalError as exc:
            assert "locked" in str(exc)
        release = threading.Timer(0.3, lambda: holder.execute("COMMIT"))
        release.start()
        started = time.monotonic()
        _switch_to_wal(opener.cursor())
        assert time.monotonic() - started >= 0.25
        assert opener.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        release.join()
    finally:
        opener.close()
        holder.close()
