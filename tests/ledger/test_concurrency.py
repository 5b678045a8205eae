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
