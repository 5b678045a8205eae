"""PostgreSQL's pipelined append: two round trips, the same duplicate errors as SQLite, and
connections the server dropped replaced (in the pool) or reported (mid-append)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import pq

import ledger.pg_append
from ledger import JournalPolicy, Ledger, LedgerError, LedgerUnavailableError, Record
from tests.ledger import factories
from tests.ledger.postgres_server import PostgresServer
from tests.ledger.test_postgres import assert_clean

# Each case: batches appended first, then the batch whose outcome both backends must share.
DUPLICATES: dict[str, tuple[list[list[Record]], list[Record]]] = {
    "stored candidate": ([[factories.candidate("a")]], [factories.candidate("a", step=7)]),
    "stored measurement, later in the batch": (
        [[factories.measurement("a", "c0")]],
        [factories.event(), factories.measurement("a", "c1"), factories.measurement("a", "c0")],
    ),
    "repeated within the batch": (
        [[factories.event()]],
        [factories.candidate("a"), factories.verdict("a"), factories.candidate("a")],
    ),
    # The first copy is the duplicate (of seq 1), not the second one (of the first).
    "stored, and repeated within the batch": (
        [[factories.candidate("a")]],
        [factories.candidate("a"), factories.candidate("a")],
    ),
    "stored fingerprint reused, then a stored measurement": (
        [[factories.fingerprint(), factories.measurement("a")]],
        [factories.fingerprint(), factories.event(), factories.measurement("a")],
    ),
    "fingerprints reused and repeated": (
        [[factories.fingerprint()]],
        [
            factories.fingerprint(),
            factories.fingerprint("L4"),
            factories.candidate("b"),
            factories.fingerprint("L4"),
            factories.fingerprint(),
        ],
    ),
}


def outcome(ledger: Ledger, setup: list[list[Record]], batch: list[Record]) -> tuple[Any, ...]:
    """What appending batch after setup returns or raises, and the chain after it."""
    for records in setup:
        ledger.append_many(records)
    try:
        result: object = ledger.append_many(batch)
    except LedgerError as exc:
        result = (type(exc).__name__, str(exc))
    entries = [(entry.seq, entry.kind, entry.payload) for entry in ledger.entries()]
    assert ledger.verify().ok
    return result, entries


@pytest.mark.parametrize("case", sorted(DUPLICATES))
def test_duplicates_are_handled_exactly_as_on_sqlite(
    case: str, pg_ledger: Ledger, ledger: Ledger
) -> None:
    setup, batch = DUPLICATES[case]
    assert outcome(pg_ledger, setup, batch) == outcome(ledger, setup, batch)


@contextmanager
def protocol_trace(ledger: Ledger, path: Path) -> Iterator[None]:
    """libpq's trace of the messages the ledger's (single, pooled) connection exchanges."""
    with ledger._require_engine().connect() as connection:
        driver = connection.connection.driver_connection
        assert isinstance(driver, psycopg.Connection)
        pgconn = driver.pgconn
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        pgconn.trace(fd)
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            yield
        finally:
            pgconn.untrace()
    finally:
        os.close(fd)


def test_an_append_is_two_round_trips(pg_url: str, tmp_path: Path) -> None:
    trace = tmp_path / "trace.txt"
    with Ledger.open(pg_url, journal=tmp_path / "ledger.heads") as opened:
        opened.append(factories.fingerprint())
        events: list[list[Record]] = [[factories.event(n=n)] for n in range(7)]
        batches: list[list[Record]] = [
            [factories.candidate("a")],
            [factories.measurement("a", "c0")],
            [factories.fingerprint(), factories.measurement("a", "c1"), factories.event()],
            *events,  # past psycopg's prepare threshold: statements prepared on the server
        ]
        with protocol_trace(opened, trace):
            for records in batches:
                opened.append_many(records)
        assert opened.verify().ok
    sent = [line.split("\t") for line in trace.read_text().splitlines() if line.startswith("F")]
    kinds = [fields[2] for fields in sent]
    # One Sync per round trip: lock and head (and stored fingerprints), then inserts and
    # COMMIT. No pre-ping (a simple Query), no lookups of candidate or measurement keys.
    assert kinds.count("Sync") == 2 * len(batches)
    assert "Query" not in kinds
    statements = [fields[3] for fields in sent if fields[2] == "Parse"]
    assert any("INSERT INTO measurements" in statement for statement in statements)
    assert not any(" FROM candidates" in s or " FROM measurements" in s for s in statements)


def terminate(server: PostgresServer, database: str, pid: int | None = None) -> None:
    """End the ledger's server processes (all but ours, or one), waiting until they are gone."""
    which = f"pid = {pid}" if pid is not None else "pid <> pg_backend_pid()"
    server.admin(
        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
        f"WHERE datname = '{database}' AND {which}"
    )


def test_connections_the_server_dropped_in_the_pool_are_replaced(
    postgres_server: PostgresServer,
    pg_database: str,
    pg_ledger: Ledger,
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert pg_ledger.append(factories.event(n=1)) == 1
    terminate(postgres_server, pg_database)  # as a server restart does
    assert pg_ledger.append(factories.event(n=2)) == 2
    reads: list[tuple[Callable[[], Any], Callable[[Any], bool]]] = [
        (pg_ledger.head, lambda head: head[0] == 2),
        (pg_ledger.count, lambda count: count == 2),
        (pg_ledger.events, lambda events: len(events) == 2),
        (pg_ledger.verify, lambda report: report.ok),
    ]
    for read, expected in reads:
        terminate(postgres_server, pg_database)
        assert expected(read())
    assert pg_ledger.append_many([factories.event(n=3), factories.candidate("a")]) == [3, 4]
    assert pg_ledger.verify().ok
    # Quietly: no warning from psycopg for a pipeline ended on a dead connection.
    assert [record.getMessage() for record in caplog.records if record.levelno >= 30] == []


def killing_before(
    server: PostgresServer, database: str, step: Callable[..., Any], calls: list[int]
) -> Callable[..., Any]:
    """step, after the server ended the append's connection (each call counted)."""

    def killed(driver: psycopg.Connection[Any], *args: Any) -> Any:
        calls.append(driver.info.backend_pid)
        terminate(server, database, driver.info.backend_pid)
        return step(driver, *args)

    return killed


def test_a_connection_lost_before_the_commit_is_reported_and_writes_nothing(
    postgres_server: PostgresServer, pg_database: str, pg_url: str, tmp_path: Path
) -> None:
    journal = tmp_path / "ledger.heads"
    with Ledger.open(pg_url, journal=journal) as opened:
        opened.append(factories.event(n=1))
        journal_before = journal.read_bytes()
        calls: list[int] = []
        write = killing_before(
            postgres_server, pg_database, ledger.pg_append._write_and_commit, calls
        )
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(ledger.pg_append, "_write_and_commit", write)
            with pytest.raises(LedgerUnavailableError, match="lost the connection") as caught:
                opened.append(factories.event(n=2))
        assert_clean(str(caught.value), "start the server")
        assert len(calls) == 1  # the writes may have reached the server: never sent twice
        assert journal.read_bytes() == journal_before
        assert opened.count() == 1
        assert opened.append(factories.event(n=3)) == 2
        assert opened.verify().ok


def test_a_new_connection_lost_is_reported_not_retried(
    postgres_server: PostgresServer, pg_database: str, pg_url: str
) -> None:
    with Ledger.open(pg_url, journal=JournalPolicy.OFF) as opened:
        opened.append(factories.event(n=1))
        calls: list[int] = []
        read = killing_before(postgres_server, pg_database, ledger.pg_append._lock_and_read, calls)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(ledger.pg_append, "_lock_and_read", read)
            with pytest.raises(LedgerUnavailableError, match="lost the connection") as caught:
                opened.append(factories.event(n=2))
        assert_clean(str(caught.value), "start the server")
        # The pooled connection is replaced once; the new one failing too is the server's doing.
        assert len(calls) == 2 and calls[0] != calls[1]
        assert opened.append(factories.event(n=3)) == 2
        assert opened.verify().ok
